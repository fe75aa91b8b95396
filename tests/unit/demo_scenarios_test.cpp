// SPDX-License-Identifier: Apache-2.0
// Every demo scenario is diagnosed as what it planted; clean has no HIGH chain.
#include <gtest/gtest.h>

#include "temp_db.h"
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <sstream>

#include "causeway/analyze/account.h"
#include "causeway/analyze/engine.h"
#include "causeway/demo/scenarios.h"
#include "causeway/present/explain_format.h"
#include "causeway/present/html_report.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/sqlite.h"

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
  auto ro = store::open_trace_read_only(db.path);
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

namespace {
// The scenario's trace, edited by `edit` (when given) before it is explained.
nlohmann::json explain_demo(const std::string& scenario, demo::Planted* planted = nullptr,
                            const std::function<void(store::Connection&)>& edit = {}) {
  TempDb db;
  auto p = demo::generate(scenario, db.path, 1);
  if (planted) *planted = p;
  if (edit) {
    store::Connection c(db.path, store::Connection::Mode::ReadWriteCreate);
    edit(c);
  }
  return present::to_json(analyze::explain_file(db.path, {}));
}
// The first chain of `cause` (null when none).
nlohmann::json chain_of(const nlohmann::json& j, const std::string& cause) {
  for (const auto& c : j["chains"])
    if (c["root_cause"] == cause) return c;
  return nlohmann::json();
}
// Some evidence of the chain says `key`.
bool says(const nlohmann::json& chain, const std::string& key) {
  for (const auto& e : chain["evidence"])
    if (e.value(key, false)) return true;
  return false;
}
}  // namespace

// Out of memory: the failing allocation's size and line, what was held then
// by line (largest first), the retry after the cache was freed, NVML's view.
TEST(DemoScenarios, OutOfMemoryNamesTheAskAndTheHolders) {
  demo::Planted planted;
  auto j = explain_demo("out-of-memory", &planted);
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "out_of_memory") << c;
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["frame"]["text"], "forward() at model.py:64");
  EXPECT_EQ(c["evidence"][0]["failed"], 2);
  EXPECT_EQ(c["evidence"][0]["asked"], planted.numbers["asked"]);
  EXPECT_EQ(c["evidence"][1]["held"], planted.numbers["held"]);
  const auto& holders = c["evidence"][1]["holders"];
  ASSERT_EQ(holders.size(), 3u);
  EXPECT_EQ(holders[0]["where"], "train.py:77 (train_step)");
  EXPECT_EQ(holders[0]["bytes"], planted.numbers["top_holder_bytes"]);
  EXPECT_EQ(holders[0]["allocations"], 2);
  EXPECT_EQ(holders[1]["where"], "train.py:31 (load_model)");
  EXPECT_EQ(holders[1]["allocations"], 30);
  EXPECT_EQ(c["evidence"][2]["frees_before_retry"], 8);
  EXPECT_EQ(c["evidence"][2]["held_at_retry"], planted.numbers["held"] - (int64_t(16) << 30));
  EXPECT_EQ(c["evidence"][3]["gpu_total"], int64_t(80) << 30);
  // The memory account: a failed allocation allocated nothing.
  ASSERT_EQ(j["memory"].size(), 1u);
  EXPECT_EQ(j["memory"][0]["failed"], 2);
  EXPECT_EQ(j["memory"][0]["allocations"], 40);
  EXPECT_EQ(j["memory"][0]["allocated"], planted.numbers["held"]);
  EXPECT_EQ(j["memory"][0]["held_to"], planted.numbers["held"] - (int64_t(16) << 30));
}

TEST(DemoScenarios, MemoryLeakNamesTheLineThatKeepsGrowing) {
  demo::Planted planted;
  auto j = explain_demo("memory-leak", &planted);
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "memory_leak") << c;
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_EQ(c["frame"]["text"], "train_step() at train.py:95");
  EXPECT_EQ(c["evidence"][0]["leaked"], planted.numbers["leaked"]);
  const auto& site = c["evidence"][1]["sites"][0];
  EXPECT_EQ(site["where"], "train.py:95 (train_step)");
  EXPECT_EQ(site["allocations"], 1500);
  EXPECT_EQ(c["evidence"][1]["sites"].size(), 1u);  // the scratch buffer is freed: not a leak
  EXPECT_LT(c["evidence"][2]["seconds_to_full"].get<double>(), 3600);
}

