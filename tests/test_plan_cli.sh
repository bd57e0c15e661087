#!/usr/bin/env bash
# autohet plan from the command line: exit codes and messages for bad inputs; -o then
# `autohet evaluate` reproduces the planner's prediction exactly (one code path); --rankfile and
# its hostfile follow the plan's rank order; --svg is well-formed XML; --baseline and
# --objective cost produce valid plans.
# Usage: bash tests/test_plan_cli.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/check_common.sh"

# run EXPECTED_RC NEEDLE ARGS...: exit code and a message containing NEEDLE (stderr + stdout)
expect() {
    local want=$1 needle=$2
    shift 2
    "$AH" plan "$@" >"$TMP/out" 2>&1
    local rc=$?
    [ "$rc" -eq "$want" ] && grep -q -- "$needle" "$TMP/out"
    local ok=$?
    check "plan $* -> rc $rc (want $want, \"$needle\"): $(head -c 300 "$TMP/out")" $ok
}

CL="$SRC/examples/clusters/cpu-hetero.json"
expect 2 "--model is required" --cluster mixed-32
expect 2 "--cluster is required" --model tiny-gpt2
expect 2 "unknown flag" --model tiny-gpt2 --cluster mixed-32 --bogus
expect 2 'expected 1 .. 65536 or "auto"' --model tiny-gpt2 --cluster mixed-32 --micro-batch x
expect 2 "expected time or cost" --model tiny-gpt2 --cluster mixed-32 --objective speed
expect 1 "unknown model" --model no-such-model --cluster mixed-32
expect 1 "neither a built-in cluster" --model tiny-gpt2 --cluster no-such-cluster
expect 1 "not divisible" --model tiny-gpt2 --cluster "$CL" --global-batch 6 --micro-batch 4 --seq-len 64
# The default precision follows the cluster: fp32 where every type runs on the CPU backend (which
# trains fp32 only), bf16 on GPUs; --precision overrides it.
expect 0 ", fp32$" --model tiny-gpt2 --cluster cpu-hetero --global-batch 8 --seq-len 64
expect 0 ", bf16$" --model tiny-gpt2 --cluster mixed-32 --global-batch 64 --seq-len 64
expect 0 ", bf16$" --model tiny-gpt2 --cluster cpu-hetero --global-batch 8 --seq-len 64 --precision bf16
expect 2 "expected fp32, bf16, fp16 or auto" --model tiny-gpt2 --cluster mixed-32 --precision fp8
expect 1 "longer than model" --model tiny-gpt2 --cluster "$CL" --seq-len 100000
# unknown GPU type in a cluster file
cat >"$TMP/badgpu.json" <<'EOF'
{"nodes": [{"name": "n0", "gpu": "Z9000", "count": 2}], "network": {"inter_node_gb_s": 10}}
EOF
expect 1 "Z9000" --model tiny-gpt2 --cluster "$TMP/badgpu.json"
# zero devices
cat >"$TMP/empty.json" <<'EOF'
{"nodes": [], "network": {"inter_node_gb_s": 10}}
EOF
expect 1 "give at least one node" --model tiny-gpt2 --cluster "$TMP/empty.json"
# a model that fits nowhere: the message names the short type, by how much, and what to do
expect 1 "short by" --model gpt3-175b --cluster "$CL" --global-batch 8 --seq-len 512
expect 1 "To fit" --model gpt3-175b --cluster "$CL" --global-batch 8 --seq-len 512

# -o, then evaluate reproduces the prediction exactly
"$AH" plan --model tiny-gpt2 --cluster "$CL" --global-batch 8 --seq-len 64 -o "$TMP/plan.json" \
    --rankfile "$TMP/ranks" --svg "$TMP/plan.svg" --json >"$TMP/plan.out" 2>"$TMP/err"
