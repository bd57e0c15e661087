#!/usr/bin/env bash
# The GPT-2 demo's training story (scripts/demo.sh, part 2) with a LLaMA: set up, build, and train
# a small LLaMA-shaped model (examples/models/demo-llama.json, a Hugging Face config: 6 layers,
# d 128, 4 query heads over 2 key/value heads, SwiGLU d_ff 352, RMSNorm, rotary positions, untied
# head, byte vocabulary) for real on the built-in emulated heterogeneous cluster cpu-hetero with
# the elastic agent: it plans (tensor parallelism up to 2, the key/value heads allow no more),
# launches one MPI rank per device, and when the spot node slow-1 is preempted mid-run it saves in
# the grace period, re-plans on what is left, relaunches and restores local-first; training
# finishes and the agent prints its summary (plans before and after, recovery time by tier, loss
# across the restart, no sample lost).
#   AH_BUILD_DIR  build directory (default build);  AH_OUT  output directory (default out-llama)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${AH_BUILD_DIR:-build}
out=${AH_OUT:-out-llama}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 >/dev/null
mkdir -p "$out"
model=examples/models/demo-llama.json
echo "== autohet model: $model =="
"$build/autohet" model --model "$model" --seq-len 128
echo
echo "== autohet tokenize: the GPL-3 text, byte-level =="
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || text=README.md
"$build/autohet" tokenize "$text" -o "$out"/gpl3.bin
echo
echo "== autohet run: $model on cpu-hetero; the spot node slow-1 is preempted 6 s in =="
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 6 s in: mid-run (~0.09 s a step on a quiet machine: step ~60 of 120).
echo "6000,remove,slow-1" >"$out"/preempt.csv
rm -rf "$out"/run
"$build/autohet" run --model "$model" --cluster cpu-hetero --data "$out"/gpl3.bin \
    --global-batch 8 --seq-len 128 --steps 120 --lr 3e-3 --warmup 10 --ckpt-every 10 --grace-s 10 \
    --events "$out"/preempt.csv --work-dir "$out"/run --metrics "$out"/run/metrics.jsonl --quiet
echo
echo "Plans: $out/run/plan-*.json; merged metrics (steps, checkpoint, preempt, replan, recover): $out/run/metrics.jsonl"
