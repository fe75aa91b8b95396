// SPDX-License-Identifier: Apache-2.0
#pragma once
// The causal-chain engine: reads a trace file (SQLite only, never root) and
// explains slow calls. Rules and thresholds: docs/explain.md.
#include <cstdint>
#include <optional>
#include <string>

#include "causeway/analyze/chain.h"

namespace causeway::store {
class Connection;
}

namespace causeway::analyze {

struct ExplainOptions {
  // Unset: the whole file (the first to the last event).
  std::optional<int64_t> from_ns, to_ns;
  std::optional<uint32_t> pid;
  size_t top = 0;  // 0: every chain
};

// `db` must hold a causeway schema (see store::check_schema_version). Only
// TEMP tables are created: the file is never written.
Explanation explain(store::Connection& db, const ExplainOptions& opts);

// GPU memory per process in the window, held by site at `at_ns` (else at the
// window's end): what explain's `memory` holds, at any moment.
std::vector<ProcessMemory> gpu_memory(store::Connection& db, const ExplainOptions& opts,
                                      std::optional<int64_t> at_ns = {});

// Opens `path` read-only, checks the schema version, explains. A missing file,
// a directory, a non-trace or a newer schema: UsageError, file untouched.
Explanation explain_file(const std::string& path, const ExplainOptions& opts);


}  // namespace causeway::analyze
