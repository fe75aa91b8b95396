// SPDX-License-Identifier: Apache-2.0
// The launch windows (launch_duty.h) as the agent runs them: the launch
// probes turned on and off, and each window sized for what its launches'
// traps cost here (single-stepped entries weighed on a thread of their own).
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "trace_agent.h"

namespace causeway::agent {

// Calls of the duty-cycled ops so far (the kernel's exact counters).
uint64_t TraceAgent::duty_calls(const OpStats& stats) const {
  uint64_t n = 0;
  for (const auto& [op, s] : stats)
    if (const OpSpec* spec = find_op(op); spec && (spec->cookie_flags & CW_COOKIE_DUTY)) n += s.calls;
  return n;
}

void TraceAgent::toggle_duty_probes(bool on) {
  // Held only while an adaptive window is open: the statistics cost every
  // BPF program on the host two clock reads a run.
  if (on && cfg_.launch_duty < 0 && probes_.set_run_stats(true)) window_prog_ns0_ = probes_.call_programs_run_ns();
  const int64_t t0 = monotonic_now_ns();
  const size_t before = probes_.duty_link_count();
  probes_.set_duty_probes(on);
  if (!on) probes_.set_run_stats(false);
  const int64_t ns = monotonic_now_ns() - t0;
  const int64_t links = int64_t(std::max(before, probes_.duty_link_count()));
  duty_toggles_++;
  duty_links_max_ = std::max(duty_links_max_, links);
  duty_toggle_ns_ += ns;
  duty_toggle_max_ns_ = std::max(duty_toggle_max_ns_, ns);
  spdlog::debug("launch probes {}: {} links in {} us", on ? "attached" : "detached", links, ns / 1000);
}

void TraceAgent::close_launch_window(std::optional<std::pair<int64_t, int64_t>> w) {
  if (!w) return;
  // What its launches cost the launching thread (explain takes it out of
  // their launching time): set from this window's launches just before.
  launch_windows_.push_back({w->first + mono_to_wall_, w->second + mono_to_wall_, duty_.trap_ns()});
}

void TraceAgent::weigh_entries(const std::vector<attach::AttachResult::Entry>& entries) {
  using discover::EntryInsn;
  for (const auto& e : entries)
    if (e.insn != EntryInsn::Push && e.insn != EntryInsn::Branch && e.insn != EntryInsn::Nop) unweighed_.push_back(e);
  take_trap_costs(false);
}

void TraceAgent::start_trap_costs() {
  if (unweighed_.empty() || trap_costs_ || trap_costs_pending_.valid()) return;
  const int64_t assumed = cfg_.launch_trap_ns;
  trap_costs_pending_ = std::async(std::launch::async, [assumed] {
    // Behind the agent's own work and the traced job's on a small box.
    setpriority(PRIO_PROCESS, unsigned(gettid()), 19);
    std::string err;
    auto costs = attach::measure_trap_costs(&err);
    if (!costs)
      spdlog::warn("what a probe costs here was not measured ({}): launch windows assume {} ns a launch", err,
                   assumed);
    return costs;
  });
}

void TraceAgent::take_trap_costs(bool wait) {
  using discover::EntryInsn;
  if (trap_costs_pending_.valid() &&
      (wait || trap_costs_pending_.wait_for(std::chrono::seconds(0)) == std::future_status::ready)) {
    trap_costs_ = trap_costs_pending_.get();
    if (!trap_costs_) unweighed_.clear();  // not measured: nothing to weigh them with, ever
  }
  if (!trap_costs_) return;
  std::vector<attach::AttachResult::Entry> entries;
  entries.swap(unweighed_);
  for (const auto& e : entries) {
    if (!trap_costs_->single_steps(e.insn)) continue;
    const int64_t extra = std::max<int64_t>(0, int64_t(trap_costs_->of(e.insn) - trap_costs_->of(EntryInsn::Push)));
    auto known = std::find_if(single_stepped_.begin(), single_stepped_.end(), [&](const auto& x) { return x.op == e.op; });
    if (known == single_stepped_.end()) single_stepped_.push_back({e.op, e.symbol, extra, 0});
    else known->extra_ns = std::max(known->extra_ns, extra);
    if (e.duty) launch_extra_ns_[e.op] = std::max(launch_extra_ns_[e.op], extra);
  }
}

int64_t TraceAgent::window_trap_ns(const OpStats& stats) {
  uint64_t calls = 0;
  double extra = 0;
  for (const auto& [op, s] : stats) {
    const OpSpec* spec = find_op(op);
    if (!spec || !(spec->cookie_flags & CW_COOKIE_DUTY)) continue;
    uint64_t& seen = duty_calls_seen_[op];
    const uint64_t now_calls = s.calls;
    const uint64_t n = now_calls - std::min(seen, now_calls);
    seen = now_calls;
    calls += n;
    if (auto it = launch_extra_ns_.find(op); it != launch_extra_ns_.end()) extra += double(n) * double(it->second);
  }
  // A window without launches keeps what the last one measured.
  return calls ? cfg_.launch_trap_ns + int64_t(extra / double(calls)) : duty_.trap_ns();
}

void TraceAgent::weigh_open_window(bool wait, const OpStats& stats) {
  take_trap_costs(wait);
  if (launch_extra_ns_.empty() || !duty_.on()) return;
  const int64_t trap = window_trap_ns(stats);
  if (trap != duty_.trap_ns()) spdlog::debug("launch window: {} ns a launch (single-stepped entries)", trap);
  duty_.set_trap_ns(trap);
}

void TraceAgent::start_launch_duty(int64_t at) {
  duty_started_ = true;
  duty_.start(at, duty_calls(), start_);
  toggle_duty_probes(true);
}

void TraceAgent::turn_launch_duty(int64_t now) {
  if (!duty_started_) {
    // The first launch window: now that the processes already running
    // have been looked at, so that it lasts as long as planned.
    start_launch_duty(now);
    return;
  }
  if (!duty_.due(now)) return;
  // A single-stepped launch costs more than the budget's pair: the
  // next window is sized for what this one's launches cost.
  start_trap_costs();
  const auto stats = probes_.op_stats();
  weigh_open_window(false, stats);
  auto closed = duty_.transition(now, duty_calls(stats), window_prog_ns());
  window_cost_max_ = std::max(window_cost_max_, duty_.last_cost());
  if (duty_.on() != probes_.duty_probes_on()) {
    toggle_duty_probes(duty_.on());
    if (!duty_.on()) {
      // The window ended as detaching began (the probes' entries do
      // nothing from then on; the links take a grace period to go):
      // the launches counted in it go out stamped inside it.
      if (closed) closed->second = probes_.duty_off_at();
      consumer_->flush_launch_aggregates(closed ? closed->second + mono_to_wall_ : wall_now_ns());
    }
    spdlog::debug("launch probes {} (duty {:.4f}; the last window cost {:.2f}% of its time, {:.2f}% in traps)",
                  duty_.on() ? "attached" : "detached", duty_.last_duty(), 100 * duty_.last_cost(),
                  100 * duty_.last_trap_cost());
  }
  close_launch_window(closed);
}

double TraceAgent::finish_launch_duty(model::Batch& last) {
  // (Stopped before the first window opened: no launch was probed.)
  const double probed =
      !probe_cfg_.duty_cycled ? 1.0 : duty_started_ ? duty_.probed_share(monotonic_now_ns()) : 0.0;
  if (probe_cfg_.duty_cycled && duty_started_) {
    const int64_t stopped_at = monotonic_now_ns();
    weigh_open_window(true, probes_.op_stats());
    close_launch_window(duty_.finish(stopped_at));
  }
  for (auto& w : launch_windows_) last.add(std::move(w));
  return probed;
}

std::vector<TraceSummary::SingleStepped> TraceAgent::called_single_stepped() {
  take_trap_costs(true);
  std::map<uint16_t, int64_t> calls;
  for (const auto& [op, st] : probes_.op_stats()) calls[op] += int64_t(st.calls);
  std::vector<TraceSummary::SingleStepped> called;
  for (auto e : single_stepped_) {
    e.calls = calls[e.op];
    if (e.calls > 0) called.push_back(e);
  }
  std::stable_sort(called.begin(), called.end(), [](const auto& a, const auto& b) { return a.calls > b.calls; });
  return called;
}

}  // namespace causeway::agent
