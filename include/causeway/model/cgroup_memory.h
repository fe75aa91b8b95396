// SPDX-License-Identifier: Apache-2.0
#pragma once
// The memory limit of each traced process's cgroup and what it cost: cgroup
// v2's memory.max / memory.high, memory.stat (pgscan, pgsteal,
// workingset_refault_file), memory.events (high, max, oom) and
// memory.pressure (PSI); v1's hierarchical_memory_limit, memory.stat's
// workingset_refault_file and memory.failcnt, with PSI from the process's
// cgroup of the v2 hierarchy where one is mounted beside (hybrid hosts).
// Read by the agent at start, every second and at the end
// (discover/cgroup_memory.h). A limit counts the page cache: a job that
// streams a file larger than the limit reclaims its own cache and reads the
// same pages from disk again (file refaults).
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct CgroupMemorySample {
  int64_t ts_ns = 0;
  uint32_t pid = 0;                    // a traced process in it
  std::string cgroup;                  // the cgroup whose limit applies (its own, or an ancestor's)
  int version = 2;                     // 1 or 2
  std::optional<int64_t> limit_bytes;  // memory.max (v1: hierarchical_memory_limit); none: no limit
  std::optional<int64_t> high_bytes;   // memory.high (v2); none: not set
  int64_t current_bytes = 0;           // memory.current (v1: memory.usage_in_bytes)
  int64_t file_bytes = 0;              // page cache charged to it (file; v1: cache)
  std::optional<int64_t> pgscan, pgsteal;  // v2 only (cumulative)
  int64_t refault_file = 0;            // workingset_refault_file (cumulative)
  int64_t limit_hits = 0;              // memory.events max + high (v1: memory.failcnt), cumulative
  std::optional<int64_t> psi_some_us, psi_full_us;  // memory.pressure totals (cumulative)
};

struct CgroupMemorySamples {
  using Row = CgroupMemorySample;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "a traced process in that cgroup", field<&Row::pid>},
      {"cgroup", SqlType::Text, true,
       "the cgroup whose limit applies (the process's own, or the tightest of its ancestors), as /proc/PID/cgroup "
       "names it",
       field<&Row::cgroup>},
      {"version", SqlType::Integer, true, "cgroup version of the memory controller: 1 or 2", field<&Row::version>},
      {"limit_bytes", SqlType::Integer, false,
       "memory.max (v1: memory.stat's hierarchical_memory_limit); NULL: no limit", field<&Row::limit_bytes>},
      {"high_bytes", SqlType::Integer, false, "memory.high (v2); NULL: not set", field<&Row::high_bytes>},
      {"current_bytes", SqlType::Integer, true, "memory charged to it now, page cache included (memory.current)",
       field<&Row::current_bytes>},
      {"file_bytes", SqlType::Integer, true, "of it, page cache (memory.stat file; v1: cache)", field<&Row::file_bytes>},
      {"pgscan", SqlType::Integer, false, "pages scanned by reclaim (memory.stat, v2; cumulative)", field<&Row::pgscan>},
      {"pgsteal", SqlType::Integer, false, "pages reclaimed (memory.stat, v2; cumulative)", field<&Row::pgsteal>},
      {"refault_file", SqlType::Integer, true,
       "file pages read again soon after reclaim evicted them (memory.stat workingset_refault_file; cumulative)",
       field<&Row::refault_file>},
      {"limit_hits", SqlType::Integer, true,
       "times it reached its limit: memory.events high + max (v1: memory.failcnt); cumulative", field<&Row::limit_hits>},
      {"psi_some_us", SqlType::Integer, false,
       "memory.pressure some total: time some of its tasks stalled on memory (reclaim, refaults), in "
       "microseconds (cumulative; NULL where no v2 cgroup of it is mounted)",
       field<&Row::psi_some_us>},
      {"psi_full_us", SqlType::Integer, false, "memory.pressure full total (cumulative)", field<&Row::psi_full_us>},
  };
  static constexpr Table<Row> kTable{"cgroup_memory",
                                     "Memory limits and reclaim counters of the traced processes' cgroups, read at "
                                     "start, every second and at the end.",
                                     TableKind::Samples, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(CgroupMemorySamples);
