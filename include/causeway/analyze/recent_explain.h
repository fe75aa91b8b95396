// SPDX-License-Identifier: Apache-2.0
#pragma once
// explain over the recent past of a running trace, repeated: what the live
// table's account lines, the causal-chain metrics and the OTLP chain records
// show. A thread of its own (at the lowest CPU priority) opens the trace file
// read-only beside the writer (WAL: neither blocks the other), explains the
// last `window` and publishes the result; readers take the latest snapshot.
// Rows the writer has not committed yet (at most about a second) are missing
// from the window's tail.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "causeway/analyze/chain.h"
#include "causeway/store/sqlite.h"

namespace causeway::analyze {

struct RecentSnapshot {
  int64_t seq = 0;            // 1, 2, ...: a new explain each time
  int64_t from_ns = 0, to_ns = 0;  // the window (wall clock, the trace's clock)
  analyze::Explanation explanation;
  int64_t took_ns = 0;        // what the explain cost, to show it stays cheap
  std::string error;          // the last explain's failure, if it failed
};

class RecentExplain {
 public:
  // Explains the last `window_ns` every `every_ns`.
  RecentExplain(int64_t every_ns, int64_t window_ns);
  ~RecentExplain();
  RecentExplain(const RecentExplain&) = delete;
  RecentExplain& operator=(const RecentExplain&) = delete;

  void start(const std::string& db_path);  // idempotent; the writer has created the file
  // The latest snapshot; null before the first explain finishes.
  std::shared_ptr<const RecentSnapshot> latest() const;
  int64_t window_ns() const { return window_ns_; }

 private:
  void loop(std::string db_path);
  const int64_t every_ns_, window_ns_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  // The connection an explain is running on (under mu_): stopping interrupts
  // it, so a trace's exit never waits for an explain of a flood's window.
  store::Connection* running_ = nullptr;
  std::shared_ptr<const RecentSnapshot> latest_;
  std::thread thread_;
};

}  // namespace causeway::analyze
