// SPDX-License-Identifier: Apache-2.0
// The critical path's sleeps and disk: timer_sleep, disk_write,
// memory_limit, io_stall (path_rule.h).
#include <algorithm>

#include "causeway/common/time.h"
#include "causeway/model/cgroup_memory.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

namespace {

// Refaulted page cache that is this share or more of what the process read
// from disk makes its reads the limit's: pages it had read, evicted by the
// limit, read again (a dataset larger than RAM without a limit has no
// refaults to speak of: nothing it reads was evicted recently).
constexpr double kRefaultShareOfReads = 0.25;

}  // namespace

std::optional<MemoryLimitSeen> memory_limit_seen(const RuleContext& ctx, const ProcessPath& p) {
  if (!store::has_table<model::CgroupMemorySamples>(ctx.db)) return std::nullopt;
  // The first and last readings with a limit over the judged time: two of
  // one cgroup (a process that moved has counters of two).
  const auto first = store::cgroup_memory_at_or_before(ctx.db, p.session_id, p.pid, p.from_ns);
  const auto last = store::cgroup_memory_at_or_after(ctx.db, p.session_id, p.pid, p.to_ns);
  if (!first || !last || first->cgroup != last->cgroup || last->ts_ns <= first->ts_ns) return std::nullopt;
  MemoryLimitSeen m;
  m.cgroup = last->cgroup;
  m.version = last->version;
  m.limit = last->limit;
  m.high = last->high;
  m.scale = std::max(1.0, double(p.to_ns - p.from_ns) / double(last->ts_ns - first->ts_ns));
  m.refaults = last->refaults - first->refaults;
  m.hits = last->hits - first->hits;
  m.scanned = last->scanned;
  m.stolen = last->stolen;
  if (first->scanned && last->scanned) m.scanned = *last->scanned - *first->scanned;
  if (first->stolen && last->stolen) m.stolen = *last->stolen - *first->stolen;
  if (first->stall_us && last->stall_us) m.stall_us = *last->stall_us - *first->stall_us;
  m.read_bytes = store::block_bytes_read(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns);
  // The limit was reached (v2 events or reclaim scans; v1's failcnt) and
  // what it evicted was read again, as much as a quarter of its reads.
  const bool reached = m.hits > 0 || m.scanned.value_or(0) > 0;
  const double refault_bytes = double(m.refaults) * m.scale * 4096;
  if (!reached || m.refaults <= 0 || refault_bytes < kRefaultShareOfReads * double(m.read_bytes)) return std::nullopt;
  return m;
}

