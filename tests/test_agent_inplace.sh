#!/usr/bin/env bash
# autohet run --in-place (issue 36 "Survivors keep their processes"; docs/elastic.md "In-place
# reconfiguration at a notice"): the local launcher starts one mpirun a node, joined into one world; once
# 3 steps are in, the events file preempts slow-1.
#  - in place: the next plan (fast-0 + slow-0) uses only devices running ranks hold, so the agent asks
#    the trainers to change in place: one launch, slow-1's job leaves, the survivors' pids are those of
#    the ranks started (the "reconfigure" event's pids and the rank files, node by node), the preempt and
#    recover events say in place with the change's phases, every step 0..N-1 trained exactly once, each
#    loss bit-identical to an uninterrupted run of the first plan before the change and to a run of the
#    next plan resumed from the step saved at the change after it;
#  - fallback: slow-0 is down from the start and comes back with the notice, so the next plan needs a
#    device no running rank holds: said, the notice's stop and relaunch as without --in-place, and the
#    same checks of the losses (the first plan's run, then the relaunch's plan resumed).
source "$(dirname "$0")/train_common.sh"
source "$SRC/tests/agent_common.sh"
command -v ompi-server >/dev/null || { echo "no ompi-server: skipped"; exit 77; }
STEPS=60
CKPT_EVERY=100 # the only saves: the one at the change (or the notice) and the last step's
small_cluster

# notice_run NAME START NOTICE...: the agent with --in-place (and $AGENT_FLAGS) and an events file holding START;
# once launch 0 has 3 steps, its rank files' node -> pid into NAME.pids and each NOTICE (e.g. remove,slow-1)
# appended, timed now (+MS,EVENT: MS milliseconds later).
notice_run() {
    local name=$1 start=$2 d=$WORK/$1 t0 ms i ev n
    shift 2
    echo "$start" >"$d.csv"
    t0=$(date +%s%N)
    run_agent "$d" --in-place --events "$d.csv" --grace-s 60 ${AGENT_FLAGS:-} &
    local agent=$!
    for i in $(seq 1200); do
        n=$(grep -cs '"step"' "$d/launch-0/metrics.jsonl")
        [ "${n:-0}" -ge "${NOTICE_AFTER:-3}" ] && break
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    python3 -c '
import glob, json, sys
print(json.dumps({d["node"]: d["pid"] for d in map(lambda f: json.load(open(f)), glob.glob(sys.argv[1] + "/rank-*.json"))}))' \
        "$d/launch-0" >"$d.pids"
    # PIPE_NODE: that node's rank gets a SIGPIPE now, as a write to a process gone (a job that left) sends it: the
    # trainer ignores it (before, it died with nothing written, mpirun's status 141, and the job was relaunched)
    [ -z "${PIPE_NODE:-}" ] || kill -PIPE "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
        "$d.pids" "$PIPE_NODE")"
    ms=$((($(date +%s%N) - t0) / 1000000))
    for ev in "$@"; do
        if [[ $ev == +* ]]; then i=${ev%%,*}; echo "$((ms + ${i#+})),${ev#*,}"; else echo "$ms,$ev"; fi >>"$d.csv"
    done
    wait $agent || { cat "$d.log"; fail "$name: autohet run"; }
}

