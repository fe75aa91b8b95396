// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>

#include "causeway/agent/agent.h"
#include "causeway/consume/live_stats.h"

namespace causeway::present {

enum class LiveMode { Auto, Table, Lines, Off };

// What `trace` shows while it runs: on a terminal a table redrawn each
// second; otherwise one summary line every few seconds. Then a final summary.
class LiveView final : public agent::Observer {
 public:
  explicit LiveView(LiveMode mode);  // Auto: Table on a terminal, else Lines
  void started(const std::string& db_path) override { db_path_ = db_path; }
  void every_second(const agent::Progress& p) override;
  void finished(const agent::Progress& p, const agent::TraceSummary& sum) override;

 private:
  LiveMode mode_;
  std::string db_path_;
  int64_t last_line_ns_ = 0;
};

// The per-op table (shared by the live view and the final summary).
std::string format_op_table(const consume::LiveStats& s, bool interval_flags);

}  // namespace causeway::present
