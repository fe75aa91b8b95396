// SPDX-License-Identifier: Apache-2.0
// `causeway trace -- python ...` end to end: the Python process is registered
// with the frame walker by trace itself, stacks go through the consumer into
// the trace file, and SQL over stack_frames gives the exact chain of each call.
#include <filesystem>
#include <fstream>

#include "e2e_util.h"
#include "reliability_util.h"
#include "causeway/events.h"
#include "python_expect.h"

using namespace causeway;
using namespace causeway::e2e;
namespace fs = std::filesystem;

namespace {

struct PyTrace {
  TempDir dir;
  std::string db = dir / "trace.db";
  std::unique_ptr<store::Connection> conn;

  void run(const std::string& args, const std::string& command) {
    auto r = e2e::run(kBin + " trace --live off --db " + db + " " + args + " -- " + command);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    conn = std::make_unique<store::Connection>(db, store::Connection::Mode::ReadOnly);
  }
  // (op, stack_id or -1) of every recorded call, in call order
  std::vector<std::pair<std::string, int64_t>> calls() {
    std::vector<std::pair<std::string, int64_t>> out;
    auto st = conn->prepare("SELECT op, coalesce(stack_id, -1) FROM cuda_calls ORDER BY ts_ns");
    while (st.step()) out.emplace_back(st.col_text(0), st.col_int(1));
    return out;
  }
  std::vector<py::Frame> python_frames(int64_t stack_id, const std::string& file) {
    std::vector<py::Frame> out;
    auto st = conn->prepare("SELECT func, file, coalesce(line, -1) FROM stack_frames WHERE kind = 'python' "
                            "AND stack_id = ?1 ORDER BY depth");
    st.bind(1, stack_id);
    while (st.step()) {
      std::string f = st.col_text(1) == file ? st.col_text(0) : st.col_text(1) + ":" + st.col_text(0);
      out.push_back({f, int(st.col_int(2))});
    }
    return out;
  }
};

// The chain of every call, as stored; `file` is the script as the process saw it.
void check_trace(PyTrace& t, int minor, const std::string& file) {
  auto calls = t.calls();
  ASSERT_EQ(calls.size(), 6u);
  auto want = py::main_thread_calls(minor);
  for (size_t i = 0; i < want.size(); i++) {
    SCOPED_TRACE("call " + std::to_string(i));
    EXPECT_EQ(calls[i].first, want[i].first);
    ASSERT_GE(calls[i].second, 0) << "no stack";
    EXPECT_EQ(py::show(t.python_frames(calls[i].second, file)), py::show(want[i].second));
    // frame 0 is the API function itself, in libcudart
    EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM stack_frames WHERE depth = 0 AND kind = 'native' AND "
                                 "module LIKE '%libcudart.so.13' AND func = '" + want[i].first +
                                 "' AND stack_id = " + std::to_string(calls[i].second)),
              1);
  }
  EXPECT_EQ(calls[3].second, calls[4].second);  // one call site, one stored stack
  // The calls' stacks (CPU samples store the stacks they caught too).
  EXPECT_EQ(query_int(*t.conn, "SELECT count(DISTINCT stack_id) FROM cuda_call_events"), 5);
  EXPECT_EQ(calls[5].first, "cudaFree");
  auto worker = t.python_frames(calls[5].second, file);
  ASSERT_GE(worker.size(), 2u);
  EXPECT_EQ(worker[0].func, "worker");
  EXPECT_EQ(worker[0].line, py::call_lines()["worker"]);
  EXPECT_TRUE(worker[1].func.ends_with(minor >= 11 ? "threading.py:Thread.run" : "threading.py:run"))
      << py::show(worker);
}

}  // namespace

// --delay: trace registers a new process at its first maps rescan, a few ms
// after exec; the delay keeps a loaded CI machine from racing the first call.
TEST(TracePython, StacksOfPython311CallsInTheTraceFile) {
  CAUSEWAY_REQUIRE_ROOT();
  PyTrace t;
  t.run("", "/usr/bin/python3.11 " + py::kScript + " --delay 0.2 " + kCudart);
  check_trace(t, 11, py::kScript);
}

