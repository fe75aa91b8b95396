// SPDX-License-Identifier: Apache-2.0
// hung_collective / hung_call: calls the agent saw in flight past
// `trace --hang-after` (stalled_calls). On an NCCL rank the question is which
// rank the others wait for: the ranks of the communicator are compared by the
// sequence number of their latest collective; the one behind never entered it.
#include "../rule_context.h"

#include <algorithm>
#include <map>
#include <set>

#include "causeway/common/hang.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {

struct Stall {
  int64_t session, ts, waited, seen;
  uint32_t pid, tid;
  int64_t op_id, stack_id;
  std::optional<int64_t> returned_after;  // the call's own duration, when it returned
  bool at_stop = false;                   // written when the trace stopped (not judged hung while tracing)
  bool before = false;                    // began before the trace did: ts is the latest it can have begun
  // The whole process made no call since it began, but the trace saw less
  // than kHungMinNs of it (it began before the trace, or the trace stopped
  // soon after it began): likely hung, not proven.
  bool unproven = false;
  std::optional<int64_t> seq;  // a collective's number, given by the probe at its entry (schema 21)
};

// The baseline a call in flight is judged on: the p50 of its op in its
// process, else of its op's class there.
std::optional<int64_t> baseline_p50(const RuleContext& ctx, uint32_t pid, int64_t op_id) {
  const int64_t own = ctx.scalar("SELECT coalesce(max(p50), 0) FROM baseline WHERE pid = " + std::to_string(pid) +
                                 " AND op_id = " + std::to_string(op_id));
  if (own > 0) return own;
  const OpSpec* op = find_op(uint16_t(op_id));
  if (!op) return std::nullopt;
  const int64_t cls = ctx.scalar("SELECT coalesce(sum(p50 * count) / max(1, sum(count)), 0) FROM baseline WHERE pid = " +
                                 std::to_string(pid) + " AND op_id IN (" + op_ids_sql_list(op->cls) + ")");
  return cls > 0 ? std::optional<int64_t>(cls) : std::nullopt;
}

// A call in flight at the stop this long, under kHungMinNs, may be hung.
constexpr int64_t kMaybeHungNs = 1'000'000'000;

// The longest call of op_id's class that returned in the process.
int64_t longest_of_class(const RuleContext& ctx, int64_t session, uint32_t pid, int64_t op_id) {
  const OpSpec* op = find_op(uint16_t(op_id));
  return ctx.scalar("SELECT coalesce(max(dur_ns), 0) FROM cuda_call_events WHERE session_id = " + std::to_string(session) +
                    " AND pid = " + std::to_string(pid) + " AND op_id IN (" +
                    (op ? op_ids_sql_list(op->cls) : std::to_string(op_id)) + ")");
}

