// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/explain_tables.h"

#include <algorithm>
#include <climits>

#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/model/records.h"
#include "causeway/store/checked_sql.h"

namespace causeway::store {

std::optional<std::pair<int64_t, int64_t>> activity_bounds(Connection& db) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  model::for_each_table([&]<typename T>() {
    if (!T::kTable.bounds_window) return;
    auto st = db.prepare(sql<"SELECT min(ts_ns), max(ts_ns) FROM {}">(T::kTable.name));
    if (st.step() && !st.col_null(0)) {
      lo = std::min(lo, st.col_int(0));
      hi = std::max(hi, st.col_int(1));
    }
  });
  if (lo == INT64_MAX) return std::nullopt;
  return std::pair{lo, hi};
}

void create_launch_baselines(Connection& db, const Window& w) {
  db.exec(sql<"PRAGMA temp_store = MEMORY">());
  db.exec(sql<"DROP TABLE IF EXISTS temp.baseline">());
  db.exec(sql<"DROP TABLE IF EXISTS temp.slow">());
  db.exec(sql<"CREATE TEMP TABLE baseline (pid INTEGER, op_id INTEGER, kernel_id INTEGER, count INTEGER,"
              " p50 INTEGER, p95 INTEGER, p99 INTEGER, max_ns INTEGER, total_ns INTEGER)">());
  const std::string in_window = w.sql_where();
  // p50, p95, p99: linear interpolation inside the log2 bucket that holds the
  // rank max(1, (n * P + 99) / 100).
  db.exec(sql<
      "INSERT INTO baseline WITH "
      "s AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, sum(calls) AS n,"
      " sum(total_ns) AS total FROM launch_stats WHERE {} GROUP BY 1, 2, 3), "
      "hb AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, bucket, sum(calls) AS c"
      " FROM launch_buckets WHERE {} GROUP BY 1, 2, 3, 4), "
      "cum AS (SELECT hb.*, s.n, s.total, sum(c) OVER (PARTITION BY pid, op_id, k ORDER BY bucket)"
      " AS upto FROM hb JOIN s USING (pid, op_id, k)), "
      "kept AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, max(dur_ns) AS mx"
      " FROM cuda_call_events WHERE flags & {} AND {}"
      " GROUP BY 1, 2, 3) "
      "SELECT cum.pid, cum.op_id, cum.k, max(n)"
      ", max(CASE WHEN upto >= max(1, (n * 50 + 99) / 100) AND upto - c < max(1, (n * 50 + 99) / 100)"
      " THEN (1 << bucket) + ((1 << bucket) * (2 * (max(1, (n * 50 + 99) / 100)"
      " - (upto - c)) - 1)) / (2 * c) END) AS p50"
      ", max(CASE WHEN upto >= max(1, (n * 95 + 99) / 100) AND upto - c < max(1, (n * 95 + 99) / 100)"
      " THEN (1 << bucket) + ((1 << bucket) * (2 * (max(1, (n * 95 + 99) / 100)"
      " - (upto - c)) - 1)) / (2 * c) END) AS p95"
      ", max(CASE WHEN upto >= max(1, (n * 99 + 99) / 100) AND upto - c < max(1, (n * 99 + 99) / 100)"
      " THEN (1 << bucket) + ((1 << bucket) * (2 * (max(1, (n * 99 + 99) / 100)"
      " - (upto - c)) - 1)) / (2 * c) END) AS p99"
      ", max(coalesce(kept.mx, 0), 1 << max(bucket)), max(total)"
      " FROM cum LEFT JOIN kept USING (pid, op_id, k) GROUP BY cum.pid, cum.op_id, cum.k">(
      in_window, in_window, CW_CALL_AGGREGATED, in_window));
}

std::set<CallKey> baseline_keys(Connection& db) {
  std::set<CallKey> out;
  auto st = db.prepare(sql<"SELECT pid, op_id, kernel_id FROM baseline">());
  while (st.step()) out.emplace(st.col_int(0), st.col_int(1), st.col_int(2));
  return out;
}

