// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace causeway::cli {
// Registers a command whose implementation has not landed yet: it parses,
// explains itself in --help, and exits 1 saying so.
void add_pending_command(CLI::App& app, const std::string& name, const std::string& help);
}  // namespace causeway::cli
