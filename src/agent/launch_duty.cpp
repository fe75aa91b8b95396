// SPDX-License-Identifier: Apache-2.0
#include "causeway/agent/launch_duty.h"

#include <algorithm>

namespace causeway::agent {

void LaunchDuty::start(int64_t now, uint64_t launches, int64_t since) {
  on_ = true;
  start_ = std::min(since, now);
  window_start_ = now;
  window_launches_ = launches;
  // A fixed share is what was asked for from the start; adaptive learns the
  // launch rate first.
  if (fixed_ > 0) {
    duty_ = std::clamp(fixed_, kMinDuty, 1.0);
    on_len_ = window_for(duty_);
  }
  phase_end_ = now + (fixed_ > 0 ? on_len_ : kFirstOnNs);
}

int64_t LaunchDuty::window_for(double duty) {
  return std::clamp(int64_t(duty * double(kPeriodNs)), kMinOnNs, kMaxOnNs);
}

std::optional<std::pair<int64_t, int64_t>> LaunchDuty::transition(int64_t now, uint64_t launches, int64_t prog_ns) {
  if (!on_) {
    on_ = true;
    window_start_ = now;
    window_launches_ = launches;
    phase_end_ = now + on_len_;
    return std::nullopt;
  }
  if (fixed_ > 0) {
    duty_ = std::clamp(fixed_, kMinDuty, 1.0);
  } else {
    // What probing every launch costs a launching thread: this window's
    // traps at its launch rate, and its programs' run time.
    const double ns = double(std::max<int64_t>(1, now - window_start_));
    trap_cost_ = double(launches - window_launches_) * double(trap_ns_) / ns;
    cost_ = trap_cost_ + double(std::max<int64_t>(0, prog_ns)) / ns;
    duty_ = cost_ <= budget_ ? 1.0 : std::max(kMinDuty, budget_ / cost_);
  }
  if (duty_ >= 1.0) {  // cheap enough: stay on, look again later
    phase_end_ = now + kRecheckNs;
    return std::nullopt;
  }
  on_ = false;
  on_len_ = window_for(duty_);
  phase_end_ = now + int64_t(double(on_len_) * (1 - duty_) / duty_);
  probed_ns_ += now - window_start_;
  return std::make_pair(window_start_, now);
}

bool LaunchDuty::new_process(int64_t now, uint64_t launches) {
  if (fixed_ > 0) return false;
  if (on_) {
    // A window already open measures it: at least kFirstOnNs of it.
    phase_end_ = std::max(phase_end_, now + kFirstOnNs);
    return false;
  }
  on_ = true;
  window_start_ = now;
  window_launches_ = launches;
  phase_end_ = now + kFirstOnNs;
  return true;
}

std::optional<std::pair<int64_t, int64_t>> LaunchDuty::finish(int64_t now) {
  if (!on_) return std::nullopt;
  on_ = false;
  probed_ns_ += now - window_start_;
  return std::make_pair(window_start_, now);
}

double LaunchDuty::probed_share(int64_t now) const {
  const int64_t probed = probed_ns_ + (on_ ? now - window_start_ : 0);
  return now > start_ ? double(probed) / double(now - start_) : 1.0;
}

}  // namespace causeway::agent
