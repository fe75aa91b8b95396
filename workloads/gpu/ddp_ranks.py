"""A data-parallel training job shaped like a real one, for the cross-rank
rows (workloads/gpu/ranks.sh): a 4-layer transformer encoder under DDP (or
FSDP's fully_shard), AdamW, a loss read back every step (the lockstep real
loops keep), one process a GPU, started by torchrun. One cause per MODE, on
the last rank:
  clean     every rank does the same work
  fsdp      the same under fully_shard (FSDP2)
  host      the last rank "augments" its batch in Python for ~30 ms a step
  input     the last rank's DataLoader has 1 worker with a slow decode, the
            others' have 4 (an uneven input pipeline)
  gpushare  another process runs matrix products on the last rank's GPU
  hang      the last rank waits on an Event that is never set before step 40
Each rank logs time.perf_counter() before the step, after backward and after
the optimizer (CLOCK_MONOTONIC: one clock for all processes of the host) to
$STEPS_LOG.<rank>.json, the truth without a tracer.
BATCH (default 64) sets the batch: at 64 an H200's step is launch-limited
(NVML: the GPU busy 46-69%), at 256 it is GPU-bound (a healthy job).
usage: [BATCH=N] torchrun --nproc_per_node 2 ddp_ranks.py MODE [STEPS]
The `# CALL:` lines are where the planted causes are."""
import json
import os
import subprocess
import sys
import threading
import time

import torch
import torch.distributed as dist
import torch.nn as nn

MODE = sys.argv[1]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 150


class Tokens(torch.utils.data.Dataset):
    def __init__(self, slow):
        self.slow = slow

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        end = time.perf_counter() + (0.001 if self.slow else 0.0001)
        n = 0
        while time.perf_counter() < end: n += 1  # CALL: decode
        return torch.randint(0, 1000, (256,))


def augment(x):
    end = time.perf_counter() + 0.030
    n = 0
    while time.perf_counter() < end: n += 1  # CALL: augment
    return x


def neighbour(dev):
    # Another job on the same GPU: matrix products, no end.
    code = ("import torch\n"
            f"a = torch.randn(8192, 8192, device='cuda:{dev}')\n"
            "while True:\n    a = a @ a; a = a / a.norm()\n")
    return subprocess.Popen([sys.executable, "-c", code])


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    last = rank == world - 1
    dev = torch.device("cuda", local)
    torch.backends.cuda.matmul.allow_tf32 = True  # a GPU-bound step of ~25 ms on an H100
    model = nn.Sequential(
        nn.Embedding(1000, 1024),
        nn.TransformerEncoder(nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True), 4),
        nn.Linear(1024, 1000),
    ).to(dev)
    if MODE == "fsdp":
        from torch.distributed.fsdp import fully_shard
        for layer in model[1].layers:
            fully_shard(layer)
        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    slow = MODE == "input" and last
    loader = torch.utils.data.DataLoader(Tokens(slow), batch_size=int(os.environ.get("BATCH", 64)), num_workers=1 if slow else 4,
                                         persistent_workers=True, prefetch_factor=2)
    side = neighbour(local) if MODE == "gpushare" and last else None
    stop = threading.Event()
    log = []
    batches = iter(loader)
    for step in range(STEPS):
        t0 = time.perf_counter()
        x = next(batches).to(dev, non_blocking=True)
        if MODE == "host" and last:
            x = augment(x)
        if MODE == "hang" and last and step == 40:
            stop.wait()  # CALL: hang
        out = model(x)
        loss = nn.functional.cross_entropy(out.view(-1, 1000), x.view(-1))
        loss.backward()
        t1 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()  # CALL: readback
        log.append((t0, t1, time.perf_counter(), value))
    if side:
        side.kill()
    path = os.environ.get("STEPS_LOG")
    if path:
        with open(f"{path}.{rank}.json", "w") as f:
            json.dump(log, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