st=$?; check "plan runs: $(cat "$TMP/err")" $st
"$AH" evaluate --plan "$TMP/plan.json" --json >"$TMP/eval.out" 2>"$TMP/err"
st=$?; check "evaluate accepts the plan: $(cat "$TMP/err")" $st
$PY - "$TMP/plan.out" "$TMP/eval.out" "$TMP/plan.json" <<'EOF'
import json, sys
plan_out = json.load(open(sys.argv[1]))
ev = json.load(open(sys.argv[2]))
plan = json.load(open(sys.argv[3]))
assert plan_out["iteration_s"] == ev["iteration_s"], (plan_out["iteration_s"], ev["iteration_s"])
assert plan["predicted"]["iteration_s"] == ev["iteration_s"]
assert abs(plan_out["search_value_s"] - ev["iteration_s"]) <= 1e-12 * ev["iteration_s"]
assert ev["feasible"] is True
assert plan_out["lower_bound_s"] <= ev["iteration_s"]
for k in ("uniform", "batch-balanced", "megatron-best"):
    b = plan_out["baselines"][k]
    assert b["iteration_s"] >= ev["iteration_s"] * (1 - 1e-12), (k, b)  # the planner is never slower
EOF
check "evaluate reproduces the planner's prediction exactly" $?

# rankfile: for mpirun --map-by seq, one host line per device in (pipeline, stage, tp rank) order,
# each after "# rank R: gpu=I"; no "slot=" (Open MPI would read it as a CPU core)
$PY - "$TMP/plan.json" "$TMP/ranks" <<'EOF'
import json, re, sys
plan = json.load(open(sys.argv[1]))
lines = open(sys.argv[2]).read().splitlines()
want = [(d["node"], d["index"]) for p in plan["pipelines"] for s in p["stages"] for d in s["devices"]]
body = [l for l in lines if not l.startswith("#") or l.startswith("# rank ")]
got = []
for r in range(len(body) // 2):
    m = re.fullmatch(r"# rank (\d+): gpu=(\d+)", body[2 * r])
    assert m and int(m.group(1)) == r, body[2 * r]
    assert re.fullmatch(r"[A-Za-z0-9._-]+", body[2 * r + 1]), body[2 * r + 1]
    got.append((body[2 * r + 1], int(m.group(2))))
assert len(body) == 2 * len(got) and got == want, (got, want)
assert "slot" not in open(sys.argv[2]).read()
EOF
check "rankfile places the plan's ranks in order, GPU indices in comments" $?

# svg: well-formed XML with one device square per device
if command -v xmllint >/dev/null; then
    xmllint --noout "$TMP/plan.svg"
    check "svg is well-formed XML" $?
fi
$PY - "$TMP/plan.svg" "$TMP/plan.json" <<'EOF'
import json, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
plan = json.load(open(sys.argv[2]))
titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
devices = sum(len(s["devices"]) for p in plan["pipelines"] for s in p["stages"])
assert len(titles) == devices, (len(titles), devices)
EOF
check "svg draws every device" $?

# human report has the table, breakdown, bottleneck, bound and both speedups
"$AH" plan --model tiny-llama --cluster "$CL" --global-batch 8 --seq-len 64 >"$TMP/human" 2>&1
check "human report runs" $?
for needle in "memory used / capacity" "breakdown:" "bottleneck:" "lower bound:" "speedup over uniform" \
    "speedup over batch-balanced" "why:"; do
    grep -q -- "$needle" "$TMP/human"
    check "report shows \"$needle\"" $?
done

# baselines and the cost objective give plans that evaluate to what plan printed
for extra in "--baseline uniform" "--baseline batch-balanced" "--baseline megatron-best" "--objective cost" \
    "--objective cost --min-tokens-per-s 1"; do
    # shellcheck disable=SC2086
    "$AH" plan --model tiny-gpt2 --cluster "$CL" --global-batch 8 --seq-len 64 $extra -o "$TMP/b.json" --json \
        >"$TMP/b.out" 2>"$TMP/err"
    st=$?; check "plan $extra runs: $(cat "$TMP/err")" $st
    "$AH" evaluate --plan "$TMP/b.json" --json >"$TMP/be.out" 2>"$TMP/err"
    st=$?; check "evaluate accepts the $extra plan: $(cat "$TMP/err")" $st
    $PY -c "import json,sys; a=json.load(open('$TMP/b.out')); b=json.load(open('$TMP/be.out')); sys.exit(a['iteration_s'] != b['iteration_s'])"
    check "evaluate reproduces the $extra plan's prediction" $?
done
# --objective cost compares with the baselines in $ per token: never dearer than any (a saving
# >= 1), each baseline priced as --baseline prices it; the time bound is said to be one of time
"$AH" plan --model llama2-7b --cluster mixed-32 --objective cost >"$TMP/cost.txt" 2>&1
st=$?; check "plan --objective cost runs" $st
grep -q "^saving over  uniform .*x (\$[0-9.]* per million tokens" "$TMP/cost.txt" && ! grep -q "speedup over" "$TMP/cost.txt" &&
    grep -q "^lower bound on time: .* not on \$ per token" "$TMP/cost.txt"
st=$?; check "plan --objective cost reports savings in \$ per token, not speedups: $(grep -E 'saving|speedup|bound' "$TMP/cost.txt")" $st
"$AH" plan --model llama2-7b --cluster mixed-32 --objective cost --json >"$TMP/cost.json" 2>"$TMP/err"
st=$?; check "plan --objective cost --json runs: $(cat "$TMP/err")" $st
for b in uniform batch-balanced megatron-best; do
    "$AH" plan --model llama2-7b --cluster mixed-32 --objective cost --baseline $b --json >"$TMP/cost-$b.json" 2>"$TMP/err"
    $PY - "$TMP/cost.json" "$TMP/cost-$b.json" $b <<'PY'
import json, sys
plan, base, name = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
b = plan["baselines"][name]
assert b["saving"] >= 1 - 1e-12, (name, b)
assert abs(b["usd_per_mtoken"] - base["usd_per_mtoken"]) <= 1e-12 * base["usd_per_mtoken"], (b, base["usd_per_mtoken"])
assert abs(b["saving"] * plan["usd_per_mtoken"] - b["usd_per_mtoken"]) <= 1e-9 * b["usd_per_mtoken"], b
PY
    check "plan --objective cost: $b's \$ per token is what --baseline $b gives, and no cheaper than the plan's" $?
done
# --baseline X reports X's own plan: not as a search result taken from a baseline
"$AH" plan --model llama2-7b --cluster mixed-32 --baseline uniform >"$TMP/base.txt" 2>&1
st=$?
[ $st -eq 0 ] && ! grep -q "^search: nothing it scored" "$TMP/base.txt" && ! grep -q " 0 candidates scored" "$TMP/base.txt"
st=$?; check "plan --baseline uniform says no search line and the planner's candidates: $(grep -E '^search|candidates' "$TMP/base.txt")" $st
# an unreachable throughput floor is a clear infeasibility
expect 1 "no plan reaches --min-tokens-per-s 1000000000000000: the fastest plan .*; lower --min-tokens-per-s$" \
    --model tiny-gpt2 --cluster "$CL" --global-batch 8 --seq-len 64 --min-tokens-per-s 1e15
# a budget under every plan's price names --budget alone and a budget that admits a plan (more in
# test_plan_newuser.sh); a budget of 0 is refused, not taken as none
expect 1 "every plan costs more than --budget \$1.00/h; .*, so --budget [0-9.]* admits a plan" --model llama2-7b --cluster mixed-32 --budget 1
expect 2 "--budget: expected > 0, got 0" --model llama2-7b --cluster mixed-32 --budget 0
# a directory given as a JSON file is said to be one
expect 1 "$TMP: is a directory, not a JSON file" --model tiny-gpt2 --cluster "$TMP"
# evaluate_broken EDIT NAME NEEDLE WHAT: train-single.json with the Python statement EDIT applied to
# its dict d, saved as NAME.json, is refused by evaluate (exit 1) with a message holding NEEDLE
evaluate_broken() {
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); $1; json.dump(d, open(sys.argv[2], 'w'))" \
        "$SRC/examples/plans/train-single.json" "$TMP/$2.json"
    "$AH" evaluate --plan "$TMP/$2.json" >"$TMP/out" 2>&1
    local rc=$?
    [ $rc -eq 1 ] && grep -q -- "$3" "$TMP/out"
    local ok=$?
    check "evaluate: $4: $(cat "$TMP/out")" $ok
}
# evaluate: a plan's unknown model preset and a missing version name the plan file
evaluate_broken "d['model']='gpt5'" gpt5 "$TMP/gpt5.json: model: unknown model \"gpt5\"" \
    "names the plan file of an unknown model"
