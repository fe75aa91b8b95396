// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/chain_view.h"

#include <algorithm>
#include <cstdio>

#include "causeway/common/time.h"

#include "causeway/analyze/engine.h"
#include "causeway/analyze/trace_view.h"

namespace causeway::present {

namespace {

std::string humanize(std::string id) {
  std::replace(id.begin(), id.end(), '_', ' ');
  return id;
}

std::string times(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", x);
  return buf;
}

// The slowest call of the symptom's op in its process within the slow span.
std::optional<ChainEvent> slowest_call(store::Connection& db, const analyze::Symptom& s) {
  if (s.op.empty() || !s.pid) return std::nullopt;
  std::optional<std::pair<int64_t, int64_t>> span;
  if (s.slow_calls > 0) span = {s.first_ts_ns, s.last_ts_ns};
  auto c = analyze::slowest_call_of(db, int64_t(s.pid), s.op, s.kernel, span);
  if (!c) return std::nullopt;
  return ChainEvent{s.op + (s.kernel.empty() ? "" : " " + s.kernel), "symptom", c->ts_ns, c->dur_ns,
                    c->pid, c->tid};
}

// Host events overlapping the call on its thread (I/O: of its process), the
// five longest.
std::vector<ChainEvent> inside(store::Connection& db, const ChainEvent& call) {
  std::vector<ChainEvent> out;
  for (auto& e : analyze::host_events_during(db, call.pid, call.tid, call.ts_ns, call.ts_ns + call.dur_ns, 5))
    out.push_back({std::move(e.label), std::move(e.kind), e.ts_ns, e.dur_ns, call.pid, call.tid});
  return out;
}

}  // namespace

std::vector<ChainView> explain_chains(store::Connection& db, const TraceWindow& w, size_t top) {
  analyze::ExplainOptions opts;
  opts.from_ns = w.from_ns;
  opts.to_ns = w.to_ns;
  if (w.pid) opts.pid = uint32_t(*w.pid);
  opts.top = top;
  analyze::Explanation e = analyze::explain(db, opts);
  std::vector<ChainView> out;
  for (const auto& c : e.chains) {
    const auto& s = c.symptom;
    ChainView v;
    v.severity = std::string(analyze::severity_name(c.severity));
    v.title = humanize(c.root_cause);
    if (!s.op.empty()) {
      v.title += ": " + s.op;
      if (s.slow_calls && s.slower_x > 0) v.title += " " + times(s.slower_x) + " slower";
    }
    if (s.pid)
      v.title += " in " + (s.comm.empty() ? std::string("pid ") + std::to_string(s.pid)
                                          : s.comm + " (pid " + std::to_string(s.pid) + ")");
    if (!s.op.empty())
      v.lines.push_back(
          s.slow_calls ? std::to_string(s.slow_calls) + " of " + std::to_string(s.calls) +
                             " calls slow; p50 " + format_duration(s.p50_ns) + ", max " +
                             format_duration(s.max_ns)
                       : std::to_string(s.calls) + " calls; p50 " + format_duration(s.p50_ns) +
                             ", p99 " + format_duration(s.p99_ns));
    for (const auto& ev : c.evidence) v.lines.push_back(ev.text);
    if (c.frame) v.lines.push_back("at " + c.frame->text());
    if (!c.recommendation.empty()) v.lines.push_back("fix: " + c.recommendation);
    v.symptom = slowest_call(db, s);
    if (v.symptom) v.evidence = inside(db, *v.symptom);
    out.push_back(std::move(v));
  }
  return out;
}


std::vector<TraceFlow> chain_flows(const std::vector<ChainView>& chains) {
  std::vector<TraceFlow> flows;
  for (const auto& c : chains) {
    if (!c.symptom) continue;
    const auto& call = *c.symptom;
    // The arrow ends mid-evidence, clipped to the call: there the deepest
    // enclosing slice is the evidence itself (off-CPU, reclaim), or the call.
    for (const auto& ev : c.evidence) {
      const int64_t mid = std::clamp(ev.ts_ns + ev.dur_ns / 2, call.ts_ns,
                                     call.ts_ns + std::max<int64_t>(call.dur_ns - 1, 0));
      flows.push_back({c.title, call.ts_ns, call.pid, call.tid, mid, ev.pid, ev.tid});
    }
  }
  return flows;
}

}  // namespace causeway::present
