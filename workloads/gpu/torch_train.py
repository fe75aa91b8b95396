"""A small real training loop for measuring causeway's overhead on a GPU host
and checking what it records (docs/performance.md, docs/gpu-validation.md).
usage: python3 torch_train.py [STEPS] [MODEL] [STEP_LOG]   MODEL: transformer | elementwise
Prints one line: "<model> steps=<n> step_ms=<mean after warm-up>". With STEP_LOG,
also writes "<CLOCK_REALTIME s at the step's end> <step ms>" per step there
(bench/gpu_step_windows.sh compares steps inside and outside trace windows)."""
import sys
import time

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 8, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1 = nn.LayerNorm(d)
        self.n2 = nn.LayerNorm(d)

    def forward(self, x):
        a, _ = self.attn(x, x, x, need_weights=False)
        x = self.n1(x + a)
        return self.n2(x + self.ff(x))


def transformer_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = nn.functional.mse_loss(out, y)
    loss.backward()
    opt.step()
    return loss


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    kind = sys.argv[2] if len(sys.argv) > 2 else "transformer"
    torch.manual_seed(0)
    dev = "cuda"
    if kind == "transformer":
        model = nn.Sequential(*[Block(512) for _ in range(4)]).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(16, 256, 512, device=dev)
        y = torch.randn(16, 256, 512, device=dev)
        step = lambda: transformer_step(model, opt, x, y)
    else:
        a = torch.randn(1024, device=dev)
        def step():
            b = a
            for _ in range(100):
                b = b * 1.0001 + 0.5
            return b
    warm = min(30, steps // 5)
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    log = open(sys.argv[3], "w", buffering=1 << 16) if len(sys.argv) > 3 else None
    t0 = time.perf_counter()
    last = t0
    for _ in range(steps):
        step()
        # a host copy each step, as a loss.item() would do
        torch.cuda.synchronize()
        if log:
            now = time.perf_counter()
            log.write(f"{time.time():.6f} {(now - last) * 1e3:.4f}\n")
            last = now
    if log:
        log.close()
    dt = (time.perf_counter() - t0) / steps * 1e3
    print(f"{kind} steps={steps} step_ms={dt:.3f}", flush=True)


if __name__ == "__main__":
    main()
