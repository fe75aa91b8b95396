// SPDX-License-Identifier: Apache-2.0
#pragma once
// `trace --prometheus HOST:PORT`: the running trace's counters as Prometheus
// text exposition on GET /metrics. An Observer in front of another (the live
// view): each second it renders the agent's numbers once; a thread of its
// own answers scrapes with the latest text, so a slow scraper never holds up
// tracing. The series and their bounded labels: metric_families.h.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "causeway/agent/agent.h"

namespace causeway::analyze {
class RecentExplain;
}  // namespace causeway::analyze

namespace causeway::exporters {


class MetricsServer : public agent::Observer {
 public:
  // Binds now: a bad or busy address is a UsageError before tracing starts.
  // "PORT" or ":PORT" binds 127.0.0.1; another host must be named.
  // `recent` (may be null) adds the periodic explain's chain and account
  // series.
  MetricsServer(const std::string& address, agent::Observer& inner, analyze::RecentExplain* recent = nullptr);
  ~MetricsServer() override;
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  void started(const std::string& db_path) override;
  void every_second(const agent::Progress& p) override;
  void finished(const agent::Progress& p, const agent::TraceSummary& s) override { inner_.finished(p, s); }
  int port() const { return port_; }

 private:
  void serve();
  agent::Observer& inner_;
  analyze::RecentExplain* recent_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string text_ = "# causeway: the first numbers come after the first second\n";
  std::thread thread_;
};

}  // namespace causeway::exporters
