#!/usr/bin/env bash
# The README's first command: set up, build, and run autohet's main job on a built-in example.
# Today: plan LLaMA-2-7B on the built-in mixed cluster (16 A100-80G + 8 H800 + 8 H20 over two
# zones), show the plan against the Megatron-like and Whale-like baselines, and evaluate the
# written plan file with the same cost model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 >/dev/null
mkdir -p out
echo "== autohet plan: llama2-7b on the built-in cluster mixed-32 =="
./build/autohet plan --model llama2-7b --cluster mixed-32 --global-batch 512 --seq-len 4096 \
    --micro-batch auto -o out/plan.json --svg out/plan.svg --rankfile out/rankfile
echo
echo "== autohet evaluate out/plan.json =="
./build/autohet evaluate --plan out/plan.json
echo
echo "Wrote out/plan.json, out/plan.svg (open it in a browser) and out/rankfile."
