// SPDX-License-Identifier: Apache-2.0
#include "causeway/present/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "causeway/common/error.h"
#include "causeway/common/op_table.h"
#include "causeway/model/drops.h"

namespace causeway::present {
namespace {

void header(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// Histogram edges: 1 us x 4^k up to 16 s (13 buckets and +Inf).
constexpr int kEdges = 13;

}  // namespace

std::string render_metrics(const agent::Progress& p) {
  std::ostringstream o;
  o.precision(12);
  if (p.op_counts) {
    header(o, "causeway_calls_total", "counter", "Calls of each traced function, exact (counted in the kernel).");
    for (const auto& c : *p.op_counts)
      if (const OpSpec* op = find_op(c.op_id))
        o << "causeway_calls_total{op=\"" << op->name << "\",layer=\"" << layer_name(op->layer) << "\"} " << c.calls
          << '\n';
    header(o, "causeway_call_errors_total", "counter", "Calls that returned an error, exact.");
    for (const auto& c : *p.op_counts)
      if (const OpSpec* op = find_op(c.op_id))
        o << "causeway_call_errors_total{op=\"" << op->name << "\",layer=\"" << layer_name(op->layer) << "\"} "
          << c.errors << '\n';
    header(o, "causeway_call_seconds_total", "counter", "Time spent inside each traced function, exact.");
    for (const auto& c : *p.op_counts)
      if (const OpSpec* op = find_op(c.op_id))
        o << "causeway_call_seconds_total{op=\"" << op->name << "\",layer=\"" << layer_name(op->layer) << "\"} "
          << double(c.total_ns) / 1e9 << '\n';
  }
  if (p.processes) {
    // Label values are escaped as the exposition format asks (\\, \", \n).
    auto esc = [](const std::string& v) {
      std::string out;
      for (char ch : v) {
        if (ch == '\\' || ch == '"') out += '\\';
        if (ch == '\n') { out += "\\n"; continue; }
        out += ch;
      }
      return out;
    };
    header(o, "causeway_process_info", "gauge",
           "1 for each traced process, with its container and Kubernetes pod (join on pid).");
    for (const auto& [pid, info] : *p.processes)
      o << "causeway_process_info{pid=\"" << pid << "\",comm=\"" << esc(info.comm) << "\",container_id=\""
        << esc(info.container_id) << "\",pod_uid=\"" << esc(info.pod_uid) << "\",pod=\"" << esc(info.pod_name)
        << "\",namespace=\"" << esc(info.pod_namespace) << "\"} 1\n";
    header(o, "causeway_process_calls_total", "counter",
           "Recorded calls per traced process and function (rows shed under overload not included).");
    for (const auto& [key, n] : p.stats.process_calls)
      if (const OpSpec* op = find_op(key.second); op && p.processes->count(key.first))
        o << "causeway_process_calls_total{pid=\"" << key.first << "\",op=\"" << op->name << "\"} " << n << '\n';
  }
  header(o, "causeway_call_duration_seconds", "histogram",
         "Latency of recorded calls (launches counted in the kernel included); bucket edges within 6%.");
  for (const auto& [id, h] : p.stats.ops) {
    const OpSpec* op = find_op(id);
    if (!op) continue;
    const std::string labels = "op=\"" + std::string(op->name) + "\"";
    int64_t edge_ns = 1000;
    for (int k = 0; k < kEdges; k++, edge_ns *= 4)
      o << "causeway_call_duration_seconds_bucket{" << labels << ",le=\"" << double(edge_ns) / 1e9 << "\"} "
        << h.count_le(edge_ns) << '\n';
    o << "causeway_call_duration_seconds_bucket{" << labels << ",le=\"+Inf\"} " << h.count() << '\n';
    o << "causeway_call_duration_seconds_sum{" << labels << "} " << double(h.total()) / 1e9 << '\n';
    o << "causeway_call_duration_seconds_count{" << labels << "} " << h.count() << '\n';
  }
  if (p.drops_by_source) {
    header(o, "causeway_dropped_records_total", "counter",
           "Records lost, by source ('shed': rows of fast calls left out under overload, their calls still counted).");
    for (int s = 0; s < CW_DROP_MAX; s++)
      o << "causeway_dropped_records_total{source=\"" << model::kDropSourceNames[s] << "\"} " << p.drops_by_source[s]
        << '\n';
  }
  header(o, "causeway_rows_written_total", "counter", "Rows written to the trace file.");
  o << "causeway_rows_written_total " << p.rows << '\n';
  const auto& h = p.stats.host;
  header(o, "causeway_offcpu_seconds_total", "counter", "Off-CPU time of traced threads, by state.");
  o << "causeway_offcpu_seconds_total{state=\"runnable\"} " << double(h.offcpu_runnable_ns) / 1e9 << '\n';
  o << "causeway_offcpu_seconds_total{state=\"waiting\"} " << double(h.offcpu_ns - h.offcpu_runnable_ns) / 1e9
    << '\n';
  header(o, "causeway_block_io_requests_total", "counter", "Block I/O requests of traced processes.");
  o << "causeway_block_io_requests_total " << h.io_count << '\n';
  header(o, "causeway_block_io_bytes_total", "counter", "Bytes of those requests.");
  o << "causeway_block_io_bytes_total " << h.io_bytes << '\n';
  header(o, "causeway_tcp_retransmits_total", "counter", "TCP retransmits on the host.");
  o << "causeway_tcp_retransmits_total " << h.retransmits << '\n';
  header(o, "causeway_launch_probed_ratio", "gauge", "Share of the trace's time kernel launches were probed (--launch-duty).");
  o << "causeway_launch_probed_ratio " << p.launch_probed_share << '\n';
  if (p.gpus && !p.gpus->empty()) {
    auto gauge = [&](const char* name, const char* help, auto field, double scale) {
      header(o, name, "gauge", help);
      for (const auto& g : *p.gpus)
        if (const auto& v = g.*field) o << name << "{gpu=\"" << g.gpu << "\"} " << double(*v) * scale << '\n';
    };
    using model::GpuSample;
    gauge("causeway_gpu_utilization_ratio", "GPU busy share over NVML's last sample period.", &GpuSample::util_gpu, 0.01);
    gauge("causeway_gpu_memory_used_bytes", "Device memory in use.", &GpuSample::mem_used, 1);
    gauge("causeway_gpu_sm_clock_hertz", "SM clock.", &GpuSample::sm_clock, 1e6);
    gauge("causeway_gpu_power_watts", "Power draw.", &GpuSample::power_mw, 1e-3);
    gauge("causeway_gpu_temperature_celsius", "GPU temperature.", &GpuSample::temp_c, 1);
    gauge("causeway_gpu_throttle_reasons", "nvmlClocksEventReasons bits (0: none).", &GpuSample::throttle, 1);
    gauge("causeway_gpu_ecc_uncorrected_errors", "Volatile uncorrected ECC errors since boot.",
          &GpuSample::ecc_uncorrected, 1);
  }
  return o.str();
}

MetricsServer::MetricsServer(const std::string& address, agent::Observer& inner) : inner_(inner) {
  std::string host = "127.0.0.1", port = address;
  if (auto colon = address.rfind(':'); colon != std::string::npos) {
    if (colon > 0) host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  if (port.empty() || getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res)
    throw UsageError("--prometheus " + address + ": expected HOST:PORT or PORT (e.g. 127.0.0.1:9464)");
  fd_ = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd_ >= 0) setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd_ < 0 || bind(fd_, res->ai_addr, res->ai_addrlen) != 0 || listen(fd_, 16) != 0) {
    const std::string why = strerror(errno);
    freeaddrinfo(res);
    if (fd_ >= 0) close(fd_);
    throw UsageError("--prometheus " + address + ": cannot listen there (" + why + ")");
  }
  freeaddrinfo(res);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  thread_ = std::thread([this] { serve(); });
}

MetricsServer::~MetricsServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) close(fd_);
}

