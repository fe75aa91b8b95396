// SPDX-License-Identifier: Apache-2.0
// Ranks of a data-parallel job on real probes (real uprobes on the stand-in
// libnccl and libcuda, real scheduler tracepoints and wait stacks), each rank
// its own process (workloads/py_ranks.py): the stand-in's event sync waits
// until every rank's all-reduce has arrived on its "GPU", so a rank that
// enqueues late holds the others exactly as NCCL's kernels do.
// - skew between enqueues that nobody waits for is no straggler;
// - a rank with slow host work is the straggler, with its own line;
// - the same with 8 ranks;
// - a rank that never enters: CRITICAL, with where it sits;
// - collective numbers come from the probe at entry, so records lost from
//   one rank leave every other match in place;
// - per-rank files merged as from two hosts, one clock 40 ms off, give the
//   same verdict.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "causeway/store/sqlite.h"
#include "e2e_util.h"

using namespace causeway;
using namespace causeway::e2e;
using nlohmann::json;

namespace {

const std::string kScript = std::string(CAUSEWAY_SOURCE_DIR) + "/workloads/py_ranks.py";
const std::string kFakeNccl = kBuild + "/workloads/lib/libnccl.so.1";

int marker(const std::string& name) { return call_marker_line(kScript, name); }

std::string trace_cmd(const std::string& db, const std::string& mode, int nranks, int steps) {
  // --hang-after: the hung sync is judged while tracing (its baseline, a
  // 20-ms step's sync, would take 20 s to reach the default rule).
  return kBin + " trace --live off --db " + db + " --hang-after 2s --lib " + kFakeCuda + " --lib " + kFakeNccl +
         " -- /usr/bin/python3.11 " + kScript + " " + mode + " " + std::to_string(nranks) + " " +
         std::to_string(steps) + " " + kFakeNccl + " " + kFakeCuda;
}

json explain(const std::string& db, std::string* text = nullptr) {
  auto e = run(kBin + " explain --json --db " + db);
  EXPECT_EQ(e.exit_code, 0) << e.out;
  if (text) *text = run(kBin + " explain --db " + db).out;
  return json::parse(e.out);
}

const json* find_chain(const json& j, const std::string& cause) {
  for (const auto& c : j["chains"])
    if (c["root_cause"] == cause) return &c;
  return nullptr;
}

// The rank processes of the trace: pid by rank, from their init calls.
std::map<int, int64_t> rank_pids(const std::string& db) {
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  std::map<int, int64_t> out;
  auto st = c.prepare("SELECT rank, pid FROM nccl_calls WHERE op = 'ncclCommInitRank' AND ret = 0");
  while (st.step()) out[int(st.col_int(0))] = st.col_int(1);
  return out;
}

int64_t scalar(const std::string& db, const std::string& sql) {
  store::Connection c(db, store::Connection::Mode::ReadOnly);
  auto st = c.prepare(sql);
  return st.step() ? st.col_int(0) : -1;
}

// A job traced to its end: its file and its ranks' pids.
struct Traced {
  std::string db;
  std::map<int, int64_t> pids;
};
Traced trace_job(const TempDir& dir, const std::string& mode, int nranks, int steps) {
  Traced t{dir / (mode + std::to_string(nranks) + ".db"), {}};
  auto r = run(trace_cmd(t.db, mode, nranks, steps));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  t.pids = rank_pids(t.db);
  EXPECT_EQ(t.pids.size(), size_t(nranks));
  return t;
}

// The planted straggler's chain: first, the last rank, at its line.
void expect_straggler_first(const json& j, const std::string& text, int nranks, int64_t pid) {
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "straggler_rank") << text;
  EXPECT_EQ(c["severity"], "HIGH") << text;
  EXPECT_EQ(c["evidence"][0]["rank"], nranks - 1) << text;
  EXPECT_EQ(c["evidence"][0]["pid"], pid) << text;
  ASSERT_TRUE(c.contains("frame")) << text;
  EXPECT_EQ(c["frame"]["line"], marker("straggler")) << text;
  EXPECT_EQ(c["frame"]["func"], "prepare_batch") << text;
  // Its own cause, joined: on-CPU at that line, and the rank's host_bound
  // folded into this chain rather than standing beside it.
  bool own = false;
  for (const auto& e : c["evidence"])
    if (e.value("own_cause", "") == "on_cpu") own = true;
  EXPECT_TRUE(own) << text;
  for (const auto& o : j["chains"])
    if (o["root_cause"] == "host_bound") {
      EXPECT_NE(o["symptom"]["pid"], pid) << text;
    }
  EXPECT_NE(c["recommendation"].get<std::string>().find("py_ranks.py:" + std::to_string(marker("straggler"))),
            std::string::npos)
      << c["recommendation"];
}

}  // namespace

