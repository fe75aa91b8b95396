// SPDX-License-Identifier: Apache-2.0
#include "causeway/common/numbers.h"

#include <cstdio>

namespace causeway {

std::string ms(int64_t ns) {
  char b[32];
  double v = double(ns) / 1e6;
  if (v >= 1000) std::snprintf(b, sizeof b, "%.1f s", v / 1000);
  else if (v >= 100) std::snprintf(b, sizeof b, "%.0f ms", v);
  else if (v >= 10) std::snprintf(b, sizeof b, "%.1f ms", v);
  else std::snprintf(b, sizeof b, "%.2f ms", v);
  return b;
}

std::string pct(double frac) {
  char b[32];
  std::snprintf(b, sizeof b, frac < 0.1 && frac > 0 ? "%.1f%%" : "%.0f%%", frac * 100);
  return b;
}

std::string fixed1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

}  // namespace causeway
