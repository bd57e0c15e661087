# Resume inside the trainer: a run saves every 4 steps; a restart from its step-8 checkpoint must
# continue exactly where it left off. Same plan: every later loss bit-identical (as printed, 9
# significant digits) to the uninterrupted run; another plan (other DP/PP/TP, fewer devices):
# within 1e-4 relative. The recover event must name the step and the data position (8 * B), so no
# sample is skipped or repeated.
# Usage: bash tests/test_resume.sh BUILD_DIR SOURCE_DIR [CASE]
#   CASE plans (default): pp4 saves; resume pp4 (bit-exact), single and dp4.
#   CASE tp:              tp2-asym saves (TP 2, asymmetric pipelines, 2 nodes); resume tp2-asym
#                         (bit-exact), single (TP 2 -> 1) and tp4 (TP 2 -> 4).
#   CASE schedules:       pp4 saves under 1F1B; resume pp4 (bit-exact) and pp4 under zero-bubble
#                         (the same placement: step 8's loss, a forward of the restored weights,
#                         bit-identical; later steps within 1e-4, W's accumulation order being
#                         another). A plan name NAME+SCHEDULE is train_common.sh's with_schedule.
. "$(dirname "$0")/train_common.sh"
CASE=${3:-plans}
STEPS=12
run() { # plan-name out-name [extra flags...]
    local plan=$1 out=$2
    shift 2
    local n cmd file=$PLANS/train-$plan.json
    if [ "${plan#*+}" != "$plan" ]; then
        file=$WORK/$plan.json
        with_schedule "$PLANS/train-${plan%%+*}.json" "${plan#*+}" "$file"
    fi
    n=$(plan_ranks "$file")
    cmd=("$AUTOHET" train --plan "$file" --data "$WORK/text.bin" --steps $STEPS --quiet
         --metrics "$WORK/$out.jsonl" "$@")
    timeout 120 $MPIRUN -np "$n" "${cmd[@]}" >"$WORK/$out.out" 2>"$WORK/$out.err" \
        || { cat "$WORK/$out.out" "$WORK/$out.err" >&2; fail "$out: autohet train failed"; }
}
# compare REF GOT FROM TOL: GOT resumed at step FROM; its steps FROM..STEPS-1 match REF's: every
# loss bit-identical (TOL 0), within TOL relative, or (TOL < 0) step FROM's bit-identical and the
# rest within -TOL.
compare() {
    python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$4" "$STEPS" <<'PY' || fail "$2 does not continue $1"
import json, sys
ref_p, got_p, start, tol, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
ref = {o["step"]: o for o in map(json.loads, open(ref_p)) if "event" not in o}
lines = [json.loads(l) for l in open(got_p)]
rec = [o for o in lines if o.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["found"] and rec[0]["step"] == start, rec
B = 8  # global batch of the example plans
assert rec[0]["data_position"] == start * B, rec[0]
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(start, steps)), [o["step"] for o in got]
worst = 0.0
for o in got:
    a, b = ref[o["step"]]["loss"], o["loss"]
    rel = abs(a - b) / abs(a)
    worst = max(worst, rel)
    if tol == 0 or (tol < 0 and o["step"] == start):
        assert a == b, f"step {o['step']}: {b!r} vs {a!r}: not bit-identical"
    else:
        assert rel <= abs(tol), f"step {o['step']}: {b} vs {a} (rel {rel:.2e})"
r = rec[0]
print(f"  {got_p.split('/')[-1]}: from step {start} (tp {r['tp_from']} -> {r['tp_to']}), {len(got)} losses "
      f"within {worst:.1e}; local {r['bytes']['local']} B in {r['files']['local']} files")
PY
}
# A copy of the checkpoint root whose newest complete step is 8.
at_step8() {
    rm -rf "$WORK/ck8"
    cp -r "$WORK/ck" "$WORK/ck8"
    rm -rf "$WORK"/ck8/*/step-00000012
}
case $CASE in
plans) SAVER=pp4; SAME=pp4; OTHERS=(single dp4) ;;
tp) SAVER=tp2-asym; SAME=tp2-asym; OTHERS=(single tp4) ;;
schedules) SAVER=pp4; SAME=pp4; OTHERS=(pp4+zero-bubble) ;;
*) fail "unknown case $CASE" ;;
esac
run "$SAVER" full --ckpt-every 4 --local-root "$WORK/ck"
python3 - "$WORK/full.jsonl" <<'PY' || fail "checkpoint events"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [e["step"] for e in ev] == [4, 8, 12] and all(e["ok"] and e["bytes"]["local"] > 0 for e in ev), ev
PY
"$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" >/dev/null || fail "the saved steps do not verify"
# ckpt ls/verify take train's --local-root (a folder of node roots) as well as one node's root.
"$AUTOHET" ckpt ls --local-root "$WORK/ck" >"$WORK/ls.out" || fail "ckpt ls on the folder of node roots"
grep -Eq '^local:n0 +8 +committed' "$WORK/ls.out" && grep -Eq '^local:n0 +12 +committed' "$WORK/ls.out" ||
    { cat "$WORK/ls.out" >&2; fail "ckpt ls: expected node n0's 2 kept steps, 8 and 12"; }
if [ "$CASE" = tp ]; then # two nodes: each labelled
    grep -Eq '^local:n1 +12 +committed' "$WORK/ls.out" || { cat "$WORK/ls.out" >&2; fail "ckpt ls: node n1's steps"; }
fi
"$AUTOHET" ckpt ls --local-root "$WORK/ck/n0" | grep -Eq '^local +12 +committed' || fail "ckpt ls of one node's root"
"$AUTOHET" ckpt verify --local-root "$WORK/ck" >/dev/null || fail "ckpt verify on the folder of node roots"
! "$AUTOHET" ckpt ls --local-root "$WORK/no-such-dir" >"$WORK/ls.out" 2>"$WORK/ls.err" &&
    grep -q "no-such-dir: cannot open" "$WORK/ls.err" && [ ! -s "$WORK/ls.out" ] ||
    fail "ckpt ls on a missing directory must fail, say so, and print no table: $(cat "$WORK/ls.out")"
# a step directory given by mistake (it listed an empty table, exit 0)
! "$AUTOHET" ckpt ls --local-root "$WORK/ck/n0/step-00000012/" 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt ls: usage error: --local-root $WORK/ck/n0/step-00000012/ is the directory of step 12, not a checkpoint root: give its root, --local-root $WORK/ck/n0$" \
        "$WORK/ls.err" || { cat "$WORK/ls.err" >&2; fail "ckpt ls on a step directory must say so and name its root"; }
for bad in "--step 4" "--step -1"; do
    # (-1 is outside --step's range, which the parser checks first)
    # shellcheck disable=SC2086
    ! "$AUTOHET" ckpt ls --local-root "$WORK/ck" $bad 2>"$WORK/ls.err" &&
        grep -Eq "not a flag of ckpt ls|--step: expected 0 \.\. " "$WORK/ls.err" ||
        fail "ckpt ls $bad must be refused, not ignored"
done
# a step that is not there: the message names it, the root and the steps that are
! "$AUTOHET" ckpt verify --local-root "$WORK/ck/n0" --step 4 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt verify: I/O error: no committed checkpoint step 4 in --local-root $WORK/ck/n0 (committed there: local 8, local 12)$" \
        "$WORK/ls.err" || { cat "$WORK/ls.err" >&2; fail "ckpt verify --step 4 (not kept): the message"; }
! "$AUTOHET" ckpt verify --local-root "$WORK" 2>"$WORK/ls.err" &&
    grep -q "^autohet ckpt verify: I/O error: no committed checkpoint step in --local-root $WORK$" "$WORK/ls.err" ||
    { cat "$WORK/ls.err" >&2; fail "ckpt verify of a root without steps: the message"; }
! "$AUTOHET" ckpt verify --local-root "$WORK/ck" --s3-endpoint http://127.0.0.1:1 2>"$WORK/ls.err" &&
    grep -q -- "--s3-endpoint needs --cloud" "$WORK/ls.err" || fail "ckpt verify --s3-endpoint without --cloud"
for plan in "$SAME" "${OTHERS[@]}"; do
    at_step8
    run "$plan" "resume-$plan" --local-root "$WORK/ck8" --resume
    grep -q "resumed from step 8" "$WORK/resume-$plan.out" || fail "resume-$plan: no 'resumed from step 8'"
    if [ "$plan" = "$SAME" ]; then compare full "resume-$plan" 8 0
    elif [ "${plan%%+*}" = "$SAME" ]; then compare full "resume-$plan" 8 -1e-4 # placement unchanged
    else compare full "resume-$plan" 8 1e-4; fi
done
# Nothing to resume from: start from scratch, say so, and train the same as a fresh run.
run "$SAME" scratch --local-root "$WORK/empty" --resume
grep -q "starting from scratch" "$WORK/scratch.out" || fail "no 'starting from scratch' message"
python3 - "$WORK/full.jsonl" "$WORK/scratch.jsonl" <<'PY' || fail "a fresh --resume run differs"
import json, sys
a = [o["loss"] for o in map(json.loads, open(sys.argv[1])) if "event" not in o]
b = [o["loss"] for o in map(json.loads, open(sys.argv[2])) if "event" not in o]
assert a == b, (a, b)
PY
echo PASS
