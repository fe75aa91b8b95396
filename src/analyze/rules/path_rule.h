// SPDX-License-Identifier: Apache-2.0
#pragma once
// The rules on each process's critical path (path_rules.cpp): what a
// classifier is (PathRule), the path as the classifiers see it (View), and
// the classifiers by family, each family a table in a file of its own
// (path_rules_disk.cpp, _cpu, _compile, _threads, _calls).
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "causeway/store/lookups.h"
#include "causeway/store/path_rule_reads.h"
#include "dispatch.h"

namespace causeway::analyze::path_rules {

// What the traced process's cgroup memory counters say over the judged time
// (schema 22): the first reading at or before it and the first at or after.
struct MemoryLimitSeen {
  std::string cgroup;
  int64_t version = 0;
  std::optional<int64_t> limit, high;
  int64_t refaults = 0, hits = 0, read_bytes = 0;
  std::optional<int64_t> scanned, stolen, stall_us;
  // The counters are read once a second. Readings around the judged time
  // count all of it (and the warm-up or exit beside it, where the rise is
  // small: taken as they are); readings that span less of it than it lasts
  // (a job of a second or two: from its first second to its exit) count
  // it at their rate: times this, the judged time over their span.
  double scale = 1;
};

constexpr double kSpareCpus = 0.5;        // CPUs it may use past its threads' demand: room a neighbour took

// Its threads' demand for CPUs over the judged time, against the CPUs it may
// use: what oversubscription is decided from, and whether its CPUs had room.
struct CpuDemand {
  int cpus = 0;  // CPUs it may use (affinity, narrowed by a quota)
  std::string cpu_list;
  std::optional<double> quota_cpus;
  double wanting = 0;  // its threads wanting a CPU (running or runnable) at once, on average
  int64_t preemptions = 0;
  std::vector<uint32_t> busy;   // threads that wanted a CPU a quarter of the judged time or more
  std::vector<uint32_t> woken;  // threads woken as a pool's are (several times a step)
  double pool_runq = 0;         // the woken threads' waits for a CPU
};

// More of its threads wanting its CPUs than it may use: the demand it was
// decided from, and the threads it names.
struct Oversubscription {
  CpuDemand demand;
  int threads = 0;  // the pool's threads (and the loop thread that wakes a woken pool)
  std::map<std::string, int> pools;  // those threads' names (digits dropped) -> threads
  // A pool woken for each parallel region (an OpenMP team larger than the
  // CPUs: each region wakes every thread and waits for the last): the loop's
  // waits for these threads are the oversubscription's.
  std::set<uint32_t> pool;
  int64_t woken_wait_ns = 0;  // the pool's wake-ups' waits for a CPU over the judged time
};

std::optional<MemoryLimitSeen> memory_limit_seen(const RuleContext& ctx, const ProcessPath& p);
std::optional<CpuDemand> cpu_demand(const RuleContext& ctx, const ProcessPath& p);
// Its worker processes' threads wanting a CPU at once, on average, over the
// judged time.
double workers_wanting(const RuleContext& ctx, const ProcessPath& p, const std::set<uint32_t>& workers);
std::optional<Oversubscription> oversubscription(const RuleContext& ctx, const ProcessPath& p, const CpuDemand& d);

struct Taken {
  int64_t ns = 0;
  std::vector<const PathPart*> parts;  // most time first
};

// One path as the classifiers see it, with what they share.
struct View {
  const RuleContext& ctx;
  const ProcessPath& p;
  std::set<std::string> sync_lines;  // the lines of its synchronisations (a storm's read-backs)
  std::set<uint32_t> workers;        // its own worker processes (own_workers_sql)
  // Its threads' waits behind each other (a hand-off that queues behind its
  // waker) are the contention's too where other workloads held the CPUs it
  // could have run on: they ran for a quarter or more of the path's waits
  // for a CPU, or its threads wanted fewer CPUs than it may use (half a CPU
  // or more to spare: with the neighbours gone a woken thread finds one).
  bool neighbours_matter = false;
  int64_t own_on_cpu = 0;            // the loop thread's own on-CPU time on the path
  // Its cgroup's memory limit evicted the page cache it reads again (its
  // disk reads are the limit's: memory_limit, not io_stall).
  std::optional<MemoryLimitSeen> memory_limit;
  // More of its threads competed for its CPUs than it may use (its waits
  // behind its own threads are thread_oversubscription's, not contention).
  std::optional<Oversubscription> oversubscribed;
  View(const RuleContext& c, const ProcessPath& path) : ctx(c), p(path) {
    // Read from the file once per path, not once per rule (each of ~25 path
    // rules builds a View: 24% of explain's time before, and the live view's
    // explain at nice 19 on a busy box came too late to be scraped).
    struct Facts {
      std::optional<MemoryLimitSeen> memory_limit;
      std::optional<Oversubscription> oversubscribed;
      std::optional<double> spare_cpus;
      std::set<uint32_t> workers;
    };
    auto& slot = ctx.path_facts[&p];
    if (!slot) {
      auto f = std::make_shared<Facts>();
      f->memory_limit = memory_limit_seen(ctx, p);
      f->workers = store::own_workers(ctx.db, p.pid, p.session_id);
      if (const auto demand = cpu_demand(ctx, p)) {
        f->oversubscribed = oversubscription(ctx, p, *demand);
        // Its worker processes want its CPUs too (a loader's workers that
        // fill them leave none to spare).
        f->spare_cpus = double(demand->cpus) - demand->wanting - workers_wanting(ctx, p, f->workers);
      }
      slot = f;
    }
    const auto& facts = *static_cast<const Facts*>(slot.get());
    memory_limit = facts.memory_limit;
    oversubscribed = facts.oversubscribed;
    workers = facts.workers;
    for (const auto& part : p.parts)
      if ((part.cls == PathClass::SyncIdle || (p.sync_storm && part.cls == PathClass::Copy)) && part.frame)
        sync_lines.insert(part.frame->where());
    int64_t runnable = 0, others = 0;
    for (const auto& part : p.parts)
      if (part.cls == PathClass::OnCpu && part.via == PathVia::Own) own_on_cpu += part.ns;
    for (const auto& part : p.parts)
      if (part.cls == PathClass::Runnable) {
        runnable += part.ns;
        if (part.by_pid && part.by_pid != p.pid && !workers.count(part.by_pid)) others += part.ns;
      }
    neighbours_matter = others > 0 && (double(others) >= 0.25 * double(runnable) ||
                                       (!oversubscribed && facts.spare_cpus.value_or(0) >= kSpareCpus));
  }
};

struct PathRule {
  const char* root_cause;
  bool (*take)(const View&, const PathPart&);
  bool generic;      // a generic account of host time: HIGH only from half the step, after specific causes
  bool on_host;      // host work: what it could save is bounded by the GPU's idle time
  const char* words;  // what the taken time is, after "X% of each step"
  const char* recommendation;
  void (*more)(const RuleContext&, const ProcessPath&, const Taken&, CausalChain&);
  Severity most = Severity::High;  // a verdict, not a problem, stays at this
  // The chain's line comes from parts of this class first (a checkpoint's
  // fsync over its serialisation); -1: the part with the most time.
  int line_from = -1;
  // The framework's own cost, overlapping the GPU's work by design (an eager
  // loop always launches): the step's bound only where it takes more of the
  // step than the GPU is busy, else LOW.
  bool bound_only_past_gpu = false;
  // Its time spreads over the lines of a whole step (every op launches):
  // the line is the innermost user frame that half of it passes through
  // (the decode step's call, not one of the model's forward lines).
  bool common_line = false;
  // It recurs where it costs (a shape that changes recompiles each step):
  // the line is one where it still takes time in the window's last tenths,
  // not a one-time cost's (the warm-up's first compile, often longer than
  // all the recompiles); among those, the one that took the most, summed
  // over its parts (threads, compiler processes).
  bool recurring_line = false;
};

// The GPU's busy share (NVML) as evidence that it idled while the loop waited.
void gpu_idle_note(const RuleContext&, const ProcessPath& p, const Taken&, CausalChain& c);

// The classifiers, by family.
std::span<const PathRule> disk_path_rules();     // sleeps, disk writes and reads, a memory limit's re-reads
std::span<const PathRule> cpu_path_rules();      // waits for a CPU: a quota, its own threads, neighbours
std::span<const PathRule> compile_path_rules();  // autotuning and compiling in the step
std::span<const PathRule> thread_path_rules();   // waits for other threads and processes: GIL, locks, input
std::span<const PathRule> call_path_rules();     // time in GPU library calls and the loop's own host code

}  // namespace causeway::analyze::path_rules
