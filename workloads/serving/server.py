#!/usr/bin/env python3
"""An OpenAI-style streaming completion server, Python stdlib only, shaped
like the real ones: an HTTP/1.1 front end (asyncio, keep-alive, pipelined
requests answered in order) and a continuous-batching engine in its own
process (workloads/serving/engine.py, or with --gpu the PyTorch engine
workloads/gpu/serving_engine.py) fed over a Unix socket (a socketpair): the
front end hands each request to the engine and streams back what it sends.

  POST /v1/completions  {"prompt": str, "max_tokens": int, "stream": true}
  -> 200, Content-Type: text/event-stream, Transfer-Encoding: chunked; one
     server-sent event `data: {"choices":[{"text":"tok"}]}\\n\\n` per token,
     each written as its own chunk, then `data: [DONE]\\n\\n`, then the chunk
     terminator (each its own write).

usage: server.py --port PORT [--mode MODE] [--decode-ms 3]
                 [--prefill-ms-per-1k-tokens 40] [--max-batch 8]
                 [--engine-cpus LIST] [--burners N] [--gpu] [--libcuda FILE]
Prints exactly `listening on PORT` once both processes are ready; SIGINT or
SIGTERM stops both cleanly. MODEs: engine.py's docstring. --mode contention
pins the engine to --engine-cpus (default: the last CPU) and starts --burners
(default 2) CPU burners there, detached (workloads/serving/burners.py); its
clean twin is --mode clean with the same --engine-cpus.
"""
import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("clean", "long-prompts", "gc", "sampling", "detok", "contention")
MAX_HEADER_BYTES = 64 << 10
MAX_BODY_BYTES = 16 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--mode", default="clean", choices=MODES)
    p.add_argument("--decode-ms", type=float, default=3.0)
    p.add_argument("--decode-ms-per-seq", type=float, default=0.05)
    p.add_argument("--prefill-ms-per-1k-tokens", type=float, default=40.0)
    p.add_argument("--max-batch", type=int, default=8, help="requests decoded together at most")
    p.add_argument("--engine-cpus", default="", help="pin the engine to these CPUs, e.g. 1 or 2-3")
    p.add_argument("--burners", type=int, default=2, help="contention mode: CPU burners on the engine's CPUs")
    p.add_argument("--gpu", action="store_true", help="the PyTorch engine (workloads/gpu/serving_engine.py)")
    default_lib = os.path.join(HERE, "..", "..", "build", "workloads", "lib", "libcuda.so.1")
    p.add_argument("--libcuda", default=os.environ.get("CW_LIBCUDA", default_lib))
    args = p.parse_args()
    if not 0 < args.port < 65536:
        p.error(f"--port {args.port}: not a TCP port")
    if args.max_batch < 1:
        p.error("--max-batch must be at least 1")
    if args.mode == "contention" and not args.engine_cpus:
        args.engine_cpus = str(max(os.sched_getaffinity(0)))
    if not args.gpu and not os.path.exists(args.libcuda):
        p.error(f"--libcuda {args.libcuda}: no such file (build it: ninja -C build workloads, or set CW_LIBCUDA)")
    return args


def engine_command(args, fd):
    common = ["--fd", str(fd), "--mode", args.mode, "--max-batch", str(args.max_batch)]
    if args.engine_cpus:
        common += ["--cpus", args.engine_cpus]
    if args.gpu:
        return [sys.executable, os.path.join(HERE, "..", "gpu", "serving_engine.py")] + common
    return [sys.executable, os.path.join(HERE, "engine.py")] + common + [
        "--libcuda", args.libcuda, "--decode-ms", str(args.decode_ms),
        "--decode-ms-per-seq", str(args.decode_ms_per_seq),
        "--prefill-ms-per-1k-tokens", str(args.prefill_ms_per_1k_tokens)]


def start_burners(cpus, count):
    """Burners detached from the server (a double fork: their parent is not
    the server, as a neighbour's is not): returns their pids."""
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.setsid()
        pids = []
        for _ in range(count):
            pid = os.fork()
            if pid == 0:
                os.execv(sys.executable, [sys.executable, os.path.join(HERE, "burners.py"), "--cpus", cpus])
            pids.append(pid)
        os.write(w, " ".join(map(str, pids)).encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 4096)
    os.close(r)
    os.waitpid(child, 0)
    return [int(p) for p in data.split()]


