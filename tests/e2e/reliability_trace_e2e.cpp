// SPDX-License-Identifier: Apache-2.0
// Reliability of `causeway trace` and its file under stress: floods that
// overflow the ring, the tracer killed or interrupted mid-run, a second
// writer, a full disk, size-bounded retention, and targets that exit mid-call,
// exec, fork, dlopen/dlclose or have their library replaced on disk. Every
// count asserted is one the workload is known to have made.
#include <sys/mount.h>
#include <sys/stat.h>

#include "reliability_util.h"

using namespace causeway;
using namespace causeway::e2e;

namespace {

const std::string kFlood = kWorkloads + "/flood";

int64_t q(const std::string& db, const std::string& sql) {
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  return query_int(c, sql);
}

int64_t find_number_before(const std::string& text, const std::string& marker) {
  auto at = text.find(marker);
  if (at == std::string::npos) return -1;
  auto start = text.rfind(' ', at - 2);
  return std::stoll(text.substr(start + 1, at - start - 2));
}

}  // namespace

// 1. Drops: 2 threads x 200,000 cudaMalloc through a 1 MiB ring drained every
// 50 ms. Past half full, the ring sheds rows of fast calls first (planned);
// what still does not fit is lost. Never silently: kernel counters stay
// exact, every shed and lost row is in drops and op_stats, and
// rows + shed + dropped == calls.
TEST(ReliabilityDrops, FloodOnATinyRingKeepsExactCountsAndCountsEveryDrop) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "flood.db";
  auto r = run(kBin + " trace --live off --ring-mb 1 --db " + db + " -- " + kFlood + " " + kCudart +
               " 2 200000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_NE(r.out.find("flood: 400000 calls"), std::string::npos) << r.out;
  const int64_t calls = q(db, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'");
  const int64_t rows = q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096");
  const int64_t op_dropped = q(db, "SELECT dropped FROM op_stats WHERE op = 'cudaMalloc'");
  const int64_t op_shed = q(db, "SELECT shed FROM op_stats WHERE op = 'cudaMalloc'");
  const int64_t stored_drops = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source = 'libcall'");
  const int64_t stored_shed = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source = 'shed'");
  EXPECT_EQ(calls, 400000);
  EXPECT_GT(stored_shed, 0) << "the flood did not fill a 1 MiB ring: " << r.out;
  EXPECT_EQ(op_dropped, stored_drops);
  EXPECT_EQ(op_shed, stored_shed);
  EXPECT_EQ(rows + stored_shed + stored_drops, calls);
  // The final summary says so, with the same numbers the file holds.
  EXPECT_EQ(find_number_before(r.out, "rows of fast calls shed"), stored_shed) << r.out;
  const int64_t lost = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source != 'shed'");
  if (lost) EXPECT_EQ(find_number_before(r.out, "records dropped"), lost) << r.out;
  else EXPECT_EQ(r.out.find("records dropped"), std::string::npos) << r.out;
  EXPECT_EQ(integrity_check(db), "ok");
}

// 1b. Forked workers of a traced process (a DataLoader's): 8 children live
// through a steady stream of calls (2 threads, 1,000 calls then 10 ms asleep),
// each a process the tracer looks at again every second. Looking does not
// stop the drain (it drains between processes): nothing is lost; rows of
// fast calls may be shed by plan, and each is counted.
TEST(ReliabilityDrops, ForkedWorkersOfATracedProcessLoseNothing) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "forks.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kFlood + " " + kCudart + " 2 200000 0 8 10000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_NE(r.out.find("flood: 400000 calls"), std::string::npos) << r.out;
  EXPECT_EQ(q(db, "SELECT count(DISTINCT pid) FROM processes"), 9) << r.out;
  const int64_t calls = q(db, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'");
  const int64_t rows = q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096");
  const int64_t shed = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source = 'shed'");
  EXPECT_EQ(calls, 400000);
  EXPECT_EQ(q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source != 'shed'"), 0) << r.out;
  EXPECT_EQ(q(db, "SELECT dropped FROM op_stats WHERE op = 'cudaMalloc'"), 0);
  EXPECT_EQ(rows + shed, calls);
  EXPECT_EQ(r.out.find("records dropped"), std::string::npos) << r.out;
}

// 2. Durability: SIGKILL mid-run loses nothing older than a flush interval.
// The workload makes 5,000 calls, says so, then sleeps; the tracer is killed
// 1.5 s after that line (one drain is 50 ms; one batch commit follows it).
TEST(ReliabilityDurability, SigkillKeepsEveryCommittedEventAndAnIntactFile) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "killed.db";
  BackgroundTrace t({"--live", "off", "--db", db, "--", kFlood, kCudart, "1", "5000", "4000"},
                    dir / "log");
  ASSERT_TRUE(t.wait_for_log("flood: 5000 calls")) << t.log();
  const auto progs = bpf_ids_owned_by("prog", t.pid());
  EXPECT_FALSE(progs.empty()) << "bpftool shows no programs held by the tracer";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(t.pid(), SIGKILL);
  EXPECT_EQ(t.wait(), 128 + SIGKILL);
  EXPECT_EQ(integrity_check(db), "ok");
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096"), 5000);
  // The session was never ended: readers can tell a cut-off trace.
  EXPECT_EQ(q(db, "SELECT count(*) FROM sessions WHERE end_ts_ns IS NULL"), 1);
  // The kernel freed every program the killed tracer held.
  for (int64_t id : progs) EXPECT_FALSE(bpf_object_exists("prog", id)) << "prog " << id << " leaked";
}

class ReliabilityStopSignal : public ::testing::TestWithParam<int> {};

TEST_P(ReliabilityStopSignal, EndsCleanlyWithSummaryAndCounts) {
  CAUSEWAY_REQUIRE_ROOT();
  const int sig = GetParam();
  TempDir dir;
  const std::string db = dir / "stopped.db";
  BackgroundTrace t({"--live", "off", "--db", db, "--", kFlood, kCudart, "1", "1000", "30000"},
                    dir / "log");
  ASSERT_TRUE(t.wait_for_log("flood: 1000 calls")) << t.log();
  kill(t.pid(), sig);
  ASSERT_EQ(t.wait(), 0) << t.log();
  const std::string log = t.log();
  EXPECT_NE(log.find(sig == SIGINT ? "causeway trace: interrupted after" : "causeway trace: terminated after"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("trace: " + db + " ("), std::string::npos) << log;
  EXPECT_EQ(q(db, "SELECT count(*) FROM sessions WHERE end_ts_ns >= start_ts_ns"), 1);
  EXPECT_EQ(q(db, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'"), 1000);
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096"), 1000);
  EXPECT_EQ(integrity_check(db), "ok");
}

INSTANTIATE_TEST_SUITE_P(SigintAndSigterm, ReliabilityStopSignal, ::testing::Values(SIGINT, SIGTERM));

TEST(ReliabilityDurability, SecondTraceOnTheSameFileIsRefused) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "locked.db";
  BackgroundTrace first({"--live", "off", "--db", db, "--", kFlood, kCudart, "1", "1000", "30000"},
                        dir / "log");
  ASSERT_TRUE(first.wait_for_log("flood: 1000 calls")) << first.log();
  auto second = run(kBin + " trace --live off --duration 2s --db " + db);
  EXPECT_EQ(second.exit_code, 1) << second.out;
  EXPECT_NE(second.out.find("causeway: error: " + db +
                            " is being written by another causeway trace; use --db for a new file"),
            std::string::npos)
      << second.out;
  kill(first.pid(), SIGINT);
  ASSERT_EQ(first.wait(), 0) << first.log();
  // One writer only: the refused trace added no session, the first lost nothing.
  EXPECT_EQ(q(db, "SELECT count(*) FROM sessions"), 1);
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096"), 1000);
}

// 3. Disk full: a 2 MiB tmpfs. The trace stops with one clear line, exit 125
// (causeway's own failure while tracing `-- COMMAND`, docs/cli.md), and the
// file it leaves is consistent and holds what was committed.
TEST(ReliabilityDiskFull, StopsWithOneLineAndAConsistentFile) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string mnt = dir / "small";
  std::filesystem::create_directory(mnt);
  ASSERT_EQ(mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=2m"), 0) << strerror(errno);
  struct Unmount {
    std::string p;
    ~Unmount() { umount2(p.c_str(), MNT_DETACH); }
  } unmount{mnt};
  const std::string db = mnt + "/full.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kFlood + " " + kCudart + " 2 300000");
  EXPECT_EQ(r.exit_code, 125) << r.out;
  std::vector<std::string> errors;
  for (const auto& line : non_empty_lines(r.out))
    if (line.rfind("causeway: error:", 0) == 0) errors.push_back(line);
  ASSERT_EQ(errors.size(), 1u) << r.out;
  EXPECT_NE(errors[0].find("disk is full"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find(db), std::string::npos) << errors[0];
  EXPECT_EQ(integrity_check(db), "ok");
  // What was committed before the disk filled is readable (the session row at
  // least; how many call batches fit depends on batch sizes).
  EXPECT_EQ(q(db, "SELECT count(*) FROM sessions"), 1);
}

// 3b. --max-db-size: oldest-first retention keeps a long run's file bounded.
// Kept rows are the newest ones (a contiguous tail of insertion order), and
// kept + deleted (drops 'retention') + shed + ring drops == calls.
TEST(ReliabilityRetention, MaxDbSizeDeletesOldestRowsFirst) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "bounded.db";
  auto r = run(kBin + " trace --live off --no-host --max-db-size 2m --db " + db + " -- " + kFlood + " " +
               kCudart + " 1 300000");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const int64_t calls = q(db, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'");
  const int64_t kept = q(db, "SELECT count(*) FROM cuda_call_events");
  const int64_t retention = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source = 'retention'");
  const int64_t ring = q(db, "SELECT coalesce(sum(count), 0) FROM drops WHERE source IN ('libcall', 'shed')");
  EXPECT_EQ(calls, 300000);
  EXPECT_GT(retention, 0);
  EXPECT_EQ(kept + retention + ring, calls);
  EXPECT_EQ(q(db, "SELECT max(rowid) - min(rowid) + 1 FROM cuda_call_events"), kept);
  EXPECT_EQ(q(db, "SELECT max(rowid) FROM cuda_call_events"), kept + retention);
  // Without retention these rows take over 15 MiB; with it, the limit plus
  // about one batch (one 50 ms drain) and the freed pages awaiting reuse.
  EXPECT_LT(std::filesystem::file_size(db), 6u << 20);
  EXPECT_EQ(integrity_check(db), "ok");
}

// 4. Targets that come and go.
TEST(ReliabilityTargets, ProcessKilledMidCallLeavesTheTraceRunningAndNoProbes) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "midcall.db";
  // cuCtxSynchronize in the stand-in libcuda spins for 10 minutes: killed inside it.
  const std::string script = "CW_FAKE_SYNC_MS=600000 " + kWorkloads + "/cuda_driver_calls " + kFakeCuda +
                             " & sleep 2; kill -9 $!; wait $!; echo killed-mid-call; " + kFlood + " " +
                             kCudart + " 1 100 0";
  BackgroundTrace t({"--live", "off", "--lib", kFakeCuda, "--db", db, "--", "sh", "-c", script},
                    dir / "log");
  ASSERT_TRUE(t.wait_for_log("killed-mid-call")) << t.log();
  const auto progs = bpf_ids_owned_by("prog", t.pid());
  const auto links = bpf_ids_owned_by("link", t.pid());
  EXPECT_FALSE(progs.empty());
  EXPECT_FALSE(links.empty());
  ASSERT_EQ(t.wait(), 0) << t.log();
  EXPECT_NE(t.log().find("command exited with status 0"), std::string::npos) << t.log();
  // Calls before the kill are there, the one it died in is not, and the
  // trace went on to record the next process.
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cuLaunchKernel'"), 3);
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cuCtxSynchronize'"), 0);
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 4096"), 100);
  for (int64_t id : progs) EXPECT_FALSE(bpf_object_exists("prog", id)) << "prog " << id << " leaked";
  for (int64_t id : links) EXPECT_FALSE(bpf_object_exists("link", id)) << "link " << id << " leaked";
  // No legacy (tracefs) uprobe left behind by this tracer either.
  auto events = run("cat /sys/kernel/tracing/uprobe_events /sys/kernel/debug/tracing/uprobe_events");
  EXPECT_EQ(events.out.find("libbpf_" + std::to_string(t.pid()) + "_"), std::string::npos) << events.out;
}

TEST(ReliabilityTargets, ExecChainKeepsTracingTheSamePid) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "exec.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/exec_chain " + kCudart + " 3");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // One call per image, four images (three execs), one pid throughout.
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 1111"), 4);
  EXPECT_EQ(q(db, "SELECT count(DISTINCT pid) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 1111"), 1);
}

TEST(ReliabilityTargets, ThousandShortLivedChildrenEachCounted) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "forks.db";
  BackgroundTrace t({"--live", "off", "--db", db, "--", kWorkloads + "/fork_storm", kCudart, "1000"},
                    dir / "log");
  ASSERT_TRUE(t.wait_for_log("fork_storm: 1000 children, 0 failed", 300)) << t.log();
  const auto progs = bpf_ids_owned_by("prog", t.pid());
  ASSERT_EQ(t.wait(), 0) << t.log();
  EXPECT_EQ(q(db, "SELECT calls FROM op_stats WHERE op = 'cudaMalloc'"), 1000);
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 31337"), 1000);
  EXPECT_EQ(q(db, "SELECT count(DISTINCT pid) FROM cuda_calls WHERE op = 'cudaMalloc'"), 1000);
  for (int64_t id : progs) EXPECT_FALSE(bpf_object_exists("prog", id)) << "prog " << id << " leaked";
}

