// SPDX-License-Identifier: Apache-2.0
#include <cerrno>
#include <cstdlib>
#include <iostream>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/common/time.h"
#include "causeway/present/commands.h"
#include "causeway/present/query_command.h"
#include "causeway/present/table_format.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

std::string filter_sql(const QueryOptions& o, std::vector<store::SqlParam>& params) {
  // NCCL calls live in their own view; every other op is a CUDA/HIP call.
  bool nccl = false;
  if (!o.op.empty()) {
    const OpSpec* spec = find_op(o.op);
    if (!spec) throw UsageError("unknown op '" + o.op + "' (the trace's ops table lists them)");
    nccl = spec->layer == Layer::Nccl;
  }
  if (!o.op.empty()) params.emplace_back(o.op);
  if (o.top && *o.top <= 0) throw UsageError("--top must be positive");
  return store::call_listing_sql(nccl, o.window, !o.op.empty(), o.top);
}

void run_query(const QueryOptions& o, std::ostream& out, std::ostream& err) {
  auto db = store::open_trace_read_only(o.db);
  store::SqlGuard guard(*db);
  std::vector<store::SqlParam> params;
  const std::string sql = o.sql.empty() ? filter_sql(o, params) : o.sql;
  store::QueryResult r = guard.run(sql, o.limits, params);
  switch (o.format) {
    case OutputFormat::Table: out << format_table(r); break;
    case OutputFormat::Json: out << format_json(r); break;
    case OutputFormat::Csv: out << format_csv(r); break;
  }
  out.flush();
  if (r.truncated)
    err << "causeway: output stopped at " << o.limits.max_rows
        << " rows (--max-rows to change)\n";
}

}  // namespace causeway::present

namespace causeway::present {

void add_query_command(CLI::App& app) {
  struct Flags {
    present::QueryOptions opts;
    present::WindowFlags window;
    TraceFileArg trace;
    bool json = false, csv = false;
    std::string timeout = "10s";
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand(
      "query",
      "Read-only SQL over a trace file, or (without SQL) list calls filtered by time, op and pid");
  add_trace_file_arg(cmd, flags->trace, true, "sql",
                     "One SQL statement (SELECT, WITH, VALUES, read-only PRAGMA); "
                     "views: cuda_calls, nccl_calls, offcpu, op_stats");
  auto* json = cmd->add_flag("--json", flags->json, "Output a JSON array of objects");
  cmd->add_flag("--csv", flags->csv, "Output CSV (RFC 4180)")->excludes(json);
  // CLI11's PositiveNumber names its range up to DBL_MAX in 300 digits.
  cmd->add_option("--max-rows", flags->opts.limits.max_rows, "Stop after N rows")
      ->default_val(10000)
      ->check(CLI::Validator(
          [](std::string& text) {
            char* end = nullptr;
            errno = 0;
            const long long n = std::strtoll(text.c_str(), &end, 10);
            return text.empty() || *end || errno || n < 1 || n > 1'000'000'000
                       ? "expected a number of rows from 1 to 1000000000 (got '" + text + "')"
                       : std::string();
          },
          "N"));
  cmd->add_option("--timeout", flags->timeout, "Stop the query after this long")
      ->default_val("10s");
  flags->window.add_to(cmd);
  cmd->add_option("--op", flags->opts.op, "Filter form: only this API (e.g. cudaMalloc)");
  cmd->add_option("--top", flags->opts.top, "Filter form: the N slowest calls, slowest first");
  cmd->callback([flags] {
    auto& o = flags->opts;
    o.db = flags->trace.resolve("query", &o.sql);
    o.format = flags->json  ? present::OutputFormat::Json
               : flags->csv ? present::OutputFormat::Csv
                            : present::OutputFormat::Table;
    o.limits.timeout_ns = parse_duration_ns(flags->timeout);
    o.window = flags->window.resolve(wall_now_ns());
    const bool filtering = o.window.from_ns || o.window.to_ns || o.window.pid || !o.op.empty() ||
                           o.top;
    if (!o.sql.empty() && filtering)
      throw UsageError("--since/--from/--to/--pid/--op/--top filter calls without SQL; "
                       "with SQL, put the condition in a WHERE clause");
    present::run_query(o, std::cout, std::cerr);
  });
}

}  // namespace causeway::present
