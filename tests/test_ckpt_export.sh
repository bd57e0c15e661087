# autohet ckpt export: a checkpoint saved by a TP-4 plan (every matrix in 4 pieces) becomes one
# Hugging Face GPT-2 model.safetensors + config.json (then the same for LLaMA, below). PyTorch
# (/usr/bin/python3, with numpy, which python3-torch pulls in; no safetensors package) parses the
# safetensors file by hand (tests/hf_files.py), checks the names and Conv1D shapes Hugging Face uses, builds
# GPT-2 from config.json with those weights, and its loss on step 5's batch must equal the loss
# autohet reported for step 5 (the weights after 5 updates) within 1e-5 relative. Without --step,
# export takes the run's last step, 6, saved though 6 is not a multiple of --ckpt-every 5 (it used
# to hand out step 5, the final update lost). A step that is
# not there, a directory without checkpoints, pieces of another model's run in the same root, and
# sharded weights already in the output directory are clear errors.
# Usage: bash tests/test_ckpt_export.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PY=/usr/bin/python3
"$PY" -c 'import torch' 2>/dev/null || fail "$PY cannot import torch; install it: apt-get install python3-torch"
timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$PLANS/train-tp4.json" --data "$WORK/text.bin" --steps 6 \
    --quiet --metrics "$WORK/m.jsonl" --ckpt-every 5 --local-root "$WORK/ck" 2>"$WORK/train.err" \
    || { cat "$WORK/train.err" >&2; fail "autohet train"; }
"$AUTOHET" ckpt export --local-root "$WORK/ck" -o "$WORK/hf6" >"$WORK/export6.out" || fail "export of the last step"
grep -q "step 6 ->" "$WORK/export6.out" || fail "export did not take the last step, 6: $(cat "$WORK/export6.out")"
"$AUTOHET" ckpt export --local-root "$WORK/ck" --step 5 -o "$WORK/hf" >"$WORK/export.out" || fail "export"
grep -q "step 5 ->" "$WORK/export.out" || fail "export did not take step 5: $(cat "$WORK/export.out")"
read -r B T < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["train"]; print(t["global_batch"], t["seq_len"])' "$PLANS/train-tp4.json")
PYTHONPATH="$SRC/tests:$SRC/tests/torch" "$PY" - "$WORK/hf" "$WORK/text.bin" "$WORK/m.jsonl" "$B" "$T" <<'PY' || fail "the exported model differs from autohet's"
import json, math, sys
import hf_files
import ref_common
import torch
out, data, metrics, B, T = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cfg = json.load(open(f"{out}/config.json"))
W = {}
for name, (dt, shape, buf) in hf_files.read(f"{out}/model.safetensors").items():
    assert dt == "F32", (name, dt)
    W[name] = torch.from_numpy(hf_files.as_f32(dt, shape, buf)).double()
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
x_ids, y_ids = ref_common.batch(ref_common.load_tokens(data), 5 * B, B, T)
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
# LLaMA: tiny-llama-tp4 (grouped-query attention, untied head) on the same TP-4 plan; the export's
# LlamaForCausalLM names and config.json, evaluated by hand the way transformers' LlamaForCausalLM
# computes (RMSNorm, rotate-half RoPE on the q/k projections as stored, repeat_kv, SwiGLU), give
# autohet's step-5 loss.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["model"]="tiny-llama-tp4"; json.dump(d,open(sys.argv[2],"w"))' \
    "$PLANS/train-tp4.json" "$WORK/llama-tp4.json"
timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/llama-tp4.json" --data "$WORK/text.bin" --steps 6 \
    --quiet --metrics "$WORK/ml.jsonl" --ckpt-every 5 --local-root "$WORK/ckl" 2>"$WORK/trainl.err" \
    || { cat "$WORK/trainl.err" >&2; fail "autohet train (LLaMA)"; }
"$AUTOHET" ckpt export --local-root "$WORK/ckl" --step 5 -o "$WORK/hfl" >"$WORK/exportl.out" || fail "export (LLaMA)"
PYTHONPATH="$SRC/tests:$SRC/tests/torch" "$PY" - "$WORK/hfl" "$WORK/text.bin" "$WORK/ml.jsonl" "$B" "$T" <<'PY' || fail "the exported LLaMA differs from autohet's"
import json, math, sys
import hf_files
import ref_common
import torch
out, data, metrics, B, T = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
cfg = json.load(open(f"{out}/config.json"))
assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["model_type"] == "llama", cfg
assert cfg["hidden_act"] == "silu" and cfg["attention_bias"] is False and cfg["mlp_bias"] is False, cfg
W = {}
for name, (dt, shape, buf) in hf_files.read(f"{out}/model.safetensors").items():
    assert dt == "F32", (name, dt)
    W[name] = torch.from_numpy(hf_files.as_f32(dt, shape, buf)).double()
L, C, H, KV = cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
F, V, hd = cfg["intermediate_size"], cfg["vocab_size"], cfg["head_dim"]
assert hd == C // H and cfg["tie_word_embeddings"] is False
want = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C], "lm_head.weight": [V, C]}
for l in range(L):
    p = f"model.layers.{l}."
    want.update({p + "input_layernorm.weight": [C], p + "post_attention_layernorm.weight": [C],
                 p + "self_attn.q_proj.weight": [C, C], p + "self_attn.k_proj.weight": [KV * hd, C],
                 p + "self_attn.v_proj.weight": [KV * hd, C], p + "self_attn.o_proj.weight": [C, C],
                 p + "mlp.gate_proj.weight": [F, C], p + "mlp.up_proj.weight": [F, C], p + "mlp.down_proj.weight": [C, F]})
