// SPDX-License-Identifier: Apache-2.0
#include "causeway/store/overlap.h"

namespace causeway::store {

Overlap overlap(const std::string& table, const std::string& a, const std::string& call,
                const std::string& call_end, bool same_thread, int64_t longest_ns) {
  Overlap o;
  o.join = " JOIN " + table + " " + a + " ON " + a + ".pid = " + call + ".pid AND " + a +
           ".session_id = " + call + ".session_id" +
           (same_thread ? " AND " + a + ".tid = " + call + ".tid" : std::string()) + " AND " + a +
           ".ts_ns >= " + call + ".ts_ns - " + std::to_string(longest_ns) + " AND " + a + ".ts_ns < " +
           call_end + " AND " + a + ".ts_ns + " + a + ".dur_ns > " + call + ".ts_ns";
  o.clipped = "min(" + a + ".ts_ns + " + a + ".dur_ns, " + call_end + ") - max(" + a + ".ts_ns, " + call +
              ".ts_ns)";
  return o;
}

}  // namespace causeway::store
