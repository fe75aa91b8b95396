// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "causeway/demo/scenarios.h"
#include "causeway/present/perfetto_export.h"
#include "causeway/store/read_only_trace.h"
#include "query_fixture.h"

using namespace causeway;
using namespace causeway::present;
using causeway::testing::kBase;
using nlohmann::json;

namespace {

struct Export : ::testing::Test {
  causeway::testing::TempTrace trace;
  void SetUp() override { trace.write(causeway::testing::known_batch()); }
  json run(const TraceWindow& w = {}, const std::vector<TraceFlow>& flows = {},
           ExportCounts* counts = nullptr) {
    auto db = store::open_trace_read_only(trace.path.string());
    std::ostringstream out;
    ExportCounts n = write_perfetto_json(*db, w, flows, out);
    if (counts) *counts = n;
    return json::parse(out.str());
  }
};

// The trace-event format's required fields, per phase.
void expect_valid_event(const json& e) {
  ASSERT_TRUE(e.is_object());
  ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e;
  const std::string ph = e["ph"];
  EXPECT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e;
  EXPECT_TRUE(e.contains("tid") && e["tid"].is_number_integer()) << e;
  EXPECT_TRUE(e.contains("name") && e["name"].is_string()) << e;
  if (ph == "M") {
    EXPECT_TRUE(e["name"] == "process_name" || e["name"] == "thread_name") << e;
    EXPECT_TRUE(e["args"]["name"].is_string()) << e;
    return;
  }
  ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e;
  EXPECT_GE(e["ts"].get<double>(), 0.0) << e;
  EXPECT_TRUE(e.contains("cat") && e["cat"].is_string()) << e;
  if (ph == "X") {
    ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e;
    EXPECT_GE(e["dur"].get<double>(), 0.0) << e;
  } else if (ph == "b" || ph == "e" || ph == "s" || ph == "f") {
    EXPECT_TRUE(e.contains("id")) << e;
    if (ph == "f") {
      EXPECT_EQ(e["bp"], "e") << e;
    }
  } else if (ph == "i") {
    EXPECT_TRUE(e["s"] == "p" || e["s"] == "t" || e["s"] == "g") << e;
  } else if (ph == "C") {
    ASSERT_TRUE(e.contains("args") && e["args"].is_object() && !e["args"].empty()) << e;
    for (const auto& [k, v] : e["args"].items()) EXPECT_TRUE(v.is_number()) << e;
  } else {
    ADD_FAILURE() << "unexpected phase " << e;
  }
}

std::map<std::string, int> count_by(const json& doc, const std::string& key) {
  std::map<std::string, int> m;
  for (const auto& e : doc["traceEvents"]) m[e.value(key, std::string("?"))]++;
  return m;
}

TEST_F(Export, EveryEventIsValidTraceEventJson) {
  json doc = run();
  EXPECT_EQ(doc["displayTimeUnit"], "ns");
  EXPECT_EQ(doc["otherData"]["base_wall_ns"], kBase + 1000);
  ASSERT_TRUE(doc["traceEvents"].is_array());
  for (const auto& e : doc["traceEvents"]) expect_valid_event(e);
}

TEST_F(Export, ExactSlicesPerCategoryAndTracks) {
  ExportCounts n;
  json doc = run({}, {}, &n);
  EXPECT_EQ(n.cuda, 4);
  EXPECT_EQ(n.offcpu, 1);
  EXPECT_EQ(n.reclaim, 1);
  EXPECT_EQ(n.io, 1);
  EXPECT_EQ(n.tcp, 1);
  EXPECT_EQ(count_by(doc, "cat"), (std::map<std::string, int>{{"cuda.runtime", 4},
                                                               {"offcpu", 1},
                                                               {"reclaim", 1},
                                                               {"io", 2},  // begin + end
                                                               {"tcp", 1},
                                                               {"?", 5}}));  // metadata
  // Process and thread tracks, named from the processes table.
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M") names[{e["pid"], e["name"] == "process_name" ? -1 : int(e["tid"])}] =
        e["args"]["name"];
  EXPECT_EQ(names, (std::map<std::pair<int, int>, std::string>{
                       {{100, -1}, "train (100)"},
                       {{101, -1}, "loader (101)"},
                       {{100, 100}, "train (main thread)"},
                       {{100, 102}, "thread 102"},
                       {{101, 101}, "loader (main thread)"}}));
}

TEST_F(Export, SlicesCarryExactTimesAndArguments) {
  json doc = run();
  const json* memcpy = nullptr;
  const json* launch = nullptr;
  const json* offcpu = nullptr;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("name", "") == "cudaMemcpy") memcpy = &e;
    if (e.value("name", "") == "cudaLaunchKernel") launch = &e;
    if (e.value("cat", "") == "offcpu") offcpu = &e;
  }
  ASSERT_TRUE(memcpy && launch && offcpu);
  // base is the first event (kBase + 1000): memcpy at +19 µs for 20 µs.
  EXPECT_DOUBLE_EQ((*memcpy)["ts"].get<double>(), 19.0);
  EXPECT_DOUBLE_EQ((*memcpy)["dur"].get<double>(), 20.0);
  EXPECT_EQ((*memcpy)["tid"], 100);
  EXPECT_EQ((*memcpy)["args"], (json{{"ret", 0}, {"bytes", 4096}, {"kind", "HtoD"},
                                     {"stack_id", 7}}));
  EXPECT_EQ((*launch)["args"]["kernel"], "gemm_kernel");
  EXPECT_EQ((*launch)["args"]["grid"], "1x2x3");
  EXPECT_EQ((*launch)["args"]["block"], "128x1x1");
  EXPECT_EQ((*launch)["tid"], 102);
  EXPECT_EQ((*offcpu)["name"], "off-CPU (runnable)");
  EXPECT_EQ((*offcpu)["args"]["by_comm"], "stress-ng");
  EXPECT_EQ((*offcpu)["tid"], 100);
  EXPECT_DOUBLE_EQ((*offcpu)["ts"].get<double>(), 21.0);
}

