// SPDX-License-Identifier: Apache-2.0
// straggler_rank: for each collective (comm_hash, seq) seen from >= 2 ranks,
// the rank that entered last held the others back by the entry spread. Reads
// nccl_calls generically (session and host from sessions), so a merged
// multi-host file works the same as one host's. The window bounds time only.
#include "../rule_context.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kMinCollectives = 5;
constexpr double kMinLastShare = 0.5;       // last in >= half of the collectives
constexpr int64_t kMinMeanSpreadNs = 1'000'000;
}

std::vector<CausalChain> rule_straggler_rank(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  Window any = ctx.window;
  any.pid.reset();
  RuleContext all(ctx.db, any);
  auto& db = ctx.db;
  db.exec("DROP TABLE IF EXISTS temp.coll");
  db.exec("CREATE TEMP TABLE coll AS SELECT comm_hash, seq, count(DISTINCT rank) AS ranks,"
          " max(ts_ns) - min(ts_ns) AS spread, max(ts_ns) AS last_ts, min(ts_ns) AS first_ts,"
          " min(op_id) AS op_id FROM nccl_call_events WHERE " + all.in_window() +
          " AND comm_hash IS NOT NULL AND comm_hash != '' AND seq IS NOT NULL AND rank IS NOT NULL"
          " GROUP BY comm_hash, seq HAVING count(DISTINCT rank) >= 2");
  struct Late { std::string comm; int64_t rank, pid, session, last_n, spread_ns, total, span, op, nranks; };
  std::vector<Late> lates;
  ctx.each(
      "WITH last AS (SELECT n.comm_hash, n.rank, n.pid, n.session_id, count(*) AS k,"
      " sum(c.spread) AS spread FROM coll c JOIN nccl_call_events n ON n.comm_hash = c.comm_hash"
      " AND n.seq = c.seq AND n.ts_ns = c.last_ts GROUP BY 1, 2),"
      " tot AS (SELECT comm_hash, count(*) AS total, max(last_ts) - min(first_ts) AS span,"
      " min(op_id) AS op, max(ranks) AS nranks FROM coll GROUP BY 1)"
      " SELECT l.comm_hash, l.rank, l.pid, l.session_id, l.k, l.spread, t.total, t.span, t.op,"
      " t.nranks FROM last l JOIN tot t USING (comm_hash) ORDER BY l.k DESC",
      [&](store::Statement& s) {
        lates.push_back({s.col_text(0), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4),
                         s.col_int(5), s.col_int(6), s.col_int(7), s.col_int(8), s.col_int(9)});
      });
  std::map<std::string, bool> done;
  for (const auto& l : lates) {
    if (done[l.comm]) continue;  // the most frequent last rank per communicator
    done[l.comm] = true;
    double last_share = double(l.last_n) / double(l.total);
    int64_t mean = l.spread_ns / std::max<int64_t>(1, l.last_n);
    if (l.total < kMinCollectives || last_share < kMinLastShare || mean < kMinMeanSpreadNs) continue;
    double wait_share = l.span ? double(l.spread_ns) / double(l.span) : 0;
    std::string host;
    ctx.each("SELECT host FROM sessions WHERE id = " + std::to_string(l.session),
             [&](store::Statement& s) { host = s.col_text(0); });
    CausalChain c;
    c.severity = wait_share >= 0.1 ? Severity::High
                 : wait_share >= 0.02 ? Severity::Medium : Severity::Low;
    c.impact_ns = l.spread_ns;
    c.symptom.pid = uint32_t(l.pid);
    c.symptom.comm = ctx.comm(uint32_t(l.pid));
    c.symptom.op = ctx.op_name(l.op);
    c.symptom.calls = l.total;
    c.symptom.p50_ns = mean;
    c.symptom.max_ns = ctx.scalar("SELECT max(spread) FROM coll WHERE comm_hash = '" + l.comm + "'");
    c.symptom.p99_ns = c.symptom.max_ns;
    c.symptom.wall_share = wait_share;
    std::string who = "rank " + std::to_string(l.rank) + " (pid " + std::to_string(l.pid) +
                      (host.empty() ? "" : " on " + host) + ")";
    c.evidence.push_back({who + " entered " + c.symptom.op + " last in " +
                              std::to_string(l.last_n) + " of " + std::to_string(l.total) +
                              " collectives (" + pct(last_share) + ")",
                          {{"rank", l.rank}, {"pid", l.pid}, {"host", host},
                           {"last", l.last_n}, {"collectives", l.total}}});
    c.evidence.push_back({"the other " + std::to_string(l.nranks - 1) + " ranks waited " +
                              ms(mean) + " per collective, " + ms(l.spread_ns) + " in all (" +
                              pct(wait_share) + " of the job's time)",
                          {{"mean_wait_ns", mean}, {"wait_ns", l.spread_ns},
                           {"share", wait_share}, {"nranks", l.nranks}, {"comm_hash", l.comm}}});
    c.frame = ctx.top_frame("SELECT stack_id FROM nccl_call_events WHERE pid = " +
                            std::to_string(l.pid) + " AND comm_hash = '" + l.comm + "'");
    c.recommendation = who + " holds back every collective: look at what it does before " +
                       c.symptom.op + " (causeway explain --pid " + std::to_string(l.pid) +
                       " on its host: input pipeline, CPU contention, throttling) and balance "
                       "its data shard or move it off the busy host.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
