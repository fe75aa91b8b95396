// SPDX-License-Identifier: Apache-2.0
#include "causeway/consume/http_requests.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace causeway::consume {
namespace http {
namespace {

constexpr std::string_view kMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH", "CONNECT", "TRACE"};

bool iequals_prefix(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); i++)
    if (std::tolower(uint8_t(s[i])) != std::tolower(uint8_t(prefix[i]))) return false;
  return true;
}

}  // namespace

bool starts_request(std::string_view s) {
  for (auto m : kMethods)
    if (s.size() > m.size() && s.substr(0, m.size()) == m && s[m.size()] == ' ') return true;
  return false;
}

bool may_start_request(std::string_view s) {
  if (s.size() >= 8) return starts_request(s);
  for (auto m : kMethods) {
    const std::string word = std::string(m) + ' ';
    if (word.starts_with(s) || s.starts_with(word)) return true;
  }
  return false;
}

bool request_line(std::string_view s, std::string& method, std::string& path) {
  if (!starts_request(s)) return false;
  const size_t sp = s.find(' ');
  const size_t eol = s.find_first_of("\r\n");
  const std::string_view line = s.substr(0, eol);
  size_t end = line.find(' ', sp + 1);
  std::string_view target = line.substr(sp + 1, end == std::string_view::npos ? std::string_view::npos : end - sp - 1);
  target = target.substr(0, target.find_first_of("?#"));
  method = std::string(s.substr(0, sp));
  path = std::string(target);
  return true;
}

int64_t sse_events(std::string_view s) {
  int64_t n = 0;
  for (size_t at = s.find("data:"); at != std::string_view::npos; at = s.find("data:", at + 5)) {
    if (at != 0 && s[at - 1] != '\n') continue;
    // OpenAI's end-of-stream event carries no token.
    std::string_view rest = s.substr(at + 5);
    if (rest.starts_with(' ')) rest.remove_prefix(1);
    if (!rest.starts_with("[DONE]")) n++;
  }
  return n;
}

// The value of header `name` in a head's visible bytes ("" when absent).
std::string_view header(std::string_view head, std::string_view name) {
  for (size_t at = head.find('\n'); at != std::string_view::npos && at + 1 < head.size(); at = head.find('\n', at + 1)) {
    std::string_view line = head.substr(at + 1);
    line = line.substr(0, line.find_first_of("\r\n"));
    if (line.size() > name.size() && line[name.size()] == ':' && iequals_prefix(line, name)) {
      std::string_view v = line.substr(name.size() + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      return v;
    }
  }
  return {};
}

// A chunk-size line ("1a\r\n", "1a;ext\r\n"): its size, or -1.
int64_t chunk_size(std::string_view line) {
  int64_t v = -1;
  auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v, 16);
  if (ec != std::errc() || p == line.data()) return -1;
  return v;
}

}  // namespace http

namespace {

constexpr size_t kMaxHead = 16 * 1024;  // visible head bytes kept while a head is read
constexpr int kEagain = 11, kEintr = 4;

std::string gaps_json(const std::vector<int64_t>& ts) {
  if (ts.size() < 2) return {};
  std::string s = "[";
  for (size_t i = 1; i < ts.size(); i++) {
    if (i > 1) s += ',';
    s += std::to_string((ts[i] - ts[i - 1] + 500) / 1000);
  }
  return s + "]";
}

// The visible part of [p, p + n) of a call's bytes.
std::string_view visible(const SocketIo& io, size_t p) {
  return p < io.seen.size() ? io.seen.substr(p) : std::string_view{};
}

}  // namespace

