// SPDX-License-Identifier: Apache-2.0
#pragma once
// Synthetic per-node trace files, written through store::TraceWriter exactly
// as `trace` writes them: ranks running all-reduces on one communicator, with
// a planted late rank, a planted clock offset and planted host evidence.
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "causeway/common/op_table.h"
#include "causeway/store/trace_writer.h"

namespace synthetic {

inline std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("cw_unit_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

struct Rank {
  int rank;
  uint32_t pid;
};

struct Node {
  std::string host, boot_id;
  int64_t clock_offset_ns = 0;  // this host's clock minus true time
  std::vector<Rank> ranks;
};

struct Plan {
  int nranks = 4;
  int collectives = 10;
  int64_t t0 = 1'700'000'000'000'000'000;
  int64_t period_ns = 100'000'000;     // one all-reduce every 100 ms
  int late_rank = -1;                  // planted straggler
  int64_t late_ns = 40'000'000;
  std::vector<int> late_seqs;          // collectives in which it is late
  std::vector<int> late_rank_by_seq;   // or: which rank is late in collective k (-1: none)
  int64_t transfer_ns = 2'000'000;
  bool blocking = true;                // calls return when the collective completes
  // Asynchronous collectives (blocking = false) with a stream sync behind
  // each: the rank's host reaches its sync this long after its entry (plus
  // skew_ns on every rank but late_rank, which computes after its enqueue
  // what the late rank computed before its own), and the sync returns when
  // the collective completes.
  bool syncs = false;
  int64_t sync_after_ns = 50'000;
  int64_t skew_ns = 0;
  std::string comm_hash = "00c0ffee00c0ffee";
};

inline bool late_in(const Plan& p, int seq) {
  for (int s : p.late_seqs)
    if (s == seq) return true;
  return false;
}

// True time rank r enters collective k.
inline int64_t true_entry(const Plan& p, int rank, int k) {
  int64_t t = p.t0 + k * p.period_ns + rank * 10'000;  // 10 us apart: on time
  if (rank == p.late_rank && late_in(p, k)) t += p.late_ns;
  if (size_t(k) < p.late_rank_by_seq.size() && p.late_rank_by_seq[size_t(k)] == rank) t += p.late_ns;
  return t;
}

inline int64_t true_end(const Plan& p, int k) {
  int64_t last = 0;
  for (int r = 0; r < p.nranks; r++) last = std::max(last, true_entry(p, r, k));
  return last + p.transfer_ns;
}

// Writes one node's file; `extra` may add evidence to the batch.
template <typename Extra>
void write_node(const std::string& path, const Node& n, const Plan& p, Extra&& extra) {
  using namespace causeway;
  store::TraceWriter w(path);
  model::SessionInfo s;
  s.host = n.host;
  s.node_id = n.host;
  s.boot_id = n.boot_id;
  s.version = "test";
  s.command_line = "synthetic";
  s.start_ts_ns = p.t0 + n.clock_offset_ns - 1'000'000'000;
  w.begin_session(s);
  model::Batch b;
  const uint16_t allreduce = find_op("ncclAllReduce")->id;
  const uint16_t init = find_op("ncclCommInitRank")->id;
  for (const auto& r : n.ranks) {
    b.of<model::ProcessInfo>().push_back({r.pid, "python3", "python3 train.py", "", std::nullopt, std::nullopt,
                           std::nullopt, std::nullopt});
    model::NcclCall c;
    c.pid = c.tid = r.pid;
    c.op_id = init;
    c.comm_hash = p.comm_hash;
    c.rank = r.rank;
    c.nranks = p.nranks;
    c.ret = 1;  // failed inits are no clock-sync samples
    c.ts_ns = p.t0 - 500'000'000 + n.clock_offset_ns;
    c.dur_ns = 1000;
    b.of<model::NcclCall>().push_back(c);
    for (int k = 0; k < p.collectives; k++) {
      model::NcclCall a;
      a.pid = a.tid = r.pid;
      a.op_id = allreduce;
      a.comm_hash = p.comm_hash;
      a.rank = r.rank;
      a.nranks = p.nranks;
      a.seq = k;
      a.count = 1 << 20;
      a.datatype = "float32";
      a.redop = "sum";
      a.bytes = 4 << 20;
      a.stream = 0x10;
      const int64_t entry = true_entry(p, r.rank, k);
      a.ts_ns = entry + n.clock_offset_ns;
      a.dur_ns = p.blocking ? true_end(p, k) - entry : 20'000;
      b.of<model::NcclCall>().push_back(a);
      if (p.syncs) {
        model::CudaCall sync;
        sync.pid = sync.tid = r.pid;
        sync.op_id = find_op("cuStreamSynchronize")->id;
        sync.stream = 0x10;
        const int64_t start = entry + p.sync_after_ns + (r.rank != p.late_rank ? p.skew_ns : 0);
        sync.ts_ns = start + n.clock_offset_ns;
        sync.dur_ns = std::max<int64_t>(10'000, true_end(p, k) - start);
        b.of<model::CudaCall>().push_back(sync);
      }
    }
  }
  extra(b);
  w.write(b);
  w.end_session(p.t0 + p.collectives * p.period_ns + n.clock_offset_ns);
}

inline void write_node(const std::string& path, const Node& n, const Plan& p) {
  write_node(path, n, p, [](causeway::model::Batch&) {});
}

}  // namespace synthetic
