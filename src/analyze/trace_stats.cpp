// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/trace_stats.h"

#include <algorithm>
#include <cmath>

#include "causeway/common/op_table.h"

namespace causeway::analyze {

int64_t percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = size_t(std::ceil(p / 100.0 * double(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

namespace {

// Ops counted in the kernel (--launch-sampling): exact calls, errors and time
// from launch_stats; percentiles from the log2 buckets (the lower bound of
// the bucket holding the rank); max from the kept rows, else the top bucket.
void merge_launch_aggregates(store::Connection& db, const store::Window& w, const std::string& op,
                             std::vector<OpLatency>& out) {
  for (const auto& t : store::launch_totals(db, w, op)) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& s) { return s.op == t.op; });
    if (it == out.end()) it = out.insert(out.end(), OpLatency{.op = t.op, .layer = t.layer});
    const int64_t plain = it->calls;
    it->calls += t.calls;
    it->errors += t.errors;
    it->total_ns += t.total_ns;
    if (plain) continue;  // plain rows of the op too (a full map): keep their percentiles
    const auto hist = store::launch_buckets(db, w, t.op);
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
    it->max_ns = store::longest_kept_launch_ns(db, w, t.op).value_or(at(100));
  }
}

}  // namespace

std::vector<OpLatency> op_latencies(store::Connection& db, const store::Window& w,
                                    const std::string& op, bool keep_durations) {
  std::vector<OpLatency> out;
  // The rows come sorted by op then duration, so each op's percentiles come
  // from one pass.
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
  store::each_call_duration(db, w, op, [&](const store::CallDuration& c) {
    if (out.empty() || out.back().op != c.op) {
      finish();
      out.push_back({.op = c.op, .layer = c.layer});
    }
    auto& s = out.back();
    s.calls++;
    s.total_ns += c.dur_ns;
    s.errors += c.ret != 0;
    durs.push_back(c.dur_ns);
  });
  finish();
  merge_launch_aggregates(db, w, op, out);
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::vector<KernelLaunches> top_kernels(store::Connection& db, const store::Window& w, int limit) {
  return store::kernel_launch_counts(db, w, limit);
}

std::vector<CopyDirection> memcpy_by_direction(store::Connection& db, const store::Window& w) {
  std::vector<CopyDirection> out;
  for (const auto& c : store::copies_by_kind(db, w))
    out.push_back({std::string(copy_kind_name(CopyKind(c.kind))), c.calls, c.bytes, c.total_ns});
  return out;
}

std::vector<NcclRank> nccl_ranks(store::Connection& db, const store::Window& w) {
  std::vector<NcclRank> out;
  for (const auto& t : store::nccl_rank_totals(db, w)) {
    NcclRank r;
    r.comm_hash = t.comm_hash;
    r.rank = t.rank;
    r.nranks = t.nranks.value_or(0);
    r.calls = t.calls;
    r.bytes = t.bytes;
    r.total_ns = t.total_ns;
    r.max_ns = t.max_ns;
    r.latest_seq = t.latest_seq;
    out.push_back(r);
  }
  for (const auto& l : store::nccl_rank_lateness(db, w)) {
    for (auto& r : out) {
      if (r.comm_hash != l.comm_hash || r.rank != l.rank) continue;
      r.matched = l.matched;
      r.mean_late_ns = int64_t(std::llround(l.mean_late_ns));
      r.max_late_ns = l.max_late_ns;
      r.latest_late_ns = l.latest_late_ns.value_or(0);
    }
  }
  return out;
}

}  // namespace causeway::analyze