HttpRequestTracker::Conn& HttpRequestTracker::conn(const SocketIo& io) {
  auto [it, fresh] = conns_.try_emplace(io.sock);
  Conn& c = it->second;
  if (fresh) {
    c.id = next_conn_++;
    const std::string_view s = io.seen;
    // What the first bytes of the connection say it is.
    if (!io.send && s.size() >= 2 && uint8_t(s[0]) == 0x16 && uint8_t(s[1]) == 0x03) {
      c.role = Role::Tls;
    } else if (!io.send && s.starts_with("PRI * HTTP/2.0")) {
      c.role = Role::Http2;
    } else if (!io.send && !s.empty() && http::may_start_request(s)) {
      c.role = Role::Server;
    } else if (io.send ? http::starts_request(s) : s.starts_with("HTTP/1.")) {
      c.role = Role::Client;  // a request this process made: not one it served
    } else {
      c.role = Role::Other;
    }
    if (c.role == Role::Tls || c.role == Role::Http2) {
      c.unparsed.ts_ns = io.ts_ns;
      c.unparsed.pid = io.pid;
      c.unparsed.tid = io.tid;
      c.unparsed.conn = c.id;
      c.unparsed.protocol = c.role == Role::Tls ? "tls" : "http2";
    }
  }
  return c;
}

void HttpRequestTracker::on_io(const SocketIo& io, Rows& out) {
  if (io.ret == -kEagain || io.ret == -kEintr) return;  // a non-blocking socket with nothing to move
  if (io.ret <= 0 && !conns_.count(io.sock)) return;
  Conn& c = conn(io);
  switch (c.role) {
    case Role::Tls:
    case Role::Http2:
      if (io.ret > 0) (io.send ? c.unparsed.bytes_out : c.unparsed.bytes_in) += io.ret;
      if (io.send && io.ret > 0) c.unparsed.last_byte_ns = io.ts_ns;
      if (!io.send && io.ret == 0) on_close(io.sock, io.ts_ns, true, out);
      return;
    case Role::Server:
      break;
    default:
      if (io.ret == 0) conns_.erase(io.sock);
      return;
  }
  if (io.ret < 0) {  // the client's hang-up failed a send (EPIPE) or reset a receive
    if (io.send)
      end_connection(c, io.ts_ns, true, out);
    else
      on_close(io.sock, io.ts_ns, true, out);
    return;
  }
  if (io.ret == 0) {  // the client closed its side
    if (!io.send) on_close(io.sock, io.ts_ns, true, out);
    return;
  }
  if (io.send)
    on_send(c, io, out);
  else
    on_receive(c, io, out);
}

void HttpRequestTracker::on_receive(Conn& c, const SocketIo& io, Rows&) {
  const size_t n = size_t(io.ret);
  size_t p = 0;
  while (p < n) {
    const std::string_view v = visible(io, p);
    switch (c.in) {
      case In::Resync:
        // Lost track of the framing: a receive that begins with a request line starts the next request.
        if (p == 0 && http::starts_request(v)) {
          c.in = In::Line;
          continue;
        }
        if (!c.requests.empty()) c.requests.back().row.bytes_in += int64_t(n - p);
        p = n;
        break;
      case In::Line: {
        if (!v.empty() && !http::may_start_request(v.substr(0, std::min<size_t>(v.size(), 8)))) {
          c.in = In::Resync;
          continue;
        }
        Request r;
        r.row.ts_ns = io.ts_ns;
        r.row.pid = io.pid;
        r.row.tid = io.tid;
        r.row.conn = c.id;
        r.row.protocol = "http/1.1";
        c.requests.push_back(std::move(r));
        c.in = In::Head;
        c.in_head.clear();
        c.in_gap = false;
        break;
      }
      case In::Head:
        p = read_head(c, io, p);
        break;
      case In::Body:
      case In::ChunkSize:
      case In::ChunkData:
        p = read_request_body(c, io, p);
        break;
    }
  }
}

