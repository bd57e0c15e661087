#!/usr/bin/env bash
# How an autohet run ends short of its last step, and what its summary says (issue 19, items 5,
# 13 and 14):
#  - a launch that fails before any step: the summary says nothing was trained, never "no sample
#    lost", the done event has history_ok false, and the exit is non-zero;
#  - Ctrl-C (SIGINT to autohet run): a notice to every rank, the trainer saves within the grace
#    period, the job stops, the run says so and exits 130 (not 2, a usage error); the same command
#    again resumes from that checkpoint and finishes with every step once, its metrics appended to
#    the first run's (which its own error message told the user to rerun);
#  - a second Ctrl-C stops the job at once;
#  - the summary says what its "predicted" is: the uncalibrated roofline, or with --profile (used
#    for the plan) the cost model calibrated by autohet profile (item 14).
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
small_cluster

# done_field DIR KEY: KEY of the last line of DIR/metrics.jsonl (the done event), as JSON
done_field() {
    python3 -c 'import json,sys; d=[json.loads(l) for l in open(sys.argv[1])][-1]; assert d["event"] == "done", d; print(json.dumps(d[sys.argv[2]]))' \
        "$1/metrics.jsonl" "$2"
}

# ---- a launch that fails: nothing trained, said so ----
run_agent "$WORK/fail" --mpirun /bin/false
rc=$?
[ $rc = 1 ] || { cat "$WORK/fail.log"; fail "failed launch: exit $rc, want 1"; }
grep -q "trained nothing: no step of $STEPS finished" "$WORK/fail.log" || fail "failed launch: $(cat "$WORK/fail.log")"
grep -q "no sample lost" "$WORK/fail.log" && fail "failed launch claims no sample lost: $(cat "$WORK/fail.log")"
[ "$(done_field "$WORK/fail" history_ok)" = false ] || fail "failed launch: done event $(tail -1 "$WORK/fail/metrics.jsonl")"
echo "failed launch: $(grep -E '^(trained|autohet run: comm)' "$WORK/fail.log" | cut -c1-120 | tr '\n' '|')"

# ---- the summary says what its "predicted" is; --profile calibrates the plan (item 14) ----
grep -q "^predicted: the uncalibrated roofline" "$WORK/fail.log" || fail "roofline not said: $(cat "$WORK/fail.log")"
"$AUTOHET" profile --model tiny-gpt2 --cluster "$CLUSTER" --micro-batch 1,2,4,8 --seq-len $SEQ --steps 2 --rounds 1 \
    -o "$WORK/p.json" >"$WORK/p.log" 2>&1 || { cat "$WORK/p.log"; fail "autohet profile"; }
run_agent "$WORK/cal" --mpirun /bin/false --max-restarts 0 --profile "$WORK/p.json"
grep -q "^predicted: the cost model calibrated by the profile $WORK/p.json" "$WORK/cal.log" || fail "profile not said: $(cat "$WORK/cal.log")"
# the plan's prediction is the profile's: evaluate with the same profile agrees, the roofline does not
"$AUTOHET" evaluate --plan "$WORK/cal/plan-0.json" --profile "$WORK/p.json" --json >"$WORK/ev-cal.json" || fail "evaluate --profile"
"$AUTOHET" evaluate --plan "$WORK/cal/plan-0.json" --json >"$WORK/ev-roof.json" || fail "evaluate"
python3 - "$WORK" <<'PY' || fail "run --profile did not plan with the profile"
import json, re, sys
w = sys.argv[1]
said = float(re.search(r"^launch 0: \d+ devices, predicted ([0-9.]+)", open(f"{w}/cal.log").read(), re.M).group(1))
cal = json.load(open(f"{w}/ev-cal.json"))["iteration_s"]
roof = json.load(open(f"{w}/ev-roof.json"))["iteration_s"]
assert abs(said - cal) <= 6e-5, (said, cal)
assert abs(cal - roof) > 1e-3 * roof, (cal, roof)
print(f"run --profile: predicted {said:.4f} s/iteration = evaluate --profile {cal:.4f} (roofline {roof:.4f})")
PY
# a profile without entries for the cluster's types (measured as type "cpu") is said at the plan and in
# the summary, not claimed as the calibration
"$AUTOHET" profile --model tiny-gpt2 --micro-batch 1 --seq-len $SEQ --steps 1 --rounds 1 -o "$WORK/p-cpu.json" \
    >"$WORK/p-cpu.log" 2>&1 || { cat "$WORK/p-cpu.log"; fail "autohet profile (type cpu)"; }
