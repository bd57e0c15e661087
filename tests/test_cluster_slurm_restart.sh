# The failure policy under a real Slurm (tests/cluster/slurm.sh; issue 36), test_cluster_restart.sh's
# case with --launcher slurm inside `salloc -N3 --no-kill`: every process of host h2 but its sshd
# and slurmd dies at once — its ranks, their slurmstepd and Open MPI's daemon, as an OOM kill or a
# container restart would leave it — while the host stays reachable (srun -w h2 answers), and its
# disk comes back empty. The agent finds every host answering, so the failure is none it can
# explain: it restarts the
# job on the same hosts from the newest checkpoint every piece of which some tier holds. h2's disk
# is verified, not trusted: block 1, which only h2 held, comes from the cloud, the rest from the
# survivors' disks. Every logged loss equals the uninterrupted run's, every step is trained once.
# (Before, the run stopped with "communication error ... rerun the same command".) Needs root,
# openssh-server, slurm-wlm, munge and moto_server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
. "$SRC/tests/cluster/slurm.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v slurmctld >/dev/null && command -v munged >/dev/null &&
    command -v moto_server >/dev/null ||
    { echo "SKIP: needs root, openssh-server, slurm-wlm, munge and moto_server"; exit 77; }
STEPS=80
CKPT_EVERY=4
h2_alone_cluster
cluster_reference "$WORK/ref"
cluster_up 3 1000 || fail "cannot make the test cluster"
CL_SLURM_MSG_TIMEOUT=3 CL_SLURMD_TIMEOUT=120 slurm_up || fail "cannot start Slurm on the test cluster"
cloud_up
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1
 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x AWS_ACCESS_KEY_ID
 -x AWS_SECRET_ACCESS_KEY -x AWS_REGION"

wd=$CL_DISK/work-r
cluster_head salloc -N3 --ntasks-per-node=2 --no-kill env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" \
    "$AUTOHET" run --model tiny-gpt2 --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ \
    --steps $STEPS --ckpt-every $CKPT_EVERY --work-dir "$wd" --quiet --launcher slurm --local-root "$CL_DISK/ck-r" \
    --mpirun-args "$(echo $MPI_ARGS)" --cloud "s3://ckpt/r" --s3-endpoint "$EP" >"$WORK/r.log" 2>&1 &
agent=$!
agent_log=$WORK/r.log
# h2's disk is the only one with block 1: its step 4 must be in the cloud before the disk goes
wait_for "h2's step 4 in the cloud" cloud_has r 4 manifest-h2.json
steps_at_least() {
    local n
    n=$(grep -c '"step"' "$wd/metrics.jsonl" 2>/dev/null)
    [ "${n:-0}" -ge "$1" ]
}
wait_for "step 6 in the metrics" steps_at_least 7
# every process of h2 but its sshd and slurmd, at once; then its disk empty, as a host that came
# straight back
pids=$(for p in $(cl_pids_in h2); do
    case "$(cat /proc/$p/comm 2>/dev/null)" in sshd | slurmd | unshare) ;; *) echo "$p" ;; esac
done)
[ -n "$pids" ] || fail "no process of h2 to kill"
kill -KILL $pids 2>/dev/null
rm -rf "${CL_DIR:?}/disks/h2/"*
wait $agent || { cat "$WORK/r.log"; fail "autohet run after h2's processes died"; }
out=$(check_metrics "$wd" "$WORK/ref") || { cat "$WORK/r.log"; fail "metrics: $out"; }
echo "h2's processes killed, its disk wiped: $out"
grep -q "the job failed at step [0-9]*: .*; restart 1 (--max-restarts 3" "$WORK/r.log" ||
    { cat "$WORK/r.log"; fail "the restart is not said"; }
grep -q "host lost" "$WORK/r.log" && { cat "$WORK/r.log"; fail "h2 answered, yet it was counted lost"; }
python3 - "$wd/metrics.jsonl" <<'PY' || { cat "$WORK/r.log"; fail "the recovery"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
pre = [x for x in ev if x.get("event") == "preempt"]
rec = [x for x in ev if x.get("event") == "recover"]
rs = [x for x in ev if x.get("event") == "restart"]
assert len(rs) == 1 and len(pre) == 1 and pre[0]["cause"] == "job failed" and pre[0]["nodes"] == [], (rs, pre)
assert len(rec) == 1 and rec[0]["cause"] == "job failed", rec
b = rec[0]["bytes"]
# block 1 lived on h2 alone and h2's disk is empty: the cloud serves it; the survivors' disks the rest
assert b["cloud"] > 0 and b["local"] > 0, b
print(f"restart at step {rs[0]['step']} ({rs[0]['cause'][:60]}); resumed at step {rec[0]['step']}: "
      f"local {b['local']} B, peer {b['peer']} B, cloud {b['cloud']} B")
PY
echo PASS