// Calls judged hung while tracing, and calls still in flight when the trace
// stopped that the same rule judges hung (common/hang.h) and that stopped
// their process: no other call of it returned after they began, or they are
// on its busiest thread. A thread blocked by design (an event loop's wait)
// beside a process that goes on working is not hung.
std::vector<Stall> stalls(const RuleContext& ctx) {
  std::vector<Stall> out;
  const bool has_at_stop = ctx.has_column("stalled_calls", "at_stop"),
             has_before = ctx.has_column("stalled_calls", "entered_before"),
             has_seq = ctx.has_column("stalled_calls", "seq");
  ctx.each("SELECT s.session_id, s.ts_ns, max(s.waited_ns), max(s.seen_ts_ns), s.pid, s.tid, s.op_id,"
           " coalesce(max(s.stack_id), -1),"
           " coalesce((SELECT c.dur_ns FROM cuda_call_events c WHERE c.session_id = s.session_id AND c.tid = s.tid AND"
           " c.ts_ns = s.ts_ns), (SELECT n.dur_ns FROM nccl_call_events n WHERE n.session_id = s.session_id AND"
           " n.tid = s.tid AND n.ts_ns = s.ts_ns)), " + std::string(has_at_stop ? "min(s.at_stop)" : "0") + ", " +
               std::string(has_before ? "max(s.entered_before)" : "0") + ", " + std::string(has_seq ? "max(s.seq)" : "NULL") +
               " FROM stalled_calls s WHERE " + ctx.in_window("s.") + " GROUP BY s.session_id, s.tid, s.ts_ns ORDER BY s.ts_ns",
           [&](store::Statement& s) {
             Stall x{s.col_int(0), s.col_int(1), s.col_int(2), s.col_int(3), uint32_t(s.col_int(4)),
                     uint32_t(s.col_int(5)), s.col_int(6), s.col_int(7), {}, s.col_int(9) != 0, s.col_int(10) != 0};
             if (!s.col_null(8)) x.returned_after = s.col_int(8);
             if (!s.col_null(11)) x.seq = s.col_int(11);
             out.push_back(x);
           });
  std::vector<Stall> hung;
  for (const Stall& x : out) {
    const std::string proc = "session_id = " + std::to_string(x.session) + " AND pid = " + std::to_string(x.pid);
    // Calls of the process (CUDA and NCCL) that began after `from`.
    auto calls_after = [&](int64_t from, const std::string& also) {
      const std::string when = proc + " AND ts_ns > " + std::to_string(from) + also;
      return ctx.scalar("SELECT (SELECT count(*) FROM cuda_call_events WHERE " + when +
                        ") + (SELECT count(*) FROM nccl_call_events WHERE " + when + ")");
    };
    if (x.before) {
      // Found on its thread's stack when the trace attached: a thread that
      // made a call since had left it (the word was a stale one). Else hung
      // when its process has made no call since (the whole job waits on
      // it) for kHungMinNs, or by the same rule as any call below.
      if (calls_after(x.ts, " AND tid = " + std::to_string(x.tid)) > 0) continue;
      if (calls_after(x.ts, "") == 0) {
        hung.push_back(x);
        hung.back().unproven = x.waited < kHungMinNs;
        continue;
      }
    }
    if ((!x.at_stop && !x.before) || x.returned_after) {
      hung.push_back(x);
      continue;
    }
    const auto p50 = baseline_p50(ctx, x.pid, x.op_id);
    if (!judged_hung(x.waited, p50, kDefaultHangAfterNs)) {
      // In flight at the stop for under kHungMinNs, yet a second or more, a
      // thousand times its baseline and ten times the longest call of its
      // class that returned in the process, which made no call since it
      // began (the whole job waits on it): maybe hung. A step's long sync
      // caught by the stop is as long as the ones before it.
      if (x.at_stop && x.waited >= kMaybeHungNs && p50 && *p50 > 0 && x.waited >= kHungFactor * *p50 &&
          x.waited >= 10 * longest_of_class(ctx, x.session, x.pid, x.op_id) && calls_after(x.ts, "") == 0) {
        hung.push_back(x);
        hung.back().unproven = true;
      }
      continue;
    }
    // Other threads still working a second after it began: a thread blocked
    // by design (an event wait) in a live process, unless it is the busiest.
    const int64_t after = calls_after(x.ts + 1'000'000'000, " AND tid != " + std::to_string(x.tid));
    const int64_t busiest = ctx.scalar("SELECT tid FROM cuda_call_events WHERE " + proc +
                                       " GROUP BY tid ORDER BY count(*) DESC LIMIT 1");
    if (after == 0 || busiest == int64_t(x.tid)) hung.push_back(x);
  }
  return hung;
}

// The latest collective of a process before `before`.
struct Latest {
  std::string comm, op;
  int64_t rank = -1, nranks = 0, seq = -1, ts = 0, stack_id = -1;
};
std::optional<Latest> latest_collective(const RuleContext& ctx, int64_t session, uint32_t pid, int64_t before) {
  std::optional<Latest> l;
  ctx.each("SELECT coalesce(comm_hash, ''), op_id, coalesce(rank, -1), coalesce(nranks, 0), coalesce(seq, -1), ts_ns,"
           " coalesce(stack_id, -1) FROM nccl_call_events WHERE session_id = " + std::to_string(session) + " AND pid = " +
               std::to_string(pid) + " AND ts_ns <= " + std::to_string(before) + " AND seq IS NOT NULL ORDER BY ts_ns DESC LIMIT 1",
           [&](store::Statement& s) {
             l = Latest{s.col_text(0), ctx.op_name(s.col_int(1)), s.col_int(2), s.col_int(3), s.col_int(4), s.col_int(5),
                        s.col_int(6)};
           });
  return l;
}

std::string where_of(const RuleContext& ctx, int64_t stack_id) {
  if (stack_id < 0) return {};
  auto f = ctx.top_frame("SELECT " + std::to_string(stack_id) + " AS stack_id");
  return f ? f->where() : std::string();
}

// What a system call a thread sleeps in waits for, in a user's words.
std::string sleep_words(int64_t syscall) {
  switch (syscall) {
    case 202: return "a lock, an event or a condition (futex)";
    case 0: case 7: case 23: case 232: case 270: case 271: case 281: return "I/O: a pipe, a socket or a file (read/poll)";
    case 35: case 230: return "a sleep";
    case 61: case 247: return "a child process (wait)";
    case 43: case 288: return "a connection (accept)";
    default: return "a wait";
  }
}

// Where a rank that never entered the collective sits when the others are
// stuck: gone, in a call of its own, asleep at a line (the wait's stack,
// recorded even when the trace stopped mid-wait), or on-CPU at a line.
struct MissingRank {
  std::string text, where, state;
  int64_t stack_id = -1;
};
MissingRank where_missing(const RuleContext& ctx, int64_t session, uint32_t pid, int64_t end) {
  const std::string proc = "session_id = " + std::to_string(session) + " AND pid = " + std::to_string(pid);
  MissingRank m;
  ctx.each("SELECT end_ts_ns, coalesce(exit_code, 0) FROM processes WHERE " + proc + " AND end_ts_ns IS NOT NULL",
           [&](store::Statement& s) {
             m.state = "gone";
             m.text = "it exited (status " + std::to_string(s.col_int(1)) + ") " +
                      format_duration(std::max<int64_t>(0, end - s.col_int(0))) + " before";
           });
  if (!m.text.empty()) return m;
  // A call of its own in flight at the stop: another collective, a sync.
  ctx.each("SELECT op_id, coalesce(stack_id, -1), max(waited_ns) FROM stalled_calls WHERE " + proc +
               " AND at_stop = 1 GROUP BY tid ORDER BY max(waited_ns) DESC LIMIT 1",
           [&](store::Statement& s) {
             m.state = "in_call";
             m.stack_id = s.col_int(1);
             m.where = where_of(ctx, m.stack_id);
             m.text = "it is itself in " + ctx.op_name(s.col_int(0)) + (m.where.empty() ? "" : " at " + m.where) +
                      ", for " + format_duration(s.col_int(2));
           });
  if (!m.text.empty()) return m;
  // Asleep through the end: its longest wait that reaches the stop, its
  // main thread first.
  ctx.each("SELECT tid, dur_ns, state, coalesce(syscall, -1), coalesce(stack_id, -1) FROM offcpu_events WHERE " + proc +
               " AND ts_ns + dur_ns >= " + std::to_string(end - 1'000'000'000) + " AND dur_ns >= 1000000000"
               " ORDER BY (tid = pid) DESC, (stack_id IS NOT NULL) DESC, dur_ns DESC LIMIT 1",
           [&](store::Statement& s) {
             m.state = s.col_int(2) == 2 ? "disk" : "asleep";
             m.stack_id = s.col_int(4);
             m.where = where_of(ctx, m.stack_id);
             m.text = std::string(s.col_int(2) == 2 ? "it is in uninterruptible I/O" : "it sleeps waiting for " +
                                                                                          sleep_words(s.col_int(3))) +
                      (m.where.empty() ? "" : " at " + m.where) + " (thread " + std::to_string(s.col_int(0)) +
                      "), for " + format_duration(s.col_int(1));
           });
  if (!m.text.empty()) return m;
  // On-CPU at a line in its last seconds (spinning, or work that never ends).
  if (ctx.has_column("cpu_samples", "in_call"))
    ctx.each("SELECT coalesce(stack_id, -1), sum(samples) FROM cpu_samples WHERE " + proc + " AND ts_ns >= " +
                 std::to_string(end - 3'000'000'000) + " GROUP BY stack_id ORDER BY sum(samples) DESC LIMIT 1",
             [&](store::Statement& s) {
               m.state = "on_cpu";
               m.stack_id = s.col_int(0);
               m.where = where_of(ctx, m.stack_id);
               m.text = "it runs on-CPU" + (m.where.empty() ? std::string() : " at " + m.where) + " (" +
                        std::to_string(s.col_int(1)) + " samples in its last 3 s)";
             });
  return m;
}

std::string waited_words(const Stall& s) {
  return s.returned_after ? "returned after " + format_duration(*s.returned_after)
                          : "still waiting after " + format_duration(s.waited) + " when last seen";
}

}  // namespace

std::vector<CausalChain> rule_hung_collective(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  // The stalled calls of NCCL ranks, by communicator.
  std::map<std::string, std::vector<std::pair<Stall, Latest>>> by_comm;
  for (const Stall& s : stalls(ctx))
    if (auto l = latest_collective(ctx, s.session, s.pid, s.ts + s.waited); l && !l->comm.empty() && !s.unproven)
      by_comm[l->comm].push_back({s, *l});
  for (auto& [comm, waiting] : by_comm) {
    // Every rank of the communicator in the file (merged files: every node),
    // with its latest collective.
    struct Rank {
      int64_t session, rank, seq, ts, stack_id;
      uint32_t pid;
      std::string op;
    };
    std::vector<Rank> ranks;
    ctx.each("SELECT n.session_id, n.pid, n.rank, n.seq, n.ts_ns, coalesce(n.stack_id, -1), n.op_id FROM nccl_call_events n"
             " JOIN (SELECT session_id, pid, max(seq) AS seq FROM nccl_call_events WHERE comm_hash = '" + comm +
                 "' AND seq IS NOT NULL GROUP BY session_id, pid) m ON m.session_id = n.session_id AND m.pid = n.pid AND"
                 " m.seq = n.seq WHERE n.comm_hash = '" + comm + "' GROUP BY n.session_id, n.pid ORDER BY n.rank",
             [&](store::Statement& s) {
               ranks.push_back({s.col_int(0), s.col_int(2), s.col_int(3), s.col_int(4), s.col_int(5), uint32_t(s.col_int(1)),
                                ctx.op_name(s.col_int(6))});
             });
    std::sort(waiting.begin(), waiting.end(), [](const auto& a, const auto& b) { return a.second.rank < b.second.rank; });
    int64_t top_seq = -1;
    for (auto& r : ranks) {
      // The number the probe gave the call it waits in, when it is a
      // collective; else one past its latest, when it waits in a collective
      // that has no row yet; a sync waits behind its latest.
      for (const auto& [st, l] : waiting) {
        if (st.session != r.session || st.pid != r.pid || st.returned_after) continue;
        const OpSpec* op = find_op(uint16_t(st.op_id));
        if (st.seq) r.seq = std::max(r.seq, *st.seq);
        else if (op && op->cls == OpClass::Collective) r.seq = std::max(r.seq, l.seq + 1);
      }
      top_seq = std::max(top_seq, r.seq);
    }
    const Stall& first = waiting.front().first;
    const Latest& fl = waiting.front().second;
    CausalChain c;
    const bool still = std::any_of(waiting.begin(), waiting.end(), [](const auto& w) { return !w.first.returned_after; });
    c.severity = still ? Severity::Critical : Severity::High;
    c.impact_ns = first.waited;
    c.symptom.pid = first.pid;
    c.symptom.comm = ctx.comm(first.pid);
    c.symptom.tid = first.tid;
    c.symptom.op = ctx.op_name(first.op_id);
    c.symptom.first_ts_ns = first.ts;
    std::set<int64_t> stuck_ranks;
    for (const auto& [s, l] : waiting) stuck_ranks.insert(l.rank);
    c.symptom.summary = std::to_string(stuck_ranks.size()) + " of " + std::to_string(fl.nranks) + " ranks wait in " +
                        fl.op + " #" + std::to_string(top_seq);
    std::string who;
    nlohmann::json wj = nlohmann::json::array();
    for (const auto& [s, l] : waiting) {
      const std::string w = where_of(ctx, s.stack_id);
      who += (who.empty() ? "" : "; ") + std::string("rank ") + std::to_string(l.rank) + " (pid " + std::to_string(s.pid) +
             ") in " + ctx.op_name(s.op_id) + (w.empty() ? "" : " at " + w) + ", " + waited_words(s);
      wj.push_back({{"rank", l.rank}, {"pid", s.pid}, {"op", ctx.op_name(s.op_id)}, {"where", w}, {"waited_ns", s.waited},
                    {"returned_after_ns", s.returned_after ? nlohmann::json(*s.returned_after) : nlohmann::json()},
                    {"latest_seq", l.seq}});
    }
    c.evidence.push_back({"after " + fl.op + " #" + std::to_string(fl.seq) + " of communicator " + comm + " (" +
                              std::to_string(fl.nranks) + " ranks): " + who,
                          {{"comm_hash", comm}, {"nranks", fl.nranks}, {"seq", fl.seq}, {"waiting", wj}}});
    // The ranks behind: their latest collective is older than the others'.
    nlohmann::json behind = nlohmann::json::array();
    int64_t missing_stack = -1;  // where the first rank behind sits, as a stack
    std::string missing_where;
    for (const auto& r : ranks) {
      if (r.seq >= top_seq) continue;
      const int64_t last_call = ctx.scalar("SELECT max(ts_ns + dur_ns) FROM cuda_call_events WHERE session_id = " +
                                           std::to_string(r.session) + " AND pid = " + std::to_string(r.pid));
      const int64_t end = first.ts + first.waited;
      const std::string w = where_of(ctx, r.stack_id);
      const MissingRank m = where_missing(ctx, r.session, r.pid, end);
      c.evidence.push_back({"rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + ") never entered #" +
                                std::to_string(r.seq + 1) +
                                (r.seq + 1 < top_seq ? " (the others are at #" + std::to_string(top_seq) + ")" : "") +
                                ": its latest collective is #" + std::to_string(r.seq) +
                                (w.empty() ? "" : " (" + w + ")") +
                                (last_call > 0 && end > last_call
                                     ? ", and it made no CUDA call in the last " + format_duration(end - last_call)
                                     : "") +
                                (m.text.empty() ? "; where it sits was not seen (trace with the host probes on)"
                                                : "; " + m.text),
                            {{"rank", r.rank}, {"pid", r.pid}, {"latest_seq", r.seq}, {"state", m.state},
                             {"where", m.where}}});
      if (m.stack_id >= 0 && missing_stack < 0) {
        missing_stack = m.stack_id;
        missing_where = "rank " + std::to_string(r.rank) + " " + m.text.substr(3);
      }
      behind.push_back(r.rank);
    }
    const int64_t known = int64_t(ranks.size());
    if (behind.empty() && known < fl.nranks)
      c.evidence.push_back({std::to_string(fl.nranks - known) + " of the " + std::to_string(fl.nranks) +
                                " ranks are not in this file: trace them too and `causeway merge` the files to see "
                                "which one is behind",
                            {{"ranks_in_file", known}}});
    else if (behind.empty())
      c.evidence.push_back({"every rank entered #" + std::to_string(top_seq) +
                                ": the collective itself does not complete (the network or NVLink between them, or a "
                                "GPU that stopped)",
                            {{"all_entered", true}}});
    c.evidence.front().data["behind"] = behind;
    // The line is the missing rank's, where it sits (the cause); the waiting
    // ranks' lines are in the evidence above. Without it, the waiting line.
    auto f = missing_stack >= 0 ? ctx.frame_of(missing_stack) : std::nullopt;
    if (!f && first.stack_id >= 0) f = ctx.top_frame("SELECT " + std::to_string(first.stack_id) + " AS stack_id");
    c.frame = f;
    if (!f) c.no_frame_reason = "the waiting call has no Python stack";
    c.recommendation = behind.empty()
                           ? "Check the links between the ranks (NCCL_DEBUG=INFO, `nvidia-smi nvlink -s`, `ibstat`) and "
                             "the GPUs' health; set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 so the job fails fast instead of "
                             "hanging until the watchdog."
                           : (missing_where.empty() ? std::string() : "Where it is: " + missing_where + ". ") +
                                 "Find why the rank behind did not reach the collective: a data-dependent branch that "
                                 "skips it (every rank must call the same collectives in the same order), an exception "
                                 "swallowed on that rank, a wait on something only it waits for, or a stall in its "
                                 "input pipeline.";
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<CausalChain> rule_hung_call(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  std::string lookups;
  for (const auto& op : all_ops())
    if (op.shape == ArgShape::ModuleGetFunction) lookups += (lookups.empty() ? "" : ",") + std::to_string(op.id);
  if (lookups.empty()) lookups = "-1";
  for (const Stall& s : stalls(ctx)) {
    auto l = latest_collective(ctx, s.session, s.pid, s.ts + s.waited);
    if (l && !l->comm.empty() && !s.unproven) continue;  // hung_collective's
    CausalChain c;
    c.severity = s.returned_after ? Severity::High : s.unproven ? Severity::Medium : Severity::Critical;
    c.impact_ns = s.returned_after ? *s.returned_after : s.waited;
    c.symptom.pid = s.pid;
    c.symptom.comm = ctx.comm(s.pid);
    c.symptom.tid = s.tid;
    c.symptom.thread = ctx.thread_name(s.session, s.pid, s.tid, s.ts);
    c.symptom.op = ctx.op_name(s.op_id);
    c.symptom.first_ts_ns = s.ts;
    c.symptom.summary = (s.returned_after ? "in flight " + format_duration(*s.returned_after)
                         : s.before       ? "in flight at least " + format_duration(s.waited) +
                                          " (since before the trace began)"
                                          : "in flight " + format_duration(s.waited) +
                                                (s.at_stop ? " when the trace stopped" : " (did not return while traced)")) +
                        (s.unproven ? ", maybe hung: trace it " + format_duration(kHungMinNs) + " or more to judge" : "");
    const auto p50 = baseline_p50(ctx, s.pid, s.op_id);
    c.evidence.push_back({c.symptom.op + (s.before ? " entered before the trace began (at " + format_wall_time(s.ts) +
                                                          " at the latest: it was on the thread's stack when the "
                                                          "trace attached)"
                                                    : " entered at " + format_wall_time(s.ts)) +
                              " on thread " +
                              (c.symptom.thread.empty() ? "" : c.symptom.thread + " ") + std::to_string(s.tid) + ", " +
                              waited_words(s) +
                              (p50 ? " (" + std::to_string(s.waited / std::max<int64_t>(1, *p50)) + "x its baseline, p50 " +
                                         format_duration(*p50) + ")"
                                   : ""),
                          {{"waited_ns", s.waited}, {"entered_ts_ns", s.ts}, {"at_stop", s.at_stop}, {"entered_before", s.before},
                           {"unproven", s.unproven},
                           {"baseline_p50_ns", p50 ? nlohmann::json(*p50) : nlohmann::json()},
                           {"returned_after_ns", s.returned_after ? nlohmann::json(*s.returned_after) : nlohmann::json()}}});
    const std::string proc = "session_id = " + std::to_string(s.session) + " AND pid = " + std::to_string(s.pid);
    // What the GPU was given last: the kernels launched before the call, or
    // looked up just before their first launch (CUDA's lazy loading names
    // each kernel then; those lookups are traced when launches are not).
    std::string kernels;
    nlohmann::json kj = nlohmann::json::array();
    ctx.each("SELECT coalesce(k.name, '?'), max(c.ts_ns), max(coalesce(c.stack_id, -1)) FROM cuda_call_events c LEFT JOIN "
             "kernels k ON k.id = c.kernel_id WHERE c." + proc + " AND (c.op_id IN (" + op_ids_sql_list(OpClass::Launch) +
                 ") OR (c.op_id IN (" + lookups + ") AND c.kernel_id IS NOT NULL)) AND c.ts_ns <= " + std::to_string(s.ts) + " AND c.ts_ns > " + std::to_string(s.ts - 10'000'000'000) +
                 " GROUP BY 1 ORDER BY 2 DESC LIMIT 3",
             [&](store::Statement& q) {
               const std::string w = where_of(ctx, q.col_int(2));
               kernels += (kernels.empty() ? "" : "; ") + q.col_text(0) + " (" + format_duration(s.ts - q.col_int(1)) +
                          " before" + (w.empty() ? "" : ", at " + w) + ")";
               kj.push_back({{"kernel", q.col_text(0)}, {"before_ns", s.ts - q.col_int(1)}, {"where", w}});
             });
    if (!kernels.empty())
      c.evidence.push_back({"the last kernels launched before it: " + kernels, {{"last_kernels", kj}}});
    // What the GPU did meanwhile (NVML).
    if (auto busy = ctx.gpu_busy(s.session, s.pid, s.ts, s.ts + s.waited))
      c.evidence.push_back({"the GPU was " + pct(*busy) + " busy while it waited (NVML): " +
                                (*busy >= 0.9   ? "a kernel that does not end"
                                 : *busy <= 0.1 ? "the GPU idles: the call waits for something that never came"
                                                : "the GPU works, slowly or on someone else's work"),
                            {{"gpu_busy", *busy}}});
    // Its process's other threads that made no call since it began.
    std::string quiet;
    int64_t n_quiet = 0;
    ctx.each("SELECT tid, max(ts_ns + dur_ns) FROM cuda_call_events WHERE " + proc + " AND tid != " +
                 std::to_string(s.tid) + " GROUP BY tid HAVING max(ts_ns + dur_ns) < " + std::to_string(s.ts + 1'000'000'000),
             [&](store::Statement& q) {
               n_quiet++;
               if (n_quiet <= 3) {
                 const std::string name = ctx.thread_name(s.session, s.pid, uint32_t(q.col_int(0)), s.ts);
                 quiet += (quiet.empty() ? "" : ", ") + (name.empty() ? "thread" : name) + " (" +
                          std::to_string(q.col_int(0)) + ")";
               }
             });
    if (n_quiet)
      c.evidence.push_back({std::to_string(n_quiet) + " other thread" + (n_quiet == 1 ? "" : "s") +
                                " of the process made no CUDA call after it began: " + quiet,
                            {{"quiet_threads", n_quiet}}});
    c.frame = s.stack_id >= 0 ? ctx.top_frame("SELECT " + std::to_string(s.stack_id) + " AS stack_id") : std::nullopt;
    if (!c.frame) c.no_frame_reason = "the waiting call has no Python stack";
    const OpSpec* op = find_op(uint16_t(s.op_id));
    c.recommendation = op && op->cls == OpClass::Sync
                           ? "The GPU did not finish the work queued before this synchronisation: a kernel that does "
                             "not terminate (a spin on a flag another rank or stream never sets), a collective whose "
                             "peers are gone, or a GPU that stopped (check `dmesg` for an Xid)."
                           : "Find what the call waits for: `py-spy dump --pid " + std::to_string(s.pid) +
                                 "` and `gdb -p` show the native stack of the waiting thread.";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace causeway::analyze
