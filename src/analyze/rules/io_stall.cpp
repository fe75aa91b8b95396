// SPDX-License-Identifier: Apache-2.0
// io_stall: the slow calls' thread was blocked in uninterruptible (disk) sleep
// inside the call, with the process's block I/O in flight (not a driver's own
// uninterruptible wait in its ioctl: timeline.h's disk_wait).
#include "../rule_context.h"
#include "../timeline.h"

#include "causeway/common/time.h"
#include "causeway/model/block_io.h"
#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

std::vector<CausalChain> rule_io_stall(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const int64_t longest_io_ns = ctx.longest<model::BlockIo>();
  for (const auto& g : slow_groups(ctx)) {
    const auto waits = store::slow_call_disk_waits(ctx.db, g.pid, ctx.max_offcpu_ns(CW_STATE_DISK), kSysIoctl);
    const int64_t disk_ns = waits.ns, blocks = waits.waits;
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
    if (const auto io = store::slow_call_io(ctx.db, g.pid, longest_io_ns); io.requests != 0)
      c.evidence.push_back({std::to_string(io.requests) + " block I/O requests in flight during them (" +
                                format_bytes(uint64_t(io.bytes)) + " on " + io.devices + "), latency mean " +
                                ms(int64_t(io.mean_ns)) + ", max " + ms(io.max_ns),
                            {{"io_requests", io.requests}, {"bytes", io.bytes},
                             {"max_latency_ns", io.max_ns}, {"devices", io.devices}}});
    c.frame = ctx.top_frame(store::slow_calls_stack_sql(g.pid, g.top_op));
    c.recommendation =
        "The step waits on disk reads: stage the dataset on local NVMe or in page cache, read "
        "it in worker processes that prefetch ahead of the step (DataLoader num_workers > 0, "
        "prefetch_factor), and avoid touching memory-mapped files inside CUDA calls.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