namespace {

void memory_limit_evidence(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  const View v(ctx, p);
  if (!v.memory_limit) return;
  const MemoryLimitSeen& m = *v.memory_limit;
  const double steps = p.steps >= 3 ? double(p.steps) : 0;
  auto per_step = [&](double x) { return steps > 0 ? x / steps : x; };
  // A counter's rise between the readings, at its rate over the judged time.
  auto counted_per_step = [&](double x) { return per_step(x * m.scale); };
  const std::string a_step = steps > 0 ? " a step" : " in the judged time";
  const int64_t limit = m.limit ? *m.limit : *m.high;
  const std::string which = m.limit ? (m.version == 2 ? "memory.max" : "memory.limit_in_bytes") : "memory.high";
  std::string words = "its cgroup's " + format_bytes(uint64_t(limit)) + " memory limit (" + which + ", cgroup v" +
                      std::to_string(m.version) + " " + m.cgroup + "), which counts the page cache: " +
                      ms(int64_t(per_step(double(t.ns)))) + a_step + " reading again from disk what it evicted; " +
                      std::to_string(int64_t(counted_per_step(double(m.refaults)))) + " file refaults" + a_step + " (" +
                      format_bytes(uint64_t(counted_per_step(double(m.refaults) * 4096))) + ", of " +
                      format_bytes(uint64_t(per_step(double(m.read_bytes)))) + " read from disk)";
  nlohmann::json data = {{"cgroup", m.cgroup},
                         {"cgroup_version", m.version},
                         {"limit_bytes", limit},
                         {"limit_file", which},
                         {"refaults", m.refaults},
                         {"refaults_per_step", int64_t(counted_per_step(double(m.refaults)))},
                         {"read_bytes", m.read_bytes},
                         {"read_bytes_per_step", int64_t(per_step(double(m.read_bytes)))},
                         {"limit_hits", m.hits},
                         {"reading_again_ns", t.ns},
                         {"reading_again_per_step_ns", int64_t(per_step(double(t.ns)))}};
  if (m.scanned) {
    words += "; reclaim scanned " + std::to_string(*m.scanned) + " pages and freed " + std::to_string(m.stolen.value_or(0));
    data["pgscan"] = *m.scanned;
    data["pgsteal"] = m.stolen.value_or(0);
  }
  if (m.stall_us) {
    words += "; its tasks stalled on memory (reclaim, PSI) " + ms(int64_t(counted_per_step(double(*m.stall_us) * 1000))) + a_step;
    data["reclaim_stall_ns"] = *m.stall_us * 1000;
    data["reclaim_stall_per_step_ns"] = int64_t(counted_per_step(double(*m.stall_us) * 1000));
  }
  words += "; reached " + std::to_string(m.hits) + " times while traced (" +
           (m.version == 2 ? "memory.events high + max" : "memory.failcnt") + ")";
  c.evidence.insert(c.evidence.begin(), {words, data});
  c.evidence.push_back({"its disk reads are the limit's (io_stall's time, told here): the pages it reads were in the "
                        "page cache until the limit evicted them",
                        {{"folded", "io_stall"}}});
  const int64_t mib = (limit >> 20);
  c.recommendation = "Give the cgroup room for the page cache the step reads again: raise its memory limit (" + which +
                     ", now " + std::to_string(mib) +
                     " MiB; a pod's resources.limits.memory) above the data re-read each pass plus the process's own "
                     "memory, or stream the data without the page cache: open it with O_DIRECT, or "
                     "posix_fadvise(POSIX_FADV_DONTNEED) what was read (POSIX_FADV_SEQUENTIAL ahead), and read in "
                     "smaller pieces so what the step needs fits under the limit.";
}

void disk_writes(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  int64_t serial = 0;
  for (const auto* part : t.parts) serial += part->cls == PathClass::Checkpoint ? part->ns : 0;
  if (serial > 0)
    c.evidence.push_back({ms(serial) + " of it serialising the state before writing (torch.save, pickle)",
                          {{"serialising_ns", serial}}});
  const auto w = store::block_writes(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns);
  if (!w.requests) return;
  const double steps = p.steps >= 3 ? double(p.steps) : 0;
  c.evidence.push_back({std::to_string(w.requests) + " block writes, " + format_bytes(uint64_t(w.bytes)) +
                            (steps > 0 ? " (" + format_bytes(uint64_t(double(w.bytes) / steps)) + " a step)" : "") +
                            ", the slowest " + ms(w.max_ns),
                        {{"writes", w.requests}, {"bytes", w.bytes}, {"max_latency_ns", w.max_ns}}});
}

void disk_reads(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  const auto r = store::block_reads_with_workers(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns);
  if (!r.requests) return;
  c.evidence.push_back({std::to_string(r.requests) + " block reads (" + format_bytes(uint64_t(r.bytes)) + " on " +
                            r.devices + "), latency mean " + ms(int64_t(r.mean_ns)) + ", max " + ms(r.max_ns),
                        {{"io_requests", r.requests}, {"bytes", r.bytes}, {"max_latency_ns", r.max_ns},
                         {"devices", r.devices}}});
}

}  // namespace

std::span<const PathRule> disk_path_rules() {
  static const PathRule rules[] = {
    {"timer_sleep",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Timer; }, false, false,
     "sleeps (time.sleep, a rate limiter): the GPU has nothing queued meanwhile",
     "Take the sleep out of the step: pace with a deadline instead of a fixed sleep (sleep only for what is left of "
     "the step's budget), overlap it with the next step's GPU work, or drop it.",
     gpu_idle_note},
    {"disk_write",
     [](const View&, const PathPart& x) {
       return x.cls == PathClass::DiskWrite || x.cls == PathClass::Checkpoint;
     },
     false, false, "writes to disk and waits for it (a checkpoint saved and synced in the step)",
     "Write checkpoints off the step: every N steps, from a background thread or process on a copy of the state "
     "(torch.distributed.checkpoint.async_save, orbax's async checkpointer), and let the page cache absorb the "
     "write instead of fsync in the loop.",
     disk_writes, Severity::High, int(PathClass::DiskWrite)},
    {"memory_limit",
     [](const View& v, const PathPart& x) { return x.cls == PathClass::DiskRead && v.memory_limit; }, false, false,
     "reads again from disk what its cgroup's memory limit evicted from the page cache",
     "", memory_limit_evidence},
    {"io_stall",
     [](const View& v, const PathPart& x) { return x.cls == PathClass::DiskRead && !v.memory_limit; }, false,
     false, "waits for disk reads (uninterruptible I/O: reads, page faults of memory-mapped files)",
     "The step waits on disk reads: stage the dataset on local NVMe or in page cache, read it in worker processes "
     "that prefetch ahead of the step (DataLoader num_workers > 0, prefetch_factor), and avoid touching "
     "memory-mapped files inside the step.",
     disk_reads},
  };
  return rules;
}

}  // namespace causeway::analyze::path_rules
