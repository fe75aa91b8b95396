// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_export_command(CLI::App& app) { add_pending_command(app, "export", "Export a trace (Perfetto / Chrome trace JSON)"); }
}  // namespace causeway::cli
