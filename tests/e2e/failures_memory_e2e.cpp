// SPDX-License-Identifier: Apache-2.0
// Failing calls, GPU memory and hangs on real traces (real uprobes):
// - the real libcudart on a host with no driver: every call returns 35, and
//   explain says that nothing worked, first, instead of a performance story;
// - the stand-in libcuda (workloads/lib/cuda.c) with its memory capacity,
//   fault and hang switches, driven by workloads/py_gpu_faults.py from known
//   lines: out of memory, a leak, an illegal address, handles, a stalled call.
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kScript = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_gpu_faults.py";

int marker(const std::string& name) { return call_marker_line(kScript, name); }

struct Traced {
  TempDir dir;
  std::string db;
  RunResult trace;
  json explained;
};

std::unique_ptr<Traced> trace_faults(const std::string& env, const std::string& mode, int steps,
                                     const std::string& args = "", const std::string& script_args = "") {
  auto t = std::make_unique<Traced>();
  t->db = t->dir / "t.db";
  t->trace = run(env + " " + kBin + " trace --live off " + args + " --db " + t->db + " --lib " + kFakeCuda +
                 " -- /usr/bin/python3.11 " + kScript + " " + mode + " " + std::to_string(steps) + " " + kFakeCuda + " " +
                 script_args);
  auto e = run(kBin + " explain --json --db " + t->db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  t->explained = json::parse(e.out);
  return t;
}

constexpr int64_t kMiB = 1 << 20;

}  // namespace

TEST(Failures, NoDriverIsDiagnosedFirstAndAllocatesNothing) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/cuda_runtime_calls " + kCudart);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_NE(r.out.find("cudaStreamSynchronize returned 35"), std::string::npos) << r.out;
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  json j = json::parse(e.out);
  ASSERT_FALSE(j["chains"].empty()) << j;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "call_failures") << c;
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["evidence"][0]["nothing_worked"], true) << c;
  // 3 mallocs, 1 free, 3 copies, 1 memset, 6 launches, 2 syncs: every one returned 35.
  EXPECT_EQ(c["evidence"][0]["calls"], 16) << c;
  EXPECT_EQ(c["evidence"][1]["first_error"], "cudaErrorInsufficientDriver");
  EXPECT_EQ(c["evidence"][1]["first_code"], 35);
  EXPECT_EQ(c["evidence"][1]["kind"], "no_driver");
  EXPECT_EQ(c["evidence"][1]["failed"], 16);
  EXPECT_EQ(c["evidence"][1]["first_op"], "cudaMalloc");
  // No performance diagnosis of calls that never ran.
  EXPECT_EQ(chain(j, "allocator_churn"), nullptr) << j["chains"];
  for (const auto& x : j["chains"]) EXPECT_TRUE(x["root_cause"] == "call_failures" || x["root_cause"] == "data_loss") << x;
  // The failed allocations allocated nothing.
  ASSERT_EQ(j["memory"].size(), 1u) << j["memory"];
  EXPECT_EQ(j["memory"][0]["failed"], 3);
  EXPECT_EQ(j["memory"][0]["allocations"], 0);
  EXPECT_EQ(j["memory"][0]["allocated"], 0);
  EXPECT_EQ(j["memory"][0]["held_to"], 0);
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_allocations"), 0);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND ret = 35 AND addr IS NULL"), 3);
  // The asked sizes are kept on the failed rows: 1 MiB, 3 MiB, 12345 B.
  EXPECT_EQ(query_int(tr, "SELECT sum(bytes) FROM cuda_calls WHERE op = 'cudaMalloc'"), (1 << 20) + (3 << 20) + 12345);
  auto text = run(kBin + " explain --db " + db);
  EXPECT_NE(text.out.find("#1 CRITICAL call_failures"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("nothing worked"), std::string::npos) << text.out;
}

