"""PyTorch full-model reference for `autohet train` (tests/test_train_torch.sh runs it).

    /usr/bin/python3 gpt2_train_ref.py --params DIR --grads DIR --metrics m.jsonl --data tokens.bin
        --batch B --seq-len T --steps S [--lr X --warmup N --weight-decay X --grad-clip X]

Builds GPT-2 in torch from autohet's initial weights (DIR/params.bin + params.json from `autohet
train --dump-params DIR --dump-step 0`), reads the same token file the same way (llm.c format;
sample j is the window [j*T, j*T + T] of the stream, wrapping; iteration i takes samples
[i*B, (i+1)*B)), and compares with autohet's run:
  * the loss of step 0 and every gradient tensor of step 0 (DIR/grads.bin from --dump-grads with
    --dump-step 0): max |autohet - torch| / max |torch| per tensor <= --grad-tol;
  * the losses of all S steps of AdamW (metrics JSONL): relative difference <= --loss-tol.
The optimizer is torch.optim.AdamW with autohet's hyper-parameters: betas (0.9, 0.95), eps 1e-8,
weight decay on 2-D matrices only, lr warm-up then cosine to 0.1 lr, torch.nn.utils
.clip_grad_norm_ on the global norm. Torch computes in float64 from the fp32 initial weights, so it
is the exact answer the fp32 runtime is measured against. Prints the worst errors; exits 1 on a
mismatch.
"""
import argparse
import json
import math
import struct
import sys

import torch
import torch.nn.functional as F


def load_tensors(d, stem):
    meta = json.load(open(f"{d}/{stem}.json"))
    raw = open(f"{d}/{stem}.bin", "rb").read()
    flat = torch.frombuffer(bytearray(raw), dtype=torch.float32)
    out = {}
    for t in meta["tensors"]:
        rows, cols = t["shape"]
        x = flat[t["offset"]:t["offset"] + rows * cols]
        out[t["name"]] = x.reshape(rows, cols) if cols > 1 else x.reshape(rows)
    return out, [t["name"] for t in meta["tensors"]]


def load_tokens(path):
    raw = open(path, "rb").read()
    header = struct.unpack("<256i", raw[:1024])
    assert header[0] == 20240520 and header[1] == 1, f"{path}: not an llm.c token file"
    n = header[2]
    return torch.tensor(struct.unpack(f"<{n}H", raw[1024:1024 + 2 * n]), dtype=torch.long)


def batch(tok, first, B, T):
    n = tok.numel()
    idx = torch.tensor([[(j * T + k) % n for k in range(T + 1)] for j in range(first, first + B)])
    w = tok[idx]
    return w[:, :-1], w[:, 1:]


def forward(p, names, x, y, H, eps=1e-5):
    B, T = x.shape
    L = sum(1 for n in names if n.endswith(".ln_1.weight"))
    h = p["wte"][x] + p["wpe"][:T]
    C = h.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        g = lambda s: p[f"h.{l}.{s}"]
        a = F.layer_norm(h, (C,), g("ln_1.weight"), g("ln_1.bias"), eps)
        q, k, v = F.linear(a, g("attn.qkv.weight"), g("attn.qkv.bias")).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, C)
        h = h + F.linear(o, g("attn.proj.weight"), g("attn.proj.bias"))
        a = F.layer_norm(h, (C,), g("ln_2.weight"), g("ln_2.bias"), eps)
        m = F.gelu(F.linear(a, g("mlp.fc.weight"), g("mlp.fc.bias")), approximate="tanh")
        h = h + F.linear(m, g("mlp.proj.weight"), g("mlp.proj.bias"))
    h = F.layer_norm(h, (C,), p["ln_f.weight"], p["ln_f.bias"], eps)
    logits = h @ p["wte"].t()  # tied head
    return F.cross_entropy(logits.reshape(B * T, -1), y.reshape(B * T))


def lr_at(a, step):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    lr_min, span = 0.1 * a.lr, a.steps - a.warmup
    prog = min(1.0, (step - a.warmup) / span) if span > 0 else 1.0
    return lr_min + (a.lr - lr_min) * 0.5 * (1.0 + math.cos(math.pi * prog))


def main():
    ap = argparse.ArgumentParser()
    for f in ("--params", "--grads", "--metrics", "--data"):
        ap.add_argument(f, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--grad-tol", type=float, default=1e-5)
    ap.add_argument("--loss-tol", type=float, default=1e-5)
    ap.add_argument("--label", default="autohet")
    a = ap.parse_args()
    torch.manual_seed(0)

    init, names = load_tensors(a.params, "params")
    got_grads, _ = load_tensors(a.grads, "grads")
    metrics = [json.loads(line) for line in open(a.metrics)]
    assert len(metrics) == a.steps, f"{a.metrics}: {len(metrics)} steps, expected {a.steps}"
    tok = load_tokens(a.data)
    p = {n: init[n].double().clone().requires_grad_(True) for n in names}
    decay = [p[n] for n in names if p[n].dim() == 2]
    no_decay = [p[n] for n in names if p[n].dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    ok = True
    worst_loss = 0.0
    for step in range(a.steps):
        x, y = batch(tok, step * a.batch, a.batch, a.seq_len)
        opt.zero_grad(set_to_none=True)
        loss = forward(p, names, x, y, a.heads)
        loss.backward()
        if step == 0:
            worst, where = 0.0, ""
            for n in names:
                ref, got = p[n].grad, got_grads[n].double()
                scale = ref.abs().max().item()
                err = (got - ref).abs().max().item() / (scale if scale > 0 else 1.0)
                if err > worst:
                    worst, where = err, n
                if err > a.grad_tol:
                    print(f"{a.label}: gradient of {n} differs: relative {err:.3e} > {a.grad_tol:g}")
                    ok = False
            print(f"{a.label}: {len(names)} gradient tensors of step 0 within {worst:.2e} relative "
                  f"(worst {where})")
        rel = abs(metrics[step]["loss"] - loss.item()) / abs(loss.item())
        worst_loss = max(worst_loss, rel)
        if rel > a.loss_tol:
            print(f"{a.label}: step {step}: loss {metrics[step]['loss']:.9f} vs torch "
                  f"{loss.item():.9f} (relative {rel:.2e} > {a.loss_tol:g})")
            ok = False
        if a.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(list(p.values()), a.grad_clip)
        for g in opt.param_groups:
            g["lr"] = lr_at(a, step)
        opt.step()
    first, last = metrics[0]["loss"], metrics[-1]["loss"]
    if not last < first:
        print(f"{a.label}: the loss did not fall ({first} -> {last}): the comparison proves little")
        ok = False
    print(f"{a.label}: {a.steps} AdamW steps, losses {first:.5f} -> {last:.5f}, within "
          f"{worst_loss:.2e} relative of torch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
