// SPDX-License-Identifier: Apache-2.0
#pragma once
// When the once-per-launch probes are attached (trace --launch-duty). A trap
// pair costs ~2 us of the launching thread's CPU (docs/performance.md), so
// at 60k launches a second probing every launch costs ~12%; everything else
// causeway traces costs a few calls a step. The launch probes are therefore
// attached in windows: fully for the first kLearnNs of the trace and of each
// newly traced process (so short runs and new jobs are seen whole), then for
// a share of the time that keeps their cost near the budget at the launch
// rate the last window measured. A pure state machine: the agent applies it.
#include <cstdint>
#include <optional>
#include <utility>

namespace causeway::agent {

class LaunchDuty {
 public:
  static constexpr int64_t kLearnNs = 10'000'000'000;
  static constexpr int64_t kPeriodNs = 10'000'000'000;  // one on+off cycle at most duties
  static constexpr int64_t kMinOnNs = 500'000'000;      // a window holds whole steps
  static constexpr double kMinDuty = 0.01;

  // duty: a fixed share in (0, 1), or < 0 for adaptive (budget: the share of
  // a launching thread's time the trap pairs may cost; trap_ns: one pair).
  LaunchDuty(double duty, double budget, int64_t trap_ns) : fixed_(duty), budget_(budget), trap_ns_(trap_ns) {}

  void start(int64_t now, uint64_t launches);
  // A window to close or open is due: call transition() with the kernel's
  // cumulative count of duty-probed calls.
  bool due(int64_t now) const { return now >= phase_end_; }
  // Returns the window that closed, if the probes go off now.
  std::optional<std::pair<int64_t, int64_t>> transition(int64_t now, uint64_t launches);
  // A new process: probe it fully for kLearnNs (adaptive only). Returns true
  // if the probes must go on now.
  bool new_process(int64_t now, uint64_t launches);
  // The open window, if any, closed at `now` (the trace ends).
  std::optional<std::pair<int64_t, int64_t>> finish(int64_t now);

  bool on() const { return on_; }
  double last_duty() const { return duty_; }
  // Share of [start, now] the probes were attached.
  double probed_share(int64_t now) const;

 private:
  double fixed_, budget_;
  int64_t trap_ns_;
  bool on_ = true;
  int64_t start_ = 0, window_start_ = 0, phase_end_ = 0, on_len_ = kMinOnNs, probed_ns_ = 0;
  uint64_t window_launches_ = 0;
  double duty_ = 1;
};

}  // namespace causeway::agent
