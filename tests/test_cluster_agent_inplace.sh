# autohet run --in-place across three emulated hosts (tests/cluster/cluster.sh; issue 36 "Survivors keep
# their processes"; docs/elastic.md "In-place reconfiguration at a notice"): the agent on the head node,
# one mpirun a host started through the launcher (ssh; then slurm inside `salloc -N3` when slurm-wlm and
# munge are here, not in the short subset, AH_CLUSTER_SHORT=1), h2 preempted by the events file once 3
# steps are in. Checked: the change is made in place (one launch, no re-plan), h0's and h1's ranks are
# the processes started (their rank files on their hosts before the notice against the "reconfigure"
# event's pids), every step 0..N-1 once, the losses before the change bit-identical to the uninterrupted
# run's (the same plan, the ring all-reduce the launchers ask for) and within 1e-4 after it (another
# plan), the recover event in place, h2's disk dropped on h2.
# Needs root, openssh-server and ompi-server (skipped, 77, without them).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v ompi-server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and ompi-server"; exit 77; }
STEPS=120  # the change (about 1 s after the notice, more under Slurm) well before the end: 40 ended first at low load
CKPT_EVERY=100
hosts_cluster
cluster_reference "$WORK/ref"
cluster_up 3 || fail "cannot make the test cluster"
# the ssh case with the cloud tier when moto is here: the agent's credentials reach each host's own mpirun
# (`-x VAR` in --mpirun-args; before session 21's fix: "AWS_ACCESS_KEY_ID ... must be set" on the ranks)
cloud=()
if command -v moto_server >/dev/null; then
    cloud_up
    cloud=(--cloud s3://ckpt/ssh --s3-endpoint "$EP")
fi
cluster_mpi_args AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION

# inplace NAME LAUNCHER [ALLOC...]: the agent with --in-place on the head (inside the allocation ALLOC
# makes, for slurm), h2 preempted once 3 steps are in; then the checks.
inplace() {
    local name=$1 launcher=$2 wd=$CL_DISK/work-$1 log=$WORK/$1.log i n h
    shift 2
    local flags=()
    [ "$launcher" = ssh ] && flags=(--rsh-agent "$CL_RSH" "${cloud[@]}")
    echo "0,add,h0" >"$WORK/$name.csv"
    cluster_head "$@" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run --model tiny-gpt2 \
        --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS \
        --ckpt-every $CKPT_EVERY --work-dir "$wd" --quiet --launcher "$launcher" \
        "${flags[@]}" \
        --local-root "$CL_DISK/ck-$name" --mpirun-args "$(echo $MPI_ARGS)" --in-place --events "$WORK/$name.csv" \
        --grace-s 60 >"$log" 2>&1 &
    local agent=$!
    for i in $(seq 1200); do
        n=$(grep -cs '"step"' "$wd/metrics.jsonl")
        [ "${n:-0}" -ge 3 ] && break
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    for h in h0 h1 h2; do cluster_on $h "cat $wd/launch-0/rank-*.json; echo"; done >"$WORK/$name.ranks"
    echo "1,remove,h2" >>"$WORK/$name.csv"
    wait $agent || { cat "$log"; fail "$name: autohet run --in-place"; }
    grep -q "in place: changed at step" "$log" || { cat "$log"; fail "$name: not changed in place"; }
    cluster_on h2 test -e "$CL_DISK/ck-$name/h2" && fail "$name: h2's disk kept"
    python3 - "$wd/metrics.jsonl" "$WORK/ref/metrics.jsonl" "$WORK/$name.ranks" "$STEPS" <<'PY' || { cat "$log"; fail "$name: in place"; }
import json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ref = {x["step"]: x["loss"] for x in map(json.loads, open(sys.argv[2])) if "event" not in x}
steps = int(sys.argv[4])
before = {}
for m in re.finditer(r"\{[^{}]*\}", open(sys.argv[3]).read()):
    r = json.loads(m.group(0))
    before[r["node"]] = r["pid"]
assert sorted(before) == ["h0", "h1", "h2"], before
rc = [x for x in ev if x.get("event") == "reconfigure"]
assert len(rc) == 1 and rc[0]["ranks_from"] == 3 and rc[0]["ranks_to"] == 2, rc
assert sorted(rc[0]["pids"]) == sorted([before["h0"], before["h1"]]), (rc[0]["pids"], before)
assert not [x for x in ev if x.get("event") == "replan" and not x.get("in_place")], "relaunched"
ip = [x for x in ev if x.get("event") == "replan" and x.get("in_place")]  # the plan changed onto in place
assert len(ip) == 1 and ip[0]["devices"] == 2, ip
rec = [x for x in ev if x.get("event") == "recover"]
assert len(rec) == 1 and rec[0]["in_place"] and rec[0]["nodes"] == ["h2"], rec
s = rc[0]["step"]
lines = [x for x in ev if "event" not in x]
assert [x["step"] for x in lines] == list(range(steps)), [x["step"] for x in lines]
worst = 0.0
for x in lines:
    if x["step"] < s:
        assert x["loss"] == ref[x["step"]], f"step {x['step']}: {x['loss']!r} vs {ref[x['step']]!r}"
    else:
        worst = max(worst, abs(x["loss"] - ref[x["step"]]) / abs(ref[x["step"]]))
assert worst <= 1e-4, worst
assert ev[-1]["event"] == "done" and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
print(f"  in place at step {s}: h2's job left, h0/h1 kept pids {rc[0]['pids']}, {s} losses bit-identical, "
      f"{steps - s} within {worst:.1e}; recovery {rec[0]['seconds']:.2f} s, phases {rec[0]['phases']}")
PY
}
inplace ssh ssh
if ! cluster_short && command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    . "$SRC/tests/cluster/slurm.sh"
    slurm_up || fail "cannot start Slurm on the test cluster"
    inplace slurm slurm salloc -N3 --ntasks-per-node=1
else
    echo "  slurm: not tried (the short subset, or no slurm-wlm or munge here)"
fi
echo "PASS"
