// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway query`: guarded SQL, or a filter over the call views without SQL.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "causeway/store/read_only_trace.h"
#include "causeway/present/trace_window.h"

namespace causeway::present {

enum class OutputFormat { Table, Json, Csv };

struct QueryOptions {
  std::string db;
  std::string sql;  // empty: the filter form
  OutputFormat format = OutputFormat::Table;
  store::QueryLimits limits;
  // Filter form only.
  TraceWindow window;
  std::string op;             // an API name, e.g. cudaMalloc or ncclAllReduce
  std::optional<int64_t> top; // the N slowest calls, slowest first
};

// The SQL the filter form runs and its parameters (exposed for tests/docs).
std::string filter_sql(const QueryOptions& o, std::vector<store::SqlParam>& params);

// Writes the result to `out`, a truncation note to `err`. Throws like store::SqlGuard.
void run_query(const QueryOptions& o, std::ostream& out, std::ostream& err);

}  // namespace causeway::present
