# autohet run --launcher ssh across three emulated hosts (tests/cluster/cluster.sh): the agent on
# the head node reaches h0..h2 only through --rsh-agent (each host its own disk at the same
# --local-root and --work-dir path, its own processes), and Open MPI through the same command.
#  - a node whose host does not answer (h9: no such host) is planned out at launch and reported;
#  - h2 is preempted with a notice mid-run (an event appended once step 4 is logged): SIGTERM to
#    h2's ranks on h2, a save in the grace period, a re-plan on h0 + h1, a relaunch with its own
#    hostfile; every logged loss equals the uninterrupted run's (bit-exact on the same plan, 1e-4
#    after the re-plan), no sample is lost or repeated, and the recovery reads its bytes from the
#    survivors' own disks, none from the cloud; h2's disk is dropped, on h2;
#  - a rank on h1 or h2 stops the job on its own error (a bad token in that host's data): the agent
#    reads its failed.json there and names the error;
#  - with a known_hosts that lacks the hosts' keys (a host-key prompt in BatchMode), every host
#    is planned out, each named, and the agent fails at once instead of waiting.
# The preemption case passes --no-in-place: it is the ssh launcher's relaunch (a hostfile per launch);
# by default the survivors would change to the plan on h0 + h1 in place (tests/test_cluster_agent_inplace.sh).
# Flag errors first; the rest needs root and openssh-server (skipped, 77, without them).
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
# flags: refused, named, before anything starts
expect_usage() { # MESSAGE FLAGS...
    local msg=$1
    shift
    ! "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --work-dir "$WORK/u" "$@" \
        >"$WORK/u.log" 2>&1 || fail "$* accepted"
    grep -q -- "$msg" "$WORK/u.log" || { cat "$WORK/u.log" >&2; fail "$*: no \"$msg\""; }
}
expect_usage "--launcher ssh needs --local-root PATH" --launcher ssh
expect_usage "--launcher slurmx: expected local, ssh or slurm" --launcher slurmx
expect_usage "--local-root is for --launcher ssh" --local-root /tmp/x
expect_usage "--rsh-agent is for --launcher ssh" --rsh-agent ssh
# (--step-timeout was refused with the local launcher until issue 40 item 11 made it name the
# ranks that stopped progressing there: tests/test_agent_stop.sh)
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || { echo "SKIP: needs root and openssh-server"; exit 77; }
STEPS=40
small_cluster
sed -e 's/fast-0/h0/; s/slow-0/h1/; s/slow-1/h2/' "$CLUSTER" >"$WORK/c3.json"
python3 - "$WORK/c3.json" "$WORK/c4.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["nodes"].append(dict(c["nodes"][2], name="h9"))
json.dump(c, open(sys.argv[2], "w"))
PY
CLUSTER=$WORK/c3.json
# the uninterrupted run: the local launcher's mpirun flags and the ring all-reduce the ssh
# launcher asks for, so that the same plan sums in the same order (bit-exact losses)
run_agent "$WORK/ref" --mpirun-args "-q --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated \
-x OPENBLAS_NUM_THREADS=1 --mca coll_libnbc_iallreduce_algorithm 1" || { cat "$WORK/ref.log"; fail "reference run"; }
ref_out=$(check_metrics "$WORK/ref" "$WORK/ref") || fail "reference: metrics: $ref_out"
echo "reference: $ref_out"

cluster_up 3 1000 || fail "cannot make the test cluster"
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
WD=$CL_DISK/work # on the head: this machine's directory; on each host: its own disk
printf '0,add,h2\n' >"$WORK/events.csv"
CLUSTER=$WORK/c4.json
# the agent itself (no MPI in it) with leak checks under ASan; its ranks without (Open MPI's own)
cluster_head env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" "$AUTOHET" run --model tiny-gpt2 --cluster "$CLUSTER" \
    --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ --steps $STEPS --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet --events "$WORK/events.csv" \
    --launcher ssh --rsh-agent "$CL_RSH" --local-root "$CL_DISK/ck" --mpirun-args "$MPI_ARGS" --no-in-place \
    >"$WORK/ssh.log" 2>&1 &