# exact NAME PLAN_AFTER: every loss of NAME's final history bit-identical to PLAN-0's uninterrupted run
# before the step it resumed from at its recovery, and after it to PLAN_AFTER resumed from that step.
exact() {
    local d=$WORK/$1 after=$2 s n
    s=$(python3 -c 'import json,sys; print([x for x in map(json.loads, open(sys.argv[1])) if x.get("event") == "recover"][0]["step"])' "$d/metrics.jsonl")
    n=$(plan_ranks "$d/plan-0.json")
    timeout 300 $MPIRUN -np "$n" "$AUTOHET" train --plan "$d/plan-0.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
        --metrics "$d.ref0.jsonl" >"$d.ref0.out" 2>&1 || { cat "$d.ref0.out"; fail "$1: plan-0 uninterrupted"; }
    rm -rf "$d.copy" && cp -r "$d/local" "$d.copy"
    find "$d.copy" -maxdepth 2 -name "step-*" ! -name "step-$(printf %08d "$s")" -exec rm -rf {} +
    n=$(plan_ranks "$after")
    timeout 300 $MPIRUN -np "$n" "$AUTOHET" train --plan "$after" --data "$WORK/text.bin" --steps $STEPS --quiet --resume \
        --local-root "$d.copy" --metrics "$d.ref1.jsonl" >"$d.ref1.out" 2>&1 || { cat "$d.ref1.out"; fail "$1: resumed at $s"; }
    python3 - "$d" "$s" "$STEPS" <<'PY' || { cat "$d.log"; fail "$1: losses"; }
import json, sys
d, s, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
load = lambda f: [x for x in map(json.loads, open(f)) if "event" not in x]
r0, r1 = {x["step"]: x["loss"] for x in load(d + ".ref0.jsonl")}, load(d + ".ref1.jsonl")
assert r1[0]["step"] == s, f"the reference resumed from step {r1[0]['step']}, not {s}"
r1 = {x["step"]: x["loss"] for x in r1}
hist = []  # the final history: a launch that resumed earlier drops what followed
for x in load(d + "/metrics.jsonl"):
    assert x["step"] <= len(hist), f"step {x['step']} after {len(hist)} steps: skipped"
    hist = hist[:x["step"]] + [x["loss"]]
assert len(hist) == steps, len(hist)
for k, v in enumerate(hist):
    ref = r0[k] if k < s else r1[k]
    assert v == ref, f"step {k}: {v!r} vs {ref!r} ({'first plan' if k < s else 'resumed'})"
print(f"  {steps} losses bit-identical: {s} to the first plan's run, {steps - s} to the next plan resumed from step {s}")
PY
}

# ---- in place ----
PIPE_NODE=fast-0 notice_run ip "0,add,fast-0" remove,slow-1
grep -q "in place: changed at step" "$WORK/ip.log" || { cat "$WORK/ip.log"; fail "ip: no change in place"; }
python3 - "$WORK/ip" "$STEPS" <<'PY' || { cat "$WORK/ip.log"; fail "ip: in place"; }
import glob, json, os, sys
d, steps = sys.argv[1], int(sys.argv[2])
ev = [json.loads(l) for l in open(d + "/metrics.jsonl")]
before = json.load(open(d + ".pids"))
assert sorted(before) == ["fast-0", "slow-0", "slow-1"], before
rc = [x for x in ev if x.get("event") == "reconfigure"]
assert len(rc) == 1 and rc[0]["ranks_from"] == 3 and rc[0]["ranks_to"] == 2, rc
after = {r["node"]: r["pid"] for r in map(lambda f: json.load(open(f)), glob.glob(d + "/launch-0/rank-*.json"))}
assert after == {k: before[k] for k in ("fast-0", "slow-0")}, f"the survivors' processes: {after} vs {before}"
assert sorted(rc[0]["pids"]) == sorted(after.values()), (rc[0]["pids"], after)
assert not os.path.exists(d + "/launch-1") and not [x for x in ev if x.get("event") == "replan" and not x.get("in_place")], "relaunched"
ip = [x for x in ev if x.get("event") == "replan" and x.get("in_place")]  # the plan changed onto in place
assert len(ip) == 1 and ip[0]["devices"] == 2, ip
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(pre) == len(rec) == 1 and pre[0]["in_place"] and rec[0]["in_place"], (pre, rec)
assert pre[0]["nodes"] == rec[0]["nodes"] == ["slow-1"] and rec[0]["step"] == rc[0]["step"], (pre, rec, rc)
assert pre[0]["saved"] == rc[0]["committed"], (pre, rc)  # "saved" only when committed at the change
assert set(rec[0]["phases"]) == {"save", "teardown", "split", "init", "load", "move"}, rec[0]
assert rec[0]["phases"]["move"] > 0 or rec[0]["phases"]["load"] > 0, rec[0]  # the state arrived one way
bd = rec[0]["breakdown"]
assert abs(sum(bd.values()) - rec[0]["seconds"]) < 0.05, rec[0]
st = [x["step"] for x in ev if "event" not in x]
assert st == list(range(steps)), f"every step once: {st}"
assert ev[-1]["event"] == "done" and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
assert not os.path.exists(os.path.dirname(d) + "/ip/local/slow-1"), "slow-1's disk kept"
print(f"in place at step {rc[0]['step']}: slow-1's job left, pids kept {after}, recovery {rec[0]['seconds']:.2f} s "
      f"(phases {rec[0]['phases']})")
