// SPDX-License-Identifier: Apache-2.0
// The critical path on real traces (real uprobes on the stand-in libcuda,
// real scheduler tracepoints, real CPU samples and wait stacks): an idle
// helper thread is never a cause; a sleep, an fsync and a CPU limit are, at
// their lines; a wait for a helper or through a chain of threads is followed
// to the line that burns the CPU; a job traced after it started has its
// threads' names and its stacks, and no cold start.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kScript = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_step_loops.py";

int marker(const std::string& name) { return call_marker_line(kScript, name); }

json traced(const std::string& mode, int steps, std::string* text = nullptr, const std::string& env = "",
            const std::string& flags = "") {
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(env + kBin + " trace --live off " + flags + "--db " + db + " --lib " + kFakeCuda + " -- /usr/bin/python3.11 " +
               kScript + " " + mode + " " + std::to_string(steps) + " " + kFakeCuda);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto e = run(kBin + " explain --json --db " + db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  if (text) *text = run(kBin + " explain --db " + db).out;
  json j = json::parse(e.out);
  // Shares are of the path: none over all of it, in the window or in an
  // episode of it (a second's host time once landed in one tenth of a
  // 2-s window and read as 224% of it).
  // Only chains judged on a path carry a share: a slow-call rule's chain off
  // the path (cpu_contention LOW on a busy box) has none, and CI's box once
  // gave the launch-window loop a chain without one.
  for (const auto& c : j["chains"]) {
    if (c.contains("share")) {
      EXPECT_LE(c["share"].get<double>(), 1.0 + 1e-9) << c["root_cause"];
    }
    for (const auto& ev : c["evidence"])
      if (ev.contains("episode_share")) {
        EXPECT_LE(ev["episode_share"].get<double>(), 1.0 + 1e-9) << ev["text"];
      }
  }
  for (const auto& p : j["paths"]) {
    double sum = 0;
    for (const auto& part : p["parts"]) sum += part["share"].get<double>();
    EXPECT_LE(sum, 1.0 + 1e-6) << p["text"];
  }
  return j;
}

// The share of the path on threads named `name`.
double share_on(const json& path, const std::string& name) {
  double s = 0;
  for (const auto& part : path["parts"])
    if (part["thread"] == name) s += part["share"].get<double>();
  return s;
}

}  // namespace

// A helper thread that waits on a queue for its half of each step, idle the
// rest of the time (as PyTorch's autograd thread between backward passes,
// 90% of its time): the loop waits for the GPU (40 ms a step). Nothing names
// the helper, and nothing is above LOW. The step's 11 quick syncs, each
// with its probes' traps, cost ~450 us on a VM trapping at 7.5 us a pair; the
// wait is long enough for them to stay the minor part they are.
// What the test holds (issue 70): the helper's idle waits are never on the
// path. Its half of the step is (a few quick syncs, ~0.1 ms), and so are its
// waits for a CPU to run it: on a loaded 2-CPU machine those reached 0.8 ms
// a step (4.7% of a 17.5-ms step in a CI run). Its idle wait is ~40 ms of
// each ~41-ms step, so a path that took it would put the helper over 90%;
// bounding its share at 15% leaves that noise seven times over (6 ms a step)
// and stays six times below the failure it guards against. Likewise the
// GPU's wait is ~40 ms of the step: the main thread's own work and its waits
// for a CPU (the same ~1 ms at worst) keep it over 80% with that margin.
TEST(Path, AHelperWaitingForWorkIsNeverACause) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("helper", 150, &text, "CW_FAKE_SYNC_MS=40 ");
  ASSERT_FALSE(j["chains"].empty()) << text;
  // gpu_bound is there (ranked last, as it always is, below any LOW note
  // such as a kworker's one 4-ms preemption), and nothing is above LOW.
  bool gpu_bound = false;
  for (const auto& c : j["chains"]) {
    gpu_bound = gpu_bound || c["root_cause"] == "gpu_bound";
    EXPECT_EQ(c["severity"], "LOW") << c;
    EXPECT_NE(c["symptom"].value("thread", ""), "cw_helper") << c;
  }
  EXPECT_TRUE(gpu_bound) << text;
  // The helper is an account of its own, mostly waiting: off the path.
  bool helper_account = false;
  for (const auto& a : j["accounts"]) helper_account = helper_account || a["name"] == "cw_helper";
  EXPECT_TRUE(helper_account) << text;
  ASSERT_EQ(j["paths"].size(), 1u);
  const json& path = j["paths"][0];
  // The helper's wait for work lasts ~40 ms of each ~41-ms step: on the
  // path it would be over 90% of the step, in a wait class of its own
  // (asleep, a timer, input). What may be there is its half of the step and
  // the short waits inside it (a quick sync's sleep in the stand-in driver):
  // under 5% in wait classes leaves that noise ten times over.
  double helper_idle = 0;
  for (const auto& part : path["parts"])
    if (part["thread"] == "cw_helper" &&
        (part["class"] == "sleeping" || part["class"] == "timer" || part["class"] == "input"))
      helper_idle += part["share"].get<double>();
  EXPECT_LT(helper_idle, 0.05) << path;
  EXPECT_LT(share_on(path, "cw_helper"), 0.15) << path["text"];
  EXPECT_GT(path["parts"][0]["share"].get<double>(), 0.8) << path["text"];
  EXPECT_EQ(path["parts"][0]["class"], "gpu_busy");
}

