"""One GPT-2 or LLaMA training step in PyTorch, timed (bench/bench_train_vs_torch.sh runs it
beside `autohet train`). The same architecture and step as autohet's. GPT-2 (--arch gpt2, the
default): token + learned position embeddings, pre-LN blocks (causal attention, GELU-tanh MLP),
final LN, tied head. LLaMA (--arch llama): token embedding, pre-RMSNorm blocks (causal
grouped-query attention with --kv-heads key/value heads and rotary positions, rotate-half; SwiGLU
MLP of width --d-ff), final RMSNorm, untied head, no biases. Both: mean cross-entropy, backward,
global-norm clipping, AdamW (weight decay on matrices). fp32.

    /usr/bin/python3 bench/torch_step.py [--arch gpt2|llama] --layers L --d C --heads H --seq-len T
        --batch B --vocab V --threads N [--kv-heads KV --d-ff F] [--steps S]
prints one JSON line: {"median_s", "min_s", "step_s" (every timed step), "steps", "threads",
"torch"}.
"""
import argparse
import json
import math
import statistics
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

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.H))
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", ~torch.ones(T, T, dtype=torch.bool).tril())

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x, self.mask[:T, :T])
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


class RMSNorm(nn.Module):  # torch 1.13 has none
    def __init__(self, C, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, C, H, KV, F_):
        super().__init__()
        self.H, self.KV, self.hd = H, KV, C // H
        self.rms_1, self.rms_2 = RMSNorm(C), RMSNorm(C)
        self.q = nn.Linear(C, C, bias=False)
        self.k, self.v = nn.Linear(C, KV * self.hd, bias=False), nn.Linear(C, KV * self.hd, bias=False)
        self.o = nn.Linear(C, C, bias=False)
        self.gate, self.up = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        self.down = nn.Linear(F_, C, bias=False)

    def forward(self, x, mask, cos, sin):
        B, T, C = x.shape
        a = self.rms_1(x)
        q = self.q(a).view(B, T, self.H, self.hd).transpose(1, 2)
        k = self.k(a).view(B, T, self.KV, self.hd).transpose(1, 2)
        v = self.v(a).view(B, T, self.KV, self.hd).transpose(1, 2)
        h = self.hd // 2
        rot = lambda t: torch.cat((-t[..., h:], t[..., :h]), dim=-1)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(self.H // self.KV, dim=1), v.repeat_interleave(self.H // self.KV, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, C))
        a = self.rms_2(x)
        return x + self.down(F.silu(self.gate(a)) * self.up(a))


class Llama(nn.Module):
    def __init__(self, L, C, H, KV, F_, V, T, theta=10000.0):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, H, KV, F_) for _ in range(L))
        self.norm = RMSNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        hd = C // H
        inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.arange(T, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", torch.cat((ang.cos(), ang.cos()), dim=-1))
        self.register_buffer("sin", torch.cat((ang.sin(), ang.sin()), dim=-1))
        self.register_buffer("mask", ~torch.ones(T, T, dtype=torch.bool).tril())

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx)
        for b in self.blocks:
            x = b(x, self.mask[:T, :T], self.cos[:T], self.sin[:T])
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))


def main():
    ap = argparse.ArgumentParser()
    for f in ("--layers", "--d", "--heads", "--seq-len", "--batch", "--vocab", "--threads"):
        ap.add_argument(f, type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--kv-heads", type=int, help="llama: key/value heads (default --heads)")
    ap.add_argument("--d-ff", type=int, help="llama: SwiGLU width (required for llama)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.arch == "llama":
        if a.d_ff is None:
            ap.error("--arch llama needs --d-ff")
        model = Llama(a.layers, a.d, a.heads, a.kv_heads or a.heads, a.d_ff, a.vocab, a.seq_len)
    else:
        model = GPT(a.layers, a.d, a.heads, a.vocab, a.seq_len)
    params = list(model.parameters())
    opt = torch.optim.AdamW([{"params": [p for p in params if p.dim() == 2], "weight_decay": 0.1},
                             {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq_len))
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq_len))
    times = []
    for step in range(a.steps + 1):  # step 0 warms up, untimed
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step > 0:
            times.append(time.perf_counter() - t0)
    print(json.dumps({"median_s": statistics.median(times), "min_s": min(times), "step_s": times,
                      "steps": a.steps, "arch": a.arch, "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
