// SPDX-License-Identifier: Apache-2.0
// The rules on each process's critical path (critical_path.h): one table of
// classifiers, each taking the path's segments of its cause. A chain's
// impact is the critical-path time it takes (one currency for every chain
// on a path), its severity the share of the step that time is, bounded by
// the GPU's idle time where the time is host work (what making it faster
// could save: once the GPU is the bottleneck, faster host work does not
// shorten the step). docs/explain.md, "Rules on the critical path".
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/model/cgroup_cpu.h"
#include "causeway/model/cgroup_memory.h"
#include "causeway/model/process_cpus.h"
#include "causeway/store/lookups.h"
#include "causeway/store/path_rule_reads.h"
#include "dispatch.h"

namespace causeway::analyze {

namespace {

constexpr double kMinShare = 0.05;         // of the step, for a chain (LOW)
constexpr double kMediumShare = 0.15;
constexpr double kHighShare = 0.40;
constexpr double kHighGenericShare = 0.50;  // host_bound, launch_bound: a generic account
constexpr double kEpisodeCover = 0.3;       // an episode covers this much of the judged time (3 tenths)
constexpr double kLaunchesPerExposingSync = 10;
constexpr int64_t kRefillNs = 1'000'000;

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

// Refaulted page cache that is this share or more of what the process read
// from disk makes its reads the limit's: pages it had read, evicted by the
// limit, read again (a dataset larger than RAM without a limit has no
// refaults to speak of: nothing it reads was evicted recently).
constexpr double kRefaultShareOfReads = 0.25;

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

std::string pool_name(std::string name) {
  while (!name.empty() && (std::isdigit(static_cast<unsigned char>(name.back())) || name.back() == '_' ||
                           name.back() == '-' || name.back() == '/' || name.back() == ':' || name.back() == '.'))
    name.pop_back();
  return name.empty() ? "?" : name;
}

// Half a thread more than its CPUs wanting one, on average: a process whose
// idle helpers (autograd, pin-memory, loader threads) wake now and then is not
// oversubscribed by their number, only by threads that want a CPU together.
constexpr double kOversubscribedMargin = 0.5;
constexpr double kBusyThread = 0.25;  // of the judged time wanting a CPU: a thread of the pool
constexpr double kPoolWakesPerStep = 4;   // a woken pool's threads: wake-ups a step at least
constexpr double kPoolOverCpus = 1.5;     // ... this many times the CPUs it may use
constexpr int kPoolMinExtra = 4;          // ... and this many threads past them
constexpr double kPoolWaiting = 0.5;      // ... this many of them, on average, woken and waiting for a CPU
constexpr double kSpareCpus = 0.5;        // CPUs it may use past its threads' demand: room a neighbour took

// A thread's time wanting a CPU over the judged time: from its first interval
// off the CPU to the end of its last, less its sleeps (a wake-up's wait for a
// CPU, runq_ns, is wanting one).
double wanting_ns(const store::ThreadOffCpu& th, const ProcessPath& p) {
  return std::max(0.0, double(std::min<int64_t>(th.last_end_ns, p.to_ns) - th.first_ns) - double(th.asleep_ns));
}

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

std::optional<CpuDemand> cpu_demand(const RuleContext& ctx, const ProcessPath& p) {
  if (!store::has_table<model::ProcessCpusSamples>(ctx.db) || p.to_ns <= p.from_ns) return std::nullopt;
  CpuDemand d;
  if (const auto cpus = store::allowed_cpus(ctx.db, p.session_id, p.pid, p.to_ns)) {
    d.cpus = int(cpus->cpus);
    d.cpu_list = cpus->cpu_list;
  }
  if (d.cpus <= 0) return std::nullopt;
  if (store::has_table<model::CgroupCpuSamples>(ctx.db))
    if (const auto q = store::cpu_quota(ctx.db, p.session_id, p.pid))
      d.quota_cpus = double(q->quota_us) / double(q->period_us);
  if (d.quota_cpus) d.cpus = std::max(1, std::min(d.cpus, int(std::ceil(*d.quota_cpus))));
  const double span = double(p.to_ns - p.from_ns);
  // Wake-ups a thread of a woken pool has: several a step (each parallel
  // region), or 20 a second where no step was found.
  const double pool_wakes = p.steps >= 3 ? kPoolWakesPerStep * double(p.steps) : 20.0 * span / 1e9;
  double wanting = 0;
  for (const auto& th : store::thread_offcpu(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns)) {
    const double want = wanting_ns(th, p);
    wanting += want;
    d.preemptions += th.preemptions;
    if (want >= kBusyThread * span) d.busy.push_back(th.tid);
    if (th.tid != p.tid && double(th.sleeps) >= pool_wakes) {
      d.woken.push_back(th.tid);
      d.pool_runq += double(th.runq_ns);
    }
  }
  d.wanting = wanting / span;
  return d;
}

// Its worker processes' threads wanting a CPU at once, on average, over the
// judged time.
double workers_wanting(const RuleContext& ctx, const ProcessPath& p, const std::set<uint32_t>& workers) {
  if (workers.empty() || p.to_ns <= p.from_ns) return 0;
  double ns = 0;
  for (uint32_t pid : workers)
    for (const auto& th : store::thread_offcpu(ctx.db, p.session_id, pid, p.from_ns, p.to_ns)) ns += wanting_ns(th, p);
  return ns / double(p.to_ns - p.from_ns);
}

std::optional<Oversubscription> oversubscription(const RuleContext& ctx, const ProcessPath& p, const CpuDemand& d) {
  const double span = double(p.to_ns - p.from_ns);
  const int usable = d.cpus;
  // Threads wanting CPUs together past the CPUs (spinning workers), or a
  // pool woken every region that is half again the CPUs and more, half a
  // thread of which, on average, is woken and waiting for a CPU (its own
  // threads hold them): an intra-op pool sized for a larger machine. (Each
  // thread's time wanting a CPU, above, can read as none for such a pool:
  // its sleeps' sums reach past its span.) A pool that fits (torch's default
  // of one thread per CPU, a few helpers) is neither: 128 threads on 16
  // H200-host CPUs had 9 waiting on average; 16 there (libgomp spinning
  // between regions) woke fewer than 4 times a step.
  const bool spinning = d.wanting > double(usable) + kOversubscribedMargin && int(d.busy.size()) > usable;
  const bool woken_pool = double(d.woken.size()) >= kPoolOverCpus * double(usable) &&
                          int(d.woken.size()) >= usable + kPoolMinExtra && d.pool_runq >= kPoolWaiting * span;
  if (!spinning && !woken_pool) return std::nullopt;
  Oversubscription o;
  o.demand = d;
  if (woken_pool) o.woken_wait_ns = int64_t(d.pool_runq);
  const bool by_busy = spinning && d.busy.size() >= d.woken.size();
  const std::vector<uint32_t>& members = by_busy ? d.busy : d.woken;
  o.threads = int(members.size()) + (by_busy ? 0 : 1);  // a woken pool, and the loop thread that wakes it
  o.pool.insert(members.begin(), members.end());
  for (uint32_t tid : members) o.pools[pool_name(ctx.thread_name(p.session_id, p.pid, tid, p.from_ns))]++;
  return o;
}

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

// The innermost user frame that at least half of the taken time (of the
// parts with a stack) runs under; none when no frame holds half.
std::optional<UserFrame> common_frame(const RuleContext& ctx, const Taken& t) {
  struct Seen {
    UserFrame frame;
    int64_t ns = 0;
    double depth = 0;  // summed over the parts it is in, by their time
  };
  std::map<std::string, Seen> by;
  int64_t stacked = 0;
  for (const auto* part : t.parts) {
    if (part->stack_id < 0) continue;
    stacked += part->ns;
    std::set<std::string> here;
    int depth = 0;
    for (const auto& py : store::python_frames(ctx.db, part->stack_id)) {
      UserFrame f{py.func, py.file, py.line};
      if (f.library() || !here.insert(f.text()).second) continue;
      Seen& x = by[f.text()];
      x.frame = f;
      x.ns += part->ns;
      x.depth += double(depth++) * double(part->ns);
    }
  }
  const Seen* best = nullptr;
  for (const auto& [k, x] : by)
    if (2 * x.ns >= stacked && stacked > 0 &&
        (!best || x.depth / double(x.ns) < best->depth / double(best->ns)))
      best = &x;
  if (!best) return std::nullopt;
  return best->frame;
}

bool storm_part(const View& v, const PathPart& part) {
  if (!v.p.sync_storm) return false;
  if (part.cls == PathClass::SyncIdle) return true;
  // A sync every few launches (.item() in an inner loop, float() after each
  // jitted op) drains the queue each time: every launch is exposed, and the
  // storm's, whichever share is larger (one rule: sync_bound).
  if (part.cls == PathClass::Launching && double(v.p.syncs) * kLaunchesPerExposingSync >= v.p.launches) return true;
  // The loop's own host work between syncs that come a millisecond apart or
  // closer is the loop around them (what removing them removes).
  if (part.cls == PathClass::OnCpu && part.via == PathVia::Own && v.own_on_cpu <= v.p.syncs * kRefillNs) return true;
  // The storm's refill: launching, copies and host work at the lines that
  // synchronise (.item() of each parameter, a read-back per token).
  if (part.cls != PathClass::Launching && part.cls != PathClass::Copy && part.cls != PathClass::OnCpu) return false;
  return part.frame && v.sync_lines.count(part.frame->where()) > 0;
}

// Own workers and the process itself are not other workloads.
bool other_workload(const View& v, uint32_t by_pid) {
  return by_pid && by_pid != v.p.pid && !v.workers.count(by_pid);
}

std::string thread_words(const ProcessPath& p, const PathPart& part) {
  std::string name = part.thread.empty() ? "thread " + std::to_string(part.tid) : part.thread;
  if (part.tid == p.tid) return name + " (its loop)";
  if (part.pid != p.pid) return name + " (pid " + std::to_string(part.pid) + ")";
  return name + " (" + std::to_string(part.tid) + ")";
}

void cpu_neighbours(const RuleContext&, const ProcessPath&, const Taken& t, CausalChain& c) {
  std::map<std::pair<uint32_t, std::string>, int64_t> by;
  for (const auto* part : t.parts) by[{part->by_pid, part->by_comm}] += part->ns;
  std::vector<std::pair<int64_t, std::pair<uint32_t, std::string>>> order;
  for (const auto& [k, ns] : by) order.push_back({ns, k});
  std::sort(order.rbegin(), order.rend());
  std::string words;
  nlohmann::json who = nlohmann::json::array();
  for (size_t i = 0; i < order.size() && i < 3; i++) {
    const auto& [ns, k] = order[i];
    words += (i ? ", " : "") + (k.second.empty() ? "?" : k.second) + " (pid " + std::to_string(k.first) + ") " + ms(ns);
    who.push_back({{"by_comm", k.second}, {"by_pid", k.first}, {"ns", ns}});
  }
  c.evidence.push_back({"ran instead: " + words, {{"ran_instead", who}}});
  // The neighbour to move is another workload: the process's own threads
  // behind each other are no neighbour of its own.
  auto neighbour = std::find_if(order.begin(), order.end(), [&](const auto& x) { return x.second.first != c.symptom.pid; });
  if (neighbour != order.end()) {
    const auto& [comm, pid] = std::pair(neighbour->second.second, neighbour->second.first);
    c.recommendation = "Keep " + (comm.empty() ? "?" : comm) + " (pid " + std::to_string(pid) +
                       ") off the CPUs of pid " + std::to_string(c.symptom.pid) +
                       ": pin the workload with a cpuset or taskset and move the neighbour elsewhere, or lower its "
                       "share (cpu.weight, nice 19); give the thread that launches and synchronizes a core of its own.";
  }
}

void cpu_limit(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  // The counters of its cgroup over the judged time (schema 16): the first
  // and last reading with a limit.
  if (!store::has_table<model::CgroupCpuSamples>(ctx.db)) return;
  const auto first = store::cgroup_cpu_first(ctx.db, p.session_id, p.pid);
  const auto last = store::cgroup_cpu_last(ctx.db, p.session_id, p.pid);
  if (!first || !last) {
    c.evidence.push_back({"no CPU limit was read from its cgroup (an idle CPU while it waited says one was hit)",
                          {{"limit_read", false}}});
    return;
  }
  const double cpus = double(last->quota_us) / double(std::max<int64_t>(1, last->period_us));
  const int64_t periods = last->periods - first->periods, throttled = last->throttled - first->throttled;
  const int64_t us = last->throttled_us - first->throttled_us;
  c.evidence.push_back({"its CPU limit: " + fixed1(cpus) + " CPU (" + std::to_string(last->quota_us) + " us every " +
                            std::to_string(last->period_us) + " us, cgroup v" + std::to_string(last->version) + " " +
                            last->cgroup + "); throttled in " + std::to_string(throttled) + " of " +
                            std::to_string(periods) + " periods while traced, " + format_duration(us * 1000) + " in all",
                        {{"cpus", cpus}, {"quota_us", last->quota_us}, {"period_us", last->period_us}, {"cgroup", last->cgroup},
                         {"cgroup_version", last->version}, {"periods", periods}, {"throttled_periods", throttled},
                         {"throttled_ns", us * 1000}}});
}

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

void oversubscription_evidence(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  const View v(ctx, p);
  if (!v.oversubscribed) return;
  const Oversubscription& o = *v.oversubscribed;
  const CpuDemand& d = o.demand;
  // The job's processes on this host share those CPUs (ranks, each with its
  // own pool): each pool's fair size is its share.
  std::set<uint32_t> job;
  for (const auto& q : ctx.paths)
    if (q.session_id == p.session_id) job.insert(q.pid);
  const int fits = std::max(1, d.cpus / std::max<int>(1, int(job.size())));
  std::string pools;
  nlohmann::json by_name = nlohmann::json::object();
  for (const auto& [name, n] : o.pools) {
    pools += (pools.empty() ? "" : ", ") + std::to_string(n) + " " + name;
    by_name[name] = n;
  }
  const std::string comm = ctx.comm(p.pid);
  const double steps = p.steps >= 3 ? double(p.steps) : 0;
  std::string cpu_words = std::to_string(d.cpus) + " CPU" + (d.cpus == 1 ? "" : "s") + " (" +
                          (d.quota_cpus ? "cpu.max " + fixed1(*d.quota_cpus) + " CPU, " : "") + "affinity " +
                          d.cpu_list + ")";
  c.evidence.insert(c.evidence.begin(),
                    {std::to_string(o.threads) + " threads of " + comm + " (pid " + std::to_string(p.pid) + ") on " +
                         cpu_words + ": " + pools + "; " +
                         (o.woken_wait_ns > 0
                              ? "woken for each parallel region, " +
                                    fixed1(double(o.woken_wait_ns) / double(std::max<int64_t>(1, p.to_ns - p.from_ns))) +
                                    " of them on average woken and waiting for a CPU (" +
                                    (steps > 0 ? format_duration(int64_t(double(o.woken_wait_ns) / steps)) + " a step"
                                               : format_duration(o.woken_wait_ns)) +
                                    " in all), "
                              : fixed1(d.wanting) + " of them wanting a CPU at once on average, ") +
                         (steps > 0 ? fixed1(double(d.preemptions) / steps) + " preemptions a step"
                                    : std::to_string(d.preemptions) + " preemptions") +
                         ": its threads wait for a CPU behind each other, not behind another workload",
                     {{"threads", o.threads},
                      {"wanting_a_cpu", d.wanting},
                      {"cpus", d.cpus},
                      {"cpu_list", d.cpu_list},
                      {"pools", by_name},
                      {"preemptions", d.preemptions},
                      {"woken_wait_ns", o.woken_wait_ns},
                      {"fits", fits},
                      {"processes_sharing", job.size()}}});
  if (!c.frame) {
    // The pool's threads run no Python: the line is where the loop thread
    // waits for them (the op that runs the parallel region).
    c.frame = ctx.top_frame(store::sleep_stack_ids_sql(p.session_id, p.tid, p.from_ns, p.to_ns));
    if (c.frame) c.no_frame_reason.clear();
  }
  const std::string n = std::to_string(fits);
  c.recommendation = "Size the thread pools to the CPUs the process may use: " + std::to_string(o.threads) +
                     " threads on " + std::to_string(d.cpus) + " CPUs spend the step waiting for each other. Set " +
                     "torch.set_num_threads(" + n + ") (and torch.set_num_interop_threads), or OMP_NUM_THREADS=" + n +
                     " MKL_NUM_THREADS=" + n + " before it starts" +
                     (job.size() > 1 ? " (" + std::to_string(d.cpus) + " CPUs shared by " + std::to_string(job.size()) +
                                           " of its processes)"
                                     : "") +
                     "; fewer DataLoader workers where they share these CPUs.";
}

void gpu_idle_note(const RuleContext&, const ProcessPath& p, const Taken&, CausalChain& c) {
  if (p.gpu_busy && *p.gpu_busy < 0.5)
    c.evidence.push_back({"the GPU was busy " + pct(*p.gpu_busy) + " of the time (NVML): it idles while the loop waits",
                          {{"gpu_busy", *p.gpu_busy}}});
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

// The processes (and feeder threads) the path waited in for its input,
// grouped by name: "2 worker processes cw_loader (1201-1202)".
void input_workers(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  struct Group {
    std::set<uint32_t> ids;
    int64_t ns = 0;
    bool process = false;
  };
  std::map<std::string, Group> groups;
  int64_t behind_ns = 0;         // waiting for a CPU one of its workers held
  std::set<uint32_t> held_by;    // ... those workers
  for (const auto* part : t.parts) {
    if (part->cls == PathClass::Runnable) {
      behind_ns += part->ns;
      held_by.insert(part->by_pid);
      continue;
    }
    const bool process = part->pid != p.pid;
    const std::string name = process ? ctx.comm(part->pid) : part->thread;
    Group& g = groups[name];
    g.ids.insert(process ? part->pid : part->tid);
    g.ns += part->ns;
    g.process = g.process || process;
  }
  std::string words;
  nlohmann::json who = nlohmann::json::array();
  for (const auto& [name, g] : groups) {
    const std::string ids = g.ids.size() == 1 ? std::to_string(*g.ids.begin())
                                              : std::to_string(*g.ids.begin()) + "-" + std::to_string(*g.ids.rbegin());
    const bool one = g.ids.size() == 1;
    words += (words.empty() ? "" : "; ") + std::to_string(g.ids.size()) +
             (g.process ? (one ? " worker process " : " worker processes ") : (one ? " thread " : " threads ")) +
             (name.empty() ? "?" : name) + " (" + ids + "): " + ms(g.ns);
    who.push_back({{"name", name}, {"count", g.ids.size()}, {"ns", g.ns}, {"processes", g.process}});
  }
  if (!words.empty()) c.evidence.push_back({"the path waited in " + words, {{"input_from", who}}});
  if (behind_ns > 0) {
    const View v(ctx, p);
    const auto cpus = store::allowed_cpus(ctx.db, p.session_id, p.pid, p.to_ns);
    c.evidence.push_back(
        {ms(behind_ns) + (p.steps >= 3 ? " (" + format_duration(behind_ns / p.steps) + " a step)" : "") +
             " waiting for a CPU while its own loader workers ran on it (" + std::to_string(held_by.size()) + " of its " +
             std::to_string(v.workers.size()) + " workers ran instead" +
             (cpus ? ", on the " + std::to_string(cpus->cpus) + " CPUs it may use: " + cpus->cpu_list : "") +
             "): more workers than the CPUs left for them",
         {{"behind_workers_ns", behind_ns}, {"workers_holding", held_by.size()}}});
  }
}

// The pins of the judged time: how many, how many a step, how many bytes.
void pins(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  std::vector<int64_t> pinning;
  for (const auto& op : all_ops())
    if (op.cls == OpClass::Pin && op.shape != ArgShape::Free) pinning.push_back(op.id);
  if (pinning.empty()) return;
  const auto pinned = store::calls_and_bytes(ctx.db, p.session_id, p.pid, pinning, p.from_ns, p.to_ns);
  const double per_step = p.steps >= 3 ? double(pinned.calls) / double(p.steps) : 0;
  c.evidence.push_back({std::to_string(pinned.calls) + " pins" +
                            (per_step > 0 ? " (" + fixed1(per_step) + " a step)" : "") + ", " +
                            format_bytes(uint64_t(pinned.bytes)) + " pinned in all",
                        {{"calls", pinned.calls}, {"calls_per_step", per_step}, {"bytes", pinned.bytes}}});
}

// Which autotuner searched (by its stacks' frames), how many searches (a
// burst of its calls, apart from the next by 50 ms or more: one new shape or
// key each), and the fix for that tuner.
void tuning(const RuleContext& ctx, const ProcessPath& p, const Taken& t, CausalChain& c) {
  std::set<int64_t> stacks;
  for (const auto* part : t.parts)
    if (part->stack_id >= 0) stacks.insert(part->stack_id);
  if (stacks.empty()) return;
  const auto [cudnn, timed, triton, inductor] = store::tuner_frames(ctx.db, stacks);
  constexpr int64_t kSearchGapNs = 50'000'000;
  int64_t searches = 0, calls = 0, syncs = 0, launches = 0, last = -1;
  for (const auto& [ts, op_id] : store::calls_with_stacks(ctx.db, p.session_id, p.pid, stacks, p.from_ns, p.to_ns)) {
    if (last < 0 || ts - last >= kSearchGapNs) searches++;
    last = ts;
    calls++;
    const OpSpec* op = find_op(uint16_t(op_id));
    syncs += op && op->cls == OpClass::Sync;
    launches += op && op->cls == OpClass::Launch;
  }
  const std::string who = cudnn && timed ? "cuDNN's algorithm search (torch.backends.cudnn.benchmark = True): plans "
                                           "built for each candidate and timed"
                          : cudnn    ? "cuDNN's plan building for each new shape (its engines compiled and loaded)"
                          : triton   ? "Triton's autotuner (@triton.autotune)"
                          : inductor ? "torch.compile's max-autotune"
                                     : "an autotuner";
  std::string text = who + " timed candidate kernels on the path";
  if (calls > 0) {
    text += ": " + std::to_string(searches) + (searches == 1 ? " search" : " searches");
    if (p.steps >= 3) text += " in " + std::to_string(p.steps) + " steps";
    text += " (" + std::to_string(syncs) + " syncs, " + std::to_string(launches) + " launches of candidates)";
    if (p.steps >= 3 && 2 * searches >= p.steps)
      text += ": a new shape or key to tune most steps (input sizes that vary)";
  }
  c.evidence.push_back({text, {{"tuner", cudnn ? "cudnn" : triton ? "triton" : inductor ? "inductor" : "other"},
                               {"benchmarked", timed},
                               {"searches", searches}, {"calls", calls}, {"syncs", syncs}, {"launches", launches}}});
  if (cudnn)
    c.recommendation =
        std::string("Give cuDNN shapes it has seen: pad or bucket variable input sizes to a few fixed shapes (each new "
                    "shape is planned again, forward and backward") +
        (timed ? ", and with benchmark on every candidate is built and timed), or set torch.backends.cudnn.benchmark = "
                 "False while shapes keep changing"
               : ")") +
        "; warm up every bucket before the timed loop.";
  else if (triton)
    c.recommendation =
        "Tune once per shape class, not per size: key @triton.autotune on bucketed sizes (round the key up to a "
        "power of two), prune the configs (prune_configs_by), and keep the tuned results across runs "
        "(TRITON_CACHE_DIR; triton's autotuner cache_results=True).";
  else if (inductor)
    c.recommendation =
        "Tune once: keep shapes static or bucketed so max-autotune does not search per new shape, warm up each "
        "shape before the timed loop, and keep inductor's autotune cache (TORCHINDUCTOR_CACHE_DIR) across runs.";
}

void compiles(const RuleContext&, const ProcessPath& p, const Taken& t, CausalChain& c) {
  std::set<uint32_t> threads;
  for (const auto* part : t.parts) threads.insert(part->tid);
  c.evidence.push_back({"compiling on " + std::to_string(threads.size()) + " thread" + (threads.size() == 1 ? "" : "s") +
                            " after warm-up: " +
                            (p.steps >= 3 ? "in the steps themselves (shapes or guards that change recompile)"
                                          : "the loop never settles into steps"),
                        {{"threads", threads.size()}}});
}

void launches(const RuleContext& ctx, const ProcessPath& p, const Taken&, CausalChain& c) {
  const int64_t n = store::counted_launches(ctx.db, p.session_id, p.pid, p.from_ns, p.to_ns + 1'000'000'000);
  if (n > 0 && p.steps >= 3)
    c.evidence.push_back({"~" + std::to_string(n / std::max<int64_t>(1, p.steps)) + " kernel launches a step (counted in "
                              "the kernel), each with its host-side dispatch",
                          {{"launches", n}, {"launches_per_step", n / std::max<int64_t>(1, p.steps)}}});
  gpu_idle_note(ctx, p, {}, c);
}

void storm(const RuleContext&, const ProcessPath& p, const Taken&, CausalChain& c) {
  const double per_step = p.steps >= 3 ? double(p.syncs) / double(p.steps) : 0;
  const double per_s = double(p.syncs) * 1e9 / double(std::max<int64_t>(1, p.covered_ns()));
  c.evidence.push_back({std::to_string(p.syncs) + " synchronisations on the path (" +
                            (per_step >= 2 ? fixed1(per_step) + " a step, " : "") + fixed1(per_s) +
                            "/s): each drains the GPU's queue, and the host refills it after",
                        {{"syncs", p.syncs}, {"syncs_per_step", per_step}, {"syncs_per_s", per_s}}});
}

const PathRule kPathRules[] = {
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
    {"cpu_throttled",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Throttled; }, false,
     false, "waits for a CPU while the CPUs idle: its cgroup's CPU limit (quota) was spent for the period",
     "Raise the CPU limit (the pod's resources.limits.cpu, cpu.max) or the request it is sized from, or use fewer "
     "threads so the quota lasts the period: torch.set_num_threads / OMP_NUM_THREADS, fewer DataLoader workers.",
     cpu_limit},
    {"thread_oversubscription",
     [](const View& v, const PathPart& x) {
       // Its waits for a CPU behind its own threads, and for the pool's
       // threads (the region's last to run) while they run or wait for one.
       return v.oversubscribed &&
              ((x.cls == PathClass::Runnable && x.by_pid == v.p.pid) ||
               (x.via == PathVia::Lock && v.oversubscribed->pool.count(x.tid) &&
                (x.cls == PathClass::OnCpu || x.cls == PathClass::Runnable || x.cls == PathClass::Sleeping)));
     },
     false, false, "waits for a CPU behind its own threads: more of them run than it has CPUs", "",
     oversubscription_evidence},
    {"cpu_contention",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::Runnable &&
              (other_workload(v, x.by_pid) || (v.neighbours_matter && x.by_pid == v.p.pid && !v.oversubscribed));
     },
     false, false, "waits for a CPU while other workloads run on it", "", cpu_neighbours},
    {"autotuning",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Autotune; }, false, false,
     "autotunes: benchmarks candidate kernels (for each new shape or key) instead of running the step",
     "Tune once: keep the shapes the tuner sees fixed or bucketed, warm each up before the timed loop, and keep "
     "the tuned results across runs.",
     tuning, Severity::High, -1, false, false, true},
    {"compilation",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Compile; }, false,
     true, "compiles (torch.compile / Triton / XLA / nvrtc) instead of running the step",
     "Compile once: keep shapes static (pad or bucket them), mark the dimensions that vary as dynamic "
     "(torch.compile(dynamic=True), torch._dynamo.mark_dynamic; jax.jit with padded shapes), and warm up every "
     "shape before the timed loop; a persistent compile cache keeps it across runs.",
     compiles, Severity::High, -1, false, false, true},
    {"gil_contention",
     [](const View&, const PathPart& x) {
       return x.via == PathVia::Gil && (x.cls == PathClass::OnCpu || x.cls == PathClass::Checkpoint);
     },
     false, true, "waits for the Python interpreter lock (GIL) held by another thread of its process",
     "Keep the interpreter lock off the training thread's path: do that thread's work in a process "
     "(multiprocessing, a DataLoader worker) instead of a thread, release the GIL in C extensions "
     "(Cython nogil, numpy/torch ops release it), or do it every N steps.",
     nullptr},
    {"lock_contention",
     [](const View& v, const PathPart& x) {
       return x.via == PathVia::Lock && x.tid != v.p.tid && x.cls == PathClass::OnCpu &&
              !(v.oversubscribed && v.oversubscribed->pool.count(x.tid));
     },
     false, true, "waits for another thread of its process doing host work (a lock it holds, a queue it fills)",
     "Do not make the training thread wait for another thread each step: hold shared locks briefly "
     "(copy, then release), hand results over through a queue without blocking (get_nowait, a "
     "double buffer), or move that work to a process.",
     nullptr},
    {"input_bound",
     [](const View& v, const PathPart& x) {
       // Waits for a CPU its own loader workers hold (more of them than the
       // CPUs left for them), the loop's or a worker's, are the input's too.
       return x.cls == PathClass::Input ||
              (x.cls == PathClass::Runnable && x.by_pid && v.workers.count(x.by_pid)) ||
              (x.via == PathVia::Input && x.cls != PathClass::DiskRead && x.cls != PathClass::DiskWrite &&
               x.cls != PathClass::Compile && x.cls != PathClass::Runnable && x.cls != PathClass::Throttled);
     },
     false, false, "waits for its input from other processes (loader workers, a pipe's writer) or for a CPU they hold",
     "Feed the GPU faster than it eats: give the DataLoader enough workers (and no more than the "
     "CPUs left for them), pin_memory=True with non_blocking copies, prefetch_factor >= 2 and "
     "persistent_workers=True; move decoding and augmentation off the critical path (GPU "
     "transforms, pre-processed or cached data, faster storage); the line above is where the workers' time goes.",
     input_workers},
    {"sync_bound", storm_part, false, true,
     "synchronises with the GPU and refills it (a storm of .item(), .cpu(), float() read-backs)",
     "Keep values on the GPU inside the loop: replace per-iteration .item()/.cpu()/float()/print(tensor) "
     "with tensor ops, accumulate metrics on the device and read them once per step (or every N "
     "steps), and use non_blocking copies into pinned memory with an event when a value must come back.",
     storm, Severity::High, int(PathClass::SyncIdle)},
    {"memcpy_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::Copy && !storm_part(v, x);
     },
     false, false, "copies between host and GPU",
     "Use pinned host buffers (DataLoader pin_memory=True, tensor.pin_memory()) and non_blocking copies on a side "
     "stream so they overlap compute; keep tensors on the GPU across steps instead of copying them back and forth.",
     nullptr},
    {"allocator_churn",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Alloc; }, false, true,
     "allocates and frees device memory",
     "Stop returning device memory inside the loop: drop periodic torch.cuda.empty_cache() and per-step "
     "cudaMalloc/cudaFree, pre-allocate buffers once, let the caching allocator keep blocks.",
     nullptr},
    {"pinning",
     [](const View&, const PathPart& x) { return x.cls == PathClass::Pin; }, false, true,
     "page-locks host memory and gives it back",
     "Pin once and reuse: allocate the pinned staging buffer before the loop and copy into it "
     "(tensor.pin_memory() once, or DataLoader(pin_memory=True)), let PyTorch's caching host allocator "
     "keep pinned blocks, and avoid cudaHostRegister/cudaHostAlloc inside the step.",
     pins},
    {"host_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::OnCpu && x.via == PathVia::Own && !storm_part(v, x);
     },
     true, true, "runs the loop thread's own host code (Python, data preparation) while the GPU waits",
     "Move host work off the dispatcher thread's critical path: do data preparation in DataLoader "
     "workers, replace Python loops over tensors with batched tensor ops on the GPU, avoid "
     "per-step host-side bookkeeping (logging, metrics) or do it every N steps; the line above is "
     "where its CPU time goes.",
     nullptr},
    {"launch_bound",
     [](const View& v, const PathPart& x) {
       return x.cls == PathClass::Launching && !storm_part(v, x);
     },
     true, true, "launches kernels one by one, with the framework's per-op dispatch around each",
     "Launch fewer, larger kernels: fuse elementwise work (torch.compile, or a fused op), batch "
     "small tensors, and replay the step as a CUDA graph (torch.cuda.graphs, torch.compile "
     "mode=\"reduce-overhead\") so one launch issues the step's kernels.",
     launches, Severity::High, -1, true, true},
    {"gpu_bound",
     [](const View&, const PathPart& x) { return x.cls == PathClass::GpuBusy; }, false,
     false, "waits for the GPU to finish the queued kernels: the GPU is the bottleneck, not the host",
     "Nothing on the host to fix: the GPU's own work sets the step. Make the kernels cheaper (mixed precision, "
     "fused attention, larger matrix tiles), or use a larger GPU.",
     nullptr, Severity::Low},
};