TEST(DemoScenarios, IllegalAddressIsOneIncidentWithTheNewKernel) {
  demo::Planted planted;
  auto j = explain_demo("illegal-address", &planted);
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "call_failures") << c;
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["evidence"][0]["failed"], planted.numbers["failed"]);
  EXPECT_EQ(c["evidence"][0]["first_error"], "cudaErrorIllegalAddress");
  EXPECT_EQ(c["evidence"][0]["kind"], "sticky");
  EXPECT_EQ(c["evidence"][0]["first_op"], "cudaStreamSynchronize");
  bool named = false;
  for (const auto& e : c["evidence"])
    if (e.contains("suspects")) {
      named = true;
      EXPECT_NE(e["kernel"].get<std::string>().find("indexSelectLargeIndex"), std::string::npos) << e;
      EXPECT_EQ(e["launch_where"], "model.py:101");
      EXPECT_EQ(e["suspects"].size(), 5u);
    }
  EXPECT_TRUE(named) << c;
  EXPECT_EQ(c["frame"]["text"], "forward() at model.py:101");
  // Only one incident: the 40 calls after it are the same sticky error.
  int failures = 0;
  for (const auto& x : j["chains"]) failures += x["root_cause"] == "call_failures";
  EXPECT_EQ(failures, 1);
}

TEST(DemoScenarios, ThrottledGpuTiesTheSlowerStepsToTheClock) {
  auto j = explain_demo("gpu-throttled");
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "gpu_throttled") << c;
  EXPECT_EQ(c["evidence"][0]["throttled_samples"], 40);
  EXPECT_EQ(c["evidence"][0]["reasons"], 0x20 | 0x40);
  EXPECT_EQ(c["evidence"][0]["sm_clock_throttled"], 1245);
  EXPECT_GT(c["evidence"][1]["slowdown"].get<double>(), 1.4);
}

// The same waits, but the throttled seconds' clock only 2% under the
// others': the clock explains at most 2% (the rest of those seconds' longer
// waits is something else), and no chain blames it.
TEST(DemoScenarios, AClockTwoPercentDownIsNoThrottlingChain) {
  auto j = explain_demo("gpu-throttled", nullptr, [](store::Connection& c) {
    const int64_t hi = *c.query_int("SELECT max(sm_clock) FROM gpu_samples");
    c.exec("UPDATE gpu_samples SET sm_clock = " + std::to_string(hi * 98 / 100) + " WHERE sm_clock < " +
           std::to_string(hi));
  });
  for (const auto& c : j["chains"]) EXPECT_NE(c["root_cause"], "gpu_throttled") << c;
}

// A generic account is the step's bound only where it takes more of the step
// than the GPU is busy: the same launch-bound loop with NVML saying the GPU
// was busy 99% of the time (an eager loop that keeps the queue ahead) has
// its launching as a note, LOW; at 50% busy it is the step's bound.
TEST(DemoScenarios, LaunchingUnderABusierGpuIsANote) {
  auto launch_bound_at = [](int util) {
    return chain_of(explain_demo("launch-bound", nullptr, [util](store::Connection& c) {
                      const int64_t from = *c.query_int("SELECT min(ts_ns) FROM cuda_call_events");
                      const int64_t to = *c.query_int("SELECT max(ts_ns) FROM cuda_call_events");
                      for (int64_t t = from; t <= to; t += 100'000'000)
                        c.exec("INSERT INTO gpu_samples (session_id, ts_ns, gpu, util_gpu) VALUES (1, " +
                               std::to_string(t) + ", 0, " + std::to_string(util) + ")");
                    }),
                    "launch_bound");
  };
  const auto busy = launch_bound_at(99);
  ASSERT_FALSE(busy.is_null());
  EXPECT_EQ(busy["severity"], "LOW") << busy;
  EXPECT_TRUE(says(busy, "gpu_sets_step")) << busy;
  const auto starved = launch_bound_at(50);
  ASSERT_FALSE(starved.is_null());
  EXPECT_EQ(starved["severity"], "HIGH") << starved;  // saves up to 50% of the step
}

// A software power cap alone, at the board's default limit, is a saturated
// GPU holding its rated power: LOW. The same seconds with the limit lowered
// below the default (nvidia-smi -pl 400) are the incident, named so.
TEST(DemoScenarios, APowerCapAtTheDefaultLimitIsANote) {
  auto throttled_at = [](int64_t limit_mw) {
    return chain_of(explain_demo("gpu-throttled", nullptr, [limit_mw](store::Connection& c) {
                      c.exec("UPDATE gpu_samples SET throttle = 4 WHERE throttle != 0");
                      c.exec("UPDATE gpu_devices SET power_limit_mw = " + std::to_string(limit_mw));
                    }),
                    "gpu_throttled");
  };
  const auto rated = throttled_at(700000);
  ASSERT_FALSE(rated.is_null());
  EXPECT_EQ(rated["severity"], "LOW") << rated;
  EXPECT_TRUE(says(rated, "at_rated_power")) << rated;  // ranked as a verdict, below any cause in the program
  const auto lowered = throttled_at(400000);
  ASSERT_FALSE(lowered.is_null());
  EXPECT_NE(lowered["severity"], "LOW") << lowered;
  EXPECT_TRUE(says(lowered, "lowered")) << lowered;
  EXPECT_NE(lowered["recommendation"].get<std::string>().find("nvidia-smi -pl 700"), std::string::npos) << lowered;
}

