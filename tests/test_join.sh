#!/usr/bin/env bash
# The agent's join rule (elastic/join_rule.h, agent_join.c) with the local launcher, tiny-gpt2 on the
# three one-device nodes of cpu-hetero-3 (fast-0, spot slow-0 and slow-1), slow-1 down from the start
# (a change at time 0: the starting state, no removal counted). Once launch 0 has finished a step, the
# events file gains `add slow-1`:
#   A. by default (no removal seen: an unbounded stay) the three-node plan, faster, pays at once: the
#      agent restarts at the join, not at the first checkpoint (step 30 of 40): the stop at the next
#      step boundary saves, the relaunch resumes from that step, nothing lost;
#   B. with --join-horizon-s 0.001 the gain over a millisecond is below any restart's cost: the join
#      waits, is weighed again at the checkpoint (still waits), and the run ends on launch 0 alone.
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
STEPS=40
CKPT_EVERY=30
small_cluster

# join_after_first_step NAME [flags]: the run in $WORK/NAME, slow-1 added once launch 0 trained a step
join_after_first_step() {
    local name=$1
    shift
    printf '0,remove,slow-1\n' >"$WORK/$name.csv"
    run_agent "$WORK/$name" --events "$WORK/$name.csv" --grace-s 10 "$@" &
    local pid=$! waited=0
    until grep -q "launch 0: first step" "$WORK/$name.log" 2>/dev/null; do
        kill -0 $pid 2>/dev/null || break
        sleep 0.05
        waited=$((waited + 1))
        [ $waited -lt 2400 ] || { kill $pid; fail "$name: launch 0 trained no step in 120 s: $(cat "$WORK/$name.log")"; }
    done
    printf '1,add,slow-1\n' >>"$WORK/$name.csv" # due at once: read when the file grows
    wait $pid || { cat "$WORK/$name.log"; fail "$name: the run failed"; }
    grep -q "no sample lost: every step 0..$((STEPS - 1)) trained exactly once" "$WORK/$name.log" ||
        fail "$name: samples: $(tail -5 "$WORK/$name.log")"
}

# ---- A: the join pays at once ----
join_after_first_step now
grep -q "nodes joined; a plan with the joined nodes is faster" "$WORK/now.log" &&
    grep -q "over the expected stay of inf s (the removals seen) against its cost of .*: restarting" "$WORK/now.log" ||
    fail "A: the join decided at once: $(grep -i join "$WORK/now.log")"
python3 - "$WORK/now" "$CKPT_EVERY" <<'EOF' || fail "A: events"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(pre) == 1 and pre[0]["cause"] == "node joined", pre
assert pre[0]["step"] < int(sys.argv[2]), f"restarted at step {pre[0]['step']}, not before the first checkpoint"
assert pre[0]["saved"] and rec[0]["step"] == pre[0]["step"] and rec[0]["nodes"] == ["slow-1"], (pre, rec)
print(f"A: slow-1 taken in at step {pre[0]['step']} (first checkpoint at {sys.argv[2]}), recovery {rec[0]['seconds']:.2f} s")
EOF

# ---- B: a horizon too short to pay: the join waits ----
join_after_first_step wait --join-horizon-s 0.001
grep -q "nodes joined; a plan with the joined nodes is faster.*" "$WORK/wait.log" &&
    grep -q "over the expected stay of 0.001 s (--join-horizon-s) .*: waiting (decided again" "$WORK/wait.log" ||
    fail "B: the join waits: $(grep -i join "$WORK/wait.log")"
grep -q "checkpoint taken; a plan with the joined nodes is faster" "$WORK/wait.log" ||
    fail "B: weighed again at the checkpoint: $(grep -i join "$WORK/wait.log")"
! grep -q '"cause":"node joined"' "$WORK/wait/metrics.jsonl" && [ ! -e "$WORK/wait/plan-1.json" ] ||
    fail "B: restarted for a join that does not pay"
echo "B: the join waited (--join-horizon-s 0.001): one launch"
echo "PASS"
