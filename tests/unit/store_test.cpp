// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "temp_db.h"
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/store/memory_reads.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;
using namespace causeway::store;
using namespace causeway::model;


TEST(Store, WritesBatchesAndViewsResolveNames) {
  TempDb t;
  {
    TraceWriter w(t.path);
    w.begin_session(SessionInfo{.host = "h1", .boot_id = "b", .version = "v", .command_line = "c"});
    Batch b;
    CudaCall c;
    c.ts_ns = 100;
    c.dur_ns = 5;
    c.pid = 7;
    c.tid = 8;
    c.op_id = find_op("cudaMemcpy")->id;
    c.bytes = 4096;
    c.kind = int(CopyKind::HtoD);
    c.kernel = "k1";
    b.of<model::CudaCall>().push_back(c);
    b.of<model::CudaCall>().push_back(c);
    b.of<model::OffCpuInterval>().push_back(OffCpuInterval{.ts_ns = 101, .dur_ns = 2, .pid = 7, .tid = 8, .by_comm = "kworker/3"});
    b.of<model::Drop>().push_back(Drop{.ts_ns = 1, .source = "libcall", .count = 3});
    w.write(b);
    w.write_op_counts({OpCount{.op_id = c.op_id, .calls = 10, .errors = 1}});
    w.end_session(200);
  }
  Connection db(t.path, Connection::Mode::ReadOnly);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM cuda_calls WHERE op='cudaMemcpy' AND kind='HtoD' "
                         "AND layer='runtime' AND kernel='k1' AND bytes=4096"),
            2);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM kernels"), 1);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM offcpu WHERE by_comm='kworker/3'"), 1);
  EXPECT_EQ(db.query_int("SELECT sum(count) FROM drops"), 3);
  EXPECT_EQ(db.query_int("SELECT calls FROM op_stats WHERE op='cudaMemcpy'"), 10);
  EXPECT_EQ(db.query_int("SELECT end_ts_ns FROM sessions"), 200);
  EXPECT_EQ(db.query_int("SELECT max(version) FROM schema_version"), latest_schema_version());
}

TEST(Store, FileIsPrivateAndHasOneWriter) {
  TempDb t;
  TraceWriter w(t.path);
  struct stat st;
  ASSERT_EQ(stat(t.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
  try {
    TraceWriter second(t.path);
    FAIL() << "a second writer was allowed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("another causeway trace"), std::string::npos);
  }
}

TEST(Store, RefusesNewerSchemaAndForeignFiles) {
  TempDb t;
  { TraceWriter w(t.path); }
  {
    Connection db(t.path, Connection::Mode::ReadWriteCreate);
    db.exec("INSERT INTO schema_version VALUES (999, 'future', 0)");
  }
  EXPECT_THROW(TraceWriter w(t.path), UsageError);
  Connection ro(t.path, Connection::Mode::ReadOnly);
  EXPECT_THROW(check_schema_version(ro), UsageError);

  const std::string junk = std::filesystem::path(t.path).parent_path() / "junk.db";
  std::ofstream(junk) << "this is not a database, just text that is long enough to have a header";
  Connection j(junk, Connection::Mode::ReadOnly);
  EXPECT_THROW(check_schema_version(j), UsageError);
  EXPECT_THROW(TraceWriter w(std::filesystem::path(t.path).parent_path()), UsageError);
}

// The last work call of each exited process, read in one grouped pass (a
// fork storm's 3,000 exited shells once cost a walk of the whole call index
// each). Exact rows: only exited processes that made such a call, each with
// its latest, sessions kept apart; `pid` narrows to one.
TEST(Store, ExitedProcessesLastCallsInOnePass) {
  TempDb t;
  const int64_t launch = find_op("cuLaunchKernel")->id, alloc = find_op("cudaMalloc")->id;
  {
    TraceWriter w(t.path);
    w.begin_session(SessionInfo{.host = "h1", .boot_id = "b", .version = "v", .command_line = "c"});
    Batch b;
    auto call = [&](uint32_t pid, int64_t ts, int64_t op) {
      CudaCall c;
      c.ts_ns = ts, c.dur_ns = 1, c.pid = pid, c.tid = pid, c.op_id = op;
      b.of<model::CudaCall>().push_back(c);
    };
    call(10, 100, launch), call(10, 200, launch), call(10, 300, alloc);  // exited: its last launch at 200
    call(30, 400, launch);                                              // still running: left out
    for (uint32_t pid : {10u, 20u, 30u})
      b.of<model::ProcessInfo>().push_back(ProcessInfo{
          .pid = pid, .comm = "p", .start_ts_ns = 1,
          .end_ts_ns = pid == 30 ? std::nullopt : std::optional<int64_t>(500)});  // 20: exited, no call
    w.write(b);
    w.end_session(600);
  }
  Connection db(t.path, Connection::Mode::ReadOnly);
  auto all = exited_last_calls(db, {launch}, std::nullopt);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].pid, 10u);
  EXPECT_EQ(all[0].ts_ns, 200);
  EXPECT_EQ(all[0].session, 1);
  EXPECT_EQ(exited_last_calls(db, {launch, alloc}, 10u).at(0).ts_ns, 300);
  EXPECT_TRUE(exited_last_calls(db, {launch}, 20u).empty());
  EXPECT_TRUE(exited_last_calls(db, {launch}, 30u).empty());
}
