// SPDX-License-Identifier: Apache-2.0
#pragma once
// Symbol versioning: libibverbs exports ibv_modify_qp twice (@IBVERBS_1.0 and
// the default @@IBVERBS_1.1) at different addresses. libbpf 1.1 refuses such a
// name as ambiguous, so the probe attaches at the default version's offset.
#include <cstdint>
#include <optional>
#include <string>

namespace causeway::attach {

// File offset of the default-version definition of `symbol` in .dynsym (the
// one whose .gnu.version entry is not hidden); nullopt if absent.
std::optional<uint64_t> default_version_offset(const std::string& path, const std::string& symbol);

}  // namespace causeway::attach