void each_baseline_call(Connection& db, const Window& w, const std::function<void(const BaselineCall&)>& f) {
  // A framework's tensor allocations are another level (the driver calls
  // they make are rows of their own).
  auto st = db.prepare(sql<"SELECT pid, op_id, coalesce(kernel_id, -1), dur_ns, ts_ns, stack_id, flags, 1"
                           " FROM cuda_call_events WHERE {} AND op_id NOT IN ({})"
                           " UNION ALL SELECT pid, op_id, -1, dur_ns, ts_ns, stack_id, 0, 0 FROM nccl_call_events"
                           " WHERE {}">(w.sql_where(), op_ids_sql_list(OpClass::Tensor), w.sql_where()));
  BaselineCall c;
  while (st.step()) {
    c.key = {st.col_int(0), st.col_int(1), st.col_int(2)};
    c.dur_ns = st.col_int(3);
    c.ts_ns = st.col_int(4);
    c.stack_id = st.col_null(5) ? std::nullopt : std::optional(st.col_int(5));
    c.flags = st.col_int(6);
    c.cuda = st.col_int(7) != 0;
    f(c);
  }
}

void write_call_tables(Connection& db, const std::vector<FirstCall>& firsts, const std::vector<GpuSlot>& slots,
                       const std::vector<BaselineRow>& baselines) {
  db.exec(sql<"DROP TABLE IF EXISTS temp.firsts">());
  db.exec(sql<"DROP TABLE IF EXISTS temp.gpu_slots">());
  db.exec(sql<"CREATE TEMP TABLE firsts (pid INTEGER, op_id INTEGER, kernel_id INTEGER, ts_ns INTEGER,"
              " dur_ns INTEGER, stack_id INTEGER)">());
  db.exec(sql<"CREATE TEMP TABLE gpu_slots (b INTEGER, pid INTEGER, n INTEGER)">());
  in_transaction(db, [&] {
    auto ins = db.prepare(sql<"INSERT INTO firsts VALUES (?,?,?,?,?,?)">());
    for (const auto& f : firsts) {
      ins.bind(1, std::get<0>(f.key)).bind(2, std::get<1>(f.key)).bind(3, std::get<2>(f.key));
      ins.bind(4, f.ts_ns).bind(5, f.dur_ns).bind(6, f.stack_id).exec();
    }
    auto slot = db.prepare(sql<"INSERT INTO gpu_slots VALUES (?,?,?)">());
    for (const auto& s : slots) slot.bind(1, s.b).bind(2, s.pid).bind(3, s.n).exec();
    auto base = db.prepare(sql<"INSERT INTO baseline VALUES (?,?,?,?,?,?,?,?,?)">());
    for (const auto& b : baselines) {
      base.bind(1, std::get<0>(b.key)).bind(2, std::get<1>(b.key)).bind(3, std::get<2>(b.key)).bind(4, b.count);
      base.bind(5, b.p50).bind(6, b.p95).bind(7, b.p99).bind(8, b.max_ns);
      base.bind(9, b.total_ns).exec();
    }
  });
  db.exec(sql<"CREATE INDEX temp.baseline_key ON baseline(pid, op_id, kernel_id)">());
}

void create_slow_table(Connection& db, const Window& w, int factor, int64_t min_excess_ns, int64_t min_calls) {
  // Tested on each row before its baseline is looked up: most calls are
  // fast (the first `c.dur_ns >=` of each WHERE).
  const std::string in_window = w.sql_where("c.");
  db.exec(sql<
      "CREATE TEMP TABLE slow AS "
      "SELECT c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns AS end_ns, c.pid, c.tid, c.op_id,"
      " b.kernel_id, c.stack_id, b.p50, c.session_id FROM cuda_call_events c JOIN baseline b"
      " ON b.pid = c.pid AND b.op_id = c.op_id AND b.kernel_id = coalesce(c.kernel_id, -1)"
      " WHERE {} AND c.dur_ns >= {} AND b.count >= {} AND c.dur_ns >= {} * b.p50 AND c.dur_ns - b.p50 >= {}"
      " UNION ALL "
      "SELECT c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns, c.pid, c.tid, c.op_id, -1, c.stack_id, b.p50,"
      " c.session_id FROM nccl_call_events c JOIN baseline b"
      " ON b.pid = c.pid AND b.op_id = c.op_id AND b.kernel_id = -1"
      " WHERE {} AND c.dur_ns >= {} AND b.count >= {} AND c.dur_ns >= {} * b.p50 AND c.dur_ns - b.p50 >= {}">(
      in_window, min_excess_ns, min_calls, factor, min_excess_ns, in_window, min_excess_ns, min_calls, factor,
      min_excess_ns));
  db.exec(sql<"CREATE INDEX temp.slow_pid ON slow(pid, op_id)">());
}

int64_t rows_in_window(Connection& db, const std::string& table, const Window& w) {
  return db.query_int(sql<"SELECT count(*) FROM {} WHERE {}">(table, w.sql_where())).value_or(0);
}

