// SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <string>

#include "causeway/agent/agent.h"
#include "causeway/analyze/recent_explain.h"
#include "causeway/consume/live_stats.h"

namespace causeway::present {

enum class LiveMode { Auto, Table, Lines, Off };

// What `trace` shows while it runs: on a terminal a table redrawn each
// second; otherwise one summary line every few seconds. Then a final summary.
// With a RecentExplain, both also show each dispatcher thread's account over
// the recent window and the chains found there.
class LiveView final : public agent::Observer {
 public:
  // Auto: Table on a terminal, else Lines. `recent` may be null.
  explicit LiveView(LiveMode mode, analyze::RecentExplain* recent = nullptr);
  LiveMode mode() const { return mode_; }
  void started(const std::string& db_path) override;
  void every_second(const agent::Progress& p) override;
  void finished(const agent::Progress& p, const agent::TraceSummary& sum) override;

 private:
  LiveMode mode_;
  std::string db_path_;
  int64_t last_line_ns_ = 0;
  analyze::RecentExplain* recent_;
  int64_t recent_seq_shown_ = 0;
};

// The recent explain's lines: one per dispatcher thread (the busiest
// `max_threads`) and one per chain (the first `max_chains`), each ending in
// a newline; "" when there is nothing to show yet.
std::string format_recent(const analyze::RecentSnapshot& r, size_t max_threads, size_t max_chains);

// The per-op table (shared by the live view and the final summary).
std::string format_op_table(const consume::LiveStats& s, bool interval_flags);

}  // namespace causeway::present
