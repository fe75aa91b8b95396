// SPDX-License-Identifier: Apache-2.0
// cpu_contention: the slow calls' thread was runnable but preempted (off-CPU
// in state 0) inside the call, and we know who ran instead. Only time taken
// by other workloads counts: a process preempted by its own threads or its
// own workers (children that woke its threads: loader workers
// oversubscribing its CPUs) has no neighbour to move away; input_bound says
// when its workers wait for CPUs.
// Also outside calls: a dispatcher thread runnable while neighbours ran, or
// asleep waiting for a sibling thread (a lock's or the GIL's holder, its
// autograd thread) that other workloads keep off the CPUs: that wait is the
// contention's, and lock_contention / gil_contention fold into it (a thread
// woken by its own sibling is never its input either).
#include <map>
#include <optional>

#include "dispatch.h"

namespace causeway::analyze {

namespace {

std::string keep_off(const std::string& comm, const std::string& by_pid, uint32_t pid) {
  return "Keep " + comm + " (pid " + by_pid + ") off the CPUs of pid " + std::to_string(pid) +
         ": pin the workload with a cpuset or taskset and move the neighbour elsewhere, or lower its share "
         "(cpu.weight, nice 19); give the thread that launches and synchronizes a core of its own.";
}

// Who of other workloads (not the process, not its workers) took CPUs in `ran`.
struct Neighbours {
  int64_t ns = 0, all_ns = 0;
  std::string words;
  nlohmann::json who = nlohmann::json::array();
  const OtherTask* first = nullptr;
};
Neighbours neighbours(const std::vector<OtherTask>& ran) {
  Neighbours n;
  for (const auto& p : ran) {
    n.all_ns += p.ns;
    if (p.same_process || p.child || !p.pid) continue;
    n.ns += p.ns;
    if (!n.first) n.first = &p;
    if (n.who.size() < 3) {
      n.words += (n.words.empty() ? "" : ", ") + (p.name.empty() ? "?" : p.name) + " (pid " + std::to_string(p.pid) +
                 ") " + ms(p.ns) + " in " + std::to_string(p.times);
      n.who.push_back({{"by_comm", p.name}, {"by_pid", p.pid}, {"ns", p.ns}, {"preemptions", p.times}});
    }
  }
  return n;
}

// Other workloads ran for at least a quarter of a thread's waits for a CPU.
// Its own threads take the rest where they hand work to each other (a thread
// woken queues behind its waker until that one sleeps): with the other CPUs
// free, that costs nothing; with neighbours on them, the hand-off waits too.
bool neighbours_matter(const Neighbours& n) {
  return n.first && n.ns >= kMinEvidenceNs && double(n.ns) >= 0.25 * double(n.all_ns);
}

// Where a thread waited for a starved sibling: the statement it slept in
// (its last call before each wait), else where it resumed.
std::optional<UserFrame> waiting_line(const RuleContext& ctx, const ThreadAccount& a, uint32_t sibling) {
  const std::string waits = ctx.in_window("o.") + thread_rows(a) + " AND o.state = 1 AND " + std::to_string(sibling) +
                            " IN (o.waker_tid, o.holder_tid)";
  if (auto f = ctx.top_frame(last_call_before_sql(waits))) return f;
  return ctx.top_frame(first_call_after_sql(waits));
}

// A dispatcher thread kept off the CPUs outside its calls, where no slow call
// shows it: runnable while neighbours ran, and asleep waiting for a sibling
// thread (a lock's or the GIL's holder, its autograd thread) that neighbours
// starved. Evidence for the process's chain, or a chain of its own.
// The chain's line is where the most time with a place was lost: its slow
// calls', or the line where a thread waited longer for the starved sibling
// (the time runnable outside calls has no one line).
void waits_for_cpus(const RuleContext& ctx, std::vector<CausalChain>& out) {
  constexpr double kMinPart = 0.05;  // of the step, for a part to count
  std::map<uint32_t, int64_t> slow_ns;  // per process: the slow calls' preempted time
  for (const auto& c : out) slow_ns[c.symptom.pid] = c.impact_ns;
  struct Line {
    int64_t ns = 0;
    std::optional<UserFrame> frame;
  };
  std::map<uint32_t, Line> lines;  // per process: the longest wait for a starved sibling with a line
  for (const auto& a : ctx.accounts) {
    if (!judgeable(a) || !a.host_context) continue;
    std::vector<Evidence> parts;
    double share = 0;
    int64_t impact = 0;
    const OtherTask* first = nullptr;
    const Neighbours own = neighbours(a.ran_instead);
    const double own_share = a.share(&TimeSplit::runnable);
    if (own_share >= kMinPart && neighbours_matter(own)) {
      share += own_share;
      impact += a.time.runnable;
      first = own.first;
      parts.push_back({pct(own_share) + " of " + period_words(a) + " runnable outside CUDA calls but not running; " +
                           "other workloads ran " + pct(double(own.ns) / double(std::max<int64_t>(1, own.all_ns))) +
                           " of that time: " + own.words,
                       {{"runnable_share", own_share}, {"by_others_ns", own.ns}, {"ran_instead", own.who}}});
    }
    for (const bool gil : {true, false}) {
      const double wait = a.share(gil ? &TimeSplit::gil : &TimeSplit::lock);
      auto h = std::find_if(a.waited_for.begin(), a.waited_for.end(), [&](const WaitedFor& w) { return w.gil == gil; });
      if (wait < kMinPart || h == a.waited_for.end() || !holder_starved(*h)) continue;
      // Where the loop stalls on a starved sibling, whoever took the CPUs from
      // it (the share of other workloads there moves from run to run): the
      // line, if the process has this chain.
      const int64_t waited = gil ? a.time.gil : a.time.lock;
      if (waited > lines[a.pid].ns)
        if (auto f = waiting_line(ctx, a, h->tid)) lines[a.pid] = {waited, std::move(f)};
      const Neighbours n = neighbours(h->ran_instead);
      if (!neighbours_matter(n)) continue;
      share += wait;
      impact += waited;
      if (!first) first = n.first;
      const std::string holder = (h->name.empty() ? "thread" : h->name) + " (" + std::to_string(h->tid) + ")";
      parts.push_back({pct(wait) + " of " + period_words(a) + " waiting for " + (gil ? "the GIL held by " : "") + holder +
                           ", which waited for a CPU " + pct(double(h->runnable_ns) / double(std::max<int64_t>(1, h->ns))) +
                           " of those waits (" + ms(n.ns) + " while other workloads ran): ran instead: " + n.words,
                       {{"waits_share", wait}, {"holder_tid", h->tid}, {"holder", h->name},
                        {"holder_runnable_ns", h->runnable_ns}, {"by_others_ns", n.ns}, {"ran_instead", n.who},
                        {"via", gil ? "gil" : "lock"}}});
    }
    if (parts.empty()) continue;
    auto c = std::find_if(out.begin(), out.end(), [&](const CausalChain& x) { return x.symptom.pid == a.pid; });
    if (c != out.end()) {
      // Another thread of the process, or its slow calls, made the chain:
      // this thread's share adds evidence and may raise it.
      for (auto& e : parts) c->evidence.push_back(std::move(e));
      if (share >= kHighWaitShare) c->severity = Severity::High;
      c->impact_ns = std::max(c->impact_ns, impact);
      continue;
    }
    if (share < kMinWaitShare) continue;
    CausalChain n;
    n.symptom = thread_symptom(ctx, a, -1);
    n.severity = share >= kHighWaitShare ? Severity::High : Severity::Medium;
    n.impact_ns = impact;
    n.share = share;
    n.threshold = kMinWaitShare;
    n.evidence = std::move(parts);
    n.evidence.push_back(split_evidence(a));
    // Without a wait's line (below): its slow calls' line, else where it runs.
    n.frame = ctx.top_frame("SELECT stack_id FROM slow WHERE pid = " + std::to_string(a.pid));
    if (!n.frame) n.frame = sampled_words(ctx, a, a.tid, true, 1).top;
    if (!n.frame) n.no_frame_reason = "no call with a stack around the waits, and no CPU samples of the thread";
    n.recommendation = keep_off(first->name.empty() ? "?" : first->name, std::to_string(first->pid), a.pid);
    out.push_back(std::move(n));
  }
  for (auto& c : out) {
    auto l = lines.find(c.symptom.pid);
    auto slow = slow_ns.find(c.symptom.pid);
    if (l != lines.end() && l->second.ns > (slow == slow_ns.end() ? 0 : slow->second)) {
      c.frame = l->second.frame;
      c.no_frame_reason.clear();
    }
  }
}

}  // namespace

std::vector<CausalChain> rule_cpu_contention(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // Off-CPU intervals of the same thread overlapping a slow call, clipped to it.
  const auto ov = ctx.overlap("offcpu_events", "o");
  const std::string inside = " FROM slow s" + ov.join + " LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE o.state = 0";
  const std::string& overlap = ov.clipped;
  for (const auto& g : slow_groups(ctx)) {
    const std::string pid = std::to_string(g.pid);
    const std::string of = " AND s.pid = " + pid + " AND coalesce(o.by_pid, 0) NOT IN (SELECT " + pid +
                           " UNION " + own_workers_sql(g.pid) + ")";
    int64_t off_ns = 0, preemptions = 0;
    ctx.each("SELECT coalesce(sum(" + overlap + "), 0), count(*)" + inside + of,
             [&](store::Statement& s) {
               off_ns = s.col_int(0);
               preemptions = s.col_int(1);
             });
    double explained = g.excess_ns ? double(off_ns) / g.excess_ns : 0;
    if (explained < kMinExplained || off_ns < kMinEvidenceNs) continue;

    CausalChain c;
    c.symptom = ctx.symptom(g.pid, g.top_op);
    double share = double(g.excess_ns) / ctx.process_span_ns(g.pid);
    c.severity = attributed_severity(explained, share);
    c.impact_ns = off_ns;
    c.evidence.push_back(
        {std::to_string(preemptions) + " preemptions: " + ms(off_ns) +
             " runnable but off-CPU inside the slow calls (" + pct(std::min(1.0, explained)) +
             " of their " + ms(g.excess_ns) + " excess)",
         {{"preemptions", preemptions}, {"offcpu_runnable_ns", off_ns},
          {"excess_ns", g.excess_ns}, {"explained", explained}}});

    std::string ran, first_comm, first_pid;
    nlohmann::json who = nlohmann::json::array();
    ctx.each("SELECT coalesce(cm.name, '?'), coalesce(o.by_pid, 0), sum(" + overlap +
                 "), count(*)" + inside + of + " GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 3",
             [&](store::Statement& s) {
               auto name = s.col_text(0);
               auto by = s.col_int(1);
               if (first_comm.empty()) {
                 first_comm = name;
                 first_pid = std::to_string(by);
               }
               ran += (ran.empty() ? "" : ", ") + name + " (pid " + std::to_string(by) + ") " +
                      ms(s.col_int(2)) + " in " + std::to_string(s.col_int(3));
               who.push_back({{"by_comm", name}, {"by_pid", by}, {"ns", s.col_int(2)},
                              {"preemptions", s.col_int(3)}});
             });
    c.evidence.push_back({"ran instead: " + ran, {{"ran_instead", who}}});

    std::string cpus;
    nlohmann::json cpu_list = nlohmann::json::array();
    ctx.each("SELECT o.cpu, count(*)" + inside + of + " GROUP BY 1 ORDER BY 2 DESC LIMIT 4",
             [&](store::Statement& s) {
               cpus += (cpus.empty() ? "" : ", ") + std::to_string(s.col_int(0)) + " (" +
                       std::to_string(s.col_int(1)) + ")";
               cpu_list.push_back({{"cpu", s.col_int(0)}, {"preemptions", s.col_int(1)}});
             });
    c.evidence.push_back({"on CPU " + cpus, {{"cpus", cpu_list}}});

    c.frame = ctx.top_frame("SELECT stack_id FROM slow WHERE pid = " + pid +
                            " AND op_id = " + std::to_string(g.top_op));
    c.recommendation = keep_off(first_comm, first_pid, g.pid);
    out.push_back(std::move(c));
  }
  waits_for_cpus(ctx, out);
  return out;
}

}  // namespace causeway::analyze
