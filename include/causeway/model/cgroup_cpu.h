// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CPU limit of each traced process's cgroup and its throttling counters
// (cgroup v2 cpu.max and cpu.stat; v1 cpu.cfs_quota_us, cpu.cfs_period_us and
// cpu.stat), read by the agent at start, every second and at the end
// (discover/cgroup_cpu.h). A pod's CPU limit is a quota per period: a job
// that wants more is throttled, its threads runnable while the CPUs idle.
#include <optional>
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct CgroupCpuSample {
  int64_t ts_ns = 0;
  uint32_t pid = 0;                 // a traced process in it
  std::string cgroup;               // the cgroup that sets the limit (its own, or an ancestor's)
  int version = 2;                  // 1 or 2
  std::optional<int64_t> quota_us;  // none: no limit
  int64_t period_us = 0;
  int64_t nr_periods = 0, nr_throttled = 0;
  int64_t throttled_us = 0;
};

struct CgroupCpuSamples {
  using Row = CgroupCpuSample;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "a traced process in that cgroup", field<&Row::pid>},
      {"cgroup", SqlType::Text, true,
       "the cgroup whose limit applies (the process's own, or the tightest of its ancestors), as /proc/PID/cgroup "
       "names it",
       field<&Row::cgroup>},
      {"version", SqlType::Integer, true, "cgroup version: 1 or 2", field<&Row::version>},
      {"quota_us", SqlType::Integer, false, "CPU time allowed per period (NULL: no limit)", field<&Row::quota_us>},
      {"period_us", SqlType::Integer, true, "the period, in microseconds", field<&Row::period_us>},
      {"nr_periods", SqlType::Integer, true, "periods with runnable tasks (cumulative)", field<&Row::nr_periods>},
      {"nr_throttled", SqlType::Integer, true, "periods in which it was throttled (cumulative)",
       field<&Row::nr_throttled>},
      {"throttled_us", SqlType::Integer, true, "time throttled, in microseconds (cumulative)",
       field<&Row::throttled_us>},
  };
  static constexpr Table<Row> kTable{"cgroup_cpu",
                                     "CPU limits and throttling counters of the traced processes' cgroups, read "
                                     "at start, every second and at the end.",
                                     TableKind::Samples, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(CgroupCpuSamples);
