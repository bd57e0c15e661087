"""Hugging Face model directories for tests/test_init_from.sh, written by hand (8-byte little-endian
header length, JSON header, raw data), so no safetensors package is needed; numpy converts dtypes
(F16 natively; BF16 by rounding fp32's bits to nearest even, as torch does), not torch: the test
calls this script about 30 times and importing torch costs 1.5-2 s each time.
Runs under /usr/bin/python3 (Debian's python3-numpy, which python3-torch pulls in).

  shift DATA OUT NTOK            the token file DATA with its first NTOK tokens dropped
  shard SRC OUT N                SRC's tensors in N files + model.safetensors.index.json; GPT-2
                                 names lose "transformer.", buffers HF files carry are added
  dtype SRC OUT EXPECT           SRC's tensors alternately BF16 and F16 in OUT; EXPECT/model.safetensors
                                 holds what they convert back to (fp32)
  compare A B [--zeros-equal]    every tensor of A/model.safetensors equals B's, byte for byte
  mutate SRC OUT KIND ARG        a copy of SRC with one fault: config FIELD=INT, drop NAME, shape NAME,
                                 dtype NAME (F64), truncate -, unknown NAME, nan NAME (its first
                                 element); for a tied model, lm_head.weight beside the embedding
                                 NAME (F32): head_copy (exact), head_differs (its last element + 1),
                                 head_bf16 (as BF16); prints the tensor a truncation cuts
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

# safetensors dtype -> numpy dtype; BF16 is held as its raw 16 bits (numpy has no bfloat16)
DT = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "F64": np.float64}


def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    out = {}
    for name, e in head.items():
        a, b = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], raw[8 + n + a:8 + n + b])
    return out


def write(path, tensors):
    """tensors: {name: (dtype, shape, bytes)}, in order."""
    head, off = {"__metadata__": {"format": "pt"}}, 0
    for name, (dt, shape, data) in tensors.items():
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, data in tensors.values():
            f.write(data)


def as_array(dt, shape, data):
    return np.frombuffer(data, dtype=DT[dt]).reshape(shape)


def as_f32(dt, shape, data):
    """A tensor's values widened to fp32 (BF16: its 16 bits are fp32's upper half)."""
    a = as_array(dt, shape, data)
    return (a.astype(np.uint32) << 16).view(np.float32) if dt == "BF16" else a.astype(np.float32)


def to_bf16(x):
    """fp32 -> BF16 bits, rounded to nearest even (torch's .to(torch.bfloat16); no NaNs here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def raw(a):
    return np.ascontiguousarray(a).tobytes()


def copy_config(src, out):
    os.makedirs(out, exist_ok=True)
    shutil.copy(os.path.join(src, "config.json"), os.path.join(out, "config.json"))
    return json.load(open(os.path.join(src, "config.json")))


def shard(src, out, n):
    cfg = copy_config(src, out)
    ts = read(os.path.join(src, "model.safetensors"))
    gpt2 = cfg["model_type"] == "gpt2"
    items = []
    for name, v in ts.items():
        if gpt2 and name.startswith("transformer."):
            name = name[len("transformer."):]  # as GPT2Model saves them
        items.append((name, v))
    # the buffers transformers' files carry and the model does not use
    inv = np.ones(8, dtype=np.float32)
    for l in range(cfg.get("n_layer", cfg.get("num_hidden_layers"))):
        if gpt2:
            items.append((f"h.{l}.attn.bias", ("F32", [1, 1, 4, 4], raw(np.ones((1, 1, 4, 4), dtype=np.float32)))))
            items.append((f"h.{l}.attn.masked_bias", ("F32", [], raw(np.float32(-1e4)))))
        else:
            items.append((f"model.layers.{l}.self_attn.rotary_emb.inv_freq", ("F32", [8], raw(inv))))
    per = (len(items) + n - 1) // n
    weight_map = {}
    for k in range(n):
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        part = dict(items[k * per:(k + 1) * per])
        write(os.path.join(out, fname), part)
        weight_map.update({name: fname for name in part})
    json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map},
              open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=1)


