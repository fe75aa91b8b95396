"""The engine process of workloads/serving/server.py: a continuous-batching
loop fed over a Unix socket by the HTTP front end, as vLLM's and SGLang's
engines are fed by their API servers.

Protocol (one JSON object a line, both ways):
  front end -> engine  {"op": "add", "id": N, "prompt": str, "max_tokens": N}
                       {"op": "abort", "id": N}      (the client hung up)
  engine -> front end  {"ready": true}               once, when it can serve
                       {"out": [[id, text, done], ...]}  one line a step: the
                       step's tokens (text null: finished with no token)
EOF on the socket stops the engine.

Each iteration of the loop is one step for every running request: a prefill
for the requests admitted this iteration (its cost proportional to their
prompt tokens, a token ~ 4 characters, run ahead of the batch's decode: no
chunked prefill), then a decode producing one token per running request. The
model itself is a backend: StandInBackend here (the stand-in libcuda of the
tests, workloads/lib/cuda.c, whose cuCtxSynchronize waits CW_FAKE_SYNC_MS),
TorchBackend in workloads/gpu/serving_engine.py (a small real decoder).

Modes (planted host-side causes; the backend is the same in all of them):
  clean         greedy sampling on the device, a vocabulary lookup per token
  long-prompts  as clean (the load generator sends the long prompts)
  gc            every token leaves cyclic objects behind (its alternatives,
                linked to their request) and the engine keeps the last
                GC_KEEP_TOKENS tokens' worth: CPython's collector, thresholds
                left at their defaults, runs full collections over ~0.5M
                live objects every second or two, pausing the loop
  sampling      the logits are copied to the host and sampled in Python
                (temperature, softmax, top-p) on each decode step
  detok         each token is detokenised in Python by re-decoding the whole
                sequence (prompt and output) through a byte-level decoder, as
                incremental detokenizers over slow tokenizers did
  contention    as clean; server.py pins the engine and starts CPU burners
                on its CPUs (workloads/serving/burners.py)
"""
import ctypes
import json
import math
import os
import random
import select
import signal
import socket
import sys
import time
import zlib

VOCAB = 4096  # host sampling's cost is proportional to it
GC_KEEP_TOKENS = 6000
GC_ALTERNATIVES = 48  # cyclic objects each token leaves
DETOK_PASSES = 4  # the slow detokenizer's clean-up passes over the sequence