class Frontend:
    def __init__(self, engine_reader, engine_writer):
        self.engine_reader = engine_reader
        self.engine_writer = engine_writer
        self.streams = {}  # request id -> asyncio.Queue of (text, done)
        self.next_id = 0

    async def pump_engine(self):
        """The engine's step outputs, handed to each request's stream."""
        while True:
            line = await self.engine_reader.readline()
            if not line:
                raise RuntimeError("the engine closed its socket")
            for rid, text, done in json.loads(line)["out"]:
                q = self.streams.get(rid)
                if q is not None:
                    q.put_nowait((text, done))

    def to_engine(self, msg):
        self.engine_writer.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    async def handle(self, reader, writer):
        try:
            while await self.one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def one_request(self, reader, writer):
        """Serves one request of a connection; False: close it."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        keep = headers.get("connection", "").lower() != "close"
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY_BYTES:
            await self.plain(writer, 413, "request body too large")
            return False
        body = await reader.readexactly(length) if length else b""
        if len(parts) != 3 or parts[0] != "POST" or parts[1].split("?")[0] != "/v1/completions":
            await self.plain(writer, 404, "only POST /v1/completions")
            return keep
        try:
            req = json.loads(body)
            prompt, max_tokens = req["prompt"], int(req.get("max_tokens", 16))
            if not isinstance(prompt, str) or max_tokens < 1:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            await self.plain(writer, 400, "expected JSON {\"prompt\": str, \"max_tokens\": int >= 1}")
            return keep
        await self.stream(writer, prompt, max_tokens)
        return keep

    async def stream(self, writer, prompt, max_tokens):
        rid = self.next_id
        self.next_id += 1
        q = self.streams[rid] = asyncio.Queue()
        self.to_engine({"op": "add", "id": rid, "prompt": prompt, "max_tokens": max_tokens})
        done = False
        try:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
            await writer.drain()
            while not done:
                text, done = await q.get()
                if text is not None:
                    event = b"data: " + json.dumps({"choices": [{"text": text}]}, separators=(",", ":")).encode() + b"\n\n"
                    await self.chunk(writer, event)
            await self.chunk(writer, b"data: [DONE]\n\n")
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except ConnectionError:
            if not done:
                self.to_engine({"op": "abort", "id": rid})
            raise
        finally:
            del self.streams[rid]

    @staticmethod
    async def chunk(writer, data):
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()

    @staticmethod
    async def plain(writer, status, text):
        reason = {400: "Bad Request", 404: "Not Found", 413: "Payload Too Large"}[status]
        body = (text + "\n").encode()
        writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                     % (status, reason.encode(), len(body), body))
        await writer.drain()


async def serve(args):
    front_sock, engine_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    engine = subprocess.Popen(engine_command(args, engine_sock.fileno()), pass_fds=[engine_sock.fileno()])
    engine_sock.close()
    burners = []
    writer = None
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    try:
        reader, writer = await asyncio.open_unix_connection(sock=front_sock, limit=1 << 24)
        ready = asyncio.ensure_future(reader.readline())
        await asyncio.wait([ready, stop], return_when=asyncio.FIRST_COMPLETED)
        if stop.done():
            return 0
        if not ready.result().startswith(b'{"ready"'):
            print(f"server: the engine failed to start (exit {engine.wait()})", file=sys.stderr)
            return 1
        front = Frontend(reader, writer)
        try:
            server = await asyncio.start_server(front.handle, args.host, args.port,
                                                limit=MAX_HEADER_BYTES + MAX_BODY_BYTES)
        except OSError as e:
            print(f"server: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
            return 1
        if args.mode == "contention":
            burners = start_burners(args.engine_cpus, args.burners)
        print(f"listening on {args.port}", flush=True)
        pump = asyncio.ensure_future(front.pump_engine())
        await asyncio.wait([pump, stop], return_when=asyncio.FIRST_COMPLETED)
        server.close()
        if pump.done():
            print(f"server: {pump.exception()}", file=sys.stderr)
            return 1
        pump.cancel()
        return 0
    finally:
        for pid in burners:
            os.kill(pid, signal.SIGTERM)
        front_sock.shutdown(socket.SHUT_RDWR)  # the engine stops at EOF
        try:
            await asyncio.wait_for(loop.run_in_executor(None, engine.wait), 30)
        except asyncio.TimeoutError:
            engine.kill()
        if writer is not None:
            writer.close()


def main():
    args = parse_args()
    sys.exit(asyncio.run(serve(args)))


if __name__ == "__main__":
    main()
