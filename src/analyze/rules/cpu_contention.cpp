// SPDX-License-Identifier: Apache-2.0
// cpu_contention from slow calls: the slow calls' thread was runnable but
// preempted (off-CPU in state 0) inside the call, and we know who ran
// instead. Only time taken by other workloads counts: a process preempted by
// its own threads or its own workers (children that woke its threads: loader
// workers oversubscribing its CPUs) has no neighbour to move away. A process
// with a critical path is judged on it instead (path_rules.cpp): this rule
// speaks for the others (too few calls for an account).
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

}  // namespace

std::vector<CausalChain> rule_cpu_contention(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // Off-CPU intervals of the same thread overlapping a slow call, clipped to it.
  const auto ov = ctx.overlap("offcpu_events", "o");
  const std::string inside = " FROM slow s" + ov.join + " LEFT JOIN comms cm ON cm.id = o.by_comm_id WHERE o.state = 0";
  const std::string& overlap = ov.clipped;
  for (const auto& g : slow_groups(ctx)) {
    const std::string pid = std::to_string(g.pid);
    // The idle task (pid 0) is no neighbour: a CPU that idles while the thread
    // waits is a CPU limit (cpu_throttled).
    const std::string of = " AND s.pid = " + pid + " AND coalesce(o.by_pid, 0) NOT IN (SELECT 0 UNION SELECT " + pid +
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
  return out;
}

}  // namespace causeway::analyze
