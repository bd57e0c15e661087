# Training under a real Slurm cluster (tests/cluster/slurm.sh: slurmctld on the head node, one
# slurmd per emulated host, munge authentication) across three emulated hosts:
#  1. inside `salloc -N3`, the allocation holds h0..h2, and `srun` runs one task per host, each on
#     its own host with its own disk;
#  2. `mpirun` inside `salloc -N3 --ntasks-per-node=2` (Open MPI's Slurm launcher starts its
#     daemons with srun: no ssh involved, and every sshd is stopped first to prove it) trains train-asym's plan with pipelines crossing hosts to the same
#     losses as one process (1e-4 relative), each host's disk holding only its own node's
#     checkpoints.
# Needs root (namespaces), openssh-server (the cluster's hosts), slurm-wlm and munge; skipped (77)
# without them.
. "$(dirname "$0")/train_common.sh"
. "$SRC/tests/cluster/cluster.sh"
. "$SRC/tests/cluster/slurm.sh"
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] && command -v slurmctld >/dev/null && command -v munged >/dev/null ||
    { echo "SKIP: needs root, openssh-server, slurm-wlm and munge"; exit 77; }
cluster_up 3 1000 || fail "cannot make the test cluster"
slurm_up || fail "cannot start Slurm on the test cluster"
STEPS=8

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
place = [["h0"], ["h1", "h2"], ["h2", "h0", "h1"]]
used = {}
for p, hosts in zip(d["pipelines"], place):
    for s, h in zip(p["stages"], hosts):
        s["devices"] = [{"node": h, "index": used.setdefault(h, 0)}]
        used[h] += 1
json.dump(d, open(sys.argv[2], "w"), indent=1)
PY
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\n".join(x["node"] for p in d["pipelines"] for s in p["stages"] for x in s["devices"]))' \
    "$WORK/cross.json" >"$WORK/cross.hosts"
timeout 120 "$AUTOHET" train --plan "$PLANS/train-single.json" --data "$WORK/text.bin" --steps $STEPS --quiet \
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
    --steps $STEPS --quiet --metrics "$WORK/cross.jsonl" --ckpt-every 4 --local-root "$CL_DISK" \
    --run-dir "$WORK/run" --check-host 2>"$WORK/cross.err" || { tail -n 30 "$WORK/cross.err" >&2; fail "training under Slurm"; }
python3 - "$WORK/single.jsonl" "$WORK/cross.jsonl" $STEPS <<'PY' || fail "losses under Slurm differ from one process"
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2]) if "event" not in json.loads(l)]
n = int(sys.argv[3])
assert len(ref) == len(got) == n, (len(ref), len(got))
worst = max(abs(a["loss"] - b["loss"]) / abs(a["loss"]) for a, b in zip(ref, got))
assert worst <= 1e-4, worst
print(f"under Slurm across 3 hosts: {n} losses within {worst:.2e} of one process")
PY
# each host's own disk, read through Slurm (the sshds are gone): only its node's steps
disks=$(cluster_head timeout 60 salloc -N3 srun sh -c 'echo $(hostname): $(ls '"$CL_DISK"') $(ls '"$CL_DISK"'/$(hostname))' 2>/dev/null | sort)
for h in $CL_HOSTS; do
    echo "$disks" | grep -qx "$h: $h step-0*4 step-0*8" || fail "host $h's disk: '$(echo "$disks" | grep "^$h:")' (expected only $h/ with steps 4 and 8)"
done
[ -z "$(ls -A "$CL_DISK")" ] || fail "this machine's $CL_DISK is not empty: $(ls -A "$CL_DISK")"
echo "checkpoints: each host holds its own node's steps only"
echo "PASS"
