// SPDX-License-Identifier: Apache-2.0
#pragma once
// A process's CPU limit, from its cgroup: cgroup v2's cpu.max and cpu.stat,
// or v1's cpu controller (cpu.cfs_quota_us, cpu.cfs_period_us, cpu.stat). A
// limit may be set on an ancestor (a pod's, above its containers'): the
// tightest on the way to the root applies, and its counters say how often it
// throttled.
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/model/cgroup_cpu.h"

namespace causeway::discover {

// Where /proc/PID/cgroup puts the process: its v2 path ("0::/path") and, for
// a v1 hierarchy holding `controller`, that path and the hierarchy's
// controller list ("cpu,cpuacct": the mount's name). nullopt: unreadable.
struct ProcCgroup {
  std::optional<std::string> v2, v1;
  std::string v1_controllers;
};
std::optional<ProcCgroup> read_proc_cgroup(uint32_t pid, const std::string& proc_root, const std::string& controller);

// nullopt when the process is gone, has no cgroup, or nothing of its
// cgroup's CPU controller can be read: never an error (a cgroup can vanish
// between two reads).
std::optional<model::CgroupCpuSample> read_cgroup_cpu(uint32_t pid, const std::string& proc_root = "/proc",
                                                      const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace causeway::discover
