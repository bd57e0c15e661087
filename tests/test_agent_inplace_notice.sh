#!/usr/bin/env bash
# autohet run --in-place, the agent's decision at a notice (docs/elastic.md "In-place reconfiguration at a
# notice"; tests/test_agent_inplace.sh checks the change itself): small_cluster, 40 steps, --ckpt-every 100.
#  - early: slow-1 preempted 0.1 s after the start, before the trainer has said where it resumed: the
#    request waits for that (said) and the change is made in place: one launch, every step once;
#  - adopt: the trainers take the request (slow-1's rank then held in the change by the test hook reconfig-save,
#    before its save: the change's step is written behind by the survivors, nothing saved on slow-1), then slow-1
#    comes back: the agent falls back (the request withdrawn, SIGTERM to slow-1), and when the change the
#    trainers took is said it adopts it (said): the stop called off, one launch, every step once, not a
#    kill of the survivors at the end of the grace period and a relaunch;
#  - staying: slow-0 down from the start and back with the notice of slow-1 (test_agent_inplace's fallback
#    case), --join-horizon-s 1: the best next plan needs slow-0's device, no running rank's, so it cannot
#    change in place; the plan over the staying ranks' devices (fast-0's) can, and by the join rule the
#    best's gain over 1 s does not pay for a relaunch: the staying plan taken (said why), changed in
#    place, one launch, every step once, slow-0 weighed later by the join rule.
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
command -v ompi-server >/dev/null || { echo "no ompi-server: skipped"; exit 77; }
STEPS=40
CKPT_EVERY=100
small_cluster

# one_launch NAME: NAME's run went on in place: no launch-1, no re-plan, one preempt and one recover event
# in place, every step 0..STEPS-1 once, done ok.
one_launch() {
    python3 - "$WORK/$1" "$STEPS" <<'PY' || { cat "$WORK/$1.log"; fail "$1: not one launch in place"; }
import json, os, sys
d, steps = sys.argv[1], int(sys.argv[2])
ev = [json.loads(l) for l in open(d + "/metrics.jsonl")]
assert not os.path.exists(d + "/launch-1") and not [x for x in ev if x.get("event") == "replan" and not x.get("in_place")], "relaunched"
ip = [x for x in ev if x.get("event") == "replan" and x.get("in_place")]  # the plan changed onto in place
assert len(ip) == 1, ip
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(pre) == len(rec) == 1 and pre[0]["in_place"] and rec[0]["in_place"], (pre, rec)
st = [x["step"] for x in ev if "event" not in x]
assert st == list(range(steps)), f"every step once: {st}"
assert ev[-1]["event"] == "done" and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
print(f"  in place at step {rec[0]['step']}, recovery {rec[0]['seconds']:.2f} s, one launch, every step once")
PY
}

# ---- early: the notice before the trainer said where it resumed ----
printf '0,add,fast-0\n100,remove,slow-1\n' >"$WORK/early.csv"
run_agent "$WORK/early" --in-place --events "$WORK/early.csv" --grace-s 60 || { cat "$WORK/early.log"; fail "early: autohet run"; }
grep -o "in place: .*" "$WORK/early.log" | head -3 | sed 's/^/    /'
grep -q "in place: the trainer has not said yet where it resumed: the change is asked for once it has" "$WORK/early.log" ||
    { cat "$WORK/early.log"; fail "early: the wait is not said"; }
grep -q "in place: changed at step" "$WORK/early.log" || { cat "$WORK/early.log"; fail "early: no change in place"; }
one_launch early

# ---- adopt: the change the trainers took during the fallback ----
d=$WORK/adopt
printf '0,add,fast-0\n' >"$d.csv"
t0=$(date +%s%N)
AH_TEST_HOOK="phase=reconfig-save,step=any,node=slow-1,action=pause,file=$d.hook" \
    run_agent "$d" --in-place --events "$d.csv" --grace-s 30 --join-horizon-s 1 &
agent=$!
# wait_for WHAT TEST...: up to 60 s for the shell test to hold
wait_for() {
    local what=$1 i
    shift
    for i in $(seq 1200); do
        "$@" && return 0
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    cat "$d.log"
    fail "$(basename "$d"): $what"
}
steps_in() {
    local n
    n=$(grep -cs '"step"' "$d/launch-0/metrics.jsonl")
    [ "${n:-0}" -ge 3 ]
}
wait_for "3 steps" steps_in
echo "$((($(date +%s%N) - t0) / 1000000)),remove,slow-1" >>"$d.csv"
wait_for "the change on slow-1 (the hook, before its save)" test -e "$d.hook"
echo "$((($(date +%s%N) - t0) / 1000000)),add,slow-1" >>"$d.csv"
wait_for "the fallback" grep -q "in place: the change at step [0-9]* not made (slow-1 came back before it)" "$d.log"
rm -f "$d.hook"
wait $agent || { cat "$d.log"; fail "adopt: autohet run"; }
grep -o "in place: .*" "$d.log" | head -4 | sed 's/^/    /'
grep -q "in place: the trainers took the change at step [0-9]* before the fallback withdrew it: adopted" "$d.log" ||
    { cat "$d.log"; fail "adopt: not adopted"; }
one_launch adopt

# ---- staying: the plan over the staying ranks' devices, in place (slow-0, up and free, would join with the change,
# test_agent_inplace_join "free": AH_JOIN_ADMIT_S=0.5 leaves its admission no time) ----
d=$WORK/staying
printf '0,add,fast-0\n0,remove,slow-0\n' >"$d.csv"
t0=$(date +%s%N)
AH_JOIN_ADMIT_S=0.5 run_agent "$d" --in-place --events "$d.csv" --grace-s 60 --join-horizon-s 1 &
agent=$!
wait_for "3 steps" steps_in
ms=$((($(date +%s%N) - t0) / 1000000))
printf '%s\n' "$ms,add,slow-0" "$ms,remove,slow-1" >>"$d.csv"
wait $agent || { cat "$d.log"; fail "staying: autohet run"; }
grep -o "\(next plan\|in place\): .*" "$d.log" | head -4 | sed 's/^/    /'
grep -q "next plan: the best (2 devices, .*) cannot change in place (the next plan uses 1 device no running rank holds; 1 of them on 1 free host, but the admission does not fit [^)]*); the plan over the staying ranks' devices (1 devices, .*) can\. By the join rule .*: the staying ranks' plan taken (in place)" \
    "$d.log" || { cat "$d.log"; fail "staying: the staying ranks' plan not taken, or not said why"; }
grep -q "in place: changed at step [0-9]*: 1 job left, 1 ranks go on" "$d.log" || { cat "$d.log"; fail "staying: no change in place"; }
one_launch staying
echo "PASS"
