// SPDX-License-Identifier: Apache-2.0
// The HTTP/1.1 state machine over a server socket's sends and receives, as
// bpf/sockets.bpf.c reports them: each call's size and its first
// CW_SOCK_PEEK_BYTES.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "causeway/consume/http_requests.h"

using namespace causeway;
using namespace causeway::consume;

namespace {

struct Server {
  HttpRequestTracker t;
  HttpRequestTracker::Rows rows;
  int64_t ts = 1'000'000;
  uint64_t sock = 0xffff1000;

  // One call moving `bytes`, of which the kernel copied the first CW_SOCK_PEEK_BYTES.
  void io(bool send, const std::string& bytes, int64_t ret = -1) {
    ts += 1'000'000;  // 1 ms a call
    SocketIo s;
    s.sock = sock;
    s.ts_ns = ts;
    s.pid = 7;
    s.tid = 8;
    s.send = send;
    s.ret = ret == -1 ? int64_t(bytes.size()) : ret;
    s.seen = std::string_view(bytes).substr(0, CW_SOCK_PEEK_BYTES);
    t.on_io(s, rows);
  }
  void recv(const std::string& b) { io(false, b); }
  void send(const std::string& b) { io(true, b); }
  void close(bool by_peer) { t.on_close(sock, ts += 1'000'000, by_peer, rows); }
};

const std::string kSseHead =
    "HTTP/1.1 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11.2\r\nDate: Mon, 07 Dec 2026 22:37:33 GMT\r\n"
    "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(const std::string& data) {
  char size[16];
  snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::string event(int i) { return chunk("data: {\"token\": " + std::to_string(i) + "}\n\n"); }

std::string json_response(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

}  // namespace

TEST(HttpRequests, StreamedResponseCountsEachEventAndItsTimes) {
  Server s;
  const std::string req =
      "POST /v1/completions?stream=1&key=SECRET HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n{\"prompt\": 1}\n";
  s.recv(req);
  s.send(kSseHead);
  for (int i = 0; i < 5; i++) s.send(event(i));
  s.send("0\r\n\r\n");
  ASSERT_EQ(s.rows.size(), 1u);
  const auto& r = s.rows[0];
  EXPECT_EQ(r.protocol, "http/1.1");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/completions");  // no query
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.chunks, 5);
  EXPECT_EQ(r.aborted, 0);
  EXPECT_EQ(r.ts_ns, 2'000'000);
  EXPECT_EQ(r.first_byte_ns, 3'000'000);
  EXPECT_EQ(r.first_chunk_ns, 4'000'000);
  EXPECT_EQ(r.last_byte_ns, 9'000'000);
  EXPECT_EQ(r.chunk_gaps_us, "[1000,1000,1000,1000]");
  EXPECT_EQ(r.bytes_in, int64_t(req.size()));
  EXPECT_EQ(r.pid, 7u);
  EXPECT_EQ(r.tid, 8u);
}

TEST(HttpRequests, RequestLineSplitOverManyReads) {
  Server s;
  const std::string req = "POST /v1/chat HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789";
  for (char ch : req) s.recv(std::string(1, ch));
  s.send(json_response("{}"));
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].method, "POST");
  EXPECT_EQ(s.rows[0].path, "/v1/chat");
  EXPECT_EQ(s.rows[0].bytes_in, int64_t(req.size()));
  EXPECT_EQ(s.rows[0].ts_ns, 2'000'000);  // its first byte's receive
  EXPECT_EQ(s.rows[0].chunks, 0);
}

TEST(HttpRequests, PipelinedRequestsAnsweredInOrder) {
  Server s;
  s.recv("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b?q=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n");
  s.send(json_response("1") + json_response("22"));
  s.send(json_response("333"));
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].path, "/a");
  EXPECT_EQ(s.rows[1].path, "/b");
  EXPECT_EQ(s.rows[2].path, "/c");
  EXPECT_EQ(s.rows[0].ts_ns, s.rows[2].ts_ns);
  EXPECT_EQ(s.rows[1].last_byte_ns, 3'000'000);
  EXPECT_EQ(s.rows[2].last_byte_ns, 4'000'000);
  for (const auto& r : s.rows) EXPECT_EQ(r.aborted, 0);
}