TEST(Failures, OutOfMemoryNamesTheAskingLineAndTheHolders) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace_faults("CW_FAKE_MEM_MB=1024 CW_FAKE_ALLOC_US_PER_MB=0", "oom", 1);
  EXPECT_NE(t->trace.out.find("command exited with status 1"), std::string::npos) << t->trace.out;
  const json& j = t->explained;
  ASSERT_FALSE(j["chains"].empty()) << j;
  const json& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "out_of_memory") << j["chains"];
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["evidence"][0]["failed"], 2);
  EXPECT_EQ(c["evidence"][0]["asked"], 600 * kMiB);
  EXPECT_EQ(c["evidence"][1]["held"], 768 * kMiB);
  const json& holders = c["evidence"][1]["holders"];
  ASSERT_EQ(holders.size(), 2u) << holders;
  const std::string file = kScript + ":";
  EXPECT_EQ(holders[0]["where"], file + std::to_string(marker("weights")) + " (load_weights)");
  EXPECT_EQ(holders[0]["bytes"], 512 * kMiB);
  EXPECT_EQ(holders[0]["allocations"], 2);
  EXPECT_EQ(holders[1]["where"], file + std::to_string(marker("cache")) + " (fill_cache)");
  EXPECT_EQ(holders[1]["bytes"], 256 * kMiB);
  // The cache was freed and the retry failed holding the weights only.
  EXPECT_EQ(c["evidence"][2]["frees_before_retry"], 1);
  EXPECT_EQ(c["evidence"][2]["held_at_retry"], 512 * kMiB);
  EXPECT_EQ(c["frame"]["func"], "forward");
  EXPECT_EQ(c["frame"]["line"], marker("ask"));
  ASSERT_EQ(j["memory"].size(), 1u);
  EXPECT_EQ(j["memory"][0]["allocations"], 3);
  EXPECT_EQ(j["memory"][0]["failed"], 2);
  EXPECT_EQ(j["memory"][0]["peak"], 768 * kMiB);
  EXPECT_EQ(j["memory"][0]["held_to"], 512 * kMiB);
}

TEST(Memory, ALeakIsNamedByItsLineAndSizesBalance) {
  CAUSEWAY_REQUIRE_ROOT();
  const int steps = 80;
  auto t = trace_faults("CW_FAKE_SYNC_MS=5 CW_FAKE_ALLOC_US_PER_MB=0", "leak", steps);
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  const json& j = t->explained;
  const json* c = chain(j, "memory_leak");
  ASSERT_NE(c, nullptr) << j["chains"];
  EXPECT_EQ(j["chains"][0]["root_cause"], "memory_leak") << j["chains"];
  // Judged from the end of start-up (the first step's synchronisation, its
  // first GPU work): the growth of the other steps.
  EXPECT_EQ((*c)["evidence"][0]["leaked"], int64_t(steps - 1) * 64 * kMiB);
  ASSERT_EQ((*c)["evidence"][1]["sites"].size(), 1u) << *c;  // the scratch buffer is freed each step
  EXPECT_EQ((*c)["evidence"][1]["sites"][0]["allocations"], steps);
  EXPECT_EQ((*c)["frame"]["func"], "leak");
  EXPECT_EQ((*c)["frame"]["line"], marker("leak"));
  // Every allocation and free paired: what is held is exactly the leak.
  ASSERT_EQ(j["memory"].size(), 1u);
  const json& m = j["memory"][0];
  EXPECT_EQ(m["allocations"], 2 * steps);
  EXPECT_EQ(m["frees"], steps);
  EXPECT_EQ(m["unmatched_frees"], 0);
  EXPECT_EQ(m["allocated"], int64_t(steps) * 96 * kMiB);
  EXPECT_EQ(m["freed"], int64_t(steps) * 32 * kMiB);
  EXPECT_EQ(m["held_to"], int64_t(steps) * 64 * kMiB);
  store::Connection tr(t->db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_allocations WHERE freed_ts_ns IS NULL"), steps);
  EXPECT_EQ(query_int(tr, "SELECT sum(bytes) FROM gpu_allocations WHERE freed_ts_ns IS NULL"), int64_t(steps) * 64 * kMiB);
  EXPECT_EQ(query_int(tr, "SELECT held_bytes FROM gpu_memory_timeline ORDER BY ts_ns DESC, delta LIMIT 1"),
            int64_t(steps) * 64 * kMiB);
}

TEST(Memory, PhysicalHandlesPairCreateWithRelease) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace_faults("CW_FAKE_ALLOC_US_PER_MB=0", "handles", 1);
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  store::Connection tr(t->db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_allocations WHERE op = 'cuMemCreate'"), 4);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_allocations WHERE freed_ts_ns IS NOT NULL"), 2);
  ASSERT_EQ(t->explained["memory"].size(), 1u);
  EXPECT_EQ(t->explained["memory"][0]["held_to"], 40 * kMiB);
  EXPECT_EQ(t->explained["memory"][0]["peak"], 80 * kMiB);
  EXPECT_EQ(t->explained["memory"][0]["held_by_site"][0]["where"],
            kScript + ":" + std::to_string(marker("create")) + " (handles)");
}

