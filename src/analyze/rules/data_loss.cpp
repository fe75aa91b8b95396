// SPDX-License-Identifier: Apache-2.0
// data_loss: records were dropped (ring buffer full, stack reads failed...):
// every other count is a lower bound, and this is said, never hidden.
#include "../rule_context.h"

#include "causeway/store/explain_tables.h"
#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_data_loss(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  std::map<std::string, int64_t> by;
  // Shed rows (planned, counts exact) are not data loss: explain's SHED line
  // says them; unrecorded first tensors through a call site, its memory section.
  for (const auto& l : store::lost_records_by_source(ctx.db)) by[l.source] = l.count;
  int64_t op_dropped = store::op_counts_dropped(ctx.db);
  if (op_dropped > 0 && !by.count("libcall")) by["op_counts"] = op_dropped;
  int64_t lost = 0;
  for (const auto& [k, n] : by) lost += n;
  if (lost == 0) return out;
  int64_t kept = store::kept_call_and_offcpu_rows(ctx.db);
  double frac = double(lost) / double(lost + kept);
  CausalChain c;
  c.severity = frac >= 0.1 ? Severity::High : frac >= 0.01 ? Severity::Medium : Severity::Low;
  c.impact_ns = 0;
  c.symptom.op = "";
  c.symptom.calls = kept;
  std::string list;
  for (const auto& [k, n] : by) list += (list.empty() ? "" : ", ") + k + " " + std::to_string(n);
  c.evidence.push_back({std::to_string(lost) + " records dropped (" + pct(frac) + " of " +
                            std::to_string(lost + kept) + "): " + list,
                        {{"dropped", lost}, {"fraction", frac}, {"by_source", by}}});
  if (op_dropped > 0)
    c.evidence.push_back({std::to_string(op_dropped) + " calls were counted but not recorded: "
                          "exact per-op counts stay in op_stats",
                          {{"op_counts_dropped", op_dropped}}});
  c.recommendation = "Some events were lost, so every number here is a lower bound: trace "
                     "fewer probes or one process (--pid), give the ring buffers more memory, "
                     "or trace a shorter window.";
  out.push_back(std::move(c));
  return out;
}

}  // namespace causeway::analyze
