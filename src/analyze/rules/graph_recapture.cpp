// SPDX-License-Identifier: Apache-2.0
// graph_recapture: CUDA graphs captured and instantiated again and again
// instead of captured once and replayed. A capture costs from its
// BeginCapture to its EndCapture (everything issued in between is recorded,
// not run), plus the instantiation (every instantiate variant), plus the
// frees that give each capture's private memory pool back (its allocations
// fall inside the capture): one cost, on the loop's critical path where it
// has one, so it ranks against launch_bound in the same currency.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/store/memory_reads.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kMinCaptures = 10;  // a stable program captures once per shape

store::OpIds ids(std::initializer_list<const char*> names) {
  store::OpIds out;
  for (const char* n : names)
    if (const OpSpec* op = find_op(n)) out.push_back(op->id);
  return out;
}

struct Span {
  int64_t from, to;
  uint32_t tid;
};

// One process's captures and instantiations in the window.
struct Captures {
  std::vector<Span> captures;             // BeginCapture to EndCapture
  std::map<int64_t, int64_t> per_stream;  // stream -> captures
  std::vector<Span> insts_seen;
  int64_t instantiations = 0;
};

// What is judged: on the loop's critical path where the process has one (the
// currency of launch_bound and the other path chains it ranks against), the
// loop thread's calls over the judged time; without a path, every thread's
// over the process's span.
struct Judged {
  const ProcessPath* path = nullptr;
  int64_t from = INT64_MIN, to = INT64_MAX;

  int64_t clipped(int64_t a, int64_t b) const {
    return std::max<int64_t>(0, std::min(b, to) - std::max(a, from));
  }
  bool on_path(uint32_t tid) const { return !path || tid == path->tid; }
};

// The graphs' private memory pools: allocations made while capturing and the
// frees that give them back.
struct Pools {
  int64_t allocs_inside = 0, pool_frees = 0, pool_alloc_ns = 0, pool_free_ns = 0;
};

// One process's re-captures, as its chain tells them.
struct Recaptures {
  uint32_t pid_n;
  Captures cap;
  Judged judged;
  int64_t capture_ns = 0, inst_ns = 0;  // judged
  Pools pools;
};

// A capture is a BeginCapture and the next EndCapture of the same session,
// thread and stream.
Captures read_captures(const RuleContext& ctx, uint32_t pid, const store::CaptureOps& ops) {
  Captures cap;
  std::map<std::tuple<int64_t, uint32_t, int64_t>, int64_t> open;  // (session, tid, stream) -> begin
  store::each_capture_call(ctx.db, ctx.store_window(), pid, ops, [&](const store::CaptureCall& s) {
    const auto key = std::make_tuple(s.session, uint32_t(s.tid), s.stream);
    const int64_t ts = s.ts_ns, dur = s.dur_ns;
    if (s.begin) {
      open[key] = ts;
    } else if (s.end) {
      auto it = open.find(key);
      if (it == open.end()) return;
      cap.captures.push_back({it->second, ts + dur, std::get<1>(key)});
      cap.per_stream[std::get<2>(key)]++;
      open.erase(it);
    } else {
      cap.instantiations++;
      cap.insts_seen.push_back({ts, ts + dur, std::get<1>(key)});
    }
  });
  return cap;
}

Judged judged_time(const RuleContext& ctx, uint32_t pid_n) {
  Judged j;
  for (const auto& p : ctx.paths)
    if (p.pid == pid_n && p.judged_enough() && p.to_ns > p.from_ns) j.path = &p;
  if (j.path) {
    j.from = j.path->from_ns;
    j.to = j.path->to_ns;
  }
  return j;
}

// The judged time of `spans`.
int64_t judged_ns(const std::vector<Span>& spans, const Judged& j) {
  int64_t ns = 0;
  for (const auto& w : spans)
    if (j.on_path(w.tid)) ns += j.clipped(w.from, w.to);
  return ns;
}

