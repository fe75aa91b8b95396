// SPDX-License-Identifier: Apache-2.0
#pragma once
// The time window and process a read is limited to (the reading commands'
// --since/--from/--to/--pid, resolved). Times are wall-clock ns.
#include <cstdint>
#include <optional>
#include <string>

namespace causeway::store {

struct Window {
  std::optional<int64_t> from_ns, to_ns;
  std::optional<int64_t> pid;
  bool contains(int64_t ts_ns) const {
    return (!from_ns || ts_ns >= *from_ns) && (!to_ns || ts_ns < *to_ns);
  }
  // " AND ts_ns >= 123 AND ts_ns < 456 AND pid = 7" (integers only: no
  // user text reaches the SQL). `ts`/`pid` name the columns. For store/'s
  // readers; nothing outside store/ writes SQL.
  std::string sql_and(const std::string& ts = "ts_ns", const std::string& pid_col = "pid") const;
  // The same as a whole WHERE clause, the columns of `alias` ("c." or ""):
  // "c.ts_ns >= 123 AND c.ts_ns < 456 AND c.pid = 7"; "1" when unbounded.
  std::string sql_where(const std::string& alias = "") const;
  // The window without its process: other processes' rows in the same time.
  Window any_process() const { return {from_ns, to_ns, std::nullopt}; }
};

}  // namespace causeway::store