run_agent "$WORK/cal2" --mpirun /bin/false --max-restarts 0 --profile "$WORK/p-cpu.json"
grep -q "note: the profile has no entry for cpu-fast, cpu-slow at this plan's TP [0-9]*, micro-batch [0-9]*, seq-len $SEQ, fp32: the roofline times them" \
    "$WORK/cal2.log" && grep -q "^predicted: the cost model calibrated by the profile $WORK/p-cpu.json, except the types it has no entry for .*(launch 0: cpu-fast, cpu-slow)" \
    "$WORK/cal2.log" || fail "a profile of other types: $(cat "$WORK/cal2.log")"

# interrupts_said K LOG: the run's log says it took K interrupts (the first, then each again).
interrupts_said() { [ "$(grep -c 'autohet run: \[.*\] interrupted' "$2")" -ge "$1" ]; }

# interrupt_at DIR STEP N [flags]: autohet run in the background, N SIGINTs once its metrics show
# step STEP; sets rc to its exit status.
interrupt_at() {
    local dir=$1 step=$2 n=$3
    shift 3
    run_agent "$dir" "$@" &
    local sub=$! pid k
    sleep 0.2
    pid=$(pgrep -P $sub | head -1) # the autohet under the function's subshell
    [ -n "$pid" ] || fail "no autohet run process under $sub"
    for k in $(seq 1 1200); do
        grep -q "\"step\":$step," "$dir/metrics.jsonl" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.05
    done
    # apart, since two signals pending at once are one: each after the run said it took the one
    # before (50 ms apart, at load 20+ on 2 cores the agent had not run between them: one interrupt)
    for k in $(seq 1 "$n"); do
        kill -INT $pid 2>/dev/null
        [ "$k" -lt "$n" ] && { wait_until 120 interrupts_said "$k" "$dir.log" || fail "interrupt $k not said in 120 s"; }
    done
    wait $sub
    rc=$?
}

# ---- Ctrl-C: saved within the grace period, stopped, said so; the same command resumes ----
STEPS=40
CKPT_EVERY=1000
interrupt_at "$WORK/int" 3 1 --grace-s 20
[ $rc = 130 ] || { cat "$WORK/int.log"; fail "Ctrl-C: exit $rc, want 130"; }
grep -q "interrupted: every rank gets a notice" "$WORK/int.log" || fail "Ctrl-C not said: $(cat "$WORK/int.log")"
grep -q "autohet run: interrupted: stopped at step [0-9]* on the interrupt: the trainer saved a checkpoint in the grace period" \
    "$WORK/int.log" || fail "Ctrl-C: no save said: $(cat "$WORK/int.log")"
grep -q "usage error" "$WORK/int.log" && fail "Ctrl-C reported as a usage error: $(cat "$WORK/int.log")"
[ -e "$WORK/int/plan-1.json" ] && fail "Ctrl-C relaunched the job"
stopped=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "step" in l and "event" not in l][-1]["step"] + 1)' "$WORK/int/metrics.jsonl")
grep -q "\"event\":\"checkpoint\",\"step\":$stopped," "$WORK/int/metrics.jsonl" || fail "no checkpoint of step $stopped: $(tail -3 "$WORK/int/metrics.jsonl")"
[ "$(done_field "$WORK/int" history_ok)" = false ] || fail "Ctrl-C: done event claims a complete history"
grep -q "the run stopped early: steps 0..$((stopped - 1)) were each trained once" "$WORK/int.log" || fail "summary: $(cat "$WORK/int.log")"
cp "$WORK/int/metrics.jsonl" "$WORK/int-first.jsonl"
# a damaged local copy of the saved step, which a peer also holds: the rerun repairs it from the peer
# and says so, naming the file and what replaced it, on the console, in the merged metrics (a
# "restore" event) and in the report (it was silent: issue 40 item 8)
bad=$(ls "$WORK/int/local/slow-0/step-$(printf %08d "$stopped")"/block-*.safetensors | head -1)
[ -n "$bad" ] || fail "no block file of step $stopped on slow-0"
printf 'XXXX' | dd of="$bad" bs=1 seek=2000 conv=notrunc 2>/dev/null
run_agent "$WORK/int" || { cat "$WORK/int.log"; fail "the same command again"; }
said="$(basename "$bad") (local: $bad: CRC-32C [0-9a-f]* but the manifest says [0-9a-f]*: the file is corrupt): the peer tier's copy used"
grep -q "^autohet train: step $stopped repaired at the restore: rank [0-9]*: $said$" "$WORK/int.log" &&
    grep -q "launch 1: the restore of step $stopped replaced a copy: rank [0-9]*: $said$" "$WORK/int.log" ||
    fail "the repaired copy not said: $(cat "$WORK/int.log")"
