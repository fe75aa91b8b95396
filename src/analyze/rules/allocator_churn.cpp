// SPDX-License-Identifier: Apache-2.0
// allocator_churn: device memory is allocated and freed inside the loop: a
// high malloc/free rate or time share, or slow allocations in periodic bursts.
#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kBurstGapNs = kNsPerSec;  // slow allocs closer than this: one burst
constexpr int64_t kMinCalls = 20;           // fewer allocs and frees: set-up, not churn
constexpr int64_t kMinFreesPerAlloc = 4;    // at least one free for every 4 allocations
}

std::vector<CausalChain> rule_allocator_churn(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const std::string allocs = op_ids_sql_list(OpClass::Alloc);
  const std::string frees = op_ids_sql_list(OpClass::Free);
  // Only calls that did something: a failed allocation allocated nothing
  // (call_failures and out_of_memory tell those).
  struct Row { uint32_t pid; int64_t n_alloc, n_free, ns, failed; };
  std::vector<Row> rows;
  ctx.each("SELECT pid, sum(op_id IN (" + allocs + ") AND ret = 0), sum(op_id IN (" + frees + ") AND ret = 0),"
           " sum(CASE WHEN ret = 0 THEN dur_ns ELSE 0 END), sum(ret != 0) FROM cuda_call_events WHERE " +
               ctx.in_window() + " AND op_id IN (" + allocs + "," + frees + ") GROUP BY pid",
           [&](store::Statement& s) {
             rows.push_back({uint32_t(s.col_int(0)), s.col_int(1), s.col_int(2), s.col_int(3), s.col_int(4)});
           });
  for (const auto& r : rows) {
    if (r.n_alloc + r.n_free == 0) continue;
    const std::string pid = std::to_string(r.pid);
    int64_t span = ctx.process_span_ns(r.pid);
    double share = double(r.ns) / span;
    double rate = double(r.n_alloc + r.n_free) * kNsPerSec / span;
    // Bursts of slow allocs/frees, and how many steps (sync calls) apart.
    std::vector<int64_t> bursts;
    int64_t slow_n = 0, slow_ns = 0, last = INT64_MIN;
    ctx.each("SELECT ts_ns, dur_ns FROM slow WHERE pid = " + pid + " AND op_id IN (" + allocs +
                 "," + frees + ") ORDER BY ts_ns",
             [&](store::Statement& s) {
               int64_t ts = s.col_int(0);
               if (ts - last > kBurstGapNs) bursts.push_back(ts);
               last = ts + s.col_int(1);
               slow_n++;
               slow_ns += s.col_int(1);
             });
    bool periodic = bursts.size() >= 3;
    if (share < 0.01 && !periodic && rate < 100) continue;
    // Memory only ever allocated is growth (memory_leak's), not churn: churn
    // gives it back to allocate it again.
    if (r.n_free * kMinFreesPerAlloc < r.n_alloc) continue;
    if (!periodic && r.n_alloc + r.n_free < kMinCalls) continue;

    CausalChain c;
    c.severity = share >= 0.05 ? Severity::High
                 : (share >= 0.01 || periodic) ? Severity::Medium : Severity::Low;
    c.impact_ns = r.ns;
    int64_t top_op = ctx.scalar("SELECT op_id FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + pid +
                                " AND ret = 0 AND op_id IN (" + allocs + "," + frees +
                                ") GROUP BY op_id ORDER BY sum(dur_ns) DESC LIMIT 1");
    c.symptom = ctx.symptom(r.pid, top_op);
    int64_t bytes = ctx.scalar("SELECT coalesce(sum(bytes), 0) FROM cuda_call_events WHERE " +
                               ctx.in_window() + " AND pid = " + pid + " AND op_id IN (" +
                               allocs + ") AND ret = 0");
    c.evidence.push_back({std::to_string(r.n_alloc) + " allocs (" + format_bytes(uint64_t(bytes)) +
                              ") and " + std::to_string(r.n_free) + " frees, " + fixed1(rate) +
                              "/s, " + ms(r.ns) + " (" + pct(share) + " of the process's time)" +
                              (r.failed ? "; " + std::to_string(r.failed) + " more failed (not counted)" : ""),
                          {{"allocs", r.n_alloc}, {"frees", r.n_free}, {"bytes", bytes}, {"failed", r.failed},
                           {"per_s", rate}, {"ns", r.ns}, {"share", share}}});
    if (periodic) {
      int64_t every_ns = (bursts.back() - bursts.front()) / int64_t(bursts.size() - 1);
      int64_t steps = ctx.scalar(
          "SELECT count(*) FROM cuda_call_events WHERE pid = " + pid + " AND op_id IN (" +
          op_ids_sql_list(OpClass::Sync) + ") AND ts_ns >= " + std::to_string(bursts.front()) +
          " AND ts_ns < " + std::to_string(bursts.back()));
      int64_t every_steps = steps / int64_t(bursts.size() - 1);
      c.evidence.push_back(
          {std::to_string(bursts.size()) + " bursts of slow allocs/frees (" +
               std::to_string(slow_n) + " calls, " + ms(slow_ns) + "), one every " +
               format_duration(every_ns) +
               (every_steps ? " (~" + std::to_string(every_steps) + " steps)" : ""),
           {{"bursts", bursts.size()}, {"slow_calls", slow_n}, {"slow_ns", slow_ns},
            {"every_ns", every_ns}, {"every_steps", every_steps}}});
    }
    // The line to change is the one that gives memory back inside the loop
    // (empty_cache(), a per-step free): what it returns is asked for again.
    // The slow calls' lines first, else every call's.
    auto site = [&](const std::string& ops) {
      return ctx.top_frame("SELECT stack_id FROM slow WHERE pid = " + pid + " AND op_id IN (" + ops +
                           ") UNION ALL SELECT stack_id FROM cuda_call_events WHERE 0 = (SELECT count(*) FROM slow"
                           " WHERE pid = " + pid + " AND op_id IN (" + ops + ")) AND " + ctx.in_window() +
                           " AND pid = " + pid + " AND op_id IN (" + ops + ")");
    };
    const auto given_back = site(frees), asked = site(allocs);
    c.frame = given_back ? given_back : asked;
    if (given_back && asked)
      c.evidence.push_back({"given back at " + given_back->where() + " (" + given_back->func + "), asked for again at " +
                                asked->where() + " (" + asked->func + ")",
                            {{"freed_at", given_back->where()}, {"allocated_at", asked->where()}}});
    c.recommendation =
        "Stop returning device memory inside the loop: drop periodic torch.cuda.empty_cache() "
        "and per-step cudaMalloc/cudaFree, pre-allocate buffers once, let the caching allocator "
        "keep blocks (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation), "
        "or use cudaMallocAsync with a pool release threshold.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
