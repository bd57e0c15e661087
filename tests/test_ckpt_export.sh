# autohet ckpt export: a checkpoint saved by a TP-4 plan (every matrix in 4 pieces) becomes one
# Hugging Face GPT-2 model.safetensors + config.json. PyTorch (/usr/bin/python3, no other package)
# parses the safetensors file by hand, checks the names and Conv1D shapes Hugging Face uses, builds
# GPT-2 from config.json with those weights, and its loss on step 5's batch must equal the loss
# autohet reported for step 5 (the weights after 5 updates) within 1e-5 relative. A step that is
# not there, and a directory without checkpoints, are clear errors.
# Usage: bash tests/test_ckpt_export.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || fail "$PY cannot import torch; install it: apt-get install python3-torch"
timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$PLANS/train-tp4.json" --data "$WORK/text.bin" --steps 6 \
    --quiet --metrics "$WORK/m.jsonl" --ckpt-every 5 --local-root "$WORK/ck" 2>"$WORK/train.err" \
    || { cat "$WORK/train.err" >&2; fail "autohet train"; }
"$AUTOHET" ckpt export --local-root "$WORK/ck" -o "$WORK/hf" >"$WORK/export.out" || fail "export"
grep -q "step 5 ->" "$WORK/export.out" || fail "export did not take step 5: $(cat "$WORK/export.out")"
read -r B T < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["train"]; print(t["global_batch"], t["seq_len"])' "$PLANS/train-tp4.json")
"$PY" - "$WORK/hf" "$WORK/text.bin" "$WORK/m.jsonl" "$B" "$T" <<'PY' || fail "the exported model differs from autohet's"
import json, math, struct, sys
import torch
out, data, metrics, B, T = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cfg = json.load(open(f"{out}/config.json"))
raw = open(f"{out}/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
head.pop("__metadata__", None)
W = {}
for name, e in head.items():
    assert e["dtype"] == "F32", (name, e)
    a, b = e["data_offsets"]
    W[name] = torch.frombuffer(bytearray(raw[8 + n + a:8 + n + b]), dtype=torch.float32).reshape(e["shape"]).double()
L, C, H, F, V = cfg["n_layer"], cfg["n_embd"], cfg["n_head"], cfg["n_inner"], cfg["vocab_size"]
want = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [cfg["n_positions"], C],
        "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
for l in range(L):
    p = f"transformer.h.{l}."
    want.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C], p + "attn.c_attn.weight": [C, 3 * C],
                 p + "attn.c_attn.bias": [3 * C], p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                 p + "ln_2.weight": [C], p + "ln_2.bias": [C], p + "mlp.c_fc.weight": [C, F],
                 p + "mlp.c_fc.bias": [F], p + "mlp.c_proj.weight": [F, C], p + "mlp.c_proj.bias": [C]})
assert {k: list(v.shape) for k, v in W.items()} == want, sorted(set(W) ^ set(want))
# Step 5's batch: samples [5B, 6B), sample j = tokens [jT, jT + T].
tok = open(data, "rb").read()
hdr = struct.unpack("<256i", tok[:1024])
assert hdr[0] == 20240520
toks = torch.tensor(struct.unpack(f"<{hdr[2]}H", tok[1024:1024 + 2 * hdr[2]]), dtype=torch.long)
idx = torch.stack([toks[j * T:j * T + T + 1] for j in range(5 * B, 6 * B)])
x_ids, y_ids = idx[:, :-1], idx[:, 1:]
eps = cfg["layer_norm_epsilon"]
def ln(x, p): return torch.nn.functional.layer_norm(x, (C,), W[p + ".weight"], W[p + ".bias"], eps)
x = W["transformer.wte.weight"][x_ids] + W["transformer.wpe.weight"][torch.arange(T)]
mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
for l in range(L):
    p = f"transformer.h.{l}."
    qkv = ln(x, p + "ln_1") @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # Conv1D: x @ (in, out)
    q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, dim=2))
    att = (q @ k.transpose(-1, -2) / math.sqrt(C // H)).masked_fill(~mask, float("-inf")).softmax(-1)
    y = (att @ v).transpose(1, 2).reshape(B, T, C)
    x = x + y @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
    h = torch.nn.functional.gelu(ln(x, p + "ln_2") @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"], approximate="tanh")
    x = x + h @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
logits = ln(x, "transformer.ln_f") @ W["transformer.wte.weight"].T  # tied head
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y_ids.reshape(-1)).item()
ref = [o for o in map(json.loads, open(metrics)) if o.get("step") == 5 and "loss" in o][0]["loss"]
rel = abs(loss - ref) / ref
assert rel <= 1e-5, f"torch {loss} vs autohet {ref} (rel {rel:.2e})"
print(f"  exported GPT-2 ({len(W)} tensors): torch loss {loss:.7f} vs autohet {ref:.7f} (rel {rel:.1e})")
PY
# Errors: a step that is not committed; a directory without checkpoints.
"$AUTOHET" ckpt export --local-root "$WORK/ck" --step 3 -o "$WORK/x" 2>"$WORK/e1" && fail "step 3 exported"
grep -q "step 3 is not committed" "$WORK/e1" || fail "unclear error: $(cat "$WORK/e1")"
mkdir -p "$WORK/none"
"$AUTOHET" ckpt export --local-root "$WORK/none" -o "$WORK/x" 2>"$WORK/e2" && fail "exported from nothing"
grep -q "no committed step" "$WORK/e2" || fail "unclear error: $(cat "$WORK/e2")"
echo PASS