// Enqueues 15 ms apart, inside the GPU's 40 ms: nobody waits for anybody.
// Every collective is matched by its number (40 a rank, #0..#39).
TEST(Ranks, SkewBetweenEnqueuesIsNoStraggler) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const auto [db, pids] = trace_job(dir, "skew", 2, 40);
  ASSERT_EQ(pids.size(), 2u);
  for (const auto& [rank, pid] : pids) {
    EXPECT_EQ(scalar(db, "SELECT count(*) FROM nccl_calls WHERE op = 'ncclAllReduce' AND pid = " + std::to_string(pid)),
              40);
    EXPECT_EQ(scalar(db, "SELECT max(seq) - min(seq) + 1 FROM nccl_calls WHERE op = 'ncclAllReduce' AND pid = " +
                             std::to_string(pid)),
              40);
  }
  std::string text;
  json j = explain(db, &text);
  EXPECT_EQ(find_chain(j, "straggler_rank"), nullptr) << text;
  EXPECT_EQ(find_chain(j, "network_degraded"), nullptr) << text;
  // Nothing above MEDIUM, but for what the box itself does: two ranks on a
  // 2-CPU machine may wait for its CPUs (cpu_contention names who ran).
  for (const auto& c : j["chains"]) {
    if (c["root_cause"] == "cpu_contention") continue;
    EXPECT_TRUE(c["severity"] == "LOW" || c["severity"] == "MEDIUM") << text;
  }
}

// The last rank prepares its batch for 30 ms before it dispatches its step:
// its GPU starts late, and the others wait for it in their syncs.
TEST(Ranks, AStragglerIsNamedWithItsOwnLine) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const auto [db, pids] = trace_job(dir, "straggler", 2, 40);
  ASSERT_EQ(pids.size(), 2u);
  std::string text;
  json j = explain(db, &text);
  expect_straggler_first(j, text, 2, pids.at(1));
}

TEST(Ranks, EightRanksNameTheStragglerAndItsLine) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const auto [db, pids] = trace_job(dir, "straggler", 8, 30);
  ASSERT_EQ(pids.size(), 8u);
  std::string text;
  json j = explain(db, &text);
  expect_straggler_first(j, text, 8, pids.at(7));
  EXPECT_EQ(j["chains"][0]["evidence"][0]["matched"], 30) << text;
}

// Records lost from one rank (a third of its all-reduces) shift no other
// number: the rest still match, and the straggler is the same.
TEST(Ranks, LostRecordsLeaveTheOtherMatchesInPlace) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const auto [db, pids] = trace_job(dir, "straggler", 2, 40);
  ASSERT_EQ(pids.size(), 2u);
  {
    store::Connection c(db, store::Connection::Mode::ReadWriteCreate);
    c.exec("DELETE FROM nccl_call_events WHERE pid = " + std::to_string(pids.at(0)) + " AND seq % 3 = 1");
  }
  std::string text;
  json j = explain(db, &text);
  expect_straggler_first(j, text, 2, pids.at(1));
  // 40 numbered on rank 1, 27 left on rank 0 (#1, #4, ... #37 gone): 27 matched.
  EXPECT_EQ(j["chains"][0]["evidence"][0]["matched"], 27) << text;
}

