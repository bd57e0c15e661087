# The planner's context-parallel degree (--cp auto|1|2|4|8; planner/cp_choice.c, docs/planner.md
# "Context parallelism"), end to end on emulated CPU clusters (mostly one node of 4 devices):
#  - plan --cp 2 (tiny-gpt2, 64 tokens): every pipeline "cp": 2 with 2 x tp devices a stage, the
#    plan evaluates and checks (autohet evaluate), says "context parallelism: ... 2 ways (--cp 2)",
#    and trains 2 steps;
#  - --cp 1 and the default (auto) at 64 tokens: no pipeline has "cp" (auto weighs CP from 4096
#    tokens, or where nothing fits unsplit);
#  - a 2-layer LLaMA at 1024 tokens on 4 MiB devices: --cp 1 fits nothing (the attention's
#    probabilities alone are 8 MiB a layer unsplit, 4 MiB at TP 2); auto plans CP > 1, says so
#    ("nothing fits unsplit"), and that plan trains 2 steps within the emulated 4 MiB; on two nodes
#    of 2 such devices auto spans the CP 4 group over both nodes, and that plan trains too;
#  - per pipeline, at 4096 tokens on 4 memory-poor and 2 rich devices: auto searches each
#    pipeline's degree exactly (tests/test_planner_exact_cp.c checks it against a brute force):
#    the poor type's pipeline splits the sequence 4 ways and the rich one's 2, "why" names each
#    pipeline with its type and degree, and the plan of mixed degrees trains;
#  - refusals by name: --cp 3, and --cp 2 at 62 tokens (not a multiple of 2 x 2).
. "$(dirname "$0")/train_common.sh"
cat >"$WORK/c8.json" <<'EOF'
{"gpu_types": {"cpu": {"tflops": {"fp32": 0.05}, "mem_bw_gb_s": 10, "intra_node_gb_s": 5,
                       "emulate": {"slowdown": 1, "memory_mib": 8}}},
 "nodes": [{"name": "n0", "gpu": "cpu", "count": 4}]}
EOF
sed 's/"memory_mib": 8/"memory_mib": 4/' "$WORK/c8.json" >"$WORK/c4.json"
cat >"$WORK/lm.json" <<'EOF'
{"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 2,
 "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 1024,
 "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false}
EOF
# cp_of PLAN: the pipelines' CP degrees, space-separated, after checking each stage lists tp x cp devices
cp_of() {
    python3 - "$1" <<'PY' || fail "$1: a stage's device count is not tp x cp"
import json, sys
d = json.load(open(sys.argv[1]))
for p in d["pipelines"]:
    for s in p["stages"]:
        assert len(s["devices"]) == d["tp"] * p.get("cp", 1), (s["devices"], d["tp"], p.get("cp"))
print(" ".join(str(p.get("cp", 1)) for p in d["pipelines"]))
PY
}
train2() { # PLAN NAME: 2 steps, every rank of the plan
    timeout 240 $MPIRUN -np "$(plan_ranks "$1")" "$AUTOHET" train --plan "$1" --data "$WORK/text.bin" --steps 2 \
        --quiet --metrics "$WORK/$2.jsonl" >"$WORK/$2.out" 2>&1 || { cat "$WORK/$2.out"; fail "$2 does not train"; }
    [ "$(grep -c '"loss"' "$WORK/$2.jsonl")" = 2 ] || fail "$2: not 2 steps"
}
PLAN="$AUTOHET plan --model tiny-gpt2 --cluster $WORK/c8.json --global-batch 8 --seq-len 64"

$PLAN --cp 2 -o "$WORK/cp2.json" >"$WORK/cp2.out" 2>&1 || { cat "$WORK/cp2.out"; fail "plan --cp 2"; }
grep -q "^context parallelism: every pipeline splits the sequence 2 ways (--cp 2)" "$WORK/cp2.out" ||
    fail "plan --cp 2 does not say so: $(cat "$WORK/cp2.out")"
case " $(cp_of "$WORK/cp2.json") " in *" 1 "*) fail "--cp 2 left a pipeline unsplit" ;; esac
"$AUTOHET" evaluate --plan "$WORK/cp2.json" >"$WORK/cp2.eval" 2>&1 || { cat "$WORK/cp2.eval"; fail "evaluate the --cp 2 plan"; }
train2 "$WORK/cp2.json" cp2
echo "  --cp 2: pipelines at cp $(cp_of "$WORK/cp2.json"), evaluated, trained"

