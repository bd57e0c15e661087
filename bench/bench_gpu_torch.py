"""GPT-2 training steps in PyTorch eager on one GPU, the reference for bench_gpu_gpt2 (same
model, batch, FLOP count and MFU formula; scripts/gpu-check.sh runs both side by side).

    python3 bench/bench_gpu_torch.py --layers L --d C --heads H --seq-len T --batch B
        [--vocab V] [--steps S] [--precision fp32|bf16] [--peak-tflops P]
prints one JSON line. bf16 = torch.autocast(bfloat16) with fp32 master weights, the usual mixed
precision; attention is F.scaled_dot_product_attention (flash kernels on sm_80+), AdamW default
(foreach) implementation, no torch.compile: "PyTorch eager".
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, T, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    p = argparse.ArgumentParser()
    for name, default in (("layers", 12), ("d", 768), ("heads", 12), ("seq-len", 1024),
                          ("batch", 8), ("vocab", 50257), ("steps", 10)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", default="bf16", choices=("fp32", "bf16"))
    p.add_argument("--peak-tflops", type=float, default=989.0)
    a = p.parse_args()
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32, as autohet's
    model = GPT(a.layers, a.d, a.heads, a.seq_len, a.vocab).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.0)
    N = a.batch * a.seq_len
    g = torch.Generator(device="cpu").manual_seed(0)
    data = torch.randint(0, a.vocab, (N + 1,), generator=g).to(dev)
    idx, tgt = data[:-1].view(a.batch, a.seq_len), data[1:].view(a.batch, a.seq_len)
    ctx = torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16")

    def step():
        opt.zero_grad(set_to_none=True)
        with ctx:
            loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(2):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / a.steps
    n_params = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    flops_tok = 6 * n_params + 12 * a.layers * a.d * a.seq_len
    tok_s = N / dt
    print(json.dumps({
        "impl": "torch-eager", "precision": a.precision, "layers": a.layers, "d": a.d,
        "heads": a.heads, "seq_len": a.seq_len, "batch": a.batch, "vocab": a.vocab,
        "params": n_params, "step_s": round(dt, 5), "tokens_per_s": round(tok_s),
        "mfu": round(tok_s * flops_tok / (a.peak_tflops * 1e12), 4), "peak_tflops": a.peak_tflops,
        "loss": round(loss.item(), 4), "max_allocated_mib":
        round(torch.cuda.max_memory_allocated() / 2**20, 1), "torch": torch.__version__,
        "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
