#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A streaming completion server of the Python standard library, to be traced
(tests/e2e/requests_e2e.cpp): HTTP/1.1 keep-alive, each token a server-sent
event in a chunk of its own, written with one send each.

  py_sse_server.py PORT CLIENT_COMMAND...

Serves until CLIENT_COMMAND (run as a child) exits, then stops with its status.

  GET|POST /v1/completions?n=K[&gap_ms=G]  K events `data: {"token": i}`, G ms apart
  GET /ping                                a JSON body with Content-Length
"""
import http.server
import subprocess
import sys
import threading
import time
import urllib.parse


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        self._body()  # the prompt: read and dropped
        self.do_GET()

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/v1/completions":
            self._stream(int(q.get("n", ["1"])[0]), float(q.get("gap_ms", ["2"])[0]) / 1000)
        else:
            body = b'{"ok": true}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def _stream(self, n, gap):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(n):
                time.sleep(gap)
                data = b'data: {"token": %d}\n\n' % i
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def main():
    port = int(sys.argv[1])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"listening on {port}", flush=True)
    rc = subprocess.run(sys.argv[2:]).returncode
    time.sleep(0.2)  # the last connections' ends
    server.shutdown()
    server.server_close()
    sys.exit(rc)


if __name__ == "__main__":
    main()
