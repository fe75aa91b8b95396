// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>

namespace causeway::analyze {

// The innermost user-code Python frame of a stack (a chain's calls, a path's
// segment): library frames only when there is no other.
struct UserFrame {
  std::string func, file;
  int64_t line = 0;
  std::string text() const;   // "forward() at train.py:142"
  std::string where() const;  // "train.py:142"
};

}  // namespace causeway::analyze
