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

namespace causeway::analyze {

namespace {
constexpr int64_t kMinCaptures = 10;  // a stable program captures once per shape

std::string ids(std::initializer_list<const char*> names) {
  std::string s;
  for (const char* n : names)
    if (const OpSpec* op = find_op(n)) s += (s.empty() ? "" : ",") + std::to_string(op->id);
  return s;
}
}  // namespace

std::vector<CausalChain> rule_graph_recapture(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const std::string begins = ids({"cudaStreamBeginCapture", "cudaStreamBeginCapture_ptsz", "cuStreamBeginCapture"});
  const std::string ends = ids({"cudaStreamEndCapture", "cudaStreamEndCapture_ptsz", "cuStreamEndCapture"});
  const std::string insts = ids({"cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cudaGraphInstantiateWithParams",
                                 "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithParams"});
  // The baselines know whether there are enough captures at all: most
  // traces have none, and then the calls are not scanned again.
  if (ctx.scalar("SELECT coalesce(max(count), 0) FROM baseline WHERE op_id IN (" + begins + ")") < kMinCaptures)
    return out;
  std::vector<uint32_t> pids;
  ctx.each("SELECT pid FROM baseline WHERE op_id IN (" + begins + ") AND count >= " + std::to_string(kMinCaptures) +
               " GROUP BY pid",
           [&](store::Statement& s) { pids.push_back(uint32_t(s.col_int(0))); });
  const std::string allocs = op_ids_sql_list(OpClass::Alloc), frees = op_ids_sql_list(OpClass::Free);
  for (uint32_t pid_n : pids) {
    const std::string pid = std::to_string(pid_n);
    struct Window {
      int64_t from, to;
      uint32_t tid;
    };
    std::vector<Window> captures;
    std::map<std::tuple<int64_t, uint32_t, int64_t>, int64_t> open;  // (session, tid, stream) -> begin
    std::map<int64_t, int64_t> per_stream;
    std::vector<Window> insts_seen;
    int64_t instantiations = 0;
    ctx.each("SELECT session_id, tid, coalesce(stream, 0), op_id IN (" + begins + "), op_id IN (" + ends + "), ts_ns, dur_ns"
             " FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + pid + " AND op_id IN (" + begins + "," +
                 ends + "," + insts + ") ORDER BY ts_ns",
             [&](store::Statement& s) {
               const auto key = std::make_tuple(s.col_int(0), uint32_t(s.col_int(1)), s.col_int(2));
               const int64_t ts = s.col_int(5), dur = s.col_int(6);
               if (s.col_int(3)) {
                 open[key] = ts;
               } else if (s.col_int(4)) {
                 auto it = open.find(key);
                 if (it == open.end()) return;
                 captures.push_back({it->second, ts + dur, std::get<1>(key)});
                 per_stream[std::get<2>(key)]++;
                 open.erase(it);
               } else {
                 instantiations++;
                 insts_seen.push_back({ts, ts + dur, std::get<1>(key)});
               }
             });
    if (int64_t(captures.size()) < kMinCaptures) continue;
    // Judged on the loop's critical path where the process has one (the
    // currency of launch_bound and the other path chains it ranks against):
    // the loop thread's captures, instantiations and pool calls over the
    // judged time. Without a path, over the process's span as before.
    const ProcessPath* path = nullptr;
    for (const auto& p : ctx.paths)
      if (p.pid == pid_n && p.judged_enough() && p.to_ns > p.from_ns) path = &p;
    const int64_t from = path ? path->from_ns : INT64_MIN, to = path ? path->to_ns : INT64_MAX;
    auto clipped = [&](int64_t a, int64_t b) { return std::max<int64_t>(0, std::min(b, to) - std::max(a, from)); };
    auto on_path = [&](uint32_t tid) { return !path || tid == path->tid; };
    int64_t capture_ns = 0;
    for (const auto& w : captures)
      if (on_path(w.tid)) capture_ns += clipped(w.from, w.to);
    int64_t inst_ns = 0;
    for (const auto& i : insts_seen)
      if (on_path(i.tid)) inst_ns += clipped(i.from, i.to);
    // The graphs' private memory pools: allocations made while capturing
    // (already inside the capture's time), and the frees that give those
    // blocks back (torch.cuda.graph's empty_cache() before the next capture;
    // cudaFree waits for the device), matched by address. allocator_churn
    // reports the same calls on their own; here they are the re-capture's.
    int64_t allocs_inside = 0, pool_frees = 0, pool_alloc_ns = 0, pool_free_ns = 0;
    {
      struct Call {
        int64_t ts, end;
        bool alloc;
        std::optional<int64_t> addr;
        uint32_t tid;
      };
      std::vector<Call> calls;
      ctx.each("SELECT ts_ns, dur_ns, op_id IN (" + allocs + "), addr, tid FROM cuda_call_events WHERE " +
                   ctx.in_window() + " AND pid = " + pid + " AND ret = 0 AND op_id IN (" + allocs + "," + frees +
                   ") ORDER BY ts_ns",
               [&](store::Statement& s) {
                 calls.push_back({s.col_int(0), s.col_int(0) + s.col_int(1), s.col_int(2) != 0,
                                  s.col_null(3) ? std::nullopt : std::optional(s.col_int(3)), uint32_t(s.col_int(4))});
               });
      std::sort(captures.begin(), captures.end(), [](const Window& a, const Window& b) { return a.from < b.from; });
      auto inside = [&](int64_t ts) {
        auto it = std::upper_bound(captures.begin(), captures.end(), ts,
                                   [](int64_t t, const Window& w) { return t < w.from; });
        return it != captures.begin() && ts < std::prev(it)->to;
      };
      std::set<int64_t> pool;
      int64_t frees_outside = 0, frees_outside_ns = 0, allocs_all = 0, unaddressed = 0;
      for (const auto& c : calls) {
        if (c.alloc) {
          allocs_all++;
          if (!inside(c.ts)) continue;
          allocs_inside++;
          if (on_path(c.tid)) pool_alloc_ns += clipped(c.ts, c.end);
          if (c.addr) pool.insert(*c.addr);
          else unaddressed++;
        } else if (!inside(c.ts)) {
          frees_outside++;
          if (on_path(c.tid)) frees_outside_ns += clipped(c.ts, c.end);
          if (c.addr && pool.erase(*c.addr)) {
            pool_frees++;
            if (on_path(c.tid)) pool_free_ns += clipped(c.ts, c.end);
          }
        }
      }
      // Without addresses (an older trace): the frees outside captures in
      // the proportion of all allocations that were the pools'.
      if (allocs_inside && unaddressed == allocs_inside && allocs_all) {
        pool_frees = frees_outside * allocs_inside / allocs_all;
        pool_free_ns = frees_outside_ns * allocs_inside / allocs_all;
      }
    }
    const int64_t cost = capture_ns + inst_ns + pool_free_ns;
    const double share =
        double(cost) / double(path ? std::max<int64_t>(1, path->to_ns - path->from_ns) : ctx.process_span_ns(pid_n));
    int64_t steps = 0;
    for (const auto& a : ctx.accounts)
      if (a.pid == pid_n) steps = std::max(steps, a.steps);
    const int64_t launches = ctx.scalar("SELECT coalesce(sum(count), 0) FROM baseline WHERE pid = " + pid +
                                        " AND op_id IN (" + op_ids_sql_list(OpClass::Graph) + ")");
    CausalChain c;
    c.severity = share >= 0.1 ? Severity::High : share >= 0.02 ? Severity::Medium : Severity::Low;
    c.impact_ns = cost;
    c.symptom = ctx.symptom(pid_n, instantiations ? ctx.scalar("SELECT op_id FROM baseline WHERE pid = " + pid +
                                                                 " AND op_id IN (" + insts + ") ORDER BY count DESC LIMIT 1")
                                                  : find_op("cudaStreamBeginCapture")->id);
    const auto busiest = std::max_element(per_stream.begin(), per_stream.end(),
                                          [](const auto& x, const auto& y) { return x.second < y.second; });
    char sbuf[32];
    std::snprintf(sbuf, sizeof sbuf, "0x%llx", static_cast<unsigned long long>(busiest->first));
    c.evidence.push_back({std::to_string(captures.size()) + " captures (" + std::to_string(busiest->second) +
                              " on stream " + sbuf + ")" +
                              (steps >= 3 ? ", " + fixed1(double(captures.size()) / double(steps)) + " per step" : "") +
                              ", " + std::to_string(instantiations) + " instantiations: " + ms(capture_ns) +
                              " capturing (BeginCapture to EndCapture), " + ms(inst_ns) + " instantiating and " +
                              ms(pool_free_ns) + " freeing the graphs' pools: " + pct(share) +
                              (path ? " of the step on the critical path" : " of the process's time"),
                          {{"captures", int64_t(captures.size())}, {"stream", busiest->first},
                           {"instantiations", instantiations}, {"capture_ns", capture_ns},
                           {"instantiate_ns", inst_ns}, {"pool_free_ns", pool_free_ns}, {"share", share},
                           {"on_path", path != nullptr},
                           {"captures_per_step", steps >= 3 ? double(captures.size()) / double(steps) : 0.0}}});
    if (instantiations)
      c.evidence.push_back({std::to_string(launches) + " graph launches: each graph replayed " +
                                fixed1(double(launches) / double(instantiations)) + " times",
                            {{"graph_launches", launches},
                             {"replays_per_graph", double(launches) / double(instantiations)}}});
    if (allocs_inside)
      c.evidence.push_back({std::to_string(allocs_inside) + " allocations made while capturing (" + ms(pool_alloc_ns) +
                                ", inside the capture time) and " + std::to_string(pool_frees) +
                                " frees giving them back (" + ms(pool_free_ns) +
                                "): each capture's own memory pool, allocated and freed again with every capture",
                            {{"allocations_in_captures", allocs_inside}, {"pool_alloc_ns", pool_alloc_ns},
                             {"pool_frees", pool_frees}, {"pool_free_ns", pool_free_ns}}});
    c.frame = ctx.top_frame("SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + pid +
                            " AND op_id IN (" + begins + ")");
    if (!c.frame) c.no_frame_reason = "the captures carried no Python stack";
    c.recommendation =
        "Capture once, replay many times: keep input shapes static (pad batches and sequence "
        "lengths to a few buckets) so each shape's graph is reused; with torch.compile "
        "mode=\"reduce-overhead\" mark dynamic dimensions or pad; update parameters with "
        "cudaGraphExecUpdate instead of re-instantiating. Graphs that must differ (one per shape "
        "bucket) share one memory pool instead of each allocating its own: "
        "torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle()) once, then pool=g.pool() for the others.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
