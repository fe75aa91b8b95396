// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/cross_rank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "causeway/common/op_table.h"
#include "causeway/store/rank_reads.h"

namespace causeway::analyze {
namespace {

struct Session {
  std::string node, host, clock;  // clock: boot id (one clock per booted host)
};

struct Call {
  int64_t session_id;
  uint32_t pid, tid;
  int rank, nranks;
  int64_t ts, dur;
  uint16_t op;
  int64_t bytes;  // -1: unknown
  int64_t wait = 0;  // the rank's waiting from this entry to its next collective's
};

using ProcKey = std::pair<int64_t, uint32_t>;  // (session, pid)
using Groups = std::map<std::pair<std::string, int64_t>, std::vector<Call>>;  // (comm, seq); seq -1: inits

// A collective that blocked until every rank had joined ends at one instant
// everywhere (± link latency): such calls are the clock-sync samples, and a
// collective call this long is a wait of its own (NCCL_BLOCKING_WAIT).
constexpr int64_t kBlockedMinNs = 200'000;
// A synchronisation this long waited for the GPU (timeline.h's kBusySyncNs).
constexpr int64_t kWaitMinNs = 20'000;
// More than this share of matched collectives whose ranks disagree on the
// op or its size: the numbering is not the job's.
constexpr double kMaxInconsistent = 0.1;

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  auto mid = v.begin() + v.size() / 2;
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2) return *mid;
  const int64_t hi = *mid;
  const int64_t lo = *std::max_element(v.begin(), mid);
  return lo + (hi - lo) / 2;
}

int64_t percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

using Window = std::pair<int64_t, int64_t>;

std::vector<Window> merge_windows(std::vector<Window> w) {
  std::sort(w.begin(), w.end());
  std::vector<Window> out;
  for (const auto& x : w) {
    if (x.second <= x.first) continue;
    if (!out.empty() && x.first <= out.back().second)
      out.back().second = std::max(out.back().second, x.second);
    else
      out.push_back(x);
  }
  return out;
}

int64_t overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return std::max<int64_t>(0, std::min(a1, b1) - std::max(a0, b0));
}

// Error-counter growth over a session, summed over ports and counters.
int64_t rdma_error_growth(store::Connection& db, int64_t session_id) {
  int64_t n = 0;
  for (const auto& g : store::ib_counter_growth(db, session_id))
    if (ib_counter_is_error(g.counter)) n += g.growth;
  return n;
}

std::unordered_map<int64_t, Session> load_sessions(store::Connection& db) {
  std::unordered_map<int64_t, Session> sessions;
  for (const auto& s : store::rank_sessions(db)) {
    std::string clock = s.boot_id;
    if (clock.empty()) clock = "host:" + s.host;
    sessions[s.id] = {s.node, s.host, clock};
  }
  return sessions;
}

// Numbered collectives by (comm_hash, seq), and successful inits under seq -1
// (NCCL's bootstrap joins every rank before they return: clock-sync samples).
Groups load_collectives(store::Connection& db, CrossRankReport& rep) {
  Groups groups;
  auto load = [&](bool init) {
    return [&groups, init](const store::CollectiveCall& r) {
      Call c{r.session_id, r.pid, r.tid, r.rank ? int(*r.rank) : -1, r.nranks ? int(*r.nranks) : 0,
             r.ts_ns, r.dur_ns, uint16_t(r.op_id), r.bytes ? *r.bytes : -1};
      groups[{r.comm_hash, init ? -1 : r.seq.value_or(-1)}].push_back(c);
    };
  };
  store::each_numbered_collective(db, load(false));
  store::each_comm_init(db, load(true));
  rep.unnumbered = store::unnumbered_collectives(db);
  return groups;
}

