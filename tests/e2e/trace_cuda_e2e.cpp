// SPDX-License-Identifier: Apache-2.0
// `causeway trace` end to end on the real probes: the real libcudart.so.13
// (no GPU: calls fail with 35, arguments are real) and a stand-in libcuda
// with controlled durations. Every row asserted is one the workload made.
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <thread>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

struct Trace {
  TempDir dir;
  std::string db = dir / "trace.db";
  RunResult result;
  std::unique_ptr<store::Connection> conn;

  void run_command(const std::string& args, const std::string& command, const std::string& env = "") {
    result = e2e::run(env + kBin + " trace --live off --db " + db + " " + args + " -- " + command);
    ASSERT_EQ(result.exit_code, 0) << result.out;
    conn = std::make_unique<store::Connection>(db, store::Connection::Mode::ReadOnly);
  }
  int64_t count(const std::string& where) {
    return query_int(*conn, "SELECT count(*) FROM cuda_calls WHERE " + where);
  }
};

}  // namespace

TEST(TraceRuntime, RecordsEveryCallWithItsArguments) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  t.run_command("--launch-sampling off", kWorkloads + "/cuda_runtime_calls " + kCudart);
  const std::string pid_clause = "pid = (SELECT pid FROM processes WHERE comm = 'cuda_runtime_ca')";
  ASSERT_EQ(query_int(*t.conn, "SELECT count(*) FROM processes WHERE comm = 'cuda_runtime_ca'"), 1)
      << t.result.out;

  // cudaMalloc: three calls with the sizes the workload passed, each failing with 35.
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND layer = 'runtime'"), 3);
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes = 1048576 AND ret = 35"), 1);
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes = 3145728 AND ret = 35"), 1);
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes = 12345 AND ret = 35"), 1);
  EXPECT_EQ(t.count("op = 'cudaFree'"), 1);
  // Copies: bytes and direction from cudaMemcpyKind; the async one's stream.
  EXPECT_EQ(t.count("op = 'cudaMemcpy' AND bytes = 4096 AND kind = 'HtoD'"), 1);
  EXPECT_EQ(t.count("op = 'cudaMemcpy' AND bytes = 8192 AND kind = 'DtoH'"), 1);
  EXPECT_EQ(t.count("op = 'cudaMemcpyAsync' AND bytes = 65536 AND kind = 'DtoD' AND stream = 22136"), 1);
  EXPECT_EQ(t.count("op = 'cudaMemset' AND bytes = 777"), 1);
  // Launches: dims, shared memory, stream, kernel named from the host stub's symbol.
  EXPECT_EQ(t.count("op = 'cudaLaunchKernel'"), 5);
  EXPECT_EQ(t.count("op = 'cudaLaunchKernel' AND grid_x = 4 AND grid_y = 2 AND grid_z = 1 AND "
                    "block_x = 256 AND block_y = 1 AND block_z = 1 AND shared_mem = 1024 AND "
                    "stream = 22136 AND kernel = 'vector_add_stub'"),
            5);
  EXPECT_EQ(t.count("op = 'cudaLaunchKernelExC' AND grid_x = 64 AND block_x = 128 AND "
                    "block_y = 2 AND shared_mem = 2048 AND stream = 39612 AND kernel = 'softmax_stub'"),
            1);
  EXPECT_EQ(t.count("op = 'cudaStreamSynchronize' AND stream = 22136 AND ret = 35"), 1);
  EXPECT_EQ(t.count("op = 'cudaDeviceSynchronize'"), 1);
  // Nothing else reached the table from this process, and every row has a duration.
  EXPECT_EQ(t.count(pid_clause), 16);
  EXPECT_EQ(t.count(pid_clause + " AND dur_ns <= 0"), 0);
  // Exact kernel-side counters agree.
  EXPECT_EQ(query_int(*t.conn, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'"), 3);
  EXPECT_EQ(query_int(*t.conn, "SELECT errors FROM op_stats WHERE op = 'cudaMalloc'"), 3);
  EXPECT_EQ(query_int(*t.conn, "SELECT calls FROM op_stats WHERE op = 'cudaLaunchKernel'"), 5);
  EXPECT_EQ(query_int(*t.conn, "SELECT coalesce(sum(count), 0) FROM drops"), 0);
  // The session row says how and where this trace was taken.
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM sessions WHERE end_ts_ns >= start_ts_ns AND "
                               "command_line LIKE '%trace --live off%'"),
            1);
}