TEST(ReliabilityTargets, RepeatedDlopenDlcloseIsTracedEveryTime) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "dlopen.db";
  auto r = run(kBin + " trace --live off --db " + db + " -- " + kWorkloads + "/dlopen_cycle " + kCudart + " 50");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  ASSERT_NE(r.out.find("dlopen_cycle: 50 cycles"), std::string::npos) << r.out;
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 2718"), 50);
}

// A package upgrade replaces a library by rename: the running process keeps
// the old file (inode), a new process maps the new one. Both are traced.
TEST(ReliabilityTargets, LibraryReplacedOnDiskWhileTraced) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "replaced.db";
  const std::string lib = dir / "libcudart.so.13";
  std::filesystem::copy_file(kCudart, lib);
  const std::string late = kWorkloads + "/late_dlopen " + lib;
  const std::string script = late + " 3000 & sleep 1.5; cp " + kCudart + " " + lib + ".new && mv " + lib +
                             ".new " + lib + "; " + late + " 2500; wait";
  auto r = run(kBin + " trace --live off --db " + db + " -- sh -c '" + script + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(q(db, "SELECT count(*) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 424242"), 4) << r.out;
  EXPECT_EQ(q(db, "SELECT count(DISTINCT pid) FROM cuda_calls WHERE op = 'cudaMalloc' AND bytes = 424242"), 2);
}
