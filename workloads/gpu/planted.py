"""PyTorch loops on a real GPU, each with one planted cause, for checking that
`causeway explain` names it first with the right Python line
(workloads/gpu/validate.sh runs them all under `causeway trace`; the table is
in docs/explain.md). Tests and the summary find the lines by the `# CALL:`
markers, not by number.

usage: planted.py MODE [SECONDS]
MODE: clean contention pageable churn sync-storm launch-bound input-bound
      mmap-io graph-recapture shared host-bound leak oom oob
      torch-cupy-crash fault-mid churn-vary gil lock pinning
      contention-backward item-loop
(static-loop is workloads/gpu/static_loop.cu: a CUDA program, not Python)
"""
import ctypes
import hashlib
import json
import os
import random
import sys
import threading
import time

import torch

mode = sys.argv[1]
secs = float(sys.argv[2]) if len(sys.argv) > 2 else 8.0
dev = torch.device("cuda")
MiB = 1 << 20
libc = ctypes.CDLL(None)


def name_thread(name):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME


def run_for(step, seconds=None):
    end = time.time() + (seconds or secs)
    n = 0
    while time.time() < end:
        step(n)
        n += 1
    torch.cuda.synchronize()
    print(f"{mode}: {n} steps", flush=True)


def matmul_loop(size=4096, per_step=8, seconds=None):
    a = torch.randn(size, size, device=dev)
    w = torch.randn(size, size, device=dev) / size ** 0.5

    def step(i):
        x = a
        for _ in range(per_step):
            x = torch.tanh(x @ w)
        x.sum().item()  # CALL: clean

    run_for(step, seconds)


def clean():
    matmul_loop()


def spin():
    name_thread("cw_burner")
    # On the trainer's CPU: a forked child keeps its affinity.
    while True:
        pass


def contention():
    # The trainer and four CPU burners share one CPU, the third it may use.
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[2:3]))
    burners = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            spin()
        burners.append(pid)
    x = torch.randn(1024, 1024, device=dev)

    def step(i):
        y = x
        for _ in range(50):
            y = torch.relu(y @ x)
        torch.cuda.synchronize()  # CALL: contention

    try:
        run_for(step)
    finally:
        for pid in burners:
            os.kill(pid, 9)


def pageable():
    host = torch.randn(256 * MiB // 4)  # pageable host memory
    d = torch.empty_like(host, device=dev)
    w = torch.randn(1024, 1024, device=dev)

    def step(i):
        d.copy_(host)  # CALL: pageable
        (w @ w).sum().item()

    run_for(step)


def churn():
    sizes = [64, 96, 128, 192, 256, 384, 512]

    def step(i):
        ts = [torch.empty(s * MiB, dtype=torch.uint8, device=dev) for s in sizes[i % 3:]]
        for t in ts:
            t.fill_(1)
        del ts
        torch.cuda.empty_cache()  # CALL: churn

    run_for(step)


def sync_storm():
    x = torch.randn(1024, device=dev)

    def step(i):
        total = 0.0
        for k in range(300):
            total += (x * k).sum().item()  # CALL: sync-storm

    run_for(step)


def launch_bound():
    x = torch.randn(256, device=dev)

    def step(i):
        y = x
        for _ in range(400):
            y = y * 1.0001 + 0.0001  # CALL: launch-bound
        torch.cuda.synchronize()

    run_for(step)


class Decoded(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        a = torch.rand(256, 256)
        for _ in range(4):
            a = torch.fft.fft2(a).real  # CPU-heavy "decoding"
        return a


def one_thread(_):
    torch.set_num_threads(1)


def input_bound():
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:2]))  # the loader workers inherit 2 CPUs
    loader = torch.utils.data.DataLoader(Decoded(), batch_size=32, num_workers=8, worker_init_fn=one_thread)
    w = torch.randn(256, 256, device=dev)
    end = time.time() + secs
    n = 0
    for batch in loader:
        b = batch.to(dev)  # CALL: input-bound
        (b @ w).sum().item()
        n += 1
        if time.time() > end:
            break
    print(f"{mode}: {n} steps", flush=True)


