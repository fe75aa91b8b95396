// SPDX-License-Identifier: Apache-2.0
#include "causeway/analyze/recent_explain.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "causeway/analyze/engine.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"
#include "causeway/store/read_only_trace.h"

namespace causeway::analyze {

RecentExplain::RecentExplain(int64_t every_ns, int64_t window_ns) : every_ns_(every_ns), window_ns_(window_ns) {}

RecentExplain::~RecentExplain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    if (running_) sqlite3_interrupt(running_->raw());
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RecentExplain::start(const std::string& db_path) {
  if (thread_.joinable()) return;
  thread_ = std::thread([this, db_path] { loop(db_path); });
}

std::shared_ptr<const RecentSnapshot> RecentExplain::latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void RecentExplain::loop(std::string db_path) {
  // The tracer's own draining comes first: this is a view, it may lag.
  setpriority(PRIO_PROCESS, pid_t(syscall(SYS_gettid)), 19);
  int64_t seq = 0;
  std::unique_ptr<store::Connection> db;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, std::chrono::nanoseconds(every_ns_), [this] { return stop_; })) return;
    }
    auto snap = std::make_shared<RecentSnapshot>();
    snap->seq = ++seq;
    snap->to_ns = wall_now_ns();
    snap->from_ns = snap->to_ns - window_ns_;
    const int64_t t0 = monotonic_now_ns();
    try {
      if (!db) db = store::open_trace_read_only(db_path);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
        running_ = db.get();
      }
      analyze::ExplainOptions o;
      o.from_ns = snap->from_ns;
      o.to_ns = snap->to_ns;
      snap->explanation = analyze::explain(*db, o);
      std::lock_guard<std::mutex> lock(mu_);
      running_ = nullptr;
    } catch (const std::exception& e) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = nullptr;
        if (stop_) return;  // interrupted by the stop
      }
      snap->error = e.what();
      db.reset();  // reopen next time (a file replaced, a schema still being made)
      spdlog::debug("recent explain: {}", e.what());
    }
    snap->took_ns = monotonic_now_ns() - t0;
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(snap);
  }
}

}  // namespace causeway::analyze
