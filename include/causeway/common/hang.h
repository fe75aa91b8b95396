// SPDX-License-Identifier: Apache-2.0
#pragma once
// When a call still in flight is hung (docs/explain.md, "Hung calls"): the
// trace agent judges it live, explain judges the calls the trace wrote when it
// stopped, by one rule.
#include <cstdint>
#include <optional>

namespace causeway {

// A call is hung once it has waited kHungFactor times its baseline (the p50
// of its op, else of its op's class in the process) and at least kHungMinNs,
// or past `trace --hang-after` (hang_after_ns > 0), whichever comes first.
// With no baseline at all, only --hang-after says so.
constexpr int64_t kHungFactor = 1000;
constexpr int64_t kHungMinNs = 5'000'000'000;
constexpr int64_t kDefaultHangAfterNs = 30'000'000'000;

inline bool judged_hung(int64_t waited_ns, std::optional<int64_t> baseline_p50_ns, int64_t hang_after_ns) {
  if (hang_after_ns > 0 && waited_ns >= hang_after_ns) return true;
  return baseline_p50_ns && *baseline_p50_ns > 0 && waited_ns >= kHungMinNs &&
         waited_ns >= kHungFactor * *baseline_p50_ns;
}

}  // namespace causeway
