// SPDX-License-Identifier: Apache-2.0
#pragma once
// A process's memory limit, from its cgroup, and what reclaim under it cost
// (model/cgroup_memory.h): cgroup v2's memory.max and memory.high (the
// tightest on the way to the root: a pod's limit sits above its
// containers'), memory.current, memory.stat, memory.events and
// memory.pressure; or v1's memory controller (memory.stat's
// hierarchical_memory_limit, memory.usage_in_bytes, memory.failcnt) with
// PSI from the process's v2 cgroup where a v2 hierarchy is mounted beside it.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "causeway/discover/cgroup_cpu.h"
#include "causeway/model/cgroup_memory.h"

namespace causeway::discover {

// "key value" lines (memory.stat, memory.events). A line that is not a key
// and an integer is an error naming it: these files are the kernel's, and a
// line we cannot read means a format we do not know.
std::map<std::string, int64_t> parse_key_values(std::string_view text);

// memory.pressure (and /proc/pressure/memory): the "total=" microseconds of
// its "some" and "full" lines.
struct PressureTotals {
  std::optional<int64_t> some_us, full_us;
};
PressureTotals parse_pressure(std::string_view text);

// A limit file's value: "max" (v2) and v1's page-rounded LONG_MAX are no
// limit (nullopt); anything else not a number is an error naming it.
std::optional<int64_t> parse_memory_limit(std::string_view text);

// nullopt when the process is gone, has no cgroup, or nothing of its
// cgroup's memory controller can be read: never an error (a cgroup can
// vanish between two reads). A hybrid host's v2 hierarchy (PSI beside a v1
// memory controller) is cgroup_root/unified.
std::optional<model::CgroupMemorySample> read_cgroup_memory(uint32_t pid, const std::string& proc_root = "/proc",
                                                            const std::string& cgroup_root = "/sys/fs/cgroup");

// The same, from where the process was (its /proc/PID/cgroup, read while it
// lived): the cgroup outlives a process that has exited, and its counters
// then are the last word on what the limit cost it. The sample's pid is 0.
std::optional<model::CgroupMemorySample> read_cgroup_memory_in(const ProcCgroup& where,
                                                               const std::string& cgroup_root = "/sys/fs/cgroup");

}  // namespace causeway::discover
