# autohet run --in-place across three emulated hosts (tests/cluster/cluster.sh), a host that joins (issue 36;
# docs/elastic.md "The join in place, the agent's part"): the agent on the head node with --launcher ssh (then
# slurm inside `salloc -N3` when slurm-wlm and munge are here, not in the short subset, AH_CLUSTER_SHORT=1), h2
# down from the start (plan-0 on h0 and h1, one mpirun each) and back once 3 steps are in; --join-horizon-s
# makes the join rule re-plan onto it. Checked: the join is made in place (one launch, no re-plan, h2's
# mpirun started into the running job through the ssh launcher's join_hosts), h0's and h1's ranks are the
# processes started (their rank files on their hosts before the join against the "reconfigure" event's
# pids), every step 0..N-1 once, every loss within 1e-4 of the uninterrupted 3-host run's (other plans
# before and after the join), the preempt and recover events in place.
# Needs root, openssh-server and ompi-server (skipped, 77, without them).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v ompi-server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and ompi-server"; exit 77; }
STEPS=120 # the join (about 1-2 s after h2 is back) well before the end
CKPT_EVERY=100
hosts_cluster
cluster_reference "$WORK/ref"
cluster_up 3 || fail "cannot make the test cluster"
cluster_mpi_args

# join_case NAME LAUNCHER [ALLOC...]: the agent with --in-place on the head (inside the allocation ALLOC makes, for
# slurm), h2 back once 3 steps are in; then the checks.
join_case() {
    local name=$1 launcher=$2 wd=$CL_DISK/work-$1 log=$WORK/$1.log h
    shift 2
    local flags=()
    [ "$launcher" = ssh ] && flags=(--rsh-agent "$CL_RSH")
    echo "0,remove,h2" >"$WORK/$name.csv"
    cluster_head "$@" env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run --model tiny-gpt2 \
        --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS \
        --ckpt-every $CKPT_EVERY --work-dir "$wd" --quiet --launcher "$launcher" "${flags[@]}" \
        --local-root "$CL_DISK/ck-$name" --mpirun-args "$(echo $MPI_ARGS)" --in-place --events "$WORK/$name.csv" \
        --grace-s 60 --join-horizon-s 1000000 >"$log" 2>&1 &
    local agent=$!
    wait_until 120 step_lines_at_least 3 "$wd/metrics.jsonl" || { cat "$log"; fail "$name: no 3 steps in 120 s"; }
    for h in h0 h1; do cluster_on $h "cat $wd/launch-0/rank-*.json; echo"; done >"$WORK/$name.ranks"
    echo "1,add,h2" >>"$WORK/$name.csv"
    wait $agent || { cat "$log"; fail "$name: autohet run --in-place"; }
    grep -q "in place: joined at step" "$log" || { cat "$log"; fail "$name: not joined in place"; }
    python3 - "$wd/metrics.jsonl" "$WORK/ref/metrics.jsonl" "$WORK/$name.ranks" "$STEPS" <<'PY' || { cat "$log"; fail "$name: joined in place"; }
import json, re, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ref = {x["step"]: x["loss"] for x in map(json.loads, open(sys.argv[2])) if "event" not in x}
steps = int(sys.argv[4])
before = {json.loads(m.group(0))["node"]: json.loads(m.group(0))["pid"]
          for m in re.finditer(r"\{[^{}]*\}", open(sys.argv[3]).read())}
assert sorted(before) == ["h0", "h1"], before
rc = [x for x in ev if x.get("event") == "reconfigure"]
assert len(rc) == 1 and rc[0]["ranks_from"] == 2 and rc[0]["ranks_to"] == 3 and rc[0]["join"] == 1, rc
assert set(before.values()) <= set(rc[0]["pids"]), (rc[0]["pids"], before)
assert not [x for x in ev if x.get("event") == "replan" and not x.get("in_place")], "relaunched"
ip = [x for x in ev if x.get("event") == "replan" and x.get("in_place")]  # the plan changed onto in place
assert len(ip) == 1 and ip[0]["devices"] == 3, ip
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
assert len(pre) == len(rec) == 1 and pre[0]["in_place"] and rec[0]["in_place"], (pre, rec)
assert pre[0]["joined"] == rec[0]["nodes"] == ["h2"] and rec[0]["step"] == rc[0]["step"], (pre, rec, rc)
lines = [x for x in ev if "event" not in x]
assert [x["step"] for x in lines] == list(range(steps)), [x["step"] for x in lines]
worst = max(abs(x["loss"] - ref[x["step"]]) / abs(ref[x["step"]]) for x in lines)
assert worst <= 1e-4, worst
assert ev[-1]["event"] == "done" and ev[-1]["ok"] and ev[-1]["history_ok"], ev[-1]
print(f"  joined in place at step {rc[0]['step']}: h2's job in, h0/h1 kept pids {sorted(before.values())}, "
      f"{steps} losses within {worst:.1e}; recovery {rec[0]['seconds']:.2f} s, phases {rec[0]['phases']}")
PY
}
join_case ssh ssh
if ! cluster_short && command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    . "$SRC/tests/cluster/slurm.sh"
    slurm_up || fail "cannot start Slurm on the test cluster"
    join_case slurm slurm salloc -N3 --ntasks-per-node=1
else
    echo "  slurm: not tried (the short subset, or no slurm-wlm or munge here)"
fi
echo "PASS"
