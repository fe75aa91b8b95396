// SPDX-License-Identifier: Apache-2.0
#pragma once
// Joining an interval table's rows (ts_ns, dur_ns) to the calls they overlap,
// as SQL for the statements that embed it.
#include <cstdint>
#include <string>

namespace causeway::store {

struct Overlap {
  std::string join;     // " JOIN <table> <alias> ON ..."
  std::string clipped;  // each overlap's length: the interval clipped to its call
};
// Rows of `table` (aliased `alias`) that overlap the calls aliased `call`
// (each ending at the expression `call_end`), in the same process and
// session and, with same_thread, on the same thread. `longest_ns`, the
// longest interval of the table in the window, bounds the ts_ns index scan.
Overlap overlap(const std::string& table, const std::string& alias, const std::string& call,
                const std::string& call_end, bool same_thread, int64_t longest_ns);

}  // namespace causeway::store
