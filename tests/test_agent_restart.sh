#!/usr/bin/env bash
# The failure policy of autohet run (issue 36): a job that fails with nothing to explain it — no
# notice, every host answering, not the input's fault — is relaunched from the newest checkpoint.
#  - a rank killed outright (SIGKILL, as an OOM kill would) once, mid-run: the run finishes with
#    every loss equal to the uninterrupted run's and every step trained once; a "restart" event
#    with its cause, the recovery counted as "job failed", the summary and `report` count it apart
#    from preemptions (it was "communication error ... rerun the same command", exit 1);
#  - a rank that dies at the same step every time (AH_TEST_HOOK action=kill): restarted once, then
#    the same failure at the same step ends the run, naming both;
#  - launch 0's mpirun SIGKILLed (not its ranks): its ranks die with it, the relaunch finishes the run as above
#    (they trained on beside the relaunch before); a rank whose mpirun is gone before it starts dies at once;
#  - --max-restarts 0: the first failure ends the run, said.
# Usage: bash tests/test_agent_restart.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
small_cluster

run_agent "$WORK/ref" || { cat "$WORK/ref.log"; fail "reference run"; }
grep -q '"event":"restart"' "$WORK/ref/metrics.jsonl" && fail "the reference restarted"
patience=$(patience_s "$WORK/ref") # the wait below: the reference run's wall seconds, at least 30

# ---- a rank killed once, mid-run (after 5 steps: the restart event's step is checked) ----
run_agent "$WORK/kill" &
agent=$!
wait_until "$patience" step_lines_at_least 5 "$WORK/kill/launch-0/metrics.jsonl" ||
    { kill $agent; fail "launch 0 trained no 5 steps in $patience s (the reference run's wall)"; }
