// SPDX-License-Identifier: Apache-2.0
#include "causeway/common/numbers.h"

#include <cstdio>

namespace causeway {

// Two decimals down to 0.1 ms; below, the unit shrinks ("43.2 us", "400 ns"), never "0.00 ms".
std::string ms(int64_t ns) {
  char b[32];
  double v = double(ns) / 1e6;
  const double us = double(ns) / 1e3;
  if (v >= 1000) std::snprintf(b, sizeof b, "%.1f s", v / 1000);
  else if (v >= 100) std::snprintf(b, sizeof b, "%.0f ms", v);
  else if (v >= 10) std::snprintf(b, sizeof b, "%.1f ms", v);
  else if (ns == 0) std::snprintf(b, sizeof b, "0 ms");
  else if (v >= 0.1) std::snprintf(b, sizeof b, "%.2f ms", v);
  else if (us >= 10) std::snprintf(b, sizeof b, "%.1f us", us);
  else if (us >= 1) std::snprintf(b, sizeof b, "%.2f us", us);
  else std::snprintf(b, sizeof b, "%lld ns", (long long)ns);
  return b;
}

std::string pct(double frac) {
  char b[32];
  // A share too small for one decimal is "<0.1%", never "0.0%".
  if (frac > 0 && frac < 0.0005) return "<0.1%";
  std::snprintf(b, sizeof b, frac < 0.1 && frac > 0 ? "%.1f%%" : "%.0f%%", frac * 100);
  return b;
}

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace causeway
