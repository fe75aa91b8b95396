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
#include "causeway/store/explain_tables.h"
#include "causeway/store/hang_reads.h"

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
  const int64_t own = store::baseline_p50(ctx.db, pid, op_id);
  if (own > 0) return own;
  const OpSpec* op = find_op(uint16_t(op_id));
  if (!op) return std::nullopt;
  const int64_t cls = store::baseline_class_p50(ctx.db, pid, op_ids_sql_list(op->cls));
  return cls > 0 ? std::optional<int64_t>(cls) : std::nullopt;
}

// A call in flight at the stop this long, under kHungMinNs, may be hung.
constexpr int64_t kMaybeHungNs = 1'000'000'000;

// The ids of a class's ops, in the op table's order (as op_ids_sql_list).
std::vector<int64_t> ops_of(OpClass c) {
  std::vector<int64_t> ids;
  for (const auto& op : all_ops())
    if (op.cls == c) ids.push_back(op.id);
  return ids;
}

// The longest call of op_id's class that returned in the process.
int64_t longest_of_class(const RuleContext& ctx, int64_t session, uint32_t pid, int64_t op_id) {
  const OpSpec* op = find_op(uint16_t(op_id));
  return store::longest_call_ns(ctx.db, session, pid, op ? ops_of(op->cls) : std::vector<int64_t>{op_id});
}

