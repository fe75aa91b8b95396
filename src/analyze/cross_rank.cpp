// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/cross_rank.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "causeway/common/op_table.h"

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
};

// A collective that blocked until every rank had joined ends at one instant
// everywhere (± link latency): such calls are the clock-sync samples.
constexpr int64_t kBlockedMinNs = 200'000;

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

std::string ids_of(OpClass c) { return op_ids_sql_list(c); }

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
  auto st = db.prepare(
      "SELECT counter, max(value) - min(value) FROM ib_counters WHERE session_id = ? "
      "GROUP BY device, port, counter");
  st.bind(1, session_id);
  int64_t n = 0;
  while (st.step())
    if (ib_counter_is_error(st.col_text(0))) n += st.col_int(1);
  return n;
}

int64_t verbs_fatal(store::Connection& db, int64_t session_id) {
  auto st = db.prepare(
      "SELECT count(*) FROM verbs_events WHERE session_id = ? AND "
      "(detail LIKE '% fatal%' OR detail LIKE '-> ERR%')");
  st.bind(1, session_id);
  return st.step() ? st.col_int(0) : 0;
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
  std::unordered_map<int64_t, Session> sessions;
  {
    auto st = db.prepare("SELECT id, node_id, host, boot_id FROM sessions");
    while (st.step()) {
      std::string clock = st.col_text(3);
      if (clock.empty()) clock = "host:" + st.col_text(2);
      sessions[st.col_int(0)] = {st.col_text(1), st.col_text(2), clock};
    }
  }
  auto rank_id = [&](const Call& c) {
    const auto& s = sessions[c.session_id];
    return RankId{c.session_id, c.pid, c.rank, s.node, s.host};
  };

  // (comm_hash, seq) -> calls; seq -1 holds the successful init calls.
  std::map<std::pair<std::string, int64_t>, std::vector<Call>> groups;
  auto load = [&](const std::string& sql, bool init) {
    auto st = db.prepare(sql);
    while (st.step()) {
      Call c{st.col_int(0), uint32_t(st.col_int(1)), uint32_t(st.col_int(2)),
             st.col_null(3) ? -1 : int(st.col_int(3)), st.col_null(4) ? 0 : int(st.col_int(4)),
             st.col_int(7), st.col_int(8), uint16_t(st.col_int(9))};
      groups[{st.col_text(5), init ? -1 : st.col_int(6)}].push_back(c);
    }
  };
  const std::string cols =
      "SELECT session_id, pid, tid, rank, nranks, comm_hash, seq, ts_ns, dur_ns, op_id "
      "FROM nccl_call_events WHERE comm_hash IS NOT NULL AND ";
  load(cols + "seq IS NOT NULL AND op_id IN (" + ids_of(OpClass::Collective) + ")", false);
  // Successful inits of one communicator return together (NCCL's bootstrap
  // joins every rank before it returns): clock-sync samples only.
  load(cols + "ret = 0 AND op_id IN (" + std::to_string(find_op("ncclCommInitRank")->id) + "," +
           std::to_string(find_op("ncclCommInitRankConfig")->id) + ")",
       true);

  // ---- clock skew: one offset per clock domain, relative to the domain of
  // the lowest rank seen.
  std::string ref_clock;
  {
    int best = std::numeric_limits<int>::max();
    for (const auto& [key, calls] : groups)
      for (const auto& c : calls)
        if (c.rank >= 0 && c.rank < best) {
          best = c.rank;
          ref_clock = sessions[c.session_id].clock;
        }
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
  {
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
  }

  // ---- per collective: who was last, by how much, who waited
  struct RankAcc {
    RankId id;
    std::vector<int64_t> lateness;
    int64_t times_last = 0;
  };
  std::map<std::tuple<int64_t, uint32_t, int>, RankAcc> ranks;
  std::vector<CollectiveInstance> all;
  std::vector<int64_t> spreads;
  // (session, pid) of a last rank -> its late windows and tids, own clock
  std::map<std::pair<int64_t, uint32_t>, std::vector<Window>> late_windows;
  std::map<std::pair<int64_t, uint32_t>, std::set<uint32_t>> late_tids;
  std::map<std::pair<int64_t, uint32_t>, double> waited_on;  // ns others waited on this rank

  for (const auto& [key, calls] : groups) {
    if (key.second < 0 || calls.size() < 2) continue;
    std::vector<int64_t> entry(calls.size());
    for (size_t i = 0; i < calls.size(); i++)
      entry[i] = calls[i].ts + offset[sessions[calls[i].session_id].clock];
    const size_t last = size_t(std::max_element(entry.begin(), entry.end()) - entry.begin());
    const int64_t first = *std::min_element(entry.begin(), entry.end());
    CollectiveInstance inst;
    inst.comm_hash = key.first;
    inst.seq = key.second;
    const OpSpec* op = find_op(calls[last].op);
    inst.op = op ? std::string(op->name) : "?";
    inst.ranks_seen = int(calls.size());
    inst.nranks = calls[last].nranks;
    inst.last = rank_id(calls[last]);
    inst.first_entry_ns = first;
    inst.last_entry_ns = entry[last];
    inst.lateness_ns = entry[last] - first;
    inst.last_local_entry_ns = calls[last].ts;
    for (size_t i = 0; i < calls.size(); i++) inst.waited_ns += entry[last] - entry[i];
    const bool late = inst.lateness_ns >= opts.min_lateness_ns;
    for (size_t i = 0; i < calls.size(); i++) {
      auto& acc = ranks[{calls[i].session_id, calls[i].pid, calls[i].rank}];
      acc.id = rank_id(calls[i]);
      acc.lateness.push_back(entry[i] - first);
      if (i == last && late) acc.times_last++;
    }
    rep.matched++;
    spreads.push_back(inst.lateness_ns);
    rep.wait_gpu_s += double(inst.waited_ns) / 1e9;
    if (late) {
      rep.late++;
      const auto who = std::make_pair(calls[last].session_id, calls[last].pid);
      late_windows[who].push_back({calls[last].ts - inst.lateness_ns, calls[last].ts});
      late_tids[who].insert(calls[last].tid);
      waited_on[who] += double(inst.waited_ns);
    }
    all.push_back(std::move(inst));
  }
  rep.median_lateness_ns = median(spreads);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.lateness_ns != b.lateness_ns ? a.lateness_ns > b.lateness_ns : a.seq < b.seq;
  });
  if (all.size() > opts.max_instances) all.resize(opts.max_instances);
  rep.worst = std::move(all);

  // ---- per-rank lateness distribution and median-absolute-deviation outliers
  for (auto& [k, acc] : ranks) {
    RankLateness r;
    r.id = acc.id;
    r.collectives = int64_t(acc.lateness.size());
    r.times_last = acc.times_last;
    r.median_ns = median(acc.lateness);
    r.p90_ns = percentile(acc.lateness, 0.9);
    r.max_ns = *std::max_element(acc.lateness.begin(), acc.lateness.end());
    rep.ranks.push_back(r);
  }
  {
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
      r.outlier = rep.ranks.size() >= 3 && r.mad_score > opts.mad_threshold &&
                  d >= opts.min_lateness_ns;
    }
  }
  std::sort(rep.ranks.begin(), rep.ranks.end(), [](const auto& a, const auto& b) {
    return a.times_last != b.times_last ? a.times_last > b.times_last : a.id.rank < b.id.rank;
  });

  // ---- the straggler: last in most late collectives (and, with three or
  // more ranks, a lateness outlier)
  if (!rep.ranks.empty() && rep.late > 0) {
    const auto& top = rep.ranks.front();
    const double share = double(top.times_last) / double(rep.late);
    const bool distinct = rep.ranks.size() < 3 || top.outlier;
    if (top.times_last > 0 && share >= opts.straggler_min_share && distinct) {
      Straggler s;
      s.id = top.id;
      s.times_last = top.times_last;
      s.collectives = top.collectives;
      s.median_lateness_ns = top.median_ns;
      const auto who = std::make_pair(top.id.session_id, top.id.pid);
      s.others_wait_gpu_s = waited_on[who] / 1e9;
      auto windows = merge_windows(late_windows[who]);
      HostEvidence& ev = s.evidence;
      for (const auto& w : windows) ev.late_ns += w.second - w.first;
      const int64_t lo = windows.empty() ? 0 : windows.front().first;
      const int64_t hi = windows.empty() ? 0 : windows.back().second;
      // Candidate rows come from the span of all windows; overlap is then
      // summed window by window.
      std::map<std::string, int64_t> preemptors;
      {
        auto st = db.prepare(
            "SELECT e.ts_ns, e.dur_ns, e.tid, e.state, coalesce(c.name, '') FROM offcpu_events e "
            "LEFT JOIN comms c ON c.id = e.by_comm_id WHERE e.session_id = ? AND e.pid = ? AND "
            "e.ts_ns < ? AND e.ts_ns + e.dur_ns > ?");
        st.bind(1, top.id.session_id).bind(2, int64_t(top.id.pid)).bind(3, hi).bind(4, lo);
        const auto& tids = late_tids[who];
        while (st.step()) {
          if (!tids.count(uint32_t(st.col_int(2)))) continue;
          const int64_t a = st.col_int(0), b = a + st.col_int(1);
          int64_t o = 0;
          for (const auto& w : windows) o += overlap(a, b, w.first, w.second);
          ev.offcpu_ns += o;
          if (st.col_int(3) == 0) {
            ev.offcpu_runnable_ns += o;
            if (o > 0) preemptors[st.col_text(4)] += o;
          }
        }
      }
      int64_t best = 0;
      for (const auto& [comm, ns] : preemptors)
        if (ns > best && !comm.empty()) {
          best = ns;
          ev.top_preemptor = comm;
        }
      {
        auto st = db.prepare(
            "SELECT ts_ns, dur_ns FROM io_requests WHERE session_id = ? AND pid = ? AND ts_ns < ? "
            "AND ts_ns + dur_ns > ?");
        st.bind(1, top.id.session_id).bind(2, int64_t(top.id.pid)).bind(3, hi).bind(4, lo);
        while (st.step()) {
          const int64_t a = st.col_int(0), b = a + st.col_int(1);
          int64_t o = 0;
          for (const auto& w : windows) o += overlap(a, b, w.first, w.second);
          if (o > 0) {
            ev.io_requests++;
            ev.io_ns += o;
          }
        }
      }
      {
        auto st = db.prepare(
            "SELECT ts_ns FROM tcp_retransmits WHERE session_id = ? AND ts_ns >= ? AND ts_ns < ?");
        st.bind(1, top.id.session_id).bind(2, lo).bind(3, hi);
        while (st.step()) {
          const int64_t t = st.col_int(0);
          for (const auto& w : windows)
            if (t >= w.first && t < w.second) {
              ev.retransmits++;
              break;
            }
        }
      }
      {
        auto st = db.prepare(
            "SELECT ts_ns, dur_ns FROM reclaims WHERE session_id = ? AND ts_ns < ? AND ts_ns + dur_ns > ?");
        st.bind(1, top.id.session_id).bind(2, hi).bind(3, lo);
        while (st.step()) {
          const int64_t a = st.col_int(0), b = a + st.col_int(1);
          for (const auto& w : windows) ev.reclaim_ns += overlap(a, b, w.first, w.second);
        }
      }
      ev.rdma_errors = rdma_error_growth(db, top.id.session_id);
      ev.verbs_fatal = verbs_fatal(db, top.id.session_id);
      rep.straggler = std::move(s);
    }
  }

  // ---- link health per node (whole sessions that took part)
  {
    std::map<std::string, LinkHealth> links;
    std::set<int64_t> seen;
    for (const auto& r : rep.ranks) {
      if (!seen.insert(r.id.session_id).second) continue;
      auto& l = links[r.id.node];
      l.node = r.id.node;
      auto st = db.prepare("SELECT count(*) FROM tcp_retransmits WHERE session_id = ?");
      st.bind(1, r.id.session_id);
      if (st.step()) l.retransmits += st.col_int(0);
      l.rdma_errors += rdma_error_growth(db, r.id.session_id);
      l.verbs_fatal += verbs_fatal(db, r.id.session_id);
    }
    for (auto& [n, l] : links) rep.links.push_back(l);
  }
  return rep;
}

}  // namespace causeway::analyze