for mode in 1 auto; do
    $PLAN --cp $mode -o "$WORK/cp-$mode.json" >"$WORK/cp-$mode.out" 2>&1 || fail "plan --cp $mode"
    [ "$(cp_of "$WORK/cp-$mode.json" | tr -d ' 1')" = "" ] || fail "--cp $mode at 64 tokens split a sequence"
    ! grep -q "^context parallelism" "$WORK/cp-$mode.out" || fail "--cp $mode at 64 tokens weighed CP"
done
echo "  --cp 1 and auto at 64 tokens: no CP"

LONG="$AUTOHET plan --model $WORK/lm.json --cluster $WORK/c4.json --global-batch 4 --seq-len 1024"
if $LONG --cp 1 -o "$WORK/long1.json" >"$WORK/long1.out" 2>&1; then fail "1024 tokens fit 4 MiB unsplit"; fi
grep -q "infeasible" "$WORK/long1.out" || fail "--cp 1 at 1024 tokens: $(cat "$WORK/long1.out")"
$LONG -o "$WORK/long.json" >"$WORK/long.out" 2>&1 || { cat "$WORK/long.out"; fail "plan --cp auto at 1024 tokens"; }
grep -Eq "^context parallelism: pipelines? .* splits? the sequence [248] ways .*: .* nothing fits unsplit" "$WORK/long.out" ||
    fail "auto does not say why it split: $(cat "$WORK/long.out")"
case " $(cp_of "$WORK/long.json") " in *" 1 "*) fail "auto left a pipeline unsplit at 1024 tokens" ;; esac
train2 "$WORK/long.json" long
python3 - "$WORK/long.jsonl" <<'PY' || fail "the CP plan's ranks went over 4 MiB"
import json, sys
peak = max(max(o["memory_high_bytes"]) for o in map(json.loads, open(sys.argv[1])) if "loss" in o)
assert peak <= 4 << 20, peak
print(f"  auto at 1024 tokens on 4 MiB devices: trained, peak {peak} bytes")
PY

# A CP group across nodes: the same 1024 tokens on two nodes of 2 devices of 4 MiB: no node holds
# the CP 4 group that fits, so auto spans it over both (CP ranks 0-1 on n0, 2-3 on n1; before CP
# groups could span nodes this was infeasible), says so, prices the ring on the inter-node link
# (more ring time than the one-node plan above), and the plan trains 2 steps within 4 MiB.
sed 's/"nodes": \[{"name": "n0", "gpu": "cpu", "count": 4}\]/"nodes": [{"name": "n0", "gpu": "cpu", "count": 2}, {"name": "n1", "gpu": "cpu", "count": 2}]/' \
    "$WORK/c4.json" >"$WORK/c22.json"
grep -q '"n1"' "$WORK/c22.json" || fail "the two-node cluster was not written"
$AUTOHET plan --model "$WORK/lm.json" --cluster "$WORK/c22.json" --global-batch 4 --seq-len 1024 -o "$WORK/span.json" \
    >"$WORK/span.out" 2>&1 || fail "auto at 1024 tokens on 2 x 2 devices: $(cat "$WORK/span.out")"
grep -Eq "^context parallelism: pipeline 0 \(cpu\) splits the sequence 4 ways across 2 nodes .* nothing fits unsplit" \
    "$WORK/span.out" || fail "auto on 2 x 2 devices does not say it spans nodes: $(cat "$WORK/span.out")"
for p in long span; do "$AUTOHET" evaluate --json --plan "$WORK/$p.json" >"$WORK/$p.eval.json" || fail "evaluate $p"; done
python3 - "$WORK/span.json" "$WORK/span.eval.json" "$WORK/long.eval.json" <<'PY2' || fail "the spanning plan's layout or ring"
import json, sys
d, span, local = (json.load(open(f)) for f in sys.argv[1:])
nodes = [dv["node"] for dv in d["pipelines"][0]["stages"][0]["devices"]]
assert d["pipelines"][0]["cp"] == 4 and nodes == ["n0", "n0", "n1", "n1"], nodes
ring = lambda e: e["breakdown"]["cp_comm_s"]
assert ring(span) > ring(local) > 0, (ring(span), ring(local))
print(f"  CP 4 across n0, n1: ring {ring(span):.6f} s a step (one node: {ring(local):.6f} s)")
PY2
train2 "$WORK/span.json" span

