// SPDX-License-Identifier: Apache-2.0
// The metric families `trace --prometheus` and `trace --otlp` both render:
// per-communicator collectives, copies by direction, the recent explain's
// chains and thread accounts, and the Prometheus text of them.
#include <gtest/gtest.h>

#include "causeway/analyze/recent_explain.h"
#include "causeway/common/op_table.h"
#include "causeway/export/metric_families.h"
#include "causeway/present/live_view.h"

using namespace causeway;
using namespace causeway::exporters;
using causeway::analyze::RecentSnapshot;
using causeway::present::format_recent;

namespace {

const MetricFamily* family(const std::vector<MetricFamily>& fs, const std::string& name) {
  for (const auto& f : fs)
    if (f.name == name) return &f;
  return nullptr;
}

struct Fixture {
  consume::LiveStats stats;
  std::map<uint32_t, model::ProcessInfo> processes;
  RecentSnapshot recent;
  Fixture() {
    const uint16_t allreduce = find_op("ncclAllReduce")->id, memcpy = find_op("cudaMemcpy")->id;
    auto& t = stats.processes[42];
    t.calls[memcpy] = 3;
    t.errors[memcpy] = 1;
    t.nccl[{"00000000000000ab", 2, 4, allreduce}] = {3, 12288, 3'000'000};
    t.copies[int(CopyKind::HtoD)] = {2, 8192, 500'000};
    t.copies[int(CopyKind::DtoH)] = {1, 4, 1'000};
    stats.processes[77].calls[memcpy] = 9;  // exited: not alive any more
    processes[42].pid = 42;
    processes[42].comm = "trainer \"0\"";
    recent.seq = 1;
    recent.from_ns = 0;
    recent.to_ns = 10'000'000'000;
    analyze::CausalChain c;
    c.root_cause = "sync_bound";
    c.severity = analyze::Severity::High;
    c.impact_ns = 2'500'000'000;
    recent.explanation.chains = {c, c};
    analyze::ThreadAccount a;
    a.pid = 42;
    a.tid = 43;
    a.name = "python";
    a.time.on_cpu = 3'000;
    a.time.launching = 1'000;
    recent.explanation.accounts = {a};
  }
  agent::Progress progress() const {
    agent::Progress p{stats};
    p.processes = &processes;
    return p;
  }
};

}  // namespace

TEST(MetricFamilies, CollectivesPerCommunicatorAndRank) {
  Fixture fx;
  const auto fs = collect_metrics(fx.progress(), nullptr);
  const MetricFamily* f = family(fs, "causeway_nccl_bytes_total");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->points.size(), 1u);
  EXPECT_EQ(f->unit, "By");
  EXPECT_EQ(f->points[0].value, 12288);
  const Labels want{{"pid", "42"}, {"communicator", "00000000000000ab"}, {"rank", "2"}, {"nranks", "4"}, {"op", "ncclAllReduce"}};
  EXPECT_EQ(f->points[0].labels, want);
  EXPECT_EQ(family(fs, "causeway_nccl_seconds_total")->points[0].value, 0.003);
  // No recent explain yet: no chain series.
  EXPECT_EQ(family(fs, "causeway_chains"), nullptr);
}

TEST(MetricFamilies, CopiesByDirectionOnlyForLiveProcesses) {
  Fixture fx;
  const auto fs = collect_metrics(fx.progress(), nullptr);
  const MetricFamily* f = family(fs, "causeway_copy_bytes_total");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->points.size(), 2u);
  EXPECT_EQ(f->points[0].labels, (Labels{{"pid", "42"}, {"direction", "HtoD"}}));
  EXPECT_EQ(f->points[0].value, 8192);
  EXPECT_EQ(f->points[1].labels, (Labels{{"pid", "42"}, {"direction", "DtoH"}}));
  EXPECT_EQ(f->points[1].value, 4);
  // pid 77 exited: its calls are not a series.
  const MetricFamily* calls = family(fs, "causeway_process_calls_total");
  ASSERT_EQ(calls->points.size(), 1u);
  EXPECT_EQ(calls->points[0].value, 3);
  const MetricFamily* errors = family(fs, "causeway_process_call_errors_total");
  ASSERT_EQ(errors->points.size(), 1u);
  EXPECT_EQ(errors->points[0].labels, (Labels{{"pid", "42"}, {"op", "cudaMemcpy"}}));
  EXPECT_EQ(errors->points[0].value, 1);
}

