#!/usr/bin/env bash
# What a periodic asynchronous checkpoint holds training for, at the runtime as it is (the figure the
# simulator's AH_SIM_CKPT_SNAPSHOT_GB_S and ah_sim_ckpt_hold_s price: docs/simulator.md rule 4 and
# "paper-288 at main, session 24"). `autohet train` under mpirun (no agent) of bench_notice_save.sh's
# model and plan (GPT-2 small's shape with a byte vocabulary, 85.2 M parameters, 1.02 GB of weights and
# AdamW moments a rank; fast-0 and spot-0, one device each, two data-parallel replicas under
# --schedule 1f1b), in alternating rounds:
#   async: --ckpt-every K (default 8), the default asynchronous save;
#   none:  no periodic save (--ckpt-every 0), the control: the same analysis at the same steps.
# A watcher stamps each step line of rank 0's --metrics as it is written (flushed a line), so a step's
# interval (this line's stamp - the last's) holds what its "seconds" leave out: the boundary's work
# before it (the snapshot's take, the commit's agreement and commit, ckpt_async.c). Within a run (the
# machine's load, shared with other work, moves by 2-4x between runs of a minute, less between steps
# seconds apart), the hold of the checkpoint at boundary N is the sum of the intervals of steps N-1 ..
# N+2 (the step whose AdamW writes the snapshot, ckpt_fuse.c; the boundary and the step beside the
# copies; the steps beside the write, the commit) less 4 x the median interval of steps N+3 .. N+K-2 of
# the same period (after the commit: the event's "seconds", printed, says whether it came within the
# window). none's figure at the same steps is the method's noise. The first save (boundary K) copies in
# the background and allocates the buffer; the later ones are AdamW's (the fuse) into the kept buffer:
# printed apart. Also printed: the checkpoint events' snapshot_seconds, wait_seconds,
# writer_cpu_seconds and how the snapshot was copied.
#
#   bash bench/sim_ckpt_hold.sh [BUILD_DIR] [ROUNDS]          (default build, 3 rounds)
#   K=10 bash bench/sim_ckpt_hold.sh B                        (another period, at least 6; STEPS defaults to 4K+2)
#   KEEP=DIR bash bench/sim_ckpt_hold.sh B                    (keep the runs' metrics and stamps)
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
ROUNDS=${2:-3}
K=${K:-8}
STEPS=${STEPS:-$((4 * K + 2))}
# the window (steps N-1 .. N+2) and at least two later steps of the period for its base
[ "$K" -ge 6 ] || { echo "sim_ckpt_hold: K must be at least 6, got $K" >&2; exit 2; }
AUTOHET=$BUILD/autohet
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
trap '[ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
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
"$AUTOHET" plan --model "$WORK/model.json" --cluster "$WORK/cluster.json" --global-batch 2 --seq-len 16 \
    --schedule 1f1b -o "$WORK/plan.json" >/dev/null 2>&1
echo "sim_ckpt_hold: K=$K STEPS=$STEPS ROUNDS=$ROUNDS, load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"


run() { # NAME ROOT [flags]
    local name=$1 root=$2 w
    shift 2
    rm -rf "$root" "$WORK/$name.jsonl" "$WORK/$name.stop"
    python3 bench/step_stamp.py "$WORK/$name.jsonl" "$WORK/$name.stamps" "$WORK/$name.stop" &
    w=$!
    mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS=1 \
        -np 2 "$AUTOHET" train --plan "$WORK/plan.json" --data "$WORK/text.bin" --steps "$STEPS" --quiet \
        --metrics "$WORK/$name.jsonl" --local-root "$root" "$@" >"$WORK/$name.out" 2>&1 ||
        { touch "$WORK/$name.stop"; cat "$WORK/$name.out" >&2; echo "sim_ckpt_hold: $name failed" >&2; exit 1; }
    touch "$WORK/$name.stop"
    wait "$w"
    rm -rf "$root"
}
for i in $(seq "$ROUNDS"); do
    run "async-$i" "$WORK/ck" --ckpt-every "$K"
    run "none-$i" "$WORK/ck"
done
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$ROUNDS" "$K" "$STEPS" <<'PY'
import json, statistics as st, sys
w, n, K, S = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(name):
    t, ev = {}, []
    for l in open(f"{w}/{name}.stamps"):
        stamp, js = l.split(" ", 1)
        j = json.loads(js)
        if "loss" in j:
            t[j["step"]] = float(stamp)
        elif j.get("event") == "checkpoint" and j.get("async"):
            ev.append(j)
    return t, ev
def hold(t, N):  # the window's intervals less 4 x the median of the period's later ones
    iv = lambda s: t[s] - t[s - 1]
    base = st.median(iv(s) for s in range(N + 3, N + K - 1))
    return sum(iv(s) for s in range(N - 1, N + 3)) - 4 * base, base, [iv(s) - base for s in range(N - 1, N + 3)]
print(f"{'run':>8s} {'boundary':>8s} {'hold s':>7s} {'steps N-1 .. N+2 - base s':>27s} {'base s':>6s} "
      f"{'commit s':>8s} {'snapshot s':>10s} {'wait s':>7s} {'writer CPU s':>12s} {'copied by':>10s} {'GB a rank':>9s}")
res = {"first": [], "later": [], "none": []}
gb = 0
for i in range(1, n + 1):
    ta, ev = load(f"async-{i}")
    tn, _ = load(f"none-{i}")
    for e in ev:
        N = e["step"]
        if N + K - 2 > S - 1:
            continue  # a period cut short by the run's end (the last step's save is synchronous)
        h, base, each = hold(ta, N)
        hn, basen, eachn = hold(tn, N)
        res["first" if N == K else "later"].append(h)
        res["none"].append(hn)
        gb = e["snapshot_bytes"] / 2 / 1e9
        by = "AdamW" if e.get("snapshot_adamw_bytes") else "copies"
        print(f"{'async-' + str(i):>8s} {N:8d} {h:7.3f} {' '.join(f'{x:+.2f}' for x in each):>27s} {base:6.3f} "
              f"{e['seconds']:8.3f} {e['snapshot_seconds']:10.3f} {e['wait_seconds']:7.3f} "
              f"{e['writer_cpu_seconds']:12.3f} {by:>10s} {gb:9.3f}")
        print(f"{'none-' + str(i):>8s} {N:8d} {hn:7.3f} {' '.join(f'{x:+.2f}' for x in eachn):>27s} {basen:6.3f}")
def line(what, v):
    if v:
        m = st.median(v)
        print(f"{what}: median {m:.3f} s over {len(v)} (min {min(v):.3f}, max {max(v):.3f})"
              + (f"; {gb:.3f} GB a rank / median = {gb / m:.2f} GB/s" if m > 0 and what.startswith("async") else ""))
line("async, the first save (copies, the buffer allocated)", res["first"])
line("async, the later saves (AdamW's, the kept buffer)", res["later"])
line("none at the same steps (the method's noise)", res["none"])
PY