bool calls_only(std::string_view cause) {
  // Told from the calls alone: the time inside them.
  for (const char* c : {"sync_bound", "memcpy_bound", "allocator_churn", "pinning", "launch_bound", "gpu_bound",
                        "autotuning"})
    if (cause == c) return true;
  return false;
}

Severity severity_of(double saving, bool generic, Severity most) {
  Severity s = saving >= (generic ? kHighGenericShare : kHighShare) ? Severity::High
               : saving >= kMediumShare                            ? Severity::Medium
                                                                   : Severity::Low;
  return std::min(s, most);
}

// What judges host time on the path (on the CPU, dispatching): where the
// path ran past the launch windows, launching there passes for host work.
bool takes_host_time(std::string_view cause) {
  for (const char* c : {"host_bound", "launch_bound", "lock_contention", "gil_contention"})
    if (cause == c) return true;
  return false;
}

// An episode: a cause that takes most of the step in part of the window
// (a neighbour that ran for a minute) is judged on that part, where it is
// three tenths of the window or more.
struct Episode {
  std::array<int64_t, kPathSlices> taken{};  // the cause's time per tenth of the window
  int64_t covered_ns = 0;                    // the tenths it took most of
  int slices = 0;
  double share = 0;                          // of those tenths; 0: no episode
};