// An eager framework's step: 100 launches with ~50 us of dispatch each, then
// a wait for the GPU. Waiting 8 ms a step, the GPU is busy more of the step
// than the launching takes (the host keeps its queue ahead): launching is a
// note, LOW. Waiting 1 ms, the launches bound the step: launch_bound first,
// HIGH, at the launch's line. Every launch probed (--launch-duty always) so
// the whole loop is judged.
TEST(Path, LaunchingIsTheBoundOnlyWhereItOutlastsTheGpu) {
  CAUSEWAY_REQUIRE_ROOT();
  auto launch_bound = [](const json& j) -> const json* {
    for (const auto& c : j["chains"])
      if (c["root_cause"] == "launch_bound") return &c;
    return nullptr;
  };
  std::string text;
  json ahead = traced("eager", 200, &text, "CW_FAKE_SYNC_MS=8 ", "--launch-duty always ");
  ASSERT_FALSE(ahead["chains"].empty()) << text;
  for (const auto& c : ahead["chains"]) EXPECT_EQ(c["severity"], "LOW") << text;
  ASSERT_EQ(ahead["paths"].size(), 1u) << text;
  EXPECT_EQ(ahead["paths"][0]["parts"][0]["class"], "gpu_busy") << text;
  if (const json* c = launch_bound(ahead)) {
    bool noted = false;
    for (const auto& e : (*c)["evidence"]) noted = noted || e.value("gpu_sets_step", false);
    EXPECT_TRUE(noted) << *c;
  }
  json starved = traced("eager", 400, &text, "CW_FAKE_SYNC_MS=1 ", "--launch-duty always ");
  ASSERT_FALSE(starved["chains"].empty()) << text;
  const json& c = starved["chains"][0];
  EXPECT_EQ(c["root_cause"], "launch_bound") << text;
  EXPECT_EQ(c["severity"], "HIGH") << text;
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["line"], marker("eager_launch")) << c;
}

// Schema 23: each sync row says how many launches the process had made by
// its return and how long before its entry the last one returned, so the
// path can tell the host work after a step's last launch (which a GPU still
// busy hides) from the dispatch between launches. 40 eager steps of 100
// launches each, every launch probed: the k-th sync has exactly 100 k
// launches before it, the last of them returned before the sync was entered
// (Python's call between them, well under 2 ms).
TEST(Path, EachSyncSaysHowManyLaunchesLieBeforeItAndWhenTheLastReturned) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run("CW_FAKE_SYNC_MS=1 " + kBin + " trace --live off --launch-duty always --db " + db + " --lib " +
               kFakeCuda + " -- /usr/bin/python3.11 " + kScript + " eager 40 " + kFakeCuda);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  const std::string syncs = "FROM cuda_calls WHERE op = 'cuCtxSynchronize'";
  ASSERT_EQ(query_int(c, "SELECT count(*) " + syncs), 40);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM (SELECT launch_seq, row_number() OVER (ORDER BY ts_ns) AS k " + syncs +
                             ") WHERE launch_seq = 100 * k"),
            40);
  EXPECT_EQ(query_int(c, "SELECT count(*) " + syncs + " AND since_launch_ns >= 0 AND since_launch_ns < 2000000"), 40);
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM cuda_calls WHERE op = 'cuLaunchKernel' AND since_launch_ns IS NOT NULL"),
            0)
      << "a launch's own row needs neither";
}

