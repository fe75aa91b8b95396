// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CPUs a process may run on and its thread count, from
// /proc/PID/status (model/process_cpus.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "causeway/model/process_cpus.h"

namespace causeway::discover {

// How many CPUs a list names ("0-3,8,10-11" is 7). An empty list is 0; a
// malformed one is an error naming it.
int count_cpu_list(std::string_view list);

// nullopt when the process is gone (its status unreadable).
std::optional<model::ProcessCpus> read_process_cpus(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace causeway::discover
