// SPDX-License-Identifier: Apache-2.0
#pragma once
// Each CLI command lives in src/present/cmd_<name>.cpp and registers itself on
// the app here. Commands throw causeway::Error / UsageError; main() turns them
// into a one-line message and the exit code.
#include <CLI/CLI.hpp>

namespace causeway::present {

void add_trace_command(CLI::App& app);
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
