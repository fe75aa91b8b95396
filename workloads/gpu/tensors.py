"""PyTorch loops for checking causeway's memory by tensor against PyTorch's own
record (workloads/gpu/compare_tensors.py; the table is in docs/memory.md).

usage: tensors.py MODE SECONDS [SNAPSHOT.json]
  train  a 6-layer MLP trained with Adam: weights, optimizer state, gradients
         (made on the autograd thread: no Python line) and activations
  leak   the same kind of loop that also keeps one 64 MiB tensor per step in
         a list (about 2 GiB/s)
With SNAPSHOT.json, PyTorch records its allocator's history from the start and,
half way through, takes torch.cuda.memory._snapshot() between two steps: the
bytes its live tensors hold by the line of this file that made them (the
innermost frame in this file), with the wall-clock time it was taken, go to
SNAPSHOT.json; the loop then pauses 0.3 s so that nothing changes around that
time. Lines are found by their `# CALL:` markers.
"""
import json
import os
import sys
import time

import torch

mode, secs = sys.argv[1], float(sys.argv[2])
snapshot_out = sys.argv[3] if len(sys.argv) > 3 else None
dev = torch.device("cuda")
MiB = 1 << 20
here = os.path.abspath(__file__)

if snapshot_out:
    torch.cuda.memory._record_memory_history(max_entries=1000000)
torch.empty(1, device=dev)  # CALL: warm
time.sleep(0.3)


def model(width, depth):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers).to(dev)  # CALL: weights


def trainer(width, depth, batch):
    net = model(width, depth)
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    x = torch.randn(batch, width, device=dev)  # CALL: batch

    def step():
        loss = net(x).square().mean()  # CALL: forward
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()  # CALL: opt-step
    return step


def snapshot():
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    t = time.time_ns()
    by_line = {}
    for seg in snap["segments"]:
        for b in seg["blocks"]:
            if b["state"] != "active_allocated":
                continue
            line = None
            for f in b.get("frames", []):
                if os.path.abspath(f.get("filename", "")) == here:
                    line = f["line"]
                    break
            key = str(line) if line is not None else "no line"
            e = by_line.setdefault(key, {"bytes": 0, "tensors": 0})
            e["bytes"] += b.get("requested_size", b["size"])
            e["tensors"] += 1
    json.dump({"pid": os.getpid(), "wall_ns": t, "file": here, "by_line": by_line}, open(snapshot_out, "w"))
    time.sleep(0.3)


def run(step, per_step_sleep=0.0):
    end = time.time() + secs
    half = time.time() + secs / 2
    n, snapped = 0, False
    while time.time() < end:
        step()
        n += 1
        if per_step_sleep:
            time.sleep(per_step_sleep)
        if snapshot_out and not snapped and time.time() >= half:
            snapshot()
            snapped = True
    torch.cuda.synchronize()
    print(f"{mode}: {n} steps", flush=True)


if mode == "train":
    run(trainer(4096, 6, 512))
elif mode == "leak":
    train_step = trainer(2048, 4, 256)
    keep = []

    def leak_step():
        keep.append(torch.empty(64 * MiB, dtype=torch.uint8, device=dev))  # CALL: keep
        train_step()
    run(leak_step, per_step_sleep=0.03)
else:
    sys.exit(f"unknown mode {mode}")
