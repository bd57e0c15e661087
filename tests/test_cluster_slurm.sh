# Training under a real Slurm cluster (tests/cluster/slurm.sh: slurmctld on the head node, one
# slurmd per emulated host, munge authentication) across three emulated hosts:
#  1. inside `salloc -N3`, the allocation holds h0..h2, and `srun` runs one task per host, each on
#     its own host with its own disk;
#  2. `mpirun` inside `salloc -N3 --ntasks-per-node=2` (Open MPI's Slurm launcher starts its
#     daemons with srun: no ssh involved, and every sshd is stopped first to prove it) trains train-asym's plan with pipelines crossing hosts to the same
#     losses as one process (1e-4 relative), each host's disk holding only its own node's
#     checkpoints;
#  3. `autohet run --launcher slurm` inside `salloc -N3 --ntasks-per-node=2` (still no sshd): a
#     node outside the allocation (h9) is planned out and named; h2 is preempted with a notice
#     mid-run (SIGTERM to its ranks through srun -w h2), the agent saves, re-plans on h0 + h1 and
#     relaunches (--no-in-place: the relaunch under Slurm; by default the survivors would change to the
#     plan on h0 + h1 in place, tests/test_cluster_agent_inplace.sh); every logged loss equals the uninterrupted run's, no sample lost or repeated,
#     the recovery reads the survivors' own disks; outside an allocation, and with --rsh-agent,
#     --launcher slurm is refused.
# Needs root (namespaces), openssh-server (the cluster's hosts), slurm-wlm and munge; skipped (77)
# without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/agent_common.sh"
. "$SRC/tests/cluster/cluster.sh"
. "$SRC/tests/cluster/slurm.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v slurmctld >/dev/null && command -v munged >/dev/null ||
    { echo "SKIP: needs root, openssh-server, slurm-wlm and munge"; exit 77; }
# flags: refused, named, before anything starts
for args in "--launcher slurm --local-root /tmp/x" "--launcher slurm --local-root /tmp/x --rsh-agent ssh"; do
    ! env -u SLURM_JOB_ID "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" \
        --work-dir "$WORK/u" $args >"$WORK/u.log" 2>&1 || fail "$args accepted outside an allocation"
done
grep -q -- "--rsh-agent is for --launcher ssh" "$WORK/u.log" || { cat "$WORK/u.log"; fail "--rsh-agent with slurm: not named"; }
env -u SLURM_JOB_ID "$AUTOHET" run --model tiny-gpt2 --cluster cpu-hetero --data "$WORK/text.bin" --work-dir "$WORK/u" \
    --launcher slurm --local-root /tmp/x 2>&1 | grep -q "runs inside a Slurm allocation" || fail "slurm outside an allocation: not said"
# the uninterrupted run (part 3's reference): the ring all-reduce the launcher asks for
small_cluster
sed -e 's/fast-0/h0/; s/slow-0/h1/; s/slow-1/h2/' "$CLUSTER" >"$WORK/c3.json"
python3 - "$WORK/c3.json" "$WORK/c4.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["nodes"].append(dict(c["nodes"][2], name="h9"))
json.dump(c, open(sys.argv[2], "w"))
PY
CLUSTER=$WORK/c3.json
STEPS=60
run_agent "$WORK/ref" --mpirun-args "-q --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated \
-x OPENBLAS_NUM_THREADS=1 --mca coll_libnbc_iallreduce_algorithm 1" || { cat "$WORK/ref.log"; fail "reference run"; }
cluster_up 3 1000 || fail "cannot make the test cluster"
slurm_up || fail "cannot start Slurm on the test cluster"
# 1. the allocation and one task per host
exp=$(printf 'h0 h0\nh1 h1\nh2 h2\nh[0-2]\n' | sort)
# each host's disk holds only its own directory: make one per host first
for h in $CL_HOSTS; do cluster_on "$h" mkdir -p "$CL_DISK/$h"; done
got=$(cluster_head timeout 60 salloc -N3 sh -c 'echo "$SLURM_JOB_NODELIST"; srun sh -c "echo \$(hostname) \$(ls '"$CL_DISK"')"' 2>"$WORK/salloc.err" | sort)
[ "$got" = "$exp" ] || { cat "$WORK/salloc.err" >&2; fail "salloc -N3 / srun: got '$got', expected '$exp'"; }
echo "salloc -N3: h[0-2], srun one task per host, each seeing only its own disk"

