// SPDX-License-Identifier: Apache-2.0
// The figures explain's prose is made of: a unit that fits, never "0.00 ms"
// for a call of a few hundred nanoseconds ("2007.9x their p50 0.00 ms").
#include <gtest/gtest.h>

#include "causeway/common/numbers.h"

using namespace causeway;

TEST(Numbers, MillisecondsShrinkTheirUnitBelowOne) {
  EXPECT_EQ(ms(2'500'000'000), "2.5 s");
  EXPECT_EQ(ms(123'400'000), "123 ms");
  EXPECT_EQ(ms(12'340'000), "12.3 ms");
  EXPECT_EQ(ms(4'050'000), "4.05 ms");
  EXPECT_EQ(ms(430'000), "0.43 ms");
  EXPECT_EQ(ms(43'210), "43.2 us");
  EXPECT_EQ(ms(1'500), "1.50 us");
  EXPECT_EQ(ms(400), "400 ns");
  EXPECT_EQ(ms(0), "0 ms");
}

TEST(Numbers, ASmallShareIsNeverZeroPointZero) {
  EXPECT_EQ(pct(0.42), "42%");
  EXPECT_EQ(pct(0.004), "0.4%");
  EXPECT_EQ(pct(0.0001), "<0.1%");
  EXPECT_EQ(pct(0), "0%");
}