grep -q '"event":"restore","step":'"$stopped"',.*"repaired":\["rank [0-9]*: '"$(basename "$bad")" "$WORK/int/metrics.jsonl" ||
    fail "no restore event with the repair: $(grep restore "$WORK/int/metrics.jsonl")"
# The rerun appends to the merged metrics: the first run's record (steps 0..stopped-1, the stop)
# stays, and the rerun's lines, from its own plan event on, continue it from the saved step.
python3 - "$WORK/int-first.jsonl" "$WORK/int/metrics.jsonl" "$stopped" "$STEPS" <<'PY' || fail "the rerun's metrics"
import json, sys
before, now = open(sys.argv[1]).read(), open(sys.argv[2]).read()
stopped, steps = int(sys.argv[3]), int(sys.argv[4])
assert now.startswith(before), "the first run's record was not kept"
rest = [json.loads(l) for l in now[len(before):].splitlines()]
assert rest[0]["event"] == "plan", rest[0]
got = [x["step"] for x in rest if "event" not in x]
assert got == list(range(stopped, steps)), f"the rerun trained steps {got}, expected {stopped}..{steps - 1}"
print(f"appended: steps 0..{stopped - 1}, then the rerun's {stopped}..{steps - 1}")
PY
[ "$(done_field "$WORK/int" history_ok)" = true ] || fail "rerun: $(tail -1 "$WORK/int/metrics.jsonl")"
grep -q "no sample lost: every step 0..$((STEPS - 1)) trained exactly once" "$WORK/int.log" || fail "rerun summary: $(cat "$WORK/int.log")"
"$AUTOHET" report "$WORK/int/metrics.jsonl" >"$WORK/report.out" || fail "report of the appended metrics"
grep -q "$STEPS step lines (steps 0..$((STEPS - 1)))" "$WORK/report.out" || fail "report: $(cat "$WORK/report.out")"
grep -q "^restore of step $stopped (launch 1) repaired: rank [0-9]*: $said$" "$WORK/report.out" || fail "report: no repair: $(cat "$WORK/report.out")"
echo "Ctrl-C: stopped and saved at step $stopped, the same command resumed there and finished"

# ---- a second Ctrl-C: the job is stopped at once ----
interrupt_at "$WORK/int2" 3 2 --grace-s 20
[ $rc = 130 ] || { cat "$WORK/int2.log"; fail "Ctrl-C twice: exit $rc, want 130"; }
grep -q "interrupted again: stopping the job at once" "$WORK/int2.log" || fail "Ctrl-C twice: $(cat "$WORK/int2.log")"

# ---- Ctrl-C with no save at the notice (--grace-s 0): the summary says where a rerun really starts,
# the newest checkpoint (it said "steps N..39 not yet", N the first step not trained: issue 40 item 11) ----
CKPT_EVERY=2 interrupt_at "$WORK/int3" 5 1 --grace-s 0
[ $rc = 130 ] || { cat "$WORK/int3.log"; fail "Ctrl-C, --grace-s 0: exit $rc, want 130"; }
ck=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"checkpoint\"" in l and "\"ok\":true" in l][-1]["step"])' "$WORK/int3/metrics.jsonl")
grep -q "the run stopped early: steps 0\.\.[0-9]* were each trained once on their own samples; the same command resumes at step $ck (the newest checkpoint) and trains steps $ck\.\.$((STEPS - 1))$" \
    "$WORK/int3.log" || fail "Ctrl-C, --grace-s 0: where a rerun starts (checkpoint $ck): $(cat "$WORK/int3.log")"

# ---- a rank that stops progressing (SIGSTOP: no exit, no message) with the local launcher: the step
# timeout names it, its node leaves as lost, the run goes on without it (it hung with no message,
# and --step-timeout was refused with the local launcher: issue 40 item 11) ----
STEPS=30
CKPT_EVERY=2
run_agent "$WORK/stall" --step-timeout 1 &
sub=$!
for _ in $(seq 1200); do
    [ "$(cat "$WORK/stall/launch-0/metrics.jsonl" 2>/dev/null | grep -c '"step"')" -ge 3 ] && break
    kill -0 $sub 2>/dev/null || break
    sleep 0.05
