// SPDX-License-Identifier: Apache-2.0
// gil_contention: the dispatcher thread waits for the Python interpreter lock
// while another thread of its process holds it (pure Python or a C call that
// keeps the GIL: serialising, sorting, logging), and the GPU waits with it.
// lock_contention: it waits for another thread of its process (a lock that
// thread holds, a queue it fills, work it does), which is not its input.
// Both name the thread waited for and, from that thread's CPU samples over
// the waits, its Python line.
#include "dispatch.h"

#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr size_t kShownLines = 2;

std::vector<CausalChain> waits(const RuleContext& ctx, bool gil) {
  std::vector<CausalChain> out;
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a) || !a.host_context) continue;
    const double share = a.share(gil ? &TimeSplit::gil : &TimeSplit::lock);
    if (share < kMinWaitShare) continue;
    const WaitedFor* holder = nullptr;
    for (const auto& w : a.waited_for)
      if (w.gil == gil) {
        holder = &w;
        break;
      }
    CausalChain c;
    c.severity = share >= kHighWaitShare ? Severity::High : Severity::Medium;
    c.impact_ns = gil ? a.time.gil : a.time.lock;
    c.share = share;
    c.threshold = kMinWaitShare;
    c.symptom = thread_symptom(ctx, a, -1);
    const std::string what = gil ? "waits for the interpreter lock (GIL)" : "waits for another thread of its process";
    c.evidence.push_back({pct(share) + " of " + period_words(a) + " " + what + ", outside CUDA calls: the GPU waits too",
                          {{gil ? "gil_share" : "lock_share", share}, {"ns", c.impact_ns}}});
    c.evidence.push_back(split_evidence(a));
    if (holder) {
      const std::string name = holder->name.empty() ? "thread " + std::to_string(holder->tid)
                                                    : "thread " + holder->name + " (" + std::to_string(holder->tid) + ")";
      const double starved = double(holder->runnable_ns) / double(std::max<int64_t>(1, holder->ns));
      const bool starved_of_cpu = holder_starved(*holder);
      const double fed = double(holder->input_ns) / double(std::max<int64_t>(1, holder->ns));
      c.evidence.push_back(
          {std::string(gil ? "held by " : "woken by ") + name + ": " + std::to_string(holder->times) + " waits, " +
               ms(holder->ns) + "; meanwhile it ran " + pct(double(holder->on_cpu_ns) / double(std::max<int64_t>(1, holder->ns))) +
               (starved >= 0.05 ? ", waited for a CPU " + pct(starved) : "") +
               (fed >= 0.05 ? ", waited for its own input " + pct(fed) : ""),
           {{"holder_tid", holder->tid}, {"holder", holder->name}, {"waits", holder->times}, {"waited_ns", holder->ns},
            {"holder_runnable_share", starved}, {"holder_starved", starved_of_cpu}}});
      // Its line: where its CPU time went over the judged time.
      const SampledWords sampled = sampled_words(ctx, a, holder->tid, false, kShownLines);
      if (sampled.top) {
        c.evidence.push_back({"it ran " + sampled.words + " (its CPU samples)", {{"holder_lines", sampled.lines}}});
        c.frame = sampled.top;
        c.frame->func = (holder->name.empty() ? "thread " + std::to_string(holder->tid) : holder->name) + ": " +
                        c.frame->func;
      }
      if (starved_of_cpu)
        c.evidence.push_back({"the thread it waits for was itself waiting for a CPU for much of that time (as long as "
                              "half its running or more): CPU contention starves it", {{"cpu_contention", true}}});
    }
    if (!c.frame)
      c.no_frame_reason = holder ? "no CPU samples of the thread it waited for (--cpu-sample-hz 0, or it held the "
                                   "lock while asleep)"
                                 : "the thread it waited for is not known";
    c.recommendation =
        gil ? "Keep the interpreter lock off the training thread's path: do that thread's work in a process "
              "(multiprocessing, a DataLoader worker) instead of a thread, release the GIL in C extensions "
              "(Cython nogil, numpy/torch ops release it), or do it every N steps."
            : "Do not make the training thread wait for another thread each step: hold shared locks briefly "
              "(copy, then release), hand results over through a queue without blocking (get_nowait, a "
              "double buffer), or move that work to a process.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::vector<CausalChain> rule_gil_contention(const RuleContext& ctx) { return waits(ctx, true); }
std::vector<CausalChain> rule_lock_contention(const RuleContext& ctx) { return waits(ctx, false); }

}  // namespace causeway::analyze