// Kernels before 6.6 have no uprobe_multi: one perf-event uprobe per function.
TEST(TraceRuntime, PerFunctionUprobesRecordTheSameCalls) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  t.run_command("--launch-sampling off", kWorkloads + "/cuda_runtime_calls " + kCudart,
                "CAUSEWAY_NO_UPROBE_MULTI=1 ");
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes IN (1048576, 3145728, 12345)"), 3);
  EXPECT_EQ(t.count("op = 'cudaLaunchKernel' AND kernel = 'vector_add_stub' AND grid_x = 4"), 5);
  EXPECT_EQ(query_int(*t.conn, "SELECT sum(calls) FROM op_stats"), 16);
}

// The default, --launch-sampling 64, on the real libcudart: the five launches
// (each failing fast with error 35, no GPU) are counted per kernel, with
// their errors, named from the __cudaRegisterFunction registration; only
// the first is a row.
TEST(TraceRuntime, DefaultSamplingCountsLaunchesPerKernel) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  t.run_command("", kWorkloads + "/cuda_runtime_calls " + kCudart);
  const std::string key =
      "op_id = 1 AND kernel_id = (SELECT id FROM kernels WHERE name = 'vector_add_stub')";
  EXPECT_EQ(query_int(*t.conn, "SELECT sum(calls) FROM launch_stats WHERE " + key), 5);
  EXPECT_EQ(query_int(*t.conn, "SELECT sum(errors) FROM launch_stats WHERE " + key), 5);
  EXPECT_EQ(query_int(*t.conn, "SELECT sum(calls) FROM launch_buckets WHERE " + key), 5);
  EXPECT_EQ(t.count("op = 'cudaLaunchKernel' AND kernel = 'vector_add_stub' AND grid_x = 4"), 1);
  EXPECT_EQ(query_int(*t.conn, "SELECT calls FROM op_stats WHERE op = 'cudaLaunchKernel'"), 5);
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes IN (1048576, 3145728, 12345)"), 3);
}

TEST(TraceDriver, DurationsAndKernelNamesFromHandles) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  t.run_command("--lib " + kFakeCuda, kWorkloads + "/cuda_driver_calls " + kFakeCuda);
  const int64_t ms = 1000000;
  EXPECT_EQ(t.count("op = 'cuLaunchKernel' AND layer = 'driver'"), 3);
  EXPECT_EQ(t.count("op = 'cuLaunchKernel' AND grid_x = 8 AND grid_y = 4 AND grid_z = 1 AND "
                    "block_x = 128 AND block_y = 1 AND block_z = 1 AND shared_mem = 5000 AND "
                    "stream = 153 AND kernel = 'matmul_bf16(float const*, float const*, float*, int)' "
                    "AND dur_ns >= " + std::to_string(5 * ms)),
            3);
  EXPECT_EQ(t.count("op = 'cuLaunchKernelEx' AND grid_x = 16 AND block_x = 64 AND shared_mem = 2000 "
                    "AND stream = 119 AND kernel = 'softmax_f(float*, int)' AND dur_ns >= " +
                    std::to_string(2 * ms)),
            1);
  EXPECT_EQ(t.count("op = 'cuMemAlloc' AND bytes = 20971520 AND ret = 0 AND dur_ns >= " +
                    std::to_string(20 * ms)),
            1);
  // A free reports the size of the allocation it releases.
  EXPECT_EQ(t.count("op = 'cuMemFree' AND bytes = 20971520"), 1);
  EXPECT_EQ(t.count("op = 'cuMemcpyHtoD' AND bytes = 4096 AND kind = 'HtoD'"), 1);
  EXPECT_EQ(t.count("op = 'cuCtxSynchronize' AND dur_ns >= " + std::to_string(50 * ms)), 1);
  EXPECT_EQ(t.count("op IN ('cuModuleGetFunction', 'cuLibraryGetKernel', 'cuKernelGetFunction')"), 3);
}

