// SPDX-License-Identifier: Apache-2.0
#pragma once
// When the once-per-launch probes are attached (trace --launch-duty). A trap
// pair costs ~2 us of the launching thread's CPU (docs/performance.md; more
// where the kernel single-steps the launch function's first instruction:
// the agent measures that and sets trap_ns), so
// at 60k launches a second probing every launch costs ~12%; everything else
// causeway traces costs a few calls a step. The launch probes are therefore
// attached in windows that keep their cost near the budget at what the last
// window cost: its launches' traps, and how long the probes' programs ran in
// it where the kernel keeps run-time statistics (records, stacks: in a
// decode loop the allocator's probes cost more than the launches' traps, and
// a window cost 50% of its time where 2 us a launch said 7%). A short first
// window (kFirstOnNs) of the
// trace and of each newly traced process measures the rate, and from then on
// windows of kMinOnNs..kMaxOnNs recur every kPeriodNs or so, so every second
// costs about the same (no learning phase that costs more than the steady
// state: probing everything for the first seconds cost a training step
// +7..26% and flooded the ring on decode). A pure state machine: the agent
// applies it.
#include <cstdint>
#include <optional>
#include <utility>

namespace causeway::agent {

class LaunchDuty {
 public:
  static constexpr int64_t kFirstOnNs = 100'000'000;   // enough launches to measure their rate
  static constexpr int64_t kRecheckNs = 500'000'000;    // probing everything: measure again this often
  static constexpr int64_t kPeriodNs = 2'000'000'000;   // one on+off cycle at most duties
  static constexpr int64_t kMinOnNs = 50'000'000;       // a window holds a few steps
  static constexpr int64_t kMaxOnNs = 500'000'000;
  static constexpr double kMinDuty = 0.01;

  // duty: a fixed share in (0, 1), or < 0 for adaptive (budget: the share of
  // a launching thread's time the trap pairs may cost; trap_ns: one pair).
  LaunchDuty(double duty, double budget, int64_t trap_ns) : fixed_(duty), budget_(budget), trap_ns_(trap_ns) {}

  // The first window opens at `now`; the share probed counts from `since`
  // (the trace's start: the agent opens the first window once it has looked
  // at the processes already running, which can take a while).
  void start(int64_t now, uint64_t launches, int64_t since);
  void start(int64_t now, uint64_t launches) { start(now, launches, now); }
  // A window to close or open is due: call transition() with the kernel's
  // cumulative count of duty-probed calls.
  bool due(int64_t now) const { return now >= phase_end_; }
  // Returns the window that closed, if the probes go off now. prog_ns: how
  // long the probes' programs ran since the open window began (0 where not
  // measured).
  std::optional<std::pair<int64_t, int64_t>> transition(int64_t now, uint64_t launches, int64_t prog_ns = 0);
  // A new process: a first window of kFirstOnNs measures its rate (adaptive
  // only). Returns true if the probes must go on now.
  bool new_process(int64_t now, uint64_t launches);
  // The open window, if any, closed at `now` (the trace ends).
  std::optional<std::pair<int64_t, int64_t>> finish(int64_t now);

  // One launch's trap pair: where the launch functions' first instruction
  // is single-stepped, the agent measures it and says so (agent.cpp).
  int64_t trap_ns() const { return trap_ns_; }
  void set_trap_ns(int64_t ns) { trap_ns_ = ns; }
  bool on() const { return on_; }
  double last_duty() const { return duty_; }
  // What probing cost inside the last window measured (adaptive), as a
  // share of its time: its traps and its programs.
  double last_cost() const { return cost_; }
  // The part of it the launches' traps make (at trap_ns a launch).
  double last_trap_cost() const { return trap_cost_; }
  // Share of [start, now] the probes were attached.
  double probed_share(int64_t now) const;

 private:
  static int64_t window_for(double duty);
  double fixed_, budget_;
  int64_t trap_ns_;
  bool on_ = true;
  int64_t start_ = 0, window_start_ = 0, phase_end_ = 0, on_len_ = kFirstOnNs, probed_ns_ = 0;
  uint64_t window_launches_ = 0;
  double duty_ = 1, cost_ = 0, trap_cost_ = 0;
};

}  // namespace causeway::agent
