// SPDX-License-Identifier: Apache-2.0
// `trace --launch-sampling`: launches counted per (process, op, kernel) in
// the kernel, with log2 histograms; rows only for the first, one in N and
// every slow one. Real uprobes on the stand-in libcuda, whose launches take
// exactly the microseconds the workload asks for.
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

constexpr int kFast = 20000, kSlow = 5, kEx = 300, kEvery = 1000;
const std::string kFastKernel = "fast_kernel(float*)";
const std::string kExKernel = "ex_kernel(float*)";

struct Storm {
  TempDir dir;
  std::string db = dir / "trace.db";
  std::unique_ptr<store::Connection> conn;
  json explained;

  // Every launch probed (--launch-duty always): the counts are exact only
  // where the launch probes stay on; the default sizes windows for what a
  // trap costs on the host (9% of a window on a slow VM: 17,486 of 20,000).
  void run(const std::string& args) {
    auto r = e2e::run(kBin + " trace --live off --no-host --launch-duty always --db " + db + " --lib " + kFakeCuda +
                      " " + args + " -- " + kWorkloads + "/launch_storm " + kFakeCuda + " " +
                      std::to_string(kFast) + " " + std::to_string(kSlow) + " " + std::to_string(kEx));
    ASSERT_EQ(r.exit_code, 0) << r.out;
    conn = std::make_unique<store::Connection>(db, store::Connection::Mode::ReadOnly);
    auto e = e2e::run(kBin + " explain --json --db " + db);
    ASSERT_EQ(e.exit_code, 0) << e.out;
    explained = json::parse(e.out);
  }
  int64_t q(const std::string& sql) { return query_int(*conn, sql); }
  std::string fast_key() {
    return "pid IN (SELECT pid FROM processes WHERE comm = 'launch_storm') AND op_id = 64 AND "
           "kernel_id = (SELECT id FROM kernels WHERE name = '" + kFastKernel + "')";
  }
  // The slowest group explain reports for fast_kernel.
  json fast_symptom() {
    for (const auto& s : explained["data"]["slowest"])
      if (s.value("kernel", "") == kFastKernel) return s;
    return json();
  }
};

}  // namespace

TEST(LaunchSampling, CountsEveryLaunchAndKeepsEverySlowOne) {
  CAUSEWAY_REQUIRE_ROOT();
  Storm t;
  t.run("--launch-sampling " + std::to_string(kEvery));
  // Exact counts from the kernel, per kernel, in both tables.
  EXPECT_EQ(t.q("SELECT sum(calls) FROM launch_stats WHERE " + t.fast_key()), kFast);
  EXPECT_EQ(t.q("SELECT sum(calls) FROM launch_buckets WHERE " + t.fast_key()), kFast);
  EXPECT_EQ(t.q("SELECT sum(errors) FROM launch_stats"), 0);
  EXPECT_EQ(t.q("SELECT sum(calls) FROM launch_stats WHERE op_id = 66 AND kernel_id = "
                "(SELECT id FROM kernels WHERE name = '" + kExKernel + "')"),
            kEx);
  EXPECT_EQ(t.q("SELECT calls FROM op_stats WHERE op = 'cuLaunchKernel'"), kFast);
  EXPECT_EQ(t.q("SELECT calls FROM op_stats WHERE op = 'cuLaunchKernelEx'"), kEx);
  // The histogram agrees with the total time (bucket b holds [2^b, 2^(b+1))).
  EXPECT_GE(t.q("SELECT sum(total_ns) FROM launch_stats WHERE " + t.fast_key()),
            t.q("SELECT sum(calls << bucket) FROM launch_buckets WHERE " + t.fast_key()));
  EXPECT_LT(t.q("SELECT sum(total_ns) FROM launch_stats WHERE " + t.fast_key()),
            t.q("SELECT sum(calls << (bucket + 1)) FROM launch_buckets WHERE " + t.fast_key()));

  // Rows: each of the 5 slow (3 ms, grid 2) launches, and every launch the
  // histogram puts at >= 2^17 ns is a row; all of them marked aggregated.
  EXPECT_EQ(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key() +
                " AND grid_x = 2 AND dur_ns >= 3000000 AND flags & 16"),
            kSlow);
  EXPECT_EQ(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key() + " AND dur_ns >= 131072"),
            t.q("SELECT coalesce(sum(calls), 0) FROM launch_buckets WHERE " + t.fast_key() +
                " AND bucket >= 17"));
  EXPECT_EQ(t.q("SELECT count(*) FROM cuda_call_events WHERE op_id IN (64, 66) AND flags & 16 = 0"), 0);
  // One in 1000 of the fast ones (calls 1, 1001, ... 19001), plus the slow
  // (on a busy machine, some "fast" launches are slow too: all kept).
  const int64_t sampled = kFast / kEvery;
  EXPECT_LE(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key() + " AND dur_ns < 100000"),
            sampled);
  EXPECT_GE(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key()), sampled);
  EXPECT_LT(t.q("SELECT count(*) FROM cuda_call_events"), 200);
  // The live table's source names the kernels: the rows are named too.
  EXPECT_EQ(t.q("SELECT count(*) FROM launch_histogram WHERE kernel IS NULL"), 0);

  // explain counts every launch and finds the slow ones against the
  // histogram baseline (p50 of a launch that returns at once: < 100 us).
  EXPECT_EQ(t.explained["data"]["calls"].get<int64_t>(), kFast + kEx + 2) << t.explained.dump(2);
  auto s = t.fast_symptom();
  ASSERT_FALSE(s.is_null()) << t.explained.dump(2);
  EXPECT_EQ(s["calls"].get<int64_t>(), kFast);
  EXPECT_GE(s["slow_calls"].get<int64_t>(), kSlow);
  EXPECT_LT(s["p50_ns"].get<int64_t>(), 100000);
  EXPECT_GE(s["max_ns"].get<int64_t>(), 3000000);
}

