// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/not_implemented.h"

#include "causeway/common/error.h"

namespace causeway::cli {
void add_pending_command(CLI::App& app, const std::string& name, const std::string& help) {
  auto* sub = app.add_subcommand(name, help);
  sub->allow_extras();
  sub->callback([name] { throw Error("'" + name + "' is not implemented yet"); });
}
}  // namespace causeway::cli
