// SPDX-License-Identifier: Apache-2.0
#pragma once
// What the store accepts: decoded, enriched events. `trace` (from BPF records)
// and `demo` (synthetic) both produce these, so analysis cannot tell them apart.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace causeway::store {

struct SessionInfo {
  std::string host;
  std::string node_id;
  std::string boot_id;
  int64_t mono_to_wall_ns = 0;
  std::string version;
  std::string command_line;
  int64_t start_ts_ns = 0;
  std::string source = "trace";  // trace | demo | merge
};

using Dim3 = std::array<uint32_t, 3>;

struct CudaCall {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint16_t op_id = 0;
  int64_t ret = 0;
  std::optional<int64_t> bytes;
  std::optional<int> kind;  // CopyKind
  std::optional<uint64_t> stream;
  std::optional<Dim3> grid;
  std::optional<Dim3> block;
  std::optional<uint32_t> shared_mem;
  std::string kernel;  // empty = unknown
  std::optional<int64_t> stack_id;
  uint32_t flags = 0;
};

struct OffCpuInterval {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  uint32_t cpu = 0;
  int state = 0;  // CW_STATE_*
  uint32_t by_pid = 0;
  std::string by_comm;
  uint32_t waker_pid = 0;
};

struct IoRequest {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  std::string dev;  // "major:minor"
  int64_t bytes = 0;
  std::string op;  // read | write | flush | discard | other
};

struct TcpRetransmit {
  int64_t ts_ns = 0;
  uint32_t pid = 0;
  std::string saddr, daddr;
  uint16_t sport = 0, dport = 0;
  std::string state;
};

struct Reclaim {
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t nr_reclaimed = 0;
};

struct ProcessInfo {
  uint32_t pid = 0;
  std::string comm;
  std::string cmdline;
  std::string cgroup;
  std::optional<uint32_t> ppid;
  std::optional<int64_t> start_ts_ns;
  std::optional<int64_t> end_ts_ns;
  std::optional<int> exit_code;
};

struct OpCount {
  uint16_t op_id = 0;
  int64_t calls = 0, errors = 0, total_ns = 0, nested = 0, dropped = 0;
  int64_t shed = 0;  // rows not recorded under overload (the calls are counted)
};

struct Drop {
  int64_t ts_ns = 0;
  std::string source;
  int64_t count = 0;
};

struct StackFrame {
  std::string kind;  // python | native
  std::string func;
  std::string file;
  std::optional<int64_t> line;
  std::string module;
};
using Stack = std::vector<StackFrame>;  // [0] = innermost

struct NcclCall {
  int64_t ts_ns = 0, dur_ns = 0;
  uint32_t pid = 0, tid = 0;
  uint16_t op_id = 0;
  int64_t ret = 0;
  std::string comm_hash;  // empty = unknown
  std::optional<int> rank, nranks;
  std::optional<int64_t> seq, count;
  std::string datatype, redop;
  std::optional<int64_t> bytes;
  std::optional<uint64_t> stream;
  std::optional<int> peer;
  std::optional<int64_t> stack_id;
};

struct VerbsEvent {
  int64_t ts_ns = 0, dur_ns = 0;
  uint32_t pid = 0, tid = 0;
  uint16_t op_id = 0;
  int64_t ret = 0;
  std::optional<int64_t> qp_num;
  std::string detail;
};

struct IbCounterSample {
  int64_t ts_ns = 0;
  std::string device;
  int port = 0;
  std::string counter;
  int64_t value = 0;
};

// One flush interval of in-kernel launch aggregation (--launch-sampling) for
// one (process, op, kernel): launch_stats + launch_buckets rows.
struct LaunchStat {
  int64_t ts_ns = 0;  // end of the interval
  uint32_t pid = 0;
  uint16_t op_id = 0;
  std::string kernel;  // empty = unknown
  int64_t calls = 0, errors = 0, total_ns = 0;
  std::array<int64_t, 32> buckets{};  // bucket b: [2^b, 2^(b+1)) ns (CW_HIST_BUCKETS)
};

// One writer transaction's worth of events.
struct Batch {
  std::vector<CudaCall> cuda_calls;
  std::vector<OffCpuInterval> offcpu;
  std::vector<IoRequest> io;
  std::vector<TcpRetransmit> tcp;
  std::vector<Reclaim> reclaims;
  std::vector<ProcessInfo> processes;  // upserted by pid
  std::vector<NcclCall> nccl_calls;
  std::vector<VerbsEvent> verbs;
  std::vector<IbCounterSample> ib_counters;
  std::vector<Drop> drops;
  std::vector<LaunchStat> launch_stats;
  std::vector<std::pair<int64_t, Stack>> stacks;  // (stack_id, frames), new stacks only

  size_t size() const {
    return cuda_calls.size() + offcpu.size() + io.size() + tcp.size() + reclaims.size() +
           processes.size() + nccl_calls.size() + verbs.size() + ib_counters.size() +
           drops.size() + launch_stats.size() + stacks.size();
  }
  bool empty() const { return size() == 0; }
};

}  // namespace causeway::store
