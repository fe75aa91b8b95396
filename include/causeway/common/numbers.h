// SPDX-License-Identifier: Apache-2.0
#pragma once
// Numbers as explain's evidence and every text output print them.
#include <cstdint>
#include <string>

namespace causeway {

std::string ms(int64_t ns);     // "12.3 ms" (3 significant digits, "1.2 s" from a second)
std::string pct(double frac);   // "42%", "0.4%"
std::string fixed1(double v);   // "2.4"

}  // namespace causeway