TEST(TraceHost, OffCpuIntervalsOverlapSlowCallsAndNameThePreemptor) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  t.run_command("--lib " + kFakeCuda,
                "env CW_FAKE_SYNC_MS=60 " + kWorkloads + "/offcpu_contention " + kFakeCuda + " 0");
  ASSERT_EQ(t.count("op = 'cuCtxSynchronize' AND dur_ns >= 60000000"), 3) << t.result.out;
  // Each slow sync was preempted by the busy loop sharing its CPU.
  const std::string overlapping =
      "SELECT count(*) FROM cuda_calls c WHERE c.op = 'cuCtxSynchronize' AND EXISTS ("
      " SELECT 1 FROM offcpu o WHERE o.tid = c.tid AND o.state = 'runnable' AND o.by_comm = 'cw_hog'"
      " AND o.ts_ns >= c.ts_ns AND o.ts_ns < c.ts_ns + c.dur_ns)";
  EXPECT_EQ(query_int(*t.conn, overlapping), 3);
  // The thread was off-CPU for a real share of each call (two tasks share one CPU).
  const int64_t off_in_calls = query_int(
      *t.conn,
      "SELECT sum(o.dur_ns) FROM offcpu o JOIN cuda_calls c ON o.tid = c.tid AND "
      "c.op = 'cuCtxSynchronize' AND o.ts_ns >= c.ts_ns AND o.ts_ns < c.ts_ns + c.dur_ns");
  const int64_t in_calls = query_int(*t.conn, "SELECT sum(dur_ns) FROM cuda_calls WHERE op = 'cuCtxSynchronize'");
  EXPECT_GT(off_in_calls * 5, in_calls) << off_in_calls << " of " << in_calls;
}

// A thread that sleeps 0.5 ms at a time on a CPU shared with a SCHED_FIFO hog
// (busy 2 ms of every 3): each timer wake-up that lands while the hog runs
// leaves the thread queued behind it until the hog sleeps. That tail is
// run-queue time (runq_ns) behind cw_hog, and the hog, interrupted by the
// timers mostly inside its own system calls, woke no one.
TEST(TraceHost, AThreadWokenBehindAHogWaitsForACpuAndTheHogWokeNoOne) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  const std::string script = t.dir / "queued.py";
  {
    std::ofstream f(script);
    f << "import ctypes, os, time\n"
         "os.sched_setaffinity(0, {0})\n"
         "hog = os.fork()\n"
         "if hog == 0:\n"
         "    ctypes.CDLL(None).prctl(15, b'cw_hog', 0, 0, 0)\n"
         "    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))\n"
         "    zero = os.open('/dev/zero', os.O_RDONLY)\n"
         "    while True:\n"
         "        end = time.monotonic() + 0.002\n"
         "        while time.monotonic() < end: os.read(zero, 1 << 20)\n"
         "        time.sleep(0.001)\n"
         "time.sleep(0.2)\n"
         "for _ in range(300): time.sleep(0.0005)\n"
         "os.kill(hog, 9)\n"
         "os.waitpid(hog, 0)\n";
  }
  t.run_command("", "python3 " + script);
  ASSERT_EQ(t.result.exit_code, 0) << t.result.out;
  const int64_t hog = query_int(*t.conn,
      "SELECT o.by_pid FROM offcpu_events o JOIN comms c ON c.id = o.by_comm_id WHERE c.name = 'cw_hog' LIMIT 1");
  ASSERT_GT(hog, 0) << t.result.out;
  const std::string main_thread = " o.tid = o.pid AND o.pid != " + std::to_string(hog);
  // Queued behind the hog after most of the wake-ups that found it running.
  const int64_t queued = query_int(*t.conn,
      "SELECT count(*) FROM offcpu_events o JOIN comms c ON c.id = o.by_comm_id WHERE" + main_thread +
      " AND o.state = 1 AND o.runq_ns > 0 AND o.runq_ns <= o.dur_ns AND c.name = 'cw_hog'");
  EXPECT_GE(queued, 50) << "of 300 sleeps, the hog running two thirds of the time";
  // No wake-up is the hog's: the sleeps' timers fire on its CPU while it
  // runs, mostly inside its reads (system calls), and a hard interrupt is
  // no task's doing wherever it lands.
  EXPECT_EQ(query_int(*t.conn, "SELECT count(*) FROM offcpu_events o WHERE" + main_thread +
                                   " AND o.waker_pid = " + std::to_string(hog)), 0);
}

