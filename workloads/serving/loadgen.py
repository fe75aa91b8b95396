#!/usr/bin/env python3
"""An open-loop load generator for workloads/serving/server.py, the ground
truth that causeway's per-request numbers are compared with. Arrivals follow
a schedule drawn from the seed (Poisson by default, or fixed intervals); each
request is sent when its time comes, never waiting for an earlier one (a
slow server would otherwise slow its own load and hide its tail): on a new
connection, or with --keep-alive on an idle connection of a pool (a new one
when none is idle). asyncio, stdlib only.

usage: loadgen.py --port PORT --rate RPS --requests N [--seed S]
           [--max-tokens T] [--prompt-chars C] [--long-every K --long-chars L]
           [--marker STR] [--schedule poisson|fixed] [--keep-alive]
           [--abort-every K [--abort-after N]] --out truth.json

truth.json: {"requests": [...], "summary": {...}}. Per request: id, its
connection, scheduled/send/first-byte/first-chunk/every chunk's/[DONE]/end
times as CLOCK_MONOTONIC ns (time.monotonic_ns(), the kernel's clock) and the
send time as wall-clock ns, status, chunks (streamed token events: `data:`
events other than [DONE]), events (all `data:` events), bytes in and out,
aborted (we hung up mid-stream, --abort-every), error. Times are taken when
the bytes reach this process (a read's time is each event's it completes).
The summary's percentiles are nearest-rank over the requests that completed
(status 200, not aborted), in ms:
  TTFT     = first token chunk - send (the request's last byte written)
  TPOT     = (last token chunk - first token chunk) / (chunks - 1), over the
             requests with 2 or more chunks
  duration = end (the chunk terminator) - send
"""
import argparse
import asyncio
import json
import math
import random
import sys
import time

