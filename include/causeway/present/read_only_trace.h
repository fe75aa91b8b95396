// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every reader (query, export, mcp, report) opens a trace: read-only, after
// checking that the path is a causeway trace this binary understands.
#include <memory>
#include <string>

#include "causeway/store/sqlite.h"

namespace causeway::present {

// UsageError (one line, exit 2) for a missing path, a directory, a file that is
// not SQLite, a SQLite file that is not a trace, or a newer schema.
std::unique_ptr<store::Connection> open_trace_read_only(const std::string& path);

}  // namespace causeway::present
