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
bash scripts/demo-train.sh "$build" "$out" "$model"
