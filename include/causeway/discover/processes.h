// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/store/records.h"

namespace causeway::discover {
// comm, cmdline, cgroup, ppid of a live process; nullopt when it is gone.
std::optional<store::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root = "/proc");
}  // namespace causeway::discover
