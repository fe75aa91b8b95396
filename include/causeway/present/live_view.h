// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>

#include "causeway/consume/live_stats.h"
#include "causeway/present/trace_session.h"

namespace causeway::cli {

// What `trace` shows while it runs: on a terminal a table redrawn each
// second; otherwise one summary line every few seconds. Then a final summary.
class LiveView {
 public:
  LiveView(LiveMode mode, std::string db_path) : mode_(mode), db_path_(std::move(db_path)) {}
  void refresh(const consume::LiveStats& s, int64_t drops, int64_t elapsed_ns, int64_t rows);
  void final_summary(const consume::LiveStats& s, int64_t drops, int64_t shed, int64_t elapsed_ns, int64_t rows,
                     const std::string& stop_reason, int ops_attached, size_t files);

 private:
  LiveMode mode_;
  std::string db_path_;
  int64_t last_line_ns_ = 0;
};

// The per-op table (shared by the live view and the final summary).
std::string format_op_table(const consume::LiveStats& s, bool interval_flags);

}  // namespace causeway::cli
