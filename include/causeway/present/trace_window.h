// SPDX-License-Identifier: Apache-2.0
#pragma once
// The time window and process filter the reading commands share:
// --since D | --from T [--to T], --pid N. Times are wall-clock ns.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/store/read_only_trace.h"

namespace causeway::present {

// Resolved, it is the store's read window: store/ writes the SQL.
using TraceWindow = store::Window;

struct WindowFlags {
  std::string since, from, to;
  std::optional<int64_t> pid;
  // Registers --since/--from/--to/--pid on `cmd`.
  void add_to(CLI::App* cmd);
  // UsageError on bad or conflicting values.
  TraceWindow resolve(int64_t now_ns) const;
};

}  // namespace causeway::present
