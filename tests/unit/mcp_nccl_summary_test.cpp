// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "causeway/present/mcp_server.h"
#include "causeway/present/perfetto_export.h"
#include "causeway/analyze/trace_stats.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;

namespace {

struct Nccl : ::testing::Test {
  causeway::testing::TempTrace trace;
  std::string op;
  void SetUp() override { op = causeway::testing::add_nccl_rows(trace); }
};

TEST_F(Nccl, LatenessPerRankFindsTheStraggler) {
  auto db = store::open_trace_read_only(trace.path.string());
  auto ranks = analyze::nccl_ranks(*db, {});
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rank, 0);
  EXPECT_EQ(ranks[0].calls, 4);
  EXPECT_EQ(ranks[0].latest_seq, 4);
  EXPECT_EQ(ranks[0].matched, 3);  // seq 4 has only one rank: not matched
  EXPECT_EQ(ranks[0].max_late_ns, 0);
  EXPECT_EQ(ranks[1].rank, 1);
  EXPECT_EQ(ranks[1].nranks, 2);
  EXPECT_EQ(ranks[1].calls, 3);
  EXPECT_EQ(ranks[1].bytes, 3 << 20);
  EXPECT_EQ(ranks[1].latest_seq, 3);
  EXPECT_EQ(ranks[1].matched, 3);
  EXPECT_EQ(ranks[1].mean_late_ns, 2667);  // (500 + 500 + 7000) / 3
  EXPECT_EQ(ranks[1].max_late_ns, 7000);
  EXPECT_EQ(ranks[1].latest_late_ns, 7000);  // seq 3, the latest both reached
}

TEST_F(Nccl, McpToolAndStatsCoverNccl) {
  McpServer server(trace.path.string());
  nlohmann::json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
                        {"params", {{"name", "nccl_summary"}, {"arguments", {{"pid", 201}}}}}};
  auto reply = nlohmann::json::parse(server.handle_line(msg.dump()));
  auto rows = nlohmann::json::parse(reply["result"]["content"][0]["text"].get<std::string>());
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["rank"], 1);
  EXPECT_EQ(rows[0]["comm_hash"], "c0ffee");
  EXPECT_EQ(rows[0]["calls"], 3);
  auto db = store::open_trace_read_only(trace.path.string());
  auto stats = analyze::op_latencies(*db, {});
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].op, op);
  EXPECT_EQ(stats[0].layer, "nccl");
  EXPECT_EQ(stats[0].calls, 7);
}

TEST_F(Nccl, ExportsCollectivesAsSlicesWithTheirArguments) {
  auto db = store::open_trace_read_only(trace.path.string());
  std::ostringstream out;
  ExportCounts n = write_perfetto_json(*db, {}, {}, out);
  EXPECT_EQ(n.nccl, 7);
  auto doc = nlohmann::json::parse(out.str());
  int seen = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "nccl") continue;
    seen++;
    EXPECT_EQ(e["ph"], "X");
    EXPECT_EQ(e["name"], op);
    EXPECT_EQ(e["args"]["comm_hash"], "c0ffee");
    EXPECT_EQ(e["args"]["nranks"], 2);
    EXPECT_EQ(e["args"]["datatype"], "float32");
    EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 3.0);
  }
  EXPECT_EQ(seen, 7);
}

}  // namespace