pid=$(rank_pids "$WORK/kill/launch-0" slow-0)
[ -n "$pid" ] || { kill $agent; fail "no rank file of slow-0 in $WORK/kill/launch-0"; }
kill -KILL $pid
wait $agent || { cat "$WORK/kill.log"; fail "the run did not survive a killed rank"; }
out=$(check_metrics "$WORK/kill" "$WORK/ref") || { cat "$WORK/kill.log"; fail "killed rank: metrics: $out"; }
echo "killed rank: $out"
python3 - "$WORK/kill/metrics.jsonl" <<'EOF' || fail "restart events"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
r = [e for e in ev if e.get("event") == "restart"]
assert len(r) == 1 and r[0]["restart"] == 1 and r[0]["backoff_s"] == 1 and r[0]["step"] >= 5, r
assert "killed by signal 9" in r[0]["cause"] or "exit status" in r[0]["cause"] or "error" in r[0]["cause"], r
p = [e for e in ev if e.get("event") == "preempt"]
assert len(p) == 1 and p[0]["cause"] == "job failed" and p[0]["nodes"] == [], p
rec = [e for e in ev if e.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["cause"] == "job failed" and rec[0]["step"] <= p[0]["step"], rec
print(f"restart at step {r[0]['step']}: {r[0]['cause']}; resumed at {rec[0]['step']}")
EOF
grep -q "^restarts: 1 failure relaunched (--max-restarts 3 within 3600 s" "$WORK/kill.log" || fail "summary: $(cat "$WORK/kill.log")"
grep -q "^recovery 0 (job failed: -)" "$WORK/kill.log" || fail "summary names the recovery: $(cat "$WORK/kill.log")"
grep -q "no sample lost: every step 0..$((STEPS - 1)) trained exactly once" "$WORK/kill.log" || fail "samples: $(cat "$WORK/kill.log")"
"$AUTOHET" report "$WORK/kill/metrics.jsonl" >"$WORK/report.txt" 2>&1 || fail "report: $(cat "$WORK/report.txt")"
grep -q "no preemption" "$WORK/report.txt" || grep -q "0 preemptions" "$WORK/report.txt" ||
    fail "report counts the restart as a preemption: $(cat "$WORK/report.txt")"
grep -q "1 restart after a failure" "$WORK/report.txt" || fail "report: $(cat "$WORK/report.txt")"

# ---- launch 0's mpirun SIGKILLed, not its ranks (slow-0's held mid-step 5 by the hook): they go with it
# (runtime/preempt.h ah_preempt_die_with_launcher). Before, they trained on beside the relaunch, into the same
# directories, and the run ended "internal error: the trainer exited normally after 22 of 24 steps" ----
m=$WORK/mpk.mark
AH_TEST_HOOK="phase=step,step=5,node=slow-0,action=pause,file=$m" run_agent "$WORK/mpk" &
agent=$!
wait_until "$patience" test -e "$m" || { kill $agent; fail "mpirun killed: the hook never fired"; }
mp=$(ps -o ppid= -p "$(rank_pids "$WORK/mpk/launch-0" slow-0)" | tr -d ' ')
[ "$(cat "/proc/$mp/comm")" = mpirun ] || { kill $agent; fail "slow-0's rank's parent $mp is not mpirun"; }
# its ranks (a launch in place has one mpirun a node: the other nodes' ranks are another mpirun's)
pids=$(for n in fast-0 slow-0 slow-1; do rank_pids "$WORK/mpk/launch-0" $n; done | while read -r p; do
    [ "$(ps -o ppid= -p "$p" | tr -d ' ')" = "$mp" ] && echo "$p"; done)
kill -KILL "$mp"
live_ranks() { for p in $pids; do grep -qs '^State:[[:space:]]*[^Z[:space:]]' "/proc/$p/status" && echo "$p"; done; } # not a zombie
wait_until 5 test -z "$(live_ranks)" # at once with the death signal (a few ms); 5 s before calling them survivors
alive=$(live_ranks)
rm -f "$m"
( while kill -0 $agent 2>/dev/null; do rm -f "$m"; sleep 0.05; done ) & # the relaunch trains step 5 again
[ -z "$alive" ] || { wait $agent; kill -KILL $alive 2>/dev/null; fail "mpirun killed: its ranks $alive outlived it"; }
wait $agent || { cat "$WORK/mpk.log"; fail "the run did not survive its mpirun's kill"; }
out=$(check_metrics "$WORK/mpk" "$WORK/ref") || { cat "$WORK/mpk.log"; fail "mpirun killed: metrics: $out"; }
echo "mpirun killed: its ranks with it; $out"

# ---- mpirun gone before its rank starts, the rank's parent (a shell) alive: the rank dies at once, its mpirun's
# pid read from Open MPI's environment (runtime/preempt.c launcher_pid). Before, it went on into MPI_Init, which
# failed ("Unreachable"): exit 1 ----
o=$WORK/gone.out
$MPIRUN -np 1 bash -c "exec >>'$o' 2>&1; kill -KILL \$PPID; '$AUTOHET' train --plan none.json; echo \"rc \$?\"" 2>/dev/null
wait_until 10 grep -q '^rc ' "$o" || fail "mpirun gone first: the rank never ended: $(cat "$o")"
grep -q '^rc 137$' "$o" || fail "mpirun gone first: the rank did not die at once (SIGKILL, 137): $(cat "$o")"
echo "mpirun gone before its rank starts: the rank killed at once"

# ---- a rank that dies at the same step every time ----
AH_TEST_HOOK="phase=step,step=5,node=slow-0,action=kill" run_agent "$WORK/det" && fail "a deterministic crash reported success"
grep -q "not restarted again: it came back at step 5 right after restart 1, which was for the same failure" "$WORK/det.log" ||
    fail "deterministic crash: $(cat "$WORK/det.log")"
[ "$(grep -c '"event":"restart"' "$WORK/det/metrics.jsonl")" = 1 ] || fail "deterministic crash: restarts $(grep restart "$WORK/det/metrics.jsonl")"
echo "deterministic crash: $(grep '^autohet run: ' "$WORK/det.log" | tail -1 | cut -c1-200)"

# ---- --max-restarts 0: the first failure is final ----
AH_TEST_HOOK="phase=step,step=3,node=slow-0,action=kill" run_agent "$WORK/none" --max-restarts 0 &&
    fail "--max-restarts 0: a crash reported success"
grep -q "not restarted (--max-restarts 0)" "$WORK/none.log" || fail "--max-restarts 0: $(cat "$WORK/none.log")"
grep -q '"event":"restart"' "$WORK/none/metrics.jsonl" && fail "--max-restarts 0 restarted"
echo "PASS"