TEST(LaunchSampling, OffRecordsEveryLaunchAndExplainAgrees) {
  CAUSEWAY_REQUIRE_ROOT();
  Storm t;
  t.run("--launch-sampling off");
  EXPECT_EQ(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key()), kFast);
  EXPECT_EQ(t.q("SELECT count(*) FROM launch_stats"), 0);
  EXPECT_EQ(t.q("SELECT count(*) FROM cuda_call_events WHERE " + t.fast_key() +
                " AND grid_x = 2 AND dur_ns >= 3000000"),
            kSlow);
  EXPECT_EQ(t.explained["data"]["calls"].get<int64_t>(), kFast + kEx + 2);
  auto s = t.fast_symptom();
  ASSERT_FALSE(s.is_null()) << t.explained.dump(2);
  EXPECT_EQ(s["calls"].get<int64_t>(), kFast);
  EXPECT_GE(s["slow_calls"].get<int64_t>(), kSlow);
}

TEST(LaunchSampling, BadValuesAreRefusedBeforeAnythingIsTraced) {
  TempDir dir;
  for (const char* bad : {"0", "-3", "ten", "99999999999", "5x"}) {
    auto r = e2e::run(kBin + " trace --live off --db " + (dir / "t.db") + " --launch-sampling " + bad +
                      " --duration 1s");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--launch-sampling"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "t.db"));
  }
  auto r = e2e::run(kBin + " trace --live off --db " + (dir / "t.db") +
                    " --launch-sampling 10 --launch-min 5us --duration 1s");
  EXPECT_EQ(r.exit_code, 2) << r.out;
}

namespace {

// duty_loop under `trace --launch-duty 0.1` for `seconds`, each launch
// taking `launch_us`: its output and the launches and syncs it counted.
struct DutyLoop {
  RunResult r;
  long launches = 0, syncs = 0;
};
DutyLoop run_duty_loop(const std::string& db, int seconds, int launch_us) {
  DutyLoop d;
  d.r = run(kBin + " trace --live off --no-host --launch-duty 0.1 --db " + db + " --lib " + kFakeCuda + " -- " +
            kWorkloads + "/duty_loop " + kFakeCuda + " " + std::to_string(seconds) + " " + std::to_string(launch_us));
  EXPECT_EQ(d.r.exit_code, 0) << d.r.out;
  const size_t at = d.r.out.find("launches ");
  EXPECT_NE(at, std::string::npos) << d.r.out;
  if (at != std::string::npos) {
    EXPECT_EQ(std::sscanf(d.r.out.c_str() + at, "launches %ld syncs %ld", &d.launches, &d.syncs), 2) << d.r.out;
  }
  return d;
}

// cuStreamSynchronize (80): every call counted, each a row, none taken for nested.
void expect_every_sync_exact(store::Connection& c, long syncs) { EXPECT_EQ(expect_every_sync_a_row(c), syncs); }

}  // namespace

