"""Programs shaped like real ones, each with at most one planted cause, for
checking that `causeway explain` names the cause first with its line (and
nothing above LOW on the clean twin of each shape). workloads/gpu/validate.sh
runs rows SHAPE:CAUSE under `causeway trace`; summarize.py scores them
against EXPECTED below and the `# CALL: CAUSE` markers (lines are found by
the markers, not by number).

usage: shapes.py SHAPE CAUSE [SECONDS]
SHAPE: train   a 4-layer transformer language model's step (vocabulary 32000,
               d 512, batch 32x256), backward and AdamW, one loss.item() a
               step (the autograd thread is there): the GPU sets the step
       loader  the same step fed token ids by a DataLoader with 4 workers, pinned
       decode  GPT-2-small-sized decode with a static KV cache, replayed as a
               CUDA graph, one token read back a step
       jax     a jitted MLP training step (value_and_grad, SGD), one float()
       compile a torch.compile'd MLP training step
CAUSE: see CAUSES (which shapes each applies to) and EXPECTED.
"""
import ctypes
import hashlib
import json
import os
import random
import sys
import threading
import time

shape = cause = None  # set by main: the functions below read them
secs = 6.0
MiB = 1 << 20

# The chain each cause should give first (None: no chain above LOW), and
# whether the cause has one line (the `# CALL:` marker) to name.
EXPECTED = {
    "clean": (None, False),
    "sleep": ("timer_sleep", True),
    "fsync": ("disk_write", True),
    "cpu-limit": ("cpu_throttled", False),
    "sync": ("sync_bound", True),
    "pageable": ("memcpy_bound", True),
    "churn": ("allocator_churn", True),
    "pinning": ("pinning", True),
    "host-bound": ("host_bound", True),
    "gil": ("gil_contention", True),
    "lock": ("lock_contention", True),
    "contention": ("cpu_contention", False),
    "launch-bound": ("launch_bound", True),
    "mmap-io": ("io_stall", True),
    "leak": ("memory_leak", True),
    "input-bound": ("input_bound", True),
    "recompile": ("compilation", True),
    "graph-recapture": ("graph_recapture", True),
    "hang": ("hung_call", True),
}
CAUSES = {
    "train": "clean sleep fsync cpu-limit sync pageable churn pinning host-bound gil lock contention launch-bound "
             "mmap-io leak hang",
    "loader": "clean input-bound sleep fsync cpu-limit sync pageable churn host-bound gil lock contention mmap-io",
    "decode": "clean sleep sync host-bound contention launch-bound graph-recapture",
    "jax": "clean sync sleep host-bound recompile",
    "compile": "clean recompile",
}
libc = ctypes.CDLL(None)
# Rows run side by side in lanes (workloads/gpu/lanes.sh: a GPU and 16 CPUs
# each) keep their files and cgroups apart, and the burners stay on the
# lane's CPUs: the 3rd and 4th CPU it may use ({2, 3} on a whole machine).
LANE = os.environ.get("CW_LANE", "")
LOOP_CPUS = set(sorted(os.sched_getaffinity(0))[2:4])


def name_thread(name):
    libc.prctl(15, name.encode(), 0, 0, 0)  # PR_SET_NAME


def log(*a):
    print(f"{shape}:{cause}:", *a, flush=True)


# ---- causes that need the process set up before the loop -------------------
def limit_cpu(quota_us=40000, period_us=100000):
    """Move this process into a cgroup with a CPU limit, as a pod's limit
    sets it (cgroup v2 cpu.max, else v1 cpu.cfs_quota_us)."""
    pid = str(os.getpid())
    v2 = "/sys/fs/cgroup/cgroup.controllers"
    if os.path.exists(v2):
        if "cpu" not in open(v2).read().split():
            sys.exit("cpu-limit: the cpu controller is not available here")
        with open("/sys/fs/cgroup/cgroup.subtree_control", "w") as f:
            f.write("+cpu")
        path = "/sys/fs/cgroup/cw_limit" + LANE
        os.makedirs(path, exist_ok=True)
        open(path + "/cpu.max", "w").write(f"{quota_us} {period_us}")
        open(path + "/cgroup.procs", "w").write(pid)
    else:
        path = "/sys/fs/cgroup/cpu/cw_limit" + LANE
        os.makedirs(path, exist_ok=True)
        open(path + "/cpu.cfs_period_us", "w").write(str(period_us))
        open(path + "/cpu.cfs_quota_us", "w").write(str(quota_us))
        open(path + "/cgroup.procs", "w").write(pid)
    log("limited to", quota_us / period_us, "CPU in", path)


