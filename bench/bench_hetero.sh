#!/usr/bin/env bash
# Heterogeneous cluster, emulated on this machine: 2 "fast" devices with 160 MiB + 4 devices 3x
# slower with 512 MiB (the shape of the built-in cpu-hetero), every type stretched 4x more
# (slowdown 4 and 12): then 6 ranks ask for 2/4 + 4/12 = 0.83 of a core on average and do not
# fight over the 2 cores (docs/runtime.md, "Device emulation"); with cpu-hetero itself (slowdown 1
# and 3) they ask for 3.3 cores. CLUSTER=cpu-hetero runs that instead. The cost model is
# calibrated by `autohet profile` (the cpu types measured through their emulation), then the
# planner's plan and the `uniform` (Megatron-LM-like) baseline are each trained with `autohet
# train` under mpirun and their measured iteration time is set beside evaluate's prediction; the
# measured speedup of the plan over the baseline beside the predicted one. POLL=1 also trains each
# plan with MPI's polling waits (AH_COMM_WAIT=poll) for a column beside the default sleeping waits
# (src/comm/comm.c). Measured side by side in one run. Never run by CTest; never fails on a timing.
# Usage: bash bench/bench_hetero.sh BUILD_DIR [SOURCE_DIR]   (a Release build)
# Env: MODEL (default demo-gpt2), B (global batch, 16), T (seq len, 128), STEPS (8, measured after
# WARMUP, 4, steps: a rank that runs one micro-batch per step has seen only that many phases of
# each kind, and emulation stretches from the typical one of its last 7: docs/runtime.md), CLUSTER
# (a built-in name or a file; default the 4x-stretched cluster above), KEEP=DIR (work there and
# keep it), POLL=1, EXTRA="PLAN.json ..." (more plans for the same cluster, measured and
# predicted beside the two, as extra1, extra2, ...), SHARD=1 (also the planner's plan with its
# optimizer sharded evenly over every data-parallel group, `autohet evaluate --shard-optimizer
# even`, as "sharded").
set -euo pipefail
BUILD=$(cd "${1:?usage: $0 BUILD_DIR [SOURCE_DIR]}" && pwd)
AH=$BUILD/autohet
MODEL=${MODEL:-demo-gpt2}
if [ -n "${KEEP:-}" ]; then WORK=$KEEP; mkdir -p "$WORK"; else WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT; fi
if [ -z "${CLUSTER:-}" ]; then
    CLUSTER=$WORK/cluster.json
    cat >"$CLUSTER" <<'JSON'
{"gpu_types": {
  "cpu-fast": {"tflops": {"bf16": 0.0125, "fp16": 0.0125, "fp32": 0.0125}, "mem_bw_gb_s": 2.5,
               "intra_node_gb_s": 5, "emulate": {"slowdown": 4, "memory_mib": 160}},
  "cpu-slow": {"tflops": {"bf16": 0.0041666, "fp16": 0.0041666, "fp32": 0.0041666}, "mem_bw_gb_s": 0.8333,
               "intra_node_gb_s": 5, "emulate": {"slowdown": 12, "memory_mib": 512}}},
 "nodes": [{"name": "fast-0", "gpu": "cpu-fast", "count": 2, "usd_per_gpu_hour": 0.3},
           {"name": "slow-0", "gpu": "cpu-slow", "count": 2, "spot": true, "usd_per_gpu_hour": 0.1},
           {"name": "slow-1", "gpu": "cpu-slow", "count": 2, "spot": true, "usd_per_gpu_hour": 0.1}],
 "network": {"inter_node_gb_s": 1, "cloud_gb_s": 0.1}}
