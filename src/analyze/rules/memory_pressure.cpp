// SPDX-License-Identifier: Apache-2.0
// memory_pressure: the slow calls' thread did direct reclaim inside the call.
#include "../rule_context.h"

#include "causeway/model/reclaims.h"
#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_memory_pressure(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const int64_t longest = ctx.longest<model::Reclaims>();
  for (const auto& g : slow_groups(ctx)) {
    const auto rc = store::slow_call_reclaims(ctx.db, g.pid, longest);
    const int64_t rc_ns = rc.ns, n = rc.reclaims, pages = rc.pages;
    double explained = g.excess_ns ? double(rc_ns) / g.excess_ns : 0;
    if (explained < kMinExplained || rc_ns < kMinEvidenceNs) continue;
    CausalChain c;
    c.symptom = ctx.symptom(g.pid, g.top_op);
    c.severity = attributed_severity(explained, double(g.excess_ns) / ctx.process_span_ns(g.pid));
    c.impact_ns = rc_ns;
    c.evidence.push_back({std::to_string(n) + " direct reclaims: " + ms(rc_ns) +
                              " reclaiming memory inside the slow calls (" +
                              pct(std::min(1.0, explained)) + " of their excess), " +
                              std::to_string(pages) + " pages freed",
                          {{"reclaims", n}, {"reclaim_ns", rc_ns}, {"pages", pages},
                           {"explained", explained}}});
    int64_t total = store::reclaims_in(ctx.db, ctx.store_window());
    c.evidence.push_back({std::to_string(total) + " direct reclaims in the window in all",
                          {{"reclaims_in_window", total}}});
    c.frame = ctx.top_frame(store::slow_calls_stack_sql(g.pid, g.top_op));
    c.recommendation =
        "The host is short of free memory and this thread pays for reclaim: cap page cache "
        "and neighbours (cgroup memory.high), protect the workload (memory.low), or lower its "
        "host memory use (pinned buffers, dataset copies).";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
