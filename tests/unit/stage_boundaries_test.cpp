// SPDX-License-Identifier: Apache-2.0
// The stages of docs/architecture.md depend only on the ones before them.
// The build enforces it for every source file it compiles (each stage's
// include path holds only earlier stages: cmake/Stages.cmake); this test
// also reads every header, including ones no source of their stage includes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Each line of every file under `dirs` that `include` matches: the file, the
// line's number and the match. Returns how many files it read.
int each_include(const std::vector<std::string>& dirs, const std::regex& include,
                 const std::function<void(const fs::path&, int, const std::smatch&)>& f) {
  int files = 0;
  for (const std::string& dir : dirs) {
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      files++;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); n++) {
        std::smatch m;
        if (std::regex_search(line, m, include)) f(e.path(), n, m);
      }
    }
  }
  return files;
}

}  // namespace

TEST(StageBoundaries, NoFileIncludesALaterStage) {
  const std::vector<std::string> order = {"discover", "attach", "consume", "store",  "agent",
                                          "analyze",  "demo",   "export",  "present"};
  const std::string root = CAUSEWAY_SOURCE_DIR;
  const std::regex inc(R"re(#include\s+"causeway/([a-z_]+)/)re");
  int files = 0;
  std::string violations;
  for (size_t s = 0; s < order.size(); s++)
    files += each_include({root + "/src/" + order[s], root + "/include/causeway/" + order[s]}, inc,
                          [&](const fs::path& file, int n, const std::smatch& m) {
                            auto at = std::find(order.begin(), order.end(), m[1].str());
                            if (at != order.end() && size_t(at - order.begin()) > s)
                              violations += file.string() + ":" + std::to_string(n) + ": " + order[s] +
                                            " includes the later stage " + m[1].str() + "\n";
                          });
  EXPECT_GT(files, 100);
  EXPECT_TRUE(violations.empty()) << violations;
}

namespace {

// A line of source whose string literals name a table after FROM or JOIN;
// comment lines aside.
bool names_table_in_sql(const std::string& line) {
  static const std::regex literal(R"re("(?:[^"\\]|\\.)*")re");
  static const std::regex names_table(R"re(\b(FROM|JOIN)\s+[a-z_]+)re");
  const auto first = line.find_first_not_of(' ');
  if (first == std::string::npos || line.compare(first, 2, "//") == 0) return false;
  for (std::sregex_iterator m(line.begin(), line.end(), literal), end; m != end; ++m)
    if (std::regex_search(m->str(), names_table)) return true;
  return false;
}

// Such lines per stage, outside src/store and include/causeway/store.
std::map<std::string, int> sql_lines_outside_store(std::string& where) {
  const std::string root = CAUSEWAY_SOURCE_DIR;
  std::map<std::string, int> lines;
  for (const std::string& base : {root + "/src", root + "/include/causeway"}) {
    for (const auto& e : fs::recursive_directory_iterator(base)) {
      if (!e.is_regular_file()) continue;
      const auto rel = fs::relative(e.path(), base);
      const std::string stage = rel.begin()->string();
      if (stage == "store") continue;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); n++) {
        if (!names_table_in_sql(line)) continue;
        lines[stage]++;
        where += e.path().string() + ":" + std::to_string(n) + "\n";
      }
    }
  }
  return lines;
}

}  // namespace

TEST(ReadSide, TheScanFindsSqlInLiteralsOnly) {
  EXPECT_TRUE(names_table_in_sql(R"x(  auto st = db.prepare("SELECT ts_ns FROM cuda_calls WHERE 1");)x"));
  EXPECT_TRUE(names_table_in_sql(R"x(      "s.op_id JOIN ops o ON o.id = s.op_id" + w)x"));
  EXPECT_FALSE(names_table_in_sql(R"x(  // SELECT ts_ns FROM cuda_calls)x"));
  EXPECT_FALSE(names_table_in_sql(R"x(  auto rows = store::stack_frames(db, id);  // FROM stack_frames)x"));
  EXPECT_FALSE(names_table_in_sql(R"x(  throw UsageError("unknown op (the ops table lists them)");)x"));
}

// store/ owns reading as it owns writing: no other stage names a table in
// SQL. Analyze computes over typed rows and present formats; a read that a
// rule needs is a named function in store/ (issue 50).
TEST(ReadSide, NoStageButStoreNamesATableInSql) {
  std::string where;
  const auto lines = sql_lines_outside_store(where);
  EXPECT_TRUE(lines.empty()) << where;
}

// Present formats what analyze returns (issue 50): of store/ it includes the
// opener alone (opening a trace, its schema version, the user's own SQL run
// read-only); what a trace holds comes through analyze/.
TEST(ReadSide, PresentIncludesNoStoreHeaderButTheOpener) {
  const std::string root = CAUSEWAY_SOURCE_DIR;
  const std::regex inc(R"re(#include\s+"causeway/store/([a-z_]+\.h)")re");
  int opener = 0;
  std::string violations;
  const int files = each_include({root + "/src/present", root + "/include/causeway/present"}, inc,
                                 [&](const fs::path& file, int n, const std::smatch& m) {
                                   if (m[1].str() == "read_only_trace.h")
                                     opener++;
                                   else
                                     violations += file.string() + ":" + std::to_string(n) + ": includes store/" +
                                                   m[1].str() + "\n";
                                 });
  EXPECT_GT(files, 20);
  EXPECT_GT(opener, 5);
  EXPECT_TRUE(violations.empty()) << violations;
}
