# Hosts lost without notice under a real Slurm cluster (tests/cluster/slurm.sh: slurmctld on the
# head node, one slurmd per emulated host), autohet run --launcher slurm inside
# `salloc -N3 --no-kill`, the cases test_cluster_hook, test_cluster_lost and test_cluster_hang
# run with ssh. h2 stops where the trainer names (AH_TEST_HOOK), then:
#   (b) mid-step (h2's rank has run step 6's forward and backward, not its gradient sync): every
#       process of h2 killed at once, its slurmd included (srun -w h2 then fails: Communication
#       connection failure; the launch is joined, one mpirun a host, and srun -w h2 there does not end
#       with h2: the agent's probe of the quiet job finds h2 not answering, seconds in); once the agent has dropped it, h2 comes back as a new machine (an
#       empty disk, a fresh sshd and slurmd; back before Slurm declares it DOWN, so still in the
#       allocation) with an `add` event (or the agent's probe finds it first: it did not answer),
#       and is planned back in at a checkpoint of the relaunch on h0 + h1;
#   (h) a hang: every process of h2 stopped (SIGSTOP, slurmd included: srun -w h2 gets no answer);
#       the agent's step timeout (--step-timeout 3) catches it, h2 is dropped as lost (--no-in-place: the
#       step timeout's case; a joined launch, the default, probes a quiet spell sooner and finds h2 not
#       answering as in (b): agent_state.h ah_agent_probe_quiet); then h2
#       continues (SIGCONT), answers srun again and is planned back in at a checkpoint of the
#       relaunch on h0 + h1, with no event;
#   (c) mid-checkpoint (h2's shard files of step 8 written, its manifest not committed): h2 killed
#       for good.
# The devices hold 3 MiB each, so the plan is one pipeline h1 > h2 > h0 and block 1 is on h2's
# disk alone (h2_alone_cluster); the test waits for h2's upload of step 4 to be listed in the
# cloud (moto on the head node) before h2 goes. In each case every logged loss equals the
# uninterrupted run's, no sample is lost or repeated, the recovery resumes from step 4 with bytes
# from the survivors' disks (own or a peer's) and, for block 1, from the cloud.
# Slurm here: MessageTimeout 3 s (srun's wait on a host that does not answer: about 4 s for a
# killed host, 13 s for a frozen one), SlurmdTimeout 120 s (a host that does not answer for
# longer is DOWN and leaves the allocation for good; every case here is back or over before).
# (b) and (h) train 100 steps, a checkpoint every 4: a join needs steps left after the agent's
# reaction (its reads and notices go through srun, a second or two behind the job). (c) trains 24
# (its own reference): nothing comes back to be waited for (the agent asks the dead h2 again at the
# relaunch's first checkpoint, about 4 s, then no sooner than 10 s later: agent_logic.h's backoff).
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage): case (c) only.
# Needs root, openssh-server, slurm-wlm, munge and moto_server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
. "$SRC/tests/cluster/slurm.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v slurmctld >/dev/null && command -v munged >/dev/null &&
    command -v moto_server >/dev/null ||
    { echo "SKIP: needs root, openssh-server, slurm-wlm, munge and moto_server"; exit 77; }
CKPT_EVERY=4
h2_alone_cluster
STEPS=24
cluster_reference "$WORK/ref-c" # (c)'s
STEPS=100
cluster_short || cluster_reference "$WORK/ref" # (b)'s and (h)'s
t0=$(date +%s)
cluster_up 3 1000 || fail "cannot make the test cluster"
CL_SLURM_MSG_TIMEOUT=3 CL_SLURMD_TIMEOUT=120 slurm_up || fail "cannot start Slurm on the test cluster"
cloud_up
echo "[$(($(date +%s) - t0)) s] cluster, Slurm and the cloud up"
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1
 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x AWS_ACCESS_KEY_ID
 -x AWS_SECRET_ACCESS_KEY -x AWS_REGION -x AH_TEST_HOOK"

