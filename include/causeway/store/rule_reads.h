// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads of explain's rules, grouped by rule, those of its TEMP tables
// (explain_tables.h creates them: baseline, slow, firsts, gpu_slots) among
// them. A function returning SQL returns a SELECT of stack ids, which
// analyze's frame lookup takes as text. Reads that join intervals to the
// calls they overlap take the longest interval of the table in the window,
// which bounds the join's ts_ns index scan (overlap.h).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// allocator_churn: device allocations and frees (OpClass::Alloc, ::Free).
struct AllocFreeCounts {
  uint32_t pid = 0;
  int64_t allocs = 0, frees = 0;  // successful calls only
  int64_t ok_ns = 0;              // time in the successful ones
  int64_t failed = 0;
};
// Per process in the window, by pid.
std::vector<AllocFreeCounts> alloc_free_counts(Connection& db, const Window& w);
// The alloc or free op the process's successful calls spent the most time
// in; none without such calls.
std::optional<int64_t> costliest_alloc_free_op(Connection& db, const Window& w, uint32_t pid);
// The bytes its successful allocations asked for.
int64_t allocated_bytes(Connection& db, const Window& w, uint32_t pid);
// The process's synchronising calls (OpClass::Sync) in [from_ns, to_ns),
// any session: the steps between bursts.
int64_t sync_calls_between(Connection& db, uint32_t pid, int64_t from_ns, int64_t to_ns);
struct CallTime {
  int64_t ts_ns = 0, dur_ns = 0;
};
// The process's slow allocs and frees, in time order.
std::vector<CallTime> slow_alloc_free_calls(Connection& db, uint32_t pid);
// The stacks of the process's slow calls of class `cls` (Alloc or Free),
// else, when none was slow, of all its calls of it in the window.
std::string alloc_free_stack_sql(const Window& w, uint32_t pid, OpClass cls);

// memcpy_bound: copies (OpClass::Copy).
struct ProcessCopyTotal {
  uint32_t pid = 0;
  int64_t total_ns = 0;  // off-CPU time inside the copies included
};
// Each process's time in copies, from its baselines.
std::vector<ProcessCopyTotal> baseline_copy_totals(Connection& db);
// The copy op the process spent the most time in, by its baselines; none
// without copies.
std::optional<int64_t> costliest_copy_op(Connection& db, uint32_t pid);
struct WorkStart {
  uint32_t pid = 0;
  int64_t from_ns = 0;  // where its work begins: copies before it are start-up
};
struct ProcessCopyTime {
  uint32_t pid = 0;
  int64_t on_cpu_ns = 0;
};
// The copy time of each process in `starts` from its work start on, less the
// off-CPU time of its thread inside the copies, read-backs left out; most
// first. `longest_offcpu_ns`: the longest off-CPU interval in the window,
// which bounds the overlap join's ts_ns index scan.
std::vector<ProcessCopyTime> copy_time_on_cpu(Connection& db, const Window& w,
                                              const std::vector<WorkStart>& starts,
                                              int64_t longest_offcpu_ns);
struct CopyKindTotal {
  int64_t kind = 0;  // CopyKind; Default (4) when the row has none
  int64_t copies = 0, bytes = 0, total_ns = 0;
  int64_t sync_calls = 0;  // synchronous copy ops among them
};
// A process's copies in the window by direction, most time first.
std::vector<CopyKindTotal> process_copies_by_kind(Connection& db, const Window& w, uint32_t pid);
// The stack of the process's calls of one op in the window that took the
// most time in all.
std::string costliest_stack_sql(const Window& w, uint32_t pid, int64_t op_id);

