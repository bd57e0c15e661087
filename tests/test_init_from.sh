# autohet train --init-from DIR: weights in from a Hugging Face directory, out again by export.
# For GPT-2 (tiny-gpt2, tied; an untied one with V = 200, padded at every TP degree) and LLaMA
# (tiny-llama: GQA, untied head; tiny-llama-tp4):
#   1. round trip: a run trains 6 steps (checkpoint at 5) and exports step 5 (X); another plan
#      (TP 2 with asymmetric pipelines, or TP 4) starts from X and takes one step with a learning
#      rate that is 0 in fp32 (--lr 1e-300: AdamW's update is exactly 0, so the weights of its
#      step-1 checkpoint are the loaded ones); its export equals X byte for byte;
#   2. loss: on data shifted by 5 batches, iteration 0 of the run started from X sees step 5's
#      batch: its loss equals the exporting run's step-5 loss exactly on the same plan, within
#      1e-5 relative on the other plan;
#   3. inputs: X sharded in 3 files with an index (GPT-2 names without "transformer.", and the
#      buffers HF files carry: attn.bias, attn.masked_bias, rotary_emb.inv_freq), and X in BF16
#      and F16 (alternately), read and exported back: the sharded one equals X, the 16-bit one the
#      16-bit values widened to fp32 (a zero's sign aside: the lr-0 step may flip it);
#   4. --resume with a committed checkpoint ignores --init-from; without one it uses it; autohet
#      run passes it to its launch (step 0's loss from X as above) and checks it against --model;
#      --seed beside it is refused by both (it would be ignored); a tied model's lm_head.weight
#      written beside the embedding is taken as an exact copy (the same loss), refused otherwise;
#   5. each bad input fails naming the file and the field or tensor: a config field that differs
#      (rope_scaling too: LLaMA 3.1's scaling is exported, read back, and refused by a plan without it;
#      its bos/eos token ids are exported as the config gave them),
#      a missing tensor, a wrong shape, an unknown dtype, a truncated file, an unknown tensor, a NaN
#      weight (before training starts); model.safetensors beside an index; a shard file the index
#      names that is missing.
# Usage: bash tests/test_init_from.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || fail "$PY cannot import numpy; install it: apt-get install python3-numpy"
HF="$PY $SRC/tests/hf_files.py"

# plan SRC_PLAN MODEL OUT: an example plan for another model of the same layer count.
# MODEL is a preset name or a model object (JSON).
plan() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=sys.argv[2]; d["model"]=json.loads(m) if m[0]=="{" else m; json.dump(d,open(sys.argv[3],"w"))' "$PLANS/$1.json" "$2" "$3"; }
# train PLAN LOG ARGS...: autohet train under mpirun with the plan's ranks.
train() {
    local p=$1 log=$2
    shift 2
    timeout 300 $MPIRUN -np "$(plan_ranks "$p")" "$AUTOHET" train --plan "$p" --quiet "$@" >"$log" 2>&1 \
        || { cat "$log" >&2; fail "autohet train --plan $p $*"; }
}
# loss JSONL STEP
loss() { python3 -c 'import json,sys; print([o for o in map(json.loads, open(sys.argv[1])) if o.get("step") == int(sys.argv[2]) and "loss" in o][0]["loss"])' "$1" "$2"; }
# export ROOT STEP OUT
export_step() { "$AUTOHET" ckpt export --local-root "$1" --step "$2" -o "$3" >/dev/null || fail "export $1 step $2"; }

