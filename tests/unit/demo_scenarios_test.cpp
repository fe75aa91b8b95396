// SPDX-License-Identifier: Apache-2.0
// Every demo scenario is diagnosed as what it planted; clean has no HIGH chain.
#include <gtest/gtest.h>

#include "temp_db.h"
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "causeway/present/explain_format.h"
#include "causeway/analyze/engine.h"
#include "causeway/analyze/account.h"
#include "causeway/present/html_report.h"
#include "causeway/present/read_only_trace.h"
#include "causeway/demo/scenarios.h"

using namespace causeway;


TEST(DemoScenarios, EachIsDiagnosedAsWhatItIs) {
  for (const auto& s : demo::scenarios()) {
    TempDb db;
    demo::generate(s.name, db.path, 1);
    auto j = present::to_json(analyze::explain_file(db.path, {}));
    if (s.expected_root_cause.empty()) {
      for (const auto& c : j["chains"]) EXPECT_NE(c["severity"], "HIGH") << s.name;
      continue;
    }
    ASSERT_FALSE(j["chains"].empty()) << s.name;
    EXPECT_EQ(j["chains"][0]["root_cause"], std::string(s.expected_root_cause)) << s.name;
  }
}

TEST(DemoScenarios, IncidentNamesTheNeighbourAndCountsPreemptions) {
  TempDb db;
  auto planted = demo::generate("incident", db.path, 7);
  auto j = present::to_json(analyze::explain_file(db.path, {}));
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "cpu_contention");
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_EQ(c["symptom"]["op"], "cudaStreamSynchronize");
  EXPECT_EQ(c["symptom"]["pid"], 4242);
  EXPECT_EQ(c["evidence"][0]["preemptions"], planted.numbers["preemptions"]);
  EXPECT_EQ(c["evidence"][1]["ran_instead"][0]["by_comm"], "gzip");
  EXPECT_EQ(c["evidence"][1]["ran_instead"][0]["by_pid"], 9120);
  EXPECT_EQ(c["frame"]["text"], "forward() at train.py:142");
  EXPECT_EQ(j["data"]["drops"], 0);
}

TEST(DemoScenarios, SameSeedSameTrace) {
  TempDb a, b;
  auto pa = demo::generate("cpu-contention", a.path, 3);
  auto pb = demo::generate("cpu-contention", b.path, 3);
  EXPECT_EQ(pa.numbers, pb.numbers);
  auto ja = present::to_json(analyze::explain_file(a.path, {}));
  auto jb = present::to_json(analyze::explain_file(b.path, {}));
  ja.erase("db");
  jb.erase("db");
  EXPECT_EQ(ja, jb);
}

TEST(DemoScenarios, StragglerIsRankTwo) {
  TempDb db;
  auto planted = demo::generate("nccl-straggler", db.path, 1);
  auto j = present::to_json(analyze::explain_file(db.path, {}));
  const auto& ev = j["chains"][0]["evidence"][0];
  EXPECT_EQ(ev["rank"], 2);
  EXPECT_EQ(ev["pid"], 7002);
  EXPECT_EQ(ev["host"], "demo-host");
  EXPECT_EQ(ev["times_last"], planted.numbers["late"]);
  EXPECT_EQ(ev["matched"], 600);
}

// The report draws each dispatcher thread's account as stacked bars over time; the sync-bound demo has
// one dispatcher thread, so one chart of kTimeSlices bars, each with at least one segment.
TEST(DemoScenarios, ReportChartsTheThreadAccount) {
  TempDb db;
  demo::generate("sync-bound", db.path, 1);
  const auto accounts = analyze::explain_file(db.path, {}).accounts;
  ASSERT_EQ(accounts.size(), 1u);
  ASSERT_EQ(accounts[0].over_time.size(), size_t(analyze::ThreadAccount::kTimeSlices));
  int64_t segments = 0;
  for (const auto& t : accounts[0].over_time)
    for (const auto& p : analyze::split_parts()) segments += (t.*p.field > 0);
  auto ro = present::open_trace_read_only(db.path);
  std::ostringstream out;
  auto n = present::write_html_report(*ro, "sync.db", {}, {}, out);
  const std::string h = out.str();
  EXPECT_EQ(n.account_bars, segments);
  EXPECT_GE(n.account_bars, analyze::ThreadAccount::kTimeSlices);
  size_t charts = 0;
  for (size_t at = h.find("<svg class=\"account\""); at != std::string::npos; at = h.find("<svg class=\"account\"", at + 1))
    charts++;
  EXPECT_EQ(charts, 1u);
  EXPECT_NE(h.find("Where each thread's time goes"), std::string::npos);
}
