// SPDX-License-Identifier: Apache-2.0
// The record families' declarations (include/causeway/model/) against what
// derives from them or must agree with them: the numbered migrations create
// exactly the declared columns, no table exists undeclared, docs/schema.md
// documents each table as declared, record type numbers are unique, and a
// row of each table written by the store reads back column by column.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "causeway/model/records.h"
#include "causeway/model/schema_doc.h"
#include "causeway/store/trace_writer.h"
#include "temp_db.h"

using namespace causeway;

namespace {

std::string read_doc() {
  std::ifstream f(std::string(CAUSEWAY_SOURCE_DIR) + "/docs/schema.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST(Families, MigrationsCreateExactlyTheDeclaredColumns) {
  TempDb db;
  store::TraceWriter w(db.path);
  auto& c = w.connection();
  std::set<std::string> declared;
  int tables = 0;
  model::for_each_table([&]<typename T>() {
    const auto& t = T::kTable;
    tables++;
    declared.insert(std::string(t.name));
    std::vector<std::tuple<std::string, std::string, bool>> want, got;
    if (t.per_session()) want.emplace_back("session_id", "INTEGER", true);
    for (const auto& col : t.columns)
      want.emplace_back(std::string(col.name), std::string(model::sql_type_name(col.type)), col.not_null);
    auto st = c.prepare("SELECT name, type, \"notnull\" FROM pragma_table_info(?) ORDER BY cid");
    st.bind(1, t.name);
    while (st.step()) got.emplace_back(st.col_text(0), st.col_text(1), st.col_int(2) != 0);
    EXPECT_EQ(got, want) << t.name << ": the migrations and the declaration disagree";
  });
  EXPECT_GE(tables, 14);
  // Only the dictionaries, sessions and the version table are not families.
  auto st = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  const std::set<std::string> fixed = {"sessions", "ops", "kernels", "comms", "schema_version"};
  while (st.step()) {
    const std::string name = st.col_text(0);
    EXPECT_TRUE(declared.count(name) || fixed.count(name)) << name << " has no declaration";
  }
}

TEST(Families, DocsHoldEachTableAsDeclared) {
  const std::string doc = read_doc();
  ASSERT_FALSE(doc.empty());
  std::string missing;
  model::for_each_table([&]<typename T>() {
    const std::string section = model::table_markdown(T::kTable);
    if (doc.find(section) == std::string::npos) missing += section + "\n";
  });
  EXPECT_TRUE(missing.empty()) << "docs/schema.md should hold, verbatim:\n\n" << missing;
}

TEST(Families, RecordTypeNumbersAreUnique) {
  std::set<uint32_t> seen = {CW_EV_CALL, CW_EV_PYSTACK, CW_EV_PYCODE, CW_EV_PROC_EXEC,
                             CW_EV_PROC_EXIT, CW_EV_PROC_FORK, CW_EV_PROC_IDENTITY};
  EXPECT_EQ(seen.size(), 7u);
  model::for_each_table([&]<typename T>() {
    if constexpr (requires { T::kEventType; }) {
      EXPECT_TRUE(seen.insert(T::kEventType).second) << T::kTable.name << ": type " << T::kEventType << " taken";
    }
  });
}

// A row of each table through the writer: every declared column reads back
// as the declaration's getter gave it (dictionary columns as their name).
TEST(Families, EveryColumnRoundTripsThroughTheWriter) {
  TempDb db;
  model::Batch b;
  b.add(model::OffCpuInterval{10, 20, 1, 2, 3, 1, 4, "kworker/0:1", 5, 6});
  b.add(model::IoRequest{11, 21, 1, "259:0", 4096, "read"});
  b.add(model::Reclaim{12, 22, 1, 2, 33});
  b.add(model::TcpRetransmit{13, 1, "10.0.0.1", "10.0.0.2", 1000, 2000, "ESTABLISHED"});
  b.add(model::ServedRequest{16, 1, 2, 3, "http/1.1", "POST", "/v1/completions", 200, 17, 18, 19, 3, 100, 200, 0,
                             "[5,7]"});
  model::CudaCall call;
  call.ts_ns = 14;
  call.op_id = 1;
  call.grid = model::Dim3{1, 2, 3};
  call.kernel = "gemm";
  b.add(call);
  b.add(model::LaunchStat{15, 1, 64, "gemm", 7, 1, 700});
  b.add(model::LaunchBucket{15, 1, 64, "gemm", 9, 7});
  model::add_stack(b, 42, {{"python", "step", "train.py", 10, ""}});
  int64_t checked = 0;
  {
    store::TraceWriter w(db.path);
    w.begin_session({.host = "h", .node_id = "h", .boot_id = "b", .version = "v", .command_line = "c"});
    w.write(b);
    auto& c = w.connection();
    model::for_each_table([&]<typename T>() {
      for (const auto& row : b.of<typename T::Row>()) {
        for (const auto& col : T::kTable.columns) {
          const model::SqlValue v = col.get(row);
          std::string sql = "SELECT " + std::string(col.name) + " FROM " + std::string(T::kTable.name);
          if (!col.dictionary.empty())
            sql = "SELECT d.name FROM " + std::string(T::kTable.name) + " t LEFT JOIN " +
                  std::string(col.dictionary) + " d ON d.id = t." + std::string(col.name);
          auto st = c.prepare(sql + " LIMIT 1");
          ASSERT_TRUE(st.step()) << T::kTable.name;
          if (std::holds_alternative<std::monostate>(v)) {
            EXPECT_TRUE(st.col_null(0)) << col.name;
          } else if (auto* n = std::get_if<int64_t>(&v)) {
            EXPECT_EQ(st.col_int(0), *n) << col.name;
          } else if (auto* s = std::get_if<std::string_view>(&v)) {
            EXPECT_EQ(st.col_text(0), *s) << col.name;
          }
          checked++;
        }
      }
    });
  }
  EXPECT_GE(checked, 60);
}
