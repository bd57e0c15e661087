#!/usr/bin/env bash
# The `model`, `evaluate` and `tokenize` verbs end to end: outputs for people and --json (parsed), exit codes
# (2 for usage errors, 1 for bad input), --help. Usage: bash tests/test_cli.sh BUILD_DIR SOURCE_DIR
set -u
BUILD=${1:?build dir}
SRC=${2:?source dir}
AH="$BUILD/autohet"
PLANS="$SRC/examples/plans"
TMP=$(mktemp -d)
# Debian's python3 directly: a pyenv shim on PATH costs ~2 s a start, and only json is needed.
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*" >&2; }

# run NAME WANT_RC CMD...: runs CMD, keeps stdout/stderr in $TMP/out, $TMP/err, checks the exit code
run() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok; else bad "$name: exit $rc, want $want; stderr: $(head -c 600 "$TMP/err")"; fi
}
# has NAME FILE TEXT: FILE ($TMP/out or $TMP/err) contains TEXT
has() {
    if grep -qF -- "$3" "$TMP/$2"; then ok; else bad "$1: $2 lacks \"$3\": $(head -c 600 "$TMP/$2")"; fi
}
# py NAME SCRIPT: python asserts on the JSON in $TMP/out (bound to d)
py() {
    if "$PY" -c "import json,sys; d=json.load(open('$TMP/out')); $2" 2>"$TMP/pyerr"; then ok
    else bad "$1: $(tail -n 3 "$TMP/pyerr")"; fi
}

# ---- autohet, autohet --help ----
run "no verb" 2 "$AH"
run "--help" 0 "$AH" --help
has "--help lists evaluate" out "evaluate"
has "--help lists model" out "model"
run "help" 0 "$AH" help
has "help lists simulate" out "simulate"
run "help VERB" 0 "$AH" help plan
has "help VERB is the verb's --help" out "usage: autohet plan"
run "help of no verb" 2 "$AH" help planner
has "help of no verb named" err "autohet help: unknown verb \"planner\""

