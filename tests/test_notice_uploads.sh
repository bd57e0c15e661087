# The cloud uploads pending when a job stops (runtime/ckpt_notice.c ah_ckpt_notice_uploads,
# ckpt_io.c ah_ckpt_session_close; docs/checkpoints.md, the uploads at a preemption). A two-node pipeline
# (stage 0 on n0, stage 1 on n1), a save every 4 steps (--ckpt-sync), a cloud (an S3 server on
# loopback) at 300 KB/s so that an upload is still pending when the stop comes.
#   A. --cloud-only (autohet run --recovery cloud-only drops every node's disk at the stop), the
#      notice (SIGTERM) to n1: no node may drop its upload, the staying n0 included (its disk goes
#      too): the newest step any node uploaded is complete in the cloud (every node's manifest).
#   D. (below C) a notice to n1 alone while the next plan names it: n1 keeps its upload.
#   B. a join's restart: the agent SIGTERMs every node and writes the plan it restarts onto into the run
#      directory (next-plan.json, here the same plan, as the agent writes it): the relaunch reads every
#      node's disk, so every node drops its pending upload (the preempt event's "uploads_cancelled":
#      n0 and n1, held on a disk) instead of holding the stop for it, as the simulator prices a join
#      (docs/simulator.md rule 4). Before, no node dropped: the stop waited for every upload.
#   C. the same stop without a next plan (an interrupt: the run ends): no node drops its upload.
#   E. (below D) a join's stop with n1 preempted in it: the next plan rewritten without n1 after the
#      trainers read it: n1 keeps its upload.
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage) C is left out (its code path is A's).
. "$(dirname "$0")/train_common.sh"
python3 - "$PLANS/train-pp2-recompute.json" "$WORK/pp2.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"][0]["stages"][1]["devices"] = [{"node": "n1", "index": 0}]
d["cluster"]["gpu_types"]["cpu"]["emulate"]["slowdown"] = 10.0  # the notice lands mid-run
d["cluster"]["network"]["cloud_gb_s"] = 3e-4  # an upload still pending at the stop
json.dump(d, open(sys.argv[2], "w"))
PY
start_moto
# stop NAME RANKS [flags...]: the run, SIGTERM to the ranks RANKS (e.g. "1" or "0 1") after 6 steps;
# sets RC and STOP_S (the signal to the job's exit)
stop() {
    local name=$1 ranks=$2
    shift 2
    mkdir -p "$WORK/$name.run"
    timeout 300 $MPIRUN -np 2 "$AUTOHET" train --plan "$WORK/pp2.json" --data "$WORK/text.bin" --steps 40 --quiet \
        --metrics "$WORK/$name.jsonl" --ckpt-every 4 --ckpt-sync --local-root "$WORK/$name.ck" \
        --run-dir "$WORK/$name.run" --grace-s 60 --cloud "s3://ckpt/$name" --s3-endpoint "$EP" "$@" \
        >"$WORK/$name.out" 2>"$WORK/$name.err" &
    local job=$! pids="" t0
    for _ in $(seq 600); do
        [ -r "$WORK/$name.jsonl" ] && [ "$(grep -c '"loss"' "$WORK/$name.jsonl")" -ge 6 ] && break
        sleep 0.1
    done
    for r in $ranks; do
        pids="$pids $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/$name.run/rank-$r.json")" ||
            fail "$name: rank-$r.json"
    done
    t0=$(date +%s.%N)
    kill -TERM $pids
    RC=0
    wait $job || RC=$?
    STOP_S=$(awk -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.2f", t1 - t0 }')
    [ "$RC" = 75 ] || { cat "$WORK/$name.err" >&2; fail "$name: exit status $RC, expected 75"; }
}
# cloud_manifests PREFIX: "STEP NODE" per manifest object under s3://ckpt/PREFIX
cloud_manifests() {
    curl -s "$EP/ckpt?list-type=2&prefix=$1/" | grep -o 'step-[0-9]*/manifest-n[0-9]*\.json' |
        sed 's#step-0*\([0-9][0-9]*\)/manifest-\(n[0-9]*\)\.json#\1 \2#'
}

