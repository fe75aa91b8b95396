// SPDX-License-Identifier: Apache-2.0
#pragma once
// The CPUs each traced process may run on and how many threads it has
// (/proc/PID/status: Cpus_allowed_list, which the affinity mask and the
// cpuset both narrow, and Threads), read by the agent at start, every second
// and at the end (discover/process_cpus.h). Beside cgroup_cpu's quota, what
// explain weighs a process's runnable threads against: 16 threads of one
// process on 2 CPUs wait for each other, not for a neighbour.
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

struct ProcessCpus {
  int64_t ts_ns = 0;
  uint32_t pid = 0;
  int cpus = 0;           // CPUs in its affinity mask
  std::string cpu_list;   // as Cpus_allowed_list says them ("0-1", "0,2-3")
  int online_cpus = 0;    // of the host
  int threads = 0;        // its threads now
};

struct ProcessCpusSamples {
  using Row = ProcessCpus;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "when it was read", field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "a traced process", field<&Row::pid>},
      {"cpus", SqlType::Integer, true, "CPUs it may run on (its affinity mask, within its cpuset)", field<&Row::cpus>},
      {"cpu_list", SqlType::Text, true, "those CPUs, as /proc/PID/status Cpus_allowed_list says them",
       field<&Row::cpu_list>},
      {"online_cpus", SqlType::Integer, true, "CPUs online on the host", field<&Row::online_cpus>},
      {"threads", SqlType::Integer, true, "its threads when read", field<&Row::threads>},
  };
  static constexpr Table<Row> kTable{"process_cpus",
                                     "The CPUs each traced process may use and its thread count, read at start, "
                                     "when they change (every second) and at the end.",
                                     TableKind::Samples, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(ProcessCpusSamples);
