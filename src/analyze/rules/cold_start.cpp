// SPDX-License-Identifier: Apache-2.0
// cold_start: the first call of an op (per process and kernel) far above the
// rest: context creation, module load, PTX JIT, lazy allocator setup. Not
// for a process that ran before the trace began (its first calls were earlier).
#include <algorithm>

#include "../rule_context.h"

#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

namespace {
constexpr int kColdFactor = 10;                  // first call >= 10x the op's p50
constexpr int64_t kColdMinExcessNs = 10'000'000; // ... and >= 10 ms above it
constexpr int64_t kChainMinNs = 100'000'000;     // chain: >= 100 ms lost in all
}

std::vector<CausalChain> rule_cold_start(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  struct Cold { int64_t op, kernel, dur, p50; };
  std::map<uint32_t, std::vector<Cold>> by_pid;
  for (const auto& f : store::cold_first_calls(ctx.db, kColdFactor, kColdMinExcessNs))
    by_pid[f.pid].push_back({f.op_id, f.kernel_id, f.dur_ns, f.p50});
  for (auto& [pid_n, colds] : by_pid) {
    if (ctx.attached(pid_n)) continue;  // its first calls came before the trace
    int64_t lost = 0;
    for (const auto& k : colds) lost += k.dur - k.p50;
    double share = double(lost) / ctx.process_span_ns(pid_n);
    if (lost < kChainMinNs || share < 0.01) continue;
    std::sort(colds.begin(), colds.end(),
              [](const Cold& a, const Cold& b) { return a.dur - a.p50 > b.dur - b.p50; });
    CausalChain c;
    c.severity = share >= 0.2 ? Severity::High : share >= 0.05 ? Severity::Medium : Severity::Low;
    c.impact_ns = lost;
    c.symptom = ctx.symptom(pid_n, colds[0].op,
                           colds[0].kernel >= 0 ? std::optional(colds[0].kernel) : std::nullopt);
    c.evidence.push_back({std::to_string(colds.size()) + " ops/kernels with a slow first call: " +
                              ms(lost) + " lost (" + pct(share) + " of the process's time)",
                          {{"cold_ops", colds.size()}, {"lost_ns", lost}, {"share", share}}});
    for (size_t i = 0; i < colds.size() && i < 3; i++) {
      const auto& k = colds[i];
      std::string name = ctx.op_name(k.op);
      if (k.kernel >= 0) name += " <" + ctx.kernel_name(k.kernel) + ">";
      c.evidence.push_back({"first " + name + " " + ms(k.dur) + ", then p50 " + ms(k.p50),
                            {{"op", ctx.op_name(k.op)}, {"kernel", ctx.kernel_name(k.kernel)},
                             {"first_ns", k.dur}, {"p50_ns", k.p50}}});
    }
    c.frame = ctx.top_frame(store::first_call_stack_sql(ctx.store_window(), pid_n, colds[0].op));
    c.recommendation =
        "Pay start-up costs before the work that is measured or served: run a warm-up step, "
        "ship SASS for this GPU (TORCH_CUDA_ARCH_LIST, -gencode) so kernels are not "
        "JIT-compiled, and keep the JIT cache on persistent disk (CUDA_CACHE_PATH, "
        "CUDA_CACHE_MAXSIZE).";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