TEST_F(Export, WindowAndPidFilter) {
  TraceWindow w;
  w.pid = 101;
  ExportCounts n;
  json doc = run(w, {}, &n);
  EXPECT_EQ(n.cuda, 1);
  EXPECT_EQ(n.tcp, 1);
  EXPECT_EQ(n.offcpu + n.io + n.reclaim, 0);
  EXPECT_EQ(n.processes, 1);
  TraceWindow t;
  t.from_ns = kBase + 20000;
  t.to_ns = kBase + 50001;
  run(t, {}, &n);
  EXPECT_EQ(n.cuda, 2);  // the memcpy and the launch
  EXPECT_EQ(n.offcpu, 1);
}

TEST_F(Export, FlowsBindSymptomToEvidence) {
  std::vector<TraceFlow> flows = {{.name = "memcpy slowed by preemption",
                                   .from_ts_ns = kBase + 20000, .from_pid = 100, .from_tid = 100,
                                   .to_ts_ns = kBase + 22000, .to_pid = 100, .to_tid = 100}};
  ExportCounts n;
  json doc = run({}, flows, &n);
  EXPECT_EQ(n.flows, 1);
  int s = 0, f = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "s") {
      s++;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 19.0);
      EXPECT_EQ(e["id"], 1);
    }
    if (e["ph"] == "f") {
      f++;
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 21.0);
      EXPECT_EQ(e["id"], 1);
    }
  }
  EXPECT_EQ(s, 1);
  EXPECT_EQ(f, 1);
}

TEST(ExportEmpty, AnEmptyTraceIsStillValidJson) {
  causeway::testing::TempTrace t;
  t.write({});
  auto db = store::open_trace_read_only(t.path.string());
  std::ostringstream out;
  write_perfetto_json(*db, {}, {}, out);
  json doc = json::parse(out.str());
  EXPECT_EQ(doc["traceEvents"].size(), 0u);
}

}  // namespace

// GPU memory held per process, as a counter track: a sample after every
// allocation and free, the last one what the process still held.
TEST(ExportCounters, GpuMemoryHeldPerProcess) {
  causeway::testing::TempTrace t;
  auto planted = demo::generate("out-of-memory", t.path, 1);
  auto db = store::open_trace_read_only(t.path.string());
  std::ostringstream out;
  ExportCounts n = write_perfetto_json(*db, {}, {}, out);
  json j = json::parse(out.str());
  std::vector<json> counters;
  for (const auto& e : j["traceEvents"]) {
    expect_valid_event(e);
    if (e["ph"] == "C") counters.push_back(e);
  }
  EXPECT_EQ(n.counters, 48);  // 40 allocations that succeeded, 8 frees; the 2 failures change nothing
  ASSERT_EQ(counters.size(), 48u);
  EXPECT_EQ(counters.front()["name"], "GPU memory held (device)");
  EXPECT_EQ(counters.front()["pid"], 5500);
  EXPECT_EQ(counters.front()["args"]["bytes"], int64_t(1) << 30);
  int64_t peak = 0;
  for (const auto& c : counters) peak = std::max<int64_t>(peak, c["args"]["bytes"]);
  EXPECT_EQ(peak, planted.numbers["held"]);
  EXPECT_EQ(counters.back()["args"]["bytes"], planted.numbers["held"] - (int64_t(16) << 30));
}
