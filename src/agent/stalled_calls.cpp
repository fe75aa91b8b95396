// SPDX-License-Identifier: Apache-2.0
// Calls that do not return (a hang) and threads still asleep when the trace
// stops: the rows explain's hang rules stand on.
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <fstream>

#include "causeway/attach/python_process.h"
#include "causeway/model/stalled_calls.h"
#include "trace_agent.h"

namespace causeway::agent {

// Calls in flight: once a second, a row and a warning for each call judged
// hung (common/hang.h: 1000 times its baseline and 5 s, or --hang-after),
// once; when the trace stops, a row for every call still in flight, hung or
// not (at_stop), so that a hang shorter than the rule's threshold when the
// trace ends is still on record. The gauge of the oldest call in flight per
// process and op (for the metrics) is refreshed with them.
void TraceAgent::find_stalled_calls(model::Batch& b, int64_t now, bool at_stop) {
  if (!at_stop && cfg_.hang_after_ns <= 0) return;
  in_flight_.clear();
  // A call younger than a second is neither hung nor worth a gauge.
  const int64_t youngest = at_stop ? 0 : std::min<int64_t>(kNsPerSec, cfg_.hang_after_ns);
  if (now - start_ < youngest) return;
  const auto& stats = consumer_->stats();
  // A call's baseline: its op's p50 so far, else its op class's.
  auto baseline = [&](uint16_t op_id) -> std::optional<int64_t> {
    if (auto it = stats.ops.find(op_id); it != stats.ops.end() && it->second.count() > 0) return it->second.percentile(50);
    const OpSpec* op = find_op(op_id);
    consume::LatencyHistogram cls;
    for (const auto& [id, h] : stats.ops)
      if (const OpSpec* o = find_op(id); o && op && o->cls == op->cls) cls.merge(h);
    return cls.count() > 0 ? std::optional<int64_t>(cls.percentile(50)) : std::nullopt;
  };
  for (const auto& c : probes_.calls_in_flight(uint64_t(now - youngest))) {
    if (c.depth != 0) continue;  // the outermost traced call of the thread is the one to name
    const uint16_t op_id = uint16_t(c.frame.cookie & CW_COOKIE_OP_MASK);
    const OpSpec* op = find_op(op_id);
    if (!op || op->cls == OpClass::Verbs) continue;  // ibv_get_async_event blocks by design
    const int64_t waited = now - int64_t(c.frame.ts);
    const bool hung = cfg_.hang_after_ns > 0 && judged_hung(waited, baseline(op_id), cfg_.hang_after_ns);
    // The thread's process; a thread that died mid-call left a stale frame.
    uint32_t pid = 0;
    std::ifstream status("/proc/" + std::to_string(c.tid) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("Tgid:", 0) == 0) pid = uint32_t(std::strtoul(line.c_str() + 5, nullptr, 10));
    if (!pid) continue;
    auto& oldest = in_flight_[{pid, op_id}];
    oldest = std::max(oldest, waited);
    if (!hung && !at_stop) continue;
    // Once while tracing; and again when the trace stops, with its age then.
    if (!stalled_seen_.insert({c.tid, c.frame.ts}).second && !at_stop) continue;
    model::StalledCall row;
    row.ts_ns = int64_t(c.frame.ts) + mono_to_wall_;
    row.pid = pid;
    row.tid = c.tid;
    row.op_id = op_id;
    row.waited_ns = waited;
    row.seen_ts_ns = now + mono_to_wall_;
    row.at_stop = at_stop;
    if ((c.frame.cookie & CW_COOKIE_SEQ_MASK) && c.frame.aux) row.seq = int64_t(c.frame.aux - 1);
    if (resolver_ && (c.frame.flags & CW_CALL_HAS_PYSTACK) && c.frame.stack_hash) {
      cw_call_event e{};
      e.hdr.pid = pid;
      e.hdr.tid = c.tid;
      e.flags = c.frame.flags;
      e.stack_hash = c.frame.stack_hash;
      row.stack_id = resolver_->stack_for_call(e, b);
    }
    if (hung && !at_stop)
      spdlog::warn("pid {} thread {}: {} has not returned after {:.0f} s{}", pid, c.tid, op->name, double(waited) / 1e9,
                   op->layer == Layer::Nccl || op->cls == OpClass::Sync
                       ? " (a hung collective or a GPU that stopped: `causeway explain` names the ranks)"
                       : "");
    b.add(std::move(row));
  }
  // Calls in flight since before the trace (calls_before.h), while they
  // stay: judged by the same rule, from the latest they can have begun.
  if (before_.calls().empty()) return;
  before_.recheck();
  for (const auto& c : before_.calls()) {
    const OpSpec* op = find_op(c.op_id);
    if (!op) continue;
    const int64_t waited = now - c.entered_ns;
    auto& oldest = in_flight_[{c.pid, c.op_id}];
    oldest = std::max(oldest, waited);
    const bool hung = cfg_.hang_after_ns > 0 && judged_hung(waited, baseline(c.op_id), cfg_.hang_after_ns);
    if (!hung && !at_stop) continue;
    if (!stalled_seen_.insert({c.tid, uint64_t(c.entered_ns)}).second && !at_stop) continue;
    model::StalledCall row;
    row.ts_ns = c.entered_ns + mono_to_wall_;
    row.pid = c.pid;
    row.tid = c.tid;
    row.op_id = c.op_id;
    row.waited_ns = waited;
    row.seen_ts_ns = now + mono_to_wall_;
    row.stack_id = c.stack_id;
    row.at_stop = at_stop;
    row.entered_before = true;
    if (hung && !at_stop)
      spdlog::warn("pid {} thread {}: {} has not returned after {:.0f} s (in it since before the trace began)", c.pid,
                   c.tid, op->name, double(waited) / 1e9);
    b.add(std::move(row));
  }
}

// When the trace stops: every traced thread off the CPU for a second or
// more, as the off-CPU record its switch back would give, with the Python
// line it went to sleep at (taken at the switch, else read now from its
// memory: the walk at the switch is rate-limited per thread). The stack
// rows go in the returned batch.
model::Batch TraceAgent::record_sleepers() {
  model::Batch b;
  std::map<uint32_t, std::optional<discover::PythonRuntime>> runtimes;
  std::map<uint32_t, std::unique_ptr<consume::python::ProcessMemory>> memory;
  for (auto e : probes_.offcpu_in_progress(uint64_t(monotonic_now_ns()), uint64_t(kNsPerSec))) {
    // No stack at the switch, or one whose record was lost: read it now.
    if (cfg_.stacks && resolver_ && (!e.stack_hash || !resolver_->stack_for(e.hdr.pid, e.stack_hash))) {
      auto [it, fresh] = runtimes.try_emplace(e.hdr.pid);
      if (fresh) it->second = discover::find_python_runtime(e.hdr.pid);
      if (it->second) e.stack_hash = python_stack_now(e.hdr.pid, e.hdr.tid, *it->second, *resolver_, b, memory[e.hdr.pid]);
    }
    consumer_->handle(&e, sizeof e);
  }
  return b;
}

}  // namespace causeway::agent
