// SPDX-License-Identifier: Apache-2.0
#pragma once
// The rows a trace's viewers draw (export's Perfetto file, report's pages,
// the chains placed on the timeline): each event family as it was recorded,
// the processes that name the tracks (sessions: trace_info.h), and the calls
// and host events a chain points at. Rows come in time order unless said otherwise;
// NULL columns are empty optionals.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// The earliest event in the window over the exported families; nullopt when
// there is none.
std::optional<int64_t> first_event_ns(Connection& db, const Window& w);

struct Dim3 {
  int64_t x = 0, y = 0, z = 0;
};
struct CudaCallRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0, tid = 0;
  std::string op, layer;
  int64_t ret = 0;
  std::optional<int64_t> bytes;
  std::optional<std::string> kind;  // copy direction: HtoD, DtoH, ...
  std::optional<int64_t> stream;
  std::optional<Dim3> grid, block;  // launches only
  std::optional<int64_t> shared_mem;
  std::optional<std::string> kernel;
  std::optional<int64_t> stack_id;
};
void each_cuda_call(Connection& db, const Window& w, const std::function<void(const CudaCallRow&)>& f);

struct NcclCallRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0, tid = 0;
  std::string op;
  int64_t ret = 0;
  std::optional<std::string> comm_hash;
  std::optional<int64_t> rank, nranks, seq, count;
  std::optional<std::string> datatype, redop;
  std::optional<int64_t> bytes, stream, peer, stack_id;
};
void each_nccl_call(Connection& db, const Window& w, const std::function<void(const NcclCallRow&)>& f);

struct OffcpuRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0, tid = 0, cpu = 0;
  std::string state;  // runnable | sleeping | disk | other
  std::optional<int64_t> by_pid;
  std::optional<std::string> by_comm;
  std::optional<int64_t> waker_pid;
};
void each_offcpu_interval(Connection& db, const Window& w, const std::function<void(const OffcpuRow&)>& f);

struct ReclaimRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0, tid = 0, nr_reclaimed = 0;
};
void each_reclaim(Connection& db, const Window& w, const std::function<void(const ReclaimRow&)>& f);

struct IoRequestRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0;
  std::string dev;  // major:minor
  int64_t bytes = 0;
  std::string op;   // read | write | flush | discard | other
};
void each_io_request(Connection& db, const Window& w, const std::function<void(const IoRequestRow&)>& f);

struct TcpRetransmitRow {
  int64_t ts_ns = 0, pid = 0;
  std::string saddr;
  int64_t sport = 0;
  std::string daddr;
  int64_t dport = 0;
  std::string state;
};
void each_tcp_retransmit(Connection& db, const Window& w,
                         const std::function<void(const TcpRetransmitRow&)>& f);

// GPU memory a process held (device or managed: host memory is left out)
// after each of its allocations and frees.
struct MemoryHeldRow {
  int64_t ts_ns = 0, pid = 0;
  std::string memory;
  int64_t held_bytes = 0;
};
void each_gpu_memory_held(Connection& db, const Window& w,
                          const std::function<void(const MemoryHeldRow&)>& f);

// What a process's tensors held after each change, where PyTorch's allocator
// was probed. A trace older than the tensor curves gives no rows.
struct TensorsHeldRow {
  int64_t ts_ns = 0, pid = 0, held_bytes = 0;
};
void each_tensor_memory_held(Connection& db, const Window& w,
                             const std::function<void(const TensorsHeldRow&)>& f);

// Every session's processes, by session: a pid seen again in a later session
// comes again, after. comm and cmdline: empty when unknown.
struct ProcessRow {
  int64_t pid = 0;
  std::string comm, cmdline;
};
std::vector<ProcessRow> processes_by_session(Connection& db);

// One CUDA or NCCL call.
struct CallRow {
  int64_t ts_ns = 0, dur_ns = 0, pid = 0, tid = 0;
  std::string op;
};
// The window's longest calls, longest first, at most `limit`.
std::vector<CallRow> slowest_calls(Connection& db, const Window& w, int limit);
// The longest call of `op` in `pid` (`kernel` non-empty: of that kernel),
// starting within `between` (inclusive) when given; pid and op are the ones
// asked for.
std::optional<CallRow> slowest_call_of(Connection& db, int64_t pid, const std::string& op,
                                       const std::string& kernel,
                                       const std::optional<std::pair<int64_t, int64_t>>& between);

// A host event overlapping a call: an off-CPU interval or a direct reclaim of
// its thread, or a block request of its process.
struct HostEventRow {
  std::string kind;   // offcpu | reclaim | io
  std::string label;  // "off-CPU (sleeping, kworker/0:1)", "direct reclaim", "block read 8:0"
  int64_t ts_ns = 0, dur_ns = 0;
};
// Those overlapping [from_ns, to_ns), longest first, at most `limit`.
std::vector<HostEventRow> host_events_during(Connection& db, int64_t pid, int64_t tid, int64_t from_ns,
                                             int64_t to_ns, int limit);

}  // namespace causeway::store
