"""PyTorch reference for the CPU kernels (tests/test_kernels_torch.sh runs it).

Writes inputs, torch's outputs and torch's gradients to OUTDIR, one tensor per file NAME.bin:
  4 bytes magic b"AHT1", int32 dtype (0 float32, 1 int32, 2 float64), int32 ndim,
  int32 dims[ndim], then the data, little-endian, row-major.
test_kernels --torch OUTDIR recomputes the same with the kernels and compares.

Four cases, all with explicit parameters (no nn.Module) so the layouts match the kernels':
  block_*  one GPT-2 block, forward and backward for a random upstream gradient;
  model_*  embedding -> L blocks -> final LN -> tied head -> mean cross-entropy, and backward;
  llama_*  LLaMA's ops in a chain: RMS norm -> qkv projection -> rotary embedding (Hugging Face's
           rotate_half) -> grouped-query attention (kv heads by repeat_interleave) -> gate/up
           projection -> SwiGLU (F.silu(g) * u), forward and backward;
  adam_*   torch.optim.AdamW over 3 steps with given gradients.
"""
import math
import struct
import sys

import torch
import torch.nn.functional as F

B, T, C, H, V, L, P = 2, 8, 32, 4, 64, 2, 16
EPS = 1e-5

DTYPES = {torch.float32: 0, torch.int32: 1, torch.float64: 2}


def save(outdir, name, t):
    t = t.detach().contiguous()
    with open(f"{outdir}/{name}.bin", "wb") as f:
        f.write(b"AHT1")
        f.write(struct.pack("<ii", DTYPES[t.dtype], t.dim()))
        f.write(struct.pack(f"<{t.dim()}i", *t.shape))
        f.write(t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes())


BLOCK_PARAMS = [  # name, shape, kind ("w": linear weight, "g": LN gain, "b": bias)
    ("ln1_w", (C,), "g"), ("ln1_b", (C,), "b"),
    ("qkv_w", (3 * C, C), "w"), ("qkv_b", (3 * C,), "b"),
    ("proj_w", (C, C), "w"), ("proj_b", (C,), "b"),
    ("ln2_w", (C,), "g"), ("ln2_b", (C,), "b"),
    ("fc_w", (4 * C, C), "w"), ("fc_b", (4 * C,), "b"),
    ("fcproj_w", (C, 4 * C), "w"), ("fcproj_b", (C,), "b"),
]


def rand_param(shape, kind, gen):
    x = torch.randn(shape, generator=gen)
    if kind == "w":  # unit-variance outputs: softmax and GELU away from saturation
        return x / math.sqrt(shape[1])
    if kind == "g":
        return 1.0 + 0.1 * x
    return 0.1 * x


def block_params(gen):
    return {n: rand_param(s, k, gen).requires_grad_() for n, s, k in BLOCK_PARAMS}


