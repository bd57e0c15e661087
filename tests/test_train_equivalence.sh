# Plan equivalence: every plan trains the same model as one process. Each plan runs 20 steps of
# tiny-gpt2 on the same data; losses must match the single-rank run within 1e-4 (relative) at
# every step and every weight within 1e-5 after the first update (--dump-params at step 1).
# Usage: bash tests/test_train_equivalence.sh BUILD_DIR SOURCE_DIR [PLAN...]
# PLAN names examples/plans/train-PLAN.json; the default is pure DP and pure PP. The other plans
# (pure TP, asymmetric pipelines with a recomputing stage, TP x asymmetric PP x DP, PP with
# recomputation) run from test_train_equivalence_{tp,hybrid}.sh, two plans per file so that no
# file takes more than ~30 s on a loaded 2-core machine.
# PLAN:even or PLAN:uneven trains the plan with its optimizer sharded over every data-parallel group
# (plan.json optimizer_shards, from `autohet evaluate --shard-optimizer even`; uneven: member k of
# a group of n gets a part in proportion to k + 1).
# PLAN+SCHEDULE[/I,J] (before any :even or :uneven) trains the plan under that schedule: every
# pipeline of more than one stage, or pipelines I, J only (train_common.sh with_schedule), e.g.
# asym+zero-bubble/1:even.
# REF=NAME: the one-process run to match is examples/plans/train-NAME.json (default single, the
# tiny-gpt2 one); every plan must be for the same model (test_train_equivalence_llama*.sh).
. "$(dirname "$0")/train_common.sh"
shift 2
PLAN_NAMES=("$@")
[ ${#PLAN_NAMES[@]} -gt 0 ] || PLAN_NAMES=(dp4 pp4)
REF=${REF:-single}
[ -r "$PLANS/train-$REF.json" ] || fail "no reference plan $PLANS/train-$REF.json"
[ "$(plan_ranks "$PLANS/train-$REF.json")" = 1 ] || fail "reference plan train-$REF.json is not one rank"
STEPS=20
# EMULATE_SLOWDOWN=k runs every plan (and the reference) on the plans' cluster with its "cpu" type
# emulating a k x slower device: emulation must change the time, never the math, nor hang.
EXTRA=()
if [ -n "${EMULATE_SLOWDOWN:-}" ]; then
    emulated_cluster "$PLANS/train-$REF.json" "$EMULATE_SLOWDOWN" "$WORK/cluster.json"
    EXTRA=(--cluster "$WORK/cluster.json")
fi
run() { # name ranks [plan file]
    local name=$1 n=$2 plan=${3:-$PLANS/train-$1.json}
    local cmd=("$AUTOHET" train --plan "$plan" --data "$WORK/text.bin" --steps $STEPS
               --quiet --metrics "$WORK/$name.jsonl" --dump-params "$WORK/$name.params" --dump-step 1 "${EXTRA[@]}")
    if [ "$n" = 1 ]; then timeout 120 "${cmd[@]}" 2>"$WORK/$name.err"; else timeout 120 $MPIRUN -np "$n" "${cmd[@]}" 2>"$WORK/$name.err"; fi \
        || { cat "$WORK/$name.err" >&2; fail "$name: autohet train failed"; }
}
run "$REF" 1
# The losses themselves must move: a run that trained nothing would match trivially.
python3 - "$WORK" "$REF" <<'PY' || fail "single-rank loss did not change"
import json, sys
l = [json.loads(x)["loss"] for x in open(f"{sys.argv[1]}/{sys.argv[2]}.jsonl")]
assert l[-1] < l[0] - 0.5, l
PY
for spec in "${PLAN_NAMES[@]}"; do
    spec_plan "$spec"
    python3 -c 'import json,sys; a, b = (json.load(open(f))["model"] for f in sys.argv[1:]); assert a == b, (a, b)' \
        "$PLANS/train-$REF.json" "$PLANS/train-$SPEC_BASE.json" || fail "$spec is not for the model of train-$REF.json"
    plan=$SPEC_PLAN name=$SPEC_NAME
    n=$(plan_ranks "$plan")
    start=$(date +%s.%N)
    run "$name" "$n" "$plan"
    python3 - "$WORK" "$name" "$REF" <<'PY' || fail "$name differs from the single-rank run"
import array, json, sys
work, name, refname = sys.argv[1], sys.argv[2], sys.argv[3]
ref = [json.loads(l) for l in open(f"{work}/{refname}.jsonl")]
got = [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
assert len(ref) == len(got) == 20, (len(ref), len(got))
worst = 0.0
for a, b in zip(ref, got):
    rel = abs(a["loss"] - b["loss"]) / abs(a["loss"])
    worst = max(worst, rel)
    assert rel <= 1e-4, f"step {a['step']}: loss {b['loss']} vs {a['loss']} (rel {rel:.2e})"
def load(d):
    x = array.array("f")
    with open(f"{d}/params.bin", "rb") as f:
        x.frombytes(f.read())
    return x
p, q = load(f"{work}/{refname}.params"), load(f"{work}/{name}.params")
assert len(p) == len(q) and len(p) > 0, (len(p), len(q))
dmax = max(abs(a - b) for a, b in zip(p, q))
assert dmax <= 1e-5, f"weights after step 1 differ by {dmax:.3e}"
print(f"{name}: 20 losses within {worst:.2e} relative, {len(p)} weights within {dmax:.2e}")
PY
    echo "  ($(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s)"
done
echo "PASS"
