// SPDX-License-Identifier: Apache-2.0
// call_failures: CUDA / HIP / NCCL calls that returned an error, told as
// incidents: a sticky error (after an illegal address every call fails) is one
// incident from its first failing call; a process in which nothing worked says
// so first. Out-of-memory allocations are the out_of_memory rule's.
#include "../rule_context.h"

#include <map>

#include "causeway/common/cuda_errors.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"

namespace causeway::analyze {

namespace {

struct Failure {
  int64_t ts, session;
  uint32_t tid;
  int64_t op_id, ret, stack_id, flags;
  Layer layer;
  ErrorInfo info;
};

struct Incident {
  std::vector<Failure> calls;  // in time order
  std::map<std::string, int64_t> by_error;
  int64_t sampled_launches = 0;  // failing launch rows kept by --launch-sampling (the rest are counted only)
  int64_t failed() const { return int64_t(calls.size()); }
};

}  // namespace

std::vector<CausalChain> rule_call_failures(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  const std::string naming = op_ids_sql_list(OpClass::Naming);
  // Per process: every failure in time order, and how many calls it made.
  std::map<uint32_t, std::vector<Failure>> by_pid;
  ctx.each("SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), flags FROM cuda_call_events WHERE " +
               ctx.in_window() + " AND ret != 0 AND op_id NOT IN (" + naming +
               ") UNION ALL SELECT ts_ns, session_id, pid, tid, op_id, ret, coalesce(stack_id, -1), 0 FROM nccl_call_events"
               " WHERE " + ctx.in_window() + " AND ret != 0 ORDER BY 1",
           [&](store::Statement& s) {
             const OpSpec* op = find_op(uint16_t(s.col_int(4)));
             if (!op) return;
             Failure f{s.col_int(0), s.col_int(1), uint32_t(s.col_int(3)), s.col_int(4), s.col_int(5), s.col_int(6),
                       s.col_int(7), op->layer, describe_error(op->layer, s.col_int(5))};
             if (f.info.kind == ErrorKind::Benign) return;
             by_pid[uint32_t(s.col_int(2))].push_back(std::move(f));
           });
  for (auto& [pid, failures] : by_pid) {
    const std::string p = std::to_string(pid);
    // Calls made (launch rows may be sampled: op_counts has them all when the
    // whole process is in the window).
    const int64_t calls = ctx.scalar("SELECT count(*) FROM cuda_call_events WHERE " + ctx.in_window() +
                                     " AND pid = " + p + " AND op_id NOT IN (" + naming + ") AND flags & " +
                                     std::to_string(CW_CALL_AGGREGATED) + " = 0") +
                          ctx.scalar("SELECT coalesce(sum(calls), 0) FROM launch_stats WHERE " + ctx.in_window() +
                                     " AND pid = " + p) +
                          ctx.scalar("SELECT count(*) FROM nccl_call_events WHERE " + ctx.in_window() + " AND pid = " + p);
    const int64_t failed_launches = ctx.scalar("SELECT coalesce(sum(errors), 0) FROM launch_stats WHERE " +
                                               ctx.in_window() + " AND pid = " + p);
    const int64_t ok = ctx.scalar("SELECT count(*) FROM cuda_call_events WHERE " + ctx.in_window() + " AND pid = " + p +
                                  " AND ret = 0 AND op_id NOT IN (" + naming + ")") +
                       ctx.scalar("SELECT count(*) FROM nccl_call_events WHERE " + ctx.in_window() + " AND pid = " + p +
                                  " AND ret = 0") +
                       ctx.scalar("SELECT coalesce(sum(calls - errors), 0) FROM launch_stats WHERE " + ctx.in_window() +
                                  " AND pid = " + p);
    const bool nothing_worked = ok == 0;
    // Incidents: a sticky error swallows every later failure; a missing
    // driver is one incident whatever the codes; the rest group by error.
    std::vector<Incident> incidents;
    std::map<std::string, size_t> open;  // error key -> incident
    std::optional<size_t> sticky;
    for (auto& f : failures) {
      if (f.info.kind == ErrorKind::OutOfMemory) {
        const OpSpec* op = find_op(uint16_t(f.op_id));
        if (op && op->cls == OpClass::Alloc) continue;  // the out_of_memory rule's
      }
      size_t at;
      if (sticky) {
        at = *sticky;
      } else {
        const std::string key = f.info.kind == ErrorKind::NoDriver ? "no_driver" : f.info.name;
        auto it = open.find(key);
        if (it == open.end()) {
          incidents.push_back({});
          it = open.emplace(key, incidents.size() - 1).first;
        }
        at = it->second;
        if (f.info.kind == ErrorKind::Sticky || f.info.kind == ErrorKind::Hardware) sticky = at;
      }
      incidents[at].by_error[f.info.name]++;
      incidents[at].calls.push_back(f);
      if (f.flags & CW_CALL_AGGREGATED) incidents[at].sampled_launches++;
    }
    // Failing launches that --launch-sampling counted without a row: they
    // belong with the kept failing launches (the same error, or the sticky
    // incident they fell into).
    int64_t kept = 0;
    Incident* launches_in = incidents.empty() ? nullptr : &incidents.front();
    for (auto& inc : incidents) {
      kept += inc.sampled_launches;
      if (inc.sampled_launches > launches_in->sampled_launches) launches_in = &inc;
    }
    const int64_t unrecorded = std::max<int64_t>(0, failed_launches - kept);
    for (auto& inc : incidents) {
      if (inc.calls.empty()) continue;
      const Failure& first = inc.calls.front();
      const int64_t failed = inc.failed() + (&inc == launches_in ? unrecorded : 0);
      const bool shutdown = first.info.kind == ErrorKind::Shutdown;
      CausalChain c;
      c.severity = shutdown ? Severity::Low : Severity::Critical;
      c.impact_ns = failed;
      c.symptom.pid = pid;
      c.symptom.comm = ctx.comm(pid);
      c.symptom.tid = first.tid;
      c.symptom.op = ctx.op_name(first.op_id);
      c.symptom.calls = failed;
      c.symptom.first_ts_ns = first.ts;
      c.symptom.last_ts_ns = inc.calls.back().ts;
      c.symptom.summary = std::to_string(failed) + " failed with " + first.info.name +
                          (inc.by_error.size() > 1 ? " and after it" : "");
      std::string errors;
      nlohmann::json err_json = nlohmann::json::object();
      for (const auto& [name, n] : inc.by_error) {
        errors += (errors.empty() ? "" : ", ") + name + (inc.by_error.size() > 1 ? " x" + std::to_string(n) : "");
        err_json[name] = n;
      }
      if (nothing_worked && !shutdown)
        c.evidence.push_back({"nothing worked: every one of the process's " + std::to_string(calls) +
                                  " CUDA calls failed, so no work reached a GPU",
                              {{"nothing_worked", true}, {"calls", calls}}});
      const bool is_sticky = first.info.kind == ErrorKind::Sticky || first.info.kind == ErrorKind::Hardware;
      c.evidence.push_back(
          {std::to_string(failed) + " call" + (failed == 1 ? "" : "s") + " failed with " + errors +
               " — " + std::string(first.info.meaning) + "; the first: " + c.symptom.op + " at " +
               format_wall_time(first.ts) + " on thread " + std::to_string(first.tid) +
               (is_sticky && failed > 1
                    ? "; every call after it failed too (the error is sticky: the context is lost)"
                    : ""),
           {{"failed", failed}, {"errors", err_json}, {"first_error", first.info.name},
            {"first_code", first.ret}, {"kind", error_kind_name(first.info.kind)}, {"first_ts_ns", first.ts},
            {"first_op", c.symptom.op}, {"launches_failed", failed_launches}}});
      // What ran just before: the calls on the process leading to the first
      // failure, and the last kernel launched (an asynchronous fault surfaces
      // at the next synchronising call, not at its own launch).
      std::vector<std::string> seq;
      ctx.each("SELECT op_id, ret FROM cuda_call_events WHERE session_id = " + std::to_string(first.session) +
                   " AND pid = " + p + " AND ts_ns <= " + std::to_string(first.ts) + " AND ts_ns >= " +
                   std::to_string(ctx.window.from_ns) + " AND op_id NOT IN (" + naming + ") ORDER BY ts_ns DESC LIMIT 6",
               [&](store::Statement& s) {
                 seq.insert(seq.begin(), ctx.op_name(s.col_int(0)) + (s.col_int(1) ? " ✗" : ""));
               });
      std::string seq_words;
      for (const auto& x : seq) seq_words += (seq_words.empty() ? "" : " → ") + x;
      if (seq.size() > 1) c.evidence.push_back({"the calls up to it: " + seq_words, {{"sequence", seq}}});
      std::optional<int64_t> launch_stack;
      if (first.info.kind == ErrorKind::Launch) {
        // The failing call is the launch itself: its kernel.
        ctx.each("SELECT coalesce(k.name, '') FROM cuda_call_events c LEFT JOIN kernels k ON k.id = c.kernel_id"
                 " WHERE c.session_id = " + std::to_string(first.session) + " AND c.pid = " + p + " AND c.tid = " +
                     std::to_string(first.tid) + " AND c.ts_ns = " + std::to_string(first.ts) + " LIMIT 1",
                 [&](store::Statement& s) {
                   if (!s.col_text(0).empty())
                     c.evidence.push_back({"the failing launch's kernel: " + s.col_text(0), {{"kernel", s.col_text(0)}}});
                 });
      }
      if (first.info.kind == ErrorKind::Sticky) {
        // An asynchronous fault surfaces at the next synchronising call: the
        // culprit is among the kernels launched since the last synchronising
        // call that succeeded; one never launched before is the likeliest,
        // the first of several such.
        // (Only blocking copies: an asynchronous one returns success with a
        // fault still pending, .item()'s copy before the sync that fails.)
        const std::string launches = op_ids_sql_list(OpClass::Launch), syncs = op_ids_sql_list(OpClass::Sync),
                          copies = blocking_copy_ids_sql_list(), sess = std::to_string(first.session);
        const int64_t since = ctx.scalar("SELECT coalesce(max(ts_ns + dur_ns), 0) FROM cuda_call_events WHERE session_id = " +
                                         sess + " AND pid = " + p + " AND ret = 0 AND op_id IN (" + syncs + "," + copies +
                                         ") AND ts_ns < " + std::to_string(first.ts));
        struct Suspect {
          std::string kernel;
          int64_t launches = 0, before = 0, stack = -1, last_ts = 0;
        };
        std::vector<Suspect> suspects;
        // Launch rows, and first lookups of a kernel (CUDA's lazy loading
        // names each kernel just before its first launch: that naming call
        // is always traced, with its line, where launches are only sampled).
        ctx.each("SELECT coalesce(k.name, ''), max(1, sum(c.op_id IN (" + launches + "))), max(c.ts_ns),"
                 " max(coalesce(c.stack_id, -1)),"
                 " (SELECT count(*) FROM cuda_call_events b WHERE b.session_id = c.session_id AND b.pid = c.pid AND"
                 " b.kernel_id IS c.kernel_id AND b.ts_ns < " + std::to_string(since) + ") AS before_n"
                 " FROM cuda_call_events c LEFT JOIN kernels k ON k.id = c.kernel_id WHERE c.session_id = " + sess +
                     " AND c.pid = " + p + " AND (c.op_id IN (" + launches + ") OR (c.op_id IN (" + naming +
                     ") AND c.kernel_id IS NOT NULL)) AND c.ts_ns >= " + std::to_string(since) +
                     " AND c.ts_ns <= " + std::to_string(first.ts) + " AND c.ret = 0 GROUP BY c.kernel_id"
                     " ORDER BY before_n, CASE WHEN before_n = 0 THEN min(c.ts_ns) ELSE -max(c.ts_ns) END",
                 [&](store::Statement& s) {
                   suspects.push_back({s.col_text(0).empty() ? std::string("an unnamed kernel") : s.col_text(0),
                                       s.col_int(1), s.col_int(4), s.col_int(3), s.col_int(2)});
                 });
        if (!suspects.empty()) {
          const Suspect& top = suspects.front();
          if (top.stack >= 0) launch_stack = top.stack;
          auto f = launch_stack ? ctx.top_frame("SELECT " + std::to_string(*launch_stack) + " AS stack_id") : std::nullopt;
          nlohmann::json sj = nlohmann::json::array();
          for (const auto& x : suspects)
            sj.push_back({{"kernel", x.kernel}, {"launches", x.launches}, {"launched_before", x.before}});
          std::string words;
          if (suspects.size() == 1)
            words = "the only kernel launched since the last synchronising call that succeeded: " + top.kernel;
          else
            words = std::to_string(suspects.size()) + " kernels were launched since the last synchronising call that "
                    "succeeded; " + (top.before == 0 && suspects[1].before > 0
                                         ? "the one never launched before, the likeliest culprit: " + top.kernel
                                     : top.before == 0
                                         ? "of those never launched before, the first (a fault stops its stream: "
                                           "the ones after it did not run): " + top.kernel
                                         : "the last: " + top.kernel);
          c.evidence.push_back({words + (f ? ", launched at " + f->where() : "") +
                                    (top.before == 0 && suspects.size() > 1
                                         ? " (the others ran " + std::to_string(suspects[1].before) + "+ times without a fault)"
                                         : ""),
                                {{"kernel", top.kernel}, {"launch_where", f ? nlohmann::json(f->where()) : nlohmann::json()},
                                 {"suspects", sj}}});
        }
        // No launch row and no kernel lookup since the last good sync (the
        // launch fell outside the launch windows): a module CUDA loaded
        // lazily in that stretch was loaded for the first launch of a kernel
        // in it, at that launch's line.
        if (!launch_stack)
          ctx.each("SELECT stack_id FROM cuda_call_events WHERE session_id = " + sess + " AND pid = " + p +
                       " AND op_id IN (" + op_ids_sql_list(OpClass::Module) + ") AND ret = 0 AND stack_id IS NOT NULL"
                       " AND ts_ns >= " + std::to_string(since) + " AND ts_ns <= " + std::to_string(first.ts) +
                       " ORDER BY ts_ns DESC LIMIT 1",
                   [&](store::Statement& s) {
                     launch_stack = s.col_int(0);
                     auto f = ctx.top_frame("SELECT " + std::to_string(*launch_stack) + " AS stack_id");
                     c.evidence.push_back(
                         {"no launch was recorded since the last synchronising call that succeeded (outside the "
                          "launch windows); CUDA loaded a module lazily in that stretch, for the first launch of a "
                          "kernel in it" + (f ? ", at " + f->where() : std::string()) + ": the likeliest culprit",
                          {{"lazy_load_where", f ? nlohmann::json(f->where()) : nlohmann::json()}}});
                   });
      }
      // The line: the suspect kernel's launch (where the bug is), else the
      // failing call's (where it surfaced).
      if (launch_stack) c.frame = ctx.top_frame("SELECT " + std::to_string(*launch_stack) + " AS stack_id");
      auto fail_frame = ctx.top_frame("SELECT " + std::to_string(first.stack_id) + " AS stack_id");
      if (fail_frame && c.frame && fail_frame->where() != c.frame->where())
        c.evidence.push_back({"the error surfaced at " + fail_frame->text(), {{"failed_where", fail_frame->where()}}});
      if (!c.frame) c.frame = fail_frame;
      if (!c.frame) c.no_frame_reason = "the failing call has no Python stack (traced with --no-stacks, or not Python)";
      c.recommendation = std::string(first.info.fix.empty() ? "look up " + first.info.name + " for the failing call"
                                                            : std::string(first.info.fix)) + ".";
      c.recommendation[0] = char(std::toupper(c.recommendation[0]));
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace causeway::analyze
