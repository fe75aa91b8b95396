// SPDX-License-Identifier: Apache-2.0
// trace --launch-duty's windows: when the launch probes go on and off.
#include "causeway/agent/launch_duty.h"

#include <gtest/gtest.h>

using causeway::agent::LaunchDuty;

namespace {
constexpr int64_t kS = 1'000'000'000;
}

// Adaptive: the first 10 s fully; at 64k launches/s a 2 us trap pair costs
// 12.8% of the launching thread, so a 0.5% budget allows 3.9% of the time:
// 0.5 s windows (the shortest) 12.3 s apart.
TEST(LaunchDuty, AdaptsToTheMeasuredLaunchRate) {
  LaunchDuty d(-1, 0.005, 2000);
  d.start(0, 0);
  EXPECT_TRUE(d.on());
  EXPECT_FALSE(d.due(LaunchDuty::kLearnNs - 1));
  ASSERT_TRUE(d.due(LaunchDuty::kLearnNs));
  auto w = d.transition(10 * kS, 640'000);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 0);
  EXPECT_EQ(w->second, 10 * kS);
  EXPECT_FALSE(d.on());
  EXPECT_NEAR(d.last_duty(), 0.005 / 0.128, 1e-9);
  const int64_t off = int64_t(0.5e9 * (1 - d.last_duty()) / d.last_duty());
  EXPECT_FALSE(d.due(10 * kS + off - 1));
  ASSERT_TRUE(d.due(10 * kS + off));
  EXPECT_FALSE(d.transition(10 * kS + off, 640'000));
  EXPECT_TRUE(d.on());
  ASSERT_TRUE(d.due(10 * kS + off + kS / 2));
  w = d.transition(10 * kS + off + kS / 2, 640'000 + 32'000);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->second - w->first, kS / 2);
  EXPECT_NEAR(d.probed_share(10 * kS + off + kS / 2), 10.5e9 / double(10 * kS + off + kS / 2), 1e-9);
}

// A light launch rate costs less than the budget: the probes stay on.
TEST(LaunchDuty, StaysOnWhenLaunchesAreCheap) {
  LaunchDuty d(-1, 0.005, 2000);
  d.start(0, 0);
  EXPECT_FALSE(d.transition(10 * kS, 10 * 2000));  // 2k/s: 0.4%
  EXPECT_TRUE(d.on());
  EXPECT_DOUBLE_EQ(d.last_duty(), 1.0);
  EXPECT_FALSE(d.due(19 * kS));
  auto w = d.finish(25 * kS);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 0);
  EXPECT_DOUBLE_EQ(d.probed_share(25 * kS), 1.0);
}

// A new process while the probes are off turns them on for its first 10 s.
TEST(LaunchDuty, ANewProcessIsProbedWholeAtFirst) {
  LaunchDuty d(-1, 0.005, 2000);
  d.start(0, 0);
  ASSERT_TRUE(d.transition(10 * kS, 1'000'000));
  EXPECT_FALSE(d.on());
  EXPECT_TRUE(d.new_process(11 * kS, 1'000'000));
  EXPECT_TRUE(d.on());
  EXPECT_FALSE(d.due(21 * kS - 1));
  EXPECT_TRUE(d.due(21 * kS));
  EXPECT_FALSE(d.new_process(12 * kS, 1'000'000)) << "already on";
}

// A fixed share: no learning window; 10% of each 10 s period.
TEST(LaunchDuty, AFixedShareStartsAtOnce) {
  LaunchDuty d(0.1, 0.005, 2000);
  d.start(0, 0);
  EXPECT_FALSE(d.due(kS - 1));
  auto w = d.transition(kS, 5);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->second, kS);
  EXPECT_FALSE(d.due(10 * kS - 1));
  EXPECT_TRUE(d.due(10 * kS));
  EXPECT_FALSE(d.new_process(2 * kS, 5)) << "a fixed share is not raised for new processes";
}
