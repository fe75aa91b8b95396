// SPDX-License-Identifier: Apache-2.0
// OTLP/HTTP protobuf, encoded by hand: the messages are few and flat enough
// that a protobuf library would be the larger part. Field numbers follow
// opentelemetry-proto (metrics/v1, logs/v1, common/v1, resource/v1); the
// e2e test decodes what this writes with those definitions.
#include "causeway/export/otlp.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include <spdlog/spdlog.h>

#include "causeway/analyze/recent_explain.h"
#include "causeway/common/error.h"
#include "causeway/common/time.h"

namespace causeway::exporters {
namespace {

// A protobuf message being written: fields appended in any order.
class Pb {
 public:
  void varint(int field, uint64_t v) {
    tag(field, 0);
    raw_varint(v);
  }
  void fixed64(int field, uint64_t v) {
    tag(field, 1);
    raw_fixed64(v);
  }
  void dbl(int field, double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    fixed64(field, bits);
  }
  void bytes(int field, std::string_view s) {
    tag(field, 2);
    raw_varint(s.size());
    out_.append(s);
  }
  void msg(int field, const Pb& m) { bytes(field, m.out_); }
  // A packed repeated fixed64 or double.
  template <typename T>
  void packed64(int field, const std::vector<T>& v) {
    Pb body;
    for (T x : v) {
      uint64_t bits;
      static_assert(sizeof(T) == 8);
      std::memcpy(&bits, &x, sizeof bits);
      body.raw_fixed64(bits);
    }
    msg(field, body);
  }
  const std::string& str() const { return out_; }

