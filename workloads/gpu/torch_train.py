"""A small real training loop for measuring causeway's overhead on a GPU host
and checking what it records (docs/performance.md, docs/gpu-validation.md).
usage: python3 torch_train.py [STEPS] [MODEL] [STEP_LOG]   MODEL: transformer | elementwise | decode
decode: one token at a time through a GPT-2-small-sized model (12 layers, d=768,
  12 heads) attending to a fixed 256-token KV cache, the next token read back
  with .item(): launch-bound, the same work every token (a steady workload).
Prints one line: "<model> steps=<n> step_ms=<mean after warm-up>". With STEP_LOG,
also writes "<CLOCK_REALTIME s at the step's end> <step ms> <profiled 0|1>" per
step there (bench/gpu_overhead.sh compares steps inside and outside trace
windows). CW_PROFILE_WINDOWS=S: torch.profiler (CPU + CUDA activities) runs in
every other S-second window of the loop, for comparing with it."""
import os
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


class DecodeLayer(nn.Module):
    def __init__(self, d, heads, ctx):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.k = nn.Parameter(torch.randn(1, heads, ctx, self.dh), requires_grad=False)
        self.v = nn.Parameter(torch.randn(1, heads, ctx, self.dh), requires_grad=False)

    def forward(self, x):  # x: (1, 1, d)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q = q.view(1, 1, self.h, self.dh).transpose(1, 2)
        k = torch.cat([self.k, k.view(1, 1, self.h, self.dh).transpose(1, 2)], dim=2)
        v = torch.cat([self.v, v.view(1, 1, self.h, self.dh).transpose(1, 2)], dim=2)
        a = nn.functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(a.transpose(1, 2).reshape(1, 1, -1))
        return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))


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
    elif kind == "decode":
        d, vocab = 768, 50257
        emb = nn.Embedding(vocab, d).to(dev)
        layers = nn.Sequential(*[DecodeLayer(d, 12, 256) for _ in range(12)]).to(dev).eval()
        ln, head = nn.LayerNorm(d).to(dev), nn.Linear(d, vocab, bias=False).to(dev)
        token = [0]

        @torch.no_grad()
        def step():
            x = emb(torch.tensor([[token[0] % vocab]], device=dev))
            token[0] = int(head(ln(layers(x))).argmax())  # .item(): the next token back on the host
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
    prof_win = float(os.environ.get("CW_PROFILE_WINDOWS", "0"))
    prof, prof_next = None, time.time() + prof_win
    t0 = time.perf_counter()
    last = t0
    for _ in range(steps):
        if prof_win and time.time() >= prof_next:
            prof_next += prof_win
            if prof is None:
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                          torch.profiler.ProfilerActivity.CUDA])
                prof.start()
            else:
                prof.stop()
                prof = None
            last = time.perf_counter()  # the start/stop itself is not a step
        step()
        # a host copy each step, as a loss.item() would do
        torch.cuda.synchronize()
        if log:
            now = time.perf_counter()
            log.write(f"{time.time():.6f} {(now - last) * 1e3:.4f} {int(prof is not None)}\n")
            last = now
    if log:
        log.close()
    dt = (time.perf_counter() - t0) / steps * 1e3
    print(f"{kind} steps={steps} step_ms={dt:.3f}", flush=True)


if __name__ == "__main__":
    main()
