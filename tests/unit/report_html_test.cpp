// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "causeway/present/html_report.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;
using causeway::testing::kBase;

namespace {

struct Report : ::testing::Test {
  causeway::testing::TempTrace trace;
  void SetUp() override {
    auto b = causeway::testing::known_batch();
    b.of<model::CudaCall>()[2].kernel = "void gemm<float, 128>(float const*)";  // needs escaping
    trace.write(b);
  }
  std::string html(const std::vector<ReportChain>& chains, ReportCounts* n = nullptr) {
    auto db = store::open_trace_read_only(trace.path.string());
    std::ostringstream out;
    ReportCounts c = write_html_report(*db, "trace.db", {}, chains, out);
    if (n) *n = c;
    return out.str();
  }
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

TEST_F(Report, ShowsChainsWithTheirTimeline) {
  std::vector<ReportChain> chains = {
      {.title = "cudaMemcpy 4x slower: preempted by stress-ng",
       .severity = "HIGH",
       .lines = {"symptom: cudaMemcpy p99 20 us vs 5 us", "fix: pin the trainer's CPUs"},
       .spans = {{"cudaMemcpy", "symptom", kBase + 20000, 20000},
                 {"off-CPU", "offcpu", kBase + 22000, 15000}}},
      {.title = "allocator churn <cudaMalloc>", .severity = "LOW", .lines = {}, .spans = {}},
  };
  ReportCounts n;
  std::string h = html(chains, &n);
  EXPECT_EQ(n.chains, 2);
  EXPECT_EQ(n.timeline_bars, 2);
  EXPECT_EQ(count(h, "<span class=\"chain-title\">"), 2u);
  EXPECT_NE(h.find("<span class=\"chain-title\">cudaMemcpy 4x slower: preempted by stress-ng</span>"),
            std::string::npos);
  EXPECT_NE(h.find("allocator churn &lt;cudaMalloc&gt;"), std::string::npos);
  EXPECT_NE(h.find("<div class=\"chain HIGH\">"), std::string::npos);
  EXPECT_NE(h.find("<li>fix: pin the trainer&#39;s CPUs</li>"), std::string::npos);
  EXPECT_NE(h.find("Timeline of the top chains"), std::string::npos);
}

TEST_F(Report, SectionsHoldExactRows) {
  ReportCounts n;
  std::string h = html({}, &n);
  EXPECT_EQ(n.chains, 0);
  EXPECT_NE(h.find("No causal chain found"), std::string::npos);
  EXPECT_EQ(n.ops, 3);
  EXPECT_EQ(count(h, "<tr class=\"op\">"), 3u);
  EXPECT_EQ(n.copy_kinds, 1);
  EXPECT_NE(h.find("<tr class=\"copy\"><td>HtoD</td><td class=\"n\">1</td><td class=\"n\">4.0 KiB"),
            std::string::npos);
  EXPECT_EQ(n.kernels, 1);
  EXPECT_NE(h.find("<code>void gemm&lt;float, 128&gt;(float const*)</code>"), std::string::npos);
  EXPECT_EQ(h.find("gemm<float"), std::string::npos);
  EXPECT_EQ(n.timeline_bars, 4);  // the slowest calls, with no chains
  EXPECT_NE(h.find("Timeline of the slowest calls"), std::string::npos);
}

TEST_F(Report, IsSelfContained) {
  std::string h = html({{.title = "t", .severity = "LOW", .lines = {}, .spans = {}}});
  EXPECT_EQ(h.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* external : {"http:", "https:", "src=", "href=", "url(", "@import", "<link",
                               "<script", "<iframe", "<img"})
    EXPECT_EQ(h.find(external), std::string::npos) << external;
}

}  // namespace
