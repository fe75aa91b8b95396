// SPDX-License-Identifier: Apache-2.0
#pragma once
// Cross-rank straggler analysis over a (merged) trace. A collective cannot
// finish before its last rank enters it, so for every (comm_hash, seq) seen on
// two or more ranks: who entered last, how late, and how long the others
// waited. Entry times come from different hosts' clocks: the skew between
// clock domains (boot ids) is estimated from collectives that end together
// (see estimate in docs/cluster.md) and stated, then corrected for.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"

namespace causeway::analyze {

struct CrossRankOptions {
  int64_t min_lateness_ns = 1'000'000;  // a rank this much behind the first is "late"
  double straggler_min_share = 0.5;      // last in at least this share of collectives
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
  RankId last;                 // the rank that entered last
  int64_t first_entry_ns = 0;  // wall time in the reference clock
  int64_t last_entry_ns = 0;
  int64_t lateness_ns = 0;     // last entry - first entry (skew-corrected)
  int64_t waited_ns = 0;       // sum over the other ranks of (last entry - their entry)
  int64_t last_local_entry_ns = 0;  // the last rank's entry in its own clock
};

struct RankLateness {
  RankId id;
  int64_t collectives = 0;
  int64_t times_last = 0;
  int64_t median_ns = 0, p90_ns = 0, max_ns = 0;  // entry - first entry, per collective
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
  int64_t median_lateness_ns = 0;
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
  int64_t late = 0;     // of which lateness >= min_lateness_ns
  double wait_gpu_s = 0;  // all ranks' waiting, GPU-seconds
  int64_t median_lateness_ns = 0;
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