PY
grep -q "recovery 0 (events file: slow-1) at .* in place (the survivors kept their processes)" "$WORK/ip.log" ||
    fail "ip: the summary does not say in place"
save=$(python3 -c 'import json,sys; print([x for x in map(json.loads, open(sys.argv[1])) if x.get("event") == "reconfigure"][0]["save"])' "$WORK/ip/metrics.jsonl")
if [ "$save" = async ]; then want="the change's step written behind the next step, not saved at the change"; else want="checkpoint saved at the change"; fi
grep -q "recovery 0 (events file: slow-1) at .* in place (the survivors kept their processes) at step [0-9]*, $want\$" "$WORK/ip.log" ||
    fail "ip: the summary does not say the change's save ($save)"
# the summary's launch record: the running plan's device count (the ranks that went on), not the first's
n=$(sed -n 's/.*in place: changed at step [0-9]*: [0-9]* jobs\? left, \([0-9]*\) ranks go on.*/\1/p' "$WORK/ip.log")
grep -q "^launch 0: $n devices," "$WORK/ip.log" || fail "ip: the summary's launch 0 is not the running plan's $n devices"
exact ip "$WORK/ip/launch-0/next-plan.json"

# ---- fallback: the next plan needs slow-0, which no running rank holds: up and free, it would join with the
# change (session 24, test_agent_inplace_join "free"), but its admission does not fit (AH_JOIN_ADMIT_S=0.5) ----
AH_JOIN_ADMIT_S=0.5 notice_run fb "0,remove,slow-0" add,slow-0 remove,slow-1
grep -q "in place: not at this notice (the next plan uses 1 device no running rank holds; 1 of them on 1 free host, \
but the admission does not fit the deadline: 0.50 s for it, .*): the notice's stop and relaunch" \
    "$WORK/fb.log" || { cat "$WORK/fb.log"; fail "fb: the fallback is not said"; }