JSON
fi
B=${B:-16}
T=${T:-128}
STEPS=${STEPS:-8}
WARMUP=${WARMUP:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
MPIRUN="mpirun --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca plm isolated -x OPENBLAS_NUM_THREADS -x AH_COMM_WAIT"
echo "(load average at the start: $(cut -d' ' -f1-3 /proc/loadavg))"
"$AH" tokenize /usr/share/common-licenses/GPL-3 -o "$WORK/text.bin" >/dev/null

echo "== calibration: autohet profile --model $MODEL --cluster $CLUSTER --micro-batch 1,2,4,8 --seq-len $T"
"$AH" profile --model "$MODEL" --cluster "$CLUSTER" --tp 1,2 --micro-batch 1,2,4,8 --seq-len "$T" \
    --steps 5 --rounds 6 -o "$WORK/profile.json" | sed 's/^/   /'
COMMON=(--model "$MODEL" --cluster "$CLUSTER" --global-batch "$B" --seq-len "$T" --precision fp32 --profile "$WORK/profile.json")
"$AH" plan "${COMMON[@]}" -o "$WORK/planner.json" >"$WORK/plan.txt"
"$AH" plan "${COMMON[@]}" --baseline uniform -o "$WORK/uniform.json" >/dev/null
grep -E "^(iteration|speedup)" "$WORK/plan.txt" | sed 's/^/   /' || true

train() { # name wait n -> median step seconds after the warm-up, with AH_COMM_WAIT=wait
    AH_COMM_WAIT=$2 $MPIRUN -np "$3" "$AH" train --plan "$WORK/$1.json" --data "$WORK/text.bin" \
        --steps $((WARMUP + STEPS)) --quiet --metrics "$WORK/$1.$2.jsonl" 2>"$WORK/$1.err" || { cat "$WORK/$1.err" >&2; exit 1; }
    python3 -c 'import json, statistics, sys; print(statistics.median([json.loads(l)["seconds"] for l in open(sys.argv[1])][int(sys.argv[2]):]))' "$WORK/$1.$2.jsonl" "$WARMUP"
}
shape() { # name -> "tpT mbM n mb: type x devices [layers) ... | ..."
    python3 - "$WORK/$1.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
print(f"tp{plan['tp']} mb{plan['train']['micro_batch']} " + " | ".join(f"{p['micro_batches']} mb: " + " ".join(f"{s['gpu']}x{len(s['devices'])}[{s['layers'][0]},{s['layers'][1]})" for s in p["stages"]) for p in plan["pipelines"]))
PY
}
echo "== measured vs predicted (median of $STEPS steps after $WARMUP warm-up steps; mpirun, OPENBLAS_NUM_THREADS=1)"
printf '   %-8s %5s %12s %12s %8s %12s   %s\n' plan ranks "predicted s" "measured s" error "polling s" shape
declare -A PRED MEAS
NAMES=(planner uniform)
if [ "${SHARD:-0}" = 1 ]; then
    "$AH" evaluate --plan "$WORK/planner.json" --profile "$WORK/profile.json" --shard-optimizer even \
        -o "$WORK/sharded.json" >/dev/null
    NAMES+=(sharded)
fi
read -ra EXTRA_PLANS <<<"${EXTRA:-}"
for i in "${!EXTRA_PLANS[@]}"; do
    dst=$WORK/extra$((i + 1)).json
    [ "${EXTRA_PLANS[$i]}" -ef "$dst" ] || cp "${EXTRA_PLANS[$i]}" "$dst"
    NAMES+=("extra$((i + 1))")
done
for name in "${NAMES[@]}"; do
    n=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len({(x["node"], x["index"]) for p in d["pipelines"] for s in p["stages"] for x in s["devices"]}))' "$WORK/$name.json")
    PRED[$name]=$("$AH" evaluate --plan "$WORK/$name.json" --profile "$WORK/profile.json" --json |
                  python3 -c 'import json, sys; print(json.load(sys.stdin)["iteration_s"])')
    MEAS[$name]=$(train "$name" sleep "$n")
    poll=-
    if [ "${POLL:-0}" = 1 ]; then poll=$(train "$name" poll "$n"); fi
    printf '   %-8s %5s %12.4f %12.4f %+7.1f%% %12s   %s\n' "$name" "$n" "${PRED[$name]}" "${MEAS[$name]}" \
        "$(python3 -c "print(100 * (${MEAS[$name]} - ${PRED[$name]}) / ${PRED[$name]})")" \
        "$(python3 -c "import sys; v = sys.argv[1]; print(v if v == '-' else f'{float(v):.4f}')" "$poll")" "$(shape "$name")"
done
python3 - "${PRED[uniform]}" "${PRED[planner]}" "${MEAS[uniform]}" "${MEAS[planner]}" <<'PY'
import sys
pu, pp, mu, mp = map(float, sys.argv[1:])
print(f"== speedup of the planner's plan over uniform: predicted {pu / pp:.2f}x, measured {mu / mp:.2f}x")
PY
echo "(load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