evaluate_broken "del d['version']" nover "nover.json: missing field \"version\" (this autohet reads plan version 1" \
    "a plan without a version says which it reads"
# without --seq-len a model with a context under 2048 plans at its context
expect 0 "\"seq_len\": 1024" --model gpt2-124m --cluster mixed-32 --global-batch 64 --json
expect 2 "exact-max-groups: expected 1 .. 4096" --model tiny-gpt2 --cluster "$CL" --exact-max-groups 0
expect 2 "expected uniform, batch-balanced or megatron-best, got \"megatron\"" --model tiny-gpt2 --cluster "$CL" \
    --baseline megatron
# A GPU type the plan leaves idle, entirely or in part, is named with the best plan using (more
# of) it that the search scored
# (ranked behind the chosen one by the search's estimate) and the terms that grow: mixed-32's H20s sit
# in another zone, so using them adds the bubble and p2p of pipelines across it (llama2-7b at 32 x
# 4096). A plan using every type has no such line. (Before: llama2-13b at 32 x 2048, whose H20
# plan grew the cross-zone DP sync; since the hops are priced scatter/gather (session 19) the
# chosen plan there uses the H20s, with TP-2 pipelines across the zones. Before that, llama2-7b at
# 256 x 2048, until each DP group was priced on its own ring.)
"$AH" plan --model llama2-7b --cluster mixed-32 --global-batch 32 --seq-len 4096 >"$TMP/idle.out" 2>&1
grep -q "^idle: H20, 8 GPUs on h20-0: the best plan with them that the search scored (TP [0-9]*, micro-batch [0-9]*, [0-9]* pipelines\?) takes [0-9.]* s per iteration, +[0-9.]* % on the chosen plan's: [a-zA-Z ]* [0-9.e-]* s (chosen " "$TMP/idle.out"
st=$?; check "plan names the idle H20s, how much slower using them is and why: $(grep -m1 '^idle' "$TMP/idle.out")" $st
"$AH" plan --model llama2-7b --cluster mixed-32 --global-batch 512 --seq-len 4096 --objective cost >"$TMP/idle.out" 2>&1
grep -q "^idle: .*H20, 8 GPUs on h20-0: the best plan with them that the search scored (TP [0-9]*, [^)]*) costs \$[0-9.]* per million tokens, +[0-9.]* % on the chosen plan's" "$TMP/idle.out"
st=$?; check "--objective cost: the idle H20s' plan priced per token: $(grep -m1 '^idle' "$TMP/idle.out")" $st
# The cheapest plan there uses some of the H800s only (its pipeline does not need more): the
# type's idle GPUs are named with the best plan using more of them that the search scored.
grep -q "^idle: .*H800, [1-7] of 8 GPUs used, on h800-0: the best plan with more of them that the search scored ([2-8] of them, TP [0-9]*, [^)]*) costs \$[0-9.]* per million tokens, +[0-9.]* % on the chosen plan's" "$TMP/idle.out"
st=$?; check "--objective cost: the partly idle H800s are named with a plan using more of them: $(grep -m1 '^idle' "$TMP/idle.out")" $st
# Where the evaluation finds that plan faster than the chosen one (the search ranks the candidates
# by its own estimate), the line says so with both estimates: no negative percentage.
"$AH" plan --model llama2-7b --cluster mixed-32 --schedule interleaved --micro-batch 2 >"$TMP/idle.out" 2>&1
grep -q "^idle: H20, 8 GPUs on h20-0: .* takes [0-9.]* s per iteration, [0-9.]* % less than the chosen plan's as evaluated, though the search's own estimate, by which it ranks the candidates, put it at [0-9.]* s per iteration against the chosen plan's [0-9.]* s" "$TMP/idle.out" &&
    ! grep -q "^idle:.* -[0-9.]* %" "$TMP/idle.out"
