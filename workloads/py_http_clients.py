#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Raw-socket clients of py_sse_server.py, each one shape a served request
can take (tests/e2e/requests_e2e.cpp): new connections, keep-alive,
pipelining, a stream the client hangs up on, a request written a few bytes
at a time, a TLS hello, a 16-KB header block. The prompt and a header carry
the marker of $CW_PROMPT_MARKER (never on a command line: the trace keeps
those), which must appear nowhere in the trace.

  py_http_clients.py PORT
"""
import os
import socket
import sys
import time

PORT = int(sys.argv[1])
MARKER = os.environ.get("CW_PROMPT_MARKER", "no-marker")


def connect():
    s = socket.create_connection(("127.0.0.1", PORT))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def request(method, target, body=b"", extra=""):
    head = f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: {MARKER}\r\n{extra}"
    if body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def read_response(f):
    """Reads one response; returns its SSE event count."""
    status = f.readline()
    assert status.startswith(b"HTTP/1.1 200"), status
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b""):
            break
        k, v = line.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        f.read(int(headers["content-length"]))
        return 0
    events = 0
    while True:
        size = int(f.readline().split(b";")[0], 16)
        data = f.read(size + 2)
        if size == 0:
            return events
        events += data.count(b"data:")


def prompt():
    return ('{"prompt": "%s tell me a story", "stream": true}' % MARKER).encode()


def new_connections():
    for n in (3, 5, 7, 9, 11):
        with connect() as s:
            s.sendall(request("POST", f"/v1/completions?n={n}&user={MARKER}", prompt()))
            assert read_response(s.makefile("rb")) == n


def keep_alive():
    with connect() as s:
        f = s.makefile("rb")
        for n in (2, 4, 6):
            s.sendall(request("GET", f"/v1/completions?n={n}"))
            assert read_response(f) == n


def pipelined():
    with connect() as s:
        s.sendall(b"".join(request("GET", f"/ping?i={i}") for i in range(3)))
        f = s.makefile("rb")
        for _ in range(3):
            read_response(f)


def aborted():
    s = connect()
    s.sendall(request("POST", "/v1/completions?n=200&gap_ms=10", prompt()))
    f = s.makefile("rb")
    seen = 0
    while seen < 3:
        seen += f.readline().count(b"data:")
    f.close()
    s.close()  # mid-stream: the server's next writes fail
    time.sleep(0.3)


def split():
    with connect() as s:
        whole = request("POST", "/v1/completions?n=4", prompt())
        for i in range(0, len(whole), 7):
            s.sendall(whole[i:i + 7])
            time.sleep(0.002)
        assert read_response(s.makefile("rb")) == 4


def tls():
    with connect() as s:
        s.sendall(b"\x16\x03\x01\x00\x2a\x01\x00\x00\x26\x03\x03" + os.urandom(32) + b"\r\n\r\n")
        while s.recv(4096):
            pass


def big_headers():
    extra = "".join(f"X-Filler-{i}: {'f' * 170}\r\n" for i in range(90))
    with connect() as s:
        s.sendall(request("GET", "/v1/completions?n=2", extra=extra))
        assert read_response(s.makefile("rb")) == 2


for scenario in (new_connections, keep_alive, pipelined, aborted, split, tls, big_headers):
    scenario()
print("clients done", flush=True)
