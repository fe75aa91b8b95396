// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/engine.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

#include "causeway/common/error.h"
#include "causeway/events.h"
#include "causeway/store/migrations.h"
#include "causeway/store/sqlite.h"
#include "rule_context.h"

namespace causeway::analyze {

std::string_view severity_name(Severity s) {
  switch (s) {
    case Severity::High: return "HIGH";
    case Severity::Medium: return "MEDIUM";
    case Severity::Low: return "LOW";
  }
  return "LOW";
}

std::string UserFrame::text() const {
  return func + "() at " + file + (line ? ":" + std::to_string(line) : "");
}

namespace {

// The whole file when no bound is given: first to last event of any kind.
Window resolve_window(store::Connection& db, const ExplainOptions& o) {
  Window w;
  w.pid = o.pid;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const char* t : {"cuda_call_events", "nccl_call_events", "offcpu_events", "io_requests",
                        "launch_stats"}) {
    auto st = db.prepare(std::string("SELECT min(ts_ns), max(ts_ns) FROM ") + t);
    if (st.step() && !st.col_null(0)) {
      lo = std::min(lo, st.col_int(0));
      hi = std::max(hi, st.col_int(1));
    }
  }
  if (lo == INT64_MAX) lo = hi = 0;
  w.from_ns = o.from_ns.value_or(lo);
  w.to_ns = o.to_ns.value_or(hi + 1);
  if (w.to_ns < w.from_ns)
    throw UsageError("the window ends before it starts (--from is after --to)");
  return w;
}

void build_temp_tables(const RuleContext& ctx) {
  auto& db = ctx.db;
  db.exec("PRAGMA temp_store = MEMORY");
  db.exec("DROP TABLE IF EXISTS temp.baseline");
  db.exec("DROP TABLE IF EXISTS temp.slow");
  // Nearest-rank percentiles with window functions: SQLite sorts, we never
  // hold the calls in memory. Launches aggregated in the kernel
  // (--launch-sampling) take theirs from the log2 histograms instead, since
  // their recorded rows are a biased sample (every slow one, one in N).
  const std::string agg = std::to_string(CW_CALL_AGGREGATED);
  const std::string pct = [] {
    // Linear interpolation inside the log2 bucket that holds the rank.
    std::string s;
    for (int p : {50, 95, 99}) {
      const std::string rank = "max(1, (n * " + std::to_string(p) + " + 99) / 100)";
      s += ", max(CASE WHEN upto >= " + rank + " AND upto - c < " + rank +
           " THEN (1 << bucket) + ((1 << bucket) * (2 * (" + rank +
           " - (upto - c)) - 1)) / (2 * c) END) AS p" + std::to_string(p);
    }
    return s;
  }();
  db.exec(
      "CREATE TEMP TABLE baseline AS WITH "
      "s AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, sum(calls) AS n,"
      " sum(total_ns) AS total FROM launch_stats WHERE " + ctx.in_window() + " GROUP BY 1, 2, 3), "
      "hb AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, bucket, sum(calls) AS c"
      " FROM launch_buckets WHERE " + ctx.in_window() + " GROUP BY 1, 2, 3, 4), "
      "cum AS (SELECT hb.*, s.n, s.total, sum(c) OVER (PARTITION BY pid, op_id, k ORDER BY bucket)"
      " AS upto FROM hb JOIN s USING (pid, op_id, k)), "
      "kept AS (SELECT pid, op_id, coalesce(kernel_id, -1) AS k, max(dur_ns) AS mx"
      " FROM cuda_call_events WHERE flags & " + agg + " AND " + ctx.in_window() +
      " GROUP BY 1, 2, 3), "
      "a AS (SELECT cum.pid, cum.op_id, cum.k AS kernel_id, max(n) AS count" + pct +
      ", max(coalesce(kept.mx, 0), 1 << max(bucket)) AS max_ns, max(total) AS total_ns"
      " FROM cum LEFT JOIN kept USING (pid, op_id, k) GROUP BY cum.pid, cum.op_id, cum.k), "
      "c AS ("
      " SELECT pid, op_id, coalesce(kernel_id, -1) AS k, dur_ns FROM cuda_call_events WHERE " +
      ctx.in_window() + " AND flags & " + agg + " = 0"
      " UNION ALL SELECT pid, op_id, -1, dur_ns FROM nccl_call_events WHERE " + ctx.in_window() +
      "), r AS (SELECT pid, op_id, k, dur_ns, "
      " row_number() OVER (PARTITION BY pid, op_id, k ORDER BY dur_ns) AS rn,"
      " count(*) OVER (PARTITION BY pid, op_id, k) AS n FROM c) "
      "SELECT * FROM a UNION ALL "
      "SELECT pid, op_id, k AS kernel_id, n AS count,"
      " max(CASE WHEN rn = max(1, (n * 50 + 99) / 100) THEN dur_ns END) AS p50,"
      " max(CASE WHEN rn = max(1, (n * 95 + 99) / 100) THEN dur_ns END) AS p95,"
      " max(CASE WHEN rn = max(1, (n * 99 + 99) / 100) THEN dur_ns END) AS p99,"
      " max(dur_ns) AS max_ns, sum(dur_ns) AS total_ns FROM r"
      " WHERE (pid, op_id, k) NOT IN (SELECT pid, op_id, kernel_id FROM a)"
      " GROUP BY pid, op_id, k");
  db.exec("CREATE INDEX temp.baseline_key ON baseline(pid, op_id, kernel_id)");
  const std::string slow_if = " AND b.count >= " + std::to_string(kBaselineMinCalls) +
                              " AND c.dur_ns >= " + std::to_string(kSlowFactor) +
                              " * b.p50 AND c.dur_ns - b.p50 >= " +
                              std::to_string(kSlowMinExcessNs);
  db.exec(
      "CREATE TEMP TABLE slow AS "
      "SELECT c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns AS end_ns, c.pid, c.tid, c.op_id,"
      " b.kernel_id, c.stack_id, b.p50 FROM cuda_call_events c JOIN baseline b"
      " ON b.pid = c.pid AND b.op_id = c.op_id AND b.kernel_id = coalesce(c.kernel_id, -1)"
      " WHERE " + ctx.in_window("c.") + slow_if +
      " UNION ALL "
      "SELECT c.ts_ns, c.dur_ns, c.ts_ns + c.dur_ns, c.pid, c.tid, c.op_id, -1, c.stack_id, b.p50"
      " FROM nccl_call_events c JOIN baseline b"
      " ON b.pid = c.pid AND b.op_id = c.op_id AND b.kernel_id = -1"
      " WHERE " + ctx.in_window("c.") + slow_if);
  db.exec("CREATE INDEX temp.slow_pid ON slow(pid, op_id)");
}

DataSummary summarize(const RuleContext& ctx) {
  DataSummary d;
  auto count = [&](const char* table) {
    return ctx.scalar(std::string("SELECT count(*) FROM ") + table + " WHERE " + ctx.in_window());
  };
  // A launch aggregated in the kernel is counted in launch_stats, whether or
  // not it was also recorded.
  d.calls = ctx.scalar("SELECT count(*) FROM cuda_call_events WHERE " + ctx.in_window() +
                       " AND flags & " + std::to_string(CW_CALL_AGGREGATED) + " = 0") +
            ctx.scalar("SELECT coalesce(sum(calls), 0) FROM launch_stats WHERE " + ctx.in_window());
  d.nccl_calls = count("nccl_call_events");
  d.offcpu_intervals = count("offcpu_events");
  d.io_requests = count("io_requests");
  d.tcp_retransmits = count("tcp_retransmits");
  d.reclaims = count("reclaims");
  d.processes = ctx.scalar(
      "SELECT count(*) FROM (SELECT pid FROM cuda_call_events WHERE " + ctx.in_window() +
      " UNION SELECT pid FROM nccl_call_events WHERE " + ctx.in_window() +
      " UNION SELECT pid FROM launch_stats WHERE " + ctx.in_window() + ")");
  d.slow_calls = ctx.scalar("SELECT count(*) FROM slow");
  std::vector<std::tuple<int64_t, int64_t, int64_t>> groups;
  ctx.each("SELECT pid, op_id, kernel_id FROM slow GROUP BY 1, 2, 3 "
           "ORDER BY sum(dur_ns - p50) DESC LIMIT 10",
           [&](store::Statement& s) { groups.emplace_back(s.col_int(0), s.col_int(1), s.col_int(2)); });
  for (const auto& [pid, op, kernel] : groups)
    d.slowest.push_back(ctx.symptom(uint32_t(pid), op, kernel >= 0 ? std::optional(kernel) : std::nullopt));
  // Drops are counted over the whole file: a drop anywhere makes every
  // count a lower bound, and drop records carry no pid.
  ctx.each("SELECT source, sum(count) FROM drops GROUP BY source HAVING sum(count) > 0",
           [&](store::Statement& s) { d.drops_by_source[s.col_text(0)] += s.col_int(1); });
  int64_t op_dropped = ctx.scalar("SELECT coalesce(sum(dropped), 0) FROM op_counts");
  if (op_dropped > 0 && !d.drops_by_source.count("libcall"))
    d.drops_by_source["op_counts"] = op_dropped;
  for (const auto& [src, n] : d.drops_by_source) d.drops += n;
  return d;
}

}  // namespace

