"""PyTorch full-model reference for `autohet train` on LLaMA (tests/test_train_torch_llama.sh runs it).

    /usr/bin/python3 llama_train_ref.py --model-json MODEL.json --params DIR --grads DIR
        --metrics m.jsonl --data tokens.bin --batch B --seq-len T --steps S
        [--lr X --warmup N --weight-decay X --grad-clip X]

MODEL.json is `autohet model --model M --json` (its "model" object: n_head, n_kv_head, norm_eps,
rope_theta, rope_scaling, tied). The model is written here from the architecture, not from transformers:
RMSNorm x / sqrt(mean(x^2) + eps) * w; grouped-query attention (query head h reads key/value head
h // (H / KV)), causal, scaled by 1/sqrt(head_dim); rotary positions (inv_freq = 1/theta^(2i/hd)
computed in fp32 as Hugging Face does, LLaMA 3.1's rope_scaling applied to it in fp32 as
transformers' _compute_llama3_parameters does, angle = position * inv_freq in fp32, position = the token's
index in its sequence; cos/sin of that angle in float64); SwiGLU MLP down(silu(gate(x)) * up(x));
no biases; final RMSNorm; head lm_head.weight, or wte when tied.

The rotary convention is checked, not assumed. autohet's q/k weights are in Hugging Face's layout,
whose rotary form rotates halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) over the two halves
of each head. Meta's original form rotates interleaved pairs (x[2i], x[2i+1]) as complex numbers,
on weights that HF's conversion script (convert_llama_weights_to_hf.py) permutes row-wise per head
with w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2). Before
any comparison with autohet the reference computes the step-0 logits both ways — rotate-half on
the dumped weights, and interleaved pairs on the weights with that permutation inverted — and
requires them equal (1e-12 relative); it also requires that interleaved pairs on the un-inverted
weights and a model without rotary both differ (so that the check can fail).

The initial weights must be LLaMA's initialisation: N(0, 0.02) matrices, RMSNorm weights ones.
Then it compares with autohet's run (ref_common.py): the loss and every gradient tensor of step 0
(<= --grad-tol relative per tensor), the losses of all S AdamW steps (<= --loss-tol), weight decay
on the tensors LLaMA's table decays (the matrices: wte, q, k, v, o, gate, up, down, lm_head; not
the RMSNorm weights). Exits 1 on a mismatch.
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_common  # noqa: E402

# The tensors LLaMA's architecture table (src/spec/arch_llama.c) decays: its matrices.
DECAYED_BLOCK = ("attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight",
                 "mlp.gate.weight", "mlp.up.weight", "mlp.down.weight")


def decayed(name):
    return name in ("wte", "lm_head.weight") or (name.startswith("h.") and name.split(".", 2)[2] in DECAYED_BLOCK)


def llama3_scaled(inv_freq, rs):
    """LLaMA 3.1's rope_scaling (rope_type "llama3"), as transformers' _compute_llama3_parameters
    applies it to the fp32 inv_freq (modeling_rope_utils.py; rewritten here, not imported)."""
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old_len = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old_len / low, old_len / high
    wavelen = 2 * math.pi / inv_freq
    llama = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * llama / factor + smooth * llama
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, llama)


def rope_angles(T, hd, theta, scaling=None):
    """(T, hd/2) float64 angles: fp32 inv_freq (scaled when the model has rope_scaling) and fp32
    position * inv_freq, as HF computes them."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    if scaling:
        inv_freq = llama3_scaled(inv_freq, scaling)
    pos = torch.arange(T, dtype=torch.float32)
    return (pos[:, None] * inv_freq[None, :]).double()


def rope_rotate_half(x, ang):
    """HF's apply_rotary_pos_emb on x (B, heads, T, hd)."""
    cos, sin = torch.cat((ang.cos(), ang.cos()), dim=-1), torch.cat((ang.sin(), ang.sin()), dim=-1)
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * cos + rot * sin