st=$?; check "an idle type's plan the evaluation finds faster is said so, with the search's estimates: $(grep -m1 '^idle' "$TMP/idle.out")" $st
"$AH" plan --model llama2-7b --cluster mixed-32 --global-batch 32 --seq-len 4096 --json >"$TMP/idle.json" 2>&1
$PY -c "import json,sys; d=json.load(open('$TMP/idle.json')); sys.exit(not d['idle'].startswith('H20, 8 GPUs on h20-0: '))"
check "--json carries the idle note" $?
# a sharded optimizer that replaces the plan drops the note (its comparisons were unsharded)
"$AH" plan --model llama2-7b --cluster mixed-32 --global-batch 512 --seq-len 4096 --shard-optimizer even >"$TMP/idle.out" 2>&1
grep -q "^optimizer: AdamW state sharded" "$TMP/idle.out" && ! grep -q "^idle:" "$TMP/idle.out"
check "--shard-optimizer even: a sharded plan, no idle note" $?
"$AH" plan --model tiny-gpt2 --cluster "$CL" --global-batch 8 --seq-len 64 --json >"$TMP/all.json" 2>&1
$PY -c "import json,sys; d=json.load(open('$TMP/all.json')); sys.exit(d['idle'] is not None or len({s['gpu'] for p in d['plan']['pipelines'] for s in p['stages']}) < 2)"
check "a plan on every GPU type has no idle note" $?

