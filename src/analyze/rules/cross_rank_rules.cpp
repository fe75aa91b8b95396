// SPDX-License-Identifier: Apache-2.0
// straggler_rank and network_degraded: explain rules over the cross-rank
// analysis (src/analyze/cross_rank.cpp, docs/cluster.md). They read the whole
// file's collectives: a straggler is a property of the job, not of a window.
#include <algorithm>
#include <cmath>

#include "causeway/analyze/cross_rank.h"
#include "causeway/store/rank_reads.h"
#include "../rule_context.h"

namespace causeway::analyze {
namespace {

constexpr int64_t kMinLateCollectives = 3;
// NVML samples of another process on a rank's GPU before it counts as sharing it.
constexpr int64_t kNeighbourMinSamples = 3;

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

// What the late rank did instead: the part of its own critical path that
// it spends more of than the other ranks do (per class and line), as a share
// of its judged time. Waits on the GPU and in collectives are not a cause:
// they are what the others do while they wait for it.
struct OwnCause {
  const PathPart* part = nullptr;
  double share = 0, others_share = 0;
};

bool a_wait(PathClass c) {
  return c == PathClass::GpuBusy || c == PathClass::SyncIdle || c == PathClass::Collective ||
         c == PathClass::InFlight;
}

std::string part_key(const PathPart& p) {
  return std::string(path_class_key(p.cls)) + "@" + (p.frame ? p.frame->where() : std::string());
}

double part_share(const ProcessPath& path, const PathPart& p) {
  const int64_t judged = path.to_ns - path.from_ns;
  return judged > 0 ? double(p.ns) / double(judged) : 0;
}

OwnCause own_cause(const RuleContext& ctx, const CrossRankReport& rep, const Straggler& s) {
  OwnCause best;
  const ProcessPath* mine = nullptr;
  std::vector<const ProcessPath*> others;
  for (const auto& path : ctx.paths) {
    const bool me = path.session_id == s.id.session_id && path.pid == s.id.pid;
    const bool rank = std::any_of(rep.ranks.begin(), rep.ranks.end(), [&](const RankLateness& r) {
      return r.id.session_id == path.session_id && r.id.pid == path.pid;
    });
    if (me) mine = &path;
    else if (rank) others.push_back(&path);
  }
  if (!mine) return best;
  double top = 0;
  for (const auto& p : mine->parts) {
    if (a_wait(p.cls)) continue;
    const double share = part_share(*mine, p);
    std::vector<double> theirs;
    for (const auto* o : others) {
      double t = 0;
      for (const auto& q : o->parts)
        if (part_key(q) == part_key(p)) t += part_share(*o, q);
      theirs.push_back(t);
    }
    std::sort(theirs.begin(), theirs.end());
    const double them = theirs.empty() ? 0 : theirs[theirs.size() / 2];
    if (share - them > top) {
      top = share - them;
      best = {&p, share, them};
    }
  }
  return best;
}

std::string cause_fix(const std::string& where, const PathPart& p, const std::string& line) {
  const std::string at = line.empty() ? "" : " at " + line;
  switch (p.cls) {
    case PathClass::OnCpu:
      return where + " runs host code" + at + " that the other ranks do not, and they wait for it in every "
             "collective: balance that work across the ranks (the same shapes and shard sizes on each), or move "
             "it off the step (precompute it, or run it on a background thread).";
    case PathClass::Timer:
      return where + " sleeps" + at + " before its collectives while the others wait: take the sleep out of "
             "the step.";
    case PathClass::Input:
    case PathClass::DiskRead:
      return where + " waits for its input" + at + " while the others wait for it: give its loader more "
             "workers or prefetch, and check its shard and its disk against the other ranks'.";
    case PathClass::Runnable:
      return where + " waits for a CPU" + (p.by_comm.empty() ? "" : " behind " + p.by_comm) +
             " while the others wait for it: move that work off its CPUs or pin the rank to free cores.";
    case PathClass::Throttled:
      return where + " is held by its CPU limit (cgroup quota) while the others wait: raise the limit of its "
             "container.";
    case PathClass::Launching:
      return where + " spends longer launching" + at + " than the others: look at what differs on its host "
             "(CPU frequency, a neighbour) or capture the step in a CUDA graph.";
    default:
      return where + " spends its time " + std::string(path_class_words(p.cls)) + at +
             " while the other ranks wait for it in their collectives: shorten that on this rank.";
  }
}

// A rank whose GPU another process shares: every collective waits for the
// slowest GPU, and nothing on the hosts shows it (every rank waits alike in
// its syncs). NVML's per-process samples say which GPU each process used.
struct GpuNeighbour {
  const RankLateness* rank = nullptr;
  int64_t gpu = -1;
  uint32_t pid = 0;
  double sm = 0;          // its mean SM share on that GPU, %
  double rank_sm = 0;     // the rank's own
};

std::optional<GpuNeighbour> gpu_neighbour(const RuleContext& ctx, const CrossRankReport& rep) {
  std::vector<GpuNeighbour> found;
  std::vector<uint32_t> ranks;
  for (const auto& r : rep.ranks) ranks.push_back(r.id.pid);
  if (ranks.empty()) return std::nullopt;
  for (const auto& r : rep.ranks)
    for (const auto& [gpu, own] : store::process_gpu_sm(ctx.db, r.id.session_id, r.id.pid)) {
      const auto other = store::top_gpu_neighbour(ctx.db, r.id.session_id, gpu, ranks, kNeighbourMinSamples);
      if (other && other->sm >= 10) found.push_back({&r, gpu, other->pid, other->sm, own});
    }
  if (found.size() != 1) return std::nullopt;  // none, or every GPU shared: not one rank's
  return found.front();
}

std::vector<CausalChain> gpu_straggler(const RuleContext& ctx, const CrossRankReport& rep) {
  std::vector<CausalChain> out;
  if (rep.judged < kMinLateCollectives) return out;
  auto n = gpu_neighbour(ctx, rep);
  if (!n) return out;
  CausalChain c;
  c.root_cause = "straggler_rank";
  // The neighbour's part of the GPU's busy time: what the rank lost of it.
  const double taken = n->sm / std::max(1.0, n->sm + n->rank_sm);
  c.severity = taken >= 0.25 ? Severity::High : Severity::Medium;
  const RankId& id = n->rank->id;
  c.symptom.pid = id.pid;
  c.symptom.comm = ctx.comm(id.pid);
  c.symptom.op = majority_op(rep);
  c.symptom.calls = rep.matched;
  // Every rank waits at the shared GPU's pace: the job's waiting.
  int64_t wait = 0;
  for (const auto& r : rep.ranks) wait += r.wait_ns;
  c.impact_ns = wait;
  const std::string neighbour = ctx.comm(n->pid);
  c.evidence.push_back({"the GPU of " + who(id) + " (GPU " + std::to_string(n->gpu) + ") also runs pid " +
                            std::to_string(n->pid) + (neighbour.empty() ? "" : " (" + neighbour + ")") + ": " +
                            fixed1(n->sm) + "% of its SM time against the rank's " + fixed1(n->rank_sm) +
                            "%; every collective waits for the slowest GPU, so every rank steps at its pace",
                        {{"rank", id.rank}, {"pid", id.pid}, {"host", id.host}, {"gpu", n->gpu},
                         {"neighbour_pid", n->pid}, {"neighbour_sm", n->sm}, {"rank_sm", n->rank_sm},
                         {"taken", taken}, {"matched", rep.matched}, {"gpu_shared", true}}});
  c.evidence.push_back({"the ranks waited in their syncs behind " + std::to_string(rep.judged) + " of " +
                            std::to_string(rep.matched) + " collectives; no rank's host was late to them",
                        {{"judged", rep.judged}}});
  c.frame = ctx.top_frame(store::cuda_call_stack_ids_sql(id.session_id, n->pid));
  if (!c.frame) c.no_frame_reason = "the other process's GPU work has no Python line in the trace";
  c.recommendation = "Give " + who(id) + " its GPU alone: move pid " + std::to_string(n->pid) +
                     (neighbour.empty() ? "" : " (" + neighbour + ")") +
                     " to another GPU (CUDA_VISIBLE_DEVICES) or stop it; the whole job runs at its slowest GPU.";
  out.push_back(std::move(c));
  return out;
}

}  // namespace

std::vector<CausalChain> rule_cross_rank_straggler(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const CrossRankReport& rep = ctx.cross_rank();
  if (!rep.numbering_trusted && rep.judged > 0) {
    CausalChain c;
    c.root_cause = "collective_mismatch";
    c.severity = Severity::Low;
    c.symptom.calls = rep.matched;
    c.symptom.slow_calls = rep.inconsistent;
    c.evidence.push_back({"the ranks disagree on " + std::to_string(rep.inconsistent) + " of " +
                              std::to_string(rep.matched) +
                              " matched collectives (another op or size under the same number): no straggler is "
                              "named from these numbers",
                          {{"inconsistent", rep.inconsistent}, {"matched", rep.matched}}});
    c.recommendation = "Every rank must issue the same collectives in the same order: look for a data-dependent "
                       "branch around a collective, or traces that began at different points of the job.";
    out.push_back(std::move(c));
    return out;
  }
  if (!rep.straggler || rep.straggler->times_last < kMinLateCollectives) return gpu_straggler(ctx, rep);
  const Straggler& s = *rep.straggler;
  const int nranks = int(rep.ranks.size());
  // A rank that enqueues late holds the others only if its GPU then waits
  // for it: a slower host that still runs ahead of its busy GPU (its syncs
  // shorter only because it reaches them later) holds no one. Where NVML
  // sampled its GPU, that GPU must have been idle for at least half of what
  // the others waited on it, per step.
  for (const auto& path : ctx.paths) {
    if (path.session_id != s.id.session_id || path.pid != s.id.pid || !path.gpu_busy || s.step_ns <= 0) continue;
    const double held = double(s.median_lateness_ns) / double(s.step_ns);
    if (1.0 - *path.gpu_busy < 0.5 * held) return gpu_straggler(ctx, rep);
  }
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
  c.symptom.summary = "the other ranks wait for rank " + std::to_string(s.id.rank) + " in " +
                      std::to_string(s.times_last) + " of " + std::to_string(rep.judged) + " collectives, " +
                      ms(s.median_lateness_ns) + " each (median)";
  c.share = share;
  c.threshold = 0.1;
  nlohmann::json waiting = nlohmann::json::array();
  for (const auto& r : rep.ranks)
    if (!(r.id == s.id)) waiting.push_back(r.id.pid);
  int64_t p90 = 0;
  for (const auto& r : rep.ranks)
    if (r.id == s.id) p90 = r.p90_ns;
  c.evidence.push_back(
      {"the other ranks waited for " + who(s.id) + " in " + std::to_string(s.times_last) + " of " +
           std::to_string(rep.judged) + " collectives they waited in (" + std::to_string(rep.matched) +
           " matched across " + std::to_string(nranks) + " ranks): median " + ms(s.median_lateness_ns) +
           " each, p90 " + ms(p90) + "; in those they waited " + ms(s.others_median_wait_ns) + " and it waited " +
           ms(s.own_wait_ns) + "; it enqueued " + ms(std::max<int64_t>(0, s.median_skew_ns)) +
           " after the first rank (median)",
       {{"rank", s.id.rank}, {"pid", s.id.pid}, {"host", s.id.host}, {"node", s.id.node},
        {"times_last", s.times_last}, {"late", rep.late}, {"judged", rep.judged}, {"matched", rep.matched},
        {"median_lateness_ns", s.median_lateness_ns}, {"p90_lateness_ns", p90},
        {"own_wait_ns", s.own_wait_ns}, {"others_wait_ns", s.others_median_wait_ns},
        {"median_skew_ns", s.median_skew_ns}, {"waiting_pids", waiting}}});
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
  const std::string where = who(s.id);
  // The late rank's own critical path: what it did instead, at which line.
  const OwnCause own = own_cause(ctx, rep, s);
  if (own.part) {
    const PathPart& p = *own.part;
    const std::string line = p.frame ? p.frame->where() : std::string();
    c.evidence.push_back({"what " + where + " did instead: " + std::string(path_class_words(p.cls)) + " " +
                              pct(own.share) + " of its step" + (line.empty() ? "" : " at " + line) +
                              (p.by_comm.empty() ? "" : " (behind " + p.by_comm + ")") + "; the other ranks " +
                              pct(own.others_share),
                          {{"own_cause", std::string(path_class_key(p.cls))}, {"share", own.share},
                           {"others_share", own.others_share}, {"where", line}, {"thread", p.thread}}});
    c.frame = p.frame;
    if (!p.frame) c.no_frame_reason = "the late rank's own time has no Python line";
    c.recommendation = cause_fix(where, p, line);
  } else {
    c.frame = ctx.top_frame(store::collective_stack_ids_sql(s.id.session_id, s.id.pid));
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
      c.recommendation = where + " holds back every collective, and its own path was not traced on this "
                         "host: trace " + s.id.host + " with the host probes on (input pipeline, uneven shard, "
                         "GPU clocks/throttling).";
  }
  out.push_back(std::move(c));
  return out;
}

// Slow collectives with link trouble and no single late rank to blame (a
// straggler's own link trouble is evidence in its chain).
std::vector<CausalChain> rule_cross_rank_network(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const CrossRankReport& rep = ctx.cross_rank();
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