// The same starved loop under launch windows (--launch-duty 0.15: 300 ms in
// each 2 s), for ~5 s: the path covers only the windows' time, under a
// second, yet their steps are enough to judge: launch_bound first, HIGH, at
// the launch's line (a 4-s decode loop on the H200 had ~0.3 s of windows and
// no launch_bound chain before).
TEST(Path, ALoopSeenOnlyInLaunchWindowsIsJudgedOnThem) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  const json j = traced("eager", 1500, &text, "CW_FAKE_SYNC_MS=1 ", "--launch-duty 0.15 ");
  ASSERT_EQ(j.at("accounts").size(), 1u) << text;
  EXPECT_EQ(j["accounts"][0].value("launch_windows", false), true) << text;
  const double covered = j["accounts"][0].value("covered_ns", 0.0);
  EXPECT_GT(covered, 2.5e8) << text;
  EXPECT_LT(covered, 1e9) << text;
  ASSERT_FALSE(j.at("chains").empty()) << text;
  const json& c = j["chains"][0];
  ASSERT_EQ(c.value("root_cause", ""), "launch_bound") << text;
  EXPECT_EQ(c.value("severity", ""), "HIGH") << text;
  ASSERT_TRUE(c.contains("frame") && c["frame"].is_object()) << c;
  EXPECT_EQ(c["frame"].value("line", -1), marker("eager_launch")) << c;
}

// The starved eager loop through cuLaunchKernelEx, which the stand-in
// begins with a load: the kernel single-steps it under a probe (~14 us on
// the CI VM). Each launch window records what its launches cost the
// launching thread (trap_ns: 2 us until the agent has measured the
// single-step beside the trace's start, then 2 us plus it), and the path
// takes exactly that out of the launching as the tracer's: launches x the
// windows' trap_ns, weighed by their time in the path.
TEST(Path, TheTracersCostOfSingleSteppedLaunchesIsWhatTheWindowsRecord) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run("CW_FAKE_SYNC_MS=1 " + kBin + " trace --live off --launch-duty 0.3 --db " + db + " --lib " + kFakeCuda +
               " -- /usr/bin/python3.11 " + kScript + " eager-ex 800 " + kFakeCuda);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const json j = json::parse(e.out);
  ASSERT_EQ(j.at("paths").size(), 1u) << e.out;
  const json& p = j["paths"][0];
  const double launches = p.at("launches").get<double>();
  const int64_t from = p.at("from_ns").get<int64_t>(), to = p.at("to_ns").get<int64_t>();
  EXPECT_GT(launches, 1000) << p["text"];
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto st = c.prepare("SELECT ts_ns, end_ns, trap_ns FROM launch_windows");
  double weighed = 0, covered = 0;
  int64_t most = 0;
  while (st.step()) {
    const int64_t lo = std::max(st.col_int(0), from), hi = std::min(st.col_int(1), to);
    most = std::max(most, st.col_int(2));
    if (lo < hi) weighed += double(hi - lo) * double(st.col_int(2)), covered += double(hi - lo);
  }
  ASSERT_GT(covered, 0);
  // The single-step measured and recorded for the later windows.
  EXPECT_GT(most, 4000) << r.out;
  const double trap = double(int64_t(weighed / covered));
  EXPECT_NEAR(p.at("tracer_ns").get<double>(), launches * trap, launches * trap * 0.01 + 1) << p["text"];
}

