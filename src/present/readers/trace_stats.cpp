// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/trace_stats.h"

#include <algorithm>
#include <cmath>

#include "causeway/common/op_table.h"

namespace causeway::present {

int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = size_t(std::ceil(p / 100.0 * double(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

namespace {

// Ops counted in the kernel (--launch-sampling): exact calls, errors and time
// from launch_stats; percentiles from the log2 buckets (the lower bound of
// the bucket holding the rank); max from the kept rows, else the top bucket.
void merge_launch_aggregates(store::Connection& db, const TraceWindow& w, const std::string& op,
                             std::vector<OpLatency>& out) {
  const std::string filter = w.sql_and() + (op.empty() ? "" : " AND o.name = ?1");
  auto totals = db.prepare(
      "SELECT o.name, o.layer, sum(s.calls), sum(s.errors), sum(s.total_ns) FROM launch_stats s "
      "JOIN ops o ON o.id = s.op_id WHERE 1" + filter + " GROUP BY o.name");
  if (!op.empty()) totals.bind(1, op);
  while (totals.step()) {
    const std::string name = totals.col_text(0);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.op == name; });
    if (it == out.end()) it = out.insert(out.end(), OpLatency{.op = name, .layer = totals.col_text(1)});
    const int64_t plain = it->calls;
    it->calls += totals.col_int(2);
    it->errors += totals.col_int(3);
    it->total_ns += totals.col_int(4);
    if (plain) continue;  // plain rows of the op too (a full map): keep their percentiles
    auto buckets = db.prepare(
        "SELECT b.bucket, sum(b.calls) FROM launch_buckets b JOIN ops o ON o.id = b.op_id "
        "WHERE o.name = ?1" + w.sql_and("b.ts_ns", "b.pid") + " GROUP BY b.bucket ORDER BY b.bucket");
    buckets.bind(1, name);
    std::vector<std::pair<int64_t, int64_t>> hist;
    while (buckets.step()) hist.emplace_back(buckets.col_int(0), buckets.col_int(1));
    auto at = [&](double p) {
      const auto rank = int64_t(std::ceil(p / 100.0 * double(it->calls)));
      int64_t seen = 0;
      for (const auto& [b, n] : hist)
        if ((seen += n) >= rank) return int64_t(1) << b;
      return hist.empty() ? int64_t(0) : int64_t(1) << hist.back().first;
    };
    it->p50_ns = at(50);
    it->p95_ns = at(95);
    it->p99_ns = at(99);
    auto kept = db.prepare("SELECT max(dur_ns) FROM cuda_calls WHERE flags & 16 AND op = ?1" +
                           w.sql_and());
    kept.bind(1, name);
    it->max_ns = kept.step() && !kept.col_null(0) ? kept.col_int(0) : at(100);
  }
}

}  // namespace

std::vector<OpLatency> op_latencies(store::Connection& db, const TraceWindow& w,
                                    const std::string& op, bool keep_durations) {
  std::vector<OpLatency> out;
  // Sorted by op then duration, so each op's percentiles come from one pass.
  const std::string filter = w.sql_and() + (op.empty() ? "" : " AND op = ?1");
  // Launches kept as rows by --launch-sampling (flag 16) are a biased
  // sample: their op's numbers come from launch_stats/launch_buckets below.
  auto st = db.prepare(
      "SELECT op, layer, dur_ns, ret FROM (SELECT op, layer, dur_ns, ret, ts_ns, pid FROM "
      "cuda_calls WHERE flags & 16 = 0 UNION ALL SELECT op, 'nccl', dur_ns, ret, ts_ns, pid "
      "FROM nccl_calls) WHERE 1" + filter + " ORDER BY op, dur_ns");
  if (!op.empty()) st.bind(1, op);
  std::vector<int64_t> durs;
  auto finish = [&] {
    if (out.empty() || durs.empty()) return;
    auto& s = out.back();
    s.p50_ns = percentile(durs, 50);
    s.p95_ns = percentile(durs, 95);
    s.p99_ns = percentile(durs, 99);
    s.max_ns = durs.back();
    if (keep_durations) s.durations_ns = durs;
    durs.clear();
  };
  while (st.step()) {
    std::string name = st.col_text(0);
    if (out.empty() || out.back().op != name) {
      finish();
      out.push_back({.op = name, .layer = st.col_text(1)});
    }
    auto& s = out.back();
    const int64_t d = st.col_int(2);
    s.calls++;
    s.total_ns += d;
    s.errors += st.col_int(3) != 0;
    durs.push_back(d);
  }
  finish();
  merge_launch_aggregates(db, w, op, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::vector<KernelLaunches> top_kernels(store::Connection& db, const TraceWindow& w, int limit) {
  // Plain rows, plus launches counted in the kernel (--launch-sampling), whose
  // kept rows (flag 16) only give the max.
  auto st = db.prepare(
      "SELECT kernel, sum(n) AS n, sum(total) AS total, max(mx) FROM ("
      " SELECT kernel, sum(flags & 16 = 0) AS n, sum(CASE WHEN flags & 16 THEN 0 ELSE dur_ns END)"
      " AS total, max(dur_ns) AS mx FROM cuda_calls WHERE kernel IS NOT NULL" + w.sql_and() +
      " GROUP BY kernel UNION ALL"
      " SELECT k.name, sum(s.calls), sum(s.total_ns), NULL FROM launch_stats s JOIN kernels k"
      " ON k.id = s.kernel_id WHERE 1" + w.sql_and("s.ts_ns", "s.pid") + " GROUP BY k.name)"
      " GROUP BY kernel ORDER BY n DESC, total DESC, kernel LIMIT ?1");
  st.bind(1, int64_t(limit));
  std::vector<KernelLaunches> out;
  while (st.step())
    out.push_back({st.col_text(0), st.col_int(1), st.col_int(2), st.col_int(3)});
  return out;
}

std::vector<CopyDirection> memcpy_by_direction(store::Connection& db, const TraceWindow& w) {
  auto st = db.prepare(
      "SELECT kind, count(*), coalesce(sum(bytes), 0), sum(dur_ns) FROM cuda_call_events "
      "WHERE kind IS NOT NULL AND op_id IN (" +
      op_ids_sql_list(OpClass::Copy) + ")" + w.sql_and() +
      " GROUP BY kind ORDER BY 3 DESC");
  std::vector<CopyDirection> out;
  while (st.step()) {
    auto k = CopyKind(st.col_int(0));
    out.push_back({std::string(copy_kind_name(k)), st.col_int(1), st.col_int(2), st.col_int(3)});
  }
  return out;
}

std::vector<NcclRank> nccl_ranks(store::Connection& db, const TraceWindow& w) {
  const std::string where = " WHERE rank IS NOT NULL" + w.sql_and();
  auto st = db.prepare(
      "SELECT coalesce(comm_hash, ''), rank, max(nranks), count(*), coalesce(sum(bytes), 0), "
      "sum(dur_ns), max(dur_ns), coalesce(max(seq), -1) FROM nccl_calls" + where +
      " GROUP BY 1, rank ORDER BY 1, rank");
  std::vector<NcclRank> out;
  while (st.step()) {
    NcclRank r;
    r.comm_hash = st.col_text(0);
    r.rank = st.col_int(1);
    r.nranks = st.col_null(2) ? 0 : st.col_int(2);
    r.calls = st.col_int(3);
    r.bytes = st.col_int(4);
    r.total_ns = st.col_int(5);
    r.max_ns = st.col_int(6);
    r.latest_seq = st.col_int(7);
    out.push_back(r);
  }
  // Lateness: a collective is matched across ranks by (communicator, seq).
  auto late = db.prepare(
      "WITH s AS (SELECT comm_hash, seq, rank, ts_ns - min(ts_ns) OVER (PARTITION BY comm_hash, "
      "seq) AS late, count(*) OVER (PARTITION BY comm_hash, seq) AS ranks, "
      "max(nranks) OVER (PARTITION BY comm_hash, seq) AS want FROM nccl_calls" + where +
      " AND seq IS NOT NULL AND comm_hash IS NOT NULL), "
      "full AS (SELECT * FROM s WHERE ranks >= coalesce(want, ranks) AND ranks > 1), "
      "last AS (SELECT comm_hash, max(seq) AS seq FROM full GROUP BY comm_hash) "
      "SELECT f.comm_hash, f.rank, count(*), avg(f.late), max(f.late), "
      "max(CASE WHEN f.seq = l.seq THEN f.late END) FROM full f JOIN last l USING (comm_hash) "
      "GROUP BY f.comm_hash, f.rank");
  while (late.step()) {
    for (auto& r : out) {
      if (r.comm_hash != late.col_text(0) || r.rank != late.col_int(1)) continue;
      r.matched = late.col_int(2);
      r.mean_late_ns = int64_t(std::llround(late.col_double(3)));
      r.max_late_ns = late.col_int(4);
      r.latest_late_ns = late.col_null(5) ? 0 : late.col_int(5);
    }
  }
  return out;
}

}  // namespace causeway::present
