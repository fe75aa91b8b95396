// SPDX-License-Identifier: Apache-2.0
#include <filesystem>

#include "causeway/common/error.h"
#include "causeway/present/commands.h"

namespace causeway::present {

namespace {
bool names_a_file(const std::string& arg) {
  std::error_code ec;
  return std::filesystem::is_regular_file(arg, ec) ||
         (arg.find_first_of(" \t\n") == std::string::npos && arg.size() > 3 && arg.ends_with(".db"));
}
}  // namespace

void add_trace_file_arg(CLI::App* cmd, TraceFileArg& arg, bool second_positional, const std::string& second_name,
                        const std::string& second_help) {
  cmd->add_option("--db", arg.flag, "Trace file (or give it as the first argument)");
  cmd->add_option("trace", arg.positional, "Trace file (the same as --db FILE)");
  // With --db, what would be the trace is this argument (query's SQL).
  if (second_positional) cmd->add_option(second_name, arg.rest, second_help);
}

std::string TraceFileArg::resolve(const std::string& command, std::string* after, const std::string& fallback) const {
  if (!flag.empty() && !positional.empty()) {
    // `query --db F SQL`: the SQL landed in the first positional; unless it
    // names a file (`query a.db --db b.db`), which no SQL statement does.
    if (after && rest.empty() && !names_a_file(positional)) {
      *after = positional;
      return flag;
    }
    if (positional != flag)
      throw UsageError(command + ": the trace file is given twice (--db " + flag + " and " + positional +
                       "): give it once");
  }
  if (after) *after = rest;
  if (!flag.empty()) return flag;
  if (!positional.empty()) return positional;
  if (!fallback.empty()) return fallback;
  throw UsageError(command + ": which trace? give the file as --db FILE or as the first argument");
}

}  // namespace causeway::present