// --launch-duty 0.1: launches are probed 0.2 s in every 2. A 3 s loop is
// probed in two windows; every sync stays exact and a row of its own,
// though the detach catches the thread inside a launch (each takes 100 us,
// most of the loop's time): on kernels where that launch's return never
// fires, its frame is dropped at the thread's next call (launch_gen).
TEST(LaunchDutyE2E, LaunchesInWindowsEveryOtherCallExact) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  const DutyLoop d = run_duty_loop(db, 3, 100);
  ASSERT_FALSE(HasFailure());
  const auto& r = d.r;
  const long launches = d.launches;
  EXPECT_NE(r.out.find("launches: probed "), std::string::npos) << r.out;
  // The windows' probes went on for the first window (once the agent had
  // looked at the command), off after it, on for the second (and off after
  // it, unless the loop ended inside it): timed.
  const size_t at = r.out.find("launch windows: probes attached or detached ");
  ASSERT_NE(at, std::string::npos) << r.out;
  long toggles = 0, probes = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "launch windows: probes attached or detached %ld times (up to %ld probes)",
                        &toggles, &probes), 2)
      << r.out;
  EXPECT_GE(toggles, 3);
  EXPECT_LE(toggles, 4);
  EXPECT_GE(probes, 2);  // cuLaunchKernel's entry and return at least
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  ASSERT_EQ(query_int(c, "SELECT count(*) FROM launch_windows"), 2);
  const int64_t window = query_int(c, "SELECT sum(end_ns - ts_ns) FROM launch_windows");
  EXPECT_GE(window, 2 * 180'000'000);
  EXPECT_LE(window, 2 * 700'000'000);  // the loop's 50 ms tick and the detach's RCU grace period
  expect_every_sync_exact(c, d.syncs);
  // cuLaunchKernel (64): counted in the window only.
  const int64_t probed = query_int(c, "SELECT calls FROM op_counts WHERE op_id = 64");
  EXPECT_GT(probed, 0);
  EXPECT_LT(probed, launches * 6 / 10) << launches;
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_call_events WHERE op_id = 64 AND ts_ns > "
                         "(SELECT max(end_ns) FROM launch_windows)"), 0);
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const json j = json::parse(e.out);
  ASSERT_EQ(j["accounts"].size(), 1u) << j["accounts"];
  EXPECT_EQ(j["accounts"][0]["launch_windows"], true);
  EXPECT_LE(j["accounts"][0]["covered_ns"].get<int64_t>(), window);
}

// Launches of 1 us, back to back, while the windows' probes go on and off:
// the probes' links go side by side (a grace period each), so a return
// probe may be gone before its entry probe. Their entries do nothing from
// the moment detaching begins: no frame is left unpopped, the thread's
// frame stack never overflows (that was 240 `nest` drops in 8 s), and every
// sync is still exact.
TEST(LaunchDutyE2E, ProbesGoingOffSideBySideLeaveNoFrameBehind) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  const DutyLoop d = run_duty_loop(db, 5, 1);
  ASSERT_FALSE(HasFailure());
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  EXPECT_GE(query_int(c, "SELECT count(*) FROM launch_windows"), 3);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM drops"), 0) << d.r.out;
  expect_every_sync_exact(c, d.syncs);
  // Every launch counted began inside a window.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_call_events e WHERE op_id = 64 AND NOT EXISTS "
                         "(SELECT 1 FROM launch_windows w WHERE e.ts_ns BETWEEN w.ts_ns AND w.end_ns)"),
            0);
}

