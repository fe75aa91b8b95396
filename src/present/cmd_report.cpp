// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_report_command(CLI::App& app) { add_pending_command(app, "report", "Write a self-contained HTML report of a trace"); }
}  // namespace causeway::cli