Episode episode_of(const ProcessPath& p, const Taken& t) {
  Episode e;
  for (const auto* part : t.parts)
    for (int i = 0; i < kPathSlices; i++) e.taken[size_t(i)] += part->slices[size_t(i)];
  int64_t in_ns = 0;
  for (int i = 0; i < kPathSlices; i++) {
    // A slice the launch windows barely touch says too little to judge.
    const int64_t covered = p.slice_ns[size_t(i)];
    if (double(covered) < 0.5 * double(p.covered_ns()) / kPathSlices ||
        double(e.taken[size_t(i)]) < kHighShare * double(covered))
      continue;
    in_ns += e.taken[size_t(i)], e.covered_ns += covered, e.slices++;
  }
  e.share = e.covered_ns >= int64_t(kEpisodeCover * double(p.covered_ns())) && e.slices < kPathSlices
                ? double(in_ns) / double(e.covered_ns)
                : 0;
  return e;
}

// A cost that recurs where it costs (recurring_line), judged where it ended:
// under 5% of it in the window's last three tenths is a one-time cost that
// is over (torch.compile's first compile, longer than a short trace's loop),
// not one that slows the steps. A recompile each step leaves ~30% there.
void judge_one_time(const std::array<int64_t, kPathSlices>& taken, const Taken& t, CausalChain& c) {
  int64_t late = 0;
  for (int i = kPathSlices - 3; i < kPathSlices; i++) late += taken[size_t(i)];
  if (20 * late >= t.ns) return;
  c.severity = Severity::Low;
  c.evidence.push_back({"it ended before the window's last three tenths (" + pct(double(late) / double(t.ns)) +
                            " of it there): a one-time cost, over (a first compile, a warm-up), not one of the "
                            "steps: LOW",
                        {{"late_share", double(late) / double(t.ns)}, {"one_time", true}}});
}

