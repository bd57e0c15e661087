# The ssh launcher's joined launch over three emulated hosts (tests/cluster/cluster.sh; launcher.h
# job->joined, src/elastic/launch_ssh_joined.c; issue 36 "Survivors keep their processes"), driven
# without the agent by tests/test_launch_ssh.c's driver on the head node: one mpirun a host, started on
# that host through the remote command, joined through one ompi-server on the head (comm/join.c: the
# port found and the turns taken through it, each host's run directory on its own disk). dp3 on h0, h1,
# h2 trains 8 steps; the run's reconfigure.json (put on every host by the launcher) says that at step 3
# h0's job (job 0: rank 0, the metrics' writer, the port's holder) leaves and h2, h1 go on under dp2
# with "ranks" [-1, 1, 0] (h2's rank is the new rank 0). Checked: h0's mpirun exits 0 by itself and
# leave_hosts counts it; the job then ends 0; the metrics, read from h0's disk and then from h2's (the
# new rank 0's), hold steps 0..7 once each with every loss bit-identical to one mpirun of dp3 (steps
# 0..2) and to dp2 resumed from that step-3 checkpoint (3..7); the reconfigure event's pids are the
# processes each host's job started (h2's, then h1's). The same under Slurm (tests/cluster/slurm.sh; the
# slurm launcher inside `salloc -N3`: each host's mpirun a step started by srun --overlap -w HOST, on
# its host alone although the step's environment names the allocation) when slurm-wlm and munge are here.
# Needs root, openssh-server and ompi-server (skipped, 77, without them).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v ompi-server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and ompi-server"; exit 77; }
STEPS=8
python3 "$SRC/tests/dp_plans.py" "$PLANS/train-dp4.json" "$WORK" dp3=n0,n1,n2:3,3,2 dp2=n2,n1:4,4
sed -i 's/"n\([0-3]\)"/"h\1"/g' "$WORK/dp3.json" "$WORK/dp2.json"
RING="--mca coll_libnbc_iallreduce_algorithm 1" # the all-reduce the ssh launcher asks for: the same sums
ref() { # PLAN OUT ROOT [flags]: one mpirun of PLAN here, 8 steps, metrics in $WORK/OUT.jsonl
    local plan=$1 out=$2 root=$3
    shift 3
    timeout 180 $MPIRUN $RING -np "$(plan_ranks "$WORK/$plan.json")" "$AUTOHET" train --plan "$WORK/$plan.json" \
        --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$WORK/$out.jsonl" --local-root "$root" "$@" \
        >"$WORK/$out.out" 2>&1 || { cat "$WORK/$out.out" >&2; fail "reference $out"; }
}
ref dp3 ref3 "$WORK/r3" --ckpt-every 3 --keep 10
rm -rf "$WORK"/r3/*/step-0000000[68]
ref dp2 ref2 "$WORK/r3" --resume

cluster_up 3 || fail "cannot make the test cluster"
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
printf '{"step": 3, "leave": [0], "plan": "%s", "ranks": [-1, 1, 0]}\n' "$WORK/dp2.json" >"$WORK/req.json"
# inplace NAME RSH [ALLOC...]: the driver on the head with the launcher RSH names (a remote command, or
# "slurm" inside the allocation ALLOC makes), each host's run directory and disk NAME's, then the checks.
inplace() {
    local name=$1 rsh=$2 run=$CL_DISK/work/$1 # on the head: this machine's directory; on each host: its own disk
    shift 2
    cluster_head env AH_BUILD_DIR="$BUILD" timeout 500 "$@" "$BUILD/test_launch_ssh" joined "$rsh" "$CL_DISK/ck-$name" \
        "$MPI_ARGS" "$WORK/dp3.json" "$run" "$WORK/req.json" h0 "$WORK/$name.jsonl" \
        bash -c 'echo $$ >pid-${AH_WORLD_JOIN##*join:}; exec "$0" "$@"' "$AUTOHET" train --plan "$WORK/dp3.json" \
        --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$run/metrics.jsonl" --run-dir "$run" \
        --local-root "$CL_DISK/ck-$name" >"$WORK/$name.out" 2>&1
    local rc=$?
    grep "^drive:" "$WORK/$name.out"
    [ $rc = 0 ] || { cat "$WORK/$name.out" >&2; fail "$name: the joined launch (driver exit $rc)"; }
    for h in 1 2; do cluster_on h$h cat "$run/pid-$h:3" >"$WORK/$name.pid$h" || fail "$name: h$h: no pid file"; done
    python3 - "$WORK" "$name" <<'PY' || fail "$name: in place over the hosts"
import json, sys
w, name = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
rc = [o for o in lines if o.get("event") == "reconfigure"]
assert len(rc) == 1, rc
rc = rc[0]
pid = {h: int(open(f"{w}/{name}.pid{h}").read()) for h in (1, 2)}
assert rc["step"] == 3 and rc["ranks_from"] == 3 and rc["ranks_to"] == 2, rc
assert rc["pids"] == [pid[2], pid[1]], f"not the processes started: {rc['pids']} vs h2 {pid[2]}, h1 {pid[1]}"
steps = [o for o in lines if "event" not in o]
assert [o["step"] for o in steps] == list(range(8)), [o["step"] for o in steps]
ref = {o["step"]: o["loss"] for f in ("ref3", "ref2") for o in map(json.loads, open(f"{w}/{f}.jsonl"))
       if "event" not in o and (f == "ref3") == (o["step"] < 3)}
for o in steps:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
print(f"  {name}: h0 left at step 3; h2, h1 kept pids {rc['pids']}; 8 losses bit-identical (3 of dp3, 5 of dp2 "
      f"resumed); phases {rc['seconds']}")
PY
}
inplace ssh "$CL_RSH"
if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    . "$SRC/tests/cluster/slurm.sh"
    slurm_up || fail "cannot start Slurm on the test cluster"
    inplace slurm slurm salloc -N3 --ntasks-per-node=1
else
    echo "  slurm: not tried (no slurm-wlm or munge here)"
fi
echo "PASS"
