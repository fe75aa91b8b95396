// SPDX-License-Identifier: Apache-2.0
// graph_recapture: CUDA graphs captured and instantiated again and again on
// the same stream, instead of captured once and replayed.
#include <algorithm>

#include "../rule_context.h"

#include "causeway/common/op_table.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kMinCaptures = 10;  // a stable program captures once per shape
}

std::vector<CausalChain> rule_graph_recapture(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const int64_t begin = find_op("cudaStreamBeginCapture")->id;
  const int64_t inst = find_op("cudaGraphInstantiate")->id;
  struct S { uint32_t pid; int64_t stream, captures; };
  std::vector<S> streams;
  // The baselines know whether there are enough captures at all: most traces
  // have none, and then the calls are not scanned again.
  if (ctx.scalar("SELECT coalesce(max(count), 0) FROM baseline WHERE op_id = " +
                 std::to_string(begin)) < kMinCaptures)
    return out;
  ctx.each("SELECT pid, coalesce(stream, 0), count(*) FROM cuda_call_events WHERE " +
               ctx.in_window() + " AND op_id = " + std::to_string(begin) +
               " GROUP BY 1, 2 HAVING count(*) >= " + std::to_string(kMinCaptures) +
               " ORDER BY 3 DESC",
           [&](store::Statement& s) { streams.push_back({uint32_t(s.col_int(0)), s.col_int(1), s.col_int(2)}); });
  std::map<uint32_t, bool> done;
  for (const auto& st : streams) {
    if (done[st.pid]) continue;  // one chain per process: its busiest stream
    done[st.pid] = true;
    const std::string pid = std::to_string(st.pid);
    int64_t capture_ns = ctx.scalar("SELECT coalesce(sum(total_ns), 0) FROM baseline WHERE pid = " +
                                    pid + " AND op_id IN (" + op_ids_sql_list(OpClass::Capture) + ")");
    int64_t instantiations = ctx.scalar("SELECT coalesce(sum(count), 0) FROM baseline WHERE pid = " +
                                        pid + " AND op_id = " + std::to_string(inst));
    int64_t launches = ctx.scalar("SELECT coalesce(sum(count), 0) FROM baseline WHERE pid = " + pid +
                                  " AND op_id IN (" + op_ids_sql_list(OpClass::Graph) + ")");
    double share = double(capture_ns) / ctx.process_span_ns(st.pid);
    CausalChain c;
    c.severity = share >= 0.1 ? Severity::High : share >= 0.02 ? Severity::Medium : Severity::Low;
    c.impact_ns = capture_ns;
    c.symptom = ctx.symptom(st.pid, instantiations ? inst : begin);
    char sbuf[32];
    std::snprintf(sbuf, sizeof sbuf, "0x%llx", static_cast<unsigned long long>(st.stream));
    c.evidence.push_back({std::to_string(st.captures) + " captures on stream " + sbuf + ", " +
                              std::to_string(instantiations) + " instantiations: " +
                              ms(capture_ns) + " capturing (" + pct(share) +
                              " of the process's time)",
                          {{"captures", st.captures}, {"stream", st.stream},
                           {"instantiations", instantiations}, {"capture_ns", capture_ns},
                           {"share", share}}});
    if (instantiations)
      c.evidence.push_back({std::to_string(launches) + " graph launches: each graph replayed " +
                                fixed1(double(launches) / double(instantiations)) + " times",
                            {{"graph_launches", launches},
                             {"replays_per_graph", double(launches) / double(instantiations)}}});
    c.frame = ctx.top_frame("SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() +
                            " AND pid = " + pid + " AND op_id = " + std::to_string(begin));
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