# ---- model ----
run "model gpt2-124m" 0 "$AH" model --model gpt2-124m --seq-len 1024 --micro-batch 4 --tp 2
has "model: total params" out "124439808"
has "model: block row" out "block"
has "model: the CP table" out "per CP rank (context parallelism"
has "model: head row" out "head"
run "model --json" 0 "$AH" model --model gpt2-124m --seq-len 1024 --json
py "model --json fields" "
assert d['params_total'] == 124439808, d['params_total']
kinds = [l['kind'] for l in d['layers']]
assert kinds == ['embedding', 'block', 'head'], kinds
blk = d['layers'][1]
assert blk['count'] == 12
# GPT-2 block: 12C^2 + 13C parameters at t = 1
assert blk['params_per_rank'] == 12*768*768 + 13*768, blk['params_per_rank']
# contract: block fwd = 2N(4C^2 + 2CF) + 4NTC with N = 1024 tokens
N, C, F, T = 1024, 768, 3072, 1024
assert blk['fwd_flops_per_mb'] == 2*N*(4*C*C + 2*C*F) + 4*N*T*C, blk['fwd_flops_per_mb']
assert blk['bwd_flops_per_mb'] == 2*blk['fwd_flops_per_mb']
assert blk['act_bytes_per_mb_recompute'] < blk['act_bytes_per_mb']
assert d['state_bytes_per_param'] == 16
tot = sum(l['count']*(l['fwd_flops_per_mb'] + l['bwd_flops_per_mb']) for l in d['layers'])
assert abs(d['flops_per_token'] - tot/N) <= 1e-9*tot/N
# activation bytes per CP degree: cp 1 is the layers' own; bf16 (no T x T matrix): a CP rank
# keeps 1/cp of the block's bytes and the ring's buffers once
cp = {r['cp']: r for r in d['cp']}
assert sorted(cp) == [1, 2, 4, 8], sorted(cp)
assert cp[1]['block_act_bytes_per_mb'] == blk['act_bytes_per_mb'] and cp[1]['ring_bytes'] == 0
assert cp[1]['model_act_bytes_per_mb'] == sum(l['count']*l['act_bytes_per_mb'] for l in d['layers'])
for c in (2, 4, 8):
    assert cp[c]['tokens_per_rank'] == 1024 // c
    assert cp[c]['block_act_bytes_per_mb'] * c == cp[1]['block_act_bytes_per_mb'], (c, cp[c])
    assert cp[c]['model_act_bytes_per_mb_recompute'] * c == cp[1]['model_act_bytes_per_mb_recompute'], (c, cp[c])
    assert cp[c]['ring_bytes'] > 0 and (c == 2 or 2 * cp[c]['ring_bytes'] == cp[c // 2]['ring_bytes']), (c, cp[c])
"
# per-rank params include the vocabulary padding (50257 -> 50432 at t = 2), the total does not
run "model gpt2-124m tp 2" 0 "$AH" model --model gpt2-124m --tp 2
has "model legend: padding per rank" out "params: per TP rank, vocabulary padding included (V 50257 padded to 50432"
has "model legend: total without" out "the total above is the model's own, no padding"
run "model gpt2-124m tp 2 --json" 0 "$AH" model --model gpt2-124m --tp 2 --json
py "model --json padding" "
C, P = 768, 1024
assert d['params_total'] == 124439808 and d['vocab_padded'] == 50432, (d['params_total'], d['vocab_padded'])
emb, blk, head = d['layers']
assert emb['params_per_rank'] == 50432 // 2 * C + P * C, emb['params_per_rank']
assert emb['params_content'] == 50257 * C + P * C, emb['params_content']
assert head['params_per_rank'] == head['params_content'] == 2 * C  # tied: ln_f only
assert sum(l['count'] * l['params_content'] for l in d['layers']) == d['params_total']
# the head multiplies by the rank's 25216 rows: 2 N C Vp/t with N = 1024 tokens
assert head['fwd_flops_per_mb'] == 2 * 1024 * C * 25216, head['fwd_flops_per_mb']
"
run "model llama3-8b tp 8 --json" 0 "$AH" model --model llama3-8b --tp 8 --json
py "model llama3-8b padding" "
assert d['params_total'] == 8030261248 and d['vocab_padded'] == 129024
emb, blk, head = d['layers']
assert emb['params_per_rank'] == 129024 // 8 * 4096 and emb['params_content'] == 128256 * 4096
assert head['params_per_rank'] == 4096 + 129024 // 8 * 4096
"
# the LLaMA 3.1 presets carry their context and "llama3" rotary scaling (text and JSON)
run "model llama3.1-8b" 0 "$AH" model --model llama3.1-8b --seq-len 8192
has "model llama3.1-8b scaling" out "context 131072 (rotary scaled x8 from 8192, llama3)"
run "model llama3.1-70b --json" 0 "$AH" model --model llama3.1-70b --seq-len 8192 --json
py "model llama3.1-70b" "
m = d['model']
assert d['params_total'] == 70553706496 and m['max_pos'] == 131072 and m['rope_theta'] == 500000
assert m['rope_scaling'] == {'rope_type': 'llama3', 'factor': 8.0, 'low_freq_factor': 1.0, 'high_freq_factor': 4.0,
                             'original_max_position_embeddings': 8192}, m['rope_scaling']
"
run "model llama2-7b tp 4" 0 "$AH" model --model llama2-7b --tp 4 --precision fp32 --json
py "model llama2-7b" "assert d['params_total'] == 6738415616 and d['tp'] == 4 and d['precision'] == 'fp32'"
run "model tp 3 does not split" 1 "$AH" model --model llama2-7b --tp 3
has "model tp 3 message" err "cannot be split 3 ways by tensor parallelism: its attention head count 32 is not divisible by 3"
# a bf16 plan on CPU-emulated types: planned and scored, with a note that the trainer refuses it
run "plan bf16 on cpu types" 0 "$AH" plan --model tiny-gpt2 --cluster cpu-hetero --global-batch 4 --seq-len 32 --precision bf16 -o "$TMP/bf16.json"
has "plan bf16 note" err "autohet plan: note: the plan trains bf16, but its device type cpu-"
run "evaluate bf16 on cpu types" 0 "$AH" evaluate --plan "$TMP/bf16.json"
has "evaluate bf16 note" err "runs on the CPU backend, which trains fp32 only: autohet train will refuse it"
run "model unknown preset" 1 "$AH" model --model gpt5
has "model unknown preset lists presets" err "gpt2-124m"
run "model seq-len too long" 2 "$AH" model --model gpt2-124m --seq-len 4096
has "model seq-len message" err "--seq-len"
run "model without --model" 2 "$AH" model
run "model bad flag" 2 "$AH" model --model gpt2-124m --bogus
run "model bad integer" 2 "$AH" model --model gpt2-124m --tp two
# a value outside its flag's range is refused by the flag parser, before the verb runs
run "model tp out of range" 2 "$AH" model --model gpt2-124m --tp 0
has "model tp range message" err "autohet model: --tp: expected 1 .. 1024, got 0"
run "model micro-batch out of range" 2 "$AH" model --model gpt2-124m --micro-batch=-2
has "model micro-batch range message" err "--micro-batch: expected 1 .. 65536, got -2"
run "profile rounds out of range" 2 "$AH" profile --model tiny-gpt2 --rounds 1001 -o "$TMP/p.json"
has "profile rounds range message" err "--rounds: expected 1 .. 1000, got 1001"
run "plan budget negative" 2 "$AH" plan --model tiny-gpt2 --cluster cpu-hetero --budget -0.5
has "plan budget range message" err "--budget: expected > 0, got -0.5"
run "simulate micro-batch negative" 2 "$AH" simulate --model tiny-gpt2 --cluster cpu-hetero --micro-batch -1
has "simulate micro-batch range message" err "--micro-batch: expected 1 .. 65536 or \"auto\", got \"-1\""
# ---- HF config fields the runtime does not compute: refused by model and plan alike ----
LLAMA='"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":176,"vocab_size":256,"max_position_embeddings":256'
GPT2='"model_type":"gpt2","n_layer":2,"n_embd":64,"n_head":4,"vocab_size":256,"n_positions":64'
# name|config body|text the message must hold
while IFS='|' read -r name body want; do
    printf '{%s}\n' "$body" >"$TMP/$name.json"
    for verb in model plan; do
        extra=()
        [ "$verb" = plan ] && extra=(--cluster cpu-hetero --global-batch 8 --seq-len 64)
        run "$verb refuses $name" 1 "$AH" "$verb" --model "$TMP/$name.json" "${extra[@]}"
        has "$verb refuses $name: field and value" err "$want"
    done
done <<EOF
attention_bias|"model_type":"llama",$LLAMA,"attention_bias":true|$TMP/attention_bias.json.attention_bias: true
mistral_bias|"model_type":"mistral",$LLAMA,"attention_bias":true|$TMP/mistral_bias.json.attention_bias: true
mlp_bias|"model_type":"llama",$LLAMA,"mlp_bias":true|$TMP/mlp_bias.json.mlp_bias: true
rope_scaling|"model_type":"llama",$LLAMA,"rope_scaling":{"rope_type":"linear","factor":2.0}|rope_scaling.rope_type is "linear": the runtime implements LLaMA 3.1's "llama3" rotary scaling only
hidden_act|"model_type":"llama",$LLAMA,"hidden_act":"relu"|hidden_act: "relu"
head_dim|"model_type":"llama",$LLAMA,"head_dim":8|head_dim: 8 x 4 heads != hidden_size 64
attention_dropout|"model_type":"llama",$LLAMA,"attention_dropout":0.1|attention_dropout: 0.1; the runtime trains without dropout
erf_gelu|$GPT2,"activation_function":"gelu"|activation_function: "gelu"; Hugging Face's "gelu" is the exact (erf) GELU
relu|$GPT2,"activation_function":"relu"|activation_function: "relu"
EOF
# what the runtime computes loads: the tanh GELUs, an untied GPT-2 head, null rope_scaling
printf '{%s,"activation_function":"gelu_pytorch_tanh","tie_word_embeddings":false}\n' "$GPT2" >"$TMP/untied.json"
run "model untied gpt2 tanh gelu" 0 "$AH" model --model "$TMP/untied.json"
has "model untied gpt2: untied" out "untied head"
# GPT-2's dropout fields (0.1 in the published gpt2 config) load, and model says they are not applied
printf '{%s,"attn_pdrop":0.1,"embd_pdrop":0.1,"resid_pdrop":0.1}\n' "$GPT2" >"$TMP/pdrop.json"
run "model gpt2 with dropout" 0 "$AH" model --model "$TMP/pdrop.json"
has "model gpt2 with dropout: note" out "note: dropout is not applied: autohet trains without it (config: attn_pdrop 0.1, embd_pdrop 0.1, resid_pdrop 0.1)"
run "plan untied gpt2" 0 "$AH" plan --model "$TMP/untied.json" --cluster cpu-hetero --global-batch 8 --seq-len 64 -o "$TMP/untied-plan.json"
printf '{"model_type":"llama",%s,"rope_scaling":null,"hidden_act":"silu","attention_bias":false,"mlp_bias":false}\n' "$LLAMA" >"$TMP/plain.json"
run "model plain llama" 0 "$AH" model --model "$TMP/plain.json"
# a sliding window shorter than the context: kept, and a longer sequence refused (model and plan)
printf '{"model_type":"mistral",%s,"sliding_window":128}\n' "$LLAMA" >"$TMP/window.json"
run "model sliding window" 0 "$AH" model --model "$TMP/window.json"
has "model sliding window: default seq-len is the window" out "seq-len 128 ="
has "model sliding window: shown" out "(sliding window 128)"
run "model seq-len past the window" 1 "$AH" model --model "$TMP/window.json" --seq-len 129
has "model seq-len past the window: message" err "--seq-len 129 is longer than model $TMP/window.json's sliding attention window of 128 tokens (config sliding_window)"
run "plan seq-len past the window" 1 "$AH" plan --model "$TMP/window.json" --cluster cpu-hetero --global-batch 8 --seq-len 256
has "plan seq-len past the window: message" err "--seq-len 256 is longer than model $TMP/window.json's sliding attention window of 128"
run "profile seq-len past the window" 1 "$AH" profile --model "$TMP/window.json" --seq-len 256 -o "$TMP/wp.json"
has "profile seq-len past the window: message" err "sliding attention window of 128"
run "plan within the window" 0 "$AH" plan --model "$TMP/window.json" --cluster cpu-hetero --global-batch 8 --seq-len 128 -o "$TMP/window-plan.json"
"$PY" -c "
import json
d = json.load(open('$TMP/window-plan.json'))
assert d['model']['sliding_window'] == 128, d['model']
d['train']['seq_len'] = 256
json.dump(d, open('$TMP/window-long.json', 'w'))
"
run "evaluate a plan past the window" 1 "$AH" evaluate --plan "$TMP/window-long.json"
has "evaluate a plan past the window: message" err "[train] train.seq_len: 256 is longer than model"

run "model --help" 0 "$AH" model --help
for f in --model --seq-len --micro-batch --tp --precision --json; do has "model --help $f" out "$f"; done

# ---- evaluate: the examples, for people and as JSON ----
for plan in "$PLANS"/*.json; do
    name=$(basename "$plan")
    run "evaluate $name" 0 "$AH" evaluate --plan "$plan"
    has "evaluate $name: iteration" out "iteration"
    ! grep -q '"cp":' "$plan" || has "evaluate $name: the ring's time" out "CP ring"
    has "evaluate $name: bottleneck" out "bottleneck: pipeline"
    has "evaluate $name: breakdown" out "DP sync"
    run "evaluate --json $name" 0 "$AH" evaluate --plan "$plan" --json
    py "evaluate --json $name" "
plan = json.load(open('$plan'))
# rank order is (pipeline, device, tp rank) as in the file, a device counted once (an interleaved
# pipeline's device holds several stages)
order = list(dict.fromkeys((dv['node'], dv['index']) for p in plan['pipelines'] for s in p['stages'] for dv in s['devices']))
ndev = len(order)
assert d['feasible'] is True
assert d['iteration_s'] > 0
B, T = plan['train']['global_batch'], plan['train']['seq_len']
assert abs(d['tokens_per_s'] - B*T/d['iteration_s']) <= 1e-9*d['tokens_per_s']
assert len(d['devices']) == ndev, (len(d['devices']), ndev)
for dev in d['devices']:
    assert set(['node', 'index', 'memory_bytes', 'capacity_bytes']) <= set(dev)
    assert 0 < dev['memory_bytes'] <= dev['capacity_bytes']
assert order == [(dv['node'], dv['index']) for dv in d['devices']]
b = d['breakdown']
keys = ['compute_s', 'bubble_s', 'p2p_s', 'tp_comm_s', 'cp_comm_s', 'dp_sync_s', 'optimizer_s', 'ckpt_s']
assert (b['cp_comm_s'] > 0) == any(p.get('cp', 1) > 1 for p in plan['pipelines']), b['cp_comm_s']
assert sorted(b) == sorted(keys), sorted(b)
assert abs(sum(b[k] for k in keys) - d['iteration_s']) <= 1e-9*d['iteration_s']
bn = d['bottleneck']
assert 0 <= bn['pipeline'] < len(plan['pipelines']) and bn['reason']
assert bn['gpu'] == plan['pipelines'][bn['pipeline']]['stages'][bn['stage']]['gpu']
"
done

# ---- evaluate: errors ----
run "evaluate missing file" 1 "$AH" evaluate --plan "$TMP/nope.json"
has "evaluate missing file names it" err "$TMP/nope.json"
run "evaluate without --plan" 2 "$AH" evaluate
run "evaluate bad flag" 2 "$AH" evaluate --plan "$PLANS/cpu-hetero-tiny-gpt2.json" --bogus
run "evaluate --help" 0 "$AH" evaluate --help
for f in --plan --cluster --profile --json; do has "evaluate --help $f" out "$f"; done
run "evaluate missing profile" 1 "$AH" evaluate --plan "$PLANS/cpu-hetero-tiny-gpt2.json" --profile "$TMP/none.json"
has "evaluate missing profile names it" err "$TMP/none.json"

# a profile replaces the roofline for the (type, tp, micro-batch, seq-len, precision) it has
cat >"$TMP/profile.json" <<'JSON'
{"version": 2, "host": "test", "model": "tiny-gpt2", "entries": [
 {"gpu": "cpu-fast", "tp": 1, "micro_batch": 1, "seq_len": 64, "precision": "fp32",
  "includes_tp_comm": false, "block": {"fwd_s": 0.01, "bwd_s": 0.02, "act_bytes": 0}}]}
JSON
run "evaluate --profile" 0 "$AH" evaluate --plan "$PLANS/cpu-hetero-tiny-gpt2.json" --profile "$TMP/profile.json" --json
py "evaluate --profile uses the measured blocks" "
st = d['pipelines'][0]['stages']
# pipeline 0: two cpu-fast stages of two blocks each, 10 ms + 20 ms measured per block
assert st[1]['fwd_s'] >= 0.02 and st[1]['bwd_s'] >= 0.04, st[1]
assert st[1]['fwd_s'] < 0.021 and st[1]['bwd_s'] < 0.041, st[1]
slow = d['pipelines'][1]['stages'][0]
assert slow['fwd_s'] < 0.005, slow  # cpu-slow is not in the profile: roofline
"

# an invalid plan: a layer gap in pipeline 1
"$PY" -c "
import json
d = json.load(open('$PLANS/cpu-hetero-tiny-gpt2.json'))
d['pipelines'][1]['stages'][1]['layers'] = [2, 2]
json.dump(d, open('$TMP/invalid.json', 'w'))
d['pipelines'][1]['stages'][1]['layers'] = [1, 2]
d['pipelines'][1]['stages'][2]['layers'] = [3, 3]
json.dump(d, open('$TMP/gap.json', 'w'))
"
run "evaluate invalid plan" 1 "$AH" evaluate --plan "$TMP/invalid.json"
has "evaluate invalid: rule and place" err "[layers] pipelines[1].stages[1].layers"
has "evaluate invalid: file" err "$TMP/invalid.json"
run "evaluate invalid plan --json" 1 "$AH" evaluate --plan "$TMP/gap.json" --json
has "evaluate gap: rule" err "[layers] pipelines[1].stages[2]"

# JSON syntax error: file:line:column
printf '{\n  "version": 1,\n  "tp": ,\n}\n' >"$TMP/syntax.json"
run "evaluate syntax error" 1 "$AH" evaluate --plan "$TMP/syntax.json"
has "evaluate syntax error position" err "$TMP/syntax.json:3:9:"

# no cluster in the plan: --cluster is needed, and works
"$PY" -c "
import json
d = json.load(open('$PLANS/mixed32-llama2-7b.json'))
del d['cluster']
json.dump(d, open('$TMP/nocluster.json', 'w'))
"
run "evaluate plan without cluster" 1 "$AH" evaluate --plan "$TMP/nocluster.json"
has "evaluate plan without cluster says --cluster" err "--cluster"
run "evaluate --cluster mixed-32" 0 "$AH" evaluate --plan "$TMP/nocluster.json" --cluster mixed-32 --json
py "evaluate --cluster mixed-32 same as embedded" "
import subprocess
e = json.loads(subprocess.run(['$AH', 'evaluate', '--plan', '$PLANS/mixed32-llama2-7b.json', '--json'],
                              capture_output=True, check=True).stdout)
assert d['iteration_s'] == e['iteration_s'], (d['iteration_s'], e['iteration_s'])
"
run "evaluate --cluster unknown" 1 "$AH" evaluate --plan "$TMP/nocluster.json" --cluster no-such-cluster

# infeasible: the same tiny plan on a cluster whose emulated devices have 1 MiB
"$PY" -c "
import json
c = {'gpu_types': {
       'cpu-fast': {'memory_gib': 1, 'tflops': {'bf16': 0.05, 'fp16': 0.05, 'fp32': 0.05},
                    'mem_bw_gb_s': 10, 'intra_node_gb_s': 5, 'emulate': {'slowdown': 1, 'memory_mib': 1}},
       'cpu-slow': {'memory_gib': 1, 'tflops': {'bf16': 0.02, 'fp16': 0.02, 'fp32': 0.02},
                    'mem_bw_gb_s': 3, 'intra_node_gb_s': 5, 'emulate': {'slowdown': 3, 'memory_mib': 512}}},
     'nodes': [{'name': 'fast-0', 'gpu': 'cpu-fast', 'count': 2},
               {'name': 'slow-0', 'gpu': 'cpu-slow', 'count': 2},
               {'name': 'slow-1', 'gpu': 'cpu-slow', 'count': 2}]}
json.dump(c, open('$TMP/small.json', 'w'))
"
run "evaluate infeasible" 1 "$AH" evaluate --plan "$PLANS/cpu-hetero-tiny-gpt2.json" --cluster "$TMP/small.json"
has "evaluate infeasible: table still printed" out "OVER CAPACITY"
has "evaluate infeasible: iteration still printed" out "iteration"
has "evaluate infeasible: memory rule" err "memory"
has "evaluate infeasible: names the device" err "fast-0"
run "evaluate infeasible --json" 1 "$AH" evaluate --plan "$PLANS/cpu-hetero-tiny-gpt2.json" --cluster "$TMP/small.json" --json
py "evaluate infeasible --json" "
assert d['feasible'] is False
over = [v for v in d['devices'] if v['memory_bytes'] > v['capacity_bytes']]
assert over and all(v['node'] == 'fast-0' for v in over), over
"

# ---- tokenize ----
printf 'hello' >"$TMP/a.txt"
run "tokenize" 0 "$AH" tokenize "$TMP/a.txt" -o "$TMP/a.bin"
has "tokenize counts the bytes" out "5 tokens"
run "tokenize two texts" 2 "$AH" tokenize "$TMP/a.txt" "$TMP/b.txt" -o "$TMP/a.bin"
has "tokenize two texts: says so" err "one TEXT file expected"
run "tokenize without -o" 2 "$AH" tokenize "$TMP/a.txt"
run "tokenize a directory" 1 "$AH" tokenize "$TMP" -o "$TMP/d.bin"
has "tokenize a directory: says so" err "$TMP: is a directory; tokenize takes one text file"
run "tokenize into a missing directory" 1 "$AH" tokenize "$TMP/a.txt" -o "$TMP/none/sub/a.bin"
has "tokenize into a missing directory: names the path given and the directory" err \
    "$TMP/none/sub/a.bin: cannot create: the directory $TMP/none/sub does not exist"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
