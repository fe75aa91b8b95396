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
  // A library's frame (site-/dist-packages, the interpreter's lib, frozen
  // modules, a compiler's generated code): what top_frame falls back to when
  // a stack has no user frame in the frames kept.
  bool library() const;
};

}  // namespace causeway::analyze
