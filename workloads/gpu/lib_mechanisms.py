"""Training loops with one cost hidden inside a library's calls each, and a
clean twin of each (issue 48; workloads/gpu/mechanisms.sh traces and scores
them). Every loop is a training step with a forward, a backward and an
optimizer step, and reads its loss back once a step.
  cudnn_autotune   cudnn.benchmark=True, a conv net whose input H/W changes
                   every step: cuDNN times candidate algorithms for each new
                   shape, inside the convolutions' forward and backward
  cudnn_fixed      the same with one input shape (tuned once, at step 0)
  triton_autotune  a @triton.autotune kernel keyed on a size that changes every
                   step: the autotuner benchmarks every config for each key
  triton_fixed     the same with one size (tuned once)
  graph_recapture  the step captured into a new CUDA graph every step (each
                   capture with its own memory pool), then replayed
  graph_once       captured once, replayed every step
  memlimit         the 2 GiB file (CW_DATA_FILE, written if missing) read
                   once before the loop (an epoch's first pass), then each
                   step reads its next 16 MiB while the GPU runs the step;
                   run in a cgroup whose memory
                   limit (1 GiB) is smaller than the file (mechanisms.sh sets
                   it up): what the first pass cached the limit evicted
  memlimit_room    the same in a cgroup with room for the file (8 GiB): the
                   steps read from the page cache
  threads          the next batch prepared on the CPU (matmuls) while the GPU
                   runs the step, on torch.set_num_threads(8 x the CPUs it
                   may use): its threads wait for each other's CPUs and the
                   preparation outlasts the GPU's work
  threads_fit      the same on as many threads as CPUs: hidden under the GPU
                   (both size the GPU's step to twice the preparation on
                   as many threads as CPUs, measured before the loop)
usage: [CW_SKIP_HOST=1] [CW_ROWS=N] python3 lib_mechanisms.py MODE [SECONDS]
Runs steps for SECONDS (default 8) after the first (a long run's steady
state rather than its warm-up), at least 5. Prints "MODE steps=N
step_ms=<median after warm-up>". The `# CALL:` lines are where the planted
causes are."""
import os
import sys
import time

import torch
import torch.nn as nn

MODE = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
# CW_SKIP_HOST=1: the step without its host preparation (memlimit*: no read,
# threads*: no matmuls), the same GPU work: what the step would take were the
# host's part free, to check what explain says that part costs.
SKIP_HOST = os.environ.get("CW_SKIP_HOST") == "1"
dev = torch.device("cuda")


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(128, 10)

    def forward(self, x):
        return self.head(self.body(x).flatten(1))  # CALL: cudnn_conv


def mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev)


def cudnn(vary):
    torch.backends.cudnn.benchmark = True
    model = ConvNet().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    y = torch.randint(0, 10, (128,), device=dev)

    def step(i):
        # A new H/W each step (as variable-size images without bucketing).
        hw = 64 + 4 * i if vary else 160  # never the same twice: each step is a new shape to tune
        x = torch.randn(128, 3, hw, hw, device=dev)
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)  # CALL: cudnn_forward
        loss.backward()  # CALL: cudnn_backward
        opt.step()
        return loss.item()
    return step


def triton_loop(vary):
    import triton
    import triton.language as tl

    @triton.autotune(configs=[triton.Config({"BLOCK": b}, num_warps=w) for b in (128, 256, 512, 1024) for w in (2, 4, 8)],
                     key=["n"])
    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2.0, mask=m)

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = torch.empty_like(x)
            n = x.numel()
            scale_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)  # CALL: triton_call
            return out

        @staticmethod
        def backward(ctx, g):
            return g * 2.0

    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(i):
        rows = 8192 + i if vary else 8192  # the autotuner's key changes with it
        x = torch.randn(rows, 1024, device=dev)
        opt.zero_grad(set_to_none=True)
        loss = Scale.apply(model(x)).square().mean()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def graphs(recapture):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up on a side stream before capture, as the docs say
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            model(x).square().mean().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    state = {}

    def capture():
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # the grads are allocated in the graph's pool, as the docs do
        with torch.cuda.graph(g):  # CALL: graph_capture_body (a new private memory pool each time)
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
        return g, loss

    def step(i):
        if recapture or not state:
            state["g"], state["loss"] = capture()  # CALL: graph_capture
        state["g"].replay()
        return state["loss"].item()
    return step


