# What autohet train says on the console about its checkpoints and its time left:
#  - a save that fails is a warning on stderr each time, from rank 0 alone, naming the root and the
#    error (and the rank, when only some ranks failed) and the checkpoint still kept; training goes
#    on and the run exits 0;
#  - the progress line's ETA comes from wall time, saves and validations included (it used to sum
#    the steps' compute only: 3-4x optimistic with a save and a validation every step).
# (The preemption line, saved or not: tests/test_resume_preempt.sh.)
. "$(dirname "$0")/train_common.sh"
dp2_plan "$WORK/dp2.json"
train() { # OUT flags...
    local out=$1
    shift
    timeout 120 $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/dp2.json" --data "$WORK/text.bin" --quiet \
        --metrics "$WORK/$out.jsonl" "$@" >"$WORK/$out.out" 2>"$WORK/$out.err" \
        || { cat "$WORK/$out.err" >&2; fail "$out: the run failed"; }
}
# warned OUT N: exactly N warning lines about failed saves, all rank 0's (one line per failed save)
warned() {
    local n
    n=$(grep -c "^autohet train: warning: the checkpoint of step" "$WORK/$1.err")
    [ "$n" = "$2" ] || { cat "$WORK/$1.err" >&2; fail "$1: $n save warnings, expected $2"; }
}

# Only n1's step 2 cannot be written (a file where its directory goes): the warning names rank 1.
mkdir -p "$WORK/one/n1"
echo x >"$WORK/one/n1/step-00000002"
train one --steps 6 --ckpt-every 2 --local-root "$WORK/one"
warned one 1
grep -q "^autohet train: warning: the checkpoint of step 2 was not saved in --local-root $WORK/one: rank 1: cannot start checkpoint of step 2: $WORK/one/n1/step-00000002: exists and is not a directory; training goes on, no checkpoint of this run is saved" \
    "$WORK/one.err" || { cat "$WORK/one.err" >&2; fail "one: the warning"; }
python3 - "$WORK/one.jsonl" <<'PY' || fail "one: checkpoint events"
import json, sys
ev = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "checkpoint"]
assert [(e["step"], e["ok"]) for e in ev] == [(2, False), (4, True), (6, True)], ev
PY
echo "rank-local failure: $(grep warning "$WORK/one.err" | cut -c1-160)"

# Every node's step 4 fails, after step 2 was saved: one line (rank 0's error: each rank's names its
# own node's path), step 2 kept.
for n in n0 n1; do mkdir -p "$WORK/all/$n" && echo x >"$WORK/all/$n/step-00000004"; done
train all --steps 6 --ckpt-every 2 --local-root "$WORK/all"
warned all 1
grep -q "^autohet train: warning: the checkpoint of step 4 was not saved in --local-root $WORK/all: rank 0: cannot start checkpoint of step 4: $WORK/all/n0/step-00000004: exists and is not a directory; training goes on, the newest checkpoint is still step 2$" \
    "$WORK/all.err" || { cat "$WORK/all.err" >&2; fail "all: the warning"; }
echo "every node failed: $(grep warning "$WORK/all.err" | cut -c1-160)"

# ETA: one rank, a save and a long validation after every step. The ETA printed after step 1 (the
# second: steps are numbered from 0, the progress line is "step N/LAST") is
# compared with the time the run then really took (the old, compute-only ETA was a third of it).
python3 - "$AUTOHET" "$PLANS/train-single.json" "$WORK" <<'PY' || fail "ETA"
import re, subprocess, sys, time
autohet, plan, w = sys.argv[1:]
steps = 6
cmd = [autohet, "train", "--plan", plan, "--data", f"{w}/text.bin", "--steps", str(steps), "--ckpt-every", "1",
       "--local-root", f"{w}/eta", "--val-data", f"{w}/text.bin", "--val-every", "1", "--val-batches", "300"]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
eta = None
for line in p.stdout:
    m = re.match(r"step +1/%d .*\| this step [0-9.]+ s, +[0-9]+ tok/s \| ETA ([0-9]+) s$" % (steps - 1), line.strip())
    if m:
        eta, t2 = float(m.group(1)), time.monotonic()
assert p.wait() == 0, "the run failed"
left = time.monotonic() - t2
assert eta is not None, "no progress line for step 1"
assert 0.5 * left <= eta <= 2 * left + 1, f"ETA {eta:.0f} s after step 1, the run took {left:.1f} s more"
print(f"ETA after step 1: {eta:.0f} s; the rest took {left:.1f} s")
PY
echo PASS