WORDS = ("the", "model", "token", "stream", "server", "batch", "request", "cache", "layer", "prompt",
         "latency", "tail", "queue", "decode", "prefill", "kernel", "sync", "graph", "memory", "engine")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--rate", type=float, required=True, help="requests per second")
    p.add_argument("--requests", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--prompt-chars", type=int, default=400)
    p.add_argument("--long-every", type=int, default=0, help="every Kth request gets a long prompt")
    p.add_argument("--long-chars", type=int, default=64000)
    p.add_argument("--marker", default="", help="put this string in every prompt")
    p.add_argument("--schedule", choices=("poisson", "fixed"), default="poisson")
    p.add_argument("--keep-alive", action="store_true", help="reuse idle connections (a pool)")
    p.add_argument("--abort-every", type=int, default=0, help="every Kth request hangs up mid-stream")
    p.add_argument("--abort-after", type=int, default=2, help="... after this many token chunks")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds a request may take")
    p.add_argument("--out", required=True)
    p.add_argument("--quiet", action="store_true", help="no table on stdout")
    args = p.parse_args()
    if args.rate <= 0 or args.requests < 1 or args.max_tokens < 1 or args.prompt_chars < 1:
        p.error("--rate, --requests, --max-tokens and --prompt-chars must be positive")
    if args.long_every < 0 or args.abort_every < 0 or args.abort_after < 1:
        p.error("--long-every and --abort-every must be >= 0, --abort-after >= 1")
    return args


def make_prompt(rng, chars, marker):
    words, n = [], 0
    while n < chars:
        w = rng.choice(WORDS)
        words.append(w)
        n += len(w) + 1
    text = " ".join(words)[:chars]
    if marker:
        at = rng.randrange(len(text) + 1)
        text = text[:at] + marker + text[at:]
    return text


def plan(args):
    """Each request's (offset from the start in s, prompt), from the seed."""
    rng = random.Random(args.seed)
    t, items = 0.0, []
    for i in range(args.requests):
        long = args.long_every and (i + 1) % args.long_every == 0
        items.append((t, make_prompt(rng, args.long_chars if long else args.prompt_chars, args.marker), bool(long)))
        t += rng.expovariate(args.rate) if args.schedule == "poisson" else 1.0 / args.rate
    return items


class Response(asyncio.Protocol):
    """One connection: parses each response's status, headers and chunked
    body as its bytes arrive, timing every `data:` event."""

    def __init__(self, lost):
        self.transport = None
        self.rec = None
        self.done = None
        self.lost = lost
        self.close_after = False

    def connection_made(self, transport):
        self.transport = transport

    def start(self, rec, abort_after):
        self.rec, self.buf, self.state = rec, b"", "head"
        self.events, self.abort_after = b"", abort_after
        self.done = asyncio.get_running_loop().create_future()

    def data_received(self, data):
        now = time.monotonic_ns()
        if self.rec is None:
            return
        self.rec["bytes_in"] += len(data)
        self.buf += data
        try:
            self.parse(now)
        except ValueError as e:
            self.finish(now, f"bad response: {e}")

    def parse(self, now):
        while self.rec is not None:
            if self.state == "head":
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return
                lines = self.buf[:end].decode("latin-1").split("\r\n")
                self.buf = self.buf[end + 4:]
                self.rec["first_byte_ns"] = now
                self.rec["status"] = int(lines[0].split(" ")[1])
                hdr = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
                self.close_after = hdr.get("connection", "").lower() == "close"
                if hdr.get("transfer-encoding", "").lower() == "chunked":
                    self.state = "size"
                else:
                    self.state, self.left = "plain", int(hdr.get("content-length", "0"))
            elif self.state == "plain":
                if len(self.buf) < self.left:
                    return
                self.buf = self.buf[self.left:]
                self.finish(now, None if self.rec["status"] == 200 else f"status {self.rec['status']}")
            elif self.state == "size":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                size = int(self.buf[:end].split(b";")[0], 16)
                if len(self.buf) < end + 2 + size + 2:
                    return
                body = self.buf[end + 2:end + 2 + size]
                self.buf = self.buf[end + 2 + size + 2:]
                if size == 0:
                    self.finish(now, None)
                else:
                    self.on_body(body, now)

    def on_body(self, body, now):
        self.events += body
        while b"\n\n" in self.events:
            event, self.events = self.events.split(b"\n\n", 1)
            if not event.startswith(b"data:"):
                continue
            self.rec["events"] += 1
            if event[5:].strip() == b"[DONE]":
                self.rec["done_ns"] = now
                continue
            if self.rec["chunks"] == 0:
                self.rec["first_chunk_ns"] = now
            self.rec["chunks"] += 1
            self.rec["chunk_ns"].append(now)
            if self.abort_after and self.rec["chunks"] >= self.abort_after:
                self.rec["aborted"] = True
                self.transport.abort()
                self.finish(now, None)
                return

    def finish(self, now, error):
        rec, self.rec = self.rec, None
        if rec is None:
            return
        rec["end_ns"] = now
        rec["error"] = error
        if not self.done.done():
            self.done.set_result(rec)

    def connection_lost(self, exc):
        self.lost(self)
        if self.rec is not None:
            self.finish(time.monotonic_ns(), f"connection closed mid-response ({exc or 'EOF'})")


class LoadGenerator:
    def __init__(self, args):
        self.args = args
        self.idle = []  # keep-alive: connections waiting for a request
        self.connections = 0

    def forget(self, conn):
        if conn in self.idle:
            self.idle.remove(conn)

    async def connect(self):
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(lambda: Response(self.forget), self.args.host, self.args.port)
        conn.index = self.connections
        self.connections += 1
        return conn

    async def one(self, i, start_ns, offset, prompt, long):
        a = self.args
        rec = {"id": i, "long": long, "prompt_chars": len(prompt), "max_tokens": a.max_tokens,
               "scheduled_ns": start_ns + int(offset * 1e9), "conn": None, "status": None, "chunks": 0,
               "events": 0, "chunk_ns": [], "bytes_in": 0, "bytes_out": 0, "aborted": False,
               "first_byte_ns": None, "first_chunk_ns": None, "done_ns": None}
        body = json.dumps({"prompt": prompt, "max_tokens": a.max_tokens, "stream": True}).encode()
        request = (b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                   b"Accept: text/event-stream\r\n%sContent-Length: %d\r\n\r\n%s"
                   % (a.host.encode(), a.port, b"" if a.keep_alive else b"Connection: close\r\n", len(body), body))
        try:
            conn = self.idle.pop() if self.idle else await self.connect()
        except OSError as e:
            rec.update(send_ns=time.monotonic_ns(), send_wall_ns=time.time_ns(), end_ns=time.monotonic_ns(),
                       error=f"connect: {e.strerror or e}")
            return rec
        rec["conn"] = conn.index
        abort = a.abort_every and (i + 1) % a.abort_every == 0
        conn.start(rec, a.abort_after if abort else 0)
        rec["bytes_out"] = len(request)
        conn.transport.write(request)
        # The request's last byte is handed to the kernel here (the socket
        # takes it at once unless its buffer is full).
        rec["send_ns"], rec["send_wall_ns"] = time.monotonic_ns(), time.time_ns()
        try:
            rec = await asyncio.wait_for(conn.done, a.timeout)
        except asyncio.TimeoutError:
            conn.finish(time.monotonic_ns(), f"no end after {a.timeout} s")
            conn.transport.abort()
            return rec
        if a.keep_alive and not rec["aborted"] and not rec["error"] and not conn.close_after \
                and not conn.transport.is_closing():
            self.idle.append(conn)
        else:
            conn.transport.close()
        return rec

    async def run(self):
        items = plan(self.args)
        start = time.monotonic_ns()
        tasks = []
        for i, (offset, prompt, long) in enumerate(items):
            delay = start + offset * 1e9 - time.monotonic_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            tasks.append(asyncio.ensure_future(self.one(i, start, offset, prompt, long)))
        recs = await asyncio.gather(*tasks)
        for conn in self.idle:
            conn.transport.close()
        return recs, (time.monotonic_ns() - start) / 1e9


def nearest_rank(values, p):
    v = sorted(values)
    return v[max(0, math.ceil(p / 100.0 * len(v)) - 1)] if v else None


def metrics(rec):
    """The request's TTFT, TPOT and duration in ms (None where undefined)."""
    ms = lambda ns: ns / 1e6  # noqa: E731
    ok = rec.get("status") == 200 and not rec["aborted"] and not rec.get("error") and rec["chunks"] > 0
    if not ok:
        return None, None, None
    ttft = ms(rec["first_chunk_ns"] - rec["send_ns"])
    tpot = ms(rec["chunk_ns"][-1] - rec["chunk_ns"][0]) / (rec["chunks"] - 1) if rec["chunks"] > 1 else None
    return ttft, tpot, ms(rec["end_ns"] - rec["send_ns"])


def percentiles(values):
    return {"n": len(values), **{f"p{p}": nearest_rank(values, p) for p in (50, 90, 99)},
            "max": max(values) if values else None}


def summarize(recs, wall_s=None):
    rows = [metrics(r) for r in recs]
    ok = [m for m in rows if m[0] is not None]
    summary = {
        "count": len(ok),
        "sent": len(recs),
        "aborted": sum(1 for r in recs if r["aborted"]),
        "failed": sum(1 for r in recs if r.get("error")),
        "chunks": sum(r["chunks"] for r in recs),
        "ttft_ms": percentiles([m[0] for m in ok]),
        "tpot_ms": percentiles([m[1] for m in ok if m[1] is not None]),
        "duration_ms": percentiles([m[2] for m in ok]),
    }
    late = [r["send_ns"] - r["scheduled_ns"] for r in recs if r.get("send_ns")]
    summary["send_lag_ms_p99"] = nearest_rank(late, 99) / 1e6 if late else None
    if wall_s:
        summary["wall_s"] = wall_s
        summary["throughput_rps"] = len(ok) / wall_s
    return summary


def table(summary, label=""):
    s = summary
    out = [f"{label}{s['count']} ok of {s['sent']} sent, {s['aborted']} aborted, {s['failed']} failed, "
           f"{s['chunks']} chunks" + (f", {s['throughput_rps']:.1f} req/s over {s['wall_s']:.1f} s"
                                      if s.get("wall_s") else "")]
    out.append(f"  {'':12}{'n':>6}{'p50':>9}{'p90':>9}{'p99':>9}{'max':>9}")
    for key in ("ttft_ms", "tpot_ms", "duration_ms"):
        d = s[key]
        f = lambda x: f"{x:9.2f}" if x is not None else f"{'-':>9}"  # noqa: E731
        out.append(f"  {key:12}{d['n']:6d}{f(d['p50'])}{f(d['p90'])}{f(d['p99'])}{f(d['max'])}")
    return "\n".join(out)


def main():
    args = parse_args()
    recs, wall_s = asyncio.run(LoadGenerator(args).run())
    for r in recs:
        r["ttft_ms"], r["tpot_ms"], r["duration_ms"] = metrics(r)
    summary = summarize(recs, wall_s)
    summary["offered_rps"] = args.rate
    with open(args.out, "w") as f:
        json.dump({"requests": recs, "summary": summary}, f)
    if not args.quiet:
        print(table(summary))
    errors = [r["error"] for r in recs if r.get("error")]
    if errors:
        print(f"loadgen: {len(errors)} requests failed, the first: {errors[0]}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
