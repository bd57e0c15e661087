# A host that hangs without closing a connection, across three emulated hosts under autohet run
# --launcher ssh: h2's rank stops mid-step 6 (AH_TEST_HOOK, so the moment is the trainer's, not a
# sleep's), then every process of h2 is stopped (SIGSTOP: its ranks, its Open MPI daemon, its
# sshd): mpirun does not exit, no TCP connection is closed, the kernel still acknowledges. The agent's step timeout (--step-timeout 3: max(3 s, 10 x the plan's
# iteration or the longest gap between metrics lines)) fires; h2 does not answer (its sshd frozen:
# ssh's ConnectTimeout, 5 s in the cluster's configuration) and is dropped as lost (cause "host lost"); the job is stopped and the run
# re-plans on h0 + h1 and restores from the survivors' disks. Once the relaunch has trained a
# step, h2's processes continue (SIGCONT): h2 answers again, and with no `add` event the agent's
# probe at the next checkpoint finds it and plans it back in (a faster plan). Every logged loss
# equals the uninterrupted run's, no sample is lost or repeated. First with --no-in-place: the step
# timeout's case; then with in place the default (a joined launch, one mpirun a host): its quiet spell is
# probed sooner, which finds h2 not answering and says it lost without notice (agent_state.h
# ah_agent_probe_quiet), the same recovery (h2 frozen to the end; not under AH_CLUSTER_SHORT). Needs root and openssh-server; skipped (77)
# without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
STEPS=60
CKPT_EVERY=4
hosts_cluster
# the reference at the cluster's own pace: the slowdown below changes no loss and no plan (the planner does
# not read it; check_metrics below must find the first launch on the reference's plan, exact > 0)
cluster_reference "$WORK/ref"
# steps of ~0.1 s (the emulation's slowdown; the losses do not change): the relaunch's 56 steps
# must outlast h2's thaw and the agent's probe that finds it (~2.5 s), or the run ends before the
# join (at ~0.02 s a step it did, now and then)
python3 - "$CLUSTER" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for t in d["gpu_types"].values():
    t["emulate"]["slowdown"] *= 5
json.dump(d, open(sys.argv[1], "w"))
PY

cluster_up 3 1000 || fail "cannot make the test cluster"
# the cluster's ssh without its keepalive (ServerAliveInterval 2 would end Open MPI's ssh to h2
# after 6 s: mpirun's exit, not the step timeout) and without a shared master connection (each
# probe a new connection: the frozen sshd never sends its banner, ConnectTimeout 5 s)
RSH=$CL_DIR/rsh-hang
printf '#!/bin/sh\nexec %s -o ServerAliveInterval=600 -o ControlMaster=no -o ControlPath=none "$@"\n' "$CL_RSH" >"$RSH"
chmod +x "$RSH"
cluster_mpi_args AH_TEST_HOOK
# hang_case NAME BACK ARGS...: the agent (work dir $WD, log $agent_log) trains with ARGS; h2's rank held at
# the hook mid-step 6, then every process of h2 frozen until the relaunch's first line (BACK "answers"),
# or to the run's end (BACK ""), then thawed; the run finishes with the uninterrupted run's losses, h2 lost
# (the step before the hook's checkpoint, step 4, restored) and with BACK taken back once it answers.
hang_case() {
    local name=$1 back=$2
    shift 2
    rm -f "$CL_DIR/disks/h2/hook"
    AH_TEST_HOOK="phase=step,step=6,node=h2,file=$CL_DISK/hook" ssh_agent "$name" "$@"
    for _ in $(seq 1200); do
        [ -e "$CL_DIR/disks/h2/hook" ] && break
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    [ -e "$CL_DIR/disks/h2/hook" ] || { cat "$agent_log"; fail "$name: h2 never reached the hook"; }
    cluster_freeze_host h2 || fail "cannot stop h2's processes"
    t_hang=$(date +%s.%N)
    for _ in $(seq 1200); do
        [ -z "$back" ] || [ "$(grep -c '"launch":1' "$WD/metrics.jsonl" 2>/dev/null)" -ge 1 ] && break
        kill -0 $agent 2>/dev/null || break
        sleep 0.05
    done
    [ -z "$back" ] || cluster_thaw_host h2 || fail "cannot continue h2's processes"
    local rc=0
    wait $agent || rc=$?
    t_end=$(date +%s.%N)
    [ -n "$back" ] || cluster_thaw_host h2 || fail "cannot continue h2's processes"
    [ $rc = 0 ] || { cat "$agent_log"; fail "$name: autohet run after h2 hung"; }
    out=$(check_metrics "$WD" "$WORK/ref") || { cat "$agent_log"; fail "$name: h2 hung: metrics"; }
    [[ $out == *" exact=0 "* ]] && fail "$name: h2 hung: no step compared bit-exact: the reference's plan is not the run's ($out)"
    echo "$name: h2 hung: $out"
    h2_lost_and_recovered "$WD/metrics.jsonl" step=4 ${back:+back=$back} || { cat "$agent_log"; fail "$name: the recovery after h2 hung"; }
    echo "$name: from h2's freeze to the run's end: $(echo "$t_end - $t_hang" | bc) s"
}
hang_case hang answers --step-timeout 3 --no-in-place
grep -Eq "host hung \(no metrics line for [0-9.]+ s, over the step timeout of [0-9.]+ s\): host h2" "$agent_log" ||
    { cat "$agent_log"; fail "h2's hang not reported"; }
grep "host hung\|answers again" "$agent_log"
# in place (the default): one mpirun a host, so the quiet spell (max(5 s, 3 x the longest gap)) is probed
# long before the step timeout (default): every host asked at once, h2's frozen sshd fails ssh's
# ConnectTimeout (a failure, not our deadline's "unknown") and h2 leaves as lost without notice; h2 stays
# frozen to the end (its return is the case above's)
if ! cluster_short; then # the sanitizer stage (AH_CLUSTER_SHORT=1) runs the case above only
    hang_case hang-inplace ""
    grep -Eq "host lost without notice: host h2" "$agent_log" ||
        { cat "$agent_log"; fail "in place: h2's loss not found by the quiet probe"; }
    grep "host lost\|job stopped\|recovered from" "$agent_log"
fi
echo PASS