// The graphs' private memory pools: allocations made while capturing
// (already inside the capture's time), and the frees that give those
// blocks back (torch.cuda.graph's empty_cache() before the next capture;
// cudaFree waits for the device), matched by address. allocator_churn
// reports the same calls on their own; here they are the re-capture's.
// Sorts `captures` by start.
Pools graph_pools(const RuleContext& ctx, uint32_t pid, std::vector<Span>& captures, const Judged& j) {
  const std::vector<store::AllocFreeCall> calls = store::alloc_free_calls(ctx.db, ctx.store_window(), pid);
  std::sort(captures.begin(), captures.end(), [](const Span& a, const Span& b) { return a.from < b.from; });
  auto inside = [&](int64_t ts) {
    auto it = std::upper_bound(captures.begin(), captures.end(), ts,
                               [](int64_t t, const Span& w) { return t < w.from; });
    return it != captures.begin() && ts < std::prev(it)->to;
  };
  Pools pl;
  std::set<int64_t> pool;
  int64_t frees_outside = 0, frees_outside_ns = 0, allocs_all = 0, unaddressed = 0;
  for (const auto& c : calls) {
    const int64_t end = c.ts_ns + c.dur_ns;
    if (c.alloc) {
      allocs_all++;
      if (!inside(c.ts_ns)) continue;
      pl.allocs_inside++;
      if (j.on_path(c.tid)) pl.pool_alloc_ns += j.clipped(c.ts_ns, end);
      if (c.addr) pool.insert(*c.addr);
      else unaddressed++;
    } else if (!inside(c.ts_ns)) {
      frees_outside++;
      if (j.on_path(c.tid)) frees_outside_ns += j.clipped(c.ts_ns, end);
      if (c.addr && pool.erase(*c.addr)) {
        pl.pool_frees++;
        if (j.on_path(c.tid)) pl.pool_free_ns += j.clipped(c.ts_ns, end);
      }
    }
  }
  // Without addresses (an older trace): the frees outside captures in
  // the proportion of all allocations that were the pools'.
  if (pl.allocs_inside && unaddressed == pl.allocs_inside && allocs_all) {
    pl.pool_frees = frees_outside * pl.allocs_inside / allocs_all;
    pl.pool_free_ns = frees_outside_ns * pl.allocs_inside / allocs_all;
  }
  return pl;
}

