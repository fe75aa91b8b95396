"""A prototype of issue 48's max-autotune row, not yet in lib_mechanisms.py
(docs/explain.md, the eleventh session: one new shape costs ~108 s on an
H200, too long for 5 runs in a device call): a distillation step whose
no-grad teacher is compiled with max-autotune and sees a new batch size
every step (vary) or one (fixed, the twin). The student trains eagerly
(forward, backward, AdamW). Run each with its own TORCHINDUCTOR_CACHE_DIR:
a warm cache tunes nothing.
usage: python3 compile_autotune.py vary|fixed STEPS"""
import sys
import time

import torch
import torch.nn as nn

vary, steps = sys.argv[1] == "vary", int(sys.argv[2])
dev = torch.device("cuda")
student = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(dev)
teacher = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 3072), nn.GELU(),
                        nn.Linear(3072, 1024)).to(dev).eval()
fast = torch.compile(teacher, mode="max-autotune-no-cudagraphs", dynamic=False)
opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
t0 = time.perf_counter()
for i in range(steps):
    rows = 1024 + 256 * i if vary else 2048
    x = torch.randn(rows, 1024, device=dev)
    t = time.perf_counter()
    with torch.no_grad():
        target = fast(x)  # CALL: teacher
    loss = (student(x) - target).square().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    loss.item()
    print(f"step {i} rows {rows} {time.perf_counter() - t:.2f} s", file=sys.stderr, flush=True)
print(f"compile_autotune {'vary' if vary else 'fixed'} steps={steps} total_s={time.perf_counter() - t0:.1f}", flush=True)
