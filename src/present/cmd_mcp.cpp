// SPDX-License-Identifier: Apache-2.0
#include <spdlog/spdlog.h>

#include <iostream>

#include "causeway/present/commands.h"
#include "causeway/present/mcp_server.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

void add_mcp_command(CLI::App& app) {
  auto trace = std::make_shared<TraceFileArg>();
  auto* cmd = app.add_subcommand(
      "mcp", "Serve a trace to AI assistants: a Model Context Protocol server on stdio (read-only)");
  add_trace_file_arg(cmd, *trace);
  cmd->callback([trace] {
    const auto db = std::make_shared<std::string>(trace->resolve("mcp"));
    // Fail before speaking the protocol if the file is not a trace.
    store::open_trace_read_only(*db);
    present::McpServer server(*db);
    spdlog::info("mcp: serving {} on stdio", *db);
    std::ios::sync_with_stdio(false);
    server.serve(std::cin, std::cout);
  });
}

}  // namespace causeway::present
