// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_check_command(CLI::App& app) { add_pending_command(app, "check", "Report whether this host can trace, and what it would trace"); }
}  // namespace causeway::cli
