// SPDX-License-Identifier: Apache-2.0
// graph_recapture: CUDA graphs captured and instantiated again and again
// instead of captured once and replayed. A capture costs from its
// BeginCapture to its EndCapture (everything issued in between is recorded,
// not run), plus the instantiation (every instantiate variant).
#include <algorithm>
#include <map>

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
  const std::string allocs = op_ids_sql_list(OpClass::Alloc);
  for (uint32_t pid_n : pids) {
    const std::string pid = std::to_string(pid_n);
    struct Window {
      int64_t from, to;
    };
    std::vector<Window> captures;
    std::map<std::tuple<int64_t, uint32_t, int64_t>, int64_t> open;  // (session, tid, stream) -> begin
    std::map<int64_t, int64_t> per_stream;
    int64_t instantiations = 0, inst_ns = 0;
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
                 captures.push_back({it->second, ts + dur});
                 per_stream[std::get<2>(key)]++;
                 open.erase(it);
               } else {
                 instantiations++;
                 inst_ns += dur;
               }
             });
    if (int64_t(captures.size()) < kMinCaptures) continue;
    int64_t capture_ns = 0;
    for (const auto& w : captures) capture_ns += w.to - w.from;
    // Allocations made while capturing: the graph's private memory pool
    // (what allocator_churn would otherwise report on its own).
    int64_t allocs_inside = 0;
    {
      std::vector<int64_t> alloc_ts;
      ctx.each("SELECT ts_ns FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + pid + " AND op_id IN (" +
                   allocs + ") ORDER BY ts_ns",
               [&](store::Statement& s) { alloc_ts.push_back(s.col_int(0)); });
      for (const auto& w : captures)
        allocs_inside += std::lower_bound(alloc_ts.begin(), alloc_ts.end(), w.to) -
                         std::lower_bound(alloc_ts.begin(), alloc_ts.end(), w.from);
    }
    const int64_t cost = capture_ns + inst_ns;
    const double share = double(cost) / double(ctx.process_span_ns(pid_n));
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
                              " capturing (BeginCapture to EndCapture) and " + ms(inst_ns) + " instantiating, " +
                              pct(share) + " of the process's time",
                          {{"captures", int64_t(captures.size())}, {"stream", busiest->first},
                           {"instantiations", instantiations}, {"capture_ns", capture_ns},
                           {"instantiate_ns", inst_ns}, {"share", share},
                           {"captures_per_step", steps >= 3 ? double(captures.size()) / double(steps) : 0.0}}});
    if (instantiations)
      c.evidence.push_back({std::to_string(launches) + " graph launches: each graph replayed " +
                                fixed1(double(launches) / double(instantiations)) + " times",
                            {{"graph_launches", launches},
                             {"replays_per_graph", double(launches) / double(instantiations)}}});
    if (allocs_inside)
      c.evidence.push_back({std::to_string(allocs_inside) + " allocations made while capturing (the graph's memory "
                                                            "pool: a symptom of the captures, not a cause)",
                            {{"allocations_in_captures", allocs_inside}}});
    c.frame = ctx.top_frame("SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + pid +
                            " AND op_id IN (" + begins + ")");
    if (!c.frame) c.no_frame_reason = "the captures carried no Python stack";
    c.recommendation =
        "Capture once, replay many times: keep input shapes static (pad batches and sequence "
        "lengths to a few buckets) so each shape's graph is reused; with torch.compile "
        "mode=\"reduce-overhead\" mark dynamic dimensions or pad; update parameters with "
        "cudaGraphExecUpdate instead of re-instantiating.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