// The stand-in's cuLaunchKernelEx (a launch function, probed in windows)
// and cuStreamSynchronize begin with instructions the kernel single-steps
// (a load), its cuLaunchKernel with a push (emulated): the trace measures
// what a single-step costs here and names the functions that pay it. Adaptive
// windows are sized for what the launches they saw cost: 2 us a pair plus
// the single-step for a loop of cuLaunchKernelEx, the pair alone for one of
// cuLaunchKernel.
TEST(LaunchDutyE2E, SingleSteppedProbesAreNamedAndWindowsSizedForTheLaunchesMade) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  auto trace = [&](const std::string& name, const std::string& command) {
    auto r = run(kBin + " trace --live off --no-host --db " + (dir / name) + " --lib " + kFakeCuda + " -- " + command);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out;
  };
  // 3 s of cuLaunchKernelEx at 64k a second: the first window measures the
  // rate before what a single-step costs here is known (measured beside the
  // trace's start); the next is sized for it.
  const std::string ex = trace("ex.db", kWorkloads + "/launch_storm " + kFakeCuda + " 0 0 192000 64000");
  const size_t at = ex.find("probes: ");
  ASSERT_NE(at, std::string::npos) << ex;
  const std::string line = ex.substr(at, ex.find('\n', at) - at);
  // Only the functions called, with their calls: the loop's launches
  // (all probed while the windows are on: fewer than it made) and nothing
  // else it called single-steps (cuModuleGetFunction does, called twice).
  EXPECT_TRUE(line.starts_with("probes: calls single-stepped at entry on this host, up to ")) << line;
  long launches = 0, lookups = 0;
  const size_t ex_at = line.find("cuLaunchKernelEx (");
  ASSERT_NE(ex_at, std::string::npos) << line;
  ASSERT_EQ(std::sscanf(line.c_str() + ex_at, "cuLaunchKernelEx (%ld)", &launches), 1) << line;
  EXPECT_GT(launches, 0);
  EXPECT_LT(launches, 192000);
  const size_t get_at = line.find("cuModuleGetFunction (");
  ASSERT_NE(get_at, std::string::npos) << line;
  ASSERT_EQ(std::sscanf(line.c_str() + get_at, "cuModuleGetFunction (%ld)", &lookups), 1) << line;
  EXPECT_EQ(lookups, 2);
  EXPECT_LT(ex_at, get_at) << line;  // most called first
  for (const char* name : {"cuStreamSynchronize", "cuLaunchKernel (", "ncclBcast", "ibv_"})
    EXPECT_EQ(line.find(name), std::string::npos) << name << ": " << line;
  const size_t sized = ex.find("launch windows: sized for ");
  ASSERT_NE(sized, std::string::npos) << ex;
  double us = 0;
  ASSERT_EQ(std::sscanf(ex.c_str() + sized, "launch windows: sized for %lf us a launch", &us), 1) << ex;
  EXPECT_GT(us, 2.5) << ex;

  // cuLaunchKernel (a push) and every 10 a cuStreamSynchronize (a load).
  const std::string plain = trace("plain.db", kWorkloads + "/duty_loop " + kFakeCuda + " 1 0");
  const size_t pat = plain.find("probes: ");
  ASSERT_NE(pat, std::string::npos) << plain;
  const std::string pline = plain.substr(pat, plain.find('\n', pat) - pat);
  EXPECT_NE(pline.find("cuStreamSynchronize ("), std::string::npos) << pline;
  EXPECT_EQ(pline.find("cuLaunchKernel"), std::string::npos) << pline;
  EXPECT_EQ(plain.find("launch windows: sized for "), std::string::npos) << plain;
}

// Adaptive windows are sized for what probing cost inside them: the
// launches' traps (2 us a pair) and how long the probes' programs ran, which
// the kernel times while a window is open (BPF_ENABLE_STATS). A 3-s loop of
// cuLaunchKernel at 64k a second: ~12.8% of a window in traps, and more
// with the programs; each next window's duty is the 0.5% budget over what
// the last one cost, and the summary gives the most a window cost.
TEST(LaunchDutyE2E, WindowsAreSizedForWhatProbingCostInThem) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  auto r = run(kBin + " -v trace --live off --no-host --db " + (dir / "t.db") + " --lib " + kFakeCuda + " -- " +
               kWorkloads + "/launch_storm " + kFakeCuda + " 192000 0 0 64000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  int windows = 0;
  double most = 0;
  for (size_t at = r.out.find("launch probes detached (duty "); at != std::string::npos;
       at = r.out.find("launch probes detached (duty ", at + 1)) {
    double duty = 0, cost = 0, traps = 0;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at,
                          "launch probes detached (duty %lf; the last window cost %lf%% of its time, %lf%% in traps)",
                          &duty, &cost, &traps), 3)
        << r.out.substr(at, 120);
    windows++;
    most = std::max(most, cost);
    // The programs ran: the kernel's statistics were on in the window.
    EXPECT_GT(cost, traps) << r.out.substr(at, 120);
    // 64k launches a second, paced; slower where the box is loaded.
    EXPECT_GT(traps, 4.0);
    EXPECT_LT(traps, 14.0);
    EXPECT_NEAR(duty, std::max(0.01, 0.005 / (cost / 100)), 0.00051) << r.out.substr(at, 120);
  }
  EXPECT_GE(windows, 1) << r.out;
  const size_t at = r.out.find("launch windows: probing cost up to ");
  ASSERT_NE(at, std::string::npos) << r.out;
  double summary = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "launch windows: probing cost up to %lf%%", &summary), 1);
  EXPECT_NEAR(summary, most, 0.051);
}
