# Preemption notices: SIGTERM to one node's rank (as the agent sends it) stops the whole job at
# the next step boundary with exit status 75, after saving when the grace period allows, and
# leaves RUN_DIR/preempted.json; every rank wrote RUN_DIR/rank-R.json at start-up. Then, as the
# agent would, node n1's disk is deleted and training resumes on n0 alone (another plan): the
# losses continue the uninterrupted run's within 1e-4 from the saved step. The line the run stops
# with says whether the state was saved, and where.
# Usage: bash tests/test_resume_preempt.sh BUILD_DIR SOURCE_DIR
. "$(dirname "$0")/train_common.sh"
STEPS=100
# 2 nodes, one replica each; emulated 10x slower devices so the notice lands mid-run even when
# a loaded machine is slow to deliver it (3x let all 100 steps finish first, now and then).
dp2_plan "$WORK/dp2.json" 10
# preempt NAME GRACE: starts the 2-node run, SIGTERMs n1's rank after 3 steps; sets RC.
preempt() {
    local name=$1 grace=$2
    mkdir -p "$WORK/$name.run"
    $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
        --metrics "$WORK/$name.jsonl" --local-root "$WORK/$name.ck" --run-dir "$WORK/$name.run" \
        --grace-s "$grace" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    local job=$! pid=""
    for _ in $(seq 300); do
        [ -r "$WORK/$name.jsonl" ] && [ "$(grep -c '"loss"' "$WORK/$name.jsonl")" -ge 3 ] && break
        sleep 0.1
    done
    for r in 0 1; do [ -r "$WORK/$name.run/rank-$r.json" ] || fail "$name: no rank-$r.json"; done
    pid=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["node"]=="n1" and d["rank"]==1 and d["index"]==0, d; print(d["pid"])' "$WORK/$name.run/rank-1.json") \
        || fail "$name: rank-1.json"
    kill -TERM "$pid"
    RC=0
    timeout 60 tail --pid=$job -f /dev/null || { kill $job; fail "$name: the job did not stop"; }
    wait $job || RC=$?
}
preempt save 30
[ "$RC" = 75 ] || { cat "$WORK/save.err" >&2; fail "exit status $RC, expected 75"; }
N=$(python3 - "$WORK/save.run/preempted.json" "$WORK/save.jsonl" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["saved"] is True and p["nodes"] == ["n1"] and 3 <= p["step"] < 100, p
lines = [json.loads(l) for l in open(sys.argv[2])]
steps = [o["step"] for o in lines if "event" not in o]
assert steps == list(range(p["step"])), (steps, p)  # stopped at the boundary right after the notice
ev = [o for o in lines if o.get("event") in ("checkpoint", "preempt")]
assert [e["event"] for e in ev] == ["checkpoint", "preempt"], ev
assert ev[0]["step"] == p["step"] and ev[0]["ok"] and ev[1]["nodes"] == ["n1"] and ev[1]["saved"], ev
print(p["step"])
PY
) || fail "preempted.json / events"
# steps numbered from 0 on the console, as in the metrics: N steps done is "after step N-1" (issue 40 item 11)
grep -q "^autohet train: preemption notice: stopped after step $((N - 1)); its state is saved as checkpoint step $N in --local-root $WORK/save.ck (a resume starts at step $N)$" \
    "$WORK/save.err" || { cat "$WORK/save.err" >&2; fail "the notice's line does not say where the state was saved"; }
echo "  notice honoured: stopped after step $((N - 1)) with checkpoint step $N, exit 75"
# The agent's part: n1's disk goes with n1; resume on n0 alone.
rm -rf "$WORK/save.ck/n1"
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
    --metrics "$WORK/after.jsonl" --local-root "$WORK/save.ck" --resume >"$WORK/after.out" 2>&1 \
    || { cat "$WORK/after.out" >&2; fail "resume on n0"; }
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
    --metrics "$WORK/ref.jsonl" >/dev/null 2>&1 || fail "reference run"
python3 - "$WORK/ref.jsonl" "$WORK/after.jsonl" "$N" <<'PY' || fail "the resumed run does not continue the uninterrupted one"
import json, sys
n = int(sys.argv[3])
ref = {o["step"]: o["loss"] for o in map(json.loads, open(sys.argv[1]))}
lines = [json.loads(l) for l in open(sys.argv[2])]
rec = [o for o in lines if o.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["step"] == n and rec[0]["files"]["local"] == 6, rec
got = [o for o in lines if "event" not in o]
assert [o["step"] for o in got] == list(range(n, 100)), [o["step"] for o in got]
worst = max(abs(o["loss"] - ref[o["step"]]) / ref[o["step"]] for o in got)
assert worst <= 1e-4, worst
print(f"  resumed on n0 at step {n}: {len(got)} losses within {worst:.1e} of the uninterrupted run")
PY
# A grace period too short for a save: stop without one, and say so.
preempt nosave 0.1
[ "$RC" = 75 ] || { cat "$WORK/nosave.err" >&2; fail "exit status $RC, expected 75"; }
python3 - "$WORK/nosave.run/preempted.json" <<'PY' || fail "preempted.json without a save"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["saved"] is False and p["nodes"] == ["n1"], p
PY
[ -z "$(find "$WORK/nosave.ck" -name 'step-*' 2>/dev/null)" ] || fail "a checkpoint was written without time for it: $(find "$WORK/nosave.ck" -name 'step-*')"
grep -q "^autohet train: preemption notice: stopped \(after\|before\) step [0-9]*; its state is not saved and --local-root $WORK/nosave.ck holds no checkpoint of this run$" \
    "$WORK/nosave.err" || { cat "$WORK/nosave.err" >&2; fail "the notice's line does not say the state was not saved"; }
echo PASS