TEST(TraceDiscovery, LibraryLoadedLateByDlopenIsFound) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  // A copy is a new file (inode) that no up-front discovery knows about.
  const std::string copy = t.dir / "libcudart.so.13";
  std::filesystem::copy_file(kCudart, copy);
  t.run_command("", kWorkloads + "/late_dlopen " + copy + " 2500");
  EXPECT_EQ(t.count("op = 'cudaMalloc' AND bytes = 424242"), 2) << t.result.out;
}

TEST(TraceDiscovery, ProcessStartedAfterTheTraceBeganIsTracedByComm) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "late.db";
  const std::string exe = dir / "cw_late_start";
  std::filesystem::copy_file(kWorkloads + "/cuda_runtime_calls", exe);
  pid_t tracer = fork();
  if (tracer == 0) {
    execl(kBin.c_str(), kBin.c_str(), "trace", "--live", "off", "--comm", "cw_late_start",
          "--duration", "6s", "--db", db.c_str(), (char*)nullptr);
    _exit(127);
  }
  // The trace file appears once the probes are attached.
  for (int i = 0; i < 100 && !std::filesystem::exists(db); i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(std::filesystem::exists(db));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto wl = e2e::run(exe + " " + kCudart);
  ASSERT_EQ(wl.exit_code, 0) << wl.out;
  int status = 0;
  waitpid(tracer, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store::Connection conn(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(conn, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND pid IN "
                            "(SELECT pid FROM processes WHERE comm = 'cw_late_start')"),
            3);
}

TEST(TracePrivileges, NonRootGetsTheMissingCapabilityAndNoFile) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  auto r = e2e::run("setpriv --reuid=65534 --regid=65534 --clear-groups " + kBin +
                    " trace --duration 1s --db " + (dir / "t.db"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("CAP_BPF"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.db"));
}


// The whole path through `causeway trace`: the traced command is registered
// with the Python walker, and each call's stack is stored innermost first.
TEST(TracePython, CallsCarryTheirPythonStackThroughTrace) {
  CAUSEWAY_REQUIRE_ROOT();
  Trace t;
  const std::string script = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_cuda_calls.py";
  t.run_command("", "/usr/bin/python3.11 " + script + " " + kCudart);
  const std::string first_malloc =
      "(SELECT stack_id FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 1048576 ORDER BY ts_ns LIMIT 1)";
  auto frames = t.conn->prepare("SELECT func, file, line FROM stack_frames WHERE kind = 'python' AND stack_id = " +
                                first_malloc + " ORDER BY depth");
  std::vector<std::string> got;
  while (frames.step())
    got.push_back(frames.col_text(0) + ":" + std::to_string(frames.col_int(2)) +
                  (frames.col_text(1) == script ? "" : " in " + frames.col_text(1)));
  const std::vector<std::string> want = {
      "alloc:" + std::to_string(call_marker_line(script, "alloc")),
      "nested_inner:" + std::to_string(call_marker_line(script, "nested_inner")),
      "nested_outer:" + std::to_string(call_marker_line(script, "nested_outer")),
  };
  ASSERT_GE(got.size(), want.size()) << t.result.out;
  EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 3), want);
  EXPECT_EQ(got.back().rfind("<module>:", 0), 0u) << got.back();
}
