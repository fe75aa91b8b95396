// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the rules on a dispatcher thread's account share (launch_bound,
// sync_bound, input_bound, host_bound; docs/explain.md): the chain's
// symptom line, the account as evidence, the frame.
#include <string>

#include "../rule_context.h"

namespace causeway::analyze {

// "12.1 ms steps (83 of them, marked by cudaStreamSynchronize at train.py:61)" or "4.2 s"
std::string period_words(const ThreadAccount& a);
// The chain's frame, from the stacks of this thread's rows `stack_sql` selects
// (a SELECT of stack_id), or why there is none.
void attach_frame(const RuleContext& ctx, CausalChain& c, const std::string& stack_sql,
                  const std::string& why_none);
// A symptom naming the thread and its busiest op of class cls (empty op when none).
Symptom thread_symptom(const RuleContext& ctx, const ThreadAccount& a, int64_t op_id);
// The account in one evidence line, largest parts first.
Evidence split_evidence(const ThreadAccount& a);
// Where thread `tid`'s CPU time went over a's judged time (after start-up),
// from its samples (outside calls only, or all), by line: the first `shown`
// as words ("f() at train.py:61 45% · ...") and as JSON, with their total.
struct SampledWords {
  std::string words;
  nlohmann::json lines = nlohmann::json::array();
  double total = 0;
  std::optional<UserFrame> top;  // the line with the most samples
};
SampledWords sampled_words(const RuleContext& ctx, const ThreadAccount& a, uint32_t tid, bool outside_calls,
                           size_t shown);
// GPU utilisation (NVML) as evidence, when sampled.
void add_gpu_evidence(CausalChain& c, const ThreadAccount& a);
// What a step's launches cost: the time in launch calls, and the thread's
// CPU time between them where it is per-op dispatch, at most kMaxDispatchNs
// (account.h) a launch: fewer, larger kernels or a CUDA graph remove both.
// From kMinLaunchShare of the step it is launch_bound, and host_bound leaves
// the thread to it. (sync_storm, account.h: sync_bound's, and host_bound
// leaves such a thread to it.)
constexpr double kMinLaunchShare = 0.30;
struct LaunchCost {
  double launching = 0, dispatch = 0;  // shares of the step
  int64_t host_per_launch_ns = 0;      // 0: no launches counted
  double share() const { return launching + dispatch; }
};
LaunchCost launch_cost(const ThreadAccount& a);
// gil_contention and lock_contention: waiting this share of the step (HIGH
// from kHighWaitShare); cpu_contention takes such a wait when other
// workloads starve the thread waited for.
constexpr double kMinWaitShare = 0.20;
constexpr double kHighWaitShare = 0.40;
// The thread waited for (a lock's or the GIL's holder) was itself runnable at
// least a quarter of the waits and at least half as long as it ran (it ran
// at 2/3 of its speed or less): CPU contention starves it. Two threads
// handing work back and forth (a loop and its backward thread) are each
// runnable part of the time they are waited for.
bool holder_starved(const WaitedFor& w);
// Long enough to judge where a thread's time goes: a second of activity.
bool judgeable(const ThreadAccount& a);

}  // namespace causeway::analyze