// The last rank waits on an event that is never set before its 6th
// all-reduce; rank 0 blocks in its sync. The trace stops while they hang.
TEST(Ranks, AHangNamesWhereTheMissingRankSits) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const std::string db = dir / "hang.db";
  // setsid: the job is its own process group, ended at once after the trace.
  const pid_t job = fork();
  ASSERT_GE(job, 0);
  if (job == 0) {
    setsid();
    execl("/bin/sh", "sh", "-c", (trace_cmd(db, "hang", 2, 40) + " > " + dir / "trace.log" + " 2>&1").c_str(),
          nullptr);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::seconds(6));
  // Stop the trace (SIGINT to the agent only), then end the ranks.
  run("pkill -INT -f '^" + kBin + " trace --live off --db " + db + "'");
  int st = 0;
  for (int i = 0; i < 100 && waitpid(job, &st, WNOHANG) == 0; i++) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  kill(-job, SIGKILL);
  waitpid(job, &st, 0);
  run("rm -f /dev/shm/cwfake-nccl-ranks-*");
  const auto pids = rank_pids(db);
  ASSERT_EQ(pids.size(), 2u) << run("cat " + dir / "trace.log").out;
  std::string text;
  json j = explain(db, &text);
  ASSERT_FALSE(j["chains"].empty()) << text;
  const json& c = j["chains"][0];
  EXPECT_EQ(c["root_cause"], "hung_collective") << text;
  EXPECT_EQ(c["severity"], "CRITICAL") << text;
  // Both ranks' lines: rank 0 waits in its sync; rank 1 sits in the event's
  // wait, which is the chain's line.
  const std::string waiting = c["evidence"][0]["text"];
  EXPECT_NE(waiting.find("py_ranks.py:" + std::to_string(marker("sync"))), std::string::npos) << waiting;
  EXPECT_EQ(c["evidence"][0]["behind"], json::array({1})) << text;
  bool sits = false;
  for (const auto& e : c["evidence"])
    if (e.value("rank", -1) == 1 && e.value("state", "") == "asleep") {
      sits = true;
      EXPECT_EQ(e["where"], kScript + ":" + std::to_string(marker("hang"))) << e["text"];
      EXPECT_NE(e["text"].get<std::string>().find("futex"), std::string::npos) << e["text"];
      // #5 is where rank 0 waits: the probe numbered it at entry.
      EXPECT_EQ(e["latest_seq"], 4) << e["text"];
    }
  EXPECT_TRUE(sits) << text;
  ASSERT_TRUE(c.contains("frame")) << text;
  EXPECT_EQ(c["frame"]["line"], marker("hang")) << text;
}

// One trace split into two per-rank files, the second moved to another host
// whose clock runs 40 ms ahead, then merged: the same straggler, the skew
// estimated from the inits that returned together.
TEST(Ranks, PerRankFilesMergedAsTwoHostsGiveTheSameVerdict) {
  CAUSEWAY_REQUIRE_ROOT();
  TempDir dir;
  const auto [db, pids] = trace_job(dir, "straggler", 2, 40);
  ASSERT_EQ(pids.size(), 2u);
  const int64_t offset = 40'000'000;
  std::vector<std::string> parts;
  for (int rank : {0, 1}) {
    const std::string part = dir / ("rank" + std::to_string(rank) + ".db");
    std::filesystem::copy_file(db, part);
    store::Connection c(part, store::Connection::Mode::ReadWriteCreate);
    const int64_t other = pids.at(1 - rank);
    std::vector<std::pair<std::string, std::vector<std::string>>> tables;
    {
      auto st = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table'");
      while (st.step()) tables.push_back({st.col_text(0), {}});
    }
    for (auto& [t, cols] : tables) {
      auto st = c.prepare("SELECT name FROM pragma_table_info('" + t + "')");
      while (st.step()) cols.push_back(st.col_text(0));
    }
    for (const auto& [t, cols] : tables) {
      if (std::find(cols.begin(), cols.end(), "pid") != cols.end())
        c.exec("DELETE FROM " + t + " WHERE pid = " + std::to_string(other));
      if (rank == 1)
        for (const auto& col : cols)
          if (col.size() >= 5 && col.compare(col.size() - 5, 5, "ts_ns") == 0)
            c.exec("UPDATE " + t + " SET " + col + " = " + col + " + " + std::to_string(offset) + " WHERE " + col +
                   " IS NOT NULL");
    }
    if (rank == 1) c.exec("UPDATE sessions SET host = 'host-b', node_id = 'host-b', boot_id = 'boot-b'");
    parts.push_back(part);
  }
  const std::string merged = dir / "merged.db";
  auto m = run(kBin + " merge " + merged + " " + parts[0] + " " + parts[1]);
  ASSERT_EQ(m.exit_code, 0) << m.out;
  std::string text;
  json j = explain(merged, &text);
  expect_straggler_first(j, text, 2, pids.at(1));
  const json& c = j["chains"][0];
  bool skew = false;
  for (const auto& e : c["evidence"])
    if (e.contains("clocks"))
      for (const auto& k : e["clocks"])
        if (k["node"] == "host-b") {
          skew = true;
          EXPECT_TRUE(k["estimated"].get<bool>()) << e["text"];
          // One sample (the inits, returned together): a busy box may delay one
          // rank's wake-up by a few ms.
          EXPECT_NEAR(k["offset_ns"].get<double>(), -double(offset), 5e6) << e["text"];
        }
  EXPECT_TRUE(skew) << text;
  EXPECT_EQ(j["chains"][0]["evidence"][0]["host"], "host-b") << text;
}