TEST(HttpRequests, KeepAliveConnectionServesRequestsInTurn) {
  Server s;
  for (int i = 0; i < 3; i++) {
    s.recv("GET /r" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    s.send(kSseHead);
    for (int k = 0; k <= i; k++) s.send(event(k));
    s.send("0\r\n\r\n");
  }
  s.close(true);  // the client's close after its last response ends nothing
  ASSERT_EQ(s.rows.size(), 3u);
  for (int i = 0; i < 3; i++) {
    EXPECT_EQ(s.rows[i].path, "/r" + std::to_string(i));
    EXPECT_EQ(s.rows[i].chunks, i + 1);
    EXPECT_EQ(s.rows[i].conn, 1);
    EXPECT_EQ(s.rows[i].aborted, 0);
  }
}

TEST(HttpRequests, ClientHangingUpMidStreamIsAborted) {
  Server s;
  s.recv("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  s.send(kSseHead);
  s.send(event(0));
  s.send(event(1));
  s.close(true);
  s.send(event(2));  // written after the hang-up: no response of anyone's
  s.io(true, event(3), -32);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].aborted, 1);
  EXPECT_EQ(s.rows[0].chunks, 2);
  EXPECT_EQ(s.rows[0].last_byte_ns, 5'000'000);
}

TEST(HttpRequests, FailedSendAbortsTheResponse) {
  Server s;
  s.recv("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  s.send(kSseHead);
  s.send(event(0));
  s.io(true, event(1), -104);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].aborted, 1);
  EXPECT_EQ(s.rows[0].chunks, 1);
}

TEST(HttpRequests, ResponseEndingAtTheServersCloseIsComplete) {
  Server s;  // HTTP/1.0 style: no length, the close ends it
  s.recv("GET /events HTTP/1.0\r\n\r\n");
  s.send("HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
  s.send("data: a\n\ndata: b\n\n");
  s.send("data: c\n\n");
  s.close(false);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].aborted, 0);
  EXPECT_EQ(s.rows[0].chunks, 3);
  EXPECT_EQ(s.rows[0].chunk_gaps_us, "[0,1000]");
}

TEST(HttpRequests, TlsAndHttp2AreCountedPerConnectionNotParsed) {
  Server s;
  s.recv(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfcGET / HTTP/1.1\r\n\r\n", 27));
  s.send("\x16\x03\x03 whatever");
  s.close(true);
  s.sock++;
  s.recv("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
  s.send("\x00\x00\x00\x04");
  s.close(false);
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].protocol, "tls");
  EXPECT_FALSE(s.rows[0].method);
  EXPECT_FALSE(s.rows[0].path);
  EXPECT_EQ(s.rows[0].bytes_in, 27);
  EXPECT_EQ(s.rows[0].bytes_out, 12);
  EXPECT_EQ(s.rows[1].protocol, "http2");
  EXPECT_NE(s.rows[0].conn, s.rows[1].conn);
}

TEST(HttpRequests, SixteenKilobyteHeaderBlockSeenOnlyInPart) {
  Server s;
  std::string head = "GET /big?x=1 HTTP/1.1\r\nHost: x\r\n";
  while (head.size() < 16 * 1024) head += "X-Filler: " + std::string(100, 'f') + "\r\n";
  head += "\r\n";
  // Read 8 KB at a time: the kernel copied 256 bytes of each, the blank line is in none.
  for (size_t at = 0; at < head.size(); at += 8192) s.recv(head.substr(at, 8192));
  s.send(json_response("ok"));
  s.recv("GET /next HTTP/1.1\r\nHost: x\r\n\r\n");
  s.send(json_response("ok2"));
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].path, "/big");
  EXPECT_EQ(s.rows[0].bytes_in, int64_t(head.size()));
  EXPECT_EQ(s.rows[0].status, 200);
  EXPECT_EQ(s.rows[1].path, "/next");
}