 private:
  void tag(int field, int wire) { raw_varint((uint64_t(field) << 3) | uint64_t(wire)); }
  void raw_varint(uint64_t v) {
    while (v >= 0x80) {
      out_ += char(uint8_t(v) | 0x80);
      v >>= 7;
    }
    out_ += char(uint8_t(v));
  }
  void raw_fixed64(uint64_t v) {
    for (int i = 0; i < 8; i++) out_ += char(uint8_t(v >> (8 * i)));
  }
  std::string out_;
};

// common.v1.AnyValue
Pb any_string(std::string_view s) {
  Pb v;
  v.bytes(1, s);
  return v;
}
Pb any_int(int64_t i) {
  Pb v;
  v.varint(3, uint64_t(i));
  return v;
}
Pb any_double(double d) {
  Pb v;
  v.dbl(4, d);
  return v;
}
// common.v1.KeyValue
Pb kv(std::string_view key, const Pb& value) {
  Pb k;
  k.bytes(1, key);
  k.msg(2, value);
  return k;
}

Pb resource_of(const OtlpResource& r) {
  Pb res;
  for (const auto& [k, v] : r) res.msg(1, kv(k, any_string(v)));
  return res;
}

Pb scope() {
  Pb s;
  s.bytes(1, "causeway");
  s.bytes(2, CAUSEWAY_VERSION);
  return s;
}

std::string otlp_name(const std::string& prometheus_name) {
  const std::string suffix = "_total";
  if (prometheus_name.size() > suffix.size() &&
      prometheus_name.compare(prometheus_name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return prometheus_name.substr(0, prometheus_name.size() - suffix.size());
  return prometheus_name;
}

// Export{Metrics,Logs}ServiceRequest: one Resource{Metrics,Logs} (its
// resource is field 1, its one scope's items field 2), as field 1.
std::string export_request(const OtlpResource& resource, const Pb& scoped) {
  Pb r;
  r.msg(1, resource_of(resource));
  r.msg(2, scoped);
  Pb req;
  req.msg(1, r);
  return req.str();
}

// logs.v1.SeverityNumber: INFO 9, WARN 13, ERROR 17, FATAL 21.
int severity_number(analyze::Severity s) {
  switch (s) {
    case analyze::Severity::Critical: return 21;
    case analyze::Severity::High: return 17;
    case analyze::Severity::Medium: return 13;
    default: return 9;
  }
}

}  // namespace

std::string encode_otlp_metrics(const std::vector<MetricFamily>& families, const OtlpResource& resource,
                                int64_t start_ns, int64_t now_ns) {
  Pb sm;
  sm.msg(1, scope());
  for (const auto& f : families) {
    if (f.points.empty()) continue;
    Pb m;
    m.bytes(1, otlp_name(f.name));
    m.bytes(2, f.help);
    m.bytes(3, f.unit);
    Pb data;
    for (const auto& pt : f.points) {
      Pb dp;
      const int attrs_field = f.type == MetricType::Histogram ? 9 : 7;
      for (const auto& [k, v] : pt.labels) dp.msg(attrs_field, kv(k, any_string(v)));
      if (f.type != MetricType::Gauge) dp.fixed64(2, uint64_t(start_ns));
      dp.fixed64(3, uint64_t(now_ns));
      if (f.type == MetricType::Histogram) {
        dp.fixed64(4, pt.count);
        dp.dbl(5, pt.sum);
        dp.packed64(6, pt.buckets);
        dp.packed64(7, f.bounds);
      } else {
        dp.dbl(4, pt.value);
      }
      data.msg(1, dp);
    }
    if (f.type != MetricType::Gauge) data.varint(2, 2);  // AGGREGATION_TEMPORALITY_CUMULATIVE
    if (f.type == MetricType::Counter) data.varint(3, 1);  // is_monotonic
    m.msg(f.type == MetricType::Gauge ? 5 : f.type == MetricType::Counter ? 7 : 9, data);
    sm.msg(2, m);
  }
  return export_request(resource, sm);
}

std::string encode_otlp_chains(const analyze::RecentSnapshot& snap, const OtlpResource& resource) {
  Pb sl;
  sl.msg(1, scope());
  for (const auto& c : snap.explanation.chains) {
    Pb r;
    r.fixed64(1, uint64_t(snap.to_ns));
    r.fixed64(11, uint64_t(wall_now_ns()));
    r.varint(2, uint64_t(severity_number(c.severity)));
    r.bytes(3, analyze::severity_name(c.severity));
    std::string body = std::string(analyze::severity_name(c.severity)) + " " + c.root_cause;
    if (!c.symptom.summary.empty()) body += ": " + c.symptom.summary;
    if (c.frame) body += " at " + c.frame->where();
    r.msg(5, any_string(body));
    r.msg(6, kv("causeway.root_cause", any_string(c.root_cause)));
    r.msg(6, kv("causeway.impact_seconds", any_double(double(c.impact_ns) / 1e9)));
    r.msg(6, kv("causeway.window.start_unix_nano", any_int(snap.from_ns)));
    r.msg(6, kv("causeway.window.end_unix_nano", any_int(snap.to_ns)));
    r.msg(6, kv("process.pid", any_int(c.symptom.pid)));
    if (!c.symptom.comm.empty()) r.msg(6, kv("process.executable.name", any_string(c.symptom.comm)));
    if (c.symptom.tid) r.msg(6, kv("thread.id", any_int(c.symptom.tid)));
    if (!c.symptom.op.empty()) r.msg(6, kv("causeway.op", any_string(c.symptom.op)));
    if (c.frame) {
      r.msg(6, kv("code.function.name", any_string(c.frame->func)));
      r.msg(6, kv("code.file.path", any_string(c.frame->file)));
      r.msg(6, kv("code.line.number", any_int(c.frame->line)));
    } else if (!c.no_frame_reason.empty()) {
      r.msg(6, kv("causeway.no_frame_reason", any_string(c.no_frame_reason)));
    }
    Pb evidence;  // ArrayValue of strings
    for (const auto& e : c.evidence) evidence.msg(1, any_string(e.text));
    Pb ev_value;
    ev_value.msg(5, evidence);
    r.msg(6, kv("causeway.evidence", ev_value));
    if (!c.recommendation.empty()) r.msg(6, kv("causeway.recommendation", any_string(c.recommendation)));
    r.bytes(12, "causeway.chain");
    sl.msg(2, r);
  }
  return export_request(resource, sl);
}

OtlpExporter::OtlpExporter(const std::string& url, agent::Observer& inner, analyze::RecentExplain* recent,
                           OtlpResource resource)
    : inner_(inner), recent_(recent), resource_(std::move(resource)) {
  const std::string scheme = "http://";
  if (url.rfind("https://", 0) == 0)
    throw UsageError("--otlp " + url + ": https needs TLS, which causeway does not link; send to a collector over "
                     "http:// (on the host or the pod network) or through a TLS sidecar");
  if (url.rfind(scheme, 0) != 0) throw UsageError("--otlp " + url + ": expected http://HOST:PORT[/path]");
  std::string rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  base_path_ = slash == std::string::npos ? "" : rest.substr(slash);
  while (!base_path_.empty() && base_path_.back() == '/') base_path_.pop_back();
  rest = rest.substr(0, slash);
  const auto colon = rest.rfind(':');
  host_ = colon == std::string::npos ? rest : rest.substr(0, colon);
  port_ = colon == std::string::npos ? "4318" : rest.substr(colon + 1);
  if (host_.size() > 2 && host_.front() == '[' && host_.back() == ']') host_ = host_.substr(1, host_.size() - 2);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if (host_.empty() || port_.empty() || getaddrinfo(host_.c_str(), port_.c_str(), &hints, &res) != 0 || !res)
    throw UsageError("--otlp " + url + ": cannot resolve " + (host_.empty() ? "an empty host" : host_) +
                     " (expected http://HOST:PORT[/path])");
  freeaddrinfo(res);
  thread_ = std::thread([this] { send_loop(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::started(const std::string& db_path) {
  start_ns_ = wall_now_ns();
  if (recent_) recent_->start(db_path);
  inner_.started(db_path);
}

void OtlpExporter::enqueue(Request r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= kQueueMax) {
      // The oldest goes: metrics are cumulative, so a later request carries
      // its counts; a chain record lost is counted.
      queue_.pop_front();
      stats_.dropped_queue_full++;
    }
    queue_.push_back(std::move(r));
  }
  cv_.notify_all();
}

void OtlpExporter::enqueue_metrics(int64_t now) {
  int64_t points = 0;
  for (const auto& f : last_families_) points += int64_t(f.points.size());
  enqueue({base_path_ + "/v1/metrics", encode_otlp_metrics(last_families_, resource_, start_ns_, now), points, 0});
}

void OtlpExporter::every_second(const agent::Progress& p) {
  const int64_t now = wall_now_ns();
  const auto snap = recent_ ? recent_->latest() : nullptr;
  if (p.op_counts) last_families_ = collect_metrics(p, snap.get());
  if (now - last_metrics_ns_ >= kMetricsEveryNs && !last_families_.empty()) {
    last_metrics_ns_ = now;
    enqueue_metrics(now);
  }
  // Chains of windows that do not overlap the last exported one: each
  // stretch of time reported once.
  if (snap && snap->seq != chains_seq_ && snap->error.empty() && snap->from_ns >= chains_through_ns_) {
    chains_seq_ = snap->seq;
    chains_through_ns_ = snap->to_ns;
    chains_sent_.clear();
    enqueue_chains(*snap);
  }
  inner_.every_second(p);
}

void OtlpExporter::enqueue_chains(const analyze::RecentSnapshot& snap) {
  for (const auto& c : snap.explanation.chains) chains_sent_.insert({c.root_cause, c.symptom.pid});
  if (!snap.explanation.chains.empty())
    enqueue({base_path_ + "/v1/logs", encode_otlp_chains(snap, resource_), 0, int64_t(snap.explanation.chains.size())});
}

void OtlpExporter::finished(const agent::Progress& p, const agent::TraceSummary& s) {
  // The last second's numbers (they hold the kernel's exact counts), then
  // up to a few seconds to send what waits.
  if (!last_families_.empty()) enqueue_metrics(wall_now_ns());
  // The trace's last stretch, shorter than a window past the last chain
  // export: its chains that export did not carry (a trace that ended
  // within a window of its first export said nothing of its later causes).
  if (const auto snap = recent_ ? recent_->latest() : nullptr;
      snap && snap->seq != chains_seq_ && snap->error.empty() && snap->to_ns > chains_through_ns_) {
    analyze::RecentSnapshot tail = *snap;
    std::erase_if(tail.explanation.chains,
                  [&](const analyze::CausalChain& c) { return chains_sent_.count({c.root_cause, c.symptom.pid}) > 0; });
    chains_seq_ = snap->seq;
    chains_through_ns_ = snap->to_ns;
    enqueue_chains(tail);
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    draining_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(5), [this] { return queue_.empty(); });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.dropped_gave_up += int64_t(queue_.size());  // still waiting at the end
    queue_.clear();
  }
  inner_.finished(p, s);
  const OtlpStats st = stats();
  std::printf("otlp: %lld requests sent to %s:%s (%lld metric points, %lld chain records), %lld retries",
              (long long)st.requests_sent, host_.c_str(), port_.c_str(), (long long)st.metric_points,
              (long long)st.chain_records, (long long)st.retries);
  if (st.dropped())
    std::printf("; DROPPED %lld (queue full %lld, rejected %lld, collector unreachable %lld)",
                (long long)st.dropped(), (long long)st.dropped_queue_full, (long long)st.dropped_rejected,
                (long long)st.dropped_gave_up);
  std::printf("\n");
  std::fflush(stdout);
}

OtlpStats OtlpExporter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void OtlpExporter::send_loop() {
  std::mt19937 jitter(std::random_device{}());
  for (;;) {
    Request r;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      r = std::move(queue_.front());
      queue_.pop_front();
    }
    int64_t backoff_ms = 500;
    for (int attempt = 1;; attempt++) {
      const int status = post(r);
      std::unique_lock<std::mutex> lock(mu_);
      if (status >= 200 && status < 300) {
        stats_.requests_sent++;
        stats_.metric_points += r.points;
        stats_.chain_records += r.records;
        break;
      }
      // 429 and 502-504 (and no answer) are worth another try, as OTLP/HTTP
      // says; any other answer is final.
      const bool retryable = status == 0 || status == 429 || status == 502 || status == 503 || status == 504;
      if (!retryable) {
        stats_.dropped_rejected++;
        spdlog::warn("otlp: {}{} answered HTTP {}: request dropped", host_, r.path, status);
        break;
      }
      if (attempt >= kAttempts || stop_) {
        stats_.dropped_gave_up++;
        if (status == 0) spdlog::warn("otlp: no answer from {}:{} after {} tries: request dropped", host_, port_, attempt);
        break;
      }
      stats_.retries++;
      const int64_t wait_ms = backoff_ms / 2 + int64_t(jitter() % uint64_t(backoff_ms / 2 + 1));
      backoff_ms = std::min<int64_t>(backoff_ms * 2, 16'000);
      // While draining at the end, retry without the long waits.
      cv_.wait_for(lock, std::chrono::milliseconds(draining_ ? 100 : wait_ms), [this] { return stop_; });
    }
  }
}

int OtlpExporter::post(const Request& r) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  if (getaddrinfo(host_.c_str(), port_.c_str(), &hints, &res) != 0 || !res) return 0;
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{5, 0};
  int status = 0;
  if (fd >= 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    const std::string head = "POST " + r.path + " HTTP/1.1\r\nHost: " + host_ + ":" + port_ +
                             "\r\nContent-Type: application/x-protobuf\r\nContent-Length: " +
                             std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n";
    const std::string all = head + r.body;
    bool sent = true;
    for (size_t off = 0; off < all.size();) {
      const ssize_t n = send(fd, all.data() + off, all.size() - off, MSG_NOSIGNAL);
      if (n <= 0) {
        sent = false;
        break;
      }
      off += size_t(n);
    }
    // "HTTP/1.1 200 OK": the status is all that matters.
    char buf[64];
    size_t got = 0;
    while (sent && got < 12) {
      const ssize_t n = recv(fd, buf + got, sizeof buf - got, 0);
      if (n <= 0) break;
      got += size_t(n);
    }
    if (got >= 12 && std::strncmp(buf, "HTTP/1.", 7) == 0) status = std::atoi(std::string(buf + 9, 3).c_str());
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return status;
}

}  // namespace causeway::exporters