def token_text(tid):
    """A token's text: word pieces with a leading space, as BPE vocabularies
    have, ASCII only so that every piece is one JSON string as is."""
    syll = ("ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "da", "fe", "gu", "ho", "ji", "pe", "qu", "zo")
    a, b, c = tid % 16, (tid // 16) % 16, (tid // 256) % 16
    return (" " if tid % 3 == 0 else "") + syll[a] + syll[b] + ("" if c < 8 else syll[c])


VOCAB_TEXT = [token_text(i) for i in range(VOCAB)]


def prompt_ids(prompt, vocab=VOCAB):
    """A stand-in tokenizer: one token per 4 characters of the prompt."""
    return [zlib.crc32(prompt[i:i + 4].encode()) % vocab for i in range(0, len(prompt), 4)] or [0]


class Request:
    __slots__ = ("id", "prompt", "prompt_ids", "max_tokens", "output", "kv", "state", "gc_links")

    def __init__(self, rid, prompt, max_tokens):
        self.id = rid
        self.prompt = prompt
        self.prompt_ids = prompt_ids(prompt)
        self.max_tokens = max_tokens
        self.output = []
        self.kv = []  # device allocations: its KV cache blocks
        self.state = None  # the backend's
        self.gc_links = []


def sample_on_host(row, rng, temperature=0.8, top_p=0.9):
    """Temperature, softmax and top-p over a row of logits, in Python."""
    top = max(row)
    probs = [math.exp((x - top) / temperature) for x in row]
    total = sum(probs)
    order = sorted(range(len(probs)), key=probs.__getitem__, reverse=True)
    cut, acc = [], 0.0
    for i in order:
        cut.append(i)
        acc += probs[i] / total
        if acc >= top_p:
            break
    r = rng.random() * acc
    for i in cut:
        r -= probs[i] / total
        if r <= 0:
            return i
    return cut[-1]


BYTE_DECODER = {chr(0x100 + b) if b < 33 else chr(b): b for b in range(256)}


def slow_detokenize(req):
    """The new token's text, found by decoding the whole sequence again and
    taking what it added: byte-level decoding, a character at a time."""
    def decode(ids):
        text = "".join(VOCAB_TEXT[i] for i in ids)
        for _ in range(DETOK_PASSES):  # byte decoding and clean-up passes
            text = bytes(BYTE_DECODER.get(ch, 32) for ch in text).decode("utf-8", "replace")
        return text
    ids = req.prompt_ids + req.output
    before = decode(ids[:-1])
    return decode(ids)[len(before):]


class Engine:
    def __init__(self, sock, backend, mode, max_batch, kv_block_tokens):
        self.sock = sock
        self.backend = backend
        self.mode = mode
        self.max_batch = max_batch
        self.kv_block_tokens = kv_block_tokens
        self.waiting, self.running = [], []
        self.inbuf = b""
        self.stop = False
        self.rng = random.Random(1)
        self.gc_history = []  # gc mode: the tokens' objects the engine keeps

    def read_commands(self, block):
        """Takes what the front end sent; blocks (up to 0.5 s) when idle."""
        ready, _, _ = select.select([self.sock], [], [], 0.5 if block else 0)
        if not ready:
            return
        data = self.sock.recv(1 << 20)
        if not data:
            self.stop = True
            return
        self.inbuf += data
        *lines, self.inbuf = self.inbuf.split(b"\n")
        for line in lines:
            msg = json.loads(line)
            if msg["op"] == "add":
                self.waiting.append(Request(msg["id"], msg["prompt"], max(1, int(msg["max_tokens"]))))
            elif msg["op"] == "abort":
                self.abort(msg["id"])

    def abort(self, rid):
        self.waiting = [r for r in self.waiting if r.id != rid]
        for r in self.running:
            if r.id == rid:
                self.running.remove(r)
                self.free(r)
                return

    def grow_kv(self, req):
        """One KV block per kv_block_tokens tokens of the sequence, allocated
        on the device as the sequence reaches it (the prompt's at once)."""
        need = -(-(len(req.prompt_ids) + len(req.output) + 1) // self.kv_block_tokens)
        have = sum(blocks for _, blocks in req.kv)
        if need > have:
            req.kv.append((self.backend.alloc_kv(need - have), need - have))

    def free(self, req):
        for handle, _ in req.kv:
            self.backend.free_kv(handle)
        req.kv = []
        self.backend.release(req)

    def emit_token(self, req, tid, out):
        req.output.append(tid)
        if self.mode == "detok":
            text = slow_detokenize(req)
        else:
            text = VOCAB_TEXT[tid % VOCAB]
        if self.mode == "gc":
            self.leave_cycles(req, tid)
        done = len(req.output) >= req.max_tokens
        out.append([req.id, text, done])
        return done

    def leave_cycles(self, req, tid):
        # A token's alternatives, each pointing back at the request that
        # points at them: cycles only the collector frees, and many of them
        # kept alive, so that each full collection has much to traverse.
        alts = [{"token": (tid + k) % VOCAB, "logprob": -0.1 * k, "req": req.gc_links} for k in range(GC_ALTERNATIVES)]
        req.gc_links.append(alts)
        self.gc_history.append(alts)
        if len(self.gc_history) > GC_KEEP_TOKENS:
            del self.gc_history[:GC_KEEP_TOKENS // 10]

    def step(self):
        out = []
        new = []
        while self.waiting and len(self.running) + len(new) < self.max_batch:
            new.append(self.waiting.pop(0))
        if new:
            for r in new:
                self.grow_kv(r)
            first = self.backend.prefill(new, self.mode == "sampling")
            for r, tid in zip(new, first):
                tid = self.pick(r, tid)
                if not self.emit_token(r, tid, out):
                    self.running.append(r)
                else:
                    self.free(r)
        batch = [r for r in self.running if r not in new]
        if batch:
            for r in batch:
                self.grow_kv(r)
            ids = self.backend.decode(batch, self.mode == "sampling")
            for r, tid in zip(batch, ids):
                if self.emit_token(r, self.pick(r, tid), out):
                    self.running.remove(r)
                    self.free(r)
        if out:
            self.sock.sendall(json.dumps({"out": out}, separators=(",", ":")).encode() + b"\n")

    def pick(self, req, tid):
        """tid is the device's greedy choice, or in sampling mode a row of
        logits copied to the host, sampled here."""
        if isinstance(tid, int):
            return tid
        return sample_on_host(tid, self.rng)

    def run(self):
        self.sock.sendall(b'{"ready":true}\n')
        while not self.stop:
            self.read_commands(block=not (self.running or self.waiting))
            if self.stop:
                break
            if self.running or self.waiting:
                self.step()
        for r in self.running:
            self.free(r)


class StandInBackend:
    """The model as launches and syncs on the stand-in libcuda: LAYERS
    launches a step, then one synchronisation lasting the step's device time
    (cuCtxSynchronize spins for CW_FAKE_SYNC_MS, read at each call)."""
    LAYERS = 4

    def __init__(self, lib_path, decode_ms, decode_ms_per_seq, prefill_ms_per_1k, kv_block_bytes):
        self.cuda = ctypes.CDLL(lib_path)
        self.decode_ms = decode_ms
        self.decode_ms_per_seq = decode_ms_per_seq
        self.prefill_ms_per_1k = prefill_ms_per_1k
        self.kv_block_bytes = kv_block_bytes
        c = self.cuda
        c.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        c.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
        c.cuMemFree_v2.argtypes = [ctypes.c_ulonglong]
        c.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_size_t]
        c.cuInit(0)
        mod = ctypes.c_void_p()
        c.cuModuleLoadData(ctypes.byref(mod), None)
        self.kernels = []
        for name in (b"embed", b"attention", b"mlp", b"lm_head"):
            f = ctypes.c_void_p()
            c.cuModuleGetFunction(ctypes.byref(f), mod, name)
            self.kernels.append(f)
        self.ids = (ctypes.c_int * 4096)()
        self.logits = (ctypes.c_float * VOCAB)()
        # The device writes nothing: the host sampler reads a row of logits
        # rotated per request, so that its choices vary.
        rng = random.Random(2)
        self.base_row = [rng.gauss(0.0, 2.0) for _ in range(VOCAB)]
        self.position = 0

    def launch_layers(self, batch):
        for layer in range(self.LAYERS):
            for f in self.kernels[1:3]:
                self.cuda.cuLaunchKernel(f, batch, 1, 1, 128, 1, 1, 0, None, None, None)
        self.cuda.cuLaunchKernel(self.kernels[3], batch, 1, 1, 128, 1, 1, 0, None, None, None)

    def wait_for_device(self, ms):
        os.environ["CW_FAKE_SYNC_MS"] = "%.3f" % ms
        self.cuda.cuCtxSynchronize()

    def read_back(self, reqs, logits):
        if logits:
            rows = []
            for _ in reqs:
                self.cuda.cuMemcpyDtoH_v2(self.logits, 0x1000, ctypes.sizeof(self.logits))
                self.position = (self.position + 97) % VOCAB
                rows.append(self.base_row[self.position:] + self.base_row[:self.position])
            return rows
        self.cuda.cuMemcpyDtoH_v2(self.ids, 0x1000, 4 * len(reqs))
        return [(r.id * 7919 + (len(r.prompt_ids) + len(r.output)) * 31) % VOCAB for r in reqs]

    def prefill(self, reqs, logits):
        tokens = sum(len(r.prompt_ids) for r in reqs)
        self.cuda.cuLaunchKernel(self.kernels[0], len(reqs), 1, 1, 128, 1, 1, 0, None, None, None)
        self.launch_layers(len(reqs))
        self.wait_for_device(self.prefill_ms_per_1k * tokens / 1000.0)
        return self.read_back(reqs, logits)

    def decode(self, reqs, logits):
        self.launch_layers(len(reqs))
        self.wait_for_device(self.decode_ms + self.decode_ms_per_seq * len(reqs))
        return self.read_back(reqs, logits)

    def alloc_kv(self, blocks):
        ptr = ctypes.c_ulonglong()
        rc = self.cuda.cuMemAlloc_v2(ctypes.byref(ptr), blocks * self.kv_block_bytes)
        if rc != 0:
            raise RuntimeError(f"cuMemAlloc_v2 of the KV cache failed ({rc})")
        return ptr.value

    def free_kv(self, handle):
        self.cuda.cuMemFree_v2(handle)

    def release(self, req):
        pass


def engine_args(parser):
    parser.add_argument("--fd", type=int, required=True, help="the Unix socket to the front end")
    parser.add_argument("--mode", default="clean")
    parser.add_argument("--max-batch", type=int, default=8)
    parser.add_argument("--kv-block-tokens", type=int, default=16)
    parser.add_argument("--kv-block-bytes", type=int, default=4096)
    parser.add_argument("--cpus", default="", help="pin the engine to these CPUs (os.sched_setaffinity)")


def serve(args, backend):
    sock = socket.socket(fileno=args.fd)
    Engine(sock, backend, args.mode, args.max_batch, args.kv_block_tokens).run()


def setup_process(args):
    # The front end owns the signals: Ctrl-C reaches the whole process group,
    # and the engine stops when the front end closes its socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if args.cpus:
        os.sched_setaffinity(0, parse_cpus(args.cpus))


def parse_cpus(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def main():
    import argparse
    p = argparse.ArgumentParser(description="the stand-in engine of workloads/serving/server.py")
    engine_args(p)
    p.add_argument("--libcuda", required=True)
    p.add_argument("--decode-ms", type=float, default=3.0)
    p.add_argument("--decode-ms-per-seq", type=float, default=0.05)
    p.add_argument("--prefill-ms-per-1k-tokens", type=float, default=40.0)
    args = p.parse_args()
    setup_process(args)
    backend = StandInBackend(args.libcuda, args.decode_ms, args.decode_ms_per_seq,
                             args.prefill_ms_per_1k_tokens, args.kv_block_bytes)
    serve(args, backend)


if __name__ == "__main__":
    main()