agent=$!
for _ in $(seq 1200); do
    grep -q '"step":4,' "$WD/metrics.jsonl" 2>/dev/null && break
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
printf '1,remove,h2\n' >>"$WORK/events.csv"
wait $agent || { cat "$WORK/ssh.log"; fail "autohet run --launcher ssh"; }
grep -q "planned out: host h9: .*failed" "$WORK/ssh.log" || { cat "$WORK/ssh.log"; fail "h9 not planned out and reported"; }
grep -q '"event":"unreachable","node":"h9"' "$WD/metrics.jsonl" || fail "no unreachable event for h9"
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$WORK/ssh.log"; fail "ssh launcher: metrics"; }
echo "ssh, h2 preempted: $out"
recovered_from_survivors "$WD/metrics.jsonl" || { cat "$WORK/ssh.log"; fail "the recovery's sources"; }
h2_ck=$(cluster_on h2 ls -A "$CL_DISK/ck") || fail "cannot list h2's disk (ssh or ls failed)"
[ -z "$h2_ck" ] || fail "h2's disk was not dropped: $h2_ck"
for h in h0 h1; do
    [ "$(cluster_on $h ls "$CL_DISK/ck")" = "$h" ] || fail "host $h's disk holds $(cluster_on $h ls "$CL_DISK/ck")"
done
for k in 0 1; do
    cluster_on h0 test -s "$WD/launch-$k/hosts"
    [ $? = 1 ] || fail "launch $k's hostfile is on h0's disk (or h0 did not answer): written on the head only"
    [ "$(grep -vc '^#' "$WD/launch-$k/hosts")" = "$(plan_ranks "$WD/plan-$k.json")" ] || fail "launch $k's hostfile"
done

# a rank on another host than rank 0's stops the job on its own error (h1's and h2's copies of the
# data hold a token outside the vocabulary, h0's do not): the agent finds that rank's failed.json on
# its host and names the error (it read rank 0's host only: "communication error ... failed")
python3 - "$WORK/text.bin" "$CL_DIR/disks/h0/data.bin" "$CL_DIR/disks/h1/data.bin" "$CL_DIR/disks/h2/data.bin" <<'PY'
import sys
good = open(sys.argv[1], "rb").read()
for path in sys.argv[2:]:
    open(path, "wb").write(good if "/h0/" in path else good[:1024] + b"\x2c\x01" * ((len(good) - 1024) // 2))
PY
! cluster_head "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/c3.json" --data "$CL_DISK/data.bin" --global-batch $GB \
    --seq-len $SEQ --steps 2 --work-dir "$WD/bad" --quiet --launcher ssh --rsh-agent "$CL_RSH" --local-root "$CL_DISK/ck-bad" \
    --mpirun-args "$MPI_ARGS" >"$WORK/bad.log" 2>&1 || fail "a job with bad data on h1 and h2 reported success"
python3 - "$WD/bad/plan-0.json" <<'PY' || fail "rank 0 is not on h0: the case tests nothing"
import json, sys
assert json.load(open(sys.argv[1]))["pipelines"][0]["stages"][0]["devices"][0]["node"] == "h0"
PY
grep -q "^autohet run: invalid input: the training job stopped on rank [1-9][0-9]*'s error (.*data.bin: token [0-9]* .*is 300, outside the model's vocabulary" \
    "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "another host's failed.json is not read"; }

# a host-key prompt in BatchMode: every host planned out, each named, no wait
sed "s|UserKnownHostsFile .*|UserKnownHostsFile $WORK/empty_known_hosts|" "$CL_SSH_CONFIG" | grep -v Control >"$WORK/nokeys.cfg"
: >"$WORK/empty_known_hosts"
! cluster_head timeout 60 "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/c3.json" --data "$WORK/text.bin" \
    --steps 2 --work-dir "$WD/nokeys" --launcher ssh --rsh-agent "ssh -F $WORK/nokeys.cfg" --local-root "$CL_DISK/ck" \
    >"$WORK/nokeys.log" 2>&1 || fail "the agent ran with no host reachable"
for h in h0 h1 h2; do
    grep -q "planned out: host $h: .*Host key verification failed" "$WORK/nokeys.log" ||
        { cat "$WORK/nokeys.log"; fail "host $h's host-key failure is not named"; }
done
echo PASS
