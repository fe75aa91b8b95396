// SPDX-License-Identifier: Apache-2.0
#pragma once
// The time window and process filter the reading commands share:
// --since D | --from T [--to T], --pid N. Times are wall-clock ns.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace causeway::present {

struct TraceWindow {
  std::optional<int64_t> from_ns, to_ns;
  std::optional<int64_t> pid;
  bool contains(int64_t ts_ns) const {
    return (!from_ns || ts_ns >= *from_ns) && (!to_ns || ts_ns < *to_ns);
  }
  // " AND ts_ns >= 123 AND ts_ns < 456 AND pid = 7" (integers only: no
  // user text reaches the SQL). `ts`/`pid` name the columns.
  std::string sql_and(const std::string& ts = "ts_ns", const std::string& pid_col = "pid") const;
};

struct WindowFlags {
  std::string since, from, to;
  std::optional<int64_t> pid;
  // Registers --since/--from/--to/--pid on `cmd`.
  void add_to(CLI::App* cmd);
  // UsageError on bad or conflicting values.
  TraceWindow resolve(int64_t now_ns) const;
};

}  // namespace causeway::present