std::vector<std::pair<int64_t, int64_t>> baseline_calls_by_op(Connection& db) {
  auto st = db.prepare(sql<"SELECT op_id, sum(count) FROM baseline GROUP BY op_id">());
  std::vector<std::pair<int64_t, int64_t>> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_int(1));
  return out;
}

int64_t baseline_processes(Connection& db) {
  return db.query_int(sql<"SELECT count(DISTINCT pid) FROM baseline">()).value_or(0);
}

int64_t slow_call_count(Connection& db) { return db.query_int(sql<"SELECT count(*) FROM slow">()).value_or(0); }

std::vector<CallKey> slowest_groups(Connection& db, int limit) {
  auto st = db.prepare(sql<"SELECT pid, op_id, kernel_id FROM slow GROUP BY 1, 2, 3 "
                           "ORDER BY sum(dur_ns - p50) DESC LIMIT {}">(limit));
  std::vector<CallKey> out;
  while (st.step()) out.emplace_back(st.col_int(0), st.col_int(1), st.col_int(2));
  return out;
}

std::vector<std::pair<std::string, int64_t>> drops_by_source(Connection& db) {
  auto st = db.prepare(sql<"SELECT source, sum(count) FROM drops GROUP BY source HAVING sum(count) > 0">());
  std::vector<std::pair<std::string, int64_t>> out;
  while (st.step()) out.emplace_back(st.col_text(0), st.col_int(1));
  return out;
}

int64_t op_counts_dropped(Connection& db) {
  return db.query_int(sql<"SELECT coalesce(sum(dropped), 0) FROM op_counts">()).value_or(0);
}

namespace {

std::string key_where(uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id) {
  std::string where = sql<"pid = {} AND op_id = {}">(pid, op_id);
  if (kernel_id) where += sql<" AND kernel_id = {}">(*kernel_id);
  return where;
}

}  // namespace

BaselineOf baseline_of(Connection& db, uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id) {
  auto st = db.prepare(sql<"SELECT sum(count), max(p50), max(p99), max(max_ns), sum(total_ns) FROM baseline WHERE {}">(
      key_where(pid, op_id, kernel_id)));
  BaselineOf b;
  while (st.step()) b = {st.col_int(0), st.col_int(1), st.col_int(2), st.col_int(3), st.col_int(4)};
  return b;
}

SlowOf slow_of(Connection& db, uint32_t pid, int64_t op_id, std::optional<int64_t> kernel_id) {
  auto st = db.prepare(sql<"SELECT count(*), sum(dur_ns), avg(dur_ns * 1.0 / p50), min(ts_ns), max(ts_ns) FROM slow "
                           "WHERE {}">(key_where(pid, op_id, kernel_id)));
  SlowOf s;
  while (st.step()) {
    s.calls = st.col_int(0);
    if (s.calls == 0) continue;
    s.total_ns = st.col_int(1);
    s.mean_ratio = st.col_double(2);
    s.first_ts_ns = st.col_int(3);
    s.last_ts_ns = st.col_int(4);
  }
  return s;
}

int64_t baseline_p50(Connection& db, uint32_t pid, int64_t op_id) {
  return db.query_int(sql<"SELECT coalesce(max(p50), 0) FROM baseline WHERE pid = {} AND op_id = {}">(pid, op_id))
      .value_or(0);
}

int64_t baseline_class_p50(Connection& db, uint32_t pid, const std::string& class_op_ids) {
  return db.query_int(sql<"SELECT coalesce(sum(p50 * count) / max(1, sum(count)), 0) FROM baseline WHERE pid = {}"
                          " AND op_id IN ({})">(pid, class_op_ids))
      .value_or(0);
}

std::vector<SlowByProcess> slow_by_process(Connection& db) {
  auto st = db.prepare(sql<"SELECT pid, count(*), sum(dur_ns - p50) FROM slow GROUP BY pid ORDER BY 3 DESC">());
  std::vector<SlowByProcess> out;
  while (st.step()) out.push_back({uint32_t(st.col_int(0)), st.col_int(1), st.col_int(2)});
  return out;
}

int64_t slowest_op(Connection& db, uint32_t pid) {
  return db.query_int(sql<"SELECT op_id FROM slow WHERE pid = {} GROUP BY op_id ORDER BY sum(dur_ns - p50) DESC"
                          " LIMIT 1">(pid))
      .value_or(0);
}

}  // namespace causeway::store