// The threads the cause ran on, most time first (three at most).
void add_threads_on_path(const ProcessPath& p, const Taken& t, std::map<uint32_t, int64_t>& by_thread,
                         CausalChain& c) {
  std::string where;
  std::vector<std::pair<int64_t, const PathPart*>> threads;
  std::set<uint32_t> seen;
  for (const auto* part : t.parts)
    if (seen.insert(part->tid).second) threads.push_back({by_thread[part->tid], part});
  std::sort(threads.begin(), threads.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < threads.size() && i < 3; i++)
    where += (i ? ", " : "") + thread_words(p, *threads[i].second) + " " + pct(double(threads[i].first) / double(t.ns));
  c.evidence.push_back({"on the path on " + where, {{"threads", threads.size()}}});
}

// The line: the part with a line that took the most.
// A user's line before a library's (a stack deeper than the frames kept
// loses its user frames: then the library's line is what there is).
void place_line(const RuleContext& ctx, const PathRule& rule, const ProcessPath& p, const Taken& t, CausalChain& c) {
    bool any_class = rule.line_from < 0, any_frame = false;
    auto lined = [&](const PathPart* part) {
      return part->frame && (any_frame || !part->frame->library()) && (any_class || int(part->cls) == rule.line_from);
    };
    if (std::none_of(t.parts.begin(), t.parts.end(), lined)) any_class = true;
    if (std::none_of(t.parts.begin(), t.parts.end(), lined)) any_frame = true;
    if (rule.common_line) c.frame = common_frame(ctx, t);
    std::vector<const PathPart*> candidates = t.parts;
    if (rule.recurring_line) {
      // By line, over all its parts: a line with under 5% of its time in the
      // window's last three tenths is a cost that ended (a second's time is
      // spread over its lines alike, so a warm-up that ended in it leaves a
      // little there; a recompile each step has ~30%): it goes after the
      // lines that go on. Then the most time.
      constexpr int kLate = kPathSlices - 3;
      std::map<std::string, std::pair<int64_t, int64_t>> by_line;  // late ns, ns
      for (const auto* part : t.parts)
        if (lined(part)) {
          auto& x = by_line[part->frame->where()];
          for (int i = kLate; i < kPathSlices; i++) x.first += part->slices[size_t(i)];
          x.second += part->ns;
        }
      auto key = [&](const PathPart* x) {
        if (!lined(x)) return std::pair<int, int64_t>{-1, 0};
        const auto& l = by_line[x->frame->where()];
        return std::pair<int, int64_t>{20 * l.first >= l.second, l.second};
      };
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](const PathPart* x, const PathPart* y) { return key(x) > key(y); });
    }
    for (const auto* part : candidates)
      if (!c.frame && lined(part)) {
        c.frame = part->frame;
        if (part->tid != p.tid)
          c.frame->func = (part->thread.empty() ? "thread " + std::to_string(part->tid) : part->thread) + ": " + c.frame->func;
        break;
      }
    if (!c.frame)
      c.no_frame_reason = std::string(rule.root_cause) == "cpu_throttled"
                              ? "a CPU limit holds back every line alike"
                              : "no Python stack on this part of the path (no CPU samples there, or a thread without "
                                "Python)";
}