read -r B T < <(python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["train"]; print(t["global_batch"], t["seq_len"])' "$PLANS/train-single.json")
$HF shift "$WORK/text.bin" "$WORK/text5.bin" $((5 * B * T)) || fail "shift the data"
# The step with lr 0 in fp32 (see above): its checkpoint holds the weights it started from.
ZERO=(--steps 1 --lr 1e-300 --weight-decay 0 --ckpt-every 1)

# case NAME MODEL SRC_PLAN OTHER_PLAN
case_model() {
    local name=$1 model=$2 d="$WORK/$1"
    mkdir -p "$d"
    plan "$3" "$model" "$d/a.json"
    plan "$4" "$model" "$d/b.json"
    train "$d/a.json" "$d/a.log" --data "$WORK/text.bin" --steps 6 --ckpt-every 5 --local-root "$d/ck_a" --metrics "$d/a.jsonl"
    export_step "$d/ck_a" 5 "$d/x"
    local want
    want=$(loss "$d/a.jsonl" 5)

    # 1 + 2 on the other plan: round trip and loss within 1e-5
    train "$d/b.json" "$d/b.log" --data "$WORK/text5.bin" --init-from "$d/x" "${ZERO[@]}" --local-root "$d/ck_b" --metrics "$d/b.jsonl"
    grep -q "initialised from $d/x" "$d/b.log" || fail "$name: no 'initialised from' line: $(cat "$d/b.log")"
    export_step "$d/ck_b" 1 "$d/y"
    $HF compare "$d/x" "$d/y" || fail "$name: export(init-from(x)) on $4 differs from x"
    local got
    got=$(loss "$d/b.jsonl" 0)
    python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); r=abs(a-b)/b; print(f"  {sys.argv[3]}: loss {a} on the other plan vs {b} (rel {r:.1e})"); sys.exit(r > 1e-5)' "$got" "$want" "$name" \
        || fail "$name: step 0 loss $got from x on $4 differs from the exporting run's step 5 loss $want"
    # 2 on the same plan: the loss is the same number
    train "$d/a.json" "$d/c.log" --data "$WORK/text5.bin" --init-from "$d/x" --steps 1 --metrics "$d/c.jsonl"
    got=$(loss "$d/c.jsonl" 0)
    [ "$got" = "$want" ] || fail "$name: step 0 loss $got from x differs from the exporting run's step 5 loss $want"
    echo "  $name: loss $got from x on $3 = step 5's"

    # 3: sharded (with buffers, GPT-2 without the prefix) and 16-bit inputs
    $HF shard "$d/x" "$d/sharded" 3 || fail "$name: shard"
    train "$d/b.json" "$d/s.log" --data "$WORK/text.bin" --init-from "$d/sharded" "${ZERO[@]}" --local-root "$d/ck_s"
    grep -q "buffers skipped" "$d/s.log" || fail "$name: sharded: $(cat "$d/s.log")"
    export_step "$d/ck_s" 1 "$d/ys"
    $HF compare "$d/x" "$d/ys" || fail "$name: the sharded input did not come back as x"
    $HF dtype "$d/x" "$d/half" "$d/half_expect" || fail "$name: dtype"
    train "$d/a.json" "$d/h.log" --data "$WORK/text.bin" --init-from "$d/half" "${ZERO[@]}" --local-root "$d/ck_h"
    export_step "$d/ck_h" 1 "$d/yh"
    $HF compare "$d/half_expect" "$d/yh" --zeros-equal || fail "$name: BF16/F16 input not converted exactly"
}

case_model gpt2 tiny-gpt2 train-single train-tp2-asym
# an untied GPT-2 with V = 200: vocabulary padding at every degree (256 rows at TP 1, 512 at TP 4)
case_model gpt2-untied '{"name": "gpt2-untied", "arch": "gpt2", "n_layer": 4, "d_model": 64, "n_head": 4, "n_kv_head": 4,
  "d_ff": 256, "vocab": 200, "max_pos": 64, "tied": false, "norm_eps": 1e-5}' train-pp2-recompute train-tp4
case_model llama tiny-llama train-single train-tp2-asym
case_model llama-tp4 tiny-llama-tp4 train-pp2-recompute train-tp4

# autohet run passes --init-from to its launches: on step 5's batch its step 0 has step 5's loss.
"$AUTOHET" run --model tiny-llama --cluster cpu-hetero --data "$WORK/text5.bin" --init-from "$WORK/llama/x" --steps 1 \
    --global-batch "$B" --seq-len "$T" --work-dir "$WORK/run_ok" --quiet >"$WORK/run_ok.log" 2>&1 \
    || { cat "$WORK/run_ok.log" >&2; fail "autohet run --init-from"; }
python3 -c 'import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); r=abs(a-b)/b; print(f"  autohet run: loss {a} from x vs {b} (rel {r:.1e})"); sys.exit(r > 1e-5)' \
    "$(loss "$WORK/run_ok/metrics.jsonl" 0)" "$(loss "$WORK/llama/a.jsonl" 5)" || fail "autohet run --init-from: another loss"

# LLaMA 3.1's rope_scaling and its token ids (an eos list) go out in config.json and back in; a
# plan without the scaling refuses the directory naming the field.
llama_config "$WORK/scaled.config.json" tiny-llama false \
    '{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32}'
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); c.update(bos_token_id=250, eos_token_id=[251, 252]); json.dump(c, open(sys.argv[1], "w"))' \
    "$WORK/scaled.config.json"