// One offset per clock domain, relative to the domain of the lowest rank
// seen, from calls that ended together.
std::unordered_map<std::string, int64_t> estimate_clocks(const Groups& groups,
                                                         std::unordered_map<int64_t, Session>& sessions,
                                                         CrossRankReport& rep) {
  std::string ref_clock;
  int best = std::numeric_limits<int>::max();
  for (const auto& [key, calls] : groups)
    for (const auto& c : calls)
      if (c.rank >= 0 && c.rank < best) {
        best = c.rank;
        ref_clock = sessions[c.session_id].clock;
      }
  std::map<std::string, std::vector<int64_t>> skew_samples;  // clock -> (ref end - its end)
  for (const auto& [key, calls] : groups) {
    if (calls.size() < 2) continue;
    bool blocked = true;
    for (const auto& c : calls) blocked = blocked && (key.second == -1 || c.dur >= kBlockedMinNs);
    if (!blocked) continue;
    std::map<std::string, std::vector<int64_t>> ends;
    for (const auto& c : calls) ends[sessions[c.session_id].clock].push_back(c.ts + c.dur);
    auto ref = ends.find(ref_clock);
    if (ref == ends.end()) continue;
    const int64_t ref_end = median(ref->second);
    for (const auto& [clock, e] : ends)
      if (clock != ref_clock) skew_samples[clock].push_back(ref_end - median(e));
  }
  std::unordered_map<std::string, int64_t> offset;
  std::map<std::string, std::string> clock_node;
  for (const auto& [key, calls] : groups)
    for (const auto& c : calls) clock_node.emplace(sessions[c.session_id].clock, sessions[c.session_id].node);
  for (const auto& [clock, node] : clock_node) {
    ClockSkew k;
    k.node = node;
    k.boot_id = clock;
    k.reference = clock == ref_clock;
    auto it = skew_samples.find(clock);
    if (k.reference) {
      k.estimated = true;
    } else if (it != skew_samples.end() && !it->second.empty()) {
      k.offset_ns = median(it->second);
      std::vector<int64_t> dev;
      for (auto s : it->second) dev.push_back(std::llabs(s - k.offset_ns));
      k.uncertainty_ns = median(dev);
      k.samples = int64_t(it->second.size());
      k.estimated = true;
    }
    offset[clock] = k.offset_ns;
    rep.clocks.push_back(k);
  }
  return offset;
}

// Each rank's waiting after each of its collectives: the blocking waits on
// the GPU (synchronisations, read-backs) that begin between its entry and
// its next collective's entry, and the collective's own time when it blocked.
// Waits are durations in one process's clock: no skew enters them.
void measure_waits(store::Connection& db, Groups& groups) {
  std::map<ProcKey, std::vector<Call*>> by_proc;
  for (auto& [key, calls] : groups)
    if (key.second >= 0)
      for (auto& c : calls) by_proc[{c.session_id, c.pid}].push_back(&c);
  if (by_proc.empty()) return;
  std::map<ProcKey, std::vector<std::pair<int64_t, int64_t>>> waits;  // (ts, dur) by start
  store::each_blocking_wait(db, kWaitMinNs, [&](const store::BlockingWait& w) {
    const ProcKey k{w.session_id, w.pid};
    if (by_proc.count(k)) waits[k].push_back({w.ts_ns, w.dur_ns});
  });
  for (auto& [k, calls] : by_proc) {
    std::sort(calls.begin(), calls.end(), [](const Call* a, const Call* b) { return a->ts < b->ts; });
    const auto& w = waits[k];
    size_t j = 0;
    for (size_t i = 0; i < calls.size(); i++) {
      Call& c = *calls[i];
      const int64_t until = i + 1 < calls.size() ? calls[i + 1]->ts : std::numeric_limits<int64_t>::max();
      c.wait = c.dur >= kBlockedMinNs ? c.dur : 0;
      while (j < w.size() && w[j].first < c.ts) j++;
      for (; j < w.size() && w[j].first < until; j++) c.wait += w[j].second;
    }
  }
}

struct RankAcc {
  RankId id;
  int64_t collectives = 0, times_last = 0, wait_ns = 0;
  std::vector<int64_t> judged_at;  // its entries into judged collectives, own clock
  std::vector<int64_t> held;  // per judged collective: how long it held the others
  std::vector<int64_t> skew;  // per matched collective: its entry - the first entry
};

struct Judged {
  std::map<std::tuple<int64_t, uint32_t, int>, RankAcc> ranks;
  std::vector<CollectiveInstance> instances;
  std::map<ProcKey, std::vector<Window>> late_windows;  // own clock
  std::map<ProcKey, std::set<uint32_t>> late_tids;
  std::map<ProcKey, double> waited_on;  // ns others waited on this rank
  // Per judged collective, the other ranks' waits where this rank held them.
  std::map<ProcKey, std::vector<int64_t>> others_wait, own_wait;
};

