// SPDX-License-Identifier: Apache-2.0
// host_bound: the dispatcher thread runs on the CPU outside every CUDA call
// for most of the step (Python, data preparation, host-side math), and the
// GPU waits for it. Judged on steps, never on start-up.
#include "dispatch.h"

#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr double kMinShare = 0.50;   // on-CPU outside calls this share of the step
constexpr double kHighShare = 0.70;
constexpr double kMaxSyncBusy = 0.20;
constexpr size_t kShownLines = 3;
}

std::vector<CausalChain> rule_host_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a) || !a.host_context) continue;  // time outside calls is unknown without host context
    const double on_cpu = a.share(&TimeSplit::on_cpu);
    // Launches, with the dispatch between them, this much of the step: launch_bound.
    if (on_cpu < kMinShare || a.share(&TimeSplit::sync_busy) >= kMaxSyncBusy ||
        launch_cost(a).share() >= kMinLaunchShare)
      continue;
    if (a.gpu_busy && *a.gpu_busy >= 0.9) continue;  // the GPU is busy: host work overlaps it
    // Host work that is mostly the refill after each of a storm of syncs is
    // the loop around them: sync_bound tells it, with the fix that removes it.
    const double after_sync = double(a.after_sync_ns) * double(a.covered_ns()) / double(std::max<int64_t>(1, a.span_ns()));
    if (sync_storm(a) && after_sync >= 0.5 * double(a.time.on_cpu)) continue;
    CausalChain c;
    // Without a repeating step the share is of one stretch of activity, not
    // of a loop: a generic account, never above MEDIUM.
    c.severity = on_cpu >= kHighShare && a.steps >= 3 ? Severity::High : Severity::Medium;
    c.impact_ns = a.time.on_cpu;
    c.share = on_cpu;
    c.threshold = kMinShare;
    c.symptom = thread_symptom(ctx, a, -1);
    c.evidence.push_back({pct(on_cpu) + " of " + period_words(a) +
                              " runs on the CPU outside every CUDA call: host work the GPU waits for",
                          {{"on_cpu_share", on_cpu}, {"on_cpu_ns", a.time.on_cpu}, {"startup_ns", a.startup_ns()}}});
    c.evidence.push_back(split_evidence(a));
    add_gpu_evidence(c, a);
    // Where the host time goes: the thread's own CPU samples outside calls,
    // over the judged time, by line.
    const SampledWords sampled = sampled_words(ctx, a, a.tid, true, kShownLines);
    if (sampled.top) {
      c.evidence.push_back({"where its CPU time goes (" + fixed1(sampled.total) + " samples outside calls): " +
                                sampled.words,
                            {{"sampled_lines", sampled.lines}}});
      c.frame = sampled.top;
    } else {
      // No samples (--cpu-sample-hz 0, not Python): where host work ends and
      // GPU work resumes, the first call after each long gap that carries a
      // stack (the very first is often a driver call from inside a library,
      // cuKernelGetFunction under cuBLAS, without one).
      const std::string s = std::to_string(a.session_id), tid = std::to_string(a.tid);
      const std::string same_thread = "session_id = " + s + " AND tid = " + tid;
      attach_frame(ctx, c,
                   "SELECT (SELECT stack_id FROM cuda_call_events WHERE " + same_thread +
                       " AND ts_ns >= g.resume AND stack_id IS NOT NULL ORDER BY ts_ns LIMIT 1) AS stack_id FROM (SELECT p.ts_ns + "
                       "p.dur_ns AS done, (SELECT min(ts_ns) FROM cuda_call_events WHERE " + same_thread +
                       " AND ts_ns > p.ts_ns) AS resume FROM cuda_call_events p WHERE " + ctx.in_window("p.") +
                       " AND p.ts_ns >= " + std::to_string(std::max(a.from_ns, a.startup_end_ns)) + " AND p.session_id = " + s + " AND p.tid = " + tid +
                       ") g WHERE g.resume - g.done >= " + std::to_string(std::max<int64_t>(100'000, a.judged_ns() / 10)),
                   "no CPU samples of the thread, and the calls after the host work carried no Python stack");
      if (c.frame) c.frame->func = "resumes GPU work in " + c.frame->func;
    }
    c.recommendation =
        "Move host work off the dispatcher thread's critical path: do data preparation in DataLoader "
        "workers, replace Python loops over tensors with batched tensor ops on the GPU, avoid "
        "per-step host-side bookkeeping (logging, metrics) or do it every N steps; the line above is "
        "where its CPU time goes.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
