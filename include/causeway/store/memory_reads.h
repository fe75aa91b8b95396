// SPDX-License-Identifier: Apache-2.0
#pragma once
// The reads behind explain's GPU memory account (analyze/memory.cpp: the
// allocations and frees it replays, NVML's view of the memory) and its
// graph_recapture rule (captures, instantiations, the graphs' memory pools).
// Times are wall-clock ns.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "causeway/store/sqlite.h"
#include "causeway/store/window.h"

namespace causeway::store {

// Op ids (common/op_table.h), in the order given.
using OpIds = std::vector<int64_t>;

// A time of one process of one session.
struct ProcessTime {
  int64_t session = 0;
  uint32_t pid = 0;
  int64_t ts_ns = 0;
};
// Each process that exited (`pid`: that one only) with its last CUDA call of
// `ops`; those with none left out.
std::vector<ProcessTime> exited_last_calls(Connection& db, const OpIds& ops, std::optional<uint32_t> pid);
// Each process's first CUDA call of `ops` in the window, by session and pid.
std::vector<ProcessTime> first_calls(Connection& db, const OpIds& ops, const Window& w);

// A CUDA call of the memory replay.
struct MemoryCall {
  int64_t session = 0, pid = 0, tid = 0, ts_ns = 0, op_id = 0, ret = 0;
  int64_t bytes = 0;              // 0 when not recorded
  std::optional<uint64_t> addr;   // none when no address came back
  int64_t stack_id = -1;          // -1: none
};
// The CUDA calls of `ops` in the window, ordered by session, pid and time.
void each_memory_call(Connection& db, const OpIds& ops, const Window& w,
                      const std::function<void(const MemoryCall&)>& f);
// The first and last start of the process's CUDA calls of `ops` in the
// window; 0, 0 when none.
std::pair<int64_t, int64_t> calls_span(Connection& db, int64_t session, uint32_t pid, const OpIds& ops,
                                       const Window& w);

// The memory size of the GPU the process was seen on (NVML's process
// samples), else of the session's only GPU; none when unknown.
std::optional<int64_t> process_gpu_memory_total(Connection& db, int64_t session, uint32_t pid);
// The most GPU memory NVML saw the process use in the window.
std::optional<int64_t> process_gpu_memory_max(Connection& db, int64_t session, uint32_t pid, const Window& w);
// A GPU's memory in use (NVML) and its size when known.
struct GpuMemoryUse {
  int64_t used = 0;
  std::optional<int64_t> total;
};
// The session's GPU sample nearest `at_ns`, within `within_ns` either side;
// of samples as near, the fullest GPU's.
std::optional<GpuMemoryUse> gpu_memory_near(Connection& db, int64_t session, int64_t at_ns,
                                            int64_t within_ns);
// The process's GPU memory in use in its sample nearest `at_ns`, within
// `within_ns` either side.
std::optional<int64_t> process_gpu_memory_near(Connection& db, int64_t session, uint32_t pid, int64_t at_ns,
                                               int64_t within_ns);

// Over the TEMP table `baseline` (analyze/rule_context.h): the most calls of
// `ops` any process made; 0 when none.
int64_t most_baseline_calls(Connection& db, const OpIds& ops);
// The processes that made `min_calls` or more calls of one of `ops`, by pid.
std::vector<uint32_t> baseline_pids(Connection& db, const OpIds& ops, int64_t min_calls);
// Of `ops`, the one the process called most; 0 when none.
int64_t most_called_op(Connection& db, uint32_t pid, const OpIds& ops);
// The process's graph launches (OpClass::Graph).
int64_t graph_launches(Connection& db, uint32_t pid);

// The calls that capture and instantiate CUDA graphs.
struct CaptureOps {
  OpIds begins, ends, instantiates;
};
// One of them: a BeginCapture, an EndCapture, else an instantiation.
struct CaptureCall {
  int64_t session = 0, tid = 0;
  int64_t stream = 0;  // 0 when none
  bool begin = false, end = false;
  int64_t ts_ns = 0, dur_ns = 0;
};
// The process's ones in the window, in time order.
void each_capture_call(Connection& db, const Window& w, uint32_t pid, const CaptureOps& ops,
                       const std::function<void(const CaptureCall&)>& f);
// A SELECT of the stack ids of the process's BeginCaptures in the window, for
// analyze's frame lookup (it takes the stacks as SQL).
std::string capture_stack_ids_sql(const Window& w, uint32_t pid, const CaptureOps& ops);

// A successful device allocation (OpClass::Alloc) or free (OpClass::Free).
struct AllocFreeCall {
  int64_t ts_ns = 0, dur_ns = 0;
  bool alloc = false;
  std::optional<int64_t> addr;
  uint32_t tid = 0;
};
// The process's ones in the window, in time order.
std::vector<AllocFreeCall> alloc_free_calls(Connection& db, const Window& w, uint32_t pid);

}  // namespace causeway::store
