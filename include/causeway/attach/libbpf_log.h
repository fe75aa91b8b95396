// SPDX-License-Identifier: Apache-2.0
#pragma once
// libbpf writes to stderr by default. causeway routes it to its own log:
// libbpf's warnings and info at debug level (`causeway -v`), its debug
// chatter (the verifier log) at trace level. Installed once per process,
// before anything loads BPF.

namespace causeway::attach {

void route_libbpf_log();

}  // namespace causeway::attach