// The request head: its visible bytes gathered until its blank line.
size_t HttpRequestTracker::read_head(Conn& c, const SocketIo& io, size_t p) {
  const size_t n = size_t(io.ret);
  Request& r = c.requests.back();
  const std::string_view v = visible(io, p);
  const size_t before = c.in_head.size();
  if (!c.in_gap) c.in_head.append(v.substr(0, kMaxHead - std::min(kMaxHead, before)));
  const size_t end = c.in_gap ? std::string::npos : c.in_head.find("\r\n\r\n");
  if (end == std::string::npos) {
    // The blank line may lie in bytes not copied: the response's start ends the head then.
    if (v.size() < n - p || c.in_head.size() >= kMaxHead) c.in_gap = true;
    if (!r.row.method) {
      std::string method, path;
      if (http::request_line(c.in_head, method, path) && c.in_head.find('\n') != std::string::npos) {
        r.row.method = method;
        r.row.path = path;
      }
    }
    r.row.bytes_in += int64_t(n - p);
    return n;
  }
  const size_t used = end + 4 - before;
  r.row.bytes_in += int64_t(used);
  std::string method, path;
  if (!r.row.method && http::request_line(c.in_head, method, path)) {
    r.row.method = method;
    r.row.path = path;
  }
  const std::string_view head(c.in_head.data(), end + 2);
  const std::string_view te = http::header(head, "Transfer-Encoding");
  const std::string_view cl = http::header(head, "Content-Length");
  r.head_done = true;
  c.in_left = 0;
  if (te.find("chunked") != std::string_view::npos) {
    c.in = In::ChunkSize;
    c.line.clear();
  } else if (!cl.empty()) {
    std::from_chars(cl.data(), cl.data() + cl.size(), c.in_left);
    c.in = c.in_left > 0 ? In::Body : In::Line;
  } else {
    c.in = In::Line;
  }
  c.in_head.clear();
  return p + used;
}

size_t HttpRequestTracker::read_request_body(Conn& c, const SocketIo& io, size_t p) {
  const size_t n = size_t(io.ret);
  Request& r = c.requests.back();
  if (c.in == In::Body || c.in == In::ChunkData) {
    const size_t take = size_t(std::min<int64_t>(c.in_left, int64_t(n - p)));
    r.row.bytes_in += int64_t(take);
    c.in_left -= int64_t(take);
    if (c.in_left == 0) c.in = c.in == In::Body ? In::Line : In::ChunkSize;
    return p + take;
  }
  // A chunk-size line: read where visible, else the framing is lost.
  const std::string_view v = visible(io, p);
  if (v.empty()) {
    c.in = In::Resync;
    return p;
  }
  const size_t eol = v.find("\r\n");
  if (eol == std::string_view::npos) {
    if (v.size() < n - p) {
      c.in = In::Resync;
      return p;
    }
    c.line.append(v);
    r.row.bytes_in += int64_t(n - p);
    return n;
  }
  c.line.append(v.substr(0, eol));
  const int64_t size = http::chunk_size(c.line);
  c.line.clear();
  r.row.bytes_in += int64_t(eol + 2);
  if (size < 0) {
    c.in = In::Resync;
  } else if (size == 0) {
    c.in = In::Body;  // the last chunk's CRLF (no trailers)
    c.in_left = 2;
  } else {
    c.in = In::ChunkData;
    c.in_left = size + 2;
  }
  return p + eol + 2;
}

void HttpRequestTracker::on_send(Conn& c, const SocketIo& io, Rows& out) {
  const size_t n = size_t(io.ret);
  size_t p = 0;
  while (p < n) {
    switch (c.out) {
      case Out::Idle:
      case Out::Lost:
        p = start_response(c, io, p, out);
        break;
      case Out::Head:
        p = read_response_head(c, io, p, out);
        break;
      default:
        p = read_response_body(c, io, p, out);
        break;
    }
  }
}

