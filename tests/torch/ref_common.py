"""What the PyTorch full-model references (gpt2_train_ref.py, llama_train_ref.py) share: reading
autohet's dumps and token file, the batches, the learning-rate schedule, the AdamW loop and the
comparison with autohet's step-0 gradients and per-step losses.

  * dumps: DIR/STEM.bin (fp32, tensors back to back) + DIR/STEM.json ({"tensors": [{"name",
    "shape": [rows, cols], "offset"}]}), from `autohet train --dump-params/--dump-grads DIR`;
  * tokens: an llm.c token file; sample j is the window [j*T, j*T + T], j taken modulo (n - 1) // T;
    iteration i takes samples [i*B, (i+1)*B);
  * optimizer: torch.optim.AdamW with autohet's hyper-parameters: betas (0.9, 0.95), eps 1e-8,
    weight decay on the tensors the caller names (the architecture table's decayed ones), lr
    warm-up then cosine to 0.1 lr, torch.nn.utils.clip_grad_norm_ on the global norm;
  * comparison: max |autohet - torch| / max |torch| per gradient tensor of step 0 <= --grad-tol,
    the relative loss difference of every step <= --loss-tol, and the loss must fall.
Torch computes in float64 from the fp32 initial weights.
"""
import argparse
import json
import math
import struct

import torch


def load_tensors(d, stem):
    meta = json.load(open(f"{d}/{stem}.json"))
    raw = open(f"{d}/{stem}.bin", "rb").read()
    flat = torch.frombuffer(bytearray(raw), dtype=torch.float32)
    out = {}
    end = 0
    for t in meta["tensors"]:
        rows, cols = t["shape"]
        end = max(end, t["offset"] + rows * cols)
        x = flat[t["offset"]:t["offset"] + rows * cols]
        out[t["name"]] = x.reshape(rows, cols) if cols > 1 else x.reshape(rows)
    assert end == flat.numel(), f"{d}/{stem}.bin: {flat.numel()} floats, the tensors of {stem}.json end at {end}"
    return out, [t["name"] for t in meta["tensors"]]


def load_tokens(path):
    raw = open(path, "rb").read()
    header = struct.unpack("<256i", raw[:1024])
    width = {(20240520, 1): "H", (20240801, 7): "I"}.get(header[:2])
    assert width, f"{path}: not an llm.c token file"
    n = header[2]
    return torch.tensor(struct.unpack(f"<{n}{width}", raw[1024:1024 + struct.calcsize(width) * n]), dtype=torch.long)


def batch(tok, first, B, T):
    samples = (tok.numel() - 1) // T
    idx = torch.tensor([[(j % samples) * T + k for k in range(T + 1)] for j in range(first, first + B)])
    w = tok[idx]
    return w[:, :-1], w[:, 1:]


def lr_at(a, step):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    lr_min, span = 0.1 * a.lr, a.steps - a.warmup
    prog = min(1.0, (step - a.warmup) / span) if span > 0 else 1.0
    return lr_min + (a.lr - lr_min) * 0.5 * (1.0 + math.cos(math.pi * prog))


def arg_parser(doc):
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for f in ("--params", "--grads", "--metrics", "--data"):
        ap.add_argument(f, required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--grad-tol", type=float, default=1e-5)
    ap.add_argument("--loss-tol", type=float, default=1e-5)
    ap.add_argument("--label", default="autohet")
    return ap


class Run:
    """autohet's run as the reference reads it: initial weights (names in dump order), step-0
    gradients, per-step metrics, the token stream; p = the weights as float64 leaves."""

    def __init__(self, a):
        torch.manual_seed(0)
        self.a = a
        self.init, self.names = load_tensors(a.params, "params")
        self.got_grads, grad_names = load_tensors(a.grads, "grads")
        assert grad_names == self.names, f"{a.grads}/grads.json names {grad_names}, params.json {self.names}"
        self.metrics = [json.loads(line) for line in open(a.metrics)]
        assert len(self.metrics) == a.steps, f"{a.metrics}: {len(self.metrics)} steps, expected {a.steps}"
        self.tok = load_tokens(a.data)
        self.p = {n: self.init[n].double().clone().requires_grad_(True) for n in self.names}

    def batch(self, step):
        return batch(self.tok, step * self.a.batch, self.a.batch, self.a.seq_len)

    def train_and_compare(self, loss_fn, decayed):
        """loss_fn(p, x, y) -> mean cross-entropy; decayed(name) -> AdamW decays it. Runs the
        steps, compares, prints; returns True when everything is within tolerance."""
        a, p, names, metrics = self.a, self.p, self.names, self.metrics
        decay = [p[n] for n in names if decayed(n)]
        no_decay = [p[n] for n in names if not decayed(n)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
        ok = True
        worst_loss = 0.0
        for step in range(a.steps):
            x, y = self.batch(step)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(p, x, y)
            loss.backward()
            if step == 0:
                worst, where = 0.0, ""
                for n in names:
                    ref, got = p[n].grad, self.got_grads[n].double()
                    assert ref is not None, f"{n}: torch computed no gradient (not used by the model)"
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
        return ok