def rope_interleaved(x, ang):
    """Meta's apply_rotary_emb: pairs (x[2i], x[2i+1]) times e^(i angle_i), as complex numbers."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2).contiguous())
    f = torch.polar(torch.ones_like(ang), ang)
    return torch.view_as_real(xc * f).flatten(-2)


def hf_permute(w, n_heads):
    """convert_llama_weights_to_hf.py's permute: Meta's q/k rows -> HF's."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def hf_unpermute(w, n_heads):
    """The inverse of hf_permute: HF's q/k rows -> Meta's."""
    dim1, dim2 = w.shape
    return w.view(n_heads, 2, dim1 // n_heads // 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def logits(p, m, x, rope="rotate-half"):
    """rope: "rotate-half" (HF, on the weights as dumped), "interleaved" (Meta's, on the weights
    with HF's permutation inverted), "interleaved-unpermuted" (Meta's on HF's weights: wrong, for
    the check's negative case), "none"."""
    B, T = x.shape
    H, KV, eps = m["n_head"], m["n_kv_head"], m["norm_eps"]
    L = m["n_layer"]
    h = p["wte"][x]
    C = h.shape[-1]
    hd = C // H
    ang = rope_angles(T, hd, m["rope_theta"], m.get("rope_scaling"))
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(L):
        g = lambda s: p[f"h.{l}.{s}"]
        a = rms_norm(h, g("rms_1.weight"), eps)
        wq, wk = g("attn.q.weight"), g("attn.k.weight")
        if rope == "interleaved":
            wq, wk = hf_unpermute(wq, H), hf_unpermute(wk, KV)
        q = F.linear(a, wq).view(B, T, H, hd).transpose(1, 2)
        k = F.linear(a, wk).view(B, T, KV, hd).transpose(1, 2)
        v = F.linear(a, g("attn.v.weight")).view(B, T, KV, hd).transpose(1, 2)
        if rope == "rotate-half":
            q, k = rope_rotate_half(q, ang), rope_rotate_half(k, ang)
        elif rope.startswith("interleaved"):
            q, k = rope_interleaved(q, ang), rope_interleaved(k, ang)
        # grouped-query attention: query head j reads key/value head j // (H / KV)
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, C)
        h = h + F.linear(o, g("attn.o.weight"))
        a = rms_norm(h, g("rms_2.weight"), eps)
        h = h + F.linear(F.silu(F.linear(a, g("mlp.gate.weight"))) * F.linear(a, g("mlp.up.weight")),
                         g("mlp.down.weight"))
    h = rms_norm(h, p["norm.weight"], eps)
    return h @ (p["wte"] if m["tied"] else p["lm_head.weight"]).t()


def loss(p, m, x, y):
    z = logits(p, m, x)
    B, T = x.shape
    return F.cross_entropy(z.reshape(B * T, -1), y.reshape(B * T))


def check_rotary(run, m):
    a = run.a
    with torch.no_grad():
        for n in ("attn.q.weight", "attn.k.weight"):
            w = run.p[f"h.0.{n}"]
            heads = m["n_head"] if n == "attn.q.weight" else m["n_kv_head"]
            assert torch.equal(hf_permute(hf_unpermute(w, heads), heads), w), f"{n}: permute(unpermute) != id"
            assert not torch.equal(hf_unpermute(w, heads), w), f"{n}: the permutation moved nothing"
        x, _ = run.batch(0)
        ref = logits(run.p, m, x, "rotate-half")
        scale = ref.abs().max().item()
        diff = {r: (logits(run.p, m, x, r) - ref).abs().max().item() / scale
                for r in ("interleaved", "interleaved-unpermuted", "none")}
        negatives = ["interleaved-unpermuted", "none"]
        if m.get("rope_scaling"):  # LLaMA 3.1's scaling must matter at this length, or it goes untested
            unscaled = dict(m, rope_scaling=None)
            diff["unscaled"] = (logits(run.p, unscaled, x, "rotate-half") - ref).abs().max().item() / scale
            negatives.append("unscaled")
    print(f"{a.label}: rotary: interleaved pairs on the un-permuted weights vs rotate-half on HF's: "
          f"logits within {diff['interleaved']:.1e} relative (on HF's own weights {diff['interleaved-unpermuted']:.1e}, "
          f"without rotary {diff['none']:.1e}"
          + (f", without its rope_scaling {diff['unscaled']:.1e})" if "unscaled" in diff else ")"))
    ok = diff["interleaved"] <= 1e-12
    if not ok:
        print(f"{a.label}: the two rotary forms disagree ({diff['interleaved']:.3e} > 1e-12)")
    for r in negatives:
        if diff[r] <= 1e-6:
            print(f"{a.label}: rotary check has no power: {r} gives the same logits ({diff[r]:.3e})")
            ok = False
    return ok


