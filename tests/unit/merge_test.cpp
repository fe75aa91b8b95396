// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "causeway/common/error.h"
#include "causeway/store/merge.h"
#include "causeway/store/migrations.h"
#include "causeway/store/read_only_trace.h"
#include "synthetic_nodes.h"

using namespace causeway;
using namespace synthetic;

namespace {

struct Files {
  std::string dir = std::filesystem::path(temp_path("x")).parent_path().string();
  std::string a = temp_path("node_a.db"), b = temp_path("node_b.db"), out = temp_path("merged.db");
  Plan plan;
  Files() {
    plan.collectives = 3;
    Node na{"host-a", "boot-a", 0, {{0, 100}}};
    Node nb{"host-b", "boot-b", 0, {{1, 200}}};
    // Same dictionary ids, different names, on the two nodes: merge must remap.
    write_node(a, na, plan, [](model::Batch& batch) {
      model::CudaCall k;
      k.ts_ns = 1;
      k.pid = k.tid = 100;
      k.op_id = 1;
      k.kernel = "gemm_a";
      k.stack_id = 1;
      batch.of<model::CudaCall>().push_back(k);
      model::add_stack(batch, 1, {{"python", "step", "train.py", 10, ""}});
      batch.of<model::OffCpuInterval>().push_back({5, 10, 100, 100, 0, 0, 7, "kworker", 0});
    });
    write_node(b, nb, plan, [](model::Batch& batch) {
      model::CudaCall k;
      k.ts_ns = 2;
      k.pid = k.tid = 200;
      k.op_id = 1;
      k.kernel = "gemm_b";
      k.stack_id = 1;
      batch.of<model::CudaCall>().push_back(k);
      model::add_stack(batch, 1, {{"python", "forward", "model.py", 42, ""}});
      batch.of<model::OffCpuInterval>().push_back({6, 10, 200, 200, 0, 0, 8, "rsync", 0});
    });
  }
  ~Files() { std::filesystem::remove_all(dir); }
  int64_t q(const std::string& sql) {
    store::Connection db(out, store::Connection::Mode::ReadOnly);
    return db.query_int(sql).value_or(-1);
  }
};

}  // namespace

TEST(Merge, TwoNodesBecomeOneFileWithRemappedDictionaries) {
  Files f;
  auto r = store::merge_traces(f.out, {f.a, f.b});
  EXPECT_EQ(r.sessions_added, 2);
  EXPECT_EQ(r.sessions_skipped, 0);
  EXPECT_EQ(f.q("SELECT count(*) FROM sessions"), 2);
  EXPECT_EQ(f.q("SELECT count(*) FROM nccl_calls"), 2 * (1 + 3));
  EXPECT_EQ(f.q("SELECT count(*) FROM nccl_calls n JOIN sessions s ON s.id = n.session_id "
                "WHERE s.host = 'host-b' AND n.rank = 1 AND n.pid = 200"),
            4);
  EXPECT_EQ(f.q("SELECT count(*) FROM processes"), 2);
  // Kernel, comm and stack ids were all 1 in both inputs.
  EXPECT_EQ(f.q("SELECT count(*) FROM cuda_calls c JOIN sessions s ON s.id = c.session_id WHERE "
                "(s.host = 'host-a' AND c.kernel = 'gemm_a') OR (s.host = 'host-b' AND c.kernel = 'gemm_b')"),
            2);
  EXPECT_EQ(f.q("SELECT count(*) FROM offcpu o JOIN sessions s ON s.id = o.session_id WHERE "
                "(s.host = 'host-a' AND o.by_comm = 'kworker') OR (s.host = 'host-b' AND o.by_comm = 'rsync')"),
            2);
  EXPECT_EQ(f.q("SELECT count(*) FROM cuda_call_events c JOIN stack_frames f ON f.stack_id = c.stack_id "
                "WHERE (c.pid = 100 AND f.func = 'step' AND f.line = 10) OR "
                "(c.pid = 200 AND f.func = 'forward' AND f.line = 42)"),
            2);
  EXPECT_EQ(r.rows_copied, f.q("SELECT (SELECT count(*) FROM nccl_call_events) + "
                               "(SELECT count(*) FROM cuda_call_events) + (SELECT count(*) FROM offcpu_events) + "
                               "(SELECT count(*) FROM processes)"));
}

TEST(Merge, MergingTheSameInputAgainAddsNothing) {
  Files f;
  store::merge_traces(f.out, {f.a, f.b});
  const int64_t rows = f.q("SELECT count(*) FROM nccl_call_events");
  const int64_t frames = f.q("SELECT count(*) FROM stack_frames");
  auto again = store::merge_traces(f.out, {f.b, f.a, f.a});
  EXPECT_EQ(again.sessions_added, 0);
  EXPECT_EQ(again.sessions_skipped, 3);
  EXPECT_EQ(again.rows_copied, 0);
  EXPECT_EQ(f.q("SELECT count(*) FROM sessions"), 2);
  EXPECT_EQ(f.q("SELECT count(*) FROM nccl_call_events"), rows);
  EXPECT_EQ(f.q("SELECT count(*) FROM stack_frames"), frames);
  // A merged file merges like any other: into a new file, same content.
  const std::string second = temp_path("second.db");
  auto r = store::merge_traces(second, {f.out});
  EXPECT_EQ(r.sessions_added, 2);
  store::Connection db(second, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(db.query_int("SELECT count(*) FROM nccl_call_events"), rows);
}

TEST(Merge, RefusesAnInputWithANewerSchemaAndWritesNothing) {
  Files f;
  const std::string newer = temp_path("newer.db");
  {
    store::Connection db(newer, store::Connection::Mode::ReadWriteCreate);
    db.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_ts_ns INTEGER NOT NULL); INSERT INTO schema_version VALUES (99, 'future', 0)");
  }
  try {
    store::merge_traces(f.out, {f.a, newer});
    FAIL() << "merge accepted a newer schema";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), 2);
  }
  EXPECT_FALSE(std::filesystem::exists(f.out));
}

TEST(Merge, CliExitsTwoWithOneLineOnANewerSchema) {
  Files f;
  const std::string newer = temp_path("newer_cli.db");
  const int future = store::latest_schema_version() + 1;
  {
    store::Connection db(newer, store::Connection::Mode::ReadWriteCreate);
    db.exec("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_ts_ns INTEGER NOT NULL); INSERT INTO schema_version VALUES (" +
            std::to_string(future) + ", 'future', 0)");
  }
  const std::string cmd = std::string(CAUSEWAY_BINARY_DIR) + "/causeway merge " + f.out + " " + f.a +
                          " " + newer + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  EXPECT_EQ(WEXITSTATUS(st), 2) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_NE(out.find("schema version " + std::to_string(future)), std::string::npos) << out;

  // And the happy path prints what it did.
  p = popen((std::string(CAUSEWAY_BINARY_DIR) + "/causeway merge " + f.out + " " + f.a + " " + f.b +
             " 2>&1").c_str(), "r");
  out.clear();
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(WEXITSTATUS(pclose(p)), 0) << out;
  EXPECT_NE(out.find("merged 2 sessions"), std::string::npos) << out;
}
