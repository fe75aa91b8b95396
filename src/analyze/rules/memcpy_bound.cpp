// SPDX-License-Identifier: Apache-2.0
// memcpy_bound: time in copies, less the off-CPU time inside them (a stalled
// copy is left to the other rules), is a large share of the process's work:
// its span after start-up (its first GPU work), as the accounts judge it. Over
// the whole span, a start-up as long as the loop put a copy-bound loop's 95%
// at 38-44%, across the HIGH cut from run to run.
#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_memcpy_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const auto w = ctx.store_window();
  // Processes whose copies, off-CPU time included, reach the threshold: the
  // exact (off-CPU-free) sum below scans their copies only, from each one's
  // work start on (a model's upload at start-up is start-up).
  std::vector<store::WorkStart> candidates;
  for (const auto& [pid, total_ns] : store::baseline_copy_totals(ctx.db)) {
    if (double(total_ns) < 0.1 * double(ctx.work_span_ns(pid))) continue;
    candidates.push_back({pid, ctx.work_start_ns(pid)});
  }
  if (candidates.empty()) return out;
  // Copy time minus the off-CPU time inside copies (a copy blocked on disk or
  // preempted is another rule's business), per process; read-backs (.item(),
  // scalar copies) are synchronisations: sync_bound's.
  const auto copy_times = store::copy_time_on_cpu(ctx.db, w, candidates, ctx.max_offcpu_ns());
  for (const auto& [pid_n, typical_ns] : copy_times) {
    double share = double(typical_ns) / double(ctx.work_span_ns(pid_n));
    if (share < 0.1) continue;
    CausalChain c;
    c.severity = share >= 0.4 ? Severity::High : share >= 0.2 ? Severity::Medium : Severity::Low;
    c.impact_ns = typical_ns;
    int64_t top_op = store::costliest_copy_op(ctx.db, pid_n).value_or(0);
    c.symptom = ctx.symptom(pid_n, top_op);
    c.evidence.push_back({pct(share) + " of the process's time after start-up is in copies (" + ms(typical_ns) +
                              " on CPU, off-CPU time left out)",
                          {{"copy_share", share}, {"typical_copy_ns", typical_ns}}});
    bool pageable = false;
    for (const auto& k : store::process_copies_by_kind(ctx.db, w, pid_n)) {
      auto kind = std::string(copy_kind_name(CopyKind(k.kind)));
      int64_t bytes = k.bytes, ns = k.total_ns;
      double gbps = ns ? double(bytes) / double(ns) : 0;  // bytes/ns == GB/s
      // Pinned host memory moves >= ~10 GB/s over PCIe 3+; a synchronous
      // host copy far below that usually staged through pageable memory.
      // So did an asynchronous one of megabytes whose call lasted as long
      // as moving its bytes: from pinned memory it returns in microseconds.
      const bool big = k.copies > 0 && bytes / k.copies >= (1 << 20);
      bool slow_host =
          (kind == "HtoD" || kind == "DtoH") && ((k.sync_calls > 0 && gbps < 8) || (big && gbps < 20));
      pageable |= slow_host;
      c.evidence.push_back(
          {kind + ": " + std::to_string(k.copies) + " copies, " + format_bytes(uint64_t(bytes)) + " in " +
               ms(ns) + ", " + fixed1(gbps) + " GB/s" + (slow_host ? " (pageable memory?)" : ""),
           {{"kind", kind}, {"copies", k.copies}, {"bytes", bytes}, {"ns", ns},
            {"gb_per_s", gbps}, {"pageable_hint", slow_host}}});
    }
    // The line whose copies took the time: a step's 256 MB upload and its
    // 4-byte .item() are both cudaMemcpyAsync, as many times each.
    c.frame = ctx.top_frame(store::costliest_stack_sql(w, pid_n, top_op));
    c.recommendation =
        std::string(pageable ? "Copies run at pageable-memory speed: allocate host buffers "
                               "pinned (cudaHostAlloc, DataLoader pin_memory=True) and "
                             : "") +
        "use cudaMemcpyAsync on a side stream so copies overlap compute; keep tensors on the "
        "GPU between steps and move fewer, larger batches.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
