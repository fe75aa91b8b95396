// SPDX-License-Identifier: Apache-2.0
// straggler_rank and network_degraded: explain rules over the cross-rank
// analysis (src/analyze/cross_rank.cpp, docs/cluster.md). They read the whole
// file's collectives: a straggler is a property of the job, not of a window.
#include <cmath>

#include "causeway/analyze/cross_rank.h"
#include "../rule_context.h"

namespace causeway::analyze {
namespace {

constexpr int64_t kMinLateCollectives = 3;

std::string signed_ms(int64_t ns) { return (ns < 0 ? "-" : "+") + ms(std::llabs(ns)); }

std::string who(const RankId& id) {
  return "rank " + std::to_string(id.rank) + " (pid " + std::to_string(id.pid) +
         (id.host.empty() ? "" : " on " + id.host) + ")";
}

// One line on how the hosts' clocks were reconciled: skew is stated, not ignored.
Evidence clock_evidence(const CrossRankReport& rep) {
  std::string text;
  nlohmann::json data = nlohmann::json::array();
  std::string ref;
  for (const auto& k : rep.clocks)
    if (k.reference) ref = k.node;
  bool unknown = false;
  for (const auto& k : rep.clocks) {
    data.push_back({{"node", k.node}, {"boot_id", k.boot_id}, {"offset_ns", k.offset_ns},
                    {"uncertainty_ns", k.uncertainty_ns}, {"samples", k.samples},
                    {"estimated", k.estimated}, {"reference", k.reference}});
    if (k.reference) continue;
    if (!text.empty()) text += "; ";
    if (k.estimated) {
      text += k.node + " " + signed_ms(-k.offset_ns) + " vs " + ref + " (±" + ms(k.uncertainty_ns) +
              ", " + std::to_string(k.samples) + " blocking collectives)";
    } else {
      unknown = true;
      text += k.node + " vs " + ref + " not measurable (no blocking collectives)";
    }
  }
  if (text.empty()) text = "all ranks on one host clock: no skew";
  else text = "clock skew: " + text + (unknown ? "; lateness near NTP error may be skew" : "; corrected");
  return {text, {{"clocks", data}}};
}

std::string host_evidence_text(const Straggler& s) {
  const auto& e = s.evidence;
  std::string t = "on " + s.id.host + " while it was late (" + ms(e.late_ns) + "):";
  bool any = false;
  auto add = [&](const std::string& part) {
    t += (any ? ", " : " ") + part;
    any = true;
  };
  if (e.offcpu_ns > 0)
    add("off-CPU " + ms(e.offcpu_ns) +
        (e.offcpu_runnable_ns > 0
             ? " (" + ms(e.offcpu_runnable_ns) + " runnable" +
                   (e.top_preemptor.empty() ? "" : ", preempted by " + e.top_preemptor) + ")"
             : ""));
  if (e.io_requests > 0) add(std::to_string(e.io_requests) + " I/O requests (" + ms(e.io_ns) + ")");
  if (e.retransmits > 0) add(std::to_string(e.retransmits) + " TCP retransmits");
  if (e.reclaim_ns > 0) add("direct reclaim " + ms(e.reclaim_ns));
  if (e.rdma_errors > 0) add(std::to_string(e.rdma_errors) + " RDMA port errors");
  if (e.verbs_fatal > 0) add(std::to_string(e.verbs_fatal) + " fatal verbs events");
  if (!any) t += " nothing traced on the host explains it (GPU-side or untraced work)";
  return t;
}

std::string majority_op(const CrossRankReport& rep) {
  std::map<std::string, int> n;
  for (const auto& i : rep.worst) n[i.op]++;
  std::string best = "collective";
  int top = 0;
  for (const auto& [op, k] : n)
    if (k > top) {
      top = k;
      best = op;
    }
  return best;
}

Severity by_share(double share) {
  return share >= 0.1 ? Severity::High : share >= 0.02 ? Severity::Medium : Severity::Low;
}

}  // namespace

std::vector<CausalChain> rule_cross_rank_straggler(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const CrossRankReport rep = analyze_cross_rank(ctx.db);
  if (!rep.straggler || rep.straggler->times_last < kMinLateCollectives) return out;
  const Straggler& s = *rep.straggler;
  const int nranks = int(rep.ranks.size());
  // The others' waiting as a share of their time over the matched span.
  const double others_ns = double(std::max(1, nranks - 1)) * double(std::max<int64_t>(1, rep.span_ns));
  const double share = s.others_wait_gpu_s * 1e9 / others_ns;

  CausalChain c;
  c.root_cause = "straggler_rank";
  c.severity = by_share(share);
  c.impact_ns = int64_t(s.others_wait_gpu_s * 1e9);
  c.symptom.pid = s.id.pid;
  c.symptom.comm = ctx.comm(s.id.pid);
  c.symptom.op = majority_op(rep);
  c.symptom.calls = rep.matched;
  c.symptom.slow_calls = rep.late;
  c.symptom.p50_ns = rep.median_lateness_ns;
  c.symptom.p99_ns = c.symptom.max_ns = rep.worst.empty() ? 0 : rep.worst.front().lateness_ns;
  c.symptom.wall_share = share;
  int64_t p90 = 0;
  for (const auto& r : rep.ranks)
    if (r.id == s.id) p90 = r.p90_ns;
  c.evidence.push_back(
      {who(s.id) + " entered last in " + std::to_string(s.times_last) + " of " +
           std::to_string(rep.late) + " late collectives (" + std::to_string(rep.matched) +
           " matched across " + std::to_string(nranks) + " ranks), median " +
           ms(s.median_lateness_ns) + " behind the first rank, p90 " + ms(p90),
       {{"rank", s.id.rank}, {"pid", s.id.pid}, {"host", s.id.host}, {"node", s.id.node},
        {"times_last", s.times_last}, {"late", rep.late}, {"matched", rep.matched},
        {"median_lateness_ns", s.median_lateness_ns}, {"p90_lateness_ns", p90}}});
  c.evidence.push_back({"the other ranks waited " + fixed1(s.others_wait_gpu_s) +
                            " GPU-seconds on it (" + pct(share) + " of their time)",
                        {{"wait_gpu_s", s.others_wait_gpu_s}, {"share", share}}});
  c.evidence.push_back(clock_evidence(rep));
  const auto& e = s.evidence;
  c.evidence.push_back({host_evidence_text(s),
                        {{"late_ns", e.late_ns}, {"offcpu_ns", e.offcpu_ns},
                         {"offcpu_runnable_ns", e.offcpu_runnable_ns},
                         {"top_preemptor", e.top_preemptor}, {"io_requests", e.io_requests},
                         {"io_ns", e.io_ns}, {"retransmits", e.retransmits},
                         {"reclaim_ns", e.reclaim_ns}, {"rdma_errors", e.rdma_errors},
                         {"verbs_fatal", e.verbs_fatal}}});
  c.frame = ctx.top_frame("SELECT stack_id FROM nccl_call_events WHERE session_id = " +
                          std::to_string(s.id.session_id) + " AND pid = " + std::to_string(s.id.pid) +
                          " AND comm_hash IS NOT NULL");
  const std::string where = who(s.id);
  if (e.late_ns > 0 && e.offcpu_runnable_ns * 2 >= e.late_ns)
    c.recommendation = where + " loses the CPU while the others wait" +
                       (e.top_preemptor.empty() ? "" : " (to " + e.top_preemptor + ")") +
                       ": move that work off " + s.id.host + " or pin the rank's threads to free cores.";
  else if (e.late_ns > 0 && e.io_ns * 2 >= e.late_ns)
    c.recommendation = where + " waits on disk before its collectives: prefetch or cache its input "
                       "shard, or give " + s.id.host + " faster storage.";
  else if (e.retransmits > 0 || e.rdma_errors > 0 || e.verbs_fatal > 0)
    c.recommendation = "the link of " + s.id.host + " shows errors while " + where +
                       " is late: check its NIC/HCA, cable and switch port (ibstat, perfquery).";
  else
    c.recommendation = where + " holds back every collective: look at what it does before " +
                       c.symptom.op + " on " + s.id.host +
                       " (input pipeline, uneven shard, GPU clocks/throttling; causeway explain --pid " +
                       std::to_string(s.id.pid) + " on that host's file).";
  out.push_back(std::move(c));
  return out;
}

// Slow collectives with link trouble and no single late rank to blame (a
// straggler's own link trouble is evidence in its chain).
std::vector<CausalChain> rule_cross_rank_network(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const CrossRankReport rep = analyze_cross_rank(ctx.db);
  if (rep.matched == 0 || rep.late < kMinLateCollectives) return out;
  if (rep.straggler && rep.straggler->times_last >= kMinLateCollectives) return out;
  const double late_share = double(rep.late) / double(rep.matched);
  for (const auto& l : rep.links) {
    if (l.retransmits == 0 && l.rdma_errors == 0 && l.verbs_fatal == 0) continue;
    CausalChain c;
    c.root_cause = "network_degraded";
    const bool rdma = l.rdma_errors > 0 || l.verbs_fatal > 0;
    c.severity = late_share >= 0.5 && rdma ? Severity::High
                 : late_share >= 0.2       ? Severity::Medium
                                           : Severity::Low;
    int64_t waited = 0;
    for (const auto& i : rep.worst) waited += i.waited_ns;
    c.impact_ns = waited;
    c.symptom.op = majority_op(rep);
    c.symptom.calls = rep.matched;
    c.symptom.slow_calls = rep.late;
    c.symptom.p50_ns = rep.median_lateness_ns;
    c.symptom.p99_ns = c.symptom.max_ns = rep.worst.empty() ? 0 : rep.worst.front().lateness_ns;
    c.symptom.wall_share = late_share;
    c.evidence.push_back({std::to_string(rep.late) + " of " + std::to_string(rep.matched) +
                              " collectives had a rank >= 1 ms behind, and no single rank was last in "
                              "most of them",
                          {{"late", rep.late}, {"matched", rep.matched}}});
    c.evidence.push_back({l.node + ": " + std::to_string(l.retransmits) + " TCP retransmits, " +
                              std::to_string(l.rdma_errors) + " RDMA port errors, " +
                              std::to_string(l.verbs_fatal) + " fatal verbs events during the trace",
                          {{"node", l.node}, {"retransmits", l.retransmits},
                           {"rdma_errors", l.rdma_errors}, {"verbs_fatal", l.verbs_fatal}}});
    c.evidence.push_back(clock_evidence(rep));
    c.recommendation = "the network path of " + l.node +
                       " is degraded: check its " + (rdma ? "HCA port counters (perfquery), cable and switch port"
                                                          : "NIC, MTU and switch port (ethtool -S, nstat)") +
                       "; NCCL_IB_HCA / NCCL_SOCKET_IFNAME can steer traffic off it meanwhile.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