TEST(TracePython, StacksOfPython314InAChroot) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string root = py::kCache + "/sid";
  if (!fs::exists(root + "/.ready")) {
    ASSERT_EQ(std::system((std::string(CAUSEWAY_SOURCE_DIR) + "/tests/python/setup_pythons.sh sid").c_str()), 0);
  }
  fs::create_directories(root + "/tmp/cw");
  fs::copy_file(kCudart, root + "/tmp/cw/libcudart.so.13", fs::copy_options::overwrite_existing);
  fs::copy_file(py::kScript, root + "/tmp/cw/py_cuda_calls.py", fs::copy_options::overwrite_existing);
  PyTrace t;
  t.run("", "chroot " + root + " python3.14 /tmp/cw/py_cuda_calls.py --delay 0.2 /tmp/cw/libcudart.so.13");
  check_trace(t, 14, "/tmp/cw/py_cuda_calls.py");
}

TEST(TracePython, NoStacksMeansNoStackRows) {
  CAUSEWAY_REQUIRE_ROOT();
  PyTrace t;
  t.run("--no-stacks", "/usr/bin/python3.11 " + py::kScript + " --delay 0.2 " + kCudart);
  auto calls = t.calls();
  ASSERT_EQ(calls.size(), 6u);
  for (const auto& c : calls) EXPECT_EQ(c.second, -1) << c.first;
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM stack_frames"), 0);
}

// A launch is captured at return (the interpreter is still in the same call),
// when at least --pystack-launch-min slow (1ns catches it, 10s not) or when
// it is one of the launch rows that sampling keeps.
TEST(TracePython, SlowLaunchesGetTheirStackAtReturn) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string cmd = "/usr/bin/python3.11 " + py::kScript + " --delay 0.2 --launch " + kCudart;
  auto L = py::call_lines();
  PyTrace t;
  t.run("--pystack-launch-min 1ns", cmd);
  auto calls = t.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].first, "cudaLaunchKernel");
  ASSERT_GE(calls[0].second, 0);
  EXPECT_EQ(py::show(t.python_frames(calls[0].second, py::kScript)),
            py::show({{"launch", L["launch"]}, {"<module>", L["launch_module"]}}));

  // Every launch a row (no sampling): only slow ones get a stack.
  PyTrace fast;
  fast.run("--pystack-launch-min 10s --launch-sampling off", cmd);
  calls = fast.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].second, -1);
  // Sampled (the default): the sampled rows get their stack whatever their
  // duration (the first launch of a kernel is always sampled).
  PyTrace sampled;
  sampled.run("--pystack-launch-min 10s", cmd);
  calls = sampled.calls();
  ASSERT_EQ(calls.size(), 1u);
  ASSERT_GE(calls[0].second, 0);
  EXPECT_EQ(py::show(sampled.python_frames(calls[0].second, py::kScript)),
            py::show({{"launch", L["launch"]}, {"<module>", L["launch_module"]}}));
}

// Two sessions in one trace file: each keeps its own stacks (ids do not collide).
TEST(TracePython, SessionsInOneFileKeepTheirOwnStacks) {
  CAUSEWAY_REQUIRE_ROOT();
  PyTrace t;
  const std::string cmd = "/usr/bin/python3.11 " + py::kScript + " --delay 0.2 " + kCudart;
  t.run("", cmd);
  // The calls' stacks (the CPU samples' stacks come and go with timing).
  const std::string call_frames =
      "SELECT count(*) FROM stack_frames WHERE stack_id IN (SELECT stack_id FROM cuda_call_events)";
  const int64_t frames = query_int(*t.conn, call_frames);
  ASSERT_GT(frames, 0);
  t.conn.reset();
  t.run("", cmd);
  EXPECT_EQ(query_int(*t.conn, call_frames), 2 * frames);
  EXPECT_EQ(query_int(*t.conn, "SELECT count(DISTINCT stack_id) FROM cuda_call_events"), 10);
  // every call of each session points at a stack whose innermost frame is its own function
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM cuda_calls c JOIN stack_frames f ON f.stack_id = c.stack_id "
                               "AND f.depth = 0 WHERE f.func = c.op"),
            12);
  EXPECT_EQ(query_int(*t.conn, "SELECT count(DISTINCT session_id) FROM cuda_calls"), 2);
}

