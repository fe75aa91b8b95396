// SPDX-License-Identifier: Apache-2.0
#pragma once
// What every rule gets: the open trace, the window, and the engine's TEMP
// tables, built once per explain (engine.cpp computes them; store/
// explain_tables.h creates them and every read of them is store/'s):
//   temp.baseline(pid, op_id, kernel_id, count, p50, p95, p99, max_ns, total_ns)
//     per (process, op, kernel; kernel_id -1 when none), CUDA and NCCL calls;
//   temp.slow(ts_ns, dur_ns, end_ns, pid, tid, op_id, kernel_id, stack_id, p50, session_id)
//     calls far above their own baseline (kSlowFactor x p50 and kSlowMinExcessNs);
//     overlap joins key on session_id too: in a merged file, one tid on two
//     nodes is two threads;
//   temp.firsts(pid, op_id, kernel_id, ts_ns, dur_ns, stack_id)
//     the first recorded CUDA call of each (process, op, kernel);
//   temp.gpu_slots(b, pid, n)
//     recorded calls that give the GPU work or wait for it (launches, graph
//     launches, copies, syncs) per process per 100 ms (b = ts_ns / 10^8); with
//     launches sampled, the exact copies and syncs still mark every step.
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "causeway/analyze/chain.h"
#include "causeway/analyze/critical_path.h"
#include "causeway/analyze/cross_rank.h"
#include "causeway/analyze/memory.h"
#include "causeway/common/numbers.h"
#include "causeway/events.h"
#include "causeway/model/launches.h"
#include "causeway/model/offcpu.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::analyze {

constexpr int kSlowFactor = 4;                  // slow: >= 4x its own p50
constexpr int64_t kSlowMinExcessNs = 100'000;   // ... and >= 100 us above it
constexpr int64_t kBaselineMinCalls = 5;        // fewer calls: no baseline
// --launch-sampling records every launch at least CW_LAUNCH_KEEP_NS slow: no
// launch explain would call slow may go unrecorded.
static_assert(kSlowMinExcessNs >= int64_t(CW_LAUNCH_KEEP_NS));

class ThreadTimelines;

class RuleContext {
 public:
  RuleContext(store::Connection& db, const Window& w);
  ~RuleContext();

  store::Connection& db;
  Window window;

  // Threads' calls and off-CPU intervals in time order, loaded once (timeline.h).
  ThreadTimelines& timelines() const { return *timelines_; }
  // The file records the Python stack a thread went to sleep in (schema 15).
  bool offcpu_stacks() const { return offcpu_stacks_; }
  // The file's table has this column (traces of older schemas lack later ones).
  // The window as store/'s reads take it (rules read through store/ only).
  store::Window store_window() const;

  std::string op_name(int64_t op_id) const;
  std::string kernel_name(int64_t kernel_id) const;
  std::string comm(uint32_t pid) const;
  // The longest off-CPU interval in the window: bounds overlap joins so they
  // can use the ts_ns index.
  int64_t max_offcpu_ns() const { return max_offcpu_ns_; }
  // The same for one state's intervals (CW_STATE_*): a join on preempted or
  // disk-wait intervals need not reach back as far as the longest sleep
  // (a 128-thread trace's idle threads sleep for seconds).
  int64_t max_offcpu_ns(int state) const {
    auto it = max_offcpu_by_state_.find(state);
    return it == max_offcpu_by_state_.end() ? 0 : it->second;
  }
  // A process's active span in the window (first call to last call end).
  int64_t process_span_ns(uint32_t pid) const;
  // Where its work begins: the end of its start-up (the first GPU work of
  // its threads, from their accounts), else its first call; and the span
  // from there to its last call's end.
  int64_t work_start_ns(uint32_t pid) const;
  int64_t work_span_ns(uint32_t pid) const;
  // Filled by the engine's one pass over the calls (process_span_ns reads it).
  std::map<uint32_t, std::pair<int64_t, int64_t>> spans;

  // The longest dur_ns of an interval table's rows in the window: it bounds
  // store/'s overlap joins (store/overlap.h) so they can use the ts_ns index.
  // A record family's table (include/causeway/model/): `longest<model::BlockIo>()`.
  template <typename Family>
  int64_t longest() const {
    if constexpr (std::is_same_v<Family, model::OffCpu>)
      return max_offcpu_ns_;
    else
      return longest_of(std::string(Family::kTable.name));
  }