def block(x, p, keep=None):
    b, t, c = x.shape
    hd = c // H
    ln1 = F.layer_norm(x, (c,), p["ln1_w"], p["ln1_b"], EPS)
    qkv = F.linear(ln1, p["qkv_w"], p["qkv_b"])
    q, k, v = qkv.split(c, dim=2)
    q, k, v = (z.view(b, t, H, hd).transpose(1, 2) for z in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    probs = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
    y = (probs @ v).transpose(1, 2).contiguous().view(b, t, c)
    x2 = x + F.linear(y, p["proj_w"], p["proj_b"])
    ln2 = F.layer_norm(x2, (c,), p["ln2_w"], p["ln2_b"], EPS)
    h = F.gelu(F.linear(ln2, p["fc_w"], p["fc_b"]), approximate="tanh")
    out = x2 + F.linear(h, p["fcproj_w"], p["fcproj_b"])
    if keep is not None:
        keep.update(qkv=qkv, probs=probs, atty=y, x2=x2)
    return out


def case_block(outdir, gen):
    x = torch.randn(B, T, C, generator=gen).requires_grad_()
    p = block_params(gen)
    dout = torch.randn(B, T, C, generator=gen)
    keep = {}
    out = block(x, p, keep)
    out.backward(dout)
    save(outdir, "block_x", x)
    save(outdir, "block_dout", dout)
    for n, t in p.items():
        save(outdir, f"block_{n}", t)
        save(outdir, f"block_d{n}", t.grad)
    save(outdir, "block_out", out)
    save(outdir, "block_dx", x.grad)
    for n, t in keep.items():
        save(outdir, f"block_{n}", t)


def case_model(outdir, gen):
    tokens = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    targets = torch.randint(0, V, (B, T), generator=gen, dtype=torch.int64)
    wte = (0.5 * torch.randn(V, C, generator=gen)).requires_grad_()
    wpe = (0.5 * torch.randn(P, C, generator=gen)).requires_grad_()
    blocks = [block_params(gen) for _ in range(L)]
    lnf_w = rand_param((C,), "g", gen).requires_grad_()
    lnf_b = rand_param((C,), "b", gen).requires_grad_()

    x = wte[tokens] + wpe[:T]
    for p in blocks:
        x = block(x, p)
    xf = F.layer_norm(x, (C,), lnf_w, lnf_b, EPS)
    logits = xf @ wte.t()
    loss = F.cross_entropy(logits.view(-1, V), targets.view(-1))  # mean over B*T tokens
    loss.backward()

    save(outdir, "model_tokens", tokens.to(torch.int32))
    save(outdir, "model_targets", targets.to(torch.int32))
    named = [("", "wte", wte), ("", "wpe", wpe), ("", "lnf_w", lnf_w), ("", "lnf_b", lnf_b)]
    for l, p in enumerate(blocks):
        named += [(f"l{l}_", n, t) for n, t in p.items()]
    for prefix, n, t in named:
        save(outdir, f"model_{prefix}{n}", t)
        save(outdir, f"model_{prefix}d{n}", t.grad)
    save(outdir, "model_loss_sum", (loss.detach().double() * B * T).reshape(1))
    grad_sq = sum(float((t.grad.double() ** 2).sum()) for _, _, t in named)
    save(outdir, "model_grad_sumsq", torch.tensor([grad_sq], dtype=torch.float64))


LLAMA_H, LLAMA_KV, LLAMA_F, LLAMA_THETA = 4, 2, 48, 10000.0


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope(x, theta):
    """transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb on x (b, heads, t, hd)."""
    t, hd = x.shape[2], x.shape[3]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.outer(torch.arange(t).float(), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return x * emb.cos() + rotate_half(x) * emb.sin()


def case_llama(outdir, gen):
    hd = C // LLAMA_H
    x = torch.randn(B, T, C, generator=gen).requires_grad_()
    rms_w = rand_param((C,), "g", gen).requires_grad_()
    qkv_w = rand_param(((LLAMA_H + 2 * LLAMA_KV) * hd, C), "w", gen).requires_grad_()
    gu_w = rand_param((2 * LLAMA_F, C), "w", gen).requires_grad_()
    dout = torch.randn(B, T, LLAMA_F, generator=gen)

    rms = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * rms_w
    qkv = F.linear(rms, qkv_w)
    q, k, v = qkv.split([LLAMA_H * hd, LLAMA_KV * hd, LLAMA_KV * hd], dim=2)
    q = q.view(B, T, LLAMA_H, hd).transpose(1, 2)
    k = k.view(B, T, LLAMA_KV, hd).transpose(1, 2)
    v = v.view(B, T, LLAMA_KV, hd).transpose(1, 2)
    q, k = rope(q, LLAMA_THETA), rope(k, LLAMA_THETA)
    roped = torch.cat([q.transpose(1, 2).reshape(B, T, -1), k.transpose(1, 2).reshape(B, T, -1),
                       v.transpose(1, 2).reshape(B, T, -1)], dim=2)
    group = LLAMA_H // LLAMA_KV
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    probs = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
    y = (probs @ v).transpose(1, 2).contiguous().view(B, T, C)
    gu = F.linear(y, gu_w)
    g, u = gu.split(LLAMA_F, dim=2)
    out = F.silu(g) * u
    out.backward(dout)
    for n, t in [("x", x), ("rms_w", rms_w), ("qkv_w", qkv_w), ("gu_w", gu_w)]:
        save(outdir, f"llama_{n}", t)
        save(outdir, f"llama_d{n}", t.grad)
    for n, t in [("dout", dout), ("rms", rms), ("roped", roped), ("probs", probs), ("y", y),
                 ("out", out)]:
        save(outdir, f"llama_{n}", t)
    save(outdir, "llama_config",
         torch.tensor([LLAMA_H, LLAMA_KV, LLAMA_F, int(LLAMA_THETA)], dtype=torch.int32))


def case_adam(outdir, gen, n=1000, steps=3):
    hp = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    p = torch.randn(n, generator=gen).requires_grad_()
    save(outdir, "adam_hparams",
         torch.tensor([hp["lr"], *hp["betas"], hp["eps"], hp["weight_decay"]], dtype=torch.float64))
    save(outdir, "adam_p0", p)
    opt = torch.optim.AdamW([p], foreach=False, **hp)
    for s in range(1, steps + 1):
        g = torch.randn(n, generator=gen) * (0.1 * s)
        p.grad = g.clone()
        opt.step()
        save(outdir, f"adam_g{s}", g)
        save(outdir, f"adam_p{s}", p)
    st = opt.state[p]
    save(outdir, "adam_m", st["exp_avg"])
    save(outdir, "adam_v", st["exp_avg_sq"])


def main():
    outdir = sys.argv[1]
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(1234)
    save(outdir, "config", torch.tensor([B, T, C, H, V, L, P], dtype=torch.int32))
    case_block(outdir, gen)
    case_model(outdir, gen)
    case_llama(outdir, gen)
    case_adam(outdir, gen)


if __name__ == "__main__":
    main()