// The chain: what capturing, instantiating and freeing the pools cost, as a
// share of the judged time.
CausalChain recapture_chain(const RuleContext& ctx, const store::CaptureOps& ops, const Recaptures& r) {
  const uint32_t pid_n = r.pid_n;
  const std::vector<Span>& captures = r.cap.captures;
  const int64_t instantiations = r.cap.instantiations, capture_ns = r.capture_ns, inst_ns = r.inst_ns;
  const Pools& pl = r.pools;
  const ProcessPath* path = r.judged.path;
  const int64_t cost = capture_ns + inst_ns + pl.pool_free_ns;
  const double share =
      double(cost) / double(path ? std::max<int64_t>(1, path->to_ns - path->from_ns) : ctx.process_span_ns(pid_n));
  int64_t steps = 0;
  for (const auto& a : ctx.accounts)
    if (a.pid == pid_n) steps = std::max(steps, a.steps);
  const int64_t launches = store::graph_launches(ctx.db, pid_n);
  CausalChain c;
  c.severity = share >= 0.1 ? Severity::High : share >= 0.02 ? Severity::Medium : Severity::Low;
  c.impact_ns = cost;
  c.symptom = ctx.symptom(pid_n, instantiations ? store::most_called_op(ctx.db, pid_n, ops.instantiates)
                                                : find_op("cudaStreamBeginCapture")->id);
  const auto busiest = std::max_element(r.cap.per_stream.begin(), r.cap.per_stream.end(),
                                        [](const auto& x, const auto& y) { return x.second < y.second; });
  char sbuf[32];
  std::snprintf(sbuf, sizeof sbuf, "0x%llx", static_cast<unsigned long long>(busiest->first));
  c.evidence.push_back({std::to_string(captures.size()) + " captures (" + std::to_string(busiest->second) +
                            " on stream " + sbuf + ")" +
                            (steps >= 3 ? ", " + fixed1(double(captures.size()) / double(steps)) + " per step" : "") +
                            ", " + std::to_string(instantiations) + " instantiations: " + ms(capture_ns) +
                            " capturing (BeginCapture to EndCapture), " + ms(inst_ns) + " instantiating and " +
                            ms(pl.pool_free_ns) + " freeing the graphs' pools: " + pct(share) +
                            (path ? " of the step on the critical path" : " of the process's time"),
                        {{"captures", int64_t(captures.size())}, {"stream", busiest->first},
                         {"instantiations", instantiations}, {"capture_ns", capture_ns},
                         {"instantiate_ns", inst_ns}, {"pool_free_ns", pl.pool_free_ns}, {"share", share},
                         {"on_path", path != nullptr},
                         {"captures_per_step", steps >= 3 ? double(captures.size()) / double(steps) : 0.0}}});
  if (instantiations)
    c.evidence.push_back({std::to_string(launches) + " graph launches: each graph replayed " +
                              fixed1(double(launches) / double(instantiations)) + " times",
                          {{"graph_launches", launches},
                           {"replays_per_graph", double(launches) / double(instantiations)}}});
  if (pl.allocs_inside)
    c.evidence.push_back({std::to_string(pl.allocs_inside) + " allocations made while capturing (" +
                              ms(pl.pool_alloc_ns) + ", inside the capture time) and " + std::to_string(pl.pool_frees) +
                              " frees giving them back (" + ms(pl.pool_free_ns) +
                              "): each capture's own memory pool, allocated and freed again with every capture",
                          {{"allocations_in_captures", pl.allocs_inside}, {"pool_alloc_ns", pl.pool_alloc_ns},
                           {"pool_frees", pl.pool_frees}, {"pool_free_ns", pl.pool_free_ns}}});
  c.frame = ctx.top_frame(store::capture_stack_ids_sql(ctx.store_window(), pid_n, ops));
  if (!c.frame) c.no_frame_reason = "the captures carried no Python stack";
  c.recommendation =
      "Capture once, replay many times: keep input shapes static (pad batches and sequence "
      "lengths to a few buckets) so each shape's graph is reused; with torch.compile "
      "mode=\"reduce-overhead\" mark dynamic dimensions or pad; update parameters with "
      "cudaGraphExecUpdate instead of re-instantiating. Graphs that must differ (one per shape "
      "bucket) share one memory pool instead of each allocating its own: "
      "torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle()) once, then pool=g.pool() for the others.";
  return c;
}
}  // namespace

std::vector<CausalChain> rule_graph_recapture(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const store::CaptureOps ops{
      ids({"cudaStreamBeginCapture", "cudaStreamBeginCapture_ptsz", "cuStreamBeginCapture"}),
      ids({"cudaStreamEndCapture", "cudaStreamEndCapture_ptsz", "cuStreamEndCapture"}),
      ids({"cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams",
           "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams"})};
  // The baselines know whether there are enough captures at all: most
  // traces have none, and then the calls are not scanned again.
  if (store::most_baseline_calls(ctx.db, ops.begins) < kMinCaptures) return out;
  for (uint32_t pid_n : store::baseline_pids(ctx.db, ops.begins, kMinCaptures)) {
    Recaptures r{pid_n};
    r.cap = read_captures(ctx, pid_n, ops);
    if (int64_t(r.cap.captures.size()) < kMinCaptures) continue;
    r.judged = judged_time(ctx, pid_n);
    r.capture_ns = judged_ns(r.cap.captures, r.judged);
    r.inst_ns = judged_ns(r.cap.insts_seen, r.judged);
    r.pools = graph_pools(ctx, pid_n, r.cap.captures, r.judged);
    out.push_back(recapture_chain(ctx, ops, r));
  }
  return out;
}

}  // namespace causeway::analyze
