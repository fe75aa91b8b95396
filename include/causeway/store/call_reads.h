// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind a trace's call statistics (analyze/trace_stats.h adds
// them up): library calls, launches counted in the kernel, copies and NCCL
// ranks, each limited to a window.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

struct CallDuration {
  std::string op, layer;
  int64_t dur_ns = 0, ret = 0;
};
// Each CUDA/HIP and NCCL call kept as a plain row, ordered by op then
// duration; `op` non-empty: that op only. Launches kept by --launch-sampling
// (flag 16) are a biased sample and are left out: launch_totals counts them.
void each_call_duration(Connection& db, const Window& w, const std::string& op,
                        const std::function<void(const CallDuration&)>& f);

struct LaunchTotal {
  std::string op, layer;
  int64_t calls = 0, errors = 0, total_ns = 0;
};
// Launches counted in the kernel (launch_stats), per op.
std::vector<LaunchTotal> launch_totals(Connection& db, const Window& w, const std::string& op);
// Their log2 duration buckets: (bucket, calls), by bucket.
std::vector<std::pair<int64_t, int64_t>> launch_buckets(Connection& db, const Window& w,
                                                        const std::string& op);
// The longest of the op's launches kept as rows (flag 16); nullopt when none.
std::optional<int64_t> longest_kept_launch_ns(Connection& db, const Window& w, const std::string& op);

struct KernelLaunchCount {
  std::string kernel;
  int64_t launches = 0, total_ns = 0, max_ns = 0;
};
// Kernels by launch count (ties: total launch-call time), at most `limit`:
// plain rows plus launches counted in the kernel, whose kept rows only give
// the max.
std::vector<KernelLaunchCount> kernel_launch_counts(Connection& db, const Window& w, int limit);

struct CopyTotal {
  int64_t kind = 0;  // CopyKind
  int64_t calls = 0, bytes = 0, total_ns = 0;
};
// Copies by direction, most bytes first.
std::vector<CopyTotal> copies_by_kind(Connection& db, const Window& w);

struct NcclRankTotal {
  std::string comm_hash;
  int64_t rank = -1;
  std::optional<int64_t> nranks;
  int64_t calls = 0, bytes = 0, total_ns = 0, max_ns = 0, latest_seq = -1;
};
// Per communicator and rank, ordered by both.
std::vector<NcclRankTotal> nccl_rank_totals(Connection& db, const Window& w);

struct NcclRankLateness {
  std::string comm_hash;
  int64_t rank = -1;
  int64_t matched = 0;  // collectives every rank entered
  double mean_late_ns = 0;
  int64_t max_late_ns = 0;
  std::optional<int64_t> latest_late_ns;  // on the latest sequence number all reached
};
// How long after the first rank each rank entered the same collective,
// matched across ranks by (communicator, seq).
std::vector<NcclRankLateness> nccl_rank_lateness(Connection& db, const Window& w);

}  // namespace causeway::store
