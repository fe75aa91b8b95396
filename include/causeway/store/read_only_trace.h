// SPDX-License-Identifier: Apache-2.0
#pragma once
// How every reader (explain, query, export, mcp, report, the live explain)
// opens a trace: read-only, after checking that the path is a causeway trace
// this binary understands. The one way in for reading, as TraceWriter is for
// writing.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "causeway/store/sqlite.h"

namespace causeway::store {

// UsageError (one line, exit 2) for a missing path, a directory, a file that is
// not SQLite, a SQLite file that is not a trace, or a newer schema.
std::unique_ptr<Connection> open_trace_read_only(const std::string& path);

// The same checks on a copy of a trace file's bytes, read from memory (the
// trace-file fuzzer: no file written per input). `name` stands for the file
// in messages.
std::unique_ptr<Connection> open_trace_in_memory(const uint8_t* data, size_t size, const std::string& name);

}  // namespace causeway::store
