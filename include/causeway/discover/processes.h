// SPDX-License-Identifier: Apache-2.0
#pragma once
// Running processes: who maps a GPU library, and what a process is (comm,
// command line, cgroup, parent, start time) for the processes dictionary.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "causeway/discover/libraries.h"
#include "causeway/model/records.h"

namespace causeway::discover {

struct GpuProcess {
  uint32_t pid = 0;
  std::string comm;
  std::string cmdline;
  std::vector<LibraryFile> libraries;  // the GPU libraries it maps
};

// Every process under `proc_root` that maps at least one GPU library, by pid.
// Processes we may not read (other users' without root) are counted in
// `stats` and skipped.
std::vector<GpuProcess> list_gpu_processes(const std::string& proc_root = "/proc", DiscoverStats* stats = nullptr);

// comm, cmdline (arguments joined by spaces), cgroup (the v2 path, else the
// first hierarchy's), ppid and start time (wall-clock ns) of one process;
// nullopt when it is gone or unreadable. Fields that cannot be read stay empty.
std::optional<model::ProcessInfo> read_process_info(uint32_t pid, const std::string& proc_root = "/proc");

// A command line as the kernel keeps it (arguments separated by NULs) as
// one line: arguments joined by spaces.
std::string join_cmdline(std::string_view raw);

// The fields of /proc/PID/stat we use; the comm may hold spaces and ')'.
struct ProcStat {
  std::string comm;
  char state = '?';
  uint32_t ppid = 0;
  uint64_t start_ticks = 0;  // since boot, in clock ticks (USER_HZ)
};
std::optional<ProcStat> parse_proc_stat(const std::string& text);

}  // namespace causeway::discover