// A Python process that calls libcudart and exits at once (os._exit right
// after its last call): `trace` keeps every call's Python stack, its native
// stack and the process's command line, all captured in the kernel before
// the process could go.
TEST(TracePython, AProcessThatExitsRightAfterItsCallsKeepsStacksAndCommandLine) {
  CAUSEWAY_REQUIRE_ROOT();
  PyTrace t;
  const std::string cmd = "/usr/bin/python3.11 " + py::kScript + " --delay 0.2 --exit-now " + kCudart;
  t.run("", cmd);
  check_trace(t, 11, py::kScript);
  auto st = t.conn->prepare("SELECT p.cmdline, p.comm, p.exit_code FROM processes p "
                            "WHERE p.pid = (SELECT DISTINCT pid FROM cuda_calls)");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.col_text(0), cmd);
  EXPECT_EQ(st.col_text(1), "python3.11");
  EXPECT_EQ(st.col_int(2), 0);
}

// The same under whole-host tracing (no filter): the process's identity comes
// from its first traced call, recorded in the kernel.
TEST(TracePython, WholeHostTracingNamesAShortLivedProcess) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "host.db";
  BackgroundTrace trace({"--log-level", "info", "--live", "off", "--db", db}, dir / "trace.log");
  // Attached once it says it probes libcudart.
  ASSERT_TRUE(trace.wait_for_log("libcudart.so.13")) << trace.log();
  const std::string script = dir / "short.py";
  {
    std::ofstream f(script);
    f << "import ctypes, os\n"
         "cudart = ctypes.CDLL('" << kCudart << "')\n"
         "def alloc():\n"
         "    p = ctypes.c_void_p()\n"
         "    return cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(4096))  # line 5\n"
         "alloc()  # line 6\n"
         "os._exit(0)\n";
  }
  auto r = run("/usr/bin/python3.11 " + script + " first-arg 'second arg'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(trace.pid(), SIGINT);
  ASSERT_EQ(trace.wait(), 0) << trace.log();
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto st = c.prepare("SELECT p.cmdline, c.stack_id FROM cuda_calls c JOIN processes p USING (pid) "
                      "WHERE c.op = 'cudaMalloc' AND c.bytes = 4096");
  ASSERT_TRUE(st.step()) << trace.log();
  EXPECT_EQ(st.col_text(0), "/usr/bin/python3.11 " + script + " first-arg second arg");
  ASSERT_FALSE(st.col_null(1)) << "no stack";
  const int64_t stack = st.col_int(1);
  EXPECT_FALSE(st.step()) << "one call";
  // Without the walker's registration (it ran too briefly), the native stack
  // still names the call; with it, the Python lines are there too.
  EXPECT_EQ(query_int(c, "SELECT count(*) FROM stack_frames WHERE stack_id = " + std::to_string(stack) +
                             " AND depth = 0 AND func = 'cudaMalloc' AND module LIKE '%libcudart.so.13'"),
            1);
}