grep -q "in place: changed" "$WORK/fb.log" && fail "fb: changed in place"
python3 - "$WORK/fb" <<'PY' || { cat "$WORK/fb.log"; fail "fb: relaunch"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(rec) == 1 and not rec[0]["in_place"] and rec[0]["nodes"] == ["slow-1"], rec
up = [x["nodes_up"] for x in ev if x.get("event") == "replan"]
assert up == [["fast-0", "slow-0"]], up
assert ev[-1]["event"] == "done" and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
print(f"fallback: relaunched, resumed from step {rec[0]['step']} in {rec[0]['seconds']:.2f} s")
PY
exact fb "$WORK/fb/plan-1.json"
# ---- park: a staying host keeps some of its ranks (docs/elastic.md "Parked ranks") ----
# fast-0 holds 3 devices; plan-0 (global batch 4) is data-parallel over them and fast-1's. fast-1 preempted: the next
# plan is fast-0:0 and fast-0:1 alone, so fast-0's job keeps 2 of its 3 ranks: the change in place (one launch),
# fast-0's third rank parked (idle until its job ends, then gone), fast-1's job left, every step once (the losses'
# exactness is test_train_inplace's park case). Before parking, a staying host's unused rank made this the
# notice's stop and relaunch. With --ckpt-every 2 and the notice after 6 steps: the last committed step is plan-0's,
# every piece of fast-1's also on fast-0, so the change's step is written behind ("async"; at an even step its own
# periodic snapshot commits it: no save either) and the agent's deadline is the whole grace period, not less the save
# estimate (said, with the estimate; before, it took the estimate off).
CLUSTER=$SRC/examples/clusters/cpu-partial-host.json GB=4 STEPS=30 CKPT_EVERY=2
NOTICE_AFTER=6 notice_run pk "0,add,fast-0" remove,fast-1
grep -q "in place: the change asked for at step [0-9]* (jobs \[[0-9]*\] leave, 2 ranks go on under the next plan, 1 rank park" \
    "$WORK/pk.log" && grep -q "in place: changed at step .*; 1 rank parked, idle until their host's job ends: fast-0:2$" \
    "$WORK/pk.log" || { cat "$WORK/pk.log"; fail "pk: not in place"; }
python3 - "$WORK/pk" <<'PY' || { cat "$WORK/pk.log"; fail "pk: parked"; }
import json, os, re, sys
d = sys.argv[1]
log, ev = open(d + ".log").read(), [json.loads(l) for l in open(d + "/metrics.jsonl")]
rc = [x for x in ev if x.get("event") == "reconfigure"]
assert len(rc) == 1 and rc[0]["ranks_from"] == 4 and rc[0]["ranks_to"] == 2, rc
assert not os.path.exists(d + "/launch-1") and not [x for x in ev if x.get("event") == "replan" and not x.get("in_place")], "relaunched"
pid = int(re.search(r"job \d+ \(pid (\d+)\) parks at step %d" % rc[0]["step"], log).group(1))
m = re.search(r"pid %d parked ([0-9.]+) s \(CPU ([0-9.]+) s\): its job ends" % pid, log)
assert m and float(m.group(2)) <= 0.02 * float(m.group(1)) + 0.02, f"not idle while parked: {m and m.group(0)}"
assert not os.path.exists(f"/proc/{pid}"), f"the parked process {pid} is left behind"
assert [x["step"] for x in ev if "event" not in x] == list(range(30)) and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
q = re.search(r"in place: the change asked for at step .*waiting for it until [0-9.]+ s \((.*)\)$", log, re.M)
# no save before the move: written behind, or (a change at an even step) the step's own periodic snapshot committed
assert q and (rc[0]["save"] == "async" or (rc[0]["committed"] and "save_sync_why" not in rc[0])), (q and q.group(0), rc[0])
assert q.group(1).startswith("the grace period: no save before the move"), q.group(0)
print(f"park: in place at step {rc[0]['step']} (one launch), pid {pid} parked {m.group(1)} s with {m.group(2)} s of CPU; "
      f"deadline: {q.group(1)}")
PY
# ---- pkback: the parked rank re-admitted (docs/elastic.md "Parked ranks", re-admission) ----
# As pk (200 steps), then fast-1 back 0.2 s after the notice; --join-horizon-s makes the join rule take plan-0's devices again: fast-0:2,
# held by the parked process, counts as held, so the join is in place with "readmit" (fast-0's job's rank 2 back,
# woken in its job) and fast-1's new job admitted: one launch, two changes (4 -> 2 -> 4 ranks), the parked
# process the one re-admitted (its pid in the second event's), every step once. Before, the join said
# "adds device fast-0:2 to a running host (its job cannot gain ranks)" and relaunched.
AGENT_FLAGS="--join-horizon-s 1000000" STEPS=200 CKPT_EVERY=100 NOTICE_AFTER=3 notice_run pkback "0,add,fast-0" remove,fast-1 +200,add,fast-1
grep -q "in place: the join asked for at step" "$WORK/pkback.log" && grep -q "in place: joined at step" \
    "$WORK/pkback.log" || { cat "$WORK/pkback.log"; fail "pkback: the join with the parked rank not in place"; }
python3 - "$WORK/pkback" <<'PY' || { cat "$WORK/pkback.log"; fail "pkback: re-admitted"; }
import json, os, re, sys
d = sys.argv[1]
log, ev = open(d + ".log").read(), [json.loads(l) for l in open(d + "/metrics.jsonl")]
rc = [x for x in ev if x.get("event") == "reconfigure"]
assert [(x["ranks_from"], x["ranks_to"], x.get("readmit", 0), x["join"]) for x in rc] == [(4, 2, 0, 0), (2, 4, 1, 1)], rc
assert not os.path.exists(d + "/launch-1"), "relaunched"
pid = int(re.search(r"job \d+ \(pid (\d+)\) parks at step %d" % rc[0]["step"], log).group(1))
m = re.search(r"job \d+ \(pid %d\) parked ([0-9.]+) s \(CPU ([0-9.]+) s\): re-admitted at step %d" % (pid, rc[1]["step"]), log)
assert m and pid in rc[1]["pids"] and rc[1]["state"] == "moved", (m, rc[1])
assert [x["step"] for x in ev if "event" not in x] == list(range(200)) and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
print(f"pkback: parked at step {rc[0]['step']}, re-admitted at step {rc[1]['step']} with fast-1's join (one launch), "
      f"pid {pid} parked {m.group(1)} s with {m.group(2)} s of CPU; the join's phases {rc[1]['seconds']}")
PY
echo "PASS"