done
read -r srank spid < <(python3 -c '
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/rank-*.json")):
    d = json.load(open(f))
    if d["node"] == "slow-1":
        print(f.split("rank-")[1].split(".")[0], d["pid"])
        break' "$WORK/stall/launch-0")
[ -n "$spid" ] || { kill $sub; fail "no rank of slow-1 in $WORK/stall/launch-0"; }
kill -STOP "$spid"
wait $sub || { cat "$WORK/stall.log"; fail "the run with a stopped rank failed"; }
grep -q "rank stopped progressing (no metrics line for [0-9.]* s, over the step timeout of [0-9.]* s): rank 0*$srank on slow-1 (pid $spid): stopped by a signal" \
    "$WORK/stall.log" || fail "the stopped rank not named: $(cat "$WORK/stall.log")"
grep -q '"nodes_up":\["fast-0","slow-0"\]' "$WORK/stall/metrics.jsonl" && grep -q "no sample lost: every step 0..29" "$WORK/stall.log" ||
    fail "the run did not go on without slow-1: $(cat "$WORK/stall.log")"
echo "stopped rank: $(grep -o 'rank stopped progressing.*signal' "$WORK/stall.log")"

# ---- slow-0's mpirun stopped (SIGSTOP), its ranks not, once 3 steps are in: the ranks train to the end and cannot
# finalize without it; the step timeout names it and the job is stopped (the run hung with "every rank is running:
# waiting on" before, session 25) ----
STEPS=12
run_agent "$WORK/mstop" --step-timeout 1 &
sub=$!
wait_until 60 step_lines_at_least 3 "$WORK/mstop/launch-0/metrics.jsonl" || { kill $sub; fail "mpirun stopped: no 3 steps"; }
mp=$(ps -o ppid= -p "$(rank_pids "$WORK/mstop/launch-0" slow-0)" | tr -d ' ')
[ "$(cat "/proc/$mp/comm")" = mpirun ] || { kill $sub; fail "slow-0's rank's parent $mp is not mpirun"; }
kill -STOP "$mp"
if ! wait_until 60 eval '! kill -0 $sub 2>/dev/null'; then
    kill -CONT "$mp"; kill $sub; wait $sub; fail "mpirun stopped: the run still going 60 s on: $(tail -2 "$WORK/mstop.log")"
fi
wait $sub || { cat "$WORK/mstop.log"; fail "the run with a stopped mpirun failed"; }
grep -q "mpirun (pid $mp.*) stopped by a signal (state T: SIGSTOP or a debugger): its ranks cannot end; the job is stopped and relaunched" \
    "$WORK/mstop.log" || fail "the stopped mpirun not named: $(cat "$WORK/mstop.log")"
grep -q "no sample lost: every step 0..11" "$WORK/mstop.log" || fail "mpirun stopped: $(cat "$WORK/mstop.log")"
echo "stopped mpirun: $(grep -o 'mpirun (pid.*cannot end' "$WORK/mstop.log")"

# ---- a hang that recurs (every rank waits at step 3's hook, each launch): the step timeout's relaunch on the same
# nodes is a retry of the failure policy, so the second hang at the same step ends the run, named (before, review2
# of session 25: relaunched without end, counted nowhere) ----
STEPS=8
if AH_TEST_HOOK="phase=step,step=3,file=$WORK/hang.at" timeout 120 "$AUTOHET" run --model tiny-gpt2 --cluster "$CLUSTER" \
    --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS --ckpt-every 2 --work-dir "$WORK/hang" \
    --quiet --step-timeout 1 >"$WORK/hang.log" 2>&1; then
    fail "a recurring hang: the run succeeded"
fi
grep -q "the training job hung at step 3, stopped by the step timeout with no node at fault (.*not restarted again: it came back at step 3 right after restart 1, which was for the same failure (a hang with no node at fault)" \
    "$WORK/hang.log" || fail "a recurring hang not ended by the failure policy: $(tail -3 "$WORK/hang.log")"
echo "recurring hang: $(grep -o 'not restarted again: it came back at step 3' "$WORK/hang.log")"
echo "PASS"
