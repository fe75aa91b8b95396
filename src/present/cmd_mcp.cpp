// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_mcp_command(CLI::App& app) { add_pending_command(app, "mcp", "Serve a trace over the Model Context Protocol (stdio)"); }
}  // namespace causeway::cli