// Per matched collective: who the others waited for, and how long.
Judged judge_collectives(const Groups& groups, std::unordered_map<int64_t, Session>& sessions,
                         std::unordered_map<std::string, int64_t>& offset, const CrossRankOptions& opts,
                         CrossRankReport& rep) {
  Judged j;
  auto rank_id = [&](const Call& c) {
    const auto& s = sessions[c.session_id];
    return RankId{c.session_id, c.pid, c.rank, s.node, s.host};
  };
  std::vector<int64_t> lateness;
  for (const auto& [key, calls] : groups) {
    if (key.second < 0 || calls.size() < 2) continue;
    std::vector<int64_t> entry(calls.size());
    for (size_t i = 0; i < calls.size(); i++) entry[i] = calls[i].ts + offset[sessions[calls[i].session_id].clock];
    const int64_t first = *std::min_element(entry.begin(), entry.end());
    CollectiveInstance inst;
    inst.comm_hash = key.first;
    inst.seq = key.second;
    inst.ranks_seen = int(calls.size());
    for (size_t i = 1; i < calls.size(); i++)
      if (calls[i].op != calls[0].op || calls[i].bytes != calls[0].bytes) inst.consistent = false;
    // The rank that waited least is the one the others waited for (on a
    // tie, the later entry): it needed nothing from them.
    size_t held = 0;
    int64_t most_wait = 0;
    for (size_t i = 0; i < calls.size(); i++) {
      most_wait = std::max(most_wait, calls[i].wait);
      if (calls[i].wait < calls[held].wait || (calls[i].wait == calls[held].wait && entry[i] > entry[held])) held = i;
    }
    const OpSpec* op = find_op(calls[held].op);
    inst.op = op ? std::string(op->name) : "?";
    inst.nranks = calls[held].nranks;
    inst.last = rank_id(calls[held]);
    inst.first_entry_ns = first;
    inst.last_entry_ns = entry[held];
    inst.enqueue_skew_ns = *std::max_element(entry.begin(), entry.end()) - first;
    inst.last_local_entry_ns = calls[held].ts;
    inst.judged = inst.consistent && most_wait >= opts.min_wait_ns;
    // What each other rank waited beyond the held rank's own waiting,
    // bounded by how late the held rank enqueued after it: a rank can hold
    // another only for as long as it had not yet entered.
    std::vector<int64_t> waits;
    for (size_t i = 0; i < calls.size(); i++) {
      auto& acc = j.ranks[{calls[i].session_id, calls[i].pid, calls[i].rank}];
      acc.id = rank_id(calls[i]);
      acc.collectives++;
      acc.skew.push_back(entry[i] - first);
      if (i == held || !inst.judged) continue;
      const int64_t beyond = calls[i].wait - calls[held].wait, late = entry[held] - entry[i];
      const int64_t a = std::max<int64_t>(0, std::min(beyond, late));
      inst.waited_ns += a;
      inst.lateness_ns = std::max(inst.lateness_ns, a);
      waits.push_back(calls[i].wait);
    }
    rep.matched++;
    if (!inst.consistent) rep.inconsistent++;
    if (inst.judged) {
      rep.judged++;
      lateness.push_back(inst.lateness_ns);
      for (size_t i = 0; i < calls.size(); i++) {
        auto& acc = j.ranks[{calls[i].session_id, calls[i].pid, calls[i].rank}];
        acc.held.push_back(i == held ? inst.lateness_ns : 0);
        acc.wait_ns += calls[i].wait;
        acc.judged_at.push_back(calls[i].ts);
      }
      const bool late = inst.lateness_ns >= opts.min_lateness_ns;
      const ProcKey who{calls[held].session_id, calls[held].pid};
      rep.wait_gpu_s += double(inst.waited_ns) / 1e9;
      if (late) {
        rep.late++;
        j.waited_on[who] += double(inst.waited_ns);
        j.ranks[{calls[held].session_id, calls[held].pid, calls[held].rank}].times_last++;
        j.late_windows[who].push_back({calls[held].ts - inst.lateness_ns, calls[held].ts});
        j.late_tids[who].insert(calls[held].tid);
        j.own_wait[who].push_back(calls[held].wait);
        j.others_wait[who].push_back(median(waits));
      }
    }
    j.instances.push_back(std::move(inst));
  }
  rep.median_lateness_ns = median(lateness);
  rep.numbering_trusted = rep.matched == 0 || double(rep.inconsistent) <= kMaxInconsistent * double(rep.matched);
  return j;
}