std::vector<CausalChain> run(const RuleContext& ctx, const PathRule& rule) {
  std::vector<CausalChain> out;
  for (const auto& p : ctx.paths) {
    const View view(ctx, p);
    Taken t;
    for (const auto& part : p.parts)
      if (rule.take(view, part)) t.ns += part.ns, t.parts.push_back(&part);
    // A second of the loop at least: less is a start, not a step to judge.
    if (t.parts.empty() || !p.judged_enough() || (!calls_only(rule.root_cause) && !p.host_context) ||
        (p.launches_unseen && takes_host_time(rule.root_cause)))
      continue;
    const double share = double(t.ns) / double(p.covered_ns());
    if (share < kMinShare) continue;
    const Episode ep = episode_of(p, t);
    const double episode = ep.share;
    const double saving = p.saving(std::max(share, episode), rule.on_host);
    // Launching bounds the step only where it takes more of it than the GPU
    // is busy (NVML, or the path's own waits on a busy GPU): otherwise the
    // host keeps the queue ahead, the GPU sets the step, and it is a note.
    // (The loop's own host code at a line is judged on what removing it
    // saves, as every other cause.)
    const double gpu_share = std::max(p.gpu_busy.value_or(0), p.share(PathClass::GpuBusy));
    const bool gpu_sets_step = rule.bound_only_past_gpu && std::max(share, episode) <= gpu_share;
    CausalChain c;
    // Without a repeating step a generic account is of one stretch of
    // activity, not of a loop: MEDIUM at most.
    c.severity = severity_of(saving, rule.generic,
                             gpu_sets_step                    ? Severity::Low
                             : rule.generic && p.steps < 3 ? Severity::Medium
                                                              : rule.most);
    c.impact_ns = t.ns;
    c.share = share;
    c.threshold = kMinShare;
    // The symptom: the thread that took most of it.
    std::map<uint32_t, int64_t> by_thread;
    for (const auto* part : t.parts) by_thread[part->tid] += part->ns;
    const auto top = std::max_element(by_thread.begin(), by_thread.end(),
                                      [](const auto& x, const auto& y) { return x.second < y.second; });
    const PathPart* first = *std::find_if(t.parts.begin(), t.parts.end(), [&](const PathPart* x) { return x->tid == top->first; });
    c.symptom.pid = p.pid;
    c.symptom.comm = ctx.comm(p.pid);
    c.symptom.tid = first->tid;
    c.symptom.thread = first->thread;
    const std::string period =
        p.steps >= 3 ? "each " + format_duration(p.step_ns) + " step (" + std::to_string(p.steps) + ", marked by " +
                           p.step_marker + "): " + format_duration(int64_t(double(t.ns) / double(p.steps))) + " a step"
                     : format_duration(p.covered_ns()) + " of activity (no repeating step found)";
    c.evidence.push_back({pct(share) + " of " + period + " " + rule.words,
                          {{"path_share", share}, {"path_ns", t.ns}, {"saving", saving},
                           {"per_step_ns", p.steps >= 3 ? t.ns / p.steps : 0}}});
    if (episode > share)
      c.evidence.push_back({"in " + std::to_string(ep.slices) + " of " + std::to_string(kPathSlices) +
                                " tenths of the window (" + format_duration(ep.covered_ns) + ") it took " +
                                pct(episode) + " of the path: an episode",
                            {{"episode_share", episode}, {"episode_ns", ep.covered_ns}, {"episode_slices", ep.slices}}});
    if (saving + 1e-9 < std::max(share, episode))
      c.evidence.push_back({"the GPU was busy " + pct(p.gpu_busy.value_or(0)) + " of the time (NVML): making it faster "
                                "saves at most " + pct(saving) + " of the step",
                            {{"gpu_busy", p.gpu_busy.value_or(0)}}});
    if (rule.recurring_line) judge_one_time(ep.taken, t, c);
    if (gpu_sets_step)
      c.evidence.push_back({"the GPU was busy " + pct(gpu_share) + " of the step, more than this takes: the GPU sets the "
                                "step (the host keeps its queue ahead), so this is LOW",
                            {{"gpu_share", gpu_share}, {"gpu_sets_step", true}}});
    if (by_thread.size() > 1 || first->tid != p.tid) add_threads_on_path(p, t, by_thread, c);
    c.evidence.push_back({"the step's critical path: " + p.text, {{"path", p.text}}});
    place_line(ctx, rule, p, t, c);
    c.recommendation = rule.recommendation;
    if (rule.more) rule.more(ctx, p, t, c);
    out.push_back(std::move(c));
  }
  return out;
}