# 2. train-asym across the hosts under mpirun inside the allocation, with no sshd left
python3 - "$PLANS/train-asym.json" "$WORK/cross.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["cluster"]["nodes"] = [dict(n, name="h%d" % i) for i, n in enumerate(d["cluster"]["nodes"][:3])]
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
cluster_place "$WORK/cross.json" h0 "h1 h2" "h2 h0 h1" || fail "the plan's placement across 3 hosts"
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps 8 --quiet \
    --metrics "$WORK/single.jsonl" 2>"$WORK/single.err" || { cat "$WORK/single.err" >&2; fail "single-rank run"; }
for h in $CL_HOSTS; do # every sshd of every host: the listener and the sessions it serves
    for pid in $(cl_pids_in "$h"); do
        [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = sshd ] && kill -KILL "$pid" 2>/dev/null
    done
done
cluster_on h0 true 2>/dev/null && fail "an sshd still answers: the test would not show that Slurm launched the ranks"
mkdir -p "$WORK/run"
cluster_head timeout 240 salloc -N3 --ntasks-per-node=2 mpirun --mca plm slurm --mca btl_tcp_if_include "$CL_IFACE" \
    --mca oob_tcp_if_include "$CL_IFACE" --map-by seq --bind-to none --mca mpi_yield_when_idle 1 \
    -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
    -np 6 --hostfile "$WORK/cross.hosts" "$AUTOHET" train --plan "$WORK/cross.json" --data "$WORK/text.bin" \
    --steps 8 --quiet --metrics "$WORK/cross.jsonl" --ckpt-every 4 --local-root "$CL_DISK" \
    --run-dir "$WORK/run" --check-host 2>"$WORK/cross.err" || { tail -n 30 "$WORK/cross.err" >&2; fail "training under Slurm"; }
losses_as_one "$WORK/single.jsonl" "$WORK/cross.jsonl" 8 "under Slurm across 3 hosts" || fail "losses under Slurm differ from one process"
# each host's own disk, read through Slurm (the sshds are gone): only its node's steps
disks=$(cluster_head timeout 60 salloc -N3 srun sh -c 'echo $(hostname): $(ls '"$CL_DISK"') $(ls '"$CL_DISK"'/$(hostname))' 2>/dev/null | sort)
for h in $CL_HOSTS; do
    echo "$disks" | grep -qx "$h: $h step-0*4 step-0*8" || fail "host $h's disk: '$(echo "$disks" | grep "^$h:")' (expected only $h/ with steps 4 and 8)"
done
[ -z "$(ls -A "$CL_DISK")" ] || fail "this machine's $CL_DISK is not empty: $(ls -A "$CL_DISK")"
echo "checkpoints: each host holds its own node's steps only"

# 3. the agent with --launcher slurm, h2 preempted with a notice, h9 not in the allocation
MPI_ARGS="--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include $CL_IFACE --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1 -x ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0"
WD=$CL_DISK/work # on the head: this machine's directory; on each host: its own disk
printf '0,add,h2\n' >"$WORK/events.csv"
cluster_head salloc -N3 --ntasks-per-node=2 env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1" \
    "$AUTOHET" run --model tiny-gpt2 --cluster "$WORK/c4.json" --data "$WORK/text.bin" --global-batch $GB --seq-len $SEQ \
    --steps $STEPS --ckpt-every $CKPT_EVERY --work-dir "$WD" --quiet --events "$WORK/events.csv" --launcher slurm \
    --local-root "$CL_DISK/ck" --mpirun-args "$MPI_ARGS" --no-in-place >"$WORK/slurm.log" 2>&1 &
agent=$!
for _ in $(seq 1200); do
    grep -q '"step":4,' "$WD/metrics.jsonl" 2>/dev/null && break
    kill -0 $agent 2>/dev/null || break
    sleep 0.05
done
printf '1,remove,h2\n' >>"$WORK/events.csv"
wait $agent || { cat "$WORK/slurm.log"; fail "autohet run --launcher slurm"; }
grep -q "planned out: host h9 is not in the Slurm allocation" "$WORK/slurm.log" ||
    { cat "$WORK/slurm.log"; fail "h9 (not allocated) not planned out and named"; }
out=$(check_metrics "$WD" "$WORK/ref") || { cat "$WORK/slurm.log"; fail "slurm launcher: metrics"; }
echo "slurm, h2 preempted: $out"
recovered_from_survivors "$WD/metrics.jsonl" || { cat "$WORK/slurm.log"; fail "the recovery's sources"; }
echo "PASS"
