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
#include "causeway/store/failure_reads.h"

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

// What the chains of one process share.
struct FailingProcess {
  const RuleContext& ctx;
  uint32_t pid;
  int64_t calls, failed_launches;
  bool nothing_worked;
};

// A kernel launched since the last synchronising call that succeeded.
struct Suspect {
  std::string kernel;
  int64_t launches = 0, before = 0, stack = -1, last_ts = 0;
};

// Per process: every failure in time order.
std::map<uint32_t, std::vector<Failure>> failures_by_pid(const RuleContext& ctx) {
  std::map<uint32_t, std::vector<Failure>> by_pid;
  store::each_call_failure(ctx.db, ctx.store_window(), [&](const store::CallFailure& r) {
    const OpSpec* op = find_op(uint16_t(r.op_id));
    if (!op) return;
    Failure f{r.ts_ns, r.session, uint32_t(r.tid), r.op_id, r.ret, r.stack_id, r.flags, op->layer,
              describe_error(op->layer, r.ret)};
    if (f.info.kind == ErrorKind::Benign) return;
    by_pid[uint32_t(r.pid)].push_back(std::move(f));
  });
  return by_pid;
}

// How many calls the process made, how many of its launches failed, and
// whether any call worked.
FailingProcess count_calls(const RuleContext& ctx, uint32_t pid) {
  const store::ProcessCallCounts n = store::process_call_counts(ctx.db, ctx.store_window(), pid);
  return {ctx, pid, n.calls, n.failed_launches, n.succeeded == 0};
}

// Incidents: a sticky error swallows every later failure; a missing driver
// is one incident whatever the codes; the rest group by error.
std::vector<Incident> group_incidents(const std::vector<Failure>& failures) {
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
  return incidents;
}

// The incident's failures: that nothing worked, when so, then how many
// failed with which errors, and the first.
void tell_failures(const FailingProcess& pr, const Incident& inc, int64_t failed, CausalChain& c) {
  const Failure& first = inc.calls.front();
  std::string errors;
  nlohmann::json err_json = nlohmann::json::object();
  for (const auto& [name, n] : inc.by_error) {
    errors += (errors.empty() ? "" : ", ") + name + (inc.by_error.size() > 1 ? " x" + std::to_string(n) : "");
    err_json[name] = n;
  }
  if (pr.nothing_worked && first.info.kind != ErrorKind::Shutdown)
    c.evidence.push_back({"nothing worked: every one of the process's " + std::to_string(pr.calls) +
                              " CUDA calls failed, so no work reached a GPU",
                          {{"nothing_worked", true}, {"calls", pr.calls}}});
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
        {"first_op", c.symptom.op}, {"launches_failed", pr.failed_launches}}});
}

// What ran just before: the calls on the process leading to the first
// failure, and the last kernel launched (an asynchronous fault surfaces at
// the next synchronising call, not at its own launch).
void tell_calls_before(const FailingProcess& pr, const Failure& first, CausalChain& c) {
  const RuleContext& ctx = pr.ctx;
  std::vector<std::string> seq;
  for (const store::OpReturn& r : store::last_cuda_calls(ctx.db, first.session, pr.pid, ctx.window.from_ns,
                                                         first.ts, 6))
    seq.insert(seq.begin(), ctx.op_name(r.op_id) + (r.ret ? " ✗" : ""));
  std::string seq_words;
  for (const auto& x : seq) seq_words += (seq_words.empty() ? "" : " → ") + x;
  if (seq.size() > 1) c.evidence.push_back({"the calls up to it: " + seq_words, {{"sequence", seq}}});
}

// The failing call is the launch itself: its kernel.
void tell_failing_kernel(const FailingProcess& pr, const Failure& first, CausalChain& c) {
  const std::string kernel = store::call_kernel(pr.ctx.db, first.session, pr.pid, first.tid, first.ts);
  if (!kernel.empty()) c.evidence.push_back({"the failing launch's kernel: " + kernel, {{"kernel", kernel}}});
}

// The kernels launched since `since` up to the first failure: those never
// launched before first, in launch order, then the rest by how often they
// ran before, the latest first.
std::vector<Suspect> suspects_since(const FailingProcess& pr, const Failure& first, int64_t since) {
  std::vector<Suspect> suspects;
  // Launch rows, and first lookups of a kernel (CUDA's lazy loading
  // names each kernel just before its first launch: that naming call
  // is always traced, with its line, where launches are only sampled).
  for (const auto& k : store::kernels_launched(pr.ctx.db, first.session, pr.pid, since, first.ts))
    suspects.push_back({k.kernel.empty() ? std::string("an unnamed kernel") : k.kernel, k.launches,
                        k.launched_before, k.stack_id, k.last_ts_ns});
  return suspects;
}

// The likeliest culprit among the suspects, told; its launch's stack when it
// has one.
std::optional<int64_t> tell_suspects(const FailingProcess& pr, const std::vector<Suspect>& suspects,
                                     CausalChain& c) {
  const RuleContext& ctx = pr.ctx;
  std::optional<int64_t> launch_stack;
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
  return launch_stack;
}