  // Symptom of (pid, op[, kernel]) from the baseline and slow tables.
  Symptom symptom(uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id = {}) const;
  // The name of thread tid at `at`: its latest thread name (threads table; the
  // first after `at` when none is older),
  // else its process's command name; "" when neither is known.
  std::string thread_name(int64_t session, uint32_t pid, uint32_t tid, int64_t at) const;
  // The process was running a second or more before its session's trace
  // began (`trace --pid` on a job): its first calls in the trace are not its
  // first, and the trace holds no start-up of it.
  bool attached(uint32_t pid) const;
  // The GPU's utilisation for pid over [from, to) from NVML samples (the
  // process's SM share when sampled, else its GPUs' busy time); nullopt
  // without samples.
  std::optional<double> gpu_busy(int64_t session, uint32_t pid, int64_t from, int64_t to) const;
  // When launches were probed (trace --launch-duty), per session, clipped to
  // [from, to); empty when they were probed all of that time.
  std::vector<std::pair<int64_t, int64_t>> launch_windows(int64_t session, int64_t from, int64_t to) const;
  // What each launch probed in [from, to) cost the launching thread (entry
  // and return probes: launch_windows.trap_ns, weighed by the windows' time
  // there); kLaunchTrapNs where launches were probed throughout or the trace
  // predates it.
  static constexpr int64_t kLaunchTrapNs = 2'000;  // the pair on the H100 VM (docs/performance.md §1)
  int64_t launch_trap_ns(int64_t session, int64_t from, int64_t to) const;
  // The engine's passes fill these in order on its own RuleContext, before
  // the rules, which get it const.
  // Each dispatcher thread's account (account.cpp), filled before the rules run.
  std::vector<ThreadAccount> accounts;
  // Each process's critical path (critical_path.cpp), filled after the accounts.
  std::vector<ProcessPath> paths;
  // GPU memory per process (memory.cpp), filled before the rules run.
  std::vector<ProcessMemory> memory;
  // What the path rules read about each path from the file (its cgroup's
  // memory limit, its threads against its CPUs, its workers), read once
  // per explain rather than once per rule (path_rules.cpp owns the type): a
  // cache the first rule on a path fills.
  mutable std::map<const ProcessPath*, std::shared_ptr<const void>> path_facts;

  // The innermost user-code Python frame among the stacks `stack_ids_sql`
  // selects (a SELECT of stack ids; the most frequent stack wins).
  std::optional<UserFrame> top_frame(const std::string& stack_ids_sql) const;
  // The innermost user-code Python frame of one stack (cached).
  std::optional<UserFrame> frame_of(int64_t stack_id) const;
  // Where a thread's CPU time went, from its on-CPU samples (cpu_samples) in
  // [from, to): the lines (innermost user frame) by samples, most first;
  // only the samples outside traced calls when outside_calls. Samples count
  // the seconds they fall in: a second overlapping [from, to) counts in
  // proportion.
  struct SampledLine {
    UserFrame frame;
    double samples = 0;
  };
  std::vector<SampledLine> sampled_lines(int64_t session, uint32_t tid, int64_t from, int64_t to,
                                         bool outside_calls) const;

  // The cross-rank analysis of the whole file (cross_rank.cpp), made once
  // for the rules that read it.
  const CrossRankReport& cross_rank() const;

 private:
  int64_t longest_of(const std::string& table) const;
  mutable std::optional<CrossRankReport> cross_rank_;
  mutable std::map<int64_t, std::optional<UserFrame>> frames_;
  mutable std::map<uint32_t, bool> attached_;
  std::map<int64_t, std::string> op_names_;
  struct LaunchWindow {
    int64_t from, to, trap_ns;
  };
  std::map<int64_t, std::vector<LaunchWindow>> launch_windows_;  // by session
  int64_t max_offcpu_ns_ = 0;
  std::map<int, int64_t> max_offcpu_by_state_;
  bool offcpu_stacks_ = false;
  std::unique_ptr<ThreadTimelines> timelines_;
};

using Rule = std::vector<CausalChain> (*)(const RuleContext&);
struct RuleEntry {
  const char* root_cause;
  Rule run;
};
// Every rule, in one list (src/analyze/rules/registry.cpp).
const std::vector<RuleEntry>& all_rules();

// GPU memory per process, replayed up to the window's end (or `at_ns`).
std::vector<ProcessMemory> account_memory(const RuleContext& ctx, std::optional<int64_t> at_ns = {});

// The time account of every dispatcher thread in the window (account.cpp).
std::vector<ThreadAccount> account_threads(const RuleContext& ctx);
// The critical path of each process with an account (critical_path.cpp).
std::vector<ProcessPath> build_paths(const RuleContext& ctx);

// Slow calls of one process, and how much time they lost against baseline.
struct SlowGroup {
  uint32_t pid = 0;
  int64_t calls = 0;
  int64_t excess_ns = 0;  // sum(dur - p50)
  int64_t top_op = 0;     // the op that lost the most
};
std::vector<SlowGroup> slow_groups(const RuleContext& ctx);

// Rules that attribute slow calls' excess time to a cause: the chain exists
// when the cause explains >= 20% of the excess and >= 1 ms; HIGH when it
// explains >= 50% and the excess is >= 2% of the process's span, MEDIUM at
// >= 0.5%, else LOW.
constexpr double kMinExplained = 0.2;
constexpr int64_t kMinEvidenceNs = 1'000'000;
Severity attributed_severity(double explained, double excess_share);


}  // namespace causeway::analyze