def mmap_io():
    path = "/var/tmp/cw_planted.bin"
    size = 2 << 30
    if not os.path.exists(path) or os.path.getsize(path) != size:
        with open(path, "wb") as f:
            chunk = os.urandom(64 * MiB)
            for _ in range(size // len(chunk)):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    data = torch.from_file(path, shared=True, size=size, dtype=torch.uint8)  # mmap
    d = torch.empty(64 * MiB, dtype=torch.uint8, device=dev)
    chunks = size // (64 * MiB)

    def step(i):
        if i % chunks == 0:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("3")
        off = (i % chunks) * 64 * MiB
        d.copy_(data[off:off + 64 * MiB])  # CALL: mmap-io

    run_for(step)


def graph_recapture():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).to(dev)
    side = torch.cuda.Stream()

    def step(i):
        x = torch.randn(16 + (i % 7) * 8, 1024, device=dev)  # the shape changes every step
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            model(x)  # warm-up on a side stream, as PyTorch's docs ask
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # CALL: graph-recapture
            model(x)
        g.replay()
        torch.cuda.synchronize()

    run_for(step)


def shared():
    # A second process runs on the same GPU for the last two thirds. It needs
    # seconds to import torch and start CUDA: both go by one clock, so the
    # overlap is two thirds of SECONDS whatever the start-up costs.
    if len(sys.argv) > 4 and sys.argv[3] == "peer":
        start = float(sys.argv[4]) + secs / 3
        torch.zeros(1, device=dev)  # CUDA's start-up before the clock starts
        time.sleep(max(0.0, start - time.time()))
        matmul_loop(size=4096, per_step=8, seconds=secs * 2 / 3)
        return
    start = time.time() + 6.0  # after the peer's start-up
    torch.zeros(1, device=dev)
    pid = os.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, __file__, "shared", str(secs), "peer", str(start)])
    time.sleep(max(0.0, start - time.time()))
    matmul_loop(size=4096, per_step=8)
    os.waitpid(pid, 0)


def host_bound():
    x = torch.randn(2048, 2048, device=dev)

    def step(i):
        batch = [float(j) * 0.5 for j in range(400000)]  # CALL: host-bound (host-side preparation in Python)
        (x @ x).sum().item()
        del batch

    run_for(step)


def leak():
    kept = []

    def step(i):
        t = torch.randn(16 * MiB, device=dev)  # CALL: leak (64 MiB a step, kept forever)
        kept.append(t)
        (t * 2).sum().item()
        time.sleep(0.02)

    run_for(step)


def oom():
    weights = [torch.empty(10 << 30, dtype=torch.uint8, device=dev) for _ in range(6)]  # CALL: oom-hold
    time.sleep(0.5)
    for _ in range(3):
        try:
            x = torch.empty(30 << 30, dtype=torch.uint8, device=dev)  # CALL: oom
            del x
        except torch.OutOfMemoryError as e:
            print("out of memory:", str(e).splitlines()[0], flush=True)
        time.sleep(0.2)
    del weights


def oob():
    import cupy as cp

    kernel = cp.RawKernel(r'''
extern "C" __global__ void oob_write(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i + (1 << 30)] = 1.0f;  // 4 GiB past a 4 KiB buffer
}''', "oob_write")
    good = cp.RawKernel(r'''
extern "C" __global__ void scale(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= 2.0f;
}''', "scale")
    buf = cp.zeros(1024, dtype=cp.float32)
    for _ in range(50):
        good((4,), (256,), (buf, cp.int32(1024)))
        cp.cuda.runtime.deviceSynchronize()
    kernel((4,), (256,), (buf, cp.int32(1024)))  # CALL: oob
    try:
        cp.cuda.runtime.deviceSynchronize()  # CALL: oob-sync
    except Exception as e:
        print("after the launch:", e, flush=True)
    for _ in range(3):
        try:
            cp.zeros(1024, dtype=cp.float32)
            cp.cuda.runtime.deviceSynchronize()
        except Exception:
            pass


def train_model(width=2048):
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, width)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(256, width, device=dev)

    def step(i):
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()  # CALL: contention-backward (where its loop waits for the autograd thread)
        opt.step()
        return loss

    return step


def torch_cupy_crash():
    # A PyTorch loop that also uses CuPy: its custom kernel writes out of
    # bounds after a few seconds; CuPy carries its CUDA runtime linked in.
    import cupy as cp

    step = train_model()
    oob = cp.RawKernel(r'''
extern "C" __global__ void oob_scatter(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  p[i * 4096 + (1 << 28)] = 1.0f;  // far past a 4 KiB buffer
}''', "oob_scatter")
    buf = cp.zeros(1024, dtype=cp.float32)
    end = time.time() + secs / 2
    n = 0
    while time.time() < end:
        step(n).item()
        n += 1
    oob((64,), (256,), (buf, cp.int32(1024)))  # CALL: torch-cupy-crash
    cp.cuda.runtime.deviceSynchronize()  # raises: the process dies here
    print("not reached", flush=True)