void MetricsServer::every_second(const agent::Progress& p) {
  std::string text = render_metrics(p);
  {
    std::lock_guard<std::mutex> lock(mu_);
    text_.swap(text);
  }
  inner_.every_second(p);
}

// One request per connection: read the request line, answer, close.
void MetricsServer::serve() {
  while (!stop_) {
    pollfd pfd{fd_, POLLIN, 0};
    if (poll(&pfd, 1, 200) <= 0) continue;
    const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    timeval tv{2, 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    char buf[2048];
    std::string req;
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
      const ssize_t n = recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, size_t(n));
    }
    std::string body, status = "200 OK", type = "text/plain; version=0.0.4; charset=utf-8";
    if (req.rfind("GET /metrics", 0) == 0 || req.rfind("GET /metrics?", 0) == 0) {
      std::lock_guard<std::mutex> lock(mu_);
      body = text_;
    } else if (req.rfind("GET / ", 0) == 0) {
      body = "causeway: metrics at /metrics\n";
    } else {
      status = "404 Not Found";
      body = "not found: causeway serves /metrics\n";
    }
    const std::string head = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                             "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    const std::string all = head + body;
    for (size_t off = 0; off < all.size();) {
      const ssize_t n = send(c, all.data() + off, all.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += size_t(n);
    }
    close(c);
  }
}

}  // namespace causeway::present