TEST(MetricFamilies, ChainsAndAccountsOfTheRecentWindow) {
  Fixture fx;
  const auto fs = collect_metrics(fx.progress(), &fx.recent);
  const MetricFamily* chains = family(fs, "causeway_chains");
  ASSERT_NE(chains, nullptr);
  ASSERT_EQ(chains->points.size(), 1u);
  EXPECT_EQ(chains->points[0].labels, (Labels{{"root_cause", "sync_bound"}, {"severity", "HIGH"}}));
  EXPECT_EQ(chains->points[0].value, 2);
  EXPECT_EQ(family(fs, "causeway_chain_impact_seconds")->points[0].value, 5.0);
  const MetricFamily* share = family(fs, "causeway_thread_time_ratio");
  ASSERT_NE(share, nullptr);
  ASSERT_EQ(share->points.size(), analyze::split_parts().size());
  double on_cpu = -1, total = 0;
  for (const auto& p : share->points) {
    total += p.value;
    if (p.labels.back().second == "on_cpu") on_cpu = p.value;
  }
  EXPECT_DOUBLE_EQ(on_cpu, 0.75);
  EXPECT_DOUBLE_EQ(total, 1.0);
}

TEST(MetricFamilies, PrometheusTextEscapesLabelsAndAccumulatesBuckets) {
  Fixture fx;
  const uint16_t malloc_op = find_op("cudaMalloc")->id;
  fx.stats.ops[malloc_op].add(500);        // below the first edge (1 us)
  fx.stats.ops[malloc_op].add(3'000);      // <= 4 us
  fx.stats.ops[malloc_op].add(20'000'000'000);  // above the last edge (16 s)
  const std::string text = render_prometheus(collect_metrics(fx.progress(), nullptr));
  EXPECT_NE(text.find("comm=\"trainer \\\"0\\\"\""), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE causeway_call_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("causeway_call_duration_seconds_bucket{op=\"cudaMalloc\",le=\"1e-06\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("causeway_call_duration_seconds_bucket{op=\"cudaMalloc\",le=\"4e-06\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("causeway_call_duration_seconds_bucket{op=\"cudaMalloc\",le=\"16.777216\"} 2\n"),
            std::string::npos);
  EXPECT_NE(text.find("causeway_call_duration_seconds_bucket{op=\"cudaMalloc\",le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("causeway_call_duration_seconds_count{op=\"cudaMalloc\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("causeway_rows_written_total 0\n"), std::string::npos);
}

// The live view's lines from a recent explain: one per thread, then one per
// chain with its process and line.
TEST(LiveView, RecentLinesNameEachThreadAndChain) {
  Fixture fx;
  fx.recent.explanation.accounts[0].steps = 5;
  fx.recent.explanation.accounts[0].step_ns = 20'000'000;
  fx.recent.explanation.accounts[0].per_step.on_cpu = 15'000'000;
  fx.recent.explanation.accounts[0].per_step.launching = 5'000'000;
  auto& c = fx.recent.explanation.chains[0];
  c.symptom.pid = 42;
  c.symptom.comm = "python";
  c.frame = analyze::UserFrame{"step", "train.py", 61};
  EXPECT_EQ(format_recent(fx.recent, 6, 1),
            "  42/43 python: step 20.0 ms (x5): on-CPU outside CUDA 75% · launching 25%\n"
            "  HIGH sync_bound (pid 42 python) at train.py:61\n");
  EXPECT_EQ(format_recent(fx.recent, 0, 0), "");
  fx.recent.error = "database is locked";
  EXPECT_EQ(format_recent(fx.recent, 6, 4), "recent explain failed: database is locked\n");
}

// The oldest call in flight per process and op, as the agent measures it each
// second: a gauge that grows while a call hangs (empty: none in flight).
TEST(MetricFamilies, TheOldestCallInFlightIsAGauge) {
  Fixture fx;
  std::map<std::pair<uint32_t, uint16_t>, int64_t> in_flight = {
      {{42, find_op("cuCtxSynchronize")->id}, 17'500'000'000}};
  auto p = fx.progress();
  p.in_flight = &in_flight;
  const auto fs = collect_metrics(p, nullptr);
  const auto* f = family(fs, "causeway_call_in_flight_seconds");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, MetricType::Gauge);
  ASSERT_EQ(f->points.size(), 1u);
  EXPECT_DOUBLE_EQ(f->points[0].value, 17.5);
  const std::string text = render_prometheus(fs);
  EXPECT_NE(text.find("causeway_call_in_flight_seconds{pid=\"42\",op=\"cuCtxSynchronize\"} 17.5"), std::string::npos)
      << text;
  in_flight.clear();
  const auto none = collect_metrics(p, nullptr);
  ASSERT_NE(family(none, "causeway_call_in_flight_seconds"), nullptr);
  EXPECT_TRUE(family(none, "causeway_call_in_flight_seconds")->points.empty());
}
