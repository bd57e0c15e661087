# A host that hangs without closing a connection, across three emulated hosts under autohet run
# --launcher ssh: h2's rank stops mid-step 6 (AH_TEST_HOOK, so the moment is the trainer's, not a
# sleep's), then every process of h2 is stopped (SIGSTOP: its ranks, its Open MPI daemon, its
# sshd): mpirun does not exit, no TCP connection is closed, the kernel still acknowledges. The agent's step timeout (--step-timeout 3: max(3 s, 10 x the plan's
# iteration or the longest gap between metrics lines)) fires; h2 does not answer (its sshd frozen:
# ssh's ConnectTimeout, 5 s in the cluster's configuration) and is dropped as lost (cause "host lost"); the job is stopped and the run
# re-plans on h0 + h1 and restores from the survivors' disks. Once the relaunch has trained a
# step, h2's processes continue (SIGCONT): h2 answers again, and with no `add` event the agent's
# probe at the next checkpoint finds it and plans it back in (a faster plan). Every logged loss
# equals the uninterrupted run's, no sample is lost or repeated. Needs root and openssh-server; skipped (77)
# without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
STEPS=60
CKPT_EVERY=4
small_cluster
sed -e 's/fast-0/h0/; s/slow-0/h1/; s/slow-1/h2/' "$CLUSTER" >"$WORK/c3.json"
CLUSTER=$WORK/c3.json
cluster_reference "$WORK/ref"

cluster_up 3 1000 || fail "cannot make the test cluster"
# the cluster's ssh without its keepalive (ServerAliveInterval 2 would end Open MPI's ssh to h2
# after 6 s: mpirun's exit, not the step timeout) and without a shared master connection (each
# probe a new connection: the frozen sshd never sends its banner, ConnectTimeout 5 s)
RSH=$CL_DIR/rsh-hang
printf '#!/bin/sh\nexec %s -o ServerAliveInterval=600 -o ControlMaster=no -o ControlPath=none "$@"\n' "$CL_RSH" >"$RSH"
chmod +x "$RSH"
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1
 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0 -x AH_TEST_HOOK"
WD=$CL_DISK/work
cluster_head env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" \
    AH_TEST_HOOK="phase=step,step=6,node=h2,file=$CL_DISK/hook" "$AUTOHET" run --model tiny-gpt2 \
    --cluster "$CLUSTER" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS \
    --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet --launcher ssh --rsh-agent "$RSH" \
    --local-root "$CL_DISK/ck" --mpirun-args "$(echo $MPI_ARGS)" --step-timeout 3 >"$WORK/hang.log" 2>&1 &
agent=$!
for _ in $(seq 1200); do
    [ -e "$CL_DIR/disks/h2/hook" ] && break
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
[ -e "$CL_DIR/disks/h2/hook" ] || { cat "$WORK/hang.log"; fail "h2 never reached the hook"; }
cluster_freeze_host h2 || fail "cannot stop h2's processes"
t_hang=$(date +%s.%N)
for _ in $(seq 1200); do
    [ "$(grep -c '"launch":1' "$WD/metrics.jsonl" 2>/dev/null)" -ge 1 ] && break
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
cluster_thaw_host h2 || fail "cannot continue h2's processes"
wait $agent || { cat "$WORK/hang.log"; fail "autohet run after h2 hung"; }
t_end=$(date +%s.%N)
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$WORK/hang.log"; fail "h2 hung: metrics"; }
echo "h2 hung: $out"
grep -Eq "host hung \(no metrics line for [0-9.]+ s, over the step timeout of [0-9.]+ s\): host h2" "$WORK/hang.log" ||
    { cat "$WORK/hang.log"; fail "h2's hang not reported"; }
grep "host hung\|answers again" "$WORK/hang.log"
h2_lost_and_recovered "$WD/metrics.jsonl" step=4 back=answers || { cat "$WORK/hang.log"; fail "the recovery after h2 hung"; }
echo "from h2's freeze to the run's end: $(echo "$t_end - $t_hang" | bc) s"
echo PASS
