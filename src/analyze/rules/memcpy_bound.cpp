// SPDX-License-Identifier: Apache-2.0
// memcpy_bound: time in copies, less the off-CPU time inside them (a stalled
// copy is left to the other rules), is a large share of the process's work:
// its span after start-up (its first GPU work), as the accounts judge it. Over
// the whole span, a start-up as long as the loop put a copy-bound loop's 95%
// at 38-44%, across the HIGH cut from run to run.
#include "../rule_context.h"

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_memcpy_bound(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const std::string copies = op_ids_sql_list(OpClass::Copy);
  std::vector<std::pair<uint32_t, int64_t>> pids;
  // Processes whose copies, off-CPU time included, reach the threshold: the
  // exact (off-CPU-free) sum below scans their copies only.
  std::string candidates;
  // Copies from each candidate's work start on (a model's upload at
  // start-up is start-up): "CASE c.pid WHEN P THEN c.ts_ns >= T ... END".
  std::string after_c = "(CASE c.pid", after_c2 = "(CASE c2.pid";
  ctx.each("SELECT pid, sum(total_ns) FROM baseline WHERE op_id IN (" + copies + ") GROUP BY pid",
           [&](store::Statement& s) {
             const auto pid = uint32_t(s.col_int(0));
             if (double(s.col_int(1)) < 0.1 * double(ctx.work_span_ns(pid))) return;
             candidates += (candidates.empty() ? "" : ",") + std::to_string(pid);
             const std::string when = " WHEN " + std::to_string(pid) + " THEN ",
                               from = std::to_string(ctx.work_start_ns(pid));
             after_c += when + "c.ts_ns >= " + from;
             after_c2 += when + "c2.ts_ns >= " + from;
           });
  if (candidates.empty()) return out;
  after_c += " END)";
  after_c2 += " END)";
  // Copy time minus the off-CPU time inside copies (a copy blocked on disk or
  // preempted is another rule's business), per process.
  const auto off = ctx.overlap("offcpu_events", "o", "c2", "c2.ts_ns + c2.dur_ns");
  // Read-backs (.item(), scalar copies) are synchronisations: sync_bound's.
  ctx.each("SELECT c.pid, sum(c.dur_ns) - coalesce((SELECT sum(" + off.clipped + ") FROM cuda_call_events c2" +
               off.join + " WHERE " + ctx.in_window("c2.") + " AND c2.pid = c.pid AND c2.op_id IN (" + copies +
               ") AND NOT " + readback_sql("c2.") + " AND " + after_c2 + "), 0) FROM cuda_call_events c WHERE " +
               ctx.in_window("c.") + " AND c.op_id IN (" + copies + ") AND NOT " + readback_sql("c.") + " AND c.pid IN (" +
               candidates + ") AND " + after_c + " GROUP BY c.pid ORDER BY 2 DESC",
           [&](store::Statement& s) { pids.emplace_back(uint32_t(s.col_int(0)), s.col_int(1)); });
  for (auto [pid_n, typical_ns] : pids) {
    double share = double(typical_ns) / double(ctx.work_span_ns(pid_n));
    if (share < 0.1) continue;
    const std::string pid = std::to_string(pid_n);
    CausalChain c;
    c.severity = share >= 0.4 ? Severity::High : share >= 0.2 ? Severity::Medium : Severity::Low;
    c.impact_ns = typical_ns;
    int64_t top_op = ctx.scalar("SELECT op_id FROM baseline WHERE pid = " + pid +
                                " AND op_id IN (" + copies + ") ORDER BY total_ns DESC LIMIT 1");
    c.symptom = ctx.symptom(pid_n, top_op);
    c.evidence.push_back({pct(share) + " of the process's time after start-up is in copies (" + ms(typical_ns) +
                              " on CPU, off-CPU time left out)",
                          {{"copy_share", share}, {"typical_copy_ns", typical_ns}}});
    bool pageable = false;
    ctx.each("SELECT coalesce(kind, 4), count(*), coalesce(sum(bytes), 0), sum(dur_ns),"
             " sum(op_id IN (12, 71, 72, 73, 77)) FROM cuda_call_events WHERE " + ctx.in_window() +
                 " AND pid = " + pid + " AND op_id IN (" + copies + ") GROUP BY 1 ORDER BY 4 DESC",
             [&](store::Statement& s) {
               auto kind = std::string(copy_kind_name(CopyKind(s.col_int(0))));
               int64_t bytes = s.col_int(2), ns = s.col_int(3), sync_calls = s.col_int(4);
               double gbps = ns ? double(bytes) / double(ns) : 0;  // bytes/ns == GB/s
               // Pinned host memory moves >= ~10 GB/s over PCIe 3+; a synchronous
               // host copy far below that usually staged through pageable memory.
               // So did an asynchronous one of megabytes whose call lasted as long
               // as moving its bytes: from pinned memory it returns in microseconds.
               const bool big = s.col_int(1) > 0 && bytes / s.col_int(1) >= (1 << 20);
               bool slow_host = (kind == "HtoD" || kind == "DtoH") && ((sync_calls > 0 && gbps < 8) || (big && gbps < 20));
               pageable |= slow_host;
               c.evidence.push_back(
                   {kind + ": " + std::to_string(s.col_int(1)) + " copies, " +
                        format_bytes(uint64_t(bytes)) + " in " + ms(ns) + ", " + fixed1(gbps) +
                        " GB/s" + (slow_host ? " (pageable memory?)" : ""),
                    {{"kind", kind}, {"copies", s.col_int(1)}, {"bytes", bytes}, {"ns", ns},
                     {"gb_per_s", gbps}, {"pageable_hint", slow_host}}});
             });
    // The line whose copies took the time: a step's 256 MB upload and its
    // 4-byte .item() are both cudaMemcpyAsync, as many times each.
    c.frame = ctx.top_frame("SELECT stack_id FROM (SELECT stack_id FROM cuda_call_events WHERE " + ctx.in_window() +
                            " AND pid = " + pid + " AND op_id = " + std::to_string(top_op) +
                            " AND stack_id IS NOT NULL GROUP BY stack_id ORDER BY sum(dur_ns) DESC LIMIT 1)");
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
