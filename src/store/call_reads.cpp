// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/call_reads.h"

#include "causeway/common/op_table.h"
#include "causeway/store/checked_sql.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::store {

void each_call_duration(Connection& db, const Window& w, const std::string& op,
                        const std::function<void(const CallDuration&)>& f) {
  auto st = db.prepare(sql<
      "SELECT op, layer, dur_ns, ret FROM (SELECT op, layer, dur_ns, ret, ts_ns, pid FROM "
      "cuda_calls WHERE flags & 16 = 0 UNION ALL SELECT op, 'nccl', dur_ns, ret, ts_ns, pid "
      "FROM nccl_calls) WHERE 1{}{} ORDER BY op, dur_ns">(w.sql_and(),
                                                          op.empty() ? std::string() : sql<" AND op = ?1">()));
  if (!op.empty()) st.bind(1, op);
  CallDuration c;
  while (st.step()) {
    c.op = st.col_text(0);
    c.layer = st.col_text(1);
    c.dur_ns = st.col_int(2);
    c.ret = st.col_int(3);
    f(c);
  }
}

std::vector<LaunchTotal> launch_totals(Connection& db, const Window& w, const std::string& op) {
  // Two statements: the op's test names the join's alias.
  auto st = db.prepare(
      op.empty() ? sql<"SELECT o.name, o.layer, sum(s.calls), sum(s.errors), sum(s.total_ns) FROM launch_stats s "
                       "JOIN ops o ON o.id = s.op_id WHERE 1{} GROUP BY o.name">(w.sql_and())
                 : sql<"SELECT o.name, o.layer, sum(s.calls), sum(s.errors), sum(s.total_ns) FROM launch_stats s "
                       "JOIN ops o ON o.id = s.op_id WHERE 1{} AND o.name = ?1 GROUP BY o.name">(w.sql_and()));
  if (!op.empty()) st.bind(1, op);
  std::vector<LaunchTotal> out;
  while (st.step())
    out.push_back({st.col_text(0), st.col_text(1), st.col_int(2), st.col_int(3), st.col_int(4)});
  return out;
}

std::vector<std::pair<int64_t, int64_t>> launch_buckets(Connection& db, const Window& w,
                                                        const std::string& op) {
  auto st = db.prepare(
      sql<"SELECT b.bucket, sum(b.calls) FROM launch_buckets b JOIN ops o ON o.id = b.op_id "
          "WHERE o.name = ?1{} GROUP BY b.bucket ORDER BY b.bucket">(w.sql_and(sql_in<"b launch_buckets", "b.ts_ns">(), sql_in<"b launch_buckets", "b.pid">())));
  st.bind(1, op);
  std::vector<std::pair<int64_t, int64_t>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_int(1));
  return out;
}

std::optional<int64_t> longest_kept_launch_ns(Connection& db, const Window& w, const std::string& op) {
  auto st = db.prepare(sql<"SELECT max(dur_ns) FROM cuda_calls WHERE flags & 16 AND op = ?1{}">(w.sql_and()));
  st.bind(1, op);
  if (st.step() && !st.col_null(0)) return st.col_int(0);
  return std::nullopt;
}

std::vector<KernelLaunchCount> kernel_launch_counts(Connection& db, const Window& w, int limit) {
  auto st = db.prepare(sql<
      "SELECT kernel, sum(n) AS n, sum(total) AS total, max(mx) FROM ("
      " SELECT kernel, sum(flags & 16 = 0) AS n, sum(CASE WHEN flags & 16 THEN 0 ELSE dur_ns END)"
      " AS total, max(dur_ns) AS mx FROM cuda_calls WHERE kernel IS NOT NULL{}"
      " GROUP BY kernel UNION ALL"
      " SELECT k.name, sum(s.calls), sum(s.total_ns), NULL FROM launch_stats s JOIN kernels k"
      " ON k.id = s.kernel_id WHERE 1{} GROUP BY k.name)"
      " GROUP BY kernel ORDER BY n DESC, total DESC, kernel LIMIT ?1">(w.sql_and(), w.sql_and(sql_in<"s launch_stats", "s.ts_ns">(), sql_in<"s launch_stats", "s.pid">())));
  st.bind(1, int64_t(limit));
  std::vector<KernelLaunchCount> out;
  while (st.step()) out.push_back({st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3)});
  return out;
}

