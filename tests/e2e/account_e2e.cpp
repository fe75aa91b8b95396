// SPDX-License-Identifier: Apache-2.0
// The time account and the rules on it, on real traces (real uprobes on the
// stand-in libcuda, whose calls succeed; real scheduler tracepoints): a loop that waits for its
// input from CPU-bound worker processes is input_bound with the workers
// named; a loop that computes in Python between its calls is host_bound.
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kScript = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_step_loops.py";

int marker(const std::string& name) { return call_marker_line(kScript, name); }

json explain_run(const std::string& mode, int steps, std::string* text = nullptr, const std::string& env = "",
                 const std::string& args = "", int64_t* gpu_rows = nullptr) {
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(env + kBin + " trace --live off " + args + " --db " + db + " --lib " + kFakeCuda +
               " -- /usr/bin/python3.11 " + kScript + " " + mode + " " + std::to_string(steps) + " " + kFakeCuda);
  if (gpu_rows) {
    store::Connection c(db, store::Connection::Mode::ReadOnly);
    *gpu_rows = query_int(c, "SELECT count(*) FROM gpu_samples WHERE util_gpu = 12 AND gpu = 0");
  }
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto e = run(kBin + " explain --json --db " + db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  if (text) *text = run(kBin + " explain --db " + db).out;
  return json::parse(e.out);
}

}  // namespace

TEST(Account, AThreadWaitingForWorkerProcessesIsInputBound) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  // 100 steps: waiting for the first batch is start-up (no GPU work before
  // it), and the rest must be over a second to be judged.
  json j = explain_run("input-bound", 100, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  EXPECT_EQ(j["chains"][0]["root_cause"], "input_bound") << text;
  const json* c = chain(j, "input_bound");
  ASSERT_NE(c, nullptr) << text;
  // The account: the loop thread asleep most of each step, woken by the workers.
  ASSERT_EQ(j["accounts"].size(), 1u);
  const json& a = j["accounts"][0];
  EXPECT_GE(a["syncs"], 99 * 5);  // the first step's syncs may end start-up
  EXPECT_LE(a["syncs"], 100 * 5);
  EXPECT_GE(a["steps"], 90) << a;
  EXPECT_GT(a["per_step_ns"]["input"].get<double>(), 0.5 * a["step_ns"].get<double>()) << a;
  // The wakers are the two worker processes, by their name, as children.
  ASSERT_GE(a["wakers"].size(), 2u) << a;
  int workers = 0;
  for (const auto& w : a["wakers"]) {
    EXPECT_EQ(w["name"], "cw_loader") << w;
    EXPECT_TRUE(w["child"].get<bool>()) << w;
    workers++;
  }
  EXPECT_EQ(workers, 2);
  EXPECT_NE(flat(text).find("2 worker processes cw_loader"), std::string::npos) << text;
  // The path goes into the workers: the line is where their time goes (the
  // "decoding" loop they burn the CPU in), not where the loop resumes.
  ASSERT_TRUE(c->contains("frame") && !(*c)["frame"].is_null()) << *c;
  EXPECT_EQ((*c)["frame"]["func"], "cw_loader: burn");
  EXPECT_GE((*c)["frame"]["line"].get<int>(), marker("burn_loop"));
  EXPECT_LE((*c)["frame"]["line"].get<int>(), marker("burn_loop") + 1);
}

