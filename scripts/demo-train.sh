#!/usr/bin/env bash
# The demos' training story (scripts/demo.sh part 2, scripts/demo-llama.sh): tokenize the GPL-3
# text and train MODEL for real on the built-in emulated heterogeneous cluster cpu-hetero with the
# elastic agent, the spot node slow-1 preempted 6 s in (an event file in the Oobleck trace format):
# the agent saves in the grace period, drops slow-1 and its disk, re-plans on what is left,
# relaunches, restores local-first and prints its summary.
# The agent plans from the roofline of cpu-hetero's nominal rates, which the summary says beside
# its "predicted" figure; the ranks' real speed is this machine's. CALIBRATE=1 measures the two
# emulated types first (`autohet profile`, as bench/bench_hetero.sh does; about a minute on a
# quiet machine, kept in OUT_DIR/profile-MODEL.json and reused) and plans with `--profile`; the
# calibrated plan may leave the slow nodes out (README: the demo's figures), and then slow-1's
# preemption changes nothing.
# Usage: [CALIBRATE=1] bash scripts/demo-train.sh BUILD_DIR OUT_DIR MODEL   (a built autohet in BUILD_DIR)
set -euo pipefail
build=${1:?usage: demo-train.sh BUILD_DIR OUT_DIR MODEL} out=${2:?OUT_DIR} model=${3:?MODEL}
case ${CALIBRATE:-0} in 0 | 1) ;; *) echo "demo-train.sh: CALIBRATE=$CALIBRATE: expected 0 or 1" >&2; exit 2 ;; esac
mkdir -p "$out"
echo "== autohet tokenize: the GPL-3 text, byte-level =="
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || text=README.md
"$build/autohet" tokenize "$text" -o "$out"/gpl3.bin
echo
# Open MPI as root needs these; the agent's mpirun (and profile's, for TP 2) runs every rank here.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
profile=()
if [ "${CALIBRATE:-0}" = 1 ]; then
    saved=$out/profile-$(basename "$model" .json).json
    if [ ! -s "$saved" ]; then
        echo "== calibration: autohet profile of cpu-hetero's emulated types (once; kept in $saved) =="
        # every TP degree and micro-batch the agent's plans can use for a global batch of 8
        "$build/autohet" profile --model "$model" --cluster cpu-hetero --tp 1,2 --micro-batch 1,2,4,8 \
            --seq-len 128 --steps 5 --rounds 3 -o "$saved.tmp" | tail -1
        mv "$saved.tmp" "$saved"
    fi
    profile=(--profile "$saved")
fi
echo "== autohet run: $model on cpu-hetero; the spot node slow-1 is preempted 6 s in =="
# 6 s in: mid-run both on a quiet machine (~0.1 s a step: step ~45-60 of 120) and on a loaded one.
echo "6000,remove,slow-1" >"$out"/preempt.csv
rm -rf "$out"/run
"$build/autohet" run --model "$model" --cluster cpu-hetero --data "$out"/gpl3.bin \
    --global-batch 8 --seq-len 128 --steps 120 --lr 3e-3 --warmup 10 --ckpt-every 10 --grace-s 10 \
    --events "$out"/preempt.csv --work-dir "$out"/run --metrics "$out"/run/metrics.jsonl --quiet "${profile[@]}"
echo
echo "Plans: $out/run/plan-*.json; merged metrics (steps, checkpoint, preempt, replan, recover): $out/run/metrics.jsonl"
