// SPDX-License-Identifier: Apache-2.0
#pragma once
// A trace as Chrome trace-event JSON (what ui.perfetto.dev and chrome://tracing
// open): one track per process/thread, calls and off-CPU intervals as complete
// slices on their thread, block I/O as async slices per process, TCP
// retransmits as instants, and flow arrows from a symptom call to its evidence.
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "causeway/present/trace_window.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

// One arrow: from the slice enclosing (from_ts_ns) on from_tid to the slice
// enclosing (to_ts_ns) on to_tid.
struct TraceFlow {
  std::string name;  // e.g. the chain's title
  int64_t from_ts_ns = 0;
  int64_t from_pid = 0, from_tid = 0;
  int64_t to_ts_ns = 0;
  int64_t to_pid = 0, to_tid = 0;
};

struct ExportCounts {
  int64_t cuda = 0, nccl = 0, offcpu = 0, io = 0, tcp = 0, reclaim = 0, flows = 0;
  int64_t processes = 0, threads = 0;
  int64_t counters = 0;  // counter samples (GPU memory held per process)
  int64_t slices() const { return cuda + nccl + offcpu + reclaim; }
};

// Timestamps are microseconds (with the nanoseconds as three decimals) since
// the first exported event, whose wall-clock time is in otherData.
ExportCounts write_perfetto_json(store::Connection& db, const TraceWindow& window,
                                 const std::vector<TraceFlow>& flows, std::ostream& out);

}  // namespace causeway::present
