// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "causeway/common/error.h"
#include "causeway/common/time.h"

using namespace causeway;

TEST(Duration, ParsesUnitsAndCompounds) {
  EXPECT_EQ(parse_duration_ns("30s"), 30 * kNsPerSec);
  EXPECT_EQ(parse_duration_ns("5m"), 300 * kNsPerSec);
  EXPECT_EQ(parse_duration_ns("1h30m"), 5400 * kNsPerSec);
  EXPECT_EQ(parse_duration_ns("250ms"), 250 * kNsPerMs);
  EXPECT_EQ(parse_duration_ns("100us"), 100 * kNsPerUs);
  EXPECT_EQ(parse_duration_ns("1.5s"), 1500 * kNsPerMs);
  EXPECT_EQ(parse_duration_ns("2d"), 2 * 86400 * kNsPerSec);
}

TEST(Duration, RejectsBadInput) {
  for (const char* bad : {"", "5x", "-5m", "m", "0s", "99999999999999d", "1.2.3s", "5 m"})
    EXPECT_THROW(parse_duration_ns(bad), UsageError) << bad;
}

TEST(Time, ParsesAbsoluteAndRelative) {
  const int64_t now = 1'800'000'000LL * kNsPerSec;
  EXPECT_EQ(parse_time_ns("5m", now), now - 300 * kNsPerSec);
  EXPECT_EQ(parse_time_ns("@1700000000", now), 1'700'000'000LL * kNsPerSec);
  EXPECT_EQ(parse_time_ns("2023-11-14T22:13:20Z", now), 1'700'000'000LL * kNsPerSec);
  EXPECT_EQ(parse_time_ns("2023-11-14T23:13:20+01:00", now), 1'700'000'000LL * kNsPerSec);
  EXPECT_THROW(parse_time_ns("2023-13-01", now), UsageError);
  EXPECT_THROW(parse_time_ns("yesterday", now), UsageError);
}

TEST(Format, DurationsAndBytes) {
  EXPECT_EQ(format_duration(48 * kNsPerMs), "48.0 ms");
  EXPECT_EQ(format_duration(1234), "1.23 us");
  EXPECT_EQ(format_duration(999), "999 ns");
  EXPECT_EQ(format_bytes(48ull << 20), "48.0 MiB");
  EXPECT_EQ(format_bytes(512), "512 B");
}
