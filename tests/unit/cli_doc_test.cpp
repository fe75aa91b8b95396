// SPDX-License-Identifier: Apache-2.0
// docs/cli.md against the CLI itself: every flag each command's --help shows
// is named in that command's section, and every scenario `causeway demo`
// lists is named in the demo section, so the two cannot drift apart.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "causeway/demo/scenarios.h"
#include "causeway/present/commands.h"

using namespace causeway;

namespace {

std::string cli_doc() {
  std::ifstream f(std::string(CAUSEWAY_SOURCE_DIR) + "/docs/cli.md");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The text from "## NAME" to the next "## " heading.
std::string section(const std::string& doc, const std::string& name) {
  const std::string head = "\n## " + name + "\n";
  const size_t at = doc.find(head);
  if (at == std::string::npos) return {};
  const size_t end = doc.find("\n## ", at + head.size());
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

// The app main() builds, its commands as registered there.
void add_commands(CLI::App& app, int& exit_status) {
  present::add_trace_command(app, exit_status);
  present::add_explain_command(app);
  present::add_query_command(app);
  present::add_demo_command(app);
  present::add_check_command(app);
  present::add_export_command(app);
  present::add_report_command(app);
  present::add_mcp_command(app);
  present::add_merge_command(app);
  present::add_version_command(app);
}

}  // namespace

TEST(CliDoc, EveryFlagOfEveryCommandIsInItsSection) {
  const std::string doc = cli_doc();
  ASSERT_FALSE(doc.empty());
  CLI::App app;
  int exit_status = 0;
  add_commands(app, exit_status);
  // Named once for every reader, in "Reading a trace: common rules".
  const std::string common = section(doc, "Reading a trace: common rules");
  ASSERT_NE(common.find("`--db FILE`"), std::string::npos);
  int checked = 0;
  for (const CLI::App* cmd : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string text = section(doc, cmd->get_name());
    EXPECT_FALSE(text.empty()) << "docs/cli.md has no section ## " << cmd->get_name();
    for (const CLI::Option* opt : cmd->get_options()) {
      for (const std::string& name : opt->get_lnames()) {
        if (name == "help") continue;
        const std::string flag = "--" + name;
        const bool named = text.find("`" + flag) != std::string::npos || text.find("[" + flag) != std::string::npos ||
                           text.find(" " + flag + " ") != std::string::npos ||
                           (flag == "--db" && cmd->get_name() != "trace" && cmd->get_name() != "demo");
        EXPECT_TRUE(named) << "docs/cli.md, ## " << cmd->get_name() << ": " << flag << " is not named";
        checked++;
      }
    }
  }
  // The commands' flags were read (not an app without commands).
  EXPECT_GT(checked, 60);
}

TEST(CliDoc, EveryDemoScenarioIsInTheDemoSection) {
  const std::string text = section(cli_doc(), "demo");
  ASSERT_FALSE(text.empty());
  ASSERT_GE(demo::scenarios().size(), 20u);
  for (const auto& s : demo::scenarios())
    EXPECT_NE(text.find("`" + std::string(s.name) + "`"), std::string::npos)
        << "docs/cli.md, ## demo: scenario " << s.name << " is not listed";
}