# megatron-best with context parallelism (one degree for all): its degree in --json and "why"
# naming the CP difference (llama3.1-8b at 16k on paper-24: the plan unsplit, megatron-best CP 4)
"$AH" plan --model llama3.1-8b --cluster "$SRC/examples/clusters/paper-24.json" --global-batch 16 --seq-len 16384 \
    --json >"$TMP/cp.json" 2>/dev/null
$PY - "$TMP/cp.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
mb = d["baselines"]["megatron-best"]
assert mb["cp"] == 4, mb
assert "CP 1 (baseline 4)" in d["why"]["megatron-best"], d["why"]["megatron-best"]
assert all(b["cp"] == 1 for k, b in d["baselines"].items() if k != "megatron-best"), d["baselines"]
EOF
check "megatron-best's CP degree in --json and why" $?

# Where nothing fits unsplit nor with the optimizer sharded alone, --shard-optimizer auto tries CP
# with the optimizer sharded over the CP ranks (Megatron-Core's distributed optimizer over DP x CP);
# a CP plan of the view that does not fit expanded is searched again with the overshoot reserved:
# llama3.1-70b at 128k on paper-64 fits only that way (CP 4, 0.3-0.7 GiB over without the retry)
P64="$SRC/examples/clusters/paper-64.json"
"$AH" plan --model llama3.1-70b --cluster "$P64" --global-batch 8 --seq-len 131072 --cp 1 --shard-optimizer auto \
    >"$TMP/cp1.out" 2>&1
[ $? -eq 1 ] && grep -q "needs 113270063104 bytes of its 85899345920" "$TMP/cp1.out"
st=$?
check "llama3.1-70b at 128k fits nothing unsplit, sharded or not: $(head -c 200 "$TMP/cp1.out")" $st
"$AH" plan --model llama3.1-70b --cluster "$P64" --global-batch 8 --seq-len 131072 --shard-optimizer auto --json \
    >"$TMP/cpshard.json" 2>/dev/null
$PY - "$TMP/cpshard.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["plan"]
assert all(pl.get("cp", 1) >= 2 for pl in p["pipelines"]), p["pipelines"]
assert p["optimizer_shards"], "not sharded"
assert "the optimizer sharded over its CP ranks" in d["context_parallel"], d["context_parallel"]
EOF
check "CP with the optimizer sharded over the CP ranks fits where neither alone does" $?

checks_done
