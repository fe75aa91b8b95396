// SPDX-License-Identifier: Apache-2.0
// explain on merged multi-node traces: the cross-rank rules name the planted
// late rank and its host, stay silent on a clean cluster, and call a link
// with errors degraded when no single rank is to blame.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "causeway/present/explain_format.h"
#include "causeway/analyze/engine.h"
#include "causeway/store/merge.h"
#include "synthetic_nodes.h"

using namespace causeway;
using namespace synthetic;

namespace {

// `extra` adds rows to host-b's file (std::function: empty for none).
std::string merged_cluster(const std::string& name, Plan plan, bool link_errors_on_b,
                           const std::function<void(model::Batch&)>& extra = {}) {
  Node a{"host-a", "boot-a", 0, {{0, 100}, {1, 101}}};
  Node b{"host-b", "boot-b", 5'000'000, {{2, 200}, {3, 201}}};
  const std::string fa = temp_path(name + "_a.db"), fb = temp_path(name + "_b.db");
  const std::string out = temp_path(name + ".db");
  write_node(fa, a, plan);
  write_node(fb, b, plan, [&](model::Batch& batch) {
    if (extra) extra(batch);
    if (!link_errors_on_b) return;
    for (int k = 0; k < plan.collectives; k++)
      batch.of<model::TcpRetransmit>().push_back({true_entry(plan, 2, k) + b.clock_offset_ns, 0, "10.0.0.2", "10.0.0.1",
                           40000, 29500, "ESTABLISHED"});
    batch.of<model::IbCounterSample>().push_back({plan.t0, "mlx5_0", 1, "port_rcv_errors", 0});
    batch.of<model::IbCounterSample>().push_back({plan.t0 + 900'000'000, "mlx5_0", 1, "port_rcv_errors", 42});
  });
  store::merge_traces(out, {fa, fb});
  return out;
}

const analyze::CausalChain* find(const analyze::Explanation& e, const std::string& cause) {
  for (const auto& c : e.chains)
    if (c.root_cause == cause) return &c;
  return nullptr;
}

struct Cleanup {
  ~Cleanup() { std::filesystem::remove_all(std::filesystem::path(temp_path("x")).parent_path()); }
};

}  // namespace

TEST(CrossRankExplain, NamesThePlantedLateRankAndHost) {
  Cleanup cleanup;
  Plan p;
  p.late_rank = 3;
  p.late_seqs = {0, 1, 2, 3, 5, 6, 8, 9};
  auto e = analyze::explain_file(merged_cluster("straggler", p, false), {});
  const auto* c = find(e, "straggler_rank");
  ASSERT_NE(c, nullptr) << present::format_text(e);
  EXPECT_EQ(c->severity, analyze::Severity::High);
  EXPECT_EQ(c->symptom.pid, 201u);
  ASSERT_GE(c->evidence.size(), 4u);
  EXPECT_EQ(c->evidence[0].data["rank"], 3);
  EXPECT_EQ(c->evidence[0].data["host"], "host-b");
  EXPECT_EQ(c->evidence[0].data["times_last"], 8);
  EXPECT_NE(c->evidence[0].text.find("rank 3 (pid 201 on host-b)"), std::string::npos) << c->evidence[0].text;
  // The skew between the hosts is stated: host-b runs 5 ms ahead.
  EXPECT_NE(c->evidence[2].text.find("host-b +5.00 ms vs host-a"), std::string::npos) << c->evidence[2].text;
  EXPECT_EQ(find(e, "network_degraded"), nullptr);
  int stragglers = 0;
  for (const auto& ch : e.chains) stragglers += ch.root_cause == "straggler_rank";
  EXPECT_EQ(stragglers, 1) << present::format_text(e);
}

TEST(CrossRankExplain, CleanClusterHasNoHighChain) {
  Cleanup cleanup;
  auto e = analyze::explain_file(merged_cluster("clean", Plan{}, false), {});
  for (const auto& c : e.chains) EXPECT_NE(c.severity, analyze::Severity::High) << c.root_cause;
  EXPECT_EQ(find(e, "straggler_rank"), nullptr);
  EXPECT_EQ(find(e, "network_degraded"), nullptr);
}

TEST(CrossRankExplain, LinkErrorsWithoutALateRankAreNetworkDegraded) {
  Cleanup cleanup;
  Plan p;
  p.late_rank_by_seq = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1};  // late ranks rotate: nobody to blame
  auto e = analyze::explain_file(merged_cluster("network", p, true), {});
  const auto* c = find(e, "network_degraded");
  ASSERT_NE(c, nullptr) << present::format_text(e);
  EXPECT_EQ(c->severity, analyze::Severity::High);
  EXPECT_EQ(c->evidence[1].data["node"], "host-b");
  EXPECT_EQ(c->evidence[1].data["rdma_errors"], 42);
  EXPECT_EQ(c->evidence[1].data["retransmits"], 10);
  EXPECT_EQ(find(e, "straggler_rank"), nullptr);
}

// Nobody's host is late, every rank waits alike, and NVML saw another
// process on rank 3's GPU taking 45% of its SMs: that rank is the straggler,
// and its cause is the other process.
TEST(CrossRankExplain, ARankWhoseGpuIsSharedIsTheStraggler) {
  Cleanup cleanup;
  Plan p;
  auto e = analyze::explain_file(merged_cluster("shared", p, false, [&](model::Batch& b) {
                                   for (int i = 0; i < 5; i++) {
                                     const int64_t t = p.t0 + i * 200'000'000 + 5'000'000;
                                     b.of<model::GpuProcessSample>().push_back({t, 0, 200, 90, 10, 1 << 30});
                                     b.of<model::GpuProcessSample>().push_back({t, 1, 201, 50, 10, 1 << 30});
                                     b.of<model::GpuProcessSample>().push_back({t, 1, 777, 45, 10, 1 << 20});
                                   }
                                 }),
                                 {});
  const auto* c = find(e, "straggler_rank");
  ASSERT_NE(c, nullptr) << present::format_text(e);
  EXPECT_EQ(c->severity, analyze::Severity::High);
  EXPECT_EQ(c->symptom.pid, 201u);
  EXPECT_EQ(c->evidence[0].data["rank"], 3);
  EXPECT_EQ(c->evidence[0].data["gpu"], 1);
  EXPECT_EQ(c->evidence[0].data["neighbour_pid"], 777);
  EXPECT_NE(c->recommendation.find("move pid 777"), std::string::npos) << c->recommendation;
}
