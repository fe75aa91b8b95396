// SPDX-License-Identifier: Apache-2.0
#pragma once
// `trace --otlp http://HOST:PORT`: the metric families (metric_families.h)
// as OTLP/HTTP protobuf to /v1/metrics every kMetricsEveryNs, and each
// recent explain's causal chains as log records with their evidence to
// /v1/logs. A thread of its own sends; the tracer only enqueues into a
// bounded queue, so a slow or absent collector never slows tracing. Failed
// requests are retried with backoff; what cannot be sent is dropped and
// counted. Nothing is sent unless the flag names a collector. Plain HTTP
// only: causeway links no TLS library (use a collector on the host or the
// pod network, or a TLS sidecar).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "causeway/agent/agent.h"
#include "causeway/export/metric_families.h"

namespace causeway::analyze {
class RecentExplain;
struct RecentSnapshot;
}  // namespace causeway::analyze

namespace causeway::exporters {


// Resource attributes: service.name=causeway, host.name, ...
using OtlpResource = std::vector<std::pair<std::string, std::string>>;

// An ExportMetricsServiceRequest: counters as cumulative monotonic sums from
// start_ns, gauges, histograms with explicit bounds. Metric names are the
// Prometheus names without "_total" (a collector's Prometheus exporter adds
// it back to monotonic sums).
std::string encode_otlp_metrics(const std::vector<MetricFamily>& families, const OtlpResource& resource,
                                int64_t start_ns, int64_t now_ns);
// An ExportLogsServiceRequest: one log record per chain of the snapshot.
std::string encode_otlp_chains(const analyze::RecentSnapshot& snap, const OtlpResource& resource);

struct OtlpStats {
  int64_t requests_sent = 0, metric_points = 0, chain_records = 0;
  int64_t retries = 0;
  int64_t dropped_queue_full = 0, dropped_rejected = 0, dropped_gave_up = 0;
  int64_t dropped() const { return dropped_queue_full + dropped_rejected + dropped_gave_up; }
};

class OtlpExporter : public agent::Observer {
 public:
  static constexpr int64_t kMetricsEveryNs = 10'000'000'000;
  static constexpr size_t kQueueMax = 32;  // requests waiting
  static constexpr int kAttempts = 6;      // per request, 0.5 s .. 16 s apart

  // A bad URL (not http://HOST:PORT[/path]) is a UsageError before tracing.
  OtlpExporter(const std::string& url, agent::Observer& inner, analyze::RecentExplain* recent, OtlpResource resource);
  ~OtlpExporter() override;
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  void started(const std::string& db_path) override;
  void every_second(const agent::Progress& p) override;
  void finished(const agent::Progress& p, const agent::TraceSummary& s) override;
  OtlpStats stats() const;

 private:
  struct Request {
    std::string path, body;
    int64_t points = 0, records = 0;
  };
  void enqueue(Request r);
  void enqueue_metrics(int64_t now);  // the last families, as of `now`
  void send_loop();
  // One POST; the HTTP status, or 0 when no answer came.
  int post(const Request& r);
  agent::Observer& inner_;
  analyze::RecentExplain* recent_;
  OtlpResource resource_;
  std::string host_, port_, base_path_;
  int64_t start_ns_ = 0, last_metrics_ns_ = 0, chains_through_ns_ = 0, chains_seq_ = 0;
  // (root cause, pid) of the chains the last chain export carried.
  std::set<std::pair<std::string, uint32_t>> chains_sent_;
  void enqueue_chains(const analyze::RecentSnapshot& snap);
  std::vector<MetricFamily> last_families_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  bool stop_ = false, draining_ = false;
  OtlpStats stats_;
  std::thread thread_;
};

}  // namespace causeway::exporters
