// SPDX-License-Identifier: Apache-2.0
#pragma once
// Summaries of a trace that the MCP tools and the HTML report format: per-op
// latencies with exact (nearest-rank) percentiles, kernels by launches,
// copies by direction, NCCL ranks with their lateness. store/call_reads.h
// reads the rows; this adds them up.
#include <cstdint>
#include <string>
#include <vector>

#include "causeway/store/call_reads.h"

namespace causeway::analyze {

struct OpLatency {
  std::string op, layer;
  int64_t calls = 0, errors = 0, total_ns = 0;
  int64_t p50_ns = 0, p95_ns = 0, p99_ns = 0, max_ns = 0;
  std::vector<int64_t> durations_ns;  // sorted; filled only when asked for
};
// Per op over CUDA/HIP and NCCL calls in the window, most total time first.
// `op` non-empty: that op only.
std::vector<OpLatency> op_latencies(store::Connection& db, const store::Window& w,
                                    const std::string& op = "", bool keep_durations = false);

using KernelLaunches = store::KernelLaunchCount;
// Kernels by launch count (ties: total launch-call time), at most `limit`.
std::vector<KernelLaunches> top_kernels(store::Connection& db, const store::Window& w, int limit);

struct CopyDirection {
  std::string kind;  // HtoD, DtoH, ...
  int64_t calls = 0, bytes = 0, total_ns = 0;
};
std::vector<CopyDirection> memcpy_by_direction(store::Connection& db, const store::Window& w);

struct NcclRank {
  std::string comm_hash;
  int64_t rank = -1, nranks = 0;
  int64_t calls = 0, bytes = 0, total_ns = 0, max_ns = 0;
  int64_t latest_seq = -1;
  // How long after the first rank this rank entered the same collective
  // (same communicator and sequence number): mean and worst, and on the
  // latest sequence number every rank reached.
  int64_t matched = 0;
  int64_t mean_late_ns = 0, max_late_ns = 0, latest_late_ns = 0;
};
std::vector<NcclRank> nccl_ranks(store::Connection& db, const store::Window& w);

// Nearest-rank percentile of sorted values (p in 0..100).
int64_t percentile(const std::vector<int64_t>& sorted, double p);

}  // namespace causeway::analyze
