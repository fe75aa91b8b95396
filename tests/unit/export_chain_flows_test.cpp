// SPDX-License-Identifier: Apache-2.0
// Causal chains from the explain engine on the readers' timelines: flow
// arrows in the Perfetto export, lanes and titles in the HTML report, and the
// MCP causal_chains tool.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "causeway/present/chain_view.h"
#include "causeway/present/html_report.h"
#include "causeway/present/mcp_server.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;
using causeway::testing::kBase;
using nlohmann::json;

namespace {

struct Chains : ::testing::Test {
  causeway::testing::TempTrace trace;
  void SetUp() override { trace.write(causeway::testing::contention_batch()); }
};

TEST_F(Chains, ContentionChainIsPlacedOnItsSlowestCall) {
  auto db = store::open_trace_read_only(trace.path.string());
  auto chains = explain_chains(*db, {}, 0);
  ASSERT_EQ(chains.size(), 1u);
  const auto& c = chains[0];
  EXPECT_EQ(c.title, "cpu contention: cudaStreamSynchronize 100.0x slower in trainer (pid 300)");
  // 10 of 100 steps lose 4 ms each: 4% of the loop's critical path.
  EXPECT_EQ(c.severity, "LOW");
  EXPECT_EQ(c.lines.front(), "10 of 100 calls slow; p50 50.0 us, max 5.00 ms");
  EXPECT_EQ(c.lines.back().rfind("fix: ", 0), 0u);
  ASSERT_TRUE(c.symptom.has_value());
  EXPECT_EQ(c.symptom->ts_ns, kBase + 1'000'000 + 5 * 10'000'000);  // the first slow call
  EXPECT_EQ(c.symptom->dur_ns, 5'000'000);
  EXPECT_EQ(c.symptom->tid, 300);
  ASSERT_EQ(c.evidence.size(), 1u);
  EXPECT_EQ(c.evidence[0].kind, "offcpu");
  EXPECT_EQ(c.evidence[0].label, "off-CPU (runnable, stress-ng)");
  EXPECT_EQ(c.evidence[0].ts_ns, c.symptom->ts_ns + 200'000);
}

TEST_F(Chains, ExportDrawsAFlowFromSymptomIntoTheOffCpuSlice) {
  auto db = store::open_trace_read_only(trace.path.string());
  auto flows = chain_flows(explain_chains(*db, {}, 0));
  ASSERT_EQ(flows.size(), 1u);
  std::ostringstream out;
  ExportCounts n = write_perfetto_json(*db, {}, flows, out);
  EXPECT_EQ(n.flows, 1);
  json doc = json::parse(out.str());
  const double base_us = 0;  // ts counts from the first call (kBase + 1 ms)
  const double call_us = 50'000.0, off_start_us = 50'200.0, off_end_us = 54'200.0;
  int s = 0, f = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") {
      s++;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>() - base_us, call_us);
      EXPECT_EQ(e["tid"], 300);
      EXPECT_EQ(e["cat"], "causal");
    }
    if (e["ph"] == "f") {
      f++;
      // Mid-way through the off-CPU slice, so it binds to that slice.
      const double ts = e["ts"].get<double>();
      EXPECT_GT(ts, off_start_us);
      EXPECT_LT(ts, off_end_us);
      EXPECT_EQ(e["bp"], "e");
      EXPECT_EQ(e["tid"], 300);
    }
  }
  EXPECT_EQ(s, 1);
  EXPECT_EQ(f, 1);
}

TEST_F(Chains, ReportShowsTheChainAndItsLane) {
  auto db = store::open_trace_read_only(trace.path.string());
  std::vector<ReportChain> report;
  for (auto& c : explain_chains(*db, {}, 0)) {
    ReportChain r{c.title, c.severity, c.lines, {}};
    r.spans.push_back({c.symptom->label, "symptom", c.symptom->ts_ns, c.symptom->dur_ns});
    for (const auto& e : c.evidence) r.spans.push_back({e.label, e.kind, e.ts_ns, e.dur_ns});
    report.push_back(r);
  }
  std::ostringstream out;
  ReportCounts n = write_html_report(*db, "t.db", {}, report, out);
  EXPECT_EQ(n.chains, 1);
  EXPECT_EQ(n.timeline_bars, 2);
  EXPECT_NE(out.str().find("<span class=\"chain-title\">cpu contention: cudaStreamSynchronize "
                           "100.0x slower in trainer (pid 300)</span>"),
            std::string::npos);
}

TEST_F(Chains, McpCausalChainsToolReturnsExplainJson) {
  McpServer server(trace.path.string());
  json msg = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
              {"params", {{"name", "causal_chains"}, {"arguments", {{"top", 1}}}}}};
  json reply = json::parse(server.handle_line(msg.dump()));
  ASSERT_FALSE(reply["result"].value("isError", false)) << reply;
  json e = json::parse(reply["result"]["content"][0]["text"].get<std::string>());
  ASSERT_EQ(e["chains"].size(), 1u);
  EXPECT_EQ(e["chains"][0]["root_cause"], "cpu_contention");
  EXPECT_EQ(e["chains"][0]["severity"], "LOW");  // 4% of the loop's critical path
  EXPECT_EQ(e["chains"][0]["symptom"]["op"], "cudaStreamSynchronize");
  EXPECT_EQ(e["chains"][0]["symptom"]["slow_calls"], 10);
}

TEST(ChainsClean, ACleanTraceHasNoFlowsAndSaysSo) {
  causeway::testing::TempTrace t;
  auto b = causeway::testing::contention_batch();
  b.of<model::OffCpuInterval>().clear();
  for (auto& c : b.of<model::CudaCall>()) c.dur_ns = 50'000;
  t.write(b);
  auto db = store::open_trace_read_only(t.path.string());
  auto chains = explain_chains(*db, {}, 0);
  EXPECT_TRUE(chains.empty());
  EXPECT_TRUE(chain_flows(chains).empty());
  std::ostringstream out;
  write_html_report(*db, "t.db", {}, {}, out);
  EXPECT_NE(out.str().find("No causal chain found"), std::string::npos);
}

}  // namespace