// A top-speed flood of calls that each carry a 40-deep Python stack: nothing
// is lost or shed, every row has its stack, and the stack is the loop's line.
TEST(TracePython, ATopSpeedFloodWithDeepStacksLosesNothing) {
  CAUSEWAY_REQUIRE_ROOT();
  const std::string flood = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_sync_flood.py";
  int sync_line = 0, recurse_line = 0;
  {
    std::ifstream in(flood);
    std::string l;
    for (int n = 1; std::getline(in, l); n++) {
      if (l.find("# CALL: sync") != std::string::npos) sync_line = n;
      if (l.find("# CALL: recurse") != std::string::npos) recurse_line = n;
    }
  }
  ASSERT_GT(sync_line, 0);
  constexpr int kCalls = 100000;
  PyTrace t;
  auto r = e2e::run(kBin + " trace --live off --db " + t.db + " -- /usr/bin/python3.11 " + flood + " " +
                    std::to_string(kCalls) + " 40 " + kCudart);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::printf("%s\n", r.out.substr(0, r.out.find('\n')).c_str());  // the rate it reached
  t.conn = std::make_unique<store::Connection>(t.db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(*t.conn, "SELECT calls FROM op_stats WHERE op = 'cudaStreamSynchronize'"), kCalls);
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaStreamSynchronize'"), kCalls);
  EXPECT_EQ(query_int(*t.conn, "SELECT coalesce(sum(count), 0) FROM drops"), 0) << r.out;
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaStreamSynchronize' "
                               "AND stack_id IS NULL"), 0);
  ASSERT_EQ(query_int(*t.conn, "SELECT count(DISTINCT stack_id) FROM cuda_calls "
                               "WHERE op = 'cudaStreamSynchronize'"), 1);
  const int64_t stack = query_int(*t.conn, "SELECT stack_id FROM cuda_calls LIMIT 1");
  auto frames = t.python_frames(stack, flood);
  ASSERT_EQ(frames.size(), size_t(CW_PY_MAX_FRAMES)) << py::show(frames);  // the walker's cap
  EXPECT_EQ(frames[0].func, "deep");
  EXPECT_EQ(frames[0].line, sync_line);
  for (size_t i = 1; i < frames.size(); i++) {
    EXPECT_EQ(frames[i].func, "deep");
    EXPECT_EQ(frames[i].line, recurse_line);
  }
}

// A call site's stack is walked a few times and then found by its
// fingerprint (the top three Python frames and the return address). Two call
// paths that differ only in their outermost frame (the same deep chain, at
// the same addresses, entered from two lines) share a fingerprint: the
// second call's recheck finds another stack and the site is walked from then
// on, so every call keeps its own stack (without the recheck, 599 of the 600
// went to one line).
TEST(TracePython, CallsFromTwoPathsThatDifferOnlyAtTheBottomKeepTheirStacks) {
  CAUSEWAY_REQUIRE_ROOT();
  PyTrace t;
  const std::string script = t.dir / "paths.py";
  std::ofstream(script) << "import ctypes, sys\n"
                           "lib = ctypes.CDLL(sys.argv[1])\n"
                           "p = ctypes.c_void_p()\n"
                           "def alloc():\n"
                           "    lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(256))\n"
                           "def deep(n):\n"
                           "    return alloc() if n == 0 else deep(n - 1)\n"
                           "for i in range(300):\n"
                           "    deep(6)  # CALL: a\n"
                           "    deep(6)  # CALL: b\n";
  t.run("--lib " + kCudart, "/usr/bin/python3.11 " + script + " " + kCudart);
  // Each call's outermost Python frame: the line it came from.
  auto st = t.conn->prepare(
      "SELECT f.line, count(*) FROM cuda_calls c JOIN stack_frames f ON f.stack_id = c.stack_id "
      "WHERE c.op = 'cudaMalloc' AND f.kind = 'python' AND f.func = '<module>' GROUP BY f.line ORDER BY f.line");
  std::vector<std::pair<int64_t, int64_t>> lines;
  while (st.step()) lines.emplace_back(st.col_int(0), st.col_int(1));
  const std::vector<std::pair<int64_t, int64_t>> want{{call_marker_line(script, "a"), 300},
                                                      {call_marker_line(script, "b"), 300}};
  EXPECT_EQ(lines, want);
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc'"), 600);
  // Two stacks, walked and sent once each.
  EXPECT_EQ(query_int(*t.conn, "SELECT count(DISTINCT stack_id) FROM cuda_calls WHERE op = 'cudaMalloc'"), 2);
}