const PathRule& rule_named(std::string_view name) {
  for (const auto& r : kPathRules)
    if (name == r.root_cause) return r;
  throw std::logic_error("no path rule " + std::string(name));
}

}  // namespace

std::vector<CausalChain> rule_on_path(const RuleContext& ctx, std::string_view root_cause) {
  return run(ctx, rule_named(root_cause));
}

std::vector<CausalChain> weigh_on_path(const RuleContext& ctx, std::string_view root_cause, std::vector<CausalChain> old,
                                       bool path_line) {
  std::vector<CausalChain> on_path = run(ctx, rule_named(root_cause));
  std::set<uint32_t> with_path;
  for (const auto& p : ctx.paths) with_path.insert(p.pid);
  std::vector<CausalChain> out;
  for (auto& c : old) {
    if (!with_path.count(c.symptom.pid)) {
      out.push_back(std::move(c));  // no path to weigh it on (too few calls for an account)
      continue;
    }
    auto it = std::find_if(on_path.begin(), on_path.end(), [&](const CausalChain& x) { return x.symptom.pid == c.symptom.pid; });
    const size_t at = c.evidence.size();  // after the rule's own evidence
    if (it == on_path.end()) {
      // Not on the critical path: what it costs overlaps other work.
      c.severity = Severity::Low;
      c.impact_ns = 0;
      c.evidence.insert(c.evidence.begin() + at, {"under 5% of the loop's critical path: the rest of what it "
                                                  "costs overlaps other work, or is too little to matter",
                                                  {{"path_share", 0.0}}});
    } else {
      c.severity = it->severity;
      c.impact_ns = it->impact_ns;
      c.share = it->share;
      c.threshold = it->threshold;
      // What the path says of it, after the rule's own evidence (its share,
      // the threads it was on, an episode; not the path's line again).
      for (const auto& ev : it->evidence)
        if (!ev.data.contains("path") && !ev.data.contains("ran_instead")) c.evidence.push_back(ev);
      // Where the time on the path was lost, rather than where its calls were slowest.
      if (path_line && it->frame) c.frame = it->frame, c.no_frame_reason.clear();
      if (!c.frame) c.frame = it->frame;
      on_path.erase(it);
    }
    out.push_back(std::move(c));
  }
  for (auto& c : on_path) out.push_back(std::move(c));
  return out;
}

}  // namespace causeway::analyze
