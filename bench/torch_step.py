"""One GPT-2 training step in PyTorch, timed (bench/bench_train_vs_torch.sh runs it beside
`autohet train`). The same architecture and step as autohet's: token + learned position
embeddings, pre-LN blocks (causal attention, GELU-tanh MLP), final LN, tied head, mean
cross-entropy, backward, global-norm clipping, AdamW (weight decay on matrices). fp32.

    /usr/bin/python3 bench/torch_step.py --layers L --d C --heads H --seq-len T --batch B
        --vocab V --threads N [--steps S]
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


def main():
    ap = argparse.ArgumentParser()
    for f in ("--layers", "--d", "--heads", "--seq-len", "--batch", "--vocab", "--threads"):
        ap.add_argument(f, type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
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
                      "steps": a.steps, "threads": torch.get_num_threads(), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
