// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_demo_command(CLI::App& app) { add_pending_command(app, "demo", "Diagnose a synthetic trace: no root, no GPU"); }
}  // namespace causeway::cli
