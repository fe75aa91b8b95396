// SPDX-License-Identifier: Apache-2.0
// memory_pressure: the slow calls' thread did direct reclaim inside the call.
#include "../rule_context.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_memory_pressure(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const auto rc = ctx.overlap("reclaims", "r");
  for (const auto& g : slow_groups(ctx)) {
    const std::string pid = std::to_string(g.pid);
    int64_t rc_ns = 0, n = 0, pages = 0;
    ctx.each("SELECT coalesce(sum(" + rc.clipped + "), 0), count(*), coalesce(sum(r.nr_reclaimed), 0)"
             " FROM slow s" + rc.join + " WHERE s.pid = " + pid,
             [&](store::Statement& s) {
               rc_ns = s.col_int(0);
               n = s.col_int(1);
               pages = s.col_int(2);
             });
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
    int64_t total = ctx.scalar("SELECT count(*) FROM reclaims WHERE " + ctx.in_window());
    c.evidence.push_back({std::to_string(total) + " direct reclaims in the window in all",
                          {{"reclaims_in_window", total}}});
    c.frame = ctx.top_frame("SELECT stack_id FROM slow WHERE pid = " + pid +
                            " AND op_id = " + std::to_string(g.top_op));
    c.recommendation =
        "The host is short of free memory and this thread pays for reclaim: cap page cache "
        "and neighbours (cgroup memory.high), protect the workload (memory.low), or lower its "
        "host memory use (pinned buffers, dataset copies).";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