def fault_mid():
    # Training runs for a while; then an evaluation branch, run for the first
    # time, indexes a table past its end (a device-side assert).
    step = train_model()
    table = torch.randn(1000, 64, device=dev)
    end = time.time() + secs / 2
    n = 0
    while time.time() < end:
        step(n).item()
        n += 1
    bad = torch.tensor([3, 999, 4096], device=dev)
    picked = table.index_select(0, bad)  # CALL: fault-mid
    print("eval:", picked.sum().item(), flush=True)


def churn_vary():
    # Each step allocates a different number of buffers of different sizes,
    # and empties the allocator's cache: no two steps make the same calls.
    rng = random.Random(7)

    def step(i):
        sizes = [rng.choice([48, 80, 112, 176, 272]) * MiB for _ in range(rng.randint(2, 6))]
        ts = [torch.empty(n, dtype=torch.uint8, device=dev) for n in sizes]
        for t in ts:
            t.mul_(2)
        del ts
        torch.cuda.empty_cache()  # CALL: churn-vary

    run_for(step)


def gil():
    # A metrics thread serialises a large object each time it reports: pure
    # Python and C work that holds the interpreter lock.
    name_thread("trainer")
    stats = {f"k{i}": [random.random() for _ in range(20)] for i in range(30000)}
    stop = []

    def metrics():
        name_thread("metrics")
        while not stop:
            json.dumps(stats)  # CALL: gil

    t = threading.Thread(target=metrics)
    t.start()
    try:
        matmul_loop(size=1024, per_step=4)
    finally:
        stop.append(1)
        t.join()


def lock():
    # A checkpoint thread checksums shards under a lock the training loop
    # takes each step (hashlib releases the GIL: this is a lock wait).
    shard = bytes(96 << 20)
    guard = threading.Lock()
    stop = []

    def checkpointer():
        name_thread("ckpt")
        while not stop:
            with guard:
                hashlib.sha256(shard).digest()  # CALL: lock
            time.sleep(0.001)

    t = threading.Thread(target=checkpointer)
    t.start()
    a = torch.randn(1024, 1024, device=dev)

    def step(i):
        with guard:
            y = a @ a
        y.sum().item()

    try:
        run_for(step)
    finally:
        stop.append(1)
        t.join()


def pinning():
    # A staging buffer page-locked every step and given back.
    cudart = torch.cuda.cudart()
    host = torch.empty(256 * MiB, dtype=torch.uint8)
    d = torch.empty(256 * MiB, dtype=torch.uint8, device=dev)

    def step(i):
        cudart.cudaHostRegister(host.data_ptr(), host.numel(), 0)  # CALL: pinning
        d.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        cudart.cudaHostUnregister(host.data_ptr())

    run_for(step)


def contention_backward():
    # The training loop and its autograd thread share CPUs with four burners:
    # the main thread waits in backward() for its starved autograd thread.
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[2:4]))
    burners = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            name_thread("cw_burner")
            # On the loop's two CPUs: a forked child keeps its affinity.
            while True:
                pass
        burners.append(pid)
    step = train_model(width=512)

    def loop(i):
        step(i).item()

    try:
        run_for(loop)
    finally:
        for pid in burners:
            os.kill(pid, 9)


def item_loop():
    # A loop that reads a scalar back every iteration, with a few kernels in
    # between: whether launching or syncing looks larger changes run to run.
    x = torch.randn(4096, device=dev)

    def step(i):
        total = 0.0
        for k in range(100):
            y = torch.tanh(x * k) + x
            total += y.mean().item()  # CALL: item-loop

    run_for(step)


{
    "clean": clean, "contention": contention, "pageable": pageable, "churn": churn, "sync-storm": sync_storm,
    "launch-bound": launch_bound, "input-bound": input_bound, "mmap-io": mmap_io,
    "graph-recapture": graph_recapture, "shared": shared, "host-bound": host_bound, "leak": leak, "oom": oom,
    "oob": oob, "torch-cupy-crash": torch_cupy_crash, "fault-mid": fault_mid, "churn-vary": churn_vary,
    "gil": gil, "lock": lock, "pinning": pinning, "contention-backward": contention_backward,
    "item-loop": item_loop,
}[mode]()
