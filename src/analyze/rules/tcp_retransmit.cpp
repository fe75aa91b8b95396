// SPDX-License-Identifier: Apache-2.0
// tcp_retransmit: TCP retransmits happen while calls are slow. Retransmit
// timers fire in softirq context, so the recorded pid is often not the
// workload's: calls and retransmits are matched on time only.
#include "../rule_context.h"

#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_tcp_retransmit(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // Every process's retransmits in the window, as temp.rtx.
  const int64_t total = store::stage_retransmits(ctx.db, ctx.store_window().any_process());
  if (total == 0) return out;
  for (const auto& g : slow_groups(ctx)) {
    // Its slow calls with a retransmit of their session inside them.
    const auto hit = store::slow_calls_with_retransmit(ctx.db, g.pid);
    const int64_t n_hit = hit.calls, hit_excess = hit.excess_ns;
    double explained = g.excess_ns ? double(hit_excess) / g.excess_ns : 0;
    if (explained < kMinExplained || hit_excess < kMinEvidenceNs) continue;
    CausalChain c;
    int64_t op = store::retransmit_slowest_op(ctx.db, g.pid).value_or(0);
    c.symptom = ctx.symptom(g.pid, op);
    c.severity = attributed_severity(explained, double(g.excess_ns) / ctx.process_span_ns(g.pid));
    c.impact_ns = hit_excess;
    c.evidence.push_back({std::to_string(n_hit) + " of " + std::to_string(g.calls) +
                              " slow calls had a TCP retransmit inside them (" + ms(hit_excess) +
                              " of " + ms(g.excess_ns) + " excess)",
                          {{"slow_calls_with_retransmit", n_hit}, {"slow_calls", g.calls},
                           {"excess_ns", hit_excess}, {"explained", explained}}});
    std::string dest, first_dest;
    nlohmann::json dests = nlohmann::json::array();
    for (const auto& r : store::retransmit_destinations(ctx.db, g.pid, 3)) {
      auto d = r.daddr + ":" + std::to_string(r.dport);
      if (first_dest.empty()) first_dest = d;
      dest += (dest.empty() ? "" : ", ") + d + " (" + std::to_string(r.retransmits) + ")";
      dests.push_back({{"daddr", r.daddr}, {"dport", r.dport}, {"retransmits", r.retransmits}});
    }
    c.evidence.push_back({std::to_string(total) + " retransmits in the window, to " + dest,
                          {{"retransmits", total}, {"destinations", dests}}});
    c.frame = ctx.top_frame(store::retransmit_stack_sql(g.pid));
    c.recommendation = "Packets to " + first_dest + " are lost and each loss costs a "
                       "retransmit timeout (>= 200 ms): check that link (ethtool -S, switch "
                       "port errors, MTU), and move collectives to RDMA (NCCL_IB_HCA) or a "
                       "clean interface (NCCL_SOCKET_IFNAME).";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