TEST(HttpRequests, ChunkedRequestBodyOverManyReads) {
  Server s;
  const std::vector<std::string> reads = {"POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", "5\r\nhello\r\n",
                                         "6\r\n world\r\n", "0\r\n\r\n"};
  int64_t total = 0;
  for (const auto& r : reads) {
    s.recv(r);
    total += int64_t(r.size());
  }
  s.recv("GET /after HTTP/1.1\r\n\r\n");
  s.send(json_response("a"));
  s.send(json_response("b"));
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].path, "/up");
  EXPECT_EQ(s.rows[0].bytes_in, total);
  EXPECT_EQ(s.rows[1].path, "/after");
}

TEST(HttpRequests, ClientSideConnectionsAreNotServedRequests) {
  Server s;
  s.send("GET /upstream HTTP/1.1\r\nHost: x\r\n\r\n");
  s.recv(json_response("x"));
  s.close(false);
  s.t.flush(s.rows);
  EXPECT_TRUE(s.rows.empty());
}

TEST(HttpRequests, RequestInFlightAtTheTraceEndIsWrittenAsItStands) {
  Server s;
  s.recv("GET /slow HTTP/1.1\r\n\r\n");
  s.send(kSseHead);
  s.send(event(0));
  s.t.flush(s.rows);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].chunks, 1);
  EXPECT_EQ(s.rows[0].aborted, 0);
  EXPECT_EQ(s.t.connections(), 0u);
}

TEST(HttpRequests, SseEventsAreDataFieldsAtTheStartOfALine) {
  EXPECT_EQ(http::sse_events("data: a\n\ndata: b\n\n"), 2);
  EXPECT_EQ(http::sse_events("1a\r\ndata: x metadata: y\n\n"), 1);
  EXPECT_EQ(http::sse_events("event: done\n\n"), 0);
  EXPECT_EQ(http::sse_events("e\r\ndata: [DONE]\n\n"), 0);
  std::string m, p;
  EXPECT_TRUE(http::request_line("DELETE /a/b#frag HTTP/1.1\r\n", m, p));
  EXPECT_EQ(m, "DELETE");
  EXPECT_EQ(p, "/a/b");
  EXPECT_FALSE(http::request_line("HTTP/1.1 200 OK\r\n", m, p));
}

TEST(HttpRequests, ResponseHeadLongerThanTheCopyIsFramedByWhatFollows) {
  Server s;
  s.recv("GET /v1/completions HTTP/1.1\r\n\r\n");
  // The kernel copied 256 bytes of this head: its Transfer-Encoding and blank line are past them.
  s.send("HTTP/1.1 200 OK\r\nX-Request-Trace: " + std::string(300, 't') +
         "\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; i < 4; i++) s.send(event(i));
  s.send("0\r\n\r\n");
  s.recv("GET /ping HTTP/1.1\r\n\r\n");
  s.send(json_response("{}"));
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].chunks, 4);
  EXPECT_EQ(s.rows[0].aborted, 0);
  EXPECT_EQ(s.rows[0].last_byte_ns, 8'000'000);
  EXPECT_EQ(s.rows[1].path, "/ping");
}

TEST(HttpRequests, ResetDuringAChunkedResponseIsAborted) {
  Server s;  // a client closing with unread data resets: the connection goes straight to CLOSE
  s.recv("GET /v1/completions HTTP/1.1\r\n\r\n");
  s.send(kSseHead);
  s.send(event(0));
  s.close(false);
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].aborted, 1);
  EXPECT_EQ(s.rows[0].chunks, 1);
  EXPECT_EQ(s.t.connections(), 0u);
}