def check_init(run):
    """LLaMA's initialisation: N(0, 0.02) for every matrix (no residual scaling), ones for the
    RMSNorm weights; the sample std within 5 % (4096+ values each: a few times its spread)."""
    ok = True
    for n in run.names:
        w = run.init[n].double()
        if w.dim() == 1:
            good, what = bool((w == 1).all()), "not all ones"
        else:
            std, mean = w.std().item(), w.mean().item()
            good, what = abs(std - 0.02) <= 0.001 and abs(mean) <= 0.002, f"std {std:.5f}, mean {mean:.5f}, expected N(0, 0.02)"
        if not good:
            print(f"{run.a.label}: initial {n}: {what}")
            ok = False
    return ok


def main():
    ap = ref_common.arg_parser(__doc__)
    ap.add_argument("--model-json", required=True, help="autohet model --model M --json")
    a = ap.parse_args()
    m = json.load(open(a.model_json))["model"]
    assert m["arch"] == "llama", f"{a.model_json}: arch {m['arch']}, expected llama"
    assert m["n_head"] % m["n_kv_head"] == 0
    run = ref_common.Run(a)
    has_head = "lm_head.weight" in run.names
    assert has_head != m["tied"], f"model tied={m['tied']} but the dump {'has' if has_head else 'lacks'} lm_head.weight"
    want = {"wte", "norm.weight"} | ({"lm_head.weight"} if has_head else set()) | {
        f"h.{l}.{s}" for l in range(m["n_layer"]) for s in
        ("rms_1.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight",
         "rms_2.weight", "mlp.gate.weight", "mlp.up.weight", "mlp.down.weight")}
    assert set(run.names) == want, f"dumped tensors: extra {set(run.names) - want}, missing {want - set(run.names)}"
    C, hd = m["d_model"], m["d_model"] // m["n_head"]
    shapes = {"wte": (m["vocab"], C), "lm_head.weight": (m["vocab"], C), "norm.weight": (C,)}
    for l in range(m["n_layer"]):
        shapes.update({f"h.{l}.attn.q.weight": (C, C), f"h.{l}.attn.k.weight": (m["n_kv_head"] * hd, C),
                       f"h.{l}.attn.v.weight": (m["n_kv_head"] * hd, C), f"h.{l}.attn.o.weight": (C, C),
                       f"h.{l}.mlp.gate.weight": (m["d_ff"], C), f"h.{l}.mlp.up.weight": (m["d_ff"], C),
                       f"h.{l}.mlp.down.weight": (C, m["d_ff"]), f"h.{l}.rms_1.weight": (C,),
                       f"h.{l}.rms_2.weight": (C,)})
    for n in run.names:
        assert tuple(run.init[n].shape) == shapes[n], f"{n}: shape {tuple(run.init[n].shape)}, expected {shapes[n]}"
    assert all(decayed(n) == (run.p[n].dim() == 2) for n in run.names), "decayed tensors are not the matrices"
    ok = check_init(run) and check_rotary(run, m)
    ok = run.train_and_compare(lambda p, x, y: loss(p, m, x, y), decayed) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
