// SPDX-License-Identifier: Apache-2.0
// docs/schema.md is the SQL reference: every column of every table and view
// the schema creates must be documented there.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "causeway/store/trace_writer.h"

using namespace causeway::store;
using namespace causeway::model;

TEST(SchemaDoc, EveryColumnOfEveryTableAndViewIsDocumented) {
  const std::string path = std::filesystem::temp_directory_path() / "causeway-schema-doc.db";
  std::filesystem::remove(path);
  std::ifstream doc_file(std::string(CAUSEWAY_SOURCE_DIR) + "/docs/schema.md");
  std::stringstream ss;
  ss << doc_file.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(doc.empty());
  {
    TraceWriter w(path);
    auto objs = w.connection().prepare(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'");
    int checked = 0;
    while (objs.step()) {
      const std::string obj = objs.col_text(0);
      EXPECT_NE(doc.find(obj), std::string::npos) << "table/view not documented: " << obj;
      auto cols = w.connection().prepare("SELECT name FROM pragma_table_info(?)");
      cols.bind(1, obj);
      while (cols.step()) {
        const std::string col = cols.col_text(0);
        EXPECT_NE(doc.find("`" + col + "`"), std::string::npos) << obj << "." << col;
        checked++;
      }
    }
    EXPECT_GT(checked, 100);
  }
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
}