// A status line where a response may begin; anything else is the body of one whose framing was lost.
size_t HttpRequestTracker::start_response(Conn& c, const SocketIo& io, size_t p, Rows& out) {
  const size_t n = size_t(io.ret);
  const std::string_view v = visible(io, p);
  Request* r = nullptr;
  for (auto& q : c.requests)
    if (!q.row.first_byte_ns) {
      r = &q;
      break;
    }
  if (c.out == Out::Lost && v.find("\r\n") != std::string_view::npos &&
      http::chunk_size(v.substr(0, v.find("\r\n"))) >= 0) {
    c.out = Out::ChunkSize;  // framing found again
    return p;
  }
  if (!v.starts_with("HTTP/1.") || !r) {
    // Bytes of no response we can frame (a request seen only in part): counted to the last one.
    if (c.out == Out::Lost && !c.requests.empty() && c.requests.front().row.first_byte_ns) {
      Request& cur = c.requests.front();
      cur.row.bytes_out += int64_t(n - p);
      cur.row.last_byte_ns = io.ts_ns;
      for (int64_t k = http::sse_events(v); k > 0; k--) cur.chunk_ts.push_back(io.ts_ns);
    }
    return n;
  }
  if (c.out == Out::Lost) finish_response(c, c.requests.front().row.last_byte_ns.value_or(io.ts_ns), false, out);
  // The request's head is over once it is answered, seen whole or not.
  if (&c.requests.back() == r && !r->head_done) {
    r->head_done = true;
    c.in = In::Line;
    c.in_head.clear();
  }
  r->row.first_byte_ns = io.ts_ns;
  int64_t status = 0;
  const std::string_view code = v.substr(std::min<size_t>(v.size(), 9), 3);
  std::from_chars(code.data(), code.data() + code.size(), status);
  if (status > 0) r->row.status = status;
  c.out = Out::Head;
  c.out_head.clear();
  c.out_gap = false;
  c.out_chunked = c.out_sse = false;
  return p;
}

size_t HttpRequestTracker::read_response_head(Conn& c, const SocketIo& io, size_t p, Rows& out) {
  const size_t n = size_t(io.ret);
  Request& r = c.requests.front();
  const std::string_view v = visible(io, p);
  if (c.out_gap) {
    // The head's end was not copied: the next send tells the framing (a chunk-size line, an event).
    if (p == 0 && (http::chunk_size(v.substr(0, v.find("\r\n"))) >= 0 && v.find("\r\n") != std::string_view::npos)) {
      c.out = Out::ChunkSize;
      c.out_chunked = true;
      return p;
    }
    if (p == 0 && (v.starts_with("data:") || v.starts_with("event:"))) {
      c.out = Out::UntilClose;
      return p;
    }
    r.row.bytes_out += int64_t(n - p);
    r.row.last_byte_ns = io.ts_ns;
    return n;
  }
  const size_t before = c.out_head.size();
  c.out_head.append(v.substr(0, kMaxHead - std::min(kMaxHead, before)));
  const size_t end = c.out_head.find("\r\n\r\n");
  r.row.last_byte_ns = io.ts_ns;
  if (end == std::string::npos) {
    if (v.size() < n - p || c.out_head.size() >= kMaxHead) c.out_gap = true;
    r.row.bytes_out += int64_t(n - p);
    return n;
  }
  const size_t used = end + 4 - before;
  r.row.bytes_out += int64_t(used);
  const std::string_view head(c.out_head.data(), end + 2);
  const std::string_view te = http::header(head, "Transfer-Encoding");
  const std::string_view cl = http::header(head, "Content-Length");
  c.out_sse = http::header(head, "Content-Type").starts_with("text/event-stream");
  c.out_left = 0;
  if (te.find("chunked") != std::string_view::npos) {
    c.out = Out::ChunkSize;
    c.out_chunked = true;
    c.line.clear();
  } else if (!cl.empty()) {
    std::from_chars(cl.data(), cl.data() + cl.size(), c.out_left);
    c.out = Out::Body;
    if (c.out_left == 0) finish_response(c, io.ts_ns, false, out);
  } else {
    c.out = Out::UntilClose;
  }
  c.out_head.clear();
  return p + used;
}

