// SPDX-License-Identifier: Apache-2.0
// The stages of docs/architecture.md depend only on the ones before them.
// The build enforces it for every source file it compiles (each stage's
// include path holds only earlier stages: cmake/Stages.cmake); this test
// also reads every header, including ones no source of their stage includes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST(StageBoundaries, NoFileIncludesALaterStage) {
  const std::vector<std::string> order = {"discover", "attach", "consume", "store",  "agent",
                                          "analyze",  "demo",   "export",  "present"};
  const std::string root = CAUSEWAY_SOURCE_DIR;
  const std::regex inc(R"re(#include\s+"causeway/([a-z_]+)/)re");
  int files = 0;
  std::string violations;
  for (size_t s = 0; s < order.size(); s++) {
    for (const std::string& dir : {root + "/src/" + order[s], root + "/include/causeway/" + order[s]}) {
      if (!fs::exists(dir)) continue;
      for (const auto& e : fs::recursive_directory_iterator(dir)) {
        if (!e.is_regular_file()) continue;
        files++;
        std::ifstream in(e.path());
        std::string line;
        for (int n = 1; std::getline(in, line); n++) {
          std::smatch m;
          if (!std::regex_search(line, m, inc)) continue;
          auto at = std::find(order.begin(), order.end(), m[1].str());
          if (at != order.end() && size_t(at - order.begin()) > s)
            violations += e.path().string() + ":" + std::to_string(n) + ": " + order[s] +
                          " includes the later stage " + m[1].str() + "\n";
        }
      }
    }
  }
  EXPECT_GT(files, 100);
  EXPECT_TRUE(violations.empty()) << violations;
}