plan_with_config "$PLANS/train-llama-single.json" "$WORK/scaled.config.json" tiny-llama-scaled "$WORK/scaled.json"
train "$WORK/scaled.json" "$WORK/scaled.log" --data "$WORK/text.bin" --steps 3 --ckpt-every 2 --local-root "$WORK/ck_scaled"
export_step "$WORK/ck_scaled" 2 "$WORK/scaled_x"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["rope_scaling"]; sys.exit(r != {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 32})' \
    "$WORK/scaled_x/config.json" || fail "the export's config.json lost rope_scaling: $(cat "$WORK/scaled_x/config.json")"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); sys.exit((c.get("bos_token_id"), c.get("eos_token_id"), "pad_token_id" in c) != (250, [251, 252], False))' \
    "$WORK/scaled_x/config.json" || fail "the export's config.json lost the token ids: $(cat "$WORK/scaled_x/config.json")"
train "$WORK/scaled.json" "$WORK/scaled2.log" --data "$WORK/text.bin" --steps 1 --init-from "$WORK/scaled_x"
"$AUTOHET" train --plan "$WORK/llama/a.json" --data "$WORK/text.bin" --steps 1 --init-from "$WORK/scaled_x" \
    >"$WORK/scaled3.log" 2>&1 && fail "a plan without rope_scaling took a directory with it"
grep -q "config.json: rope_scaling.factor is 8 but the plan's model tiny-llama has 0" "$WORK/scaled3.log" \
    || fail "rope_scaling mismatch: $(cat "$WORK/scaled3.log")"
echo "  rope_scaling and token ids: exported, read back, and a plan without the scaling refused"

# 4: --resume: a committed checkpoint wins over --init-from; none: --init-from is used.
d=$WORK/gpt2
train "$d/a.json" "$d/r1.log" --data "$WORK/text.bin" --steps 7 --resume --reschedule --local-root "$d/ck_a" --init-from "$d/x"
grep -q "resumed from step 6 (--init-from not used" "$d/r1.log" || fail "--resume with a checkpoint: $(cat "$d/r1.log")"
train "$d/a.json" "$d/r2.log" --data "$WORK/text.bin" --steps 1 --resume --local-root "$d/empty" --init-from "$d/x"
grep -q "initialised from $d/x" "$d/r2.log" || fail "--resume without a checkpoint: $(cat "$d/r2.log")"
# --seed draws the initial weights that --init-from gives: refused by train and run (it was ignored)
seed_msg="--seed draws the initial weights, which --init-from $d/x gives instead (the seed would be ignored)"
"$AUTOHET" train --plan "$d/a.json" --data "$WORK/text.bin" --steps 1 --init-from "$d/x" --seed 7 >"$d/seed.log" 2>&1
[ $? = 2 ] && grep -qF -- "autohet train: usage error: $seed_msg" "$d/seed.log" || fail "train --seed --init-from: $(cat "$d/seed.log")"
"$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --init-from "$d/x" --seed 7 \
    --work-dir "$WORK/seed_run" >"$d/seed_run.log" 2>&1
[ $? = 2 ] && grep -qF -- "autohet run: $seed_msg" "$d/seed_run.log" || fail "run --seed --init-from: $(cat "$d/seed_run.log")"

# 5: bad inputs, each named. bad KIND ARG EXPECTED...: the run must fail and stderr hold every
# EXPECTED string.
bad() {
    local kind=$1 arg=$2 out="$WORK/bad-$1"
    shift 2
    rm -rf "$out"
    local cut
    cut=$($HF mutate "$BAD_SRC" "$out" "$kind" "$arg") || fail "mutate $kind"
    "$AUTOHET" train --plan "$BAD_PLAN" --data "$WORK/text.bin" --steps 1 --quiet --init-from "$out" \
        >"$out.log" 2>&1 && fail "$kind $arg: training started"
    for s in "$@" ${cut:+"\"$cut\""}; do
        grep -qF -- "$s" "$out.log" || fail "$kind $arg: the message does not say '$s': $(cat "$out.log")"
    done
    echo "  $kind: $(grep -m1 "autohet train" "$out.log")"
}
BAD_SRC=$WORK/gpt2/x BAD_PLAN=$WORK/gpt2/a.json
bad config n_layer=3 "config.json: n_layer is 3" "tiny-gpt2 has 4"
bad drop transformer.h.2.mlp.c_fc.bias '"transformer.h.2.mlp.c_fc.bias"' "is missing" "model.safetensors"
bad shape transformer.ln_f.weight '"transformer.ln_f.weight" has shape [8, 8]' "needs [64]" "model.safetensors"
bad dtype transformer.h.1.attn.c_proj.weight '"transformer.h.1.attn.c_proj.weight"' 'dtype "F64" is not supported' "model.safetensors"
bad truncate - "model.safetensors" "truncated"
bad unknown transformer.h.0.attn.lora_A '"transformer.h.0.attn.lora_A" is not a tensor of the model' "model.safetensors"
bad head_differs transformer.wte.weight '"lm_head.weight" differs from the embedding transformer.wte.weight (first at element 16383)' \
    "model.safetensors" "tie_word_embeddings true"
