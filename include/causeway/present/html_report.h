// SPDX-License-Identifier: Apache-2.0
#pragma once
// `causeway report`: one self-contained HTML file (inline CSS and SVG, no
// script or font from anywhere: it works air-gapped and can be mailed).
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "causeway/present/trace_window.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::present {

// What the report shows of one causal chain from the explain engine.
struct ReportChain {
  std::string title;
  std::string severity;               // HIGH | MEDIUM | LOW
  std::vector<std::string> lines;     // symptom, evidence, cause, recommendation, code line
  struct Span {
    std::string label, kind;          // kind: symptom | offcpu | io | nccl | ... (the colour)
    int64_t ts_ns = 0, dur_ns = 0;
  };
  std::vector<Span> spans;            // drawn on the chain's timeline lane
};

struct ReportCounts {
  int64_t chains = 0, ops = 0, kernels = 0, copy_kinds = 0, timeline_bars = 0;
  int64_t account_bars = 0;  // stacked-bar segments of the threads' time accounts
  int64_t path_parts = 0;    // segments of the processes' critical paths
  int64_t memory_bars = 0;   // stacked-bar segments of GPU memory held by site
  int64_t memory_reserved_lines = 0;  // processes whose pool's reserved curve is drawn over its tensors
};

ReportCounts write_html_report(store::Connection& db, const std::string& title,
                               const TraceWindow& window, const std::vector<ReportChain>& chains,
                               std::ostream& out);

}  // namespace causeway::present
