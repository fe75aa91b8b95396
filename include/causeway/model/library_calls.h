// SPDX-License-Identifier: Apache-2.0
#pragma once
// Library calls (CUDA runtime and driver, HIP, NCCL, ibverbs): the record is
// the generic cw_call_event of include/causeway/events.h (one uprobe pair
// serves every function: bpf/libcall.bpf.c); how each function's arguments
// decode is its op table row (src/common/op_table.cpp) and the decoders of
// src/consume/ (cuda_decoder, nccl_decoder, verbs_decoder). These are the
// three tables they fill.
#include <array>
#include <optional>
#include <string>

#include "causeway/events.h"
#include "causeway/model/family.h"

namespace causeway::model {

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
  std::optional<uint64_t> addr;  // allocations (at return) and frees: the address or handle
  // A sync or a copy: ns from the process's last launch before it to its
  // entry (negative: a launch returned while it ran); none when no launch
  // was probed yet.
  std::optional<int64_t> since_launch_ns;
  std::optional<int64_t> launch_seq;  // and the process's launches probed by its return
};

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

namespace detail {
template <int I, bool Grid>
SqlValue dim(const CudaCall& c) {
  const auto& d = Grid ? c.grid : c.block;
  return d ? SqlValue(int64_t((*d)[I])) : SqlValue{};
}
template <auto Member, typename Row>
SqlValue text_or_null(const Row& r) {
  const std::string& s = r.*Member;
  return s.empty() ? SqlValue{} : SqlValue(std::string_view(s));
}
}  // namespace detail

struct CudaCalls {
  using Row = CudaCall;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "entry time", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "duration", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id` (the view's `op` and `layer`)", field<&Row::op_id>},
      {"ret", SqlType::Integer, true, "return code (cudaError_t / CUresult / hipError_t; 0 = success)",
       field<&Row::ret>},
      {"bytes", SqlType::Integer, false,
       "allocation, copy or set size; for frees, the size of the allocation freed when it was seen",
       field<&Row::bytes>},
      {"kind", SqlType::Integer, false,
       "copy direction: 0 HtoH, 1 HtoD, 2 DtoH, 3 DtoD, 4 default (the view names it)", field<&Row::kind>},
      {"stream", SqlType::Integer, false, "stream handle (0 = default stream)", field<&Row::stream>},
      {"grid_x", SqlType::Integer, false, "launch grid", detail::dim<0, true>},
      {"grid_y", SqlType::Integer, false, "launch grid", detail::dim<1, true>},
      {"grid_z", SqlType::Integer, false, "launch grid", detail::dim<2, true>},
      {"block_x", SqlType::Integer, false, "launch block", detail::dim<0, false>},
      {"block_y", SqlType::Integer, false, "launch block", detail::dim<1, false>},
      {"block_z", SqlType::Integer, false, "launch block", detail::dim<2, false>},
      {"shared_mem", SqlType::Integer, false, "dynamic shared memory bytes of a launch",
       field<&Row::shared_mem>},
      {"kernel_id", SqlType::Integer, false,
       "→ `kernels.id`: the kernel (demangled) of a launch, or the name a naming call resolved",
       field<&Row::kernel>, "kernels"},
      {"stack_id", SqlType::Integer, false, "→ `stack_frames.stack_id`, NULL when no stack was captured",
       field<&Row::stack_id>},
      {"flags", SqlType::Integer, true,
       "1 argument bytes read, 2 stack arguments read, 4 has a Python stack, 8 nested, 16 a launch "
       "kept by `--launch-sampling` (already counted in `launch_stats`: leave it out of counts, "
       "`WHERE flags & 16 = 0`)",
       field<&Row::flags>},
      {"addr", SqlType::Integer, false,
       "the address an allocation returned (successful ones only) or a free was given; the handle of "
       "`cuMemCreate`/`cuMemRelease`. Pairs frees with allocations (view `gpu_allocations`)",
       field<&Row::addr>},
      {"since_launch_ns", SqlType::Integer, false,
       "a sync or a copy: ns from the process's last probed launch (at its return) to this call's entry; "
       "negative when a launch returned while the call ran, NULL when none was probed before it or the "
       "trace predates schema 23. Host work after that launch and before a wait on a busy GPU ran while "
       "the GPU worked",
       field<&Row::since_launch_ns>},
      {"launch_seq", SqlType::Integer, false,
       "a sync or a copy: the process's launches probed by its return (a count since the trace began): "
       "the difference between two rows is how many launches lie between them, recorded or not",
       field<&Row::launch_seq>},
  };
  static constexpr Table<Row> kTable{
      "cuda_call_events",
      "One row per CUDA runtime / driver / HIP call (a call nested inside another traced call on the "
      "same thread is counted in `op_stats.nested`, not repeated here). View `cuda_calls` names the "
      "op, layer, copy kind and kernel.",
      TableKind::Events, kColumns, {}, true};
};

struct NcclCalls {
  using Row = NcclCall;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "entry time", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "duration", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id` (the view's `op`)", field<&Row::op_id>},
      {"ret", SqlType::Integer, true, "ncclResult_t", field<&Row::ret>},
      {"comm_hash", SqlType::Text, false,
       "hash of the communicator's ncclUniqueId: the same on every rank", detail::text_or_null<&Row::comm_hash>},
      {"rank", SqlType::Integer, false, "this process's rank in the communicator", field<&Row::rank>},
      {"nranks", SqlType::Integer, false, "the communicator's size", field<&Row::nranks>},
      {"seq", SqlType::Integer, false,
       "per-communicator number of the collective (send/recv: per direction and peer), given by the probe at the "
       "call's entry; NULL: not numbered",
       field<&Row::seq>},
      {"count", SqlType::Integer, false, "element count", field<&Row::count>},
      {"datatype", SqlType::Text, false, "e.g. `float32`", detail::text_or_null<&Row::datatype>},
      {"redop", SqlType::Text, false, "reduce operation, e.g. `sum`", detail::text_or_null<&Row::redop>},
      {"bytes", SqlType::Integer, false, "bytes moved by this rank", field<&Row::bytes>},
      {"stream", SqlType::Integer, false, "CUDA stream", field<&Row::stream>},
      {"peer", SqlType::Integer, false, "peer rank (send/recv) or root", field<&Row::peer>},
      {"stack_id", SqlType::Integer, false, "→ `stack_frames.stack_id`", field<&Row::stack_id>},
  };
  static constexpr Table<Row> kTable{"nccl_call_events",
                                     "NCCL calls (docs/cluster.md); view `nccl_calls` names the op.",
                                     TableKind::Events, kColumns, {}, true};
};

struct VerbsEvents {
  using Row = VerbsEvent;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "entry time", field<&Row::ts_ns>},
      {"dur_ns", SqlType::Integer, true, "duration", field<&Row::dur_ns>},
      {"pid", SqlType::Integer, true, "process (tgid)", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "thread", field<&Row::tid>},
      {"op_id", SqlType::Integer, true, "→ `ops.id`", field<&Row::op_id>},
      {"ret", SqlType::Integer, true, "return code", field<&Row::ret>},
      {"qp_num", SqlType::Integer, false, "queue pair number", field<&Row::qp_num>},
      {"detail", SqlType::Text, false, "async event type, QP state transition", field<&Row::detail>},
  };
  static constexpr Table<Row> kTable{"verbs_events", "ibverbs calls: async events and QP state changes.",
                                     TableKind::Events, kColumns};
};

}  // namespace causeway::model
CAUSEWAY_TABLE(CudaCalls);
CAUSEWAY_TABLE(NcclCalls);
CAUSEWAY_TABLE(VerbsEvents);
