// SPDX-License-Identifier: Apache-2.0
// pinning: host memory is page-locked and given back step after step
// (cudaHostAlloc / cudaHostRegister and their frees): each pin maps and
// locks every page, on the dispatcher thread, while the GPU waits.
#include "dispatch.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr double kMinShare = 0.05;    // pinning this share of the step
constexpr double kHighShare = 0.20;
constexpr double kMinPerStep = 0.5;   // ... and at least once every other step: per-step pinning
}

std::vector<CausalChain> rule_pinning(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const std::string pins = op_ids_sql_list(OpClass::Pin);
  // The calls that pin (not those that give memory back).
  std::string pinning_ops;
  for (const auto& op : all_ops())
    if (op.cls == OpClass::Pin && op.shape != ArgShape::Free)
      pinning_ops += (pinning_ops.empty() ? "" : ",") + std::to_string(op.id);
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a)) continue;
    const double share = a.share(&TimeSplit::pinning);
    if (share < kMinShare) continue;
    const std::string rows = thread_rows(a);
    const int64_t from = std::max(a.from_ns, a.startup_end_ns);
    int64_t calls = 0, bytes = 0;
    int64_t in_loop = 0;  // after start-up: the steps'
    ctx.each("SELECT count(*), coalesce(sum(CASE WHEN ret = 0 THEN bytes END), 0), coalesce(sum(ts_ns >= " +
                 std::to_string(from) + "), 0) FROM cuda_call_events WHERE " + ctx.in_window() + rows +
                 " AND op_id IN (" + pinning_ops + ")",
             [&](store::Statement& s) {
               calls = s.col_int(0);
               bytes = s.col_int(1);
               in_loop = s.col_int(2);
             });
    const double secs = double(std::max<int64_t>(1, a.to_ns - from)) / 1e9;
    const double per_step = a.steps >= 3 ? double(in_loop) / secs * double(a.step_ns) / 1e9 : 0;
    if (a.steps >= 3 && per_step < kMinPerStep) continue;
    CausalChain c;
    c.severity = share >= kHighShare ? Severity::High : Severity::Medium;
    c.impact_ns = a.time.pinning;
    c.share = share;
    c.threshold = kMinShare;
    const int64_t top_op = ctx.scalar("SELECT op_id FROM cuda_call_events WHERE " + ctx.in_window() + rows +
                                      " AND op_id IN (" + pins + ") GROUP BY op_id ORDER BY sum(dur_ns) DESC LIMIT 1");
    c.symptom = thread_symptom(ctx, a, top_op);
    c.evidence.push_back({pct(share) + " of " + period_words(a) + " pins or unpins host memory: " + std::to_string(calls) +
                              " pins" + (per_step > 0 ? " (" + fixed1(per_step) + " per step)" : "") + ", " +
                              format_bytes(bytes) + " pinned in all",
                          {{"pinning_share", share}, {"calls", calls}, {"calls_per_step", per_step}, {"bytes", bytes}}});
    c.evidence.push_back(split_evidence(a));
    // The line: where the pinning time goes (the slowest site, by time).
    attach_frame(ctx, c,
                 "SELECT stack_id FROM (SELECT stack_id, sum(dur_ns) AS t FROM cuda_call_events WHERE " + ctx.in_window() +
                     rows + " AND op_id IN (" + pins + ") AND stack_id IS NOT NULL GROUP BY stack_id ORDER BY t DESC LIMIT 1)",
                 "the pinning calls carried no Python stack");
    c.recommendation =
        "Pin once and reuse: allocate the pinned staging buffer before the loop and copy into it "
        "(tensor.pin_memory() once, or DataLoader(pin_memory=True)), let PyTorch's caching host allocator "
        "keep pinned blocks, and avoid cudaHostRegister/cudaHostAlloc inside the step.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
