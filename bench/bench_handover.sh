#!/usr/bin/env bash
# Recovery after a notice with and without the handover (issue 36; docs/checkpoints.md "The handover
# at a notice"), side by side on the same emulated hosts, rounds alternating, ratios printed.
#
#   bash bench/bench_handover.sh [BUILD_DIR] [ROUNDS]     (default build, 2 rounds; root: emulated hosts)
#   KEEP=DIR keeps the runs' metrics and logs.
#
# Hosts: three emulated hosts (tests/cluster/cluster.sh: each its own disk and its own tmpfs on
# /dev/shm), unshaped links, the ssh launcher. Model: GPT-2, 6 layers 512 wide, byte vocabulary
# (19.2M parameters, 231 MB of checkpoint state: fp32 weights + AdamW m, v); one 200 MiB CPU device a
# host (slowed down 4x), so the plan is one pipeline h0 [0,2) > h1 [2,4) > h2 [4,6) and, without h2, h0 [0,3) > h1
# [3,6): h2's blocks 4-5 move to h1 and block 2 from h1 to h0. In-memory replicas on
# (--replica-memory-gb 1) in both; checkpoints every 8 steps; the events file preempts h2 once 11
# steps are in the agent's metrics (steps slowed to ~1 s by the emulation, so the notice comes at
# step 11-13, 3-5 steps after the last checkpoint: the save at the notice is worth it); grace 120 s.
# Two ways:
#   partner   --no-handover: the notice's save goes memory first to each node's partner (h2's pieces
#             into h0's memory), the relaunch plans after the stop, and the restore sends h2's blocks
#             from h0's memory and block 2 from h1's disk over MPI;
#   handover  the agent plans first and writes the plan to the hosts; the save hands each file to
#             the host that reads it next (blocks 4-5 into h1's memory, block 2 into h0's), and the
#             relaunch reads every file on its own host.
# Printed per run: the recover event's phases (stop = notice to the old job's exit, its save included;
# re-plan; start-up = the relaunch up to the restore; transfer = the restore; first step; total =
# notice to the first finished step) and the notice save's commit in memory; then the medians and the
# ratios handover / partner. A benchmark: it never fails on a timing, only when a run fails.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
ROUNDS=${2:-2}
AUTOHET=$BUILD/autohet
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail() { echo "bench_handover: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] && [ -x /usr/sbin/sshd ] || fail "needs root and openssh-server (emulated hosts)"
. "$SRC/tests/cluster/cluster.sh"
AGENT=
cleanup() { [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
cat >"$WORK/model.json" <<'JSON'
{"model_type": "gpt2", "n_layer": 6, "n_embd": 512, "n_head": 8, "vocab_size": 256, "n_positions": 64}
JSON
cat >"$WORK/cluster.json" <<'JSON'
{"gpu_types": {"cpu": {"tflops": {"bf16": 0.05, "fp16": 0.05, "fp32": 0.05}, "mem_bw_gb_s": 10,
                       "intra_node_gb_s": 5, "emulate": {"slowdown": 4, "memory_mib": 200}}},
 "nodes": [{"name": "h0", "gpu": "cpu", "count": 1, "usd_per_gpu_hour": 0.3},
           {"name": "h1", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1},
           {"name": "h2", "gpu": "cpu", "count": 1, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 12.5, "cloud_gb_s": 0.1}}
JSON
"$AUTOHET" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null || fail "tokenize"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
steps_at_least() { [ "$(grep -c '"loss"' "$WD/metrics.jsonl" 2>/dev/null)" -ge "$1" ] 2>/dev/null; }
recovered() { grep -q '"event":"recover"' "$WD/metrics.jsonl" 2>/dev/null; }
wait_for() { # SECONDS CMD...: until CMD succeeds while the agent runs
    local end=$(($(date +%s) + $1))
    shift
    until "$@"; do
        kill -0 "$AGENT" 2>/dev/null || return 1
        [ "$(date +%s)" -lt $end ] || return 1
        sleep 0.2
    done
}
run() { # NAME [flags]
    local name=$1
    shift
    cluster_up 3 0 >/dev/null || fail "cannot make the emulated cluster"
    WD=$CL_DISK/$name
    printf '999999,remove,h0\n' >"$WORK/$name.events"
    cluster_head "$AUTOHET" run --model "$WORK/model.json" --cluster "$WORK/cluster.json" --data "$WORK/text.bin" \
        --global-batch 3 --seq-len 16 --steps 100000 --ckpt-every 8 --work-dir "$WD" --quiet --grace-s 120 \
        --launcher ssh --rsh-agent "$CL_RSH" --local-root "$CL_DISK/ck" --replica-memory-gb 1 \
        --events "$WORK/$name.events" --mpirun-args "--mca btl_tcp_if_include $CL_IFACE --mca oob_tcp_if_include \
$CL_IFACE --mca mpi_yield_when_idle 1 -x OPENBLAS_NUM_THREADS=1" "$@" >"$WORK/$name.log" 2>&1 &
    AGENT=$!
    wait_for 900 steps_at_least 11 || { cat "$WORK/$name.log" >&2; fail "$name: no 11 steps"; }
    printf '0,remove,h2\n999999,remove,h0\n' >"$WORK/$name.events"
    wait_for 900 recovered || { cat "$WORK/$name.log" >&2; fail "$name: the run did not recover"; }
    echo "$name: recovered; load average $(cut -d' ' -f1-3 /proc/loadavg)"
    mkdir -p "$WORK/$name"
    cp "$WD/metrics.jsonl" "$WORK/$name/metrics.jsonl"
    cluster_down
    wait "$AGENT" 2>/dev/null
    AGENT=
}
for r in $(seq "$ROUNDS"); do
    run "partner-$r" --no-handover
    run "handover-$r" --no-in-place # the handover's relaunch (by default h0 and h1 would change in place)
done
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$ROUNDS" <<'PY'
import json, statistics, sys
w, rounds = sys.argv[1], int(sys.argv[2])
PH = ("stop_s", "replan_s", "startup_s", "transfer_s", "first_step_s")
def one(name):
    ev = [json.loads(l) for l in open(f"{w}/{name}/metrics.jsonl")]
    rec = next(e for e in ev if e.get("event") == "recover")
    pre = next(e for e in ev if e.get("event") == "preempt")
    ck = next((e for e in ev if e.get("event") == "checkpoint" and e["step"] == pre["step"]), {})
    row = {p: rec["breakdown"][p] for p in PH}
    row["total"] = rec["seconds"]
    row["commit"] = ck.get("memory_commit_seconds", float("nan"))
    row["save"] = ck.get("seconds", float("nan"))
    b, f = rec["bytes"], rec["files"]
    print(f"{name:11s} stop {row['stop_s']:6.2f} (save {row['save']:5.2f}, in memory after {row['commit']:5.2f}, "
          f"handover {ck.get('handover', False)})  re-plan {row['replan_s']:5.3f}  start-up {row['startup_s']:5.2f}  "
          f"transfer {row['transfer_s']:5.3f}  first step {row['first_step_s']:5.2f}  total {row['total']:6.2f} s; "
          f"read: local {b['local'] / 1e6:.0f} MB ({f['local']}), memory {b['memory'] / 1e6:.0f} MB ({f['memory']}), "
          f"peer {b['peer'] / 1e6:.0f} MB ({f['peer']}), cloud {b['cloud'] / 1e6:.0f} MB; resumed from {rec['step']}")
    return row
rows = {k: [one(f"{k}-{r}") for r in range(1, rounds + 1)] for k in ("partner", "handover")}
med = {k: {p: statistics.median(x[p] for x in v) for p in v[0]} for k, v in rows.items()}
print("medians, handover / partner:")
for p in PH + ("save", "commit", "total"):
    a, b = med["handover"][p], med["partner"][p]
    print(f"  {p:12s} {a:7.3f} s / {b:7.3f} s = {a / b if b > 0 else float('nan'):.2f}x")
PY
