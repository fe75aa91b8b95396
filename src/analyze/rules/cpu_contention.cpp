// SPDX-License-Identifier: Apache-2.0
// cpu_contention from slow calls: the slow calls' thread was runnable but
// preempted (off-CPU in state 0) inside the call, and we know who ran
// instead. Only time taken by other workloads counts: a process preempted by
// its own threads or its own workers (children that woke its threads: loader
// workers oversubscribing its CPUs) has no neighbour to move away. A process
// with a critical path is judged on it instead (path_rules_cpu.cpp): this rule
// speaks for the others (too few calls for an account).
#include <map>
#include <optional>

#include "dispatch.h"

#include "causeway/store/rule_reads.h"

namespace causeway::analyze {

namespace {

std::string keep_off(const std::string& comm, const std::string& by_pid, uint32_t pid) {
  return "Keep " + comm + " (pid " + by_pid + ") off the CPUs of pid " + std::to_string(pid) +
         ": pin the workload with a cpuset or taskset and move the neighbour elsewhere, or lower its share "
         "(cpu.weight, nice 19); give the thread that launches and synchronizes a core of its own.";
}

}  // namespace

std::vector<CausalChain> rule_cpu_contention(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // Off-CPU intervals of the same thread overlapping a slow call, clipped to
  // it. The idle task (pid 0) is no neighbour: a CPU that idles while the
  // thread waits is a CPU limit (cpu_throttled).
  const int64_t longest = ctx.max_offcpu_ns(CW_STATE_RUNNING);
  for (const auto& g : slow_groups(ctx)) {
    const auto preempted = store::slow_call_preemptions(ctx.db, g.pid, longest);
    const int64_t off_ns = preempted.ns, preemptions = preempted.preemptions;
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
    for (const auto& p : store::slow_call_preemptors(ctx.db, g.pid, longest, 3)) {
      if (first_comm.empty()) {
        first_comm = p.comm;
        first_pid = std::to_string(p.pid);
      }
      ran += (ran.empty() ? "" : ", ") + p.comm + " (pid " + std::to_string(p.pid) + ") " + ms(p.ns) +
             " in " + std::to_string(p.preemptions);
      who.push_back({{"by_comm", p.comm}, {"by_pid", p.pid}, {"ns", p.ns}, {"preemptions", p.preemptions}});
    }
    c.evidence.push_back({"ran instead: " + ran, {{"ran_instead", who}}});

    std::string cpus;
    nlohmann::json cpu_list = nlohmann::json::array();
    for (const auto& k : store::slow_call_preemption_cpus(ctx.db, g.pid, longest, 4)) {
      cpus += (cpus.empty() ? "" : ", ") + std::to_string(k.cpu) + " (" + std::to_string(k.preemptions) + ")";
      cpu_list.push_back({{"cpu", k.cpu}, {"preemptions", k.preemptions}});
    }
    c.evidence.push_back({"on CPU " + cpus, {{"cpus", cpu_list}}});

    c.frame = ctx.top_frame(store::slow_calls_stack_sql(g.pid, g.top_op));
    c.recommendation = keep_off(first_comm, first_pid, g.pid);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