// Each rank's distribution of how long it held the others, and the
// median-absolute-deviation outliers among ranks.
void rank_stats(Judged& j, const CrossRankOptions& opts, CrossRankReport& rep) {
  for (auto& [k, acc] : j.ranks) {
    RankLateness r;
    r.id = acc.id;
    r.collectives = acc.collectives;
    r.times_last = acc.times_last;
    r.wait_ns = acc.wait_ns;
    r.median_skew_ns = median(acc.skew);
    std::sort(acc.judged_at.begin(), acc.judged_at.end());
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < acc.judged_at.size(); i++) gaps.push_back(acc.judged_at[i] - acc.judged_at[i - 1]);
    r.step_ns = median(gaps);
    if (!acc.held.empty()) {
      r.median_ns = median(acc.held);
      r.p90_ns = percentile(acc.held, 0.9);
      r.max_ns = *std::max_element(acc.held.begin(), acc.held.end());
    }
    rep.ranks.push_back(r);
  }
  std::vector<int64_t> meds;
  for (const auto& r : rep.ranks) meds.push_back(r.median_ns);
  const int64_t m = median(meds);
  std::vector<int64_t> dev;
  for (auto v : meds) dev.push_back(std::llabs(v - m));
  const int64_t mad = median(dev);
  for (auto& r : rep.ranks) {
    const int64_t d = r.median_ns - m;
    // Modified z-score (Iglewicz & Hoaglin); with MAD 0 any real gap is an outlier.
    r.mad_score = mad > 0 ? 0.6745 * double(d) / double(mad)
                          : (d >= opts.min_lateness_ns ? std::numeric_limits<double>::infinity() : 0.0);
    r.outlier = rep.ranks.size() >= 3 && r.mad_score > opts.mad_threshold && d >= opts.min_lateness_ns;
  }
  std::sort(rep.ranks.begin(), rep.ranks.end(), [](const auto& a, const auto& b) {
    if (a.times_last != b.times_last) return a.times_last > b.times_last;
    if (a.median_ns != b.median_ns) return a.median_ns > b.median_ns;
    return a.id.rank < b.id.rank;
  });
}

// The straggler's own host while it held the others (its late windows, in
// its own clock): what its threads did instead.
HostEvidence host_evidence(store::Connection& db, const RankId& id, const std::vector<Window>& windows,
                           const std::set<uint32_t>& tids) {
  HostEvidence ev;
  for (const auto& w : windows) ev.late_ns += w.second - w.first;
  const int64_t lo = windows.empty() ? 0 : windows.front().first;
  const int64_t hi = windows.empty() ? 0 : windows.back().second;
  // Candidate rows come from the span of all windows; overlap is then summed
  // window by window.
  auto overlapping = [&](int64_t a, int64_t b) {
    int64_t o = 0;
    for (const auto& w : windows) o += overlap(a, b, w.first, w.second);
    return o;
  };
  std::map<std::string, int64_t> preemptors;
  store::each_offcpu_overlapping(db, id.session_id, id.pid, lo, hi, [&](const store::RankOffcpu& r) {
    if (!tids.count(r.tid)) return;
    const int64_t o = overlapping(r.ts_ns, r.ts_ns + r.dur_ns);
    ev.offcpu_ns += o;
    if (r.state == 0) {
      ev.offcpu_runnable_ns += o;
      if (o > 0) preemptors[r.by_comm] += o;
    }
  });
  int64_t best = 0;
  for (const auto& [comm, ns] : preemptors)
    if (ns > best && !comm.empty()) {
      best = ns;
      ev.top_preemptor = comm;
    }
  store::each_io_overlapping(db, id.session_id, id.pid, lo, hi, [&](const store::HostInterval& r) {
    const int64_t o = overlapping(r.ts_ns, r.ts_ns + r.dur_ns);
    if (o > 0) {
      ev.io_requests++;
      ev.io_ns += o;
    }
  });
  store::each_retransmit_between(db, id.session_id, lo, hi, [&](int64_t ts) {
    if (overlapping(ts, ts + 1) > 0) ev.retransmits++;
  });
  store::each_reclaim_overlapping(db, id.session_id, lo, hi, [&](const store::HostInterval& r) {
    ev.reclaim_ns += overlapping(r.ts_ns, r.ts_ns + r.dur_ns);
  });
  ev.rdma_errors = rdma_error_growth(db, id.session_id);
  ev.verbs_fatal = store::verbs_fatal_count(db, id.session_id);
  return ev;
}