TEST(Failures, AnIllegalAddressIsOneIncidentNamingTheKernelAndItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  const int good = 10;
  auto t = trace_faults("CW_FAKE_FAULT_LAUNCH=" + std::to_string(good + 1) + " CW_FAKE_SYNC_MS=2", "fault", good);
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  EXPECT_NE(t->trace.out.find("sync returned 700"), std::string::npos) << t->trace.out;
  const json& j = t->explained;
  ASSERT_FALSE(j["chains"].empty());
  const json& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "call_failures") << j["chains"];
  EXPECT_EQ(c["severity"], "CRITICAL");
  // The faulting sync and the 3 allocations and 3 syncs after it.
  EXPECT_EQ(c["evidence"][0]["failed"], 7);
  EXPECT_EQ(c["evidence"][0]["first_error"], "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(c["evidence"][0]["first_op"], "cuCtxSynchronize");
  bool named = false;
  for (const auto& e : c["evidence"])
    if (e.contains("suspects")) {
      named = true;
      EXPECT_EQ(e["kernel"], "oob_write(float*, int)") << e;
      EXPECT_EQ(e["launch_where"], kScript + ":" + std::to_string(marker("oob_launch")));
    }
  EXPECT_TRUE(named) << c;
  EXPECT_EQ(c["frame"]["line"], marker("oob_launch"));
  int incidents = 0;
  for (const auto& x : j["chains"]) incidents += x["root_cause"] == "call_failures";
  EXPECT_EQ(incidents, 1);
}

