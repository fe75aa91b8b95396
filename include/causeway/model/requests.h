/* SPDX-License-Identifier: (GPL-2.0-only OR Apache-2.0) */
/*
 * Requests seen at a traced server's sockets (bpf/sockets.bpf.c): each
 * tcp_sendmsg / tcp_recvmsg / unix_stream_sendmsg / unix_stream_recvmsg call
 * of a traced process is one record with the bytes it moved and a copy of
 * their first CW_SOCK_PEEK_BYTES; a socket's close is another. The consumer
 * (src/consume/http_requests.cpp) runs an HTTP/1.1 state machine per
 * connection over them and writes one `requests` row per request; the copied
 * bytes are parsed and dropped there, never stored.
 */
#ifndef CAUSEWAY_MODEL_REQUESTS_H
#define CAUSEWAY_MODEL_REQUESTS_H

#include "causeway/events.h"

#define CW_EV_SOCK_IO 15
#define CW_EV_SOCK_CLOSE 16

/* Bytes copied from the start of each send or receive. Python's
 * http.server writes Server and Date before Content-Type and
 * Transfer-Encoding: its response head is ~140 bytes, uvicorn's ~130, so 128
 * would miss the framing of the common servers. The copy goes straight into
 * the ring record (no stack). */
#define CW_SOCK_PEEK_BYTES 256

#define CW_SOCK_RECV 0
#define CW_SOCK_SEND 1
#define CW_SOCK_TCP 0
#define CW_SOCK_UNIX 1

struct cw_sock_event {
	struct cw_header hdr;   /* ts_ns: when the call returned */
	__u64 sock;             /* struct sock *: the connection, turned into a number in user space */
	__s64 ret;              /* bytes moved, or -errno */
	__u16 len;              /* bytes copied into data (<= CW_SOCK_PEEK_BYTES) */
	__u8 dir;               /* CW_SOCK_RECV / CW_SOCK_SEND */
	__u8 kind;              /* CW_SOCK_TCP / CW_SOCK_UNIX */
	__u32 _pad;
	__u8 data[CW_SOCK_PEEK_BYTES];
};

/* A TCP connection's end (inet_sock_set_state); hdr.pid/tid: the traced
 * thread that last used the socket. */
struct cw_sock_close_event {
	struct cw_header hdr;
	__u64 sock;
	__u32 by_peer;          /* 1: the peer closed (CLOSE_WAIT), 0: the server did */
	__u32 _pad;
};

#ifdef __cplusplus
#include <string>

#include "causeway/model/family.h"

namespace causeway::model {

// One HTTP/1.1 request a traced process served, or one connection it could
// not parse (TLS, HTTP/2: protocol says which, method and path are NULL).
struct ServedRequest {
  int64_t ts_ns = 0;  // arrival: the receive that brought its first byte
  uint32_t pid = 0;
  uint32_t tid = 0;
  int64_t conn = 0;
  std::string protocol;
  std::optional<std::string> method, path;
  std::optional<int64_t> status;
  std::optional<int64_t> first_byte_ns, first_chunk_ns, last_byte_ns;
  int64_t chunks = 0;
  int64_t bytes_in = 0, bytes_out = 0;
  int64_t aborted = 0;
  std::optional<std::string> chunk_gaps_us;
};

struct Requests {
  using Row = ServedRequest;
  static constexpr Column<Row> kColumns[] = {
      {"ts_ns", SqlType::Integer, true, "arrival: the receive that brought the request's first byte",
       field<&Row::ts_ns>},
      {"pid", SqlType::Integer, true, "server process", field<&Row::pid>},
      {"tid", SqlType::Integer, true, "the thread that received the request", field<&Row::tid>},
      {"conn", SqlType::Integer, true, "connection, numbered per session in the order first seen",
       field<&Row::conn>},
      {"protocol", SqlType::Text, true,
       "`http/1.1` (a parsed request), `tls` or `http2` (a connection counted, not parsed)", field<&Row::protocol>},
      {"method", SqlType::Text, false, "request method (`GET`, `POST`)", field<&Row::method>},
      {"path", SqlType::Text, false, "request path, without its query string", field<&Row::path>},
      {"status", SqlType::Integer, false, "response status code", field<&Row::status>},
      {"first_byte_ns", SqlType::Integer, false, "the send that began the response", field<&Row::first_byte_ns>},
      {"first_chunk_ns", SqlType::Integer, false, "the send that carried the first streamed chunk (TTFT)",
       field<&Row::first_chunk_ns>},
      {"last_byte_ns", SqlType::Integer, false, "the response's last send (or the close that ended it)",
       field<&Row::last_byte_ns>},
      {"chunks", SqlType::Integer, true,
       "streamed chunks: server-sent `data:` events (not `data: [DONE]`), else the chunks of a chunked response",
       field<&Row::chunks>},
      {"bytes_in", SqlType::Integer, true, "request bytes received", field<&Row::bytes_in>},
      {"bytes_out", SqlType::Integer, true, "response bytes sent", field<&Row::bytes_out>},
      {"aborted", SqlType::Integer, true, "1: the client hung up (or a send failed) before the response ended",
       field<&Row::aborted>},
      {"chunk_gaps_us", SqlType::Text, false,
       "µs from each chunk to the next, a JSON array (TPOT: view `request_chunks`)", field<&Row::chunk_gaps_us>},
  };
  static constexpr Table<Row> kTable{"requests", "Requests served by traced processes, seen at their sockets.",
                                     TableKind::Events, kColumns};
};
static_assert(sizeof(cw_sock_event) == 32 + 24 + CW_SOCK_PEEK_BYTES);
static_assert(sizeof(cw_sock_close_event) == 48);

}  // namespace causeway::model
CAUSEWAY_TABLE(Requests);
#endif /* __cplusplus */

#endif /* CAUSEWAY_MODEL_REQUESTS_H */
