// SPDX-License-Identifier: Apache-2.0
// explain on hand-built windows: empty files, no CUDA calls, one call, drops,
// bad paths.
#include <gtest/gtest.h>

#include "temp_db.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "causeway/present/explain_format.h"
#include "causeway/analyze/engine.h"
#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/store/sqlite.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;

namespace {
void write(const std::string& path, const model::Batch& b) {
  store::TraceWriter w(path);
  model::SessionInfo s;
  s.host = s.node_id = "h";
  s.boot_id = s.version = s.command_line = "t";
  w.begin_session(s);
  w.write(b);
  w.end_session(1);
}
}  // namespace

TEST(ExplainEdge, EmptyTraceHasNoChains) {
  TempDb db;
  write(db.path, {});
  auto e = analyze::explain_file(db.path, {});
  EXPECT_TRUE(e.chains.empty());
  EXPECT_EQ(e.data.calls, 0);
}

// A trace whose filters matched nothing says so, naming them, in one line:
// not a window at 1970's first nanosecond with "nothing was slow".
TEST(ExplainEdge, EmptyTraceSaysSoAndNamesHowItWasTaken) {
  TempDb db;
  {
    store::TraceWriter w(db.path);
    model::SessionInfo s;
    s.host = s.node_id = "h";
    s.boot_id = s.version = "t";
    s.command_line = "causeway trace --pid 1 --db " + db.path;
    w.begin_session(s);
    w.write({});
    w.end_session(1);
  }
  const auto e = analyze::explain_file(db.path, {});
  EXPECT_TRUE(e.data.empty);
  EXPECT_EQ(present::format_text(e), "empty trace: no events in " + db.path + " (traced by: causeway trace --pid 1 --db " +
                                         db.path + "; its filters matched nothing)\n");
  EXPECT_EQ(present::to_json(e)["data"]["empty"], true);
}

TEST(ExplainEdge, NoCudaCallsOnlyOffCpu) {
  TempDb db;
  model::Batch b;
  for (int i = 0; i < 10; i++) b.of<model::OffCpuInterval>().push_back({1000 + i * 100, 50, 7, 7, 0, 0, 9, "x", 0});
  write(db.path, b);
  auto e = analyze::explain_file(db.path, {});
  EXPECT_TRUE(e.chains.empty());
  EXPECT_EQ(e.data.offcpu_intervals, 10);
}

TEST(ExplainEdge, OneCallHasNoBaselineAndNoChain) {
  TempDb db;
  model::Batch b;
  model::CudaCall c;
  c.ts_ns = 1000;
  c.dur_ns = 5'000'000'000;
  c.pid = c.tid = 5;
  c.op_id = find_op("cudaStreamSynchronize")->id;
  b.of<model::CudaCall>().push_back(c);
  b.of<model::OffCpuInterval>().push_back({2000, 4'000'000'000, 5, 5, 1, 0, 9, "hog", 0});
  write(db.path, b);
  auto e = analyze::explain_file(db.path, {});
  EXPECT_TRUE(e.chains.empty());
  EXPECT_EQ(e.data.calls, 1);
}

TEST(ExplainEdge, DropsMakeADataLossChainAndAreCounted) {
  TempDb db;
  model::Batch b;
  b.of<model::Drop>().push_back({100, "libcall", 40});
  b.of<model::Drop>().push_back({200, "host", 2});
  model::CudaCall c;
  c.pid = c.tid = 5;
  c.op_id = 1;
  for (int i = 0; i < 100; i++) {
    c.ts_ns = 1000 + i * 1000;
    c.dur_ns = 10;
    b.of<model::CudaCall>().push_back(c);
  }
  write(db.path, b);
  auto e = analyze::explain_file(db.path, {});
  auto j = present::to_json(e);
  EXPECT_EQ(j["data"]["drops"], 42);
  EXPECT_EQ(j["data"]["drops_by_source"]["libcall"], 40);
  ASSERT_EQ(j["chains"].size(), 1u);
  EXPECT_EQ(j["chains"][0]["root_cause"], "data_loss");
  EXPECT_EQ(j["chains"][0]["severity"], "HIGH");  // 42 of 142 lost
  EXPECT_NE(present::format_text(e).find("DATA LOSS: 42 records"), std::string::npos);
}

TEST(ExplainEdge, BadPathsAreUsageErrorsAndLeaveFilesAlone) {
  EXPECT_THROW(analyze::explain_file("/nonexistent/trace.db", {}), UsageError);
  EXPECT_THROW(analyze::explain_file("/tmp", {}), UsageError);
  TempDb db;
  { std::ofstream(db.path) << "this is not sqlite at all, just text padding the header......"; }
  auto before = std::filesystem::file_size(db.path);
  EXPECT_THROW(analyze::explain_file(db.path, {}), UsageError);
  EXPECT_EQ(std::filesystem::file_size(db.path), before);
}

// explain opens a trace the way every reader does (store's read-only
// opener): a file that is not a trace, or not SQLite, is named as such in
// one line, as query says it (explain said SQLite's "file is not a database"
// inside a schema query).
TEST(ExplainEdge, AFileThatIsNotATraceIsSaidSoAsEveryReaderSaysIt) {
  TempDb text;
  { std::ofstream(text.path) << "this is not sqlite at all, just text padding the header......"; }
  try {
    analyze::explain_file(text.path, {});
    ADD_FAILURE() << "a text file explained";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), text.path + " is not a causeway trace (not a SQLite file)");
  }
  TempDb other;
  {
    store::Connection c(other.path, store::Connection::Mode::ReadWriteCreate);
    c.exec("CREATE TABLE notes(a)");
  }
  try {
    analyze::explain_file(other.path, {});
    ADD_FAILURE() << "a SQLite file that is not a trace explained";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), other.path + " is a SQLite file but not a causeway trace");
  }
}