newest_complete() { # PREFIX: the newest step any node uploaded has every node's manifest (NODES set: those nodes')
    cloud_manifests "$1" | python3 -c '
import os, sys
by = {}
for line in sys.stdin:
    step, node = line.split()
    by.setdefault(int(step), set()).add(node)
assert by, "nothing reached the cloud"
newest = max(by)
want = set(os.environ.get("NODES", "n0 n1").split())
assert want <= by[newest], f"step {newest} in the cloud from {sorted(by[newest])} only: a node dropped its upload"
'
}
# A. --cloud-only: every upload finished, the staying node's too
stop only 1 --cloud-only
echo "  A: the notice to the job's exit: $STOP_S s; cloud manifests: $(cloud_manifests only | tr '\n' ',')"
newest_complete only || fail "A: the cloud after a --cloud-only stop"
! grep -q '"uploads_cancelled"' "$WORK/only.jsonl" || fail "A: an upload cancelled under --cloud-only"
# B. a join: every node stops, the next plan known
mkdir -p "$WORK/join.run"
cp "$WORK/pp2.json" "$WORK/join.run/next-plan.json"
stop join "0 1"
echo "  B: a join's stop (every node, next plan known): $STOP_S s"
python3 - "$WORK/join.jsonl" <<'PY' || fail "B: the join's preempt event"
import json, sys
pre = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "preempt"][-1]
assert sorted(pre["nodes"]) == ["n0", "n1"], pre
assert sorted((u["node"], u["held_in"]) for u in pre.get("uploads_cancelled", [])) == [("n0", "disk"), ("n1", "disk")], pre
PY
# C. an interrupt: every node stops, no next plan: every upload finished
[ "${AH_CLUSTER_SHORT:-0}" = 1 ] && { echo "PASS (short subset: A and B)"; exit 0; }
stop end "0 1"
echo "  C: every node stopped, no next plan: $STOP_S s; cloud manifests: $(cloud_manifests end | tr '\n' ',')"
! grep -q '"uploads_cancelled"' "$WORK/end.jsonl" || fail "C: an upload cancelled with no relaunch known"
# Both ranks get the SIGTERM at once, but a rank waiting in the step boundary's agreement has already
# given its flag: then the preempt event names only the other node, and the one not named stays (its disk
# kept, its upload may wait for the relaunch, as a spared node's does). Every node named must complete.
noticed=$(python3 -c 'import json,sys; print(" ".join(sorted([o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "preempt"][-1]["nodes"])))' "$WORK/end.jsonl")
[ "$noticed" = "n0 n1" ] || echo "  C: the preempt event names $noticed only (a rank was in the boundary's agreement when the signal came)"
NODES=$noticed newest_complete end || fail "C: the cloud after the stop"
# D. a notice to n1 alone with the next plan known and naming n1 (a node noticed after the agent
#    wrote it, as a second preemption in one stop is): n1 may leave that plan, so it keeps its
#    upload; n0, spared and in the plan, drops its own (held on its disk). Before, n1 dropped too.
mkdir -p "$WORK/late.run"
cp "$WORK/pp2.json" "$WORK/late.run/next-plan.json"
stop late 1
echo "  D: a notice to n1 with a next plan naming it: $STOP_S s"
python3 - "$WORK/late.jsonl" <<'PY' || fail "D: the preempt event"
import json, sys
pre = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "preempt"][-1]
cancelled = sorted(u["node"] for u in pre.get("uploads_cancelled", []))
assert "n1" not in cancelled, pre
PY
# E. a join whose next plan names n1, n1 preempted during the join's stop: the agent makes the next
#    plan again without it (elastic/agent.c notice_leaving, ah_agent_replan_in_stop) and rewrites
#    next-plan.json after the trainers read it (with replicas, before the notice's save: here a budget
#    nothing fits, so no memory holds n1's pieces); the test plays the agent, n0's rank paused (test
#    hook notice-uploads, action=pause) while it rewrites the file. The trainers read it again before
#    they decide: n1 keeps its upload (its newest step reaches the cloud), n0 drops its own (held on
#    its disk). Before session 18 n1 dropped too: its pieces of that step were then on its disk only.
python3 - "$WORK/pp2.json" "$WORK/n0only.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["pipelines"][0]["stages"][1]["devices"] = [{"node": "n0", "index": 1}]
json.dump(d, open(sys.argv[2], "w"))
PY
mkdir -p "$WORK/pre.run"
cp "$WORK/pp2.json" "$WORK/pre.run/next-plan.json"
(
    for _ in $(seq 3000); do [ -e "$WORK/pre.pause" ] && break; sleep 0.1; done
    cp "$WORK/n0only.json" "$WORK/pre.run/.next.tmp" && mv "$WORK/pre.run/.next.tmp" "$WORK/pre.run/next-plan.json"
    rm -f "$WORK/pre.pause"
) &
agent=$!
AH_TEST_HOOK="phase=notice-uploads,step=any,node=n0,file=$WORK/pre.pause,action=pause" stop pre "0 1" \
    --replica-memory-gb 1e-6 --replica-root "$WORK/pre.mem"
wait $agent
N1=$(cd "$WORK/pre.ck/n1" && ls -d step-*/manifest.json | tail -n 1 | sed 's#step-0*\([0-9][0-9]*\)/.*#\1#')
echo "  E: a join's stop, n1 preempted in it (next plan rewritten without n1): $STOP_S s; n1's newest step $N1;" \
    "cloud manifests: $(cloud_manifests pre | tr '\n' ',')"
# (the two signals may fall on both sides of a step boundary: then the notice is n0's alone and n1 a
# staying node that the rewritten plan leaves out, which keeps its upload by the same rule)
python3 - "$WORK/pre.jsonl" <<'PY' || fail "E: the preempt event"
import json, sys
pre = [o for o in map(json.loads, open(sys.argv[1])) if o.get("event") == "preempt"][-1]
cancelled = [(u["node"], u["held_in"]) for u in pre.get("uploads_cancelled", [])]
assert ("n1", "disk") not in cancelled, pre
assert sorted(pre["nodes"]) != ["n0", "n1"] or cancelled == [("n0", "disk")], pre
print(f"  E: noticed {pre['nodes']}, uploads cancelled {cancelled}")
PY
cloud_manifests pre | grep -qx "$N1 n1" || fail "E: n1's step $N1 did not reach the cloud"
echo PASS
