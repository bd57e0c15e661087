# A diverging run (--lr 1e30 --warmup 0: the weights overflow after one update) stops at the first
# non-finite step with an error naming the step, the rank and the tensor, exits non-zero, keeps
# the last good checkpoint and leaves a metrics file that a strict JSON reader accepts (null, never
# nan). With --skip-nonfinite 2 two such steps are skipped, each an event, before the third stops it.
# Under autohet run, the agent says the run diverged (not "rerun to resume": it would diverge again).
. "$(dirname "$0")/train_common.sh"
PLAN=$PLANS/train-pp4.json
strict_jsonl() { # FILE: every line strict JSON (no NaN / Infinity); prints the events' "skipped"
    python3 - "$1" <<'PY'
import json, sys
def refuse(c):
    raise ValueError(f"not JSON: {c}")
for line in open(sys.argv[1]):
    d = json.loads(line, parse_constant=refuse)
    if d.get("event") == "nonfinite":
        print(d["step"], d["what"], d["rank"], d["skipped"])
    elif "event" not in d and d["loss"] is None:
        print(d["step"], "step line with null loss")
PY
}
$MPIRUN -np 4 "$AUTOHET" train --plan "$PLAN" --data "$WORK/text.bin" --steps 6 --lr 1e30 --warmup 0 \
    --metrics "$WORK/m.jsonl" --local-root "$WORK/ckpt" --ckpt-every 1 >"$WORK/out" 2>&1
rc=$?
cat "$WORK/out"
[ $rc -ne 0 ] || fail "a diverging run exited 0"
grep -q "^autohet train: .*step 1: the loss or gradient norm is not finite (loss -\?nan, grad norm -\?nan): first the loss on rank 3 (pipeline 0, stage 3); training stopped, this step's update not applied, the last good checkpoint, step 1 (where a resume starts), is kept" "$WORK/out" \
    || fail "no message naming the step, the rank and the tensor"
[ "$(grep -c "^autohet train: .*not finite" "$WORK/out")" = 1 ] || fail "expected one message (rank 0)"
ev=$(strict_jsonl "$WORK/m.jsonl") || fail "metrics are not strict JSON"
[ "$ev" = "1 the loss 3 False" ] || fail "nonfinite events: $ev"
[ -d "$WORK/ckpt/n0/step-00000001" ] && [ ! -e "$WORK/ckpt/n0/step-00000002" ] || fail "the step-1 checkpoint is not the last one kept"
echo "ok: stopped at step 1, checkpoint of step 1 kept"

$MPIRUN -np 4 "$AUTOHET" train --plan "$PLAN" --data "$WORK/text.bin" --steps 6 --lr 1e30 --warmup 0 \
    --metrics "$WORK/m2.jsonl" --skip-nonfinite 2 >"$WORK/out2" 2>&1
rc=$?
cat "$WORK/out2"
[ $rc -ne 0 ] || fail "a run past --skip-nonfinite exited 0"
grep -q "skipped: the loss is not finite on rank 3 (pipeline 0, stage 3)" "$WORK/out2" || fail "no progress line for a skipped step"
grep -q "step 3: the loss or gradient norm is not finite.*2 skipped" "$WORK/out2" || fail "no stop at step 3"
ev=$(strict_jsonl "$WORK/m2.jsonl") || fail "metrics are not strict JSON"
want=$'1 the loss 3 True\n1 step line with null loss\n2 the loss 3 True\n2 step line with null loss\n3 the loss 3 False'
[ "$ev" = "$want" ] || fail "events with --skip-nonfinite 2: $ev"

"$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --global-batch 8 --seq-len 32 --steps 4 \
    --lr 1e30 --warmup 0 --work-dir "$WORK/run" --quiet >"$WORK/out3" 2>&1
rc=$?
[ $rc -ne 0 ] || { cat "$WORK/out3"; fail "autohet run of a diverging model exited 0"; }
grep -q "training diverged at step 1 (a non-finite loss or gradient norm.*would diverge again; lower --lr" "$WORK/out3" ||
    { cat "$WORK/out3"; fail "autohet run does not say the run diverged"; }
grep -q "rerun the same autohet run command" "$WORK/out3" && fail "autohet run advises a rerun of a diverged run"
echo "ok: autohet run says the run diverged at step 1"
echo PASS