std::vector<CopyTotal> copies_by_kind(Connection& db, const Window& w) {
  auto st = db.prepare(sql<
      "SELECT kind, count(*), coalesce(sum(bytes), 0), sum(dur_ns) FROM cuda_call_events "
      "WHERE kind IS NOT NULL AND op_id IN ({}){} GROUP BY kind ORDER BY 3 DESC">(op_ids_sql_list(OpClass::Copy),
                                                                                 w.sql_and()));
  std::vector<CopyTotal> out;
  while (st.step()) out.push_back({st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3)});
  return out;
}

std::vector<NcclRankTotal> nccl_rank_totals(Connection& db, const Window& w) {
  auto st = db.prepare(sql<
      "SELECT coalesce(comm_hash, ''), rank, max(nranks), count(*), coalesce(sum(bytes), 0), "
      "sum(dur_ns), max(dur_ns), coalesce(max(seq), -1) FROM nccl_calls WHERE rank IS NOT NULL{}"
      " GROUP BY 1, rank ORDER BY 1, rank">(w.sql_and()));
  std::vector<NcclRankTotal> out;
  while (st.step()) {
    NcclRankTotal r;
    r.comm_hash = st.col_text(0);
    r.rank = st.col_int(1);
    if (!st.col_null(2)) r.nranks = st.col_int(2);
    r.calls = st.col_int(3);
    r.bytes = st.col_int(4);
    r.total_ns = st.col_int(5);
    r.max_ns = st.col_int(6);
    r.latest_seq = st.col_int(7);
    out.push_back(r);
  }
  return out;
}

std::vector<NcclRankLateness> nccl_rank_lateness(Connection& db, const Window& w) {
  auto st = db.prepare(sql<
      "WITH s AS (SELECT comm_hash, seq, rank, ts_ns - min(ts_ns) OVER (PARTITION BY comm_hash, "
      "seq) AS late, count(*) OVER (PARTITION BY comm_hash, seq) AS ranks, "
      "max(nranks) OVER (PARTITION BY comm_hash, seq) AS want FROM nccl_calls WHERE rank IS NOT NULL"
      "{} AND seq IS NOT NULL AND comm_hash IS NOT NULL), "
      "full AS (SELECT * FROM s WHERE ranks >= coalesce(want, ranks) AND ranks > 1), "
      "last AS (SELECT comm_hash, max(seq) AS seq FROM full GROUP BY comm_hash) "
      "SELECT f.comm_hash, f.rank, count(*), avg(f.late), max(f.late), "
      "max(CASE WHEN f.seq = l.seq THEN f.late END) FROM full f JOIN last l USING (comm_hash) "
      "GROUP BY f.comm_hash, f.rank">(w.sql_and()));
  std::vector<NcclRankLateness> out;
  while (st.step()) {
    NcclRankLateness r;
    r.comm_hash = st.col_text(0);
    r.rank = st.col_int(1);
    r.matched = st.col_int(2);
    r.mean_late_ns = st.col_double(3);
    r.max_late_ns = st.col_int(4);
    if (!st.col_null(5)) r.latest_late_ns = st.col_int(5);
    out.push_back(r);
  }
  return out;
}

std::string call_listing_sql(bool nccl, const Window& w, bool by_op, std::optional<int64_t> top) {
  // time: the wall clock to the millisecond, for people; ts_ns for joins.
  const std::string and_op = by_op ? sql<" AND op = ?">() : std::string();
  const std::string order =
      top ? sql<" ORDER BY dur_ns DESC, ts_ns LIMIT {}">(*top) : sql<" ORDER BY ts_ns">();
  if (nccl)
    return sql<"SELECT strftime('%Y-%m-%dT%H:%M:%fZ', ts_ns / 1e9, 'unixepoch') AS time, "
               "ts_ns, dur_ns, pid, tid, op, rank, nranks, seq, bytes, datatype, redop, "
               "comm_hash, ret FROM nccl_calls WHERE 1{}{}{}">(w.sql_and(), and_op, order);
  return sql<"SELECT strftime('%Y-%m-%dT%H:%M:%fZ', ts_ns / 1e9, 'unixepoch') AS time, "
             "ts_ns, dur_ns, pid, tid, op, ret, bytes, kind, stream, kernel, stack_id "
             "FROM cuda_calls WHERE 1{}{}{}">(w.sql_and(), and_op, order);
}

}  // namespace causeway::store