// Calls judged hung while tracing, and calls still in flight when the trace
// stopped that the same rule judges hung (common/hang.h) and that stopped
// their process: no other call of it returned after they began, or they are
// on its busiest thread. A thread blocked by design (an event loop's wait)
// beside a process that goes on working is not hung.
std::vector<Stall> stalls(const RuleContext& ctx) {
  std::vector<Stall> out;
  const store::Window w{ctx.window.from_ns, ctx.window.to_ns,
                        ctx.window.pid ? std::optional<int64_t>(*ctx.window.pid) : std::nullopt};
  for (const store::StalledCall& s : store::stalled_calls(ctx.db, w)) {
    Stall x{s.session_id, s.ts_ns, s.waited_ns, s.seen_ts_ns, s.pid, s.tid, s.op_id, s.stack_id,
            s.returned_after_ns, s.at_stop, s.entered_before};
    x.seq = s.seq;
    out.push_back(x);
  }
  std::vector<Stall> hung;
  for (const Stall& x : out) {
    // Calls of the process (CUDA and NCCL) that began after `from`.
    auto calls_after = [&](int64_t from, store::Threads threads) {
      return store::calls_after(ctx.db, x.session, x.pid, from, threads, x.tid);
    };
    if (x.before) {
      // Found on its thread's stack when the trace attached: a thread that
      // made a call since had left it (the word was a stale one). Else hung
      // when its process has made no call since (the whole job waits on
      // it) for kHungMinNs, or by the same rule as any call below.
      if (calls_after(x.ts, store::Threads::Only) > 0) continue;
      if (calls_after(x.ts, store::Threads::All) == 0) {
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
          x.waited >= 10 * longest_of_class(ctx, x.session, x.pid, x.op_id) &&
          calls_after(x.ts, store::Threads::All) == 0) {
        hung.push_back(x);
        hung.back().unproven = true;
      }
      continue;
    }
    // Other threads still working a second after it began: a thread blocked
    // by design (an event wait) in a live process, unless it is the busiest.
    const int64_t after = calls_after(x.ts + 1'000'000'000, store::Threads::Others);
    const int64_t busiest = store::busiest_thread(ctx.db, x.session, x.pid);
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
  const auto n = store::latest_collective(ctx.db, session, pid, before);
  if (!n) return std::nullopt;
  return Latest{n->comm_hash, ctx.op_name(n->op_id), n->rank, n->nranks, n->seq, n->ts_ns, n->stack_id};
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
  MissingRank m;
  if (const auto e = store::process_exit(ctx.db, session, pid)) {
    m.state = "gone";
    m.text = "it exited (status " + std::to_string(e->exit_code) + ") " +
             format_duration(std::max<int64_t>(0, end - e->end_ts_ns)) + " before";
    return m;
  }
  // A call of its own in flight at the stop: another collective, a sync.
  if (const auto c = store::longest_call_at_stop(ctx.db, session, pid)) {
    m.state = "in_call";
    m.stack_id = c->stack_id;
    m.where = where_of(ctx, m.stack_id);
    m.text = "it is itself in " + ctx.op_name(c->op_id) + (m.where.empty() ? "" : " at " + m.where) +
             ", for " + format_duration(c->waited_ns);
    return m;
  }
  // Asleep through the end: its longest wait that reaches the stop, its
  // main thread first.
  if (const auto z = store::sleep_reaching(ctx.db, session, pid, end - 1'000'000'000, 1'000'000'000)) {
    m.state = z->state == 2 ? "disk" : "asleep";
    m.stack_id = z->stack_id;
    m.where = where_of(ctx, m.stack_id);
    m.text = std::string(z->state == 2 ? "it is in uninterruptible I/O"
                                       : "it sleeps waiting for " + sleep_words(z->syscall)) +
             (m.where.empty() ? "" : " at " + m.where) + " (thread " + std::to_string(z->tid) + "), for " +
             format_duration(z->dur_ns);
    return m;
  }
  // On-CPU at a line in its last seconds (spinning, or work that never ends).
  if (const auto t = store::top_sampled_stack(ctx.db, session, pid, end - 3'000'000'000)) {
    m.state = "on_cpu";
    m.stack_id = t->stack_id;
    m.where = where_of(ctx, m.stack_id);
    m.text = "it runs on-CPU" + (m.where.empty() ? std::string() : " at " + m.where) + " (" +
             std::to_string(t->samples) + " samples in its last 3 s)";
  }
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
    for (const store::RankLatest& n : store::communicator_ranks(ctx.db, comm))
      ranks.push_back({n.session_id, n.rank, n.seq, n.ts_ns, n.stack_id, n.pid, ctx.op_name(n.op_id)});
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
      const int64_t last_call = store::last_call_end_ns(ctx.db, r.session, r.pid);
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
  const std::vector<int64_t> launches = ops_of(OpClass::Launch);
  std::vector<int64_t> lookups;
  for (const auto& op : all_ops())
    if (op.shape == ArgShape::ModuleGetFunction) lookups.push_back(op.id);
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
    // What the GPU was given last: the kernels launched before the call, or
    // looked up just before their first launch (CUDA's lazy loading names
    // each kernel then; those lookups are traced when launches are not).
    std::string kernels;
    nlohmann::json kj = nlohmann::json::array();
    for (const store::KernelGiven& k :
         store::kernels_given(ctx.db, s.session, s.pid, launches, lookups, s.ts - 10'000'000'000, s.ts, 3)) {
      const std::string w = where_of(ctx, k.stack_id);
      kernels += (kernels.empty() ? "" : "; ") + k.kernel + " (" + format_duration(s.ts - k.last_ts_ns) +
                 " before" + (w.empty() ? "" : ", at " + w) + ")";
      kj.push_back({{"kernel", k.kernel}, {"before_ns", s.ts - k.last_ts_ns}, {"where", w}});
    }
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
    for (const store::ThreadLastCall& t :
         store::threads_quiet_since(ctx.db, s.session, s.pid, s.tid, s.ts + 1'000'000'000)) {
      n_quiet++;
      if (n_quiet <= 3) {
        const std::string name = ctx.thread_name(s.session, s.pid, uint32_t(t.tid), s.ts);
        quiet += (quiet.empty() ? "" : ", ") + (name.empty() ? "thread" : name) + " (" +
                 std::to_string(t.tid) + ")";
      }
    }
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