Explanation explain(store::Connection& db, const ExplainOptions& opts) {
  Explanation e;
  e.db_path = db.path();
  if (store::check_schema_version(db) == 0) {
    e.window = Window{0, 0, opts.pid};
    return e;  // an empty file: nothing traced yet
  }
  e.window = resolve_window(db, opts);
  RuleContext ctx(db, e.window);
  build_temp_tables(ctx);
  e.data = summarize(ctx);
  for (const auto& rule : all_rules()) {
    for (auto& c : rule.run(ctx)) {
      c.root_cause = rule.root_cause;
      e.chains.push_back(std::move(c));
    }
  }
  std::stable_sort(e.chains.begin(), e.chains.end(), [](const auto& a, const auto& b) {
    if (a.severity != b.severity) return a.severity > b.severity;
    return a.impact_ns > b.impact_ns;
  });
  if (opts.top && e.chains.size() > opts.top) e.chains.resize(opts.top);
  return e;
}

Explanation explain_file(const std::string& path, const ExplainOptions& opts) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw UsageError("no trace at " + path + " (record one with `causeway trace`, or pass --db)");
  if (S_ISDIR(st.st_mode)) throw UsageError(path + " is a directory, not a trace file");
  store::Connection db(path, store::Connection::Mode::ReadOnly);
  return explain(db, opts);
}

}  // namespace causeway::analyze
