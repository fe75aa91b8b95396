// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <filesystem>

#include "causeway/analyze/cross_rank.h"
#include "causeway/store/merge.h"
#include "synthetic_nodes.h"

using namespace causeway;
using namespace synthetic;

namespace {

// Two hosts, two ranks each; node-b's clock runs 5 ms ahead. Rank 3 (on
// node-b) enters 8 of 10 all-reduces 40 ms late; while it is late its thread
// is preempted by backup.sh, one TCP retransmit happens and the HCA counts
// symbol errors.
struct Cluster {
  Plan plan;
  Node a{"host-a", "boot-a", 0, {{0, 100}, {1, 101}}};
  Node b{"host-b", "boot-b", 5'000'000, {{2, 200}, {3, 201}}};
  std::string merged = temp_path("cluster_" + std::to_string(counter++) + ".db");
  static inline int counter = 0;

  Cluster(int late_rank, bool blocking = true) {
    plan.late_rank = late_rank;
    plan.late_seqs = {0, 1, 2, 3, 5, 6, 8, 9};
    plan.blocking = blocking;
  }
  ~Cluster() { std::filesystem::remove_all(std::filesystem::path(merged).parent_path()); }

  void write() {
    const std::string fa = temp_path("a" + merged.substr(merged.size() - 5));
    const std::string fb = temp_path("b" + merged.substr(merged.size() - 5));
    write_node(fa, a, plan);
    write_node(fb, b, plan, [&](model::Batch& batch) {
      if (plan.late_rank != 3) return;
      for (int k : plan.late_seqs) {
        // 30 ms of the 40 ms late window, in node-b's own clock
        const int64_t late_start = true_entry(plan, 3, k) - plan.late_ns + b.clock_offset_ns;
        model::OffCpuInterval o;
        o.ts_ns = late_start + 5'000'000;
        o.dur_ns = 30'000'000;
        o.pid = o.tid = 201;
        o.state = 0;  // runnable: preempted
        o.by_pid = 999;
        o.by_comm = "backup.sh";
        batch.of<model::OffCpuInterval>().push_back(o);
      }
      const int64_t in_window = true_entry(plan, 3, 2) - 10'000'000 + b.clock_offset_ns;
      batch.of<model::TcpRetransmit>().push_back({in_window, 0, "10.0.0.2", "10.0.0.1", 40000, 29500, "ESTABLISHED"});
      batch.of<model::IbCounterSample>().push_back({plan.t0, "mlx5_0", 1, "symbol_error", 10});
      batch.of<model::IbCounterSample>().push_back({plan.t0 + 900'000'000, "mlx5_0", 1, "symbol_error", 15});
      batch.of<model::IbCounterSample>().push_back({plan.t0, "mlx5_0", 1, "port_xmit_data", 100});
      batch.of<model::IbCounterSample>().push_back({plan.t0 + 900'000'000, "mlx5_0", 1, "port_xmit_data", 9000});
    });
    store::merge_traces(merged, {fa, fb});
  }
  analyze::CrossRankReport analyze() {
    store::Connection db(merged, store::Connection::Mode::ReadOnly);
    return analyze::analyze_cross_rank(db);
  }
};

}  // namespace