bad head_bf16 transformer.wte.weight '"lm_head.weight" differs from the embedding transformer.wte.weight (BF16 [256, 64] against F32 [256, 64])'
bad nan transformer.h.3.mlp.c_proj.weight '"transformer.h.3.mlp.c_proj.weight" holds nan at element 0' "model.safetensors"
# a tied model's lm_head.weight written beside the embedding as an exact copy (some converters do):
# taken, and the first loss is the one from the directory without it (it was refused)
$HF mutate "$WORK/gpt2/x" "$WORK/gpt2/xhead" head_copy transformer.wte.weight >/dev/null || fail "mutate head_copy"
train "$WORK/gpt2/a.json" "$WORK/gpt2/hc.log" --data "$WORK/text5.bin" --init-from "$WORK/gpt2/xhead" --steps 1 \
    --metrics "$WORK/gpt2/hc.jsonl"
[ "$(loss "$WORK/gpt2/hc.jsonl" 0)" = "$(loss "$WORK/gpt2/c.jsonl" 0)" ] || fail "a tied head's exact copy changed the loss"
echo "  a tied model's lm_head.weight as an exact copy of the embedding: taken, the same loss"
BAD_SRC=$WORK/llama/x BAD_PLAN=$WORK/llama/a.json
bad config num_key_value_heads=4 "config.json: num_key_value_heads is 4" "tiny-llama has 2"
bad drop lm_head.weight '"lm_head.weight"' "is missing"
bad unknown model.layers.1.self_attn.q_proj.bias '"model.layers.1.self_attn.q_proj.bias" is not a tensor'
# model.safetensors beside an index and its shards: which one a loader reads is not clear
cp "$WORK/gpt2/x/model.safetensors" "$WORK/gpt2/sharded/"
"$AUTOHET" train --plan "$WORK/gpt2/a.json" --data "$WORK/text.bin" --steps 1 --init-from "$WORK/gpt2/sharded" \
    >"$WORK/e.log" 2>&1 && fail "model.safetensors beside an index: training started"
grep -qF "both $WORK/gpt2/sharded/model.safetensors and $WORK/gpt2/sharded/model.safetensors.index.json are here" "$WORK/e.log" &&
    grep -q "remove one of them" "$WORK/e.log" || fail "model.safetensors beside an index: $(cat "$WORK/e.log")"
rm "$WORK/gpt2/sharded/model.safetensors"
# a sharded directory whose index names a file that is not there
rm "$WORK/gpt2/sharded/model-00002-of-00003.safetensors"
"$AUTOHET" train --plan "$WORK/gpt2/a.json" --data "$WORK/text.bin" --steps 1 --init-from "$WORK/gpt2/sharded" \
    >"$WORK/e.log" 2>&1 && fail "a missing shard file: training started"
grep -q "model.safetensors.index.json lists tensor \".*\" in model-00002-of-00003.safetensors: .*/model-00002-of-00003.safetensors: cannot open" \
    "$WORK/e.log" || fail "missing shard file: $(cat "$WORK/e.log")"
# autohet run checks the directory against --model before planning
"$AUTOHET" run --model tiny-llama --cluster cpu-hetero --data "$WORK/text.bin" --init-from "$WORK/gpt2/x" \
    --work-dir "$WORK/run" >"$WORK/run.log" 2>&1 && fail "autohet run started with another model's directory"
grep -q "model_type is gpt2 but the plan's model tiny-llama is llama" "$WORK/run.log" || fail "autohet run: $(cat "$WORK/run.log")"
echo PASS