def burners(cpus):
    """Four CPU burners (another workload) on the loop's CPUs."""
    pids = []
    for _ in range(4):
        pid = os.fork()
        if pid == 0:
            name_thread("cw_burner")
            os.sched_setaffinity(0, cpus)
            while True:
                pass
        pids.append(pid)
    return pids


def metrics_thread(stop):
    stats = {f"k{i}": [random.random() for _ in range(20)] for i in range(10000)}

    def run():
        name_thread("metrics")
        while not stop:
            json.dumps(stats)  # CALL: gil
            time.sleep(0.005)

    t = threading.Thread(target=run)
    t.start()
    return t


GUARD = threading.Lock()


def checkpoint_thread(stop):
    shard = bytes(96 << 20)

    def run():
        name_thread("ckpt")
        while not stop:
            with GUARD:
                hashlib.sha256(shard).digest()  # CALL: lock
            time.sleep(0.001)

    t = threading.Thread(target=run)
    t.start()
    return t


# ---- per-step causes ---------------------------------------------------------
def pace():
    time.sleep(0.015)  # CALL: sleep


def write_checkpoint(state, path=f"/var/tmp/cw_ckpt{LANE}.pt"):
    import torch
    with open(path, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())  # CALL: fsync


def grad_norms(model):
    return [p.grad.norm().item() for p in model.parameters() if p.grad is not None]  # CALL: sync


def prepare_batch(n=250000):
    ids = [(j * 7919) % 50257 for j in range(n)]  # CALL: host-bound
    return sum(ids)


def tiny_ops(x):
    y = x
    for _ in range(1000):
        y = y * 1.0001 + 0.0001  # CALL: launch-bound
    return y


