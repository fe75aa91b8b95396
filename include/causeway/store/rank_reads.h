// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind the cross-rank analysis (analyze/cross_rank.h) and its
// rules: the sessions' hosts and clocks, NCCL collectives on every rank (to
// be matched by communicator and sequence number), each process's blocking
// waits on the GPU, what a rank's host recorded beside them, and the GPUs the
// ranks share with other processes. They read the whole file: a straggler is
// a property of the job, not of a window. A range is [from_ns, to_ns), in
// the session's own clock.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "causeway/store/sqlite.h"

namespace causeway::store {

struct RankSession {
  int64_t id = 0;
  std::string node, host, boot_id;  // "" when not recorded
};
// Every session of the file, in no set order.
std::vector<RankSession> rank_sessions(Connection& db);

struct CollectiveCall {
  int64_t session_id = 0;
  uint32_t pid = 0, tid = 0;
  std::optional<int64_t> rank, nranks;
  std::string comm_hash;
  std::optional<int64_t> seq;
  int64_t ts_ns = 0, dur_ns = 0, op_id = 0;
  std::optional<int64_t> bytes;
};
// NCCL collectives of a known communicator that carry a sequence number, in
// no set order.
void each_numbered_collective(Connection& db, const std::function<void(const CollectiveCall&)>& f);
// Successful communicator inits (ncclCommInitRank, ncclCommInitRankConfig)
// of a known communicator, in no set order.
void each_comm_init(Connection& db, const std::function<void(const CollectiveCall&)>& f);
// Collectives of a known, named communicator without a sequence number.
int64_t unnumbered_collectives(Connection& db);

struct BlockingWait {
  int64_t session_id = 0;
  uint32_t pid = 0;
  int64_t ts_ns = 0, dur_ns = 0;
};
// Every process's CUDA/HIP synchronisations and read-backs of min_dur_ns or
// longer, by start.
void each_blocking_wait(Connection& db, int64_t min_dur_ns,
                        const std::function<void(const BlockingWait&)>& f);

struct RankOffcpu {
  int64_t ts_ns = 0, dur_ns = 0;
  uint32_t tid = 0;
  int64_t state = 0;
  std::string by_comm;  // what ran instead; "" when not recorded
};
// A process's off-CPU intervals that overlap the range.
void each_offcpu_overlapping(Connection& db, int64_t session, uint32_t pid, int64_t from_ns, int64_t to_ns,
                             const std::function<void(const RankOffcpu&)>& f);

struct HostInterval {
  int64_t ts_ns = 0, dur_ns = 0;
};
// A process's block I/O requests that overlap the range.
void each_io_overlapping(Connection& db, int64_t session, uint32_t pid, int64_t from_ns, int64_t to_ns,
                         const std::function<void(const HostInterval&)>& f);
// The host's direct reclaims that overlap the range.
void each_reclaim_overlapping(Connection& db, int64_t session, int64_t from_ns, int64_t to_ns,
                              const std::function<void(const HostInterval&)>& f);
// When the host retransmitted TCP segments in the range.
void each_retransmit_between(Connection& db, int64_t session, int64_t from_ns, int64_t to_ns,
                             const std::function<void(int64_t ts_ns)>& f);
// The host's TCP retransmits over the session.
int64_t retransmit_count(Connection& db, int64_t session);

struct IbCounterGrowth {
  std::string counter;
  int64_t growth = 0;  // max - min over the session
};
// Each RDMA port counter's growth, per (device, port, counter).
std::vector<IbCounterGrowth> ib_counter_growth(Connection& db, int64_t session);
// Fatal async verbs events and QPs moved to ERR over the session.
int64_t verbs_fatal_count(Connection& db, int64_t session);

struct GpuSmShare {
  int64_t gpu = 0;
  double sm = 0;  // mean SM share of the process's samples, %; an unsampled share counts 0
};
// The GPUs NVML sampled the process on, one row each, with its SM share there.
std::vector<GpuSmShare> process_gpu_sm(Connection& db, int64_t session, uint32_t pid);

struct ProcessSmShare {
  uint32_t pid = 0;
  double sm = 0;  // as GpuSmShare's
};
// The process but `except_pids` with the highest SM share on the GPU, among
// those sampled on it at least min_samples times; none when there is none.
std::optional<ProcessSmShare> top_gpu_neighbour(Connection& db, int64_t session, int64_t gpu,
                                              const std::vector<uint32_t>& except_pids, int64_t min_samples);

// SELECTs of stack ids, for analyze's frame lookup (it takes the stacks as
// SQL): a process's CUDA/HIP calls, and its NCCL calls of a known communicator.
std::string cuda_call_stack_ids_sql(int64_t session, uint32_t pid);
std::string collective_stack_ids_sql(int64_t session, uint32_t pid);

}  // namespace causeway::store