TEST(Hangs, ACallInFlightPastTheThresholdIsReportedLiveWithItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  auto t = trace_faults("CW_FAKE_SYNC_MS=2500", "hang", 1, "--hang-after 1s");
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  EXPECT_NE(t->trace.out.find("cuCtxSynchronize has not returned after"), std::string::npos) << t->trace.out;
  store::Connection tr(t->db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls"), 1);
  EXPECT_GE(query_int(tr, "SELECT waited_ns FROM stalled_calls"), 1'000'000'000);
  EXPECT_LT(query_int(tr, "SELECT waited_ns FROM stalled_calls"), 2'500'000'000);
  // The call's own row, when it returned, has the same entry time.
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls s JOIN cuda_call_events c ON c.tid = s.tid AND"
                          " c.ts_ns = s.ts_ns WHERE c.dur_ns >= 2500000000"), 1);
  const json* c = chain(t->explained, "hung_call");
  ASSERT_NE(c, nullptr) << t->explained["chains"];
  EXPECT_EQ((*c)["frame"]["line"], marker("hang"));
  EXPECT_GE((*c)["evidence"][0]["returned_after_ns"].get<int64_t>(), 2'500'000'000);
}

// A sync that does not return (the stand-in's spins for 60 s) after 50 that
// did, traced for 8 s with the default --hang-after (30 s): when the trace
// stops the call is written in flight with its age, and judged hung by its
// baseline (thousands of times its op class's p50, and over 5 s): the first
// chain, CRITICAL, with its line. It was already reported live at 5 s.
TEST(Hangs, ACallInFlightWhenTheTraceStopsIsJudgedByItsBaseline) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run("CW_FAKE_SYNC_MS=60000 " + kBin + " trace --live off --duration 8s --db " + db + " --lib " + kFakeCuda +
               " -- /usr/bin/python3.11 " + kScript + " hang 50 " + kFakeCuda + " 2>&1; pkill -f 'py_gpu_faults.py hang'");
  EXPECT_NE(r.out.find("cuCtxSynchronize has not returned after"), std::string::npos) << r.out;
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls WHERE at_stop = 1"), 1);
  EXPECT_GE(query_int(tr, "SELECT waited_ns FROM stalled_calls WHERE at_stop = 1"), 6'000'000'000);
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  json j = json::parse(e.out);
  ASSERT_FALSE(j["chains"].empty());
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "hung_call") << j["chains"];
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["symptom"]["op"], "cuCtxSynchronize");
  EXPECT_EQ(c["frame"]["line"], marker("hang"));
  EXPECT_GE(c["evidence"][0]["waited_ns"].get<int64_t>(), 6'000'000'000);
  EXPECT_GT(c["evidence"][0]["baseline_p50_ns"].get<int64_t>(), 0);
  // The kernel before it, by the name read at cuModuleGetFunction's entry
  // (the name's buffer held other bytes once the call returned).
  bool kernel_named = false;
  for (const auto& ev : c["evidence"])
    kernel_named |= ev["text"].get<std::string>().find("the last kernels launched before it: spin_forever") !=
                    std::string::npos;
  EXPECT_TRUE(kernel_named) << c["evidence"];
}

// The same hang traced 3 s: in flight ~2.5 s when the trace stops, under
// the rule's 5 s, yet thousands of times the syncs before it, and the job
// made no call since: maybe hung (MEDIUM), with its line and what to do
// (trace longer). Calls merely slow at the stop are not named (unit:
// HangRule.AShortWaitAtTheStopIsMaybeHungOnlyWhenNothingLikeItReturned).
TEST(Hangs, AHangShorterThanFiveSecondsAtTheStopMayBeHung) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  auto r = run("CW_FAKE_SYNC_MS=60000 " + kBin + " trace --live off --duration 3s --db " + db + " --lib " + kFakeCuda +
               " -- /usr/bin/python3.11 " + kScript + " hang 50 " + kFakeCuda + "; pkill -f 'py_gpu_faults.py hang'");
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls WHERE at_stop = 1"), 1);
  EXPECT_LT(query_int(tr, "SELECT waited_ns FROM stalled_calls WHERE at_stop = 1"), 5'000'000'000);
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const json j = json::parse(e.out);
  ASSERT_FALSE(j["chains"].empty()) << e.out;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "hung_call") << j["chains"];
  EXPECT_EQ(c["severity"], "MEDIUM");
  EXPECT_EQ(c["symptom"]["op"], "cuCtxSynchronize");
  EXPECT_EQ(c["frame"]["line"], marker("hang"));
  EXPECT_EQ(c["evidence"][0]["unproven"], true);
  EXPECT_NE(c["symptom"]["summary"].get<std::string>().find("maybe hung"), std::string::npos) << c["symptom"];
}