TEST(DemoScenarios, HungCollectiveNamesTheRankBehind) {
  demo::Planted planted;
  auto j = explain_demo("hung-collective", &planted);
  const auto& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "hung_collective") << c;
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["evidence"][0]["waiting"].size(), 3u);
  EXPECT_EQ(c["evidence"][0]["behind"], nlohmann::json::array({3}));
  EXPECT_EQ(c["evidence"][1]["rank"], 3);
  EXPECT_EQ(c["evidence"][1]["pid"], 7103);
  EXPECT_EQ(c["evidence"][1]["latest_seq"], 399);
  EXPECT_EQ(c["frame"]["text"], "forward() at train.py:142");
}

// The report's memory section: one chart per process, a bar per slice
// boundary, the leaking line in the legend and growing bar after bar.
TEST(DemoScenarios, ReportChartsMemoryHeldByLine) {
  TempDb db;
  demo::generate("memory-leak", db.path, 1);
  auto ro = store::open_trace_read_only(db.path);
  std::ostringstream out;
  auto n = present::write_html_report(*ro, "leak.db", {}, {}, out);
  const std::string h = out.str();
  EXPECT_NE(h.find("<h2 id=\"memory\">GPU memory held</h2>"), std::string::npos);
  EXPECT_NE(h.find("train.py:95 (train_step) (29.3 GiB)"), std::string::npos);
  size_t charts = 0;
  for (size_t at = h.find("<svg class=\"memory\""); at != std::string::npos; at = h.find("<svg class=\"memory\"", at + 1))
    charts++;
  EXPECT_EQ(charts, 1u);
  // The window opens at the first allocation: from the second boundary on
  // the weights (train.py:31) and the leak (train.py:95) are both held, a
  // segment each; a scratch buffer adds a third where a boundary falls on it.
  EXPECT_GE(n.memory_bars, 2 * analyze::kMemorySlices);
  EXPECT_LE(n.memory_bars, 3 * (analyze::kMemorySlices + 1));
}

// gpu_shared assumes processes share a GPU only where nothing says otherwise:
// NVML's per-process samples placing the two processes on different GPUs
// clear it; on one GPU they add each process's SM share.
TEST(DemoScenarios, GpuSharedFollowsNvmlsPlacement) {
  for (int other_gpu : {1, 0}) {
    TempDb db;
    demo::generate("gpu-steal", db.path, 1);
    {
      store::Connection c(db.path, store::Connection::Mode::ReadWriteCreate);
      const int64_t from = *c.query_int("SELECT min(ts_ns) FROM cuda_call_events WHERE pid = 3377");
      const int64_t to = *c.query_int("SELECT max(ts_ns) FROM cuda_call_events WHERE pid = 3377");
      for (int64_t t = from; t < to; t += 1'000'000'000) {
        c.exec("INSERT INTO gpu_process_samples (ts_ns, gpu, pid, sm_util) VALUES (" + std::to_string(t) +
               ", 0, 3100, 40)");
        c.exec("INSERT INTO gpu_process_samples (ts_ns, gpu, pid, sm_util) VALUES (" + std::to_string(t) + ", " +
               std::to_string(other_gpu) + ", 3377, 60)");
      }
    }
    auto j = present::to_json(analyze::explain_file(db.path, {}));
    const nlohmann::json* shared = nullptr;
    for (const auto& c : j["chains"])
      if (c["root_cause"] == "gpu_shared") shared = &c;
    if (other_gpu == 1) {
      EXPECT_EQ(shared, nullptr) << j["chains"];
      continue;
    }
    ASSERT_NE(shared, nullptr) << j["chains"];
    const auto& last = (*shared)["evidence"].back();
    EXPECT_EQ(last["gpu"], 0) << last;
    ASSERT_EQ(last["sm_util"].size(), 2u) << last;
    EXPECT_DOUBLE_EQ(last["sm_util"][0]["sm_util"].get<double>() + last["sm_util"][1]["sm_util"].get<double>(), 100)
        << last;
  }
}