def memlimit():
    path = os.environ.get("CW_DATA_FILE", "/var/tmp/cw-mechanisms-2g.bin")
    size, chunk = 2 << 30, 16 << 20
    if not os.path.exists(path) or os.path.getsize(path) != size:
        block = os.urandom(1 << 20)
        with open(path, "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
    fd = os.open(path, os.O_RDONLY)
    raw = bytearray(chunk)
    for off in range(0, size, chunk):  # the epoch's first pass: the whole file read once
        os.preadv(fd, [raw], off)
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    buf = torch.empty(chunk // 4, dtype=torch.float32).pin_memory()
    state = {"x": torch.randn(32768, 1024, device=dev)}

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = model(state["x"]).square().mean()
        loss.backward()
        opt.step()
        # The next batch, read while the GPU runs this step.
        if not SKIP_HOST:
            n = os.preadv(fd, [raw], (i * chunk) % size)  # CALL: memlimit_read
            buf.view(torch.uint8)[:n].copy_(torch.frombuffer(raw, dtype=torch.uint8)[:n])
        x = buf[: 512 * 1024].view(512, 1024).to(dev, non_blocking=True).nan_to_num(0.0, 0.0, 0.0).clamp(-1, 1)
        state["x"] = x.repeat(64, 1)
        return loss.item()
    return step


def threads(fit):
    cpus = len(os.sched_getaffinity(0))
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    w = torch.randn(512, 512)

    def prepare():
        a = torch.randn(512, 512)
        for _ in range(8):
            a = torch.tanh(a @ w)  # CALL: cpu_matmul
        return a

    def train(x):
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    def timed(f, n=5):
        f()
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        return sorted(ts)[n // 2]

    # Sized on the host it runs on, the same for both rows: the GPU's step
    # lasts twice the preparation on as many threads as CPUs (plus its
    # launches), so it hides the preparation when the threads fit; 8 x the
    # CPUs' threads take ~2.5x as long (H200, 16 CPUs), longer than the step.
    torch.set_num_threads(cpus)
    host = timed(prepare)
    probe = torch.randn(16384, 1024, device=dev)
    per_row = timed(lambda: train(probe)) / 16384
    rows = int(os.environ.get("CW_ROWS", "0")) or min(131072, max(4096, int((2 * host + 0.003) / per_row) // 512 * 512))
    torch.set_num_threads(cpus if fit else 8 * cpus)  # CALL: set_threads
    print(f"threads: prepare {host * 1e3:.1f} ms on {cpus} threads, {rows} rows", file=sys.stderr)
    state = {"x": torch.randn(rows, 1024, device=dev)}

    def step(i):
        loss = train(state["x"])
        # The next batch, prepared on the CPU while the GPU runs this step.
        t0 = time.perf_counter()
        a = w if SKIP_HOST else prepare()
        PREP.append(time.perf_counter() - t0)
        state["x"] = a.to(dev, non_blocking=True).repeat(rows // 512, 2)
        return loss.item()
    return step


steps = {"cudnn_autotune": lambda: cudnn(True), "cudnn_fixed": lambda: cudnn(False),
         "triton_autotune": lambda: triton_loop(True), "triton_fixed": lambda: triton_loop(False),
         "graph_recapture": lambda: graphs(True), "graph_once": lambda: graphs(False),
         "memlimit": memlimit, "memlimit_room": memlimit,  # the cgroup differs (mechanisms.sh)
         "threads": lambda: threads(False), "threads_fit": lambda: threads(True)}[MODE]()
times = []
# The threads rows' preparation, each step (printed as prepare_ms; with
# CW_ROWS fixing their GPU batch, runs with and without tracing compare).
PREP = []
steps(0)
end = time.perf_counter() + SECONDS
while time.perf_counter() < end or len(times) < 5:
    t = time.perf_counter()
    steps(len(times) + 1)
    times.append(time.perf_counter() - t)
after = sorted(times[len(times) // 5:])
prep = sorted(PREP[len(PREP) // 5:])
print(f"{MODE} steps={len(times) + 1} step_ms={after[len(after) // 2] * 1e3:.1f}" +
      (f" prepare_ms={prep[len(prep) // 2] * 1e3:.2f}" if prep else ""), flush=True)
