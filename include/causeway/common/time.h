// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace causeway {

constexpr int64_t kNsPerUs = 1000;
constexpr int64_t kNsPerMs = 1000 * kNsPerUs;
constexpr int64_t kNsPerSec = 1000 * kNsPerMs;

// "30s", "5m", "1h30m", "250ms", "2d", "100us", "42ns". Positive, no overflow;
// anything else throws UsageError naming the bad text.
int64_t parse_duration_ns(std::string_view text);

// A point in time for --from/--to: RFC 3339 / "YYYY-MM-DD HH:MM:SS[.fff]" (UTC
// unless an offset is given), a Unix time in seconds ("@1700000000"), or a
// duration meaning that long before `now_ns` ("5m"). Throws UsageError.
int64_t parse_time_ns(std::string_view text, int64_t now_ns);

int64_t wall_now_ns();
int64_t monotonic_now_ns();

// "1.23 ms", "48 ms", "3.1 s": for people, 3 significant digits.
std::string format_duration(int64_t ns);
// "2026-11-23T00:49:02.123Z"
std::string format_wall_time(int64_t wall_ns);
// "48.0 MiB"
std::string format_bytes(uint64_t bytes);

}  // namespace causeway
