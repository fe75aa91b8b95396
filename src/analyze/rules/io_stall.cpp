// SPDX-License-Identifier: Apache-2.0
// io_stall: the slow calls' thread was blocked in uninterruptible (disk) sleep
// inside the call, with the process's block I/O in flight (not a driver's own
// uninterruptible wait in its ioctl: timeline.h's disk_wait).
#include "../rule_context.h"
#include "../timeline.h"

#include "causeway/common/time.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_io_stall(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const auto off = ctx.overlap("offcpu_events", "o");
  const auto io = ctx.overlap("io_requests", "i", "s", "s.end_ns", /*same_thread=*/false);
  for (const auto& g : slow_groups(ctx)) {
    const std::string pid = std::to_string(g.pid);
    int64_t disk_ns = 0, blocks = 0;
    ctx.each("SELECT coalesce(sum(" + off.clipped + "), 0), count(*) FROM slow s" + off.join +
                 " WHERE " + disk_wait_sql("o") + " AND s.pid = " + pid,
             [&](store::Statement& s) {
               disk_ns = s.col_int(0);
               blocks = s.col_int(1);
             });
    double explained = g.excess_ns ? double(disk_ns) / g.excess_ns : 0;
    if (explained < kMinExplained || disk_ns < kMinEvidenceNs) continue;

    CausalChain c;
    c.symptom = ctx.symptom(g.pid, g.top_op);
    double share = double(g.excess_ns) / ctx.process_span_ns(g.pid);
    c.severity = attributed_severity(explained, share);
    c.impact_ns = disk_ns;
    c.evidence.push_back({std::to_string(blocks) + " blocks: " + ms(disk_ns) +
                              " in disk wait (D state) inside the slow calls (" +
                              pct(std::min(1.0, explained)) + " of their " + ms(g.excess_ns) +
                              " excess)",
                          {{"disk_waits", blocks}, {"offcpu_disk_ns", disk_ns},
                           {"excess_ns", g.excess_ns}, {"explained", explained}}});
    // The process's block I/O overlapping its slow calls.
    ctx.each("SELECT count(*), coalesce(sum(bytes), 0), coalesce(max(dur_ns), 0),"
             " coalesce(avg(dur_ns), 0), group_concat(DISTINCT dev) FROM io_requests WHERE rowid IN"
             " (SELECT i.rowid FROM slow s" + io.join + " WHERE s.pid = " + pid + ")",
             [&](store::Statement& s) {
               if (s.col_int(0) == 0) return;
               c.evidence.push_back(
                   {std::to_string(s.col_int(0)) + " block I/O requests in flight during them (" +
                        format_bytes(uint64_t(s.col_int(1))) + " on " + s.col_text(4) +
                        "), latency mean " + ms(int64_t(s.col_double(3))) + ", max " +
                        ms(s.col_int(2)),
                    {{"io_requests", s.col_int(0)}, {"bytes", s.col_int(1)},
                     {"max_latency_ns", s.col_int(2)}, {"devices", s.col_text(4)}}});
             });
    c.frame = ctx.top_frame("SELECT stack_id FROM slow WHERE pid = " + pid +
                            " AND op_id = " + std::to_string(g.top_op));
    c.recommendation =
        "The step waits on disk reads: stage the dataset on local NVMe or in page cache, read "
        "it in worker processes that prefetch ahead of the step (DataLoader num_workers > 0, "
        "prefetch_factor), and avoid touching memory-mapped files inside CUDA calls.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
