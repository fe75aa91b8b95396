// SPDX-License-Identifier: Apache-2.0
// sync_bound: the dispatcher thread synchronises with the GPU many times per
// step (.item(), .cpu(), printing a tensor, a blocking copy back): each time
// the GPU's queue drains, and the host cannot run ahead to keep it fed.
#include "dispatch.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr double kMinShare = 0.25;            // syncs, and the gaps after them, this share of the step
constexpr double kHighShare = 0.50;
constexpr double kMinStormShare = 0.05;       // ... or this much, with the launches they expose:
constexpr double kMinExposedShare = 0.30;     // syncs, refills and launching together this share
constexpr double kHighExposedShare = 0.60;
}

bool sync_storm(const ThreadAccount& a) {
  const double secs = double(std::max<int64_t>(1, a.span_ns())) / 1e9;
  // Syncs are traced throughout; steps may be counted in launch windows only.
  const double per_step = a.steps >= 3 ? double(a.syncs) / secs * double(a.step_ns) / 1e9 : 0;
  // Without an outer step the marker is the sync itself (one per "step"):
  // the rate alone tells a storm.
  return per_step >= kMinSyncsPerStep || double(a.syncs) / secs >= kMinSyncsPerSecond;
}

std::vector<CausalChain> rule_sync_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a)) continue;
    const double secs = double(std::max<int64_t>(1, a.span_ns())) / 1e9;
    const double per_s = double(a.syncs) / secs;
    const double per_step = a.steps >= 3 ? per_s * double(a.step_ns) / 1e9 : 0;
    if (!sync_storm(a)) continue;
    // What the syncs cost the step: waiting in them, and the host's refill
    // after each (the GPU has nothing queued until the next call).
    const TimeSplit& t = a.judged();
    // The refill after syncs is summed over the whole span; the split may
    // cover launch windows only: scale it to the judged time.
    const double after_rate = double(a.after_sync_ns) / double(std::max<int64_t>(1, a.span_ns()));
    const double after = after_rate * double(a.judged_ns());
    const double cost = double(t.sync_busy + t.sync_idle) + after;
    const double share = cost / double(std::max<int64_t>(1, t.total()));
    // Each sync drains the queue the launches filled: on a storm the launch
    // time is exposed by the syncs too (launch_bound leaves such a thread to
    // this rule), so the two shares are judged together, and a loop whose
    // launching and sync shares trade places run to run stays sync-bound.
    const double launching = a.share(&TimeSplit::launching);
    const double exposed = share + launching;
    if (share < kMinShare && !(share >= kMinStormShare && exposed >= kMinExposedShare)) continue;
    const std::string rows = thread_rows(a);
    const std::string syncs = op_ids_sql_list(OpClass::Sync);
    CausalChain c;
    c.severity = share >= kHighShare || exposed >= kHighExposedShare ? Severity::High : Severity::Medium;
    c.share = share >= kMinShare ? share : exposed;
    c.threshold = share >= kMinShare ? kMinShare : kMinExposedShare;
    c.impact_ns = int64_t(double(a.time.sync_busy + a.time.sync_idle) + after_rate * double(a.covered_ns()));
    const std::string sync_rows = " AND (op_id IN (" + syncs + ") OR " + readback_sql() + ")";
    int64_t top_op = ctx.scalar("SELECT op_id FROM cuda_call_events WHERE " + ctx.in_window() + rows + sync_rows +
                                " GROUP BY op_id ORDER BY count(*) DESC LIMIT 1");
    c.symptom = thread_symptom(ctx, a, top_op);
    c.evidence.push_back(
        {std::to_string(a.syncs) + " synchronisations (" +
             (per_step >= 2 ? fixed1(per_step) + " per step, " : "") + fixed1(per_s) + "/s); " +
             std::to_string(a.syncs_idle) + " returned at once (the GPU had already drained): " + pct(share) +
             " of " + period_words(a) + " waits in them or refills the GPU after them",
         {{"syncs", a.syncs}, {"syncs_per_step", per_step}, {"syncs_per_s", per_s},
          {"returned_at_once", a.syncs_idle}, {"share", share}, {"after_sync_ns", a.after_sync_ns}}});
    if (share < kMinShare || launching >= 0.1)
      c.evidence.push_back({"launching " + pct(launching) + " of it too, exposed by the syncs (each drains the GPU's "
                                "queue: the next kernels start only when launched): " + pct(exposed) + " together",
                            {{"launching_share", launching}, {"exposed_share", exposed}}});
    c.evidence.push_back(split_evidence(a));
    // Blocking copies back to the host are syncs too (.item() is one).
    int64_t dtoh = ctx.scalar("SELECT count(*) FROM cuda_call_events WHERE " + ctx.in_window() + rows +
                              " AND op_id IN (" + op_ids_sql_list(OpClass::Copy) + ") AND kind = " +
                              std::to_string(int(CopyKind::DtoH)));
    if (dtoh)
      c.evidence.push_back({std::to_string(dtoh) + " device-to-host copies beside them (a scalar read back: "
                                                   ".item(), .cpu(), .tolist())",
                            {{"dtoh_copies", dtoh}}});
    add_gpu_evidence(c, a);
    attach_frame(ctx, c,
                 "SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() + rows + sync_rows,
                 "the synchronisations carried no Python stack (stacks off, or not a Python process)");
    c.recommendation =
        "Keep values on the GPU inside the loop: replace per-iteration .item()/.cpu()/print(tensor) "
        "with tensor ops, accumulate metrics on the device and read them once per step (or every N "
        "steps), and use non_blocking copies into pinned memory with an event when a value must come back.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
