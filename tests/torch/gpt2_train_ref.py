"""PyTorch full-model reference for `autohet train` on GPT-2 (tests/test_train_torch.sh runs it).

    /usr/bin/python3 gpt2_train_ref.py --params DIR --grads DIR --metrics m.jsonl --data tokens.bin
        --batch B --seq-len T --heads H --steps S [--lr X --warmup N --weight-decay X --grad-clip X]

Builds GPT-2 in torch from autohet's initial weights (DIR/params.bin + params.json from `autohet
train --dump-params DIR --dump-step 0`) and the same batches of the same token file, and compares
with autohet's run (ref_common.py: the loss and every gradient tensor of step 0, <= --grad-tol
relative per tensor; the losses of all S AdamW steps, <= --loss-tol). Weight decay on 2-D matrices
(GPT-2's table decays its matrices, not the biases and layer norms). Prints the worst errors;
exits 1 on a mismatch.
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_common  # noqa: E402


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

def main():
    ap = ref_common.arg_parser(__doc__)
    ap.add_argument("--heads", type=int, required=True)
    a = ap.parse_args()
    run = ref_common.Run(a)
    ok = run.train_and_compare(lambda p, x, y: forward(p, run.names, x, y, a.heads),
                               lambda n: run.p[n].dim() == 2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
