// SPDX-License-Identifier: Apache-2.0
#pragma once
// Cross-rank straggler analysis over a (merged) trace. A collective finishes
// when its last rank arrives, on the GPU; frameworks enqueue collectives
// asynchronously (DDP from its autograd thread), so the moment a host call
// enters is not the moment a rank arrives, and skew between enqueues is not
// waiting. For every (comm_hash, seq) seen on two or more ranks, each rank's
// waiting is measured where it shows on the host: its blocking
// synchronisations (and blocking collectives) after its entry, until its next
// collective. The rank that waited least is the one the others waited for;
// what they waited beyond its own waiting, bounded by how late it enqueued, is
// the time it held them (docs/cluster.md). Entry times come from different
// hosts' clocks: the skew between clock domains (boot ids) is estimated from
// collectives that end together and stated, then corrected for; waits are
// durations, so no skew enters them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"

namespace causeway::analyze {

struct CrossRankOptions {
  int64_t min_lateness_ns = 1'000'000;  // a rank that held the others this long is "late"
  int64_t min_wait_ns = 100'000;        // a collective some rank waited this long for is judged
  // Late in at least this share of the judged collectives: in a healthy job
  // the rank that waits least changes from step to step (on 2 H200s, a clean
  // DDP job's was one rank in 72 of 134), a straggler's is itself in nearly all.
  double straggler_min_share = 0.75;
  double mad_threshold = 3.5;            // modified z-score of a rank's median lateness
  size_t max_instances = 20;             // worst collectives kept in the report
};

struct RankId {
  int64_t session_id = 0;
  uint32_t pid = 0;
  int rank = -1;
  std::string node;  // sessions.node_id
  std::string host;
  bool operator==(const RankId& o) const {
    return session_id == o.session_id && pid == o.pid && rank == o.rank;
  }
};

// One collective (comm_hash, seq) matched across ranks.
struct CollectiveInstance {
  std::string comm_hash;
  int64_t seq = 0;
  std::string op;
  int ranks_seen = 0;
  int nranks = 0;
  RankId last;                 // the rank the others waited for (the one that waited least)
  int64_t first_entry_ns = 0;  // wall time in the reference clock
  int64_t last_entry_ns = 0;
  int64_t enqueue_skew_ns = 0; // last entry - first entry (skew-corrected): not waiting by itself
  int64_t lateness_ns = 0;     // the longest any rank waited for `last` beyond its own wait
  int64_t waited_ns = 0;       // sum over the other ranks of what they waited for `last`
  int64_t last_local_entry_ns = 0;  // its entry in its own clock
  bool judged = false;         // some rank waited >= min_wait_ns in it
  bool consistent = true;      // every rank made the same op with the same byte count
};

struct RankLateness {
  RankId id;
  int64_t collectives = 0;
  int64_t times_last = 0;  // judged collectives in which it held the others >= min_lateness_ns
  // How long it held the others, per judged collective (0 where it did not).
  int64_t median_ns = 0, p90_ns = 0, max_ns = 0;
  int64_t median_skew_ns = 0;  // its enqueue entry - the first rank's, median (descriptive)
  int64_t wait_ns = 0;         // its own waiting in the judged collectives
  int64_t step_ns = 0;         // median time between its judged collectives (a step, where it syncs once a step)
  double mad_score = 0;  // modified z-score of median_ns among ranks
  bool outlier = false;
};

// What the straggler's own host recorded while it was late.
struct HostEvidence {
  int64_t late_ns = 0;            // total time the rank was behind (its late windows)
  int64_t offcpu_ns = 0;          // the rank's threads off-CPU inside those windows
  int64_t offcpu_runnable_ns = 0; // ... of which preempted while runnable
  std::string top_preemptor;      // comm that ran instead most
  int64_t io_requests = 0;
  int64_t io_ns = 0;
  int64_t retransmits = 0;        // on the host, inside the windows
  int64_t reclaim_ns = 0;         // direct reclaim on the host, inside the windows
  int64_t rdma_errors = 0;        // error-counter growth on the host's HCA ports during the trace
  int64_t verbs_fatal = 0;        // fatal async events / QPs moved to ERR
};

struct ClockSkew {
  std::string node;
  std::string boot_id;
  int64_t offset_ns = 0;       // add to this clock's times to get the reference clock
  int64_t uncertainty_ns = 0;  // MAD of the samples; 0 when not estimated
  int64_t samples = 0;         // collectives that ended together on both clocks
  bool reference = false;
  bool estimated = false;      // false: no usable samples, assumed 0
};

struct Straggler {
  RankId id;
  int64_t times_last = 0;
  int64_t collectives = 0;
  int64_t median_lateness_ns = 0;  // how long it held the others, median over judged collectives
  int64_t median_skew_ns = 0;      // its enqueue behind the first rank's, median
  int64_t own_wait_ns = 0;         // its own waiting in the judged collectives
  int64_t others_median_wait_ns = 0;  // the other ranks' (median rank) in the same collectives
  int64_t step_ns = 0;             // its median time between judged collectives
  double others_wait_gpu_s = 0;  // GPU-seconds the other ranks spent waiting on it
  HostEvidence evidence;
};

// Per host: link trouble during the matched collectives' time span.
struct LinkHealth {
  std::string node;
  int64_t retransmits = 0;
  int64_t rdma_errors = 0;
  int64_t verbs_fatal = 0;
};

struct CrossRankReport {
  int64_t matched = 0;  // collectives seen on >= 2 ranks
  int64_t judged = 0;   // of which some rank waited (a sync or a blocking call behind it)
  int64_t late = 0;     // of which one rank held the others >= min_lateness_ns
  int64_t inconsistent = 0;  // matched, but the ranks' ops or byte counts differ
  int64_t unnumbered = 0;    // collectives of a known communicator without a number
  // The numbering cannot be trusted (ranks disagree on what the n-th
  // collective was): no straggler is named from it.
  bool numbering_trusted = true;
  double wait_gpu_s = 0;  // all ranks' waiting, GPU-seconds
  int64_t median_lateness_ns = 0;
  int64_t span_ns = 0;  // first to last matched entry (reference clock)
  std::vector<CollectiveInstance> worst;  // by lateness, at most max_instances
  std::vector<RankLateness> ranks;
  std::vector<ClockSkew> clocks;
  std::vector<LinkHealth> links;
  std::optional<Straggler> straggler;
};

CrossRankReport analyze_cross_rank(store::Connection& db, const CrossRankOptions& opts = {});

// RDMA port counters that count errors (the rest count traffic).
bool ib_counter_is_error(const std::string& name);

}  // namespace causeway::analyze