// With NVML (the stand-in library, reporting the GPU 12% busy): samples are
// in the trace and the account says how busy the GPU was.
TEST(Account, AThreadComputingInPythonIsHostBound) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  int64_t gpu_rows = 0;
  json j = explain_run("host-bound", 60, &text, "CW_FAKE_NVML='gpus=1;util=12' ",
                       "--nvml-lib " + kBuild + "/workloads/lib/libnvidia-ml.so.1", &gpu_rows);
  EXPECT_GE(gpu_rows, 2) << "one sample a second, and one at the start and the end";
  ASSERT_FALSE(j["chains"].empty()) << text;
  EXPECT_EQ(j["chains"][0]["root_cause"], "host_bound") << text;
  EXPECT_EQ(j["chains"][0]["severity"], "HIGH") << text;
  ASSERT_EQ(j["accounts"].size(), 1u);
  const json& a = j["accounts"][0];
  EXPECT_EQ(a["syncs"], 60 * 5);
  EXPECT_GE(a["steps"], 50) << a;
  EXPECT_GT(a["per_step_ns"]["on_cpu"].get<double>(), 0.7 * a["step_ns"].get<double>()) << a;
  EXPECT_EQ(a["step_marker"], "cuStreamSynchronize at " + kScript + ":" + std::to_string(marker("step_end")));
  EXPECT_DOUBLE_EQ(a["gpu_busy"].get<double>(), 0.12);
  // The wrap once fell inside it (an "other CUDA calls 1.1%" part before it).
  EXPECT_NE(flat(text).find("| GPU 12% busy"), std::string::npos) << text;
  // Where the host time goes, by the thread's CPU samples: inside burn(),
  // the Python loop the step calls at its `prepare` line.
  const json& c = j["chains"][0];
  ASSERT_FALSE(c["frame"].is_null()) << c;
  EXPECT_EQ(c["frame"]["func"], "burn") << c;
  EXPECT_GE(c["frame"]["line"].get<int>(), marker("burn_loop")) << c;
  EXPECT_LE(c["frame"]["line"].get<int>(), marker("burn_loop") + 1) << c;
  // The path: the loop thread's own time at that line, most of each step.
  ASSERT_EQ(j["paths"].size(), 1u);
  const json& top = j["paths"][0]["parts"][0];
  EXPECT_EQ(top["class"], "on_cpu") << j["paths"][0]["text"];
  EXPECT_EQ(top["func"], "burn") << j["paths"][0]["text"];
  EXPECT_GT(c["share"].get<double>(), 0.7) << c;
}

// .item() in an inner loop, and no outer sync: the step marker is the copy
// back itself (one per "step"), so the rate tells the storm; the Python work
// between the syncs is the loop around them, told by sync_bound, not
// host_bound.
TEST(Account, ScalarsReadBackInAnInnerLoopAreSyncBound) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = explain_run("sync-storm", 200, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "sync_bound") << text;
  ASSERT_EQ(j["accounts"].size(), 1u);
  // Each .item() here is a 4-byte blocking copy back and a synchronisation:
  // both synchronise.
  EXPECT_EQ(j["accounts"][0]["syncs"], 2 * 200 * 300) << j["accounts"][0];
  ASSERT_FALSE(c["frame"].is_null()) << c;
  // The .item(): its copy back (the line before) or its sync.
  EXPECT_GE(c["frame"]["line"].get<int>(), marker("item") - 1) << c;
  EXPECT_LE(c["frame"]["line"].get<int>(), marker("item")) << c;
  EXPECT_EQ(chain(j, "host_bound"), nullptr) << text;
}

// The live view (lines, as under systemd) shows the thread's account over the
// last 10 s while the loop runs, from a periodic explain.
TEST(Account, TheLiveViewShowsEachThreadsAccountWhileTracing) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  auto r = run(kBin + " trace --live lines --explain-every 1s --db " + (dir / "t.db") + " --lib " + kFakeCuda +
               " -- /usr/bin/python3.11 " + kScript + " host-bound 400 " + kFakeCuda);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto at = r.out.find("causeway: last 10.0 s:\n");
  ASSERT_NE(at, std::string::npos) << r.out;
  // "  <pid>/<pid> python3.11: step 20.2 ms (x240): on-CPU outside CUDA 99%"
  std::istringstream lines(r.out.substr(at));
  std::string head, thread;
  std::getline(lines, head);
  std::getline(lines, thread);
  EXPECT_NE(thread.find(" python3.11: step "), std::string::npos) << r.out;
  // On-CPU outside CUDA is most of a step when the loop has a CPU to itself;
  // on a loaded machine "runnable" takes the larger share (and the chain
  // that follows may change): both are this loop's truth. The chain lines'
  // format: unit test LiveView.RecentLinesNameEachThreadAndChain.
  EXPECT_NE(thread.find(" on-CPU outside CUDA "), std::string::npos) << r.out;
  EXPECT_EQ(thread.rfind("  ", 0), 0u) << r.out;
  EXPECT_NE(thread.find("/"), std::string::npos) << r.out;
}

