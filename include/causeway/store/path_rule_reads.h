// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the critical-path rules (src/analyze/rules/path_rules.cpp) read
// beside the path itself, over a process's judged time [from, to) in one
// session: its cgroup's memory and CPU limits, the CPUs it may use, its
// threads' time off the CPU, its disk I/O, pins, an autotuner's calls.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"

namespace causeway::store {

// The SELECT of a process's own workers: its children that woke its threads
// more than once (DataLoader workers handing over batches). A child that
// never did, or only at its exit (a forked neighbour burning CPUs), is
// another workload. session < 0: over every session.
std::string own_workers_sql(uint32_t pid, int64_t session = -1);
std::set<uint32_t> own_workers(Connection& db, uint32_t pid, int64_t session = -1);

// One reading of a process's cgroup memory counters where a limit was set.
struct CgroupMemoryReading {
  int64_t ts_ns = 0;
  std::string cgroup;
  int64_t version = 0;
  std::optional<int64_t> limit, high;
  int64_t refaults = 0, hits = 0;
  std::optional<int64_t> scanned, stolen, stall_us;
};
// The latest reading at or before `ts_ns` (none: the first there is), and the
// first at or after `ts_ns` (none: the last there is).
std::optional<CgroupMemoryReading> cgroup_memory_at_or_before(Connection& db, int64_t session, uint32_t pid,
                                                              int64_t ts_ns);
std::optional<CgroupMemoryReading> cgroup_memory_at_or_after(Connection& db, int64_t session, uint32_t pid,
                                                             int64_t ts_ns);

// Bytes the process read from block devices in [from, to).
int64_t block_bytes_read(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);

// The CPUs it may use as read last at or before `at_ns` (else the first after).
struct AllowedCpus {
  int64_t cpus = 0;
  std::string cpu_list;
};
std::optional<AllowedCpus> allowed_cpus(Connection& db, int64_t session, uint32_t pid, int64_t at_ns);
// Its cgroup's latest CPU quota (cpu.max).
struct CpuQuota {
  int64_t quota_us = 0, period_us = 0;
};
std::optional<CpuQuota> cpu_quota(Connection& db, int64_t session, uint32_t pid);

// The first and last reading of the CPU counters of its and its workers'
// cgroup, with a quota.
struct CgroupCpuReading {
  std::string cgroup;
  int64_t version = 0, quota_us = 0, period_us = 0, periods = 0, throttled = 0, throttled_us = 0;
};
std::optional<CgroupCpuReading> cgroup_cpu_first(Connection& db, int64_t session, uint32_t pid);
std::optional<CgroupCpuReading> cgroup_cpu_last(Connection& db, int64_t session, uint32_t pid);

// Each thread's off-CPU intervals in [from, to), by tid.
struct ThreadOffCpu {
  uint32_t tid = 0;
  int64_t first_ns = 0, last_end_ns = 0;
  int64_t asleep_ns = 0;  // asleep, less the wake-ups' waits for a CPU
  int64_t preemptions = 0, sleeps = 0, runq_ns = 0;
};
std::vector<ThreadOffCpu> thread_offcpu(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);
// The SELECT of the stacks a thread went to sleep in, in [from, to).
std::string sleep_stack_ids_sql(int64_t session, uint32_t tid, int64_t from, int64_t to);

// A stack's Python frames, innermost first.
struct PyFrame {
  std::string func, file;
  int64_t line = 0;
};
std::vector<PyFrame> python_frames(Connection& db, int64_t stack_id);

// Block writes and flushes of the process in [from, to).
struct BlockIo {
  int64_t requests = 0, bytes = 0, max_ns = 0;
  double mean_ns = 0;
  std::string devices;  // reads only: the devices, comma-separated
};
BlockIo block_writes(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);
// Block reads of the process and its own workers in [from, to).
BlockIo block_reads_with_workers(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);

// Calls of these ops (ids) in [from, to): how many, and the bytes of those
// that succeeded.
struct CallsAndBytes {
  int64_t calls = 0, bytes = 0;
};
CallsAndBytes calls_and_bytes(Connection& db, int64_t session, uint32_t pid, const std::vector<int64_t>& op_ids,
                              int64_t from, int64_t to);

// Which tuners' frames the stacks hold.
struct TunerFrames {
  bool cudnn = false, timed = false, triton = false, inductor = false;
};
TunerFrames tuner_frames(Connection& db, const std::set<int64_t>& stack_ids);
// The calls with these stacks in [from, to), oldest first: (ts_ns, op_id).
std::vector<std::pair<int64_t, int64_t>> calls_with_stacks(Connection& db, int64_t session, uint32_t pid,
                                                           const std::set<int64_t>& stack_ids, int64_t from,
                                                           int64_t to);
// Launches counted in the kernel in [from, to).
int64_t counted_launches(Connection& db, int64_t session, uint32_t pid, int64_t from, int64_t to);

}  // namespace causeway::store
