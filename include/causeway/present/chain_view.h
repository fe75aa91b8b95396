// SPDX-License-Identifier: Apache-2.0
#pragma once
// Causal chains from the explain engine, placed on the timeline: for each
// chain, its slowest symptom call (with its thread) and the host events on
// that thread inside it (off-CPU intervals, reclaims, block I/O of the
// process). export draws these as flow arrows, report as timeline lanes.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "causeway/present/perfetto_export.h"
#include "causeway/present/trace_window.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

struct ChainEvent {
  std::string label, kind;  // kind: symptom | offcpu | reclaim | io
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = 0, tid = 0;
};

struct ChainView {
  std::string severity;              // HIGH | MEDIUM | LOW
  std::string title;                 // "cpu contention: cudaMemcpy 4.1x slower in train (pid 100)"
  std::vector<std::string> lines;    // the symptom, evidence, code line, fix
  std::optional<ChainEvent> symptom; // the slowest slow call
  std::vector<ChainEvent> evidence;  // inside it, longest first (at most 5)
};

// Runs the explain engine over the window (most severe first, at most `top`;
// 0: all).
std::vector<ChainView> explain_chains(store::Connection& db, const TraceWindow& w, size_t top);

// Symptom -> each evidence event, one arrow each.
std::vector<TraceFlow> chain_flows(const std::vector<ChainView>& chains);

}  // namespace causeway::present