// A loop that sleeps 20 ms a step at one line: the timer sleep first, HIGH,
// at that line (the stack it went to sleep in).
TEST(Path, ALoopThatSleepsGetsTheSleepAtItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("sleep", 100, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "timer_sleep") << text;
  EXPECT_EQ(c["severity"], "HIGH");
  EXPECT_GT(c["share"].get<double>(), 0.9);
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["line"], marker("sleep"));
  EXPECT_EQ(c["frame"]["func"], "sleep");
}

// The loop hands each step's preparation to a helper that burns the CPU for
// 20 ms, and waits: the wait is followed into the helper, to its line.
TEST(Path, AWaitForABurningHelperGetsTheHelpersLine) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("burn-helper", 100, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "lock_contention") << text;
  EXPECT_EQ(c["symptom"]["thread"], "cw_prep");
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["line"], marker("prep_burn"));
  ASSERT_EQ(j["paths"].size(), 1u);
  EXPECT_GT(share_on(j["paths"][0], "cw_prep"), 0.8) << j["paths"][0]["text"];
}

// The loop waits for thread B, which waits for thread C, which burns the CPU:
// the path goes through B to C and ends at C's line.
TEST(Path, AWaitChainAcrossThreeThreadsIsFollowedToItsEnd) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("chain3", 100, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "lock_contention") << text;
  EXPECT_EQ(c["symptom"]["thread"], "cw_c");
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["line"], marker("c_burn"));
  ASSERT_EQ(j["paths"].size(), 1u);
  EXPECT_GT(share_on(j["paths"][0], "cw_c"), 0.8) << j["paths"][0]["text"];
  EXPECT_LT(share_on(j["paths"][0], "cw_b"), 0.05) << j["paths"][0]["text"];
}

// A checkpoint written and synced each step: the disk write first, at the
// fsync's line, with the process's block writes as evidence.
TEST(Path, AnFsyncEachStepIsADiskWriteAtItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("fsync", 600, &text);  // ~2.5 ms a step here: over a second of steps
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "disk_write") << text;
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["line"], marker("fsync"));
  bool writes = false;
  for (const auto& e : c["evidence"]) writes = writes || (e.contains("writes") && e["bytes"].get<int64_t>() > 0);
  EXPECT_TRUE(writes) << c;
}

// The loop moves itself into a cgroup whose CPU limit is 0.2 CPU (this
// host's cgroup version: v1's cpu.cfs_quota_us, or v2's cpu.max) and
// computes 10 ms a step: throttled, said so with the limit's counters, and
// the idle task named nowhere.
TEST(Path, ACpuLimitIsThrottlingNotANeighbour) {
  CAUSEWAY_REQUIRE_ROOT();
  const bool v2 = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
  const std::string dir = v2 ? "/sys/fs/cgroup/cw_e2e_limit" : "/sys/fs/cgroup/cpu/cw_e2e_limit";
  if (v2) std::ofstream("/sys/fs/cgroup/cgroup.subtree_control") << "+cpu";
  std::filesystem::create_directories(dir);
  if (v2) {
    std::ofstream(dir + "/cpu.max") << "20000 100000";
  } else {
    std::ofstream(dir + "/cpu.cfs_period_us") << "100000";
    std::ofstream(dir + "/cpu.cfs_quota_us") << "20000";
  }
  std::string text;
  json j = traced("cpu-limit", 150, &text, "CW_LIMIT_CGROUP=" + dir + " ");
  rmdir(dir.c_str());
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "cpu_throttled") << text;
  EXPECT_EQ(c["severity"], "HIGH");
  bool limit = false;
  for (const auto& e : c["evidence"])
    if (e.contains("cpus")) {
      limit = true;
      EXPECT_DOUBLE_EQ(e["cpus"].get<double>(), 0.2);
      EXPECT_EQ(e["cgroup_version"], v2 ? 2 : 1);
      EXPECT_EQ(e["cgroup"], "/cw_e2e_limit");
      EXPECT_GT(e["throttled_periods"].get<int64_t>(), 10);
    }
  EXPECT_TRUE(limit) << c;
  EXPECT_EQ(text.find("swapper"), std::string::npos) << text;
}

