// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_merge_command(CLI::App& app) { add_pending_command(app, "merge", "Merge several nodes' trace files into one"); }
}  // namespace causeway::cli