# Per pipeline: the same LLaMA at 4096 tokens on 4 memory-poor devices (96 MiB) and 2 rich ones
# (1 GiB): --cp 1 leaves the poor ones idle; auto gives the poor type's pipeline CP 4 and the rich
# one's CP 2 (the exact optimum), says which pipeline splits how, and the plan of mixed degrees
# trains (6 ranks; not under AH_CLUSTER_SHORT=1, the ASan stage).
sed 's/"max_position_embeddings": 1024/"max_position_embeddings": 4096/' "$WORK/lm.json" >"$WORK/lm4.json"
cat >"$WORK/mix.json" <<'EOF'
{"gpu_types": {"poor": {"tflops": {"fp32": 0.05}, "mem_bw_gb_s": 10, "intra_node_gb_s": 5,
                        "emulate": {"slowdown": 1, "memory_mib": 96}},
               "rich": {"tflops": {"fp32": 0.05}, "mem_bw_gb_s": 10, "intra_node_gb_s": 5,
                        "emulate": {"slowdown": 1, "memory_mib": 1024}}},
 "nodes": [{"name": "p0", "gpu": "poor", "count": 4}, {"name": "r0", "gpu": "rich", "count": 2}]}
EOF
MIX="$AUTOHET plan --model $WORK/lm4.json --cluster $WORK/mix.json --global-batch 4 --seq-len 4096"
$MIX --cp 1 -o "$WORK/mix1.json" >"$WORK/mix1.out" 2>&1 || fail "--cp 1 at 4096 tokens: $(cat "$WORK/mix1.out")"
grep -q "^plan for .* 2 GPUs used" "$WORK/mix1.out" || fail "--cp 1 at 4096 tokens uses the poor GPUs: $(cat "$WORK/mix1.out")"
$MIX -o "$WORK/mix.plan.json" --svg "$WORK/mix.svg" >"$WORK/mix.out" 2>&1 || fail "auto at 4096 tokens: $(cat "$WORK/mix.out")"
grep -q "^plan for .* 6 GPUs used" "$WORK/mix.out" || fail "auto at 4096 tokens leaves GPUs idle: $(cat "$WORK/mix.out")"
! grep -q "in no pipeline" "$WORK/mix.svg" || fail "the picture counts a CP rank's devices idle"
python3 - "$WORK/mix.plan.json" "$WORK/mix.out" <<'PY' || fail "auto's per-pipeline degrees: $(cat "$WORK/mix.out")"
import json, re, sys
d = json.load(open(sys.argv[1]))
why = next(l for l in open(sys.argv[2]) if l.startswith("context parallelism: "))
assert "each pipeline's degree searched exactly" in why and "against 1.0873 s unsplit (before the schedule choice)" in why, why
got = {}
for i, p in enumerate(d["pipelines"]):
    gpu = p["stages"][0]["gpu"]
    got[gpu] = p.get("cp", 1)
    assert re.search(r"pipeline %d \(%s\) splits the sequence %d ways" % (i, gpu, got[gpu]), why), (i, gpu, why)
assert got == {"poor": 4, "rich": 2}, got
PY
trained="not trained (AH_CLUSTER_SHORT=1)"
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] || { train2 "$WORK/mix.plan.json" mix; trained=trained; }
echo "  auto at 4096 tokens on poor + rich devices: CP degrees $(cp_of "$WORK/mix.plan.json"), $trained"

$PLAN --cp 3 >"$WORK/bad.out" 2>&1 && fail "--cp 3 accepted"
grep -q -- "--cp: expected auto, 1, 2, 4 or 8, got \"3\"" "$WORK/bad.out" || fail "--cp 3: $(cat "$WORK/bad.out")"
$AUTOHET plan --model tiny-gpt2 --cluster "$WORK/c8.json" --global-batch 8 --seq-len 62 --cp 2 >"$WORK/odd.out" 2>&1 &&
    fail "--cp 2 at 62 tokens accepted"
grep -q -- "--cp 2: --seq-len 62 is not a multiple of 2 x 2" "$WORK/odd.out" || fail "--cp 2 at 62: $(cat "$WORK/odd.out")"
echo "PASS"