// tcp_retransmit: copies the window's TCP retransmits into
// temp.rtx(ts_ns, daddr, dport, saddr, session_id), dropping an earlier
// copy, indexed on ts_ns when any; returns how many. The rule matches them
// to slow calls there.
int64_t stage_retransmits(Connection& db, const Window& w);
struct SlowWithRetransmit {
  int64_t calls = 0;
  int64_t excess_ns = 0;  // sum(dur - p50)
};
// The process's slow calls with a retransmit of their session inside them.
SlowWithRetransmit slow_calls_with_retransmit(Connection& db, uint32_t pid);
// The op of those with the most excess; none without them.
std::optional<int64_t> retransmit_slowest_op(Connection& db, uint32_t pid);
// The stacks of those calls.
std::string retransmit_stack_sql(uint32_t pid);
struct RetransmitDestination {
  std::string daddr;
  int64_t dport = 0, retransmits = 0;
};
// The destinations of the retransmits in the sessions of the process's slow
// calls, most first, at most `limit`.
std::vector<RetransmitDestination> retransmit_destinations(Connection& db, uint32_t pid, int limit);

// data_loss: records lost, per drop source with any, shed rows and
// unrecorded first tensors left out (planned, their counts exact).
struct LostRecords {
  std::string source;
  int64_t count = 0;
};
std::vector<LostRecords> lost_records_by_source(Connection& db);
// The rows kept: CUDA and NCCL calls and off-CPU intervals, whole file.
int64_t kept_call_and_offcpu_rows(Connection& db);

// memory_pressure: direct reclaims in the window.
int64_t reclaims_in(Connection& db, const Window& w);
struct SlowReclaims {
  int64_t ns = 0;  // each clipped to its call
  int64_t reclaims = 0, pages = 0;
};
// The direct reclaims of the process's slow calls' threads inside them.
SlowReclaims slow_call_reclaims(Connection& db, uint32_t pid, int64_t longest_reclaim_ns);

// cold_start: the stack of the process's first call of one op in the window.
std::string first_call_stack_sql(const Window& w, uint32_t pid, int64_t op_id);
struct ColdCall {
  uint32_t pid = 0;
  int64_t op_id = 0, kernel_id = 0;  // kernel_id -1: none
  int64_t dur_ns = 0, p50 = 0;
  std::optional<int64_t> stack_id;
};
// First calls (firsts) at least `factor` x their baseline's p50 and
// `min_excess_ns` above it, of baselines of two calls or more.
std::vector<ColdCall> cold_first_calls(Connection& db, int factor, int64_t min_excess_ns);

// io_stall: the process's slow calls' threads in disk wait (disk_wait_sql
// of path_reads.h, `driver_syscall` excepted) inside the calls.
struct SlowDiskWaits {
  int64_t ns = 0;  // each clipped to its call
  int64_t waits = 0;
};
SlowDiskWaits slow_call_disk_waits(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                   int64_t driver_syscall);
// The process's block I/O requests (any thread) overlapping its slow calls.
struct SlowCallIo {
  int64_t requests = 0, bytes = 0, max_ns = 0;
  double mean_ns = 0;
  std::string devices;  // comma-separated
};
SlowCallIo slow_call_io(Connection& db, uint32_t pid, int64_t longest_io_ns);

// cpu_contention: the process's slow calls' threads runnable but preempted
// inside the calls by another workload: not the idle task (pid 0), the
// process itself or its own workers (own_workers_sql, path_rule_reads.h).
struct Preemptions {
  int64_t ns = 0;  // each clipped to its call
  int64_t preemptions = 0;
};
Preemptions slow_call_preemptions(Connection& db, uint32_t pid, int64_t longest_offcpu_ns);
// Who ran instead, most time first, at most `limit`.
struct Preemptor {
  std::string comm;  // "?" when unknown
  int64_t pid = 0;   // 0 when unknown
  int64_t ns = 0, preemptions = 0;
};
std::vector<Preemptor> slow_call_preemptors(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                            int limit);
// On which CPUs, most preemptions first, at most `limit`.
struct CpuPreemptions {
  int64_t cpu = 0, preemptions = 0;
};
std::vector<CpuPreemptions> slow_call_preemption_cpus(Connection& db, uint32_t pid, int64_t longest_offcpu_ns,
                                                      int limit);

// io_stall, cpu_contention, memory_pressure: the stacks of the process's
// slow calls of one op.
std::string slow_calls_stack_sql(uint32_t pid, int64_t op_id);

}  // namespace causeway::store