// A job traced after it started hanging: its sync began 3 s before `trace
// --pid`, so no probe saw it enter. The agent finds it on the thread's stack
// when it attaches (a return address into the stand-in's cuCtxSynchronize,
// the Python line from the thread's frames), and explain names it first
// after a 6-s trace, far short of --hang-after: the process made no call
// since. Once as the stand-in's spin (a thread sampled while it runs), once
// as a blocking wait (a thread asleep in a system call).
// The job's sync begins 3 s before `trace --pid` for `seconds`: explain's
// output on the trace `db`.
json trace_a_job_hung_before(const std::string& env, int seconds, const std::string& db) {
  auto r = run(env + " CW_FAKE_SYNC_MS=60000 /usr/bin/python3.11 " + kScript + " hang 50 " + kFakeCuda +
               " > /dev/null & P=$!; sleep 3; " + kBin + " trace --live off --pid $P --duration " +
               std::to_string(seconds) + "s --db " + db + " --lib " + kFakeCuda + "; kill $P");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  auto e = run(kBin + " explain --json --db " + db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  return json::parse(e.out);
}

void expect_hang_before_the_trace(const std::string& env) {
  TempDir dir;
  const std::string db = dir / "t.db";
  const json j = trace_a_job_hung_before(env, 6, db);
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls WHERE entered_before = 1"), 1);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM stalled_calls WHERE entered_before = 1 AND op_id = (SELECT id FROM "
                          "ops WHERE name = 'cuCtxSynchronize') AND at_stop = 1 AND stack_id IS NOT NULL"),
            1);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM cuda_call_events"), 0);
  ASSERT_FALSE(j["chains"].empty()) << j;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "hung_call") << j["chains"];
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["symptom"]["op"], "cuCtxSynchronize");
  EXPECT_EQ(c["frame"]["line"], marker("hang"));
  EXPECT_EQ(c["evidence"][0]["entered_before"], true);
  // At least the trace's length; at most since the job started (it was asleep in it, or seen at the attach).
  EXPECT_GE(c["evidence"][0]["waited_ns"].get<int64_t>(), 5'900'000'000);
  EXPECT_LT(c["evidence"][0]["waited_ns"].get<int64_t>(), 12'000'000'000);
  EXPECT_NE(c["symptom"]["summary"].get<std::string>().find("since before the trace began"), std::string::npos);
}

TEST(Hangs, ACallSpinningSinceBeforeTheTraceIsFoundOnItsStack) {
  CAUSEWAY_REQUIRE_ROOT();
  expect_hang_before_the_trace("");
}

TEST(Hangs, ACallAsleepSinceBeforeTheTraceIsFoundOnItsStack) {
  CAUSEWAY_REQUIRE_ROOT();
  expect_hang_before_the_trace("CW_FAKE_SYNC_BLOCK=1");
}

// The same hung job traced for 3 s: the whole process made no call while
// traced, but 5 s of it were not seen. Not proven hung, and said: MEDIUM,
// its line, "trace it 5 s or more".
TEST(Hangs, AShortTraceOfAJobHungBeforeItSaysItMayBeHung) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const json j = trace_a_job_hung_before("", 3, dir / "t.db");
  ASSERT_FALSE(j["chains"].empty()) << j;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "hung_call") << j["chains"];
  EXPECT_EQ(c["severity"], "MEDIUM");
  EXPECT_EQ(c["frame"]["line"], marker("hang"));
  EXPECT_EQ(c["evidence"][0]["unproven"], true);
  EXPECT_LT(c["evidence"][0]["waited_ns"].get<int64_t>(), 5'000'000'000);
  EXPECT_NE(c["symptom"]["summary"].get<std::string>().find("maybe hung: trace it 5.00 s or more"), std::string::npos)
      << c["symptom"]["summary"];
}

// A healthy job traced after it started: its threads are between calls, or
// in short ones, when the trace attaches; none is written as begun before it.
TEST(Hangs, AHealthyJobTracedAfterItStartedHasNoCallFromBefore) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "t.db";
  const std::string loops = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_step_loops.py";
  auto r = run("CW_FAKE_SYNC_MS=8 /usr/bin/python3.11 " + loops + " helper 700 " + kFakeCuda +
               " > /dev/null & P=$!; sleep 1.5; " + kBin + " trace --live off --pid $P --duration 3s --db " + db +
               " --lib " + kFakeCuda + "; wait $P");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  store::Connection tr(db, store::Connection::Mode::ReadOnly);
  EXPECT_GT(query_int(tr, "SELECT count(*) FROM cuda_call_events"), 100);
  auto e = run(kBin + " explain --json --db " + db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  EXPECT_EQ(chain(json::parse(e.out), "hung_call"), nullptr) << e.out;
}

