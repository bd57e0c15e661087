#!/usr/bin/env bash
# The first save after an in-place change, with the snapshot buffer kept across it or allocated anew:
# two builds side by side (BASE's autohet, e.g. main before the keep, against BUILD's). bench/sim_ckpt_hold.sh's
# model and plan (85.2 M parameters, 1.02 GB of weights and AdamW moments a rank, fast-0 and spot-0 one rank
# each) trained by two one-rank mpirun jobs joined through an ompi-server (AH_WORLD_JOIN, as
# tests/test_train_inplace.sh), --ckpt-every K (12); RUN_DIR/reconfigure.json asks an in-place change at step C
# (18) onto the same plan (a copy; "leave" []): the state stays in each process, step C is written behind
# the next step (ckpt_change.c), the first save of the new session. Its hold, as sim_ckpt_hold.sh measures a
# periodic save's: rank 0's step lines stamped as written, the intervals of steps C-1 .. C+2 less 4 x the
# median interval of steps C+3 .. C+5 (the change's own work, the same in both builds, is in the window too:
# the difference is the save's). Printed a run: the hold, the checkpoint event's snapshot_allocs (rank 0's
# buffer allocations so far: 1 when kept), snapshot_seconds, the commit's seconds and the reconfigure event's
# move phase; then the medians and their ratio. BUILD's runs get AH_CKPT_SNAPSHOT_KEEP=1 (the CPU backend does not
# keep the buffer by default: ckpt_async.c ah_ckpt_session_keep_snapshot).
# Session 24 (load 5-7, K 12, C 18, two rounds): hold base 2.045 / 0.717 s, kept 4.365 / 3.522 s (base / kept
# 0.35); the save itself shorter kept (snapshot_seconds 3.25 / 1.62 -> 0.47 / 0.46 s, commit 4.00 / 2.43 ->
# 1.58 / 1.77 s) but the move phase longer (0.76 / 0.81 -> 3.63 / 3.81 s: the new trainer's arenas fault in
# fresh pages, the freed buffer's no longer there to take again). docs/checkpoints.md "Host memory".
#
#   BASE=B0 bash bench/ckpt_keep_hold.sh [BUILD_DIR] [ROUNDS]     (default build, 2 rounds)
# A benchmark: it never fails on a timing; it exits non-zero only when a run fails.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=$(cd "${1:-build}" && pwd)
BASE=$(cd "${BASE:?BASE=the baseline build dir}" && pwd)
ROUNDS=${2:-2}
K=${K:-12}
C=${C:-18}
STEPS=$((C + 8))
WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
command -v ompi-server >/dev/null || { echo "ckpt_keep_hold: no ompi-server" >&2; exit 1; }
ompi-server --no-daemonize -r "$WORK/uri" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
for i in $(seq 100); do [ -s "$WORK/uri" ] && break; sleep 0.1; done
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
"$BUILD/autohet" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null
"$BUILD/autohet" plan --model "$WORK/model.json" --cluster "$WORK/cluster.json" --global-batch 2 --seq-len 16 \
    --schedule 1f1b -o "$WORK/plan.json" >/dev/null 2>&1
cp "$WORK/plan.json" "$WORK/plan-b.json"
echo "ckpt_keep_hold: K=$K C=$C STEPS=$STEPS ROUNDS=$ROUNDS, load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # NAME AUTOHET
    local name=$1 bin=$2 d=$WORK/$1 w job pids=()
    rm -rf "$d" && mkdir -p "$d/join" "$d/run"
    printf '{"step": %d, "leave": [], "plan": "%s"}\n' "$C" "$WORK/plan-b.json" >"$d/run/reconfigure.json"
    python3 bench/step_stamp.py "$d/m.jsonl" "$d/stamps" "$d/stop" &
    w=$!
    for job in 1 0; do
        AH_CKPT_SNAPSHOT_KEEP=1 AH_WORLD_JOIN=$d/join:$job:2 timeout 600 mpirun --ompi-server "file:$WORK/uri" \
            -x AH_WORLD_JOIN -x AH_CKPT_SNAPSHOT_KEEP \
            -x OPENBLAS_NUM_THREADS --bind-to none --mca mpi_yield_when_idle 1 -np 1 "$bin" train \
            --plan "$WORK/plan.json" --data "$WORK/text.bin" --steps "$STEPS" --quiet --metrics "$d/m.jsonl" \
            --local-root "$d/root" --run-dir "$d/run" --ckpt-every "$K" >"$d/job$job.out" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}" || { touch "$d/stop"; tail -n 20 "$d"/job*.out >&2; echo "ckpt_keep_hold: $name failed" >&2; exit 1; }
    touch "$d/stop"
    wait "$w"
    rm -rf "$d/root"
}
for i in $(seq "$ROUNDS"); do
    run "base-$i" "$BASE/autohet"
    run "keep-$i" "$BUILD/autohet"
done
echo "load average at the end:   $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$WORK" "$ROUNDS" "$C" <<'PY'
import json, statistics as st, sys
w, n, C = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
res = {"base": [], "keep": []}
print(f"{'run':>8s} {'hold s':>7s} {'steps C-1 .. C+2 - base s':>27s} {'base s':>6s} {'allocs':>6s} {'snapshot s':>10s} "
      f"{'commit s':>8s} {'move s':>6s}")
for i in range(1, n + 1):
    for b in res:
        t, ck, rc = {}, None, None
        for l in open(f"{w}/{b}-{i}/stamps"):
            stamp, js = l.split(" ", 1)
            j = json.loads(js)
            if "loss" in j:
                t[j["step"]] = float(stamp)
            elif j.get("event") == "checkpoint" and j.get("step") == C:
                ck = j
            elif j.get("event") == "reconfigure":
                rc = j
        assert rc and rc["save"] == "async" and ck and ck["ok"], (rc, ck)
        iv = lambda s: t[s] - t[s - 1]
        base = st.median(iv(s) for s in range(C + 3, C + 6))
        h = sum(iv(s) for s in range(C - 1, C + 3)) - 4 * base
        res[b].append(h)
        print(f"{b + '-' + str(i):>8s} {h:7.3f} {' '.join(f'{iv(s) - base:+.2f}' for s in range(C - 1, C + 3)):>27s} "
              f"{base:6.3f} {ck.get('snapshot_allocs', '-')!s:>6s} {ck['snapshot_seconds']:10.3f} {ck['seconds']:8.3f} "
              f"{rc['seconds']['move']:6.3f}")
mb, mk = st.median(res["base"]), st.median(res["keep"])
print(f"the first save after the change, median hold: base {mb:.3f} s, kept {mk:.3f} s; base / kept = "
      + (f"{mb / mk:.2f}" if mk > 0 else "inf (kept at or under the base's noise)"))
PY
