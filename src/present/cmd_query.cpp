// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_query_command(CLI::App& app) { add_pending_command(app, "query", "Read-only SQL over a trace file"); }
}  // namespace causeway::cli
