// SPDX-License-Identifier: Apache-2.0
// explain over launches aggregated in the kernel (--launch-sampling): counts
// from launch_stats, baselines from the log2 buckets, slow calls from the
// rows that were kept, and raw launch rows of other kernels untouched.
#include <gtest/gtest.h>

#include "temp_db.h"

#include "causeway/analyze/engine.h"
#include "causeway/common/op_table.h"
#include "causeway/events.h"
#include "causeway/analyze/trace_stats.h"
#include "causeway/store/read_only_trace.h"
#include "causeway/store/trace_writer.h"

using namespace causeway;

namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kT0 = 1'800'000'000 * kSec;

model::CudaCall launch(int64_t ts, int64_t dur, const std::string& kernel, uint32_t flags) {
  model::CudaCall c;
  c.ts_ns = ts;
  c.dur_ns = dur;
  c.pid = c.tid = 42;
  c.op_id = find_op("cuLaunchKernel")->id;
  c.kernel = kernel;
  c.flags = flags;
  return c;
}

// 1000 launches of "gemm" a second for 4 s: 990 of 2-4 us, 10 of 2-4 ms
// (kept as rows, with the one sampled fast launch); 20 launches of "raw" per
// second recorded as plain rows (2 us, one 5 ms).
void write_trace(const std::string& path) {
  store::TraceWriter w(path);
  model::SessionInfo s;
  s.host = s.node_id = "h";
  s.boot_id = s.version = s.command_line = "t";
  w.begin_session(s);
  for (int sec = 0; sec < 4; sec++) {
    model::Batch b;
    const int64_t t = kT0 + sec * kSec;
    model::LaunchStat l;
    l.ts_ns = t + kSec;
    l.pid = 42;
    l.op_id = find_op("cuLaunchKernel")->id;
    l.kernel = "gemm";
    l.calls = 1000;
    l.total_ns = 990 * 3000 + 10 * 3'000'000;
    b.add(model::LaunchBucket{l.ts_ns, l.pid, l.op_id, l.kernel, 11, 990});
    b.add(model::LaunchBucket{l.ts_ns, l.pid, l.op_id, l.kernel, 21, 10});
    b.of<model::LaunchStat>().push_back(l);
    b.of<model::CudaCall>().push_back(launch(t + 1000, 3000, "gemm", CW_CALL_AGGREGATED));
    for (int i = 0; i < 10; i++)
      b.of<model::CudaCall>().push_back(launch(t + 1'000'000 + i * 50'000'000, 3'000'000, "gemm", CW_CALL_AGGREGATED));
    for (int i = 0; i < 20; i++)
      b.of<model::CudaCall>().push_back(launch(t + 2'000'000 + i * 40'000'000, i == 7 ? 5'000'000 : 2000, "raw", 0));
    w.write(b);
  }
  w.end_session(kT0 + 5 * kSec);
}

const analyze::Symptom* find(const analyze::Explanation& e, const std::string& kernel) {
  for (const auto& s : e.data.slowest)
    if (s.kernel == kernel) return &s;
  return nullptr;
}

}  // namespace

TEST(ExplainLaunchHistograms, CountsAndBaselinesComeFromTheHistograms) {
  TempDb db;
  write_trace(db.path);
  auto e = analyze::explain_file(db.path, {});
  // 4 x 1000 aggregated + 4 x 20 plain rows; the 44 kept "gemm" rows are not counted twice.
  EXPECT_EQ(e.data.calls, 4 * 1000 + 4 * 20);
  EXPECT_EQ(e.data.processes, 1);
  const auto* gemm = find(e, "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->calls, 4000);
  EXPECT_EQ(gemm->slow_calls, 40);  // every 3 ms launch; the sampled 3 us ones are not slow
  // Rank 2000 of 4000 falls in bucket 11 ([2048, 4096) ns), interpolated.
  EXPECT_GE(gemm->p50_ns, 2048);
  EXPECT_LT(gemm->p50_ns, 4096);
  // Rank 3960 (p99) is the last of bucket 11; max is the slowest kept row.
  EXPECT_LT(gemm->p99_ns, 4096);
  EXPECT_EQ(gemm->max_ns, 3'000'000);
  const auto* raw = find(e, "raw");
  ASSERT_NE(raw, nullptr);
  EXPECT_EQ(raw->calls, 80);
  EXPECT_EQ(raw->slow_calls, 4);
  EXPECT_EQ(raw->p50_ns, 2000);
  EXPECT_EQ(e.data.slow_calls, 44);
}

TEST(ExplainLaunchHistograms, TheWindowSelectsIntervals) {
  TempDb db;
  write_trace(db.path);
  analyze::ExplainOptions o;
  // Intervals are stamped with their end: [t0+1s, t0+3s) holds the first two.
  o.from_ns = kT0 + kSec;
  o.to_ns = kT0 + 3 * kSec;
  auto e = analyze::explain_file(db.path, o);
  const auto* gemm = find(e, "gemm");
  ASSERT_NE(gemm, nullptr);
  EXPECT_EQ(gemm->calls, 2000);
}

// The readers (MCP trace_stats/top_kernels, report) count aggregated
// launches from launch_stats, not from the rows that were kept.
TEST(ExplainLaunchHistograms, ReadersCountAggregatedLaunches) {
  TempDb db;
  write_trace(db.path);
  auto conn = store::open_trace_read_only(db.path);
  auto kernels = analyze::top_kernels(*conn, {}, 10);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].kernel, "gemm");
  EXPECT_EQ(kernels[0].launches, 4000);
  EXPECT_EQ(kernels[0].total_ns, 4 * (990 * 3000 + 10 * 3'000'000));
  EXPECT_EQ(kernels[0].max_ns, 3'000'000);
  EXPECT_EQ(kernels[1].kernel, "raw");
  EXPECT_EQ(kernels[1].launches, 80);
  auto ops = analyze::op_latencies(*conn, {}, "cuLaunchKernel");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0].calls, 4000 + 80);
  EXPECT_EQ(ops[0].total_ns, 4 * (990 * 3000 + 10 * 3'000'000) + 4 * (19 * 2000 + 5'000'000));
}
