// SPDX-License-Identifier: Apache-2.0
// allocator_churn: device memory is allocated and freed inside the loop: a
// high malloc/free rate or time share, or slow allocations in periodic bursts.
#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

namespace {
constexpr int64_t kBurstGapNs = kNsPerSec;  // slow allocs closer than this: one burst
constexpr int64_t kMinCalls = 20;           // fewer allocs and frees: set-up, not churn
constexpr int64_t kMinFreesPerAlloc = 4;    // at least one free for every 4 allocations
}

std::vector<CausalChain> rule_allocator_churn(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const auto w = ctx.store_window();
  // Only calls that did something: a failed allocation allocated nothing
  // (call_failures and out_of_memory tell those).
  for (const auto& r : store::alloc_free_counts(ctx.db, w)) {
    if (r.allocs + r.frees == 0) continue;
    int64_t span = ctx.process_span_ns(r.pid);
    double share = double(r.ok_ns) / span;
    double rate = double(r.allocs + r.frees) * kNsPerSec / span;
    // Bursts of slow allocs/frees, and how many steps (sync calls) apart.
    std::vector<int64_t> bursts;
    int64_t slow_n = 0, slow_ns = 0, last = INT64_MIN;
    for (const auto& s : store::slow_alloc_free_calls(ctx.db, r.pid)) {
      if (s.ts_ns - last > kBurstGapNs) bursts.push_back(s.ts_ns);
      last = s.ts_ns + s.dur_ns;
      slow_n++;
      slow_ns += s.dur_ns;
    }
    bool periodic = bursts.size() >= 3;
    if (share < 0.01 && !periodic && rate < 100) continue;
    // Memory only ever allocated is growth (memory_leak's), not churn: churn
    // gives it back to allocate it again.
    if (r.frees * kMinFreesPerAlloc < r.allocs) continue;
    if (!periodic && r.allocs + r.frees < kMinCalls) continue;

    CausalChain c;
    c.severity = share >= 0.05 ? Severity::High
                 : (share >= 0.01 || periodic) ? Severity::Medium : Severity::Low;
    c.impact_ns = r.ok_ns;
    c.symptom = ctx.symptom(r.pid, store::costliest_alloc_free_op(ctx.db, w, r.pid).value_or(0));
    const int64_t bytes = store::allocated_bytes(ctx.db, w, r.pid);
    c.evidence.push_back({std::to_string(r.allocs) + " allocs (" + format_bytes(uint64_t(bytes)) +
                              ") and " + std::to_string(r.frees) + " frees, " + fixed1(rate) +
                              "/s, " + ms(r.ok_ns) + " (" + pct(share) + " of the process's time)" +
                              (r.failed ? "; " + std::to_string(r.failed) + " more failed (not counted)" : ""),
                          {{"allocs", r.allocs}, {"frees", r.frees}, {"bytes", bytes}, {"failed", r.failed},
                           {"per_s", rate}, {"ns", r.ok_ns}, {"share", share}}});
    if (periodic) {
      int64_t every_ns = (bursts.back() - bursts.front()) / int64_t(bursts.size() - 1);
      int64_t steps = store::sync_calls_between(ctx.db, r.pid, bursts.front(), bursts.back());
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
    auto site = [&](OpClass cls) { return ctx.top_frame(store::alloc_free_stack_sql(w, r.pid, cls)); };
    const auto given_back = site(OpClass::Free), asked = site(OpClass::Alloc);
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
