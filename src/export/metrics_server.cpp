// SPDX-License-Identifier: Apache-2.0
#include "causeway/export/metrics_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "causeway/analyze/recent_explain.h"
#include "causeway/common/error.h"
#include "causeway/export/metric_families.h"

namespace causeway::exporters {

MetricsServer::MetricsServer(const std::string& address, agent::Observer& inner, analyze::RecentExplain* recent)
    : inner_(inner), recent_(recent) {
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

void MetricsServer::started(const std::string& db_path) {
  if (recent_) recent_->start(db_path);
  inner_.started(db_path);
}

void MetricsServer::every_second(const agent::Progress& p) {
  const auto snap = recent_ ? recent_->latest() : nullptr;
  std::string text = render_prometheus(collect_metrics(p, snap.get()));
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

}  // namespace causeway::exporters
