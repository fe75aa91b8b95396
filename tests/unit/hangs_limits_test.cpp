// SPDX-License-Identifier: Apache-2.0
// Hung calls judged by one rule (common/hang.h), named across merged ranks;
// CPU limits read from a cgroup of either version (recorded files).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "causeway/analyze/engine.h"
#include "causeway/common/hang.h"
#include "causeway/discover/cgroup_cpu.h"
#include "causeway/model/stalled_calls.h"
#include "causeway/store/merge.h"
#include "synthetic_nodes.h"

using namespace causeway;
using namespace synthetic;

namespace {
constexpr int64_t kS = 1'000'000'000;
}

TEST(HangRule, AThousandTimesItsBaselineAndFiveSecondsOrPastHangAfter) {
  EXPECT_FALSE(judged_hung(4 * kS, 1'000, 0)) << "under 5 s";
  EXPECT_TRUE(judged_hung(5 * kS, 1'000, 0));
  EXPECT_FALSE(judged_hung(9 * kS, 10'000'000, 0)) << "a 10 ms call waited 900x";
  EXPECT_TRUE(judged_hung(10 * kS, 10'000'000, 0));
  EXPECT_FALSE(judged_hung(20 * kS, std::nullopt, 0)) << "no baseline, no --hang-after";
  EXPECT_TRUE(judged_hung(30 * kS, std::nullopt, kDefaultHangAfterNs));
  EXPECT_TRUE(judged_hung(2 * kS, 10'000'000'000, 2 * kS)) << "--hang-after comes first";
}

namespace {

struct TwoRanks {
  std::string a = temp_path("hang_rank0.db"), b = temp_path("hang_rank1.db"), out = temp_path("hang_merged.db");
  Plan plan;
  TwoRanks() {
    plan.nranks = 2;
    plan.collectives = 20;
    const int64_t end = plan.t0 + plan.collectives * plan.period_ns;
    // Rank 0 entered all-reduce #20 and was still in it, 12 s later, when
    // its trace stopped; rank 1 never entered it: its last CUDA call, after
    // #19, was at train.py:77.
    write_node(a, Node{"host-a", "boot-a", 0, {{0, 100}}}, plan, [&](model::Batch& batch) {
      model::StalledCall s;
      s.ts_ns = end;
      s.pid = s.tid = 100;
      s.op_id = find_op("ncclAllReduce")->id;
      s.waited_ns = 12 * kS;
      s.seen_ts_ns = end + 12 * kS;
      s.stack_id = 1;
      s.at_stop = true;
      batch.add(std::move(s));
      model::add_stack(batch, 1, {{"python", "all_reduce_grads", "train.py", 120, ""}});
    });
    write_node(b, Node{"host-b", "boot-b", 0, {{1, 200}}}, plan, [&](model::Batch& batch) {
      model::CudaCall c;
      c.ts_ns = end - plan.period_ns / 2;
      c.dur_ns = 10'000;
      c.pid = c.tid = 200;
      c.op_id = find_op("cudaStreamSynchronize")->id;
      c.stack_id = 1;
      batch.add(std::move(c));
      model::add_stack(batch, 1, {{"python", "evaluate", "train.py", 77, ""}});
    });
    store::merge_traces(out, {a, b});
  }
  ~TwoRanks() { std::filesystem::remove_all(std::filesystem::path(a).parent_path()); }
};

}  // namespace

// A collective in flight when the trace stopped (not yet past --hang-after)
// is judged by the rule against its op's baseline (the 19 before it, a few
// ms each): hung. The merged traces name the rank that never entered it.
TEST(HangRule, MergedRanksNameTheRankThatNeverEntered) {
  TwoRanks t;
  auto e = analyze::explain_file(t.out, {});
  ASSERT_FALSE(e.chains.empty());
  const auto& c = e.chains[0];
  EXPECT_EQ(c.root_cause, "hung_collective");
  EXPECT_EQ(c.severity, analyze::Severity::Critical);
  ASSERT_TRUE(c.frame);
  EXPECT_EQ(c.frame->line, 120);
  bool behind = false;
  for (const auto& ev : c.evidence)
    if (ev.data.contains("rank") && ev.data["rank"] == 1) {
      behind = true;
      EXPECT_EQ(ev.data["latest_seq"], 19);
      EXPECT_NE(ev.text.find("never entered #20"), std::string::npos) << ev.text;
    }
  EXPECT_TRUE(behind) << c.evidence.front().text;
}

namespace {

// A sync found on a thread's stack when the trace attached (entered_before),
// `waited` in flight when it stopped; the thread itself made `own` calls
// after, another thread of the process `others`.
analyze::Explanation before_the_trace(int own, int others, int64_t waited = 8 * kS) {
  const std::string path = temp_path("hang_before.db");
  Plan plan;
  plan.collectives = 0;
  write_node(path, Node{"host-a", "boot-a", 0, {}}, plan, [&](model::Batch& batch) {
    model::StalledCall s;
    s.ts_ns = plan.t0;
    s.pid = s.tid = 100;
    s.op_id = find_op("cuCtxSynchronize")->id;
    s.waited_ns = waited;
    s.seen_ts_ns = plan.t0 + waited;
    s.at_stop = s.entered_before = true;
    batch.add(std::move(s));
    for (int k = 0; k < own + others; k++) {
      model::CudaCall c;
      c.ts_ns = plan.t0 + (k + 1) * 150'000'000;  // over the 8 s
      c.dur_ns = 10'000;
      c.pid = 100;
      c.tid = k < own ? 100 : 101;
      c.op_id = find_op("cudaLaunchKernel")->id;
      batch.add(std::move(c));
    }
  });
  plan.collectives = 80;  // the session's end: 8 s on
  auto e = analyze::explain_file(path, {});
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  return e;
}

bool has_hung_call(const analyze::Explanation& e) {
  for (const auto& c : e.chains)
    if (c.root_cause == "hung_call") return true;
  return false;
}

}  // namespace

// Begun before the trace, and nothing of its process called since for 8 s:
// the job waits on it (hung, though under --hang-after and with no baseline).
// Its thread calling again since: the word on its stack was a stale one,
// even past --hang-after. Its process busy on another thread: not hung by 8 s
// alone; past --hang-after, a side thread beside a working process is not
// hung either (as for any call in flight at the stop).
TEST(HangRule, ACallFromBeforeTheTraceIsHungWhenItsProcessWaitsOnIt) {
  auto quiet = before_the_trace(0, 0);
  ASSERT_FALSE(quiet.chains.empty());
  EXPECT_EQ(quiet.chains[0].root_cause, "hung_call");
  EXPECT_EQ(quiet.chains[0].severity, analyze::Severity::Critical);
  EXPECT_EQ(quiet.chains[0].evidence[0].data["entered_before"], true);
  EXPECT_FALSE(has_hung_call(before_the_trace(3, 0)));
  EXPECT_FALSE(has_hung_call(before_the_trace(3, 0, 40 * kS)));
  EXPECT_FALSE(has_hung_call(before_the_trace(0, 50)));
  EXPECT_FALSE(has_hung_call(before_the_trace(0, 50, 40 * kS)));
  EXPECT_TRUE(has_hung_call(before_the_trace(0, 0, 40 * kS)));
}

namespace {

// A sync in flight `waited` when an 8-s trace stopped, after 50 syncs of
// 10 us and, with `long_before`, one of that long; `later`: a call of the
// process after it began.
analyze::Explanation at_the_stop(int64_t waited, int64_t long_before = 0, bool later = false) {
  const std::string path = temp_path("hang_at_stop.db");
  Plan plan;
  plan.collectives = 0;
  write_node(path, Node{"host-a", "boot-a", 0, {}}, plan, [&](model::Batch& batch) {
    const int64_t began = plan.t0 + 8 * kS - waited;
    for (int k = 0; k < 51; k++) {
      model::CudaCall c;
      c.ts_ns = plan.t0 + k * 20'000'000;
      c.dur_ns = k == 50 ? long_before : 10'000;
      c.pid = c.tid = 100;
      c.op_id = find_op("cudaStreamSynchronize")->id;
      if (c.dur_ns) batch.add(std::move(c));
    }
    if (later) {
      model::CudaCall c;
      c.ts_ns = began + waited / 2;
      c.dur_ns = 10'000;
      c.pid = 100;
      c.tid = 101;
      c.op_id = find_op("cudaLaunchKernel")->id;
      batch.add(std::move(c));
    }
    model::StalledCall s;
    s.ts_ns = began;
    s.pid = s.tid = 100;
    s.op_id = find_op("cudaDeviceSynchronize")->id;
    s.waited_ns = waited;
    s.seen_ts_ns = plan.t0 + 8 * kS;
    s.at_stop = true;
    batch.add(std::move(s));
  });
  plan.collectives = 80;
  auto e = analyze::explain_file(path, {});
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  return e;
}

}  // namespace

// Under the rule's 5 s when the trace stopped: maybe hung (MEDIUM) when it
// waited a second or more, a thousand times its class's p50 and ten times
// the longest of its class that returned, and the process made no call
// since; not when it is like a long sync that returned (a step's), under a
// second, or the process went on working.
TEST(HangRule, AShortWaitAtTheStopIsMaybeHungOnlyWhenNothingLikeItReturned) {
  const auto maybe = at_the_stop(2 * kS);
  ASSERT_FALSE(maybe.chains.empty());
  EXPECT_EQ(maybe.chains[0].root_cause, "hung_call");
  EXPECT_EQ(maybe.chains[0].severity, analyze::Severity::Medium);
  EXPECT_EQ(maybe.chains[0].evidence[0].data["unproven"], true);
  EXPECT_FALSE(has_hung_call(at_the_stop(2 * kS, 1'500'000'000))) << "a step's long sync returned before";
  EXPECT_FALSE(has_hung_call(at_the_stop(900'000'000))) << "under a second";
  EXPECT_FALSE(has_hung_call(at_the_stop(2 * kS, 0, true))) << "its process went on";
  const auto proven = at_the_stop(6 * kS);
  ASSERT_FALSE(proven.chains.empty());
  EXPECT_EQ(proven.chains[0].severity, analyze::Severity::Critical);
}

namespace {

// A recorded /proc and cgroup tree under a temporary root.
struct Roots {
  std::filesystem::path dir = std::filesystem::path(temp_path("cg")) / "root";
  std::string proc = (dir / "proc").string(), cgroup = (dir / "cgroup").string();
  Roots() { std::filesystem::create_directories(dir); }
  ~Roots() { std::filesystem::remove_all(dir); }
  void file(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
  }
};

}  // namespace

// v2: the pod's limit (0.4 CPU) on the pod's cgroup, none on the container's:
// the tightest on the way up applies, with its counters.
TEST(CgroupCpu, VersionTwoTakesTheTightestLimitOnTheWayUp) {
  Roots r;
  r.file(r.proc + "/42/cgroup", "0::/kubepods/pod1/ctr\n");
  r.file(r.cgroup + "/kubepods/pod1/ctr/cpu.max", "max 100000\n");
  r.file(r.cgroup + "/kubepods/pod1/ctr/cpu.stat", "usage_usec 5\nnr_periods 1\nnr_throttled 0\nthrottled_usec 0\n");
  r.file(r.cgroup + "/kubepods/pod1/cpu.max", "40000 100000\n");
  r.file(r.cgroup + "/kubepods/pod1/cpu.stat",
         "usage_usec 900000\nnr_periods 500\nnr_throttled 458\nthrottled_usec 29500000\n");
  r.file(r.cgroup + "/kubepods/cpu.max", "max 100000\n");
  auto s = discover::read_cgroup_cpu(42, r.proc, r.cgroup);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->pid, 42u);
  EXPECT_EQ(s->version, 2);
  EXPECT_EQ(s->cgroup, "/kubepods/pod1");
  EXPECT_EQ(s->quota_us, 40000);
  EXPECT_EQ(s->period_us, 100000);
  EXPECT_EQ(s->nr_periods, 500);
  EXPECT_EQ(s->nr_throttled, 458);
  EXPECT_EQ(s->throttled_us, 29'500'000);
}

// v1: the cpu controller's hierarchy (cpu,cpuacct), quota in
// cpu.cfs_quota_us, throttled time in ns.
TEST(CgroupCpu, VersionOneReadsTheCfsQuota) {
  Roots r;
  r.file(r.proc + "/7/cgroup", "4:memory:/job\n3:cpu,cpuacct:/job\n0::/\n");
  r.file(r.cgroup + "/cpu,cpuacct/job/cpu.cfs_quota_us", "20000\n");
  r.file(r.cgroup + "/cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  r.file(r.cgroup + "/cpu,cpuacct/job/cpu.stat", "nr_periods 81\nnr_throttled 80\nthrottled_time 6480000000\n");
  r.file(r.cgroup + "/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  r.file(r.cgroup + "/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  auto s = discover::read_cgroup_cpu(7, r.proc, r.cgroup);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->version, 1);
  EXPECT_EQ(s->cgroup, "/job");
  EXPECT_EQ(s->quota_us, 20000);
  EXPECT_EQ(s->nr_throttled, 80);
  EXPECT_EQ(s->throttled_us, 6'480'000);
}

// No limit anywhere: read once, with no quota; a process gone, a cgroup that
// vanished or an unreadable cpu.stat is nothing, never an error.
TEST(CgroupCpu, NoLimitAVanishedCgroupOrNoProcessIsNeverAnError) {
  Roots r;
  r.file(r.proc + "/9/cgroup", "0::/free\n");
  r.file(r.cgroup + "/free/cpu.max", "max 100000\n");
  r.file(r.cgroup + "/free/cpu.stat", "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
  auto s = discover::read_cgroup_cpu(9, r.proc, r.cgroup);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->quota_us);
  EXPECT_FALSE(discover::read_cgroup_cpu(10, r.proc, r.cgroup)) << "no such process";
  r.file(r.proc + "/11/cgroup", "0::/gone\n");
  EXPECT_FALSE(discover::read_cgroup_cpu(11, r.proc, r.cgroup)) << "its cgroup vanished";
  r.file(r.proc + "/12/cgroup", "garbage without colons\n");
  EXPECT_FALSE(discover::read_cgroup_cpu(12, r.proc, r.cgroup));
}
