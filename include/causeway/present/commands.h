// SPDX-License-Identifier: Apache-2.0
#pragma once
// Each CLI command lives in src/present/cmd_<name>.cpp and registers itself on
// the app here. Commands throw causeway::Error / UsageError; main() turns them
// into a one-line message and the exit code.
#include <CLI/CLI.hpp>

#include <string>

namespace causeway {
// `trace -- COMMAND` exits with the command's own status, so causeway's
// failures there (bad flags included) take the status timeout(1) and env(1)
// use for their own, which a CI wrapper can tell from the command's.
inline constexpr int kExitTracerFailure = 125;
}  // namespace causeway

namespace causeway::present {

// The trace file of a read command, the same on every one: `--db FILE` or
// the first positional argument. `after` receives a second positional when
// --db named the file (query's SQL); without `after`, that is refused.
struct TraceFileArg {
  std::string flag, positional, rest;
  // The file; `fallback` when neither was given ("" = required: refused).
  std::string resolve(const std::string& command, std::string* after = nullptr,
                      const std::string& fallback = "") const;
};
void add_trace_file_arg(CLI::App* cmd, TraceFileArg& arg, bool second_positional = false,
                        const std::string& second_name = "", const std::string& second_help = "");

// `trace -- COMMAND` sets exit_status to the command's (127: it could not
// start, 128 + N: killed by signal N).
void add_trace_command(CLI::App& app, int& exit_status);
// Whether argv is `trace ... -- COMMAND`: causeway's own failures then exit
// kExitTracerFailure.
bool traces_a_command(int argc, const char* const* argv);
void add_explain_command(CLI::App& app);
void add_query_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_version_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_mcp_command(CLI::App& app);
void add_merge_command(CLI::App& app);

}  // namespace causeway::present
