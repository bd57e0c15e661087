# The failure policy under a real Slurm (tests/cluster/slurm.sh; issue 36), test_cluster_restart.sh's
# case with --launcher slurm inside `salloc -N3 --no-kill`: every process of host h2 but its sshd
# and slurmd dies at once — its ranks, their slurmstepd and Open MPI's daemon, as an OOM kill or a
# container restart would leave it — while the host stays reachable (srun -w h2 answers), and its
# disk comes back empty. The agent finds every host answering, so the failure is none it can
# explain: it restarts the
# job on the same hosts from the newest checkpoint every piece of which some tier holds. h2's disk
# is verified, not trusted: block 1, which only h2 held, comes from the cloud, the rest from the
# survivors' disks. Every logged loss equals the uninterrupted run's, every step is trained once.
# (Before, the run stopped with "communication error ... rerun the same command".) The launch is joined
# (--in-place, one mpirun a host): srun -w h2 does not exit when h2's slurmstepd is killed with its ranks,
# and h0's and h1's ranks, in jobs of their own, wait on h2's forever; the agent's probe of a quiet joined
# launch (agent_state.h ah_agent_probe_quiet, seconds in) finds every host answering and asks each for its
# job (launcher.h dead_jobs): h2's is gone, so the job failed (it hung until the test's timeout before). Needs root,
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
    --mpirun-args "$(echo $MPI_ARGS)" --cloud "s3://ckpt/r" --s3-endpoint "$EP" --in-place >"$WORK/r.log" 2>&1 &
agent=$!
agent_log=$WORK/r.log
h2_dies_and_restarts "$wd" "sshd|slurmd|unshare"
grep -q "every host of the plan answers, but the job's processes on h2 are gone" "$WORK/r.log" ||
    { cat "$WORK/r.log"; fail "h2's job's end not found at the step timeout"; }
grep -E "processes on h2 are gone|the job failed at step" "$WORK/r.log"
echo PASS