size_t HttpRequestTracker::read_response_body(Conn& c, const SocketIo& io, size_t p, Rows& out) {
  const size_t n = size_t(io.ret);
  Request& r = c.requests.front();
  const std::string_view v = visible(io, p);
  r.row.last_byte_ns = io.ts_ns;
  auto take = [&](size_t k) {
    const std::string_view part = v.substr(0, k);
    const int64_t events = http::sse_events(part);
    if (events > 0) c.out_sse = true;
    for (int64_t i = 0; i < events; i++) r.chunk_ts.push_back(io.ts_ns);
    r.row.bytes_out += int64_t(k);
  };
  switch (c.out) {
    case Out::UntilClose:
      take(n - p);
      return n;
    case Out::Body:
    case Out::ChunkData: {
      const size_t k = size_t(std::min<int64_t>(c.out_left, int64_t(n - p)));
      take(k);
      c.out_left -= int64_t(k);
      if (c.out_left > 0) return p + k;
      if (c.out == Out::Body)
        finish_response(c, io.ts_ns, false, out);
      else
        c.out = Out::ChunkSize;
      return p + k;
    }
    default:
      break;
  }
  // A chunk-size line.
  const size_t eol = v.find("\r\n");
  const int64_t size = eol == std::string_view::npos ? -1 : http::chunk_size(v.substr(0, eol));
  if (size < 0) {
    // Not copied, or not one: count what is seen and find the next status line.
    take(n - p);
    c.out = Out::Lost;
    return n;
  }
  r.row.bytes_out += int64_t(eol + 2);
  if (size == 0) {
    c.out = Out::Body;
    c.out_left = 2;  // the terminator's CRLF: "0\r\n\r\n" (no trailers)
    const size_t k = std::min<size_t>(2, n - p - eol - 2);
    r.row.bytes_out += int64_t(k);
    c.out_left -= int64_t(k);
    if (c.out_left == 0) finish_response(c, io.ts_ns, false, out);
    return p + eol + 2 + k;
  }
  // A plain chunked response (no events): each chunk is one streamed piece.
  if (!c.out_sse && !http::sse_events(v.substr(eol + 2, size_t(size)))) r.chunk_ts.push_back(io.ts_ns);
  c.out = Out::ChunkData;
  c.out_left = size + 2;
  return p + eol + 2;
}

void HttpRequestTracker::finish_response(Conn& c, int64_t ts_ns, bool aborted, Rows& out) {
  if (c.requests.empty()) return;
  Request& r = c.requests.front();
  r.row.aborted = aborted ? 1 : 0;
  if (!r.row.last_byte_ns && r.row.first_byte_ns) r.row.last_byte_ns = ts_ns;
  r.row.chunks = int64_t(r.chunk_ts.size());
  if (!r.chunk_ts.empty()) r.row.first_chunk_ns = r.chunk_ts.front();
  if (std::string g = gaps_json(r.chunk_ts); !g.empty()) r.row.chunk_gaps_us = std::move(g);
  out.push_back(std::move(r.row));
  c.requests.pop_front();
  c.out = Out::Idle;
}

// Every request still open on the connection is written; unanswered or cut short, it was aborted.
void HttpRequestTracker::end_connection(Conn& c, int64_t ts_ns, bool aborted, Rows& out) {
  while (!c.requests.empty()) {
    const Request& r = c.requests.front();
    // A response that runs to the close ended with it; a request only half received is no request.
    const bool complete = c.out == Out::UntilClose && r.row.first_byte_ns;
    if (!r.head_done && !r.row.method) {
      c.requests.pop_front();
      continue;
    }
    finish_response(c, ts_ns, aborted || !complete, out);
    aborted = aborted || !complete;
  }
  c.role = Role::Other;  // what it sends now (after a hang-up) is no response
}

void HttpRequestTracker::on_close(uint64_t sock, int64_t ts_ns, bool by_peer, Rows& out) {
  auto it = conns_.find(sock);
  if (it == conns_.end()) return;
  Conn& c = it->second;
  if (c.role == Role::Tls || c.role == Role::Http2) {
    out.push_back(c.unparsed);
    conns_.erase(it);
    return;
  }
  if (c.role == Role::Server) {
    // The client's close after its last response ends nothing; during one, it hung up.
    end_connection(c, ts_ns, by_peer, out);
  }
  // The server's own close ends the connection; after the peer's, the server may still write.
  if (!by_peer) conns_.erase(it);
}

void HttpRequestTracker::flush(Rows& out) {
  for (auto& [sock, c] : conns_) {
    if (c.role == Role::Tls || c.role == Role::Http2) {
      out.push_back(c.unparsed);
      continue;
    }
    while (!c.requests.empty() && c.role == Role::Server) {
      if (!c.requests.front().row.method) {
        c.requests.pop_front();
        continue;
      }
      finish_response(c, c.requests.front().row.last_byte_ns.value_or(c.requests.front().row.ts_ns), false, out);
    }
  }
  conns_.clear();
}

}  // namespace causeway::consume