// No launch row and no kernel lookup since the last good sync (the launch
// fell outside the launch windows): a module CUDA loaded lazily in that
// stretch was loaded for the first launch of a kernel in it, at that
// launch's line.
std::optional<int64_t> tell_lazy_load(const FailingProcess& pr, const Failure& first, int64_t since,
                                      CausalChain& c) {
  const std::optional<int64_t> launch_stack =
      store::last_module_load_stack(pr.ctx.db, first.session, pr.pid, since, first.ts);
  if (!launch_stack) return launch_stack;
  auto f = pr.ctx.top_frame("SELECT " + std::to_string(*launch_stack) + " AS stack_id");
  c.evidence.push_back(
      {"no launch was recorded since the last synchronising call that succeeded (outside the "
       "launch windows); CUDA loaded a module lazily in that stretch, for the first launch of a "
       "kernel in it" + (f ? ", at " + f->where() : std::string()) + ": the likeliest culprit",
       {{"lazy_load_where", f ? nlohmann::json(f->where()) : nlohmann::json()}}});
  return launch_stack;
}

// An asynchronous fault surfaces at the next synchronising call: the culprit
// is among the kernels launched since the last synchronising call that
// succeeded; one never launched before is the likeliest, the first of
// several such. Returns the culprit's launch stack, when known.
std::optional<int64_t> tell_sticky_culprit(const FailingProcess& pr, const Failure& first, CausalChain& c) {
  // (Only blocking copies: an asynchronous one returns success with a
  // fault still pending, .item()'s copy before the sync that fails.)
  const int64_t since = store::last_good_sync_end(pr.ctx.db, first.session, pr.pid, first.ts);
  std::optional<int64_t> launch_stack;
  const std::vector<Suspect> suspects = suspects_since(pr, first, since);
  if (!suspects.empty()) launch_stack = tell_suspects(pr, suspects, c);
  if (!launch_stack) launch_stack = tell_lazy_load(pr, first, since, c);
  return launch_stack;
}

// The line: the suspect kernel's launch (where the bug is), else the
// failing call's (where it surfaced); and what to do.
void place(const FailingProcess& pr, const Failure& first, std::optional<int64_t> launch_stack,
           CausalChain& c) {
  const RuleContext& ctx = pr.ctx;
  if (launch_stack) c.frame = ctx.top_frame("SELECT " + std::to_string(*launch_stack) + " AS stack_id");
  auto fail_frame = ctx.top_frame("SELECT " + std::to_string(first.stack_id) + " AS stack_id");
  if (fail_frame && c.frame && fail_frame->where() != c.frame->where())
    c.evidence.push_back({"the error surfaced at " + fail_frame->text(), {{"failed_where", fail_frame->where()}}});
  if (!c.frame) c.frame = fail_frame;
  if (!c.frame) c.no_frame_reason = "the failing call has no Python stack (traced with --no-stacks, or not Python)";
  c.recommendation = std::string(first.info.fix.empty() ? "look up " + first.info.name + " for the failing call"
                                                        : std::string(first.info.fix)) + ".";
  c.recommendation[0] = char(std::toupper(c.recommendation[0]));
}

// One incident's chain; `failed`: its failing calls, with the failing
// launches counted without a row when they belong to it.
CausalChain incident_chain(const FailingProcess& pr, const Incident& inc, int64_t failed) {
  const Failure& first = inc.calls.front();
  const bool shutdown = first.info.kind == ErrorKind::Shutdown;
  CausalChain c;
  c.severity = shutdown ? Severity::Low : Severity::Critical;
  c.impact_ns = failed;
  c.symptom.pid = pr.pid;
  c.symptom.comm = pr.ctx.comm(pr.pid);
  c.symptom.tid = first.tid;
  c.symptom.op = pr.ctx.op_name(first.op_id);
  c.symptom.calls = failed;
  c.symptom.first_ts_ns = first.ts;
  c.symptom.last_ts_ns = inc.calls.back().ts;
  c.symptom.summary = std::to_string(failed) + " failed with " + first.info.name +
                      (inc.by_error.size() > 1 ? " and after it" : "");
  tell_failures(pr, inc, failed, c);
  tell_calls_before(pr, first, c);
  std::optional<int64_t> launch_stack;
  if (first.info.kind == ErrorKind::Launch) tell_failing_kernel(pr, first, c);
  if (first.info.kind == ErrorKind::Sticky) launch_stack = tell_sticky_culprit(pr, first, c);
  place(pr, first, launch_stack, c);
  return c;
}

}  // namespace

std::vector<CausalChain> rule_call_failures(const RuleContext& ctx) {
  std::vector<CausalChain> out;
  for (const auto& [pid, failures] : failures_by_pid(ctx)) {
    const FailingProcess pr = count_calls(ctx, pid);
    std::vector<Incident> incidents = group_incidents(failures);
    // Failing launches that --launch-sampling counted without a row: they
    // belong with the kept failing launches (the same error, or the sticky
    // incident they fell into).
    int64_t kept = 0;
    Incident* launches_in = incidents.empty() ? nullptr : &incidents.front();
    for (auto& inc : incidents) {
      kept += inc.sampled_launches;
      if (inc.sampled_launches > launches_in->sampled_launches) launches_in = &inc;
    }
    const int64_t unrecorded = std::max<int64_t>(0, pr.failed_launches - kept);
    for (auto& inc : incidents) {
      if (inc.calls.empty()) continue;
      out.push_back(incident_chain(pr, inc, inc.failed() + (&inc == launches_in ? unrecorded : 0)));
    }
  }
  return out;
}

}  // namespace causeway::analyze
