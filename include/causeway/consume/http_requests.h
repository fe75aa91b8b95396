// SPDX-License-Identifier: Apache-2.0
#pragma once
// Requests from the bytes a traced server's sockets moved
// (bpf/sockets.bpf.c): an HTTP/1.1 state machine per connection over each
// send's and receive's size and first bytes. The bytes are read here and
// dropped: a row keeps method, path without its query, status, sizes and
// times, nothing else (docs/reliability.md).
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "causeway/model/requests.h"

namespace causeway::consume {

// One send or receive, as the consumer decoded it.
struct SocketIo {
  uint64_t sock = 0;
  int64_t ts_ns = 0;  // wall
  uint32_t pid = 0, tid = 0;
  bool send = false;
  int64_t ret = 0;        // bytes moved, or -errno
  std::string_view seen;  // the first of those bytes (at most CW_SOCK_PEEK_BYTES)
};

class HttpRequestTracker {
 public:
  using Rows = std::vector<model::ServedRequest>;
  void on_io(const SocketIo& io, Rows& out);
  // The connection ended: the peer closed it (a client that hung up) or the server did.
  void on_close(uint64_t sock, int64_t ts_ns, bool by_peer, Rows& out);
  // The trace ends: requests in flight and unparsed connections are written as they stand.
  void flush(Rows& out);
  size_t connections() const { return conns_.size(); }

 private:
  struct Request {
    model::ServedRequest row;
    std::vector<int64_t> chunk_ts;
    bool head_done = false;
  };
  enum class Role { Unknown, Server, Client, Tls, Http2, Other };
  enum class In { Line, Head, Body, ChunkSize, ChunkData, Resync };
  enum class Out { Idle, Head, Body, ChunkSize, ChunkData, UntilClose, Lost };
  struct Conn {
    int64_t id = 0;
    Role role = Role::Unknown;
    model::ServedRequest unparsed;  // TLS, HTTP/2: the connection's one row
    std::deque<Request> requests;   // received, the front one being answered
    In in = In::Line;
    Out out = Out::Idle;
    int64_t in_left = 0, out_left = 0;
    std::string in_head, out_head;  // visible bytes of a head being read (bounded), then dropped
    bool in_gap = false, out_gap = false;
    bool out_chunked = false, out_sse = false;
    std::string line;  // a chunk-size line split across sends
  };

  Conn& conn(const SocketIo& io);
  void on_receive(Conn& c, const SocketIo& io, Rows& out);
  void on_send(Conn& c, const SocketIo& io, Rows& out);
  size_t read_head(Conn& c, const SocketIo& io, size_t p);
  size_t read_request_body(Conn& c, const SocketIo& io, size_t p);
  size_t start_response(Conn& c, const SocketIo& io, size_t p, Rows& out);
  size_t read_response_head(Conn& c, const SocketIo& io, size_t p, Rows& out);
  size_t read_response_body(Conn& c, const SocketIo& io, size_t p, Rows& out);
  void finish_response(Conn& c, int64_t ts_ns, bool aborted, Rows& out);
  void end_connection(Conn& c, int64_t ts_ns, bool aborted, Rows& out);

  std::unordered_map<uint64_t, Conn> conns_;
  int64_t next_conn_ = 1;
};

// Exposed for tests: the parts of HTTP/1.1 the tracker reads.
namespace http {
// "GET /v1/x?y=1 HTTP/1.1" -> method "GET", path "/v1/x"; false unless it begins like a request line.
bool request_line(std::string_view s, std::string& method, std::string& path);
bool starts_request(std::string_view s);
// The start of a request line, or as much of one as a short read holds ("PO").
bool may_start_request(std::string_view s);
// Server-sent events (`data:` at the start of a line) in a send's visible bytes, but
// `data: [DONE]` (the end of an OpenAI-style stream, no token).
int64_t sse_events(std::string_view s);
}  // namespace http

}  // namespace causeway::consume
