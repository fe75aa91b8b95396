// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind the hung-call rules (analyze/rules/hung.cpp): the calls
// the agent saw in flight past `trace --hang-after` (stalled_calls), what
// their process did around them, and, for an NCCL communicator, each rank's
// latest collective and where a rank that never entered the next one sits.
// Op ids come as explicit lists (an empty list matches no op).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

struct StalledCall {
  int64_t session_id = 0, ts_ns = 0, waited_ns = 0, seen_ts_ns = 0;
  uint32_t pid = 0, tid = 0;
  int64_t op_id = 0, stack_id = -1;
  std::optional<int64_t> returned_after_ns;  // the call's own duration, when it returned
  bool at_stop = false;         // written only when the trace stopped (not judged hung while tracing)
  bool entered_before = false;  // found on its thread's stack when the trace attached
  std::optional<int64_t> seq;   // a collective's number, given by the probe at its entry
};
// The stalled calls that entered in the window (from and to set), one per
// call (one judged hung while tracing and still in flight at the stop has a
// row of each), by entry time. Columns a file's schema predates read as
// false and none.
std::vector<StalledCall> stalled_calls(Connection& db, const Window& w);

// Which of a process's threads a count covers.
enum class Threads { All, Only, Others };
// Calls (CUDA/HIP and NCCL) of a process that began after `after_ns`: on
// every thread, on `tid` only, or on its other threads.
int64_t calls_after(Connection& db, int64_t session, uint32_t pid, int64_t after_ns,
                    Threads threads = Threads::All, uint32_t tid = 0);

// The thread of a process with the most CUDA/HIP calls; 0 when it made none.
int64_t busiest_thread(Connection& db, int64_t session, uint32_t pid);

// The longest CUDA/HIP call of `op_ids` that returned in a process; 0 when none.
int64_t longest_call_ns(Connection& db, int64_t session, uint32_t pid, const std::vector<int64_t>& op_ids);

// The end of a process's latest-ending CUDA/HIP call; 0 when none.
int64_t last_call_end_ns(Connection& db, int64_t session, uint32_t pid);

struct LatestCollective {
  std::string comm_hash;  // empty: unknown
  int64_t op_id = 0, rank = -1, nranks = 0, seq = -1, ts_ns = 0, stack_id = -1;
};
// A process's latest NCCL call with a sequence number that began at or
// before `at_ns`.
std::optional<LatestCollective> latest_collective(Connection& db, int64_t session, uint32_t pid,
                                                  int64_t at_ns);

struct RankLatest {
  int64_t session_id = 0;
  uint32_t pid = 0;
  int64_t rank = 0, seq = 0, ts_ns = 0, stack_id = -1, op_id = 0;
};
// Every process of a communicator in the file (merged files: every node),
// with its latest collective, by rank. `comm_hash` is one the file holds
// (latest_collective's): it is written into the statement as it is.
std::vector<RankLatest> communicator_ranks(Connection& db, const std::string& comm_hash);

struct ProcessExit {
  int64_t end_ts_ns = 0, exit_code = 0;
};
// When and how a process exited; none when the trace saw no exit.
std::optional<ProcessExit> process_exit(Connection& db, int64_t session, uint32_t pid);

struct CallAtStop {
  int64_t op_id = 0, stack_id = -1, waited_ns = 0;
};
// The call of a process that had waited longest of those in flight when the
// trace stopped (one per thread).
std::optional<CallAtStop> longest_call_at_stop(Connection& db, int64_t session, uint32_t pid);

struct LongSleep {
  int64_t tid = 0, dur_ns = 0, state = 0, syscall = -1, stack_id = -1;
};
// An off-CPU interval of a process of `min_dur_ns` or more that lasted until
// `reaches_ns` or later: its main thread's first, then one with a stack,
// then the longest.
std::optional<LongSleep> sleep_reaching(Connection& db, int64_t session, uint32_t pid, int64_t reaches_ns,
                                        int64_t min_dur_ns);

struct SampledStack {
  int64_t stack_id = -1, samples = 0;
};
// The stack most of a process's on-CPU samples from `since_ns` on fell in;
// none also when the file's cpu_samples predate their in_call column.
std::optional<SampledStack> top_sampled_stack(Connection& db, int64_t session, uint32_t pid,
                                              int64_t since_ns);

struct KernelGiven {
  std::string kernel;  // "?": not named
  int64_t last_ts_ns = 0, stack_id = -1;
};
// The kernels a process gave the GPU in (from_ns, to_ns]: named by its
// launches (`launch_ops`) or by its lookups (`lookup_ops`) that named one;
// latest first, at most `limit`.
std::vector<KernelGiven> kernels_given(Connection& db, int64_t session, uint32_t pid,
                                       const std::vector<int64_t>& launch_ops,
                                       const std::vector<int64_t>& lookup_ops, int64_t from_ns, int64_t to_ns,
                                       int limit);

struct ThreadLastCall {
  int64_t tid = 0;
  int64_t end_ns = 0;  // its latest-ending CUDA/HIP call's end
};
// A process's threads but `except_tid` whose CUDA/HIP calls all ended before
// `before_ns`.
std::vector<ThreadLastCall> threads_quiet_since(Connection& db, int64_t session, uint32_t pid,
                                                uint32_t except_tid, int64_t before_ns);

}  // namespace causeway::store
