// SPDX-License-Identifier: Apache-2.0
// The critical path's waits for a CPU: cpu_throttled,
// thread_oversubscription, cpu_contention (path_rule.h).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "causeway/common/time.h"
#include "causeway/model/cgroup_cpu.h"
#include "causeway/model/process_cpus.h"
#include "path_rule.h"

namespace causeway::analyze::path_rules {

namespace {

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

// A thread's time wanting a CPU over the judged time: from its first interval
// off the CPU to the end of its last, less its sleeps (a wake-up's wait for a
// CPU, runq_ns, is wanting one).
double wanting_ns(const store::ThreadOffCpu& th, const ProcessPath& p) {
  return std::max(0.0, double(std::min<int64_t>(th.last_end_ns, p.to_ns) - th.first_ns) - double(th.asleep_ns));
}

}  // namespace

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

namespace {

// Own workers and the process itself are not other workloads.
bool other_workload(const View& v, uint32_t by_pid) {
  return by_pid && by_pid != v.p.pid && !v.workers.count(by_pid);
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

}  // namespace

std::span<const PathRule> cpu_path_rules() {
  static const PathRule rules[] = {
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
  };
  return rules;
}

}  // namespace causeway::analyze::path_rules
