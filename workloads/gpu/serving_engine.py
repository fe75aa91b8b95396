"""The GPU engine of workloads/serving/server.py --gpu: the same
continuous-batching loop and protocol as workloads/serving/engine.py (its
Engine class: modes, KV growth, the front end's socket), over a small real
decoder in PyTorch instead of the stand-in driver.

The model: CW_SERVING_LAYERS (16) pre-norm transformer layers of width
CW_SERVING_DMODEL (2048), 16 heads, a 4x MLP, bf16, random weights (0.8B
parameters: a 16k-token prefill is ~0.1 s of an H100, a decode step a few
ms, mostly launching), the engine's vocabulary (engine.VOCAB). Each request
has its own KV cache, one K and one V tensor a layer, [heads, capacity,
head_dim], grown by the engine's KV blocks (a bigger tensor allocated and
the old one copied in, as the sequence reaches its capacity). Prefill runs
one request at a time over its whole prompt (causal attention), ahead of the
batch's decode; decode runs the batch's projections and MLPs together and
each request's attention over its own cache. Greedy sampling is an argmax on
the GPU (its .tolist() is the step's sync); in --mode sampling the logits
are copied to the host and sampled in Python (engine.sample_on_host).
Run by server.py, never alone: it needs the front end's socket (--fd).
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serving"))
import engine  # noqa: E402

LAYERS = int(os.environ.get("CW_SERVING_LAYERS", "16"))
D_MODEL = int(os.environ.get("CW_SERVING_DMODEL", "2048"))
HEADS = 16
DEVICE = os.environ.get("CW_SERVING_DEVICE", "cuda")  # cpu: to check the engine where no GPU is


def attention(q, k, v, causal=False):
    """[heads, len, head_dim] each. Given a batch dimension: the fused
    kernels (flash, memory-efficient) take 4-D inputs only, and the math
    fallback would hold a 16k x 16k score matrix per head for a long prompt."""
    return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=causal)[0]


class Layer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def mlp(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TorchBackend:
    def __init__(self, kv_block_tokens):
        self.dev = torch.device(DEVICE)
        self.block_tokens = kv_block_tokens
        self.dh = D_MODEL // HEADS
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(engine.VOCAB, D_MODEL)
        self.layers = torch.nn.ModuleList([Layer(D_MODEL) for _ in range(LAYERS)])
        self.norm = torch.nn.LayerNorm(D_MODEL)
        self.head = torch.nn.Linear(D_MODEL, engine.VOCAB, bias=False)
        for m in (self.embed, self.layers, self.norm, self.head):
            m.to(self.dev, torch.bfloat16)

    def heads(self, t):  # [T, d] -> [H, T, dh]
        return t.view(t.shape[0], HEADS, self.dh).transpose(0, 1)

    def logits_out(self, x, on_host):
        logits = self.head(self.norm(x))
        if on_host:
            return logits.float().cpu().tolist()
        return logits.argmax(dim=-1).tolist()

    @torch.inference_mode()
    def prefill(self, reqs, on_host):
        last = []
        for r in reqs:
            ids = torch.tensor(r.prompt_ids, device=self.dev)
            x = self.embed(ids)
            n = ids.shape[0]
            for layer, (kc, vc) in zip(self.layers, r.state["kv"]):
                q, k, v = layer.qkv(layer.ln1(x)).chunk(3, dim=-1)
                kc[:, :n], vc[:, :n] = self.heads(k), self.heads(v)
                a = attention(self.heads(q), kc[:, :n], vc[:, :n], causal=True)
                x = layer.mlp(x + layer.proj(a.transpose(0, 1).reshape(n, D_MODEL)))
            r.state["len"] = n
            last.append(x[-1])
        return self.logits_out(torch.stack(last), on_host)

    @torch.inference_mode()
    def decode(self, reqs, on_host):
        ids = torch.tensor([r.output[-1] for r in reqs], device=self.dev)
        x = self.embed(ids)
        for li, layer in enumerate(self.layers):
            q, k, v = layer.qkv(layer.ln1(x)).view(len(reqs), 3, HEADS, self.dh).unbind(1)
            outs = []
            for i, r in enumerate(reqs):
                kc, vc = r.state["kv"][li]
                n = r.state["len"]
                kc[:, n], vc[:, n] = k[i], v[i]
                outs.append(attention(q[i][:, None], kc[:, :n + 1], vc[:, :n + 1]))
            a = torch.stack(outs).reshape(len(reqs), D_MODEL)
            x = layer.mlp(x + layer.proj(a))
        for r in reqs:
            r.state["len"] += 1
        return self.logits_out(x, on_host)

    @torch.inference_mode()
    def alloc_kv(self, req, blocks):
        """Grows the request's cache by `blocks` KV blocks: new tensors, the
        old contents copied in (PyTorch's allocator takes the memory)."""
        if req.state is None:
            req.state = {"kv": [], "len": 0}
        old = req.state["kv"]
        cap = (old[0][0].shape[1] if old else 0) + blocks * self.block_tokens
        new = []
        for li in range(LAYERS):
            kc = torch.empty(HEADS, cap, self.dh, device=self.dev, dtype=torch.bfloat16)
            vc = torch.empty_like(kc)
            if old:
                n = old[li][0].shape[1]
                kc[:, :n], vc[:, :n] = old[li]
            new.append((kc, vc))
        req.state["kv"] = new
        return None

    def free_kv(self, handle):
        pass

    def release(self, req):
        req.state = None

    def warm_up(self):
        r = engine.Request(-1, "warm up " * 64, 4)
        self.alloc_kv(r, -(-(len(r.prompt_ids) + 8) // self.block_tokens))
        r.output.append(self.prefill([r], False)[0])
        for _ in range(3):
            r.output.append(self.decode([r], False)[0])
        self.release(r)
        if self.dev.type == "cuda":
            torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser(description="the PyTorch engine of workloads/serving/server.py --gpu")
    engine.engine_args(p)
    args = p.parse_args()
    engine.setup_process(args)
    if DEVICE == "cuda" and not torch.cuda.is_available():
        sys.exit("serving_engine.py: no CUDA device (torch.cuda.is_available() is False)")
    backend = TorchBackend(args.kv_block_tokens)
    backend.warm_up()
    engine.serve(args, backend)


if __name__ == "__main__":
    main()
