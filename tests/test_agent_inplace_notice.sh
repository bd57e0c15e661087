#!/usr/bin/env bash
# autohet run --in-place, the agent's decision at a notice (docs/elastic.md "In-place reconfiguration at a
# notice"; tests/test_agent_inplace.sh checks the change itself): small_cluster, 40 steps, --ckpt-every 100.
#  - early: slow-1 preempted 0.3 s after the start, before the trainer has said where it resumed: the
#    request waits for that (said) and the change is made in place: one launch, every step once.
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
assert not os.path.exists(d + "/launch-1") and not [x for x in ev if x.get("event") == "replan"], "relaunched"
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
printf '0,add,fast-0\n300,remove,slow-1\n' >"$WORK/early.csv"
run_agent "$WORK/early" --in-place --events "$WORK/early.csv" --grace-s 60 || { cat "$WORK/early.log"; fail "early: autohet run"; }
grep -o "in place: .*" "$WORK/early.log" | head -3 | sed 's/^/    /'
grep -q "in place: the trainer has not said yet where it resumed: the change is asked for once it has" "$WORK/early.log" ||
    { cat "$WORK/early.log"; fail "early: the wait is not said"; }
grep -q "in place: changed at step" "$WORK/early.log" || { cat "$WORK/early.log"; fail "early: no change in place"; }
one_launch early

echo "PASS"