assert {k: list(v.shape) for k, v in W.items()} == want, sorted(set(W) ^ set(want))
x_ids, y_ids = ref_common.batch(ref_common.load_tokens(data), 5 * B, B, T)
eps = cfg["rms_norm_eps"]
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
fr = torch.outer(torch.arange(T, dtype=torch.float64), inv)
cos, sin = torch.cat([fr, fr], -1).cos(), torch.cat([fr, fr], -1).sin()
def rot(x): return torch.cat([-x[..., hd // 2:], x[..., :hd // 2]], -1)
mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
x = W["model.embed_tokens.weight"][x_ids]
for l in range(L):
    p = f"model.layers.{l}."
    h = rms(x, W[p + "input_layernorm.weight"])
    q = (h @ W[p + "self_attn.q_proj.weight"].T).reshape(B, T, H, hd).transpose(1, 2)
    k = (h @ W[p + "self_attn.k_proj.weight"].T).reshape(B, T, KV, hd).transpose(1, 2)
    v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(B, T, KV, hd).transpose(1, 2)
    q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
    k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
    att = (q @ k.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~mask, float("-inf")).softmax(-1)
    x = x + (att @ v).transpose(1, 2).reshape(B, T, C) @ W[p + "self_attn.o_proj.weight"].T
    h = rms(x, W[p + "post_attention_layernorm.weight"])
    g = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T) * (h @ W[p + "mlp.up_proj.weight"].T)
    x = x + g @ W[p + "mlp.down_proj.weight"].T
logits = rms(x, W["model.norm.weight"]) @ W["lm_head.weight"].T
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y_ids.reshape(-1)).item()
ref = [o for o in map(json.loads, open(metrics)) if o.get("step") == 5 and "loss" in o][0]["loss"]
rel = abs(loss - ref) / ref
assert rel <= 1e-5, f"torch {loss} vs autohet {ref} (rel {rel:.2e})"
print(f"  exported LLaMA ({len(W)} tensors): torch loss {loss:.7f} vs autohet {ref:.7f} (rel {rel:.1e})")
PY
# config.json's numbers in the fewest digits that read back as the same double
grep -q '"rms_norm_eps": 1e-5,' "$WORK/hfl/config.json" || fail "rms_norm_eps not in its shortest form: $(cat "$WORK/hfl/config.json")"
# Another run of another model (rope_theta 20000, same shapes, same step and shard names) in the same
# --local-root: its pieces are never spliced into this run's. Intact, the export is this run's alone;
# with a piece of this run damaged, the export fails naming the other copy's manifest and field.
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["model"]={"name": "theta", "arch": "llama", "n_layer": 4,
  "d_model": 64, "n_head": 8, "n_kv_head": 4, "d_ff": 192, "vocab": 256, "max_pos": 64, "tied": False, "norm_eps": 1e-5,
  "rope_theta": 20000}; json.dump(d,open(sys.argv[2],"w"))' "$PLANS/train-tp4.json" "$WORK/theta-tp4.json"
timeout 120 $MPIRUN -np 4 "$AUTOHET" train --plan "$WORK/theta-tp4.json" --data "$WORK/text.bin" --steps 6 \
    --quiet --ckpt-every 5 --local-root "$WORK/ckt" 2>"$WORK/traint.err" || { cat "$WORK/traint.err" >&2; fail "autohet train (theta)"; }
mkdir -p "$WORK/mix"
cp -r "$WORK/ckl/n0" "$WORK/mix/a"
cp -r "$WORK/ckt/n0" "$WORK/mix/b"
"$AUTOHET" ckpt export --local-root "$WORK/mix" --step 5 -o "$WORK/hfmix" >/dev/null || fail "export of the intact mix"
cmp -s "$WORK/hfl/model.safetensors" "$WORK/hfmix/model.safetensors" || fail "the intact mix did not export run a's model"
printf 'XXXX' | dd of="$WORK/mix/a/step-00000005/block-002.tp4-1.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
"$AUTOHET" ckpt export --local-root "$WORK/mix" --step 5 -o "$WORK/hfmix2" 2>"$WORK/e4" && fail "a piece of another model was spliced in"
grep -qF "no intact copy of block-002.tp4-1.safetensors" "$WORK/e4" &&
    grep -qF "$WORK/mix/b/step-00000005/manifest.json lists a copy of another model (rope_theta 20000, not 10000)" "$WORK/e4" ||
    fail "the other model's copy is not named: $(cat "$WORK/e4")"
# Sharded weights already in the output directory: a loader would read them, not the new file.
mkdir -p "$WORK/stale"
: >"$WORK/stale/model.safetensors.index.json"
: >"$WORK/stale/model-00001-of-00002.safetensors"
"$AUTOHET" ckpt export --local-root "$WORK/ckl" -o "$WORK/stale" 2>"$WORK/e5" && fail "exported beside stale shards"
grep -q "stale: holds .*model-00001-of-00002.safetensors" "$WORK/e5" && grep -q "model.safetensors.index.json" "$WORK/e5" ||
    fail "the stale shards are not named: $(cat "$WORK/e5")"
[ -e "$WORK/stale/model.safetensors" ] && fail "model.safetensors written beside the stale shards"
# Errors: a step that is not committed; a directory without checkpoints.
"$AUTOHET" ckpt export --local-root "$WORK/ck" --step 3 -o "$WORK/x" 2>"$WORK/e1" && fail "step 3 exported"
grep -q "step 3 is not committed" "$WORK/e1" || fail "unclear error: $(cat "$WORK/e1")"
mkdir -p "$WORK/none"
"$AUTOHET" ckpt export --local-root "$WORK/none" -o "$WORK/x" 2>"$WORK/e2" && fail "exported from nothing"
grep -q "no committed step" "$WORK/e2" || fail "unclear error: $(cat "$WORK/e2")"
echo PASS