def dtype(src, out, expect):
    copy_config(src, out)
    copy_config(src, expect)
    ts, low, back = read(os.path.join(src, "model.safetensors")), {}, {}
    for i, (name, (dt, shape, data)) in enumerate(ts.items()):
        want = "BF16" if i % 2 == 0 else "F16"
        x = as_f32(dt, shape, data)
        t = to_bf16(x) if want == "BF16" else x.astype(np.float16)
        low[name] = (want, shape, raw(t))
        back[name] = ("F32", shape, raw(as_f32(want, shape, raw(t))))
    write(os.path.join(out, "model.safetensors"), low)
    write(os.path.join(expect, "model.safetensors"), back)


def compare(a, b, zeros_equal=False):
    """zeros_equal: +0 and -0 count as equal (the lr-0 step's AdamW update is a zero whose sign may
    flip a zero weight's: -0 - (-0) = +0; the 16-bit inputs have zeros, trained fp32 ones do not)."""
    ta, tb = read(os.path.join(a, "model.safetensors")), read(os.path.join(b, "model.safetensors"))
    if set(ta) != set(tb):
        sys.exit(f"tensor names differ: {sorted(set(ta) ^ set(tb))}")
    for name in ta:
        if ta[name][:2] != tb[name][:2]:
            sys.exit(f"{name}: {ta[name][:2]} vs {tb[name][:2]}")
        if ta[name][2] != tb[name][2]:
            x, y = as_f32(*ta[name]), as_f32(*tb[name])
            same = x.view(np.int32) == y.view(np.int32)
            if zeros_equal and bool((same | ((x == 0) & (y == 0))).all()):
                continue
            sys.exit(f"{name}: bytes differ (max |diff| {np.abs(x.astype(np.float64) - y).max():.3g})")
    print(f"  {len(ta)} tensors equal byte for byte")


def mutate(src, out, kind, arg):
    cfg = copy_config(src, out)
    path = os.path.join(out, "model.safetensors")
    ts = read(os.path.join(src, "model.safetensors"))
    if kind == "config":
        field, value = arg.split("=")
        cfg[field] = int(value)
        json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
    elif kind == "drop":
        del ts[arg]
    elif kind == "shape":
        dt, shape, data = ts[arg]
        n = 1
        for d in shape:
            n *= d
        ts[arg] = (dt, [8, n // 8], data)
    elif kind == "dtype":
        dt, shape, data = ts[arg]
        ts[arg] = ("F64", shape, raw(as_f32(dt, shape, data).astype(np.float64)))
    elif kind == "unknown":
        ts[arg] = ("F32", [4], raw(np.zeros(4, dtype=np.float32)))
    elif kind in ("head_copy", "head_differs", "head_bf16"):  # a tied model's lm_head.weight beside its embedding arg
        dt, shape, data = ts[arg]
        x = as_f32(dt, shape, data).copy()
        if kind == "head_differs":
            x.flat[x.size - 1] += 1.0
        ts["lm_head.weight"] = ("BF16", shape, raw(to_bf16(x))) if kind == "head_bf16" else ("F32", shape, raw(x))
    elif kind == "nan":
        dt, shape, data = ts[arg]
        x = as_f32(dt, shape, data).copy()
        x.flat[0] = np.nan
        ts[arg] = ("F32", shape, raw(x))
    if kind != "config":
        write(path, ts)
    else:
        shutil.copy(os.path.join(src, "model.safetensors"), path)
    if kind == "truncate":
        size = os.path.getsize(path)
        with open(path, "r+b") as f:
            f.truncate(size - 100)
        print(list(ts)[-1])


def shift(data, out, ntok):
    raw_ = open(data, "rb").read()
    hdr = list(struct.unpack("<256i", raw_[:1024]))
    assert hdr[0] == 20240520, "not an llm.c token file"
    toks = raw_[1024 + 2 * ntok:1024 + 2 * hdr[2]]
    hdr[2] -= ntok
    open(out, "wb").write(struct.pack("<256i", *hdr) + toks)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "shift":
        shift(args[0], args[1], int(args[2]))
    elif cmd == "shard":
        shard(args[0], args[1], int(args[2]))
    elif cmd == "dtype":
        dtype(args[0], args[1], args[2])
    elif cmd == "compare":
        compare(args[0], args[1], len(args) > 2 and args[2] == "--zeros-equal")
    elif cmd == "mutate":
        mutate(args[0], args[1], args[2], args[3])
    else:
        sys.exit(f"unknown command {cmd}")
