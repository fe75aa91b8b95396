// SPDX-License-Identifier: Apache-2.0
// tcp_retransmit: TCP retransmits happen while calls are slow. Retransmit
// timers fire in softirq context, so the recorded pid is often not the
// workload's: calls and retransmits are matched on time only.
#include "../rule_context.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_tcp_retransmit(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  auto& db = ctx.db;
  Window any = ctx.window;
  any.pid.reset();
  RuleContext all(ctx.db, any);
  db.exec("DROP TABLE IF EXISTS temp.rtx");
  db.exec("CREATE TEMP TABLE rtx AS SELECT ts_ns, daddr, dport, saddr, session_id FROM tcp_retransmits WHERE " +
          all.in_window());
  int64_t total = ctx.scalar("SELECT count(*) FROM rtx");
  if (total == 0) return out;
  db.exec("CREATE INDEX temp.rtx_ts ON rtx(ts_ns)");
  for (const auto& g : slow_groups(ctx)) {
    const std::string pid = std::to_string(g.pid);
    const std::string hit =
        " FROM slow s WHERE s.pid = " + pid +
        " AND EXISTS (SELECT 1 FROM rtx r WHERE r.session_id = s.session_id AND r.ts_ns >= s.ts_ns"
        " AND r.ts_ns < s.end_ns)";
    int64_t n_hit = 0, hit_excess = 0;
    ctx.each("SELECT count(*), coalesce(sum(s.dur_ns - s.p50), 0)" + hit, [&](store::Statement& s) {
      n_hit = s.col_int(0);
      hit_excess = s.col_int(1);
    });
    double explained = g.excess_ns ? double(hit_excess) / g.excess_ns : 0;
    if (explained < kMinExplained || hit_excess < kMinEvidenceNs) continue;
    CausalChain c;
    int64_t op = ctx.scalar("SELECT s.op_id" + hit + " GROUP BY 1 ORDER BY sum(s.dur_ns - s.p50) DESC LIMIT 1");
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
    ctx.each("SELECT daddr, dport, count(*) FROM rtx WHERE session_id IN (SELECT session_id FROM slow"
             " WHERE pid = " + pid + ") GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 3",
             [&](store::Statement& s) {
               auto d = s.col_text(0) + ":" + std::to_string(s.col_int(1));
               if (first_dest.empty()) first_dest = d;
               dest += (dest.empty() ? "" : ", ") + d + " (" + std::to_string(s.col_int(2)) + ")";
               dests.push_back({{"daddr", s.col_text(0)}, {"dport", s.col_int(1)},
                                {"retransmits", s.col_int(2)}});
             });
    c.evidence.push_back({std::to_string(total) + " retransmits in the window, to " + dest,
                          {{"retransmits", total}, {"destinations", dests}}});
    c.frame = ctx.top_frame("SELECT s.stack_id" + hit);
    c.recommendation = "Packets to " + first_dest + " are lost and each loss costs a "
                       "retransmit timeout (>= 200 ms): check that link (ethtool -S, switch "
                       "port errors, MTU), and move collectives to RDMA (NCCL_IB_HCA) or a "
                       "clean interface (NCCL_SOCKET_IFNAME).";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