class Cold:
    """A dataset file read cold each step (page cache dropped every pass)."""

    def __init__(self, chunk=32 * MiB, size=2 << 30):
        self.path, self.chunk, self.size = "/var/tmp/cw_shapes.bin", chunk, size
        if not os.path.exists(self.path) or os.path.getsize(self.path) != size:
            with open(self.path, "wb") as f:
                block = os.urandom(64 * MiB)
                for _ in range(size // len(block)):
                    f.write(block)
                os.fsync(f.fileno())
        self.fd = os.open(self.path, os.O_RDONLY)
        self.n = size // chunk

    def read(self, i):
        if i % self.n == 0:
            open("/proc/sys/vm/drop_caches", "w").write("3")
        return os.pread(self.fd, self.chunk, (i % self.n) * self.chunk)  # CALL: mmap-io


# ---- the PyTorch shapes ------------------------------------------------------
def torch_shapes():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    dev = torch.device("cuda")

    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

        def forward(self, x):
            a, _ = self.attn(x, x, x, need_weights=False)
            x = self.n1(x + a)
            return self.n2(x + self.ff(x))

    VOCAB = 32000

    class Items(torch.utils.data.Dataset):
        """Token ids, as a language model's loader hands them over (cheap:
        four workers keep ahead of the GPU)."""

        def __init__(self, heavy=False, cold=False):
            self.heavy, self.cold = heavy, cold
            self.file = None
            if cold:
                Cold(chunk=2 * MiB)  # the file, written once here, not by every worker

        def __len__(self):
            return 1 << 30

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            ids = torch.randint(0, VOCAB, (257,), generator=g)
            if self.heavy:
                x = torch.randn(256, 512, generator=g)
                for _ in range(6):
                    x = torch.fft.fft2(x).real  # CALL: input-bound
                ids[:256] = x.argmax(-1)
            if self.cold:
                if self.file is None:
                    self.file = Cold(chunk=2 * MiB)
                ids[0] = self.file.read(i)[0]
            return ids[:256], ids[1:]

    def one_thread(_):
        torch.set_num_threads(1)

    class LM(nn.Module):
        """A 4-layer transformer language model: the GPU sets its step."""

        def __init__(self, d=512, layers=4):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, d)
            self.blocks = nn.Sequential(*[Block(d) for _ in range(layers)])
            self.head = nn.Linear(d, VOCAB)

        def forward(self, ids):
            return self.head(self.blocks(self.emb(ids)))

    model = LM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb).flatten(0, 1), yb.flatten())
        loss.backward()
        opt.step()
        return loss

    stop, threads, kids = [], [], []
    extra = {}
    if cause == "gil":
        threads.append(metrics_thread(stop))
    if cause == "lock":
        threads.append(checkpoint_thread(stop))
    if cause == "contention":
        os.sched_setaffinity(0, LOOP_CPUS)
        kids += burners(LOOP_CPUS)
    if cause == "pageable":
        extra["host"] = torch.randn(64 * MiB // 4)  # pageable host memory
        extra["dev"] = torch.empty_like(extra["host"], device=dev)
    if cause == "pinning":
        extra["host"] = torch.empty(64 * MiB, dtype=torch.uint8)
        extra["dev"] = torch.empty(64 * MiB, dtype=torch.uint8, device=dev)
    if cause == "mmap-io" and shape == "train":
        extra["cold"] = Cold()
    if cause == "launch-bound":
        extra["small"] = torch.randn(256, device=dev)
    kept = []

    def around(i, loss):
        """What the planted cause does each step, after the step's work."""
        if cause == "sleep":
            pace()
        elif cause == "fsync":
            write_checkpoint(model.state_dict())
        elif cause == "sync":
            grad_norms(model)
        elif cause == "pageable":
            extra["dev"].copy_(extra["host"])  # CALL: pageable
        elif cause == "churn":
            torch.cuda.empty_cache()  # CALL: churn
        elif cause == "pinning":
            cudart = torch.cuda.cudart()
            cudart.cudaHostRegister(extra["host"].data_ptr(), extra["host"].numel(), 0)  # CALL: pinning
            extra["dev"].copy_(extra["host"], non_blocking=True)
            torch.cuda.current_stream().synchronize()
            cudart.cudaHostUnregister(extra["host"].data_ptr())  # CALL: pinning (its other half)
        elif cause == "host-bound":
            # The train step on an H100 (40 ms) hid the 250k list under its
            # GPU work (41-45 ms with it): three times that outlasts it.
            prepare_batch(750000 if shape == "train" else 250000)
        elif cause == "launch-bound":
            tiny_ops(extra["small"])
        elif cause == "mmap-io" and shape == "train":
            x = torch.frombuffer(bytearray(extra["cold"].read(i)), dtype=torch.uint8)
            x.to(dev, non_blocking=False)
        elif cause == "leak":
            kept.append(torch.empty(48 * MiB, dtype=torch.uint8, device=dev).fill_(1))  # CALL: leak
        elif cause == "lock":
            with GUARD:
                pass
        elif cause == "hang":
            if i == 20:
                hang_kernel()

    if cause == "cpu-limit":
        limit_cpu()
    n = 0
    try:
        if shape == "train":
            x = torch.randint(0, VOCAB, (32, 256), device=dev)
            y = torch.randint(0, VOCAB, (32, 256), device=dev)
            end = time.time() + secs
            while time.time() < end:
                loss = step(x, y)
                around(n, loss)
                loss.item()  # the step's one read-back, as a logging loop does
                n += 1
        else:
            loader = torch.utils.data.DataLoader(
                Items(heavy=cause == "input-bound", cold=cause == "mmap-io"), batch_size=32,
                num_workers=2 if cause == "input-bound" else 4, pin_memory=True, worker_init_fn=one_thread,
                prefetch_factor=2, persistent_workers=True)
            end = time.time() + secs
            for xb, yb in loader:
                loss = step(xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True))
                around(n, loss)
                loss.item()
                n += 1
                if time.time() >= end:
                    break
        torch.cuda.synchronize()
    finally:
        stop.append(1)
        for t in threads:
            t.join()
        for pid in kids:
            os.kill(pid, 9)
    log(n, "steps")


def hang_kernel():
    """A kernel that does not end while the trace runs (it spins on the GPU's
    clock for 60 s, so the GPU is never left with it), then a sync."""
    import cupy as cp
    import torch
    spin = cp.RawKernel(r'''
extern "C" __global__ void spin_forever(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
}''', "spin_forever")
    spin((1,), (1,), (cp.int64(60 * 2_000_000_000),))
    log("spinning kernel launched; waiting for it")
    torch.cuda.synchronize()  # CALL: hang
    cp.cuda.runtime.deviceSynchronize()