// The straggler: the rank that held the others in at least half of the
// judged collectives, by at least min_lateness_ns at the median (so jitter,
// which moves the least-waiting rank from collective to collective, never
// is one), and with three or more ranks an outlier among them.
std::optional<Straggler> pick_straggler(store::Connection& db, Judged& j, const CrossRankOptions& opts,
                                        const CrossRankReport& rep) {
  if (rep.ranks.empty() || rep.late == 0 || rep.judged == 0 || !rep.numbering_trusted) return std::nullopt;
  const auto& top = rep.ranks.front();
  const double share = double(top.times_last) / double(rep.judged);
  const bool distinct = rep.ranks.size() < 3 || top.outlier;
  if (top.times_last == 0 || share < opts.straggler_min_share || top.median_ns < opts.min_lateness_ns || !distinct)
    return std::nullopt;
  Straggler s;
  s.id = top.id;
  s.times_last = top.times_last;
  s.collectives = top.collectives;
  s.median_lateness_ns = top.median_ns;
  s.median_skew_ns = top.median_skew_ns;
  s.step_ns = top.step_ns;
  const ProcKey who{top.id.session_id, top.id.pid};
  s.own_wait_ns = median(j.own_wait[who]);
  s.others_median_wait_ns = median(j.others_wait[who]);
  s.others_wait_gpu_s = j.waited_on[who] / 1e9;
  s.evidence = host_evidence(db, top.id, merge_windows(j.late_windows[who]), j.late_tids[who]);
  return s;
}

std::vector<LinkHealth> link_health(store::Connection& db, const CrossRankReport& rep) {
  std::map<std::string, LinkHealth> links;
  std::set<int64_t> seen;
  for (const auto& r : rep.ranks) {
    if (!seen.insert(r.id.session_id).second) continue;
    auto& l = links[r.id.node];
    l.node = r.id.node;
    l.retransmits += store::retransmit_count(db, r.id.session_id);
    l.rdma_errors += rdma_error_growth(db, r.id.session_id);
    l.verbs_fatal += store::verbs_fatal_count(db, r.id.session_id);
  }
  std::vector<LinkHealth> out;
  for (auto& [n, l] : links) out.push_back(l);
  return out;
}

}  // namespace

bool ib_counter_is_error(const std::string& n) {
  static const std::set<std::string> errors = {
      "symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
      "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "port_xmit_discards",
      "port_xmit_constraint_errors", "port_rcv_constraint_errors", "local_link_integrity_errors",
      "excessive_buffer_overrun_errors", "VL15_dropped"};
  return errors.count(n) > 0;
}

CrossRankReport analyze_cross_rank(store::Connection& db, const CrossRankOptions& opts) {
  CrossRankReport rep;
  auto sessions = load_sessions(db);
  Groups groups = load_collectives(db, rep);
  auto offset = estimate_clocks(groups, sessions, rep);
  measure_waits(db, groups);
  Judged j = judge_collectives(groups, sessions, offset, opts, rep);
  if (!j.instances.empty()) {
    int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
    for (const auto& i : j.instances) {
      lo = std::min(lo, i.first_entry_ns);
      hi = std::max(hi, i.first_entry_ns + i.enqueue_skew_ns);
    }
    rep.span_ns = hi - lo;
  }
  rank_stats(j, opts, rep);
  rep.straggler = pick_straggler(db, j, opts, rep);
  rep.links = link_health(db, rep);
  std::sort(j.instances.begin(), j.instances.end(), [](const auto& a, const auto& b) {
    return a.lateness_ns != b.lateness_ns ? a.lateness_ns > b.lateness_ns : a.seq < b.seq;
  });
  if (j.instances.size() > opts.max_instances) j.instances.resize(opts.max_instances);
  rep.worst = std::move(j.instances);
  return rep;
}

}  // namespace causeway::analyze
