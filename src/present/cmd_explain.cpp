// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/commands.h"
#include "causeway/present/not_implemented.h"

namespace causeway::cli {
void add_explain_command(CLI::App& app) { add_pending_command(app, "explain", "Explain slow calls as causal chains (symptom -> evidence -> root cause -> fix)"); }
}  // namespace causeway::cli