# slurm_agent CASE PHASE STEP [autohet run flags]: the agent inside a new allocation of h0..h2 in
# the background ($agent; log $WORK/CASE.log, work dir $WD), h2's rank stopping at PHASE of STEP;
# then waits for the hook's marker on h2's disk and for h2's step 4 in the cloud.
slurm_agent() {
    case=$1
    local phase=$2 step=$3 marker=$CL_DIR/disks/h2/hook-$1
    shift 3
    WD=$CL_DISK/work-$case # on the head: this machine's directory
    agent_log=$WORK/$case.log
    printf '0,add,h2\n' >"$WORK/$case.csv"
    cluster_head salloc -N3 --ntasks-per-node=2 --no-kill env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" \
        AH_TEST_HOOK="phase=$phase,step=$step,node=h2,file=$CL_DISK/hook-$case" "$AUTOHET" run --model tiny-gpt2 \
        --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS \
        --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet --launcher slurm --local-root "$CL_DISK/ck-$case" \
        --mpirun-args "$(echo $MPI_ARGS)" --cloud "s3://ckpt/$case" --s3-endpoint "$EP" --events "$WORK/$case.csv" \
        "$@" >"$agent_log" 2>&1 &
    agent=$!
    t_agent=$(date +%s.%N)
    wait_for "hook marker on h2" test -e "$marker"
    read -r m_phase m_step m_node _ <"$marker"
    [ "$m_phase $m_step $m_node" = "$phase $step h2" ] || fail "$case: the marker says '$m_phase $m_step $m_node'"
    # h2's disk is the only one with block 1: its step 4 must be in the cloud before h2 goes
    wait_for "h2's step 4 in the cloud" cloud_has "$case" 4 manifest-h2.json
}

# the agent's allocation (one at a time here)
job_id() { cluster_head squeue -h -o %i | head -1; }

# finish WHAT CHECKS...: the agent's end, its metrics against the uninterrupted run's (REF), h2's loss
# reported (WHAT: a grep -E pattern of the agent's log), and h2_lost_and_recovered with CHECKS
# (t_lost is counted from salloc's start: the agent's own clock starts a little later).
finish() {
    local what=$1
    shift
    wait $agent || { cat "$agent_log"; fail "$case: autohet run --launcher slurm after h2 was lost"; }
    out=$(check_metrics "$WD" "$REF") || { cat "$agent_log"; fail "$case: metrics"; }
    echo "$case: $out"
    grep -Eq "$what" "$agent_log" || { cat "$agent_log"; fail "$case: h2's loss not reported ($what)"; }
    h2_lost_and_recovered "$WD/metrics.jsonl" "$@" | sed "s/^/$case: /"
    [ "${PIPESTATUS[0]}" = 0 ] || { cat "$agent_log"; fail "$case: the recovery after h2 was lost"; }
    echo "[$(($(date +%s) - t0)) s] $case done"
}

# (c) mid-checkpoint, h2 gone for good: the last case (a host Slurm never heard from again stays
# COMPLETING after the allocation ends, until SlurmdTimeout)
lost_mid_checkpoint() {
    STEPS=24 REF=$WORK/ref-c
    slurm_agent c ckpt-write 8
    cluster_kill_host h2
    t_lost=$(echo "$(date +%s.%N) - $t_agent" | bc)
    finish "host lost without notice: host h2" step=4 cloud=yes t_lost="$t_lost"
}

if cluster_short; then
    lost_mid_checkpoint
    echo "PASS ($(($(date +%s) - t0)) s on the cluster)"
    exit 0
fi

# (b) mid-step, back as a new machine with an add event
REF=$WORK/ref
slurm_agent b step 6
cluster_kill_host h2
t_lost=$(echo "$(date +%s.%N) - $t_agent" | bc)
# h2 back while the agent re-plans: in time for the relaunch's first checkpoint
wait_for "h2 lost" grep -q "host lost without notice: host h2" "$agent_log"
cluster_revive_host h2 && slurm_revive_host h2 "$(job_id)" || fail "b: cannot bring h2 back"
printf '1,add,h2\n' >>"$WORK/$case.csv"
finish "host lost without notice: host h2" step=4 cloud=yes back=add t_lost="$t_lost"

# (h) a hang, then h2 answers again
slurm_agent h step 6 --step-timeout 3 --no-in-place
cluster_freeze_host h2 || fail "h: cannot stop h2's processes"
t_lost=$(echo "$(date +%s.%N) - $t_agent" | bc)
# h2 continues once the agent has dropped it (a frozen host's srun -w h2 waits 13 s at each
# checkpoint's probe): it answers at the relaunch's first checkpoint
wait_for "h2's hang" grep -q "host hung" "$agent_log"
cluster_thaw_host h2 || fail "h: cannot continue h2's processes"
finish "host hung \(no metrics line for [0-9.]+ s, over the step timeout of [0-9.]+ s\): host h2" step=4 cloud=yes \
    back=answers t_lost="$t_lost"
grep "host hung\|answers again" "$agent_log"

lost_mid_checkpoint
echo "PASS ($(($(date +%s) - t0)) s on the cluster)"