// A process that only starts (module loads with Python work between them, as
// imports and model building are) and exits: start-up, not host-bound time.
TEST(Account, StartUpIsNeverHostBound) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = explain_run("startup", 40, &text);
  EXPECT_EQ(chain(j, "host_bound"), nullptr) << text;
  ASSERT_EQ(j["accounts"].size(), 1u) << text;
  const json& a = j["accounts"][0];
  EXPECT_GE(a["startup_ns"].get<int64_t>(), 2'000'000'000) << a;
  EXPECT_EQ(a["covered_ns"], 0) << a;
  EXPECT_NE(text.find("start-up "), std::string::npos) << text;
}

// The main thread compiles each step (30 ms of CPU, a module load) and a
// worker runs it, as JAX does with a shape that changes every step: the main
// thread has no step of its own, and its loads never stop. Start-up ends
// where the worker's steps begin (it used to last to the end: no chain);
// the main thread's compiling is the step's path.
TEST(Account, LoadsAfterAnotherThreadsStepsBeganAreNotStartUp) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = explain_run("recompile-threads", 80, &text);
  ASSERT_EQ(j["accounts"].size(), 2u) << text;
  int64_t main_startup = -1, worker_steps = 0;
  for (const auto& a : j["accounts"]) {
    if (a["tid"] == a["pid"]) main_startup = a["startup_ns"].get<int64_t>();
    else worker_steps = a["steps"].get<int64_t>();
  }
  EXPECT_GE(worker_steps, 70) << text;
  EXPECT_GE(main_startup, 0) << text;
  EXPECT_LT(main_startup, 500'000'000) << text;
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "host_bound") << text;
  EXPECT_GE(c["frame"]["line"].get<int>(), marker("burn_loop")) << text;  // the loop's test or its body
  EXPECT_LE(c["frame"]["line"].get<int>(), marker("burn_loop") + 1) << text;
}

// An import that computes for 2.5 s after the first step's GPU work (an
// optimizer's first step importing torch._dynamo) is start-up: the seconds
// whose samples are inside an import extend it. No host_bound. (Whole
// seconds of samples: the import's last, partly spent in it, may not count,
// so start-up ends up to a second short of the import's end; without the
// extension it would end at the first GPU work, well under 1 s in.)
TEST(Account, ImportsAfterTheFirstGpuWorkAreStartUp) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = explain_run("late-import", 100, &text);
  EXPECT_EQ(chain(j, "host_bound"), nullptr) << text;
  ASSERT_EQ(j["accounts"].size(), 1u) << text;
  const json& a = j["accounts"][0];
  EXPECT_GE(a["startup_ns"].get<int64_t>(), 1'500'000'000) << a;
  EXPECT_LE(a["startup_ns"].get<int64_t>(), 4'000'000'000) << a;
  EXPECT_GE(a["steps"], 50) << a;
}

// Steps whose calls change from one to the next (a different number of
// buffers of different sizes, no sync): the line that recurs marks them.
TEST(Account, StepsAreFoundByTheirLineWhenTheirCallsVary) {
  CAUSEWAY_REQUIRE_ROOT();
  std::string text;
  json j = explain_run("vary", 200, &text, "CW_FAKE_ALLOC_US_PER_MB=2000 ");
  ASSERT_EQ(j["accounts"].size(), 1u) << text;
  const json& a = j["accounts"][0];
  EXPECT_GE(a["steps"], 150) << a;
  EXPECT_LE(a["steps"], 200) << a;
  // Either of the loop's lines marks it: the allocations' (a burst of 2 to 6
  // a step) or the frees'.
  const std::string m = a["step_marker"];
  EXPECT_TRUE(m == kScript + ":" + std::to_string(marker("vary_alloc")) ||
              m == kScript + ":" + std::to_string(marker("vary_free")))
      << a;
  ASSERT_FALSE(j["chains"].empty()) << text;
  EXPECT_EQ(j["chains"][0]["root_cause"], "allocator_churn") << text;
  // The line that gives the memory back is the one to change; the line that
  // asks for it again is said beside it.
  EXPECT_EQ(j["chains"][0]["frame"]["line"], marker("vary_free")) << text;
  bool both = false;
  for (const auto& e : j["chains"][0]["evidence"])
    if (e.contains("allocated_at"))
      both = e["allocated_at"] == kScript + ":" + std::to_string(marker("vary_alloc")) &&
             e["freed_at"] == kScript + ":" + std::to_string(marker("vary_free"));
  EXPECT_TRUE(both) << j["chains"][0]["evidence"];
}