// A step that alternates, 10 ms on the loop thread and 10 ms on a helper it
// waits for, the same in every step: no tenth of the window reads as an
// episode. (Each thread's host time of a second once landed in one piece
// from where it began, as if the path had stayed on it: "66% in 7 of 10".)
TEST(Path, SteadyAlternatingWorkIsNoEpisode) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("handoff", 200, &text);  // 20 ms a step: four seconds
  ASSERT_GE(j["chains"].size(), 2u) << text;
  std::set<std::string> causes;
  for (const auto& c : j["chains"]) {
    causes.insert(c["root_cause"].get<std::string>());
    EXPECT_NEAR(c.value("share", 0.0), 0.5, 0.1) << text;
    for (const auto& ev : c["evidence"]) EXPECT_FALSE(ev.contains("episode_share")) << ev["text"];
  }
  EXPECT_EQ(causes, (std::set<std::string>{"lock_contention", "host_bound"})) << text;
}

// A job already running when `trace --pid` starts: its helper thread has the
// name it was given before the trace (read from /proc), its calls have their
// Python stacks from the first one traced, and no cold start is claimed.
TEST(Path, AJobTracedAfterItStartedHasItsNamesAndStacks) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run("CW_FAKE_SYNC_MS=8 /usr/bin/python3.11 " + kScript + " helper 700 " + kFakeCuda +
               " > /dev/null & P=$!; sleep 1.5; " + kBin + " trace --live off --pid $P --duration 3s --db " + db +
               " --lib " + kFakeCuda + "; wait $P");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM threads WHERE comm = 'cw_helper' AND what = 2"), 1);
  EXPECT_GT(query_int(tr, "SELECT count(*) FROM cuda_call_events WHERE op_id IN (SELECT id FROM ops WHERE name = "
                          "'cuStreamSynchronize') AND stack_id IS NOT NULL"),
            100);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM cuda_call_events WHERE op_id IN (SELECT id FROM ops WHERE name = "
                          "'cuStreamSynchronize') AND stack_id IS NULL"),
            0);
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  json j = json::parse(e.out);
  EXPECT_EQ(chain(j, "cold_start"), nullptr) << j["chains"];
  bool named = false;
  for (const auto& a : j["accounts"]) {
    named = named || a["name"] == "cw_helper";
    EXPECT_EQ(a["startup_ns"], 0) << a["name"];
  }
  EXPECT_TRUE(named) << j["accounts"];
}

// A warm-up compile of 2 s, then a 30-ms recompile before each of 50 steps
// (the main thread compiles, a worker runs the steps, as JAX does): the
// warm-up is in the judged time (the worker's steps began before it) and
// takes more of it than all the recompiles, but it happens once. The
// compilation chain names the line that recompiles (the warm-up's line
// before: jax:recompile on the H200, 2 of 2).
TEST(Path, ARecompileIsNamedWhereItRecursNotAtTheWarmUp) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = traced("warm-recompile", 50, &text, "CW_FAKE_SYNC_MS=2 ");
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "compilation") << text;
  EXPECT_EQ(c["frame"]["line"], marker("step_compile")) << text;
  // The warm-up's compiling is on the path, and more of it than the recompiles'.
  ASSERT_EQ(j["paths"].size(), 1u) << text;
  double warm = 0, recompile = 0;
  const std::string warm_at = kScript + ":" + std::to_string(marker("warm_compile"));
  const std::string step_at = kScript + ":" + std::to_string(marker("step_compile"));
  for (const auto& part : j["paths"][0]["parts"]) {
    if (part["class"] != "compile" || !part.contains("where")) continue;
    if (part["where"] == warm_at) warm += part["share"].get<double>();
    if (part["where"] == step_at) recompile += part["share"].get<double>();
  }
  EXPECT_GT(recompile, 0.1) << text;
  EXPECT_GT(warm, recompile) << text;
}