def decode_shape():
    import torch
    import torch.nn as nn
    dev = torch.device("cuda")
    torch.manual_seed(0)
    d, heads, ctx, vocab, layers_n = 768, 12, 256, 50257, 12

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.h, self.dh = heads, d // heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
            self.register_buffer("k", torch.randn(8, heads, ctx, self.dh))
            self.register_buffer("v", torch.randn(8, heads, ctx, self.dh))

        def forward(self, x):  # x: (8, 1, d); the KV cache is static
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q = q.view(8, 1, self.h, self.dh).transpose(1, 2)
            a = nn.functional.scaled_dot_product_attention(q, self.k, self.v)
            x = x + self.proj(a.transpose(1, 2).reshape(8, 1, -1))
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    emb = nn.Embedding(vocab, d).to(dev)
    body = nn.Sequential(*[Layer() for _ in range(layers_n)]).to(dev).eval()
    ln, head = nn.LayerNorm(d).to(dev), nn.Linear(d, vocab, bias=False).to(dev)
    tokens = torch.zeros(8, 1, dtype=torch.long, device=dev)
    out = torch.zeros(8, dtype=torch.long, device=dev)

    @torch.no_grad()
    def forward():
        out.copy_(head(ln(body(emb(tokens)))).argmax(-1)[:, 0])  # CALL: decode:launch-bound (eager: every kernel launched one by one)

    eager = cause == "launch-bound"
    graph = None
    if not eager:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                forward()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            forward()
    stop, kids = [], []
    if cause == "contention":
        os.sched_setaffinity(0, LOOP_CPUS)
        kids += burners(LOOP_CPUS)
    n = 0
    end = time.time() + secs
    try:
        while time.time() < end:
            if eager:
                forward()
            elif cause == "graph-recapture":
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):  # CALL: graph-recapture
                    forward()
                graph.replay()
            else:
                graph.replay()
            if cause == "sync":
                probs = [out[j % 8].item() for j in range(32)]  # CALL: decode:sync
            token = int(out[0])  # the next token back on the host
            tokens.fill_(token % vocab)
            if cause == "sleep":
                pace()
            elif cause == "host-bound":
                prepare_batch(60000)
            n += 1
        torch.cuda.synchronize()
    finally:
        for pid in kids:
            os.kill(pid, 9)
    log(n, "tokens")


def jax_shape():
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)
    sizes = [1024, 4096, 4096, 1024]
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        key, k = jax.random.split(key)
        params.append((jax.random.normal(k, (a, b)) / a ** 0.5, jnp.zeros(b)))

    def loss_fn(p, x, y):
        for w, b in p[:-1]:
            x = jax.nn.gelu(x @ w + b)
        w, b = p[-1]
        return jnp.mean((x @ w + b - y) ** 2)

    @jax.jit
    def train_step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g), loss

    @jax.jit
    def scale(x, k):
        return x * k

    x = jax.random.normal(key, (8192, 1024))
    y = jnp.zeros((8192, 1024))
    params, loss = train_step(params, x, y)
    float(loss)
    n = 0
    end = time.time() + secs
    while time.time() < end:
        if cause == "recompile":
            rows = 4096 + (n % 64) * 32
            params, loss = train_step(params, x[:rows], y[:rows])  # CALL: jax:recompile
        else:
            params, loss = train_step(params, x, y)
        if cause == "sync":
            total = 0.0
            for k in range(60):
                total += float(scale(x, k)[0, 0])  # CALL: jax:sync
        elif cause == "sleep":
            pace()
        elif cause == "host-bound":
            prepare_batch()
        float(loss)
        n += 1
    log(n, "steps")


def compile_shape():
    import torch
    import torch._dynamo
    import torch.nn as nn

    dev = torch.device("cuda")
    if cause == "recompile":
        # Every new shape compiles anew, as with dynamic=False and a large
        # cache: what a user gets with shapes that change every step.
        torch._dynamo.config.automatic_dynamic_shapes = False
        torch._dynamo.config.cache_size_limit = 1000
        torch._dynamo.config.recompile_limit = 1000
    model = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 1024)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    cmodel = torch.compile(model)

    def step(x):
        opt.zero_grad(set_to_none=True)
        loss = cmodel(x).square().mean()  # CALL: recompile (a new shape compiles anew)
        loss.backward()
        opt.step()
        return loss

    # The clean twin's step is GPU work, not dispatch: a large batch.
    x = torch.randn(512 if cause == "recompile" else 32768, 1024, device=dev)
    step(x).item()  # the first compile: start-up
    n = 0
    end = time.time() + secs
    while time.time() < end:
        if cause == "recompile":
            loss = step(x[: 64 + n * 8])
        else:
            loss = step(x)
        loss.item()
        n += 1
    log(n, "steps")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    shape, cause = sys.argv[1], sys.argv[2]
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else secs
    if cause not in CAUSES.get(shape, "").split():
        sys.exit(f"shapes.py: no cause {cause!r} for shape {shape!r} (see CAUSES)")
    if shape in ("train", "loader"):
        torch_shapes()
    elif shape == "decode":
        decode_shape()
    elif shape == "jax":
        jax_shape()
    elif shape == "compile":
        compile_shape()