namespace {

// A FIFO that `trace --kmsg` reads as the kernel log; the workload writes the
// driver's lines into it with its own pid (no GPU here).
struct KmsgFifo {
  TempDir dir;
  std::string path = dir / "kmsg";
  KmsgFifo() { EXPECT_EQ(mkfifo(path.c_str(), 0600), 0); }
};

}  // namespace

TEST(Failures, AFaultInTheKernelLogIsJoinedToItsProcessWithTheLastKernelAndItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  KmsgFifo kmsg;
  auto t = std::make_unique<Traced>();
  t->db = t->dir / "t.db";
  t->trace = run(kBin + " trace --live off --kmsg " + kmsg.path + " --db " + t->db + " --lib " + kFakeCuda +
                 " -- /usr/bin/python3.11 " + kScript + " xid 5 " + kFakeCuda + " " + kmsg.path);
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  store::Connection tr(t->db, store::Connection::Mode::ReadOnly);
  const int64_t pid = query_int(tr, "SELECT pid FROM processes WHERE comm = 'python3.11'");
  // The kernel's XID lines, with their pid; not the other messages, not the
  // truncated line, not the one written from user space. The line naming a
  // process that does not exist is kept, and stops nothing.
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_events WHERE source = 'kmsg'"), 3) << t->trace.out;
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_events WHERE source = 'kmsg' AND code = 31 AND pid = " +
                              std::to_string(pid) + " AND process = 'python3' AND pci = '0000:3b:00'"),
            1);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_events WHERE code = 79"), 0);
  EXPECT_EQ(query_int(tr, "SELECT count(*) FROM gpu_events WHERE pid = 4194000"), 1);
  auto e = run(kBin + " explain --json --db " + t->db);
  ASSERT_EQ(e.exit_code, 0) << e.out;
  const json j = json::parse(e.out);
  ASSERT_FALSE(j["chains"].empty());
  const json& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "gpu_fault") << j["chains"];
  EXPECT_EQ(c["severity"], "CRITICAL");
  EXPECT_EQ(c["symptom"]["pid"], pid);
  EXPECT_EQ(c["evidence"][0]["xid"], 31);
  EXPECT_EQ(c["evidence"][1]["kernel"], "oob_write(float*, int)") << c;
  EXPECT_EQ(c["frame"]["line"], marker("xid_launch")) << c;
  // One incident: the XID 13 of the same fault (no pid) is not a chain of
  // its own. The other process's XID 43 is the GPU's story: gpu_health, that
  // XID alone, HIGH (an application fault, not this process's).
  int faults = 0;
  for (const auto& x : j["chains"]) {
    faults += x["root_cause"] == "gpu_fault";
    if (x["root_cause"] != "gpu_health") continue;
    EXPECT_EQ(x["severity"], "HIGH");
    EXPECT_EQ(x["symptom"]["summary"], "XID 43") << x;
  }
  EXPECT_EQ(faults, 1) << j["chains"];
}

TEST(Failures, AFaultBothLoggedAndFailingCallsIsOneIncident) {
  CAUSEWAY_REQUIRE_ROOT();
  KmsgFifo kmsg;
  const int good = 10;
  auto t = trace_faults("CW_FAKE_FAULT_LAUNCH=" + std::to_string(good + 1) + " CW_FAKE_SYNC_MS=2", "fault", good,
                        "--kmsg " + kmsg.path, kmsg.path);
  ASSERT_EQ(t->trace.exit_code, 0) << t->trace.out;
  const json& j = t->explained;
  ASSERT_FALSE(j["chains"].empty());
  const json& c = j["chains"][0];
  ASSERT_EQ(c["root_cause"], "call_failures") << j["chains"];
  bool folded = false;
  for (const auto& ev : c["evidence"]) folded = folded || (ev.contains("folded") && ev["folded"] == "gpu_fault");
  EXPECT_TRUE(folded) << c;
  for (const auto& x : j["chains"]) EXPECT_NE(x["root_cause"], "gpu_fault") << x;
}
