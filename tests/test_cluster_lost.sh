# A host vanishing without notice, across three emulated hosts (tests/cluster/cluster.sh) under
# autohet run --launcher ssh: once step 6 is logged, every process of h2 is killed at once (its
# ranks, its Open MPI daemon, its sshd: the host stops answering and its disk with it), wherever
# the job is (a step, a checkpoint write or an upload). mpirun exits; the agent finds h2 no longer
# answers, drops it (cause "host lost"), re-plans on h0 + h1, relaunches and restores from the
# survivors' disks and, for what only h2 held, the cloud (moto on the head node). Every logged loss
# equals the uninterrupted run's, no sample is lost or repeated. Then h2 comes back as a new machine
# (an empty disk, a fresh sshd) with an `add` event: planned back in at the next checkpoint.
# Under AH_CLUSTER_SHORT=1 (CI's sanitizer stage) h2 does not come back (40 steps, one re-plan).
# Needs root, openssh-server and moto_server; skipped (77) without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v moto_server >/dev/null ||
    { echo "SKIP: needs root, openssh-server and moto_server"; exit 77; }
# 100 steps: h2's add needs steps left after the relaunch's first step and h2's revival (with 60,
# a fast relaunch had finished them once before the join could restart it)
STEPS=100
cluster_short && STEPS=40
small_cluster
sed -e 's/fast-0/h0/; s/slow-0/h1/; s/slow-1/h2/' "$CLUSTER" >"$WORK/c3.json"
CLUSTER=$WORK/c3.json
cluster_reference "$WORK/ref"

cluster_up 3 1000 || fail "cannot make the test cluster"
cloud_up
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1
 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x AWS_ACCESS_KEY_ID -x AWS_SECRET_ACCESS_KEY -x AWS_REGION"
WD=$CL_DISK/work
printf '0,add,h2\n' >"$WORK/events.csv"
t_start=$(date +%s.%N)
# the agent itself (no MPI in it) with leak checks under ASan; its ranks without (Open MPI's own)
cluster_head env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run --model tiny-gpt2 \
    --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet --launcher ssh \
    --rsh-agent "$CL_RSH" --local-root "$CL_DISK/ck" --mpirun-args "$(echo $MPI_ARGS)" --cloud s3://ckpt/run \
    --s3-endpoint "$EP" --events "$WORK/events.csv" >"$WORK/lost.log" 2>&1 &
agent=$!
for _ in $(seq 1200); do
    grep -q '"step":6,' "$WD/metrics.jsonl" 2>/dev/null && break
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
cluster_kill_host h2
t_kill=$(echo "$(date +%s.%N) - $t_start" | bc)
# h2 back once the relaunch on h0 + h1 has trained a step
back=
if ! cluster_short; then
    for _ in $(seq 1200); do
        [ "$(grep -c '"launch":1' "$WD/metrics.jsonl" 2>/dev/null)" -ge 1 ] && break
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    cluster_revive_host h2 || fail "cannot bring h2 back"
    printf '1,add,h2\n' >>"$WORK/events.csv"
    back=1
fi
wait $agent || { cat "$WORK/lost.log"; fail "autohet run after h2 vanished"; }
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$WORK/lost.log"; fail "h2 lost: metrics"; }
echo "h2 lost without notice: $out"
grep -q "host lost without notice: host h2" "$WORK/lost.log" || { cat "$WORK/lost.log"; fail "h2's loss not reported"; }
h2_lost_and_recovered "$WD/metrics.jsonl" t_lost="$t_kill" ${back:+back=add} ||
    { cat "$WORK/lost.log"; fail "the recovery after h2 vanished"; }
echo PASS
