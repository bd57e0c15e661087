#!/usr/bin/env bash
# The save at a preemption notice, disks first vs memory first (in-memory replicas,
# docs/checkpoints.md "The save at a notice, memory first"), side by side in alternating rounds.
#
#   bash bench/bench_notice_save.sh [BUILD_DIR] [ROUNDS]     (default build, 3 rounds)
#   KEEP=DIR bash bench/bench_notice_save.sh B               (keep every run's metrics in DIR)
#
# Set-up: bench_recovery.sh's model and cluster (GPT-2 small's shape with a byte vocabulary, 85.2M
# parameters, 1.02 GB of state per replica; fast-0 and spot-0, one device each, so two
# data-parallel replicas), `autohet train` under mpirun directly (no agent, no cloud), no periodic
# save before the notice (--ckpt-every 1000), grace 120 s; after 3 steps spot-0's rank gets SIGTERM:
#   disk:   the notice's save writes both disks and commits (the way without replicas);
#   memory: --replica-memory-gb 4: each rank's pieces into its host's memory (a tmpfs, committed
#           there), each node's step to the other's memory (the replication), the step committed
#           in memory, then the disks.
# Printed per round: the save's seconds (the checkpoint event's "seconds"), and for memory its
# snapshot (memory_snapshot_seconds), replication (memory_commit_seconds - snapshot) and what the
# grace period must cover (memory_commit_seconds), with GB/s; then the medians and the ratios. The
# figures feed the simulator's AH_SIM_SNAPSHOT_GB_S (docs/simulator.md "The memory tier").
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-3}
AUTOHET=$BUILD/autohet
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
SHM=/dev/shm/autohet-bench-notice-$$
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"; rm -rf "$SHM"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 256, "n_positions": 64}
JSON
cat >"$WORK/cluster.json" <<'JSON'
{"gpu_types": {"cpu": {"tflops": {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}, "mem_bw_gb_s": 10,
                       "intra_node_gb_s": 5, "emulate": {"slowdown": 1, "memory_mib": 4096}}},
 "nodes": [{"name": "fast-0", "gpu": "cpu", "count": 1, "usd_per_gpu_hour": 0.3},
           {"name": "spot-0", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 12.5, "cloud_gb_s": 0.05}}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
# --schedule 1f1b: two data-parallel replicas, as measured before (under auto the planner now takes one
# interleaved pipeline over the two nodes: 0.512 GB per rank instead of 1.02 GB)
"$AUTOHET" plan --model "$WORK/model.json" --cluster "$WORK/cluster.json" --global-batch 2 --seq-len 16 \
    --schedule 1f1b -o "$WORK/plan.json" >/dev/null 2>&1
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # NAME [flags]: the job, SIGTERM to spot-0's rank after 3 steps
    local name=$1 job pid
    shift
    rm -rf "$WORK/$name.ck" "$SHM"
    mkdir -p "$WORK/$name.run"
    mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS=1 \
        -np 2 "$AUTOHET" train --plan "$WORK/plan.json" --data "$WORK/text.bin" --steps 200 --quiet \
        --metrics "$WORK/$name.jsonl" --local-root "$WORK/$name.ck" --run-dir "$WORK/$name.run" --ckpt-every 1000 \
        --grace-s 120 "$@" >"$WORK/$name.out" 2>&1 &
    job=$!
    for _ in $(seq 3000); do
        [ -r "$WORK/$name.jsonl" ] && [ "$(grep -c '"loss"' "$WORK/$name.jsonl")" -ge 3 ] && break
        sleep 0.1
    done
    pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/$name.run/rank-1.json")
    kill -TERM "$pid"
    wait $job || [ $? = 75 ] || { cat "$WORK/$name.out" >&2; echo "bench_notice_save: $name failed" >&2; exit 1; }
    rm -rf "$WORK/$name.ck" "$SHM"
}
for i in $(seq "$ROUNDS"); do
    run "disk-$i"
    run "memory-$i" --replica-memory-gb 4 --replica-root "$SHM"
done
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
w, n = sys.argv[1], int(sys.argv[2])
def save(name):
    ev = [json.loads(l) for l in open(f"{w}/{name}.jsonl")]
    pre = next(e for e in ev if e.get("event") == "preempt")
    assert pre["saved"], f"{name}: the notice did not save"
    return next(e for e in ev if e.get("event") == "checkpoint" and e["step"] == pre["step"])
print(f"{'round':>5s} {'disk save':>10s} {'memory: snapshot':>17s} {'replication':>12s} {'committed':>10s} {'whole save':>11s}")
d, snap, repl, comm, whole = [], [], [], [], []
for i in range(1, n + 1):
    a, m = save(f"disk-{i}"), save(f"memory-{i}")
    assert m.get("memory_first") and m.get("memory_committed"), m
    per_rank = m["bytes"]["local"] / 2  # two ranks, each its replica
    d.append(a["seconds"]); snap.append(m["memory_snapshot_seconds"]); comm.append(m["memory_commit_seconds"])
    repl.append(comm[-1] - snap[-1]); whole.append(m["seconds"])
    print(f"{i:5d} {d[-1]:9.2f}s {snap[-1]:7.2f}s ({per_rank / snap[-1] / 1e9:4.2f} GB/s) {repl[-1]:6.2f}s "
          f"({m['bytes']['memory'] / repl[-1] / 1e9:4.2f} GB/s) {comm[-1]:9.2f}s {whole[-1]:10.2f}s")
md = statistics.median
print(f"state: {per_rank / 1e9:.3f} GB per rank, {m['bytes']['memory'] / 1e9:.3f} GB replicated (each node's step to the other)")
print(f"medians: disk save {md(d):.2f} s; memory first: snapshot {md(snap):.2f} s ({per_rank / md(snap) / 1e9:.2f} GB/s "
      f"per rank), replication {md(repl):.2f} s, committed in memory {md(comm):.2f} s, whole save {md(whole):.2f} s")
print(f"what the grace period must cover, disk / memory first: {md(d) / md(comm):.2f}x")
print(f"the whole save, memory first / disk:                    {md(whole) / md(d):.2f}x")
PY
