// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_trace_command(CLI::App& app) { add_pending_command(app, "trace", "Trace CUDA calls and their host context into a SQLite file (root)"); }
}  // namespace causeway::cli