TEST(CrossRank, NamesThePlantedLateRankItsHostAndItsEvidence) {
  Cluster c(/*late_rank=*/3);
  c.write();
  auto rep = c.analyze();
  EXPECT_EQ(rep.matched, 10);
  EXPECT_EQ(rep.late, 8);
  ASSERT_TRUE(rep.straggler.has_value());
  const auto& s = *rep.straggler;
  EXPECT_EQ(s.id.rank, 3);
  EXPECT_EQ(s.id.node, "host-b");
  EXPECT_EQ(s.id.host, "host-b");
  EXPECT_EQ(s.id.pid, 201u);
  EXPECT_EQ(s.times_last, 8);
  EXPECT_EQ(s.collectives, 10);
  // Rank 3 is 40 ms - 30 us behind rank 0 (ranks are 10 us apart when on time).
  EXPECT_EQ(s.median_lateness_ns, 40'000'000 + 30'000);
  // The other three ranks waited (40ms+30us-0) + (40ms+30us-10us) + (40ms+30us-20us) per late collective.
  const double per = (3 * 40'030'000.0 - 30'000.0) / 1e9;
  EXPECT_NEAR(s.others_wait_gpu_s, 8 * per, 1e-9);
  // Its host's own evidence inside the late windows.
  EXPECT_EQ(s.evidence.late_ns, 8 * 40'030'000LL);
  EXPECT_EQ(s.evidence.offcpu_ns, 8 * 30'000'000LL);
  EXPECT_EQ(s.evidence.offcpu_runnable_ns, 8 * 30'000'000LL);
  EXPECT_EQ(s.evidence.top_preemptor, "backup.sh");
  EXPECT_EQ(s.evidence.retransmits, 1);
  EXPECT_EQ(s.evidence.rdma_errors, 5);  // symbol_error 10 -> 15; traffic counters ignored
  EXPECT_EQ(s.evidence.io_requests, 0);
  // Clock skew: node-b runs 5 ms ahead, estimated from the blocking collectives.
  ASSERT_EQ(rep.clocks.size(), 2u);
  for (const auto& k : rep.clocks) {
    EXPECT_TRUE(k.estimated);
    if (k.node == "host-a") {
      EXPECT_TRUE(k.reference);
      EXPECT_EQ(k.offset_ns, 0);
    } else {
      EXPECT_FALSE(k.reference);
      EXPECT_EQ(k.offset_ns, -5'000'000);
      EXPECT_EQ(k.samples, 10);
      EXPECT_EQ(k.uncertainty_ns, 0);
    }
  }
  // Lateness distribution and MAD: only rank 3 stands out.
  ASSERT_EQ(rep.ranks.size(), 4u);
  EXPECT_EQ(rep.ranks[0].id.rank, 3);
  EXPECT_TRUE(rep.ranks[0].outlier);
  for (size_t i = 1; i < rep.ranks.size(); i++) {
    EXPECT_FALSE(rep.ranks[i].outlier) << rep.ranks[i].id.rank;
    EXPECT_EQ(rep.ranks[i].times_last, 0);
  }
  EXPECT_EQ(rep.worst.front().last.rank, 3);
  EXPECT_EQ(rep.worst.front().lateness_ns, 40'030'000);
  // Link health: node-b had the retransmit and RDMA errors.
  ASSERT_EQ(rep.links.size(), 2u);
  EXPECT_EQ(rep.links[1].node, "host-b");
  EXPECT_EQ(rep.links[1].retransmits, 1);
  EXPECT_EQ(rep.links[1].rdma_errors, 5);
  EXPECT_EQ(rep.links[0].retransmits, 0);
}

TEST(CrossRank, ACleanClusterHasNoStraggler) {
  Cluster c(/*late_rank=*/-1);
  c.write();
  auto rep = c.analyze();
  EXPECT_EQ(rep.matched, 10);
  EXPECT_EQ(rep.late, 0);
  EXPECT_FALSE(rep.straggler.has_value());
  for (const auto& r : rep.ranks) EXPECT_FALSE(r.outlier);
  // Skew is still measured (and corrected): ranks are 10 us apart, not 5 ms.
  EXPECT_EQ(rep.worst.front().lateness_ns, 30'000);
}

// Asynchronous collectives and nothing that waits for them: entry skew
// alone is no evidence of waiting, so nothing is judged and no rank named.
TEST(CrossRank, WithoutBlockingCallsSkewIsStatedAsUnknown) {
  Cluster c(/*late_rank=*/3, /*blocking=*/false);
  c.write();
  auto rep = c.analyze();
  for (const auto& k : rep.clocks) {
    if (k.reference) continue;
    EXPECT_FALSE(k.estimated);
    EXPECT_EQ(k.samples, 0);
    EXPECT_EQ(k.offset_ns, 0);
  }
  EXPECT_EQ(rep.matched, 10);
  EXPECT_EQ(rep.judged, 0);
  EXPECT_FALSE(rep.straggler.has_value());
}

// Asynchronous collectives with a stream sync behind each (DDP's shape): the
// others' syncs wait for rank 3's late enqueue, rank 3's does not.
TEST(CrossRank, SyncsBehindAsynchronousCollectivesNameTheLateRank) {
  Cluster c(/*late_rank=*/3, /*blocking=*/false);
  c.plan.syncs = true;
  c.write();
  auto rep = c.analyze();
  EXPECT_EQ(rep.judged, 10);
  EXPECT_EQ(rep.late, 8);
  ASSERT_TRUE(rep.straggler.has_value());
  const auto& s = *rep.straggler;
  EXPECT_EQ(s.id.rank, 3);
  EXPECT_EQ(s.times_last, 8);
  // Without blocking calls the 5-ms skew is not measurable: entries are
  // compared as recorded, so host-b's ranks look 5 ms later than they are,
  // but what rank 3 held the others is bounded by their own extra waiting
  // (durations: no clock in them): rank 0's, 40 ms + 30 us.
  EXPECT_EQ(s.median_lateness_ns, 40'000'000 + 30'000);
  // It waited 2 ms (the transfer) - 50 us; the others (median) 40 ms more.
  EXPECT_EQ(s.own_wait_ns, 2'000'000 - 50'000);
  EXPECT_EQ(s.others_median_wait_ns, 40'000'000 + 30'000 - 10'000 + 2'000'000 - 50'000);
}

// The late rank computes 40 ms before its enqueue and every other rank the
// same 40 ms after its own: enqueues 40 ms apart, syncs that wait alike.
// Skew that nobody waits for is not a straggler.
TEST(CrossRank, EnqueueSkewThatNobodyWaitsForIsNoStraggler) {
  Cluster c(/*late_rank=*/3, /*blocking=*/false);
  c.plan.syncs = true;
  c.plan.skew_ns = c.plan.late_ns;
  c.write();
  auto rep = c.analyze();
  EXPECT_EQ(rep.matched, 10);
  EXPECT_EQ(rep.late, 0);
  EXPECT_FALSE(rep.straggler.has_value());
  for (const auto& r : rep.ranks) EXPECT_EQ(r.times_last, 0) << r.id.rank;
  // The skew is still reported, as skew.
  EXPECT_GE(rep.worst.front().enqueue_skew_ns, 40'000'000);
}

// Ranks that disagree on what their n-th collective was (another size under
// the same number) cannot be matched: no straggler from them.
TEST(CrossRank, RanksThatDisagreeOnTheirCollectivesNameNoStraggler) {
  Cluster c(/*late_rank=*/3);
  c.write();
  {
    store::Connection db(c.merged, store::Connection::Mode::ReadWriteCreate);
    db.exec("UPDATE nccl_call_events SET bytes = 8 WHERE pid = 201 AND seq % 2 = 0");
  }
  auto rep = c.analyze();
  EXPECT_EQ(rep.matched, 10);
  EXPECT_EQ(rep.inconsistent, 5);
  EXPECT_FALSE(rep.numbering_trusted);
  EXPECT_FALSE(rep.straggler.has_value());
}

TEST(CrossRank, IbErrorCountersAreTheErrorOnes) {
  EXPECT_TRUE(analyze::ib_counter_is_error("symbol_error"));
  EXPECT_TRUE(analyze::ib_counter_is_error("link_downed"));
  EXPECT_TRUE(analyze::ib_counter_is_error("port_xmit_discards"));
  EXPECT_FALSE(analyze::ib_counter_is_error("port_xmit_data"));
  EXPECT_FALSE(analyze::ib_counter_is_error("port_rcv_packets"));
}
