# The in-place join over three emulated hosts (tests/cluster/cluster.sh; launcher.h join_hosts,
# src/elastic/launch_ssh_joined.c; runtime/reconfig.h "join"), driven without the agent by
# tests/test_launch_ssh.c's driver on the head node: dp2 on h0, h1 (one mpirun a host, joined through one
# ompi-server on the head) trains 8 steps; the driver starts h2's mpirun into the running job (join_hosts,
# AH_DRIVE_JOIN) and puts the run's reconfigure.json: at step 3 one job joins and the three go on under
# dp3 (h0, h1, h2). Checked: the job ends 0; the metrics hold steps 0..7 once each, every loss bit-identical
# to one mpirun of dp2 (steps 0..2) and dp3 resumed from that run's step-3 checkpoint (3..7); the reconfigure
# event's pids are h0's and h1's processes as started, then h2's. h2's disk holds nothing of step 3: its
# rank gets it from h0's and h1's ranks over MPI (session 23: the reconfigure event's "state" "moved", bytes
# sent; the recover event's every tier 0 bytes; before, read from the peer tier as a relaunch would). The
# same under Slurm when slurm-wlm and munge are here. Needs root, openssh-server and ompi-server (77 without).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v ompi-server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and ompi-server"; exit 77; }
STEPS=8
python3 "$SRC/tests/dp_plans.py" "$PLANS/train-dp4.json" "$WORK" dp2=n0,n1:4,4 dp3=n0,n1,n2:3,3,2
sed -i 's/"n\([0-3]\)"/"h\1"/g' "$WORK/dp2.json" "$WORK/dp3.json"
RING="--mca coll_libnbc_iallreduce_algorithm 1" # the all-reduce the ssh launcher asks for: the same sums
ref() { # PLAN OUT ROOT [flags]: one mpirun of PLAN here, 8 steps, metrics in $WORK/OUT.jsonl
    local plan=$1 out=$2 root=$3
    shift 3
    timeout 180 $MPIRUN $RING -np "$(plan_ranks "$WORK/$plan.json")" "$AUTOHET" train --plan "$WORK/$plan.json" \
        --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$WORK/$out.jsonl" --local-root "$root" "$@" \
        >"$WORK/$out.out" 2>&1 || { cat "$WORK/$out.out" >&2; fail "reference $out"; }
}
ref dp2 ref2 "$WORK/r2" --ckpt-every 3 --keep 10
rm -rf "$WORK"/r2/*/step-0000000[68]
ref dp3 ref3 "$WORK/r2" --resume

cluster_up 3 || fail "cannot make the test cluster"
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
printf '{"step": 3, "leave": [], "join": 1, "plan": "%s"}\n' "$WORK/dp3.json" >"$WORK/req.json"
# joined NAME RSH [ALLOC...]: the driver on the head with the launcher RSH names, then the checks.
joined() {
    local name=$1 rsh=$2 run=$CL_DISK/work/$1
    shift 2
    cluster_head env AH_BUILD_DIR="$BUILD" AH_DRIVE_JOIN="h2:$WORK/dp3.json" timeout 500 "$@" "$BUILD/test_launch_ssh" \
        joined "$rsh" "$CL_DISK/ck-$name" "$MPI_ARGS" "$WORK/dp2.json" "$run" "$WORK/req.json" - "$WORK/$name.jsonl" \
        bash -c 'echo $$ >pid-${AH_WORLD_JOIN##*join:}; exec "$0" "$@"' "$AUTOHET" train --plan "$WORK/dp2.json" \
        --data "$WORK/text.bin" --steps $STEPS --quiet --metrics "$run/metrics.jsonl" --run-dir "$run" \
        --local-root "$CL_DISK/ck-$name" ${JOIN_FLAGS:-} >"$WORK/$name.out" 2>&1
    local rc=$?
    grep "^drive:" "$WORK/$name.out"
    [ $rc = 0 ] || { cat "$WORK/$name.out" >&2; fail "$name: the joined launch (driver exit $rc)"; }
    for h in 0 1; do cluster_on h$h cat "$run/pid-$h:2" >"$WORK/$name.pid$h" || fail "$name: h$h: no pid file"; done
    cluster_on h2 cat "$run/pid-2:3" >"$WORK/$name.pid2" || fail "$name: h2: no pid file"
    python3 - "$WORK" "$name" <<'PY' || fail "$name: the join in place over the hosts"
import json, sys
w, name = sys.argv[1], sys.argv[2]
lines = [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
rc = [o for o in lines if o.get("event") == "reconfigure"]
assert len(rc) == 1, rc
rc = rc[0]
pid = {h: int(open(f"{w}/{name}.pid{h}").read()) for h in (0, 1, 2)}
assert rc["step"] == 3 and rc["ranks_from"] == 2 and rc["ranks_to"] == 3 and rc["join"] == 1, rc
assert rc["pids"] == [pid[0], pid[1], pid[2]], f"not the processes started: {rc['pids']} vs {pid}"
steps = [o for o in lines if "event" not in o]
assert [o["step"] for o in steps] == list(range(8)), [o["step"] for o in steps]
ref = {o["step"]: o["loss"] for f in ("ref2", "ref3") for o in map(json.loads, open(f"{w}/{f}.jsonl"))
       if "event" not in o and (f == "ref2") == (o["step"] < 3)}
for o in steps:
    assert o["loss"] == ref[o["step"]], f"step {o['step']}: {o['loss']!r} vs {ref[o['step']]!r}"
rec = [o for o in lines if o.get("event") == "recover"]
assert rec and rec[-1]["step"] == 3 and rec[-1].get("moved") and not any(rec[-1]["bytes"].values()), rec
assert rc["state"] == "moved" and rc["moved_bytes"] > 0, rc  # h2's pieces sent by h0's and h1's ranks
print(f"  {name}: h2 joined at step 3; h0, h1 kept pids {rc['pids'][:2]}; 8 losses bit-identical (3 of dp2, 5 of "
      f"dp3 resumed); phases {rc['seconds']}; state moved, {rc['moved_bytes']} bytes sent to h2")
PY
}
joined ssh "$CL_RSH"
if command -v slurmctld >/dev/null && command -v munged >/dev/null; then
    . "$SRC/tests/cluster/slurm.sh"
    slurm_up || fail "cannot start Slurm on the test cluster"
    joined slurm slurm salloc -N3 --ntasks-per-node=1
else
    echo "  slurm: not tried (no slurm-wlm or munge here)"
fi
echo "PASS"
