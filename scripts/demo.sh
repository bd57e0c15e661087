#!/usr/bin/env bash
# The README's first command: set up, build, and run autohet's whole story.
#  1. Plan LLaMA-2-7B on the built-in mixed cluster mixed-32 (16 A100-80G + 8 H800 + 8 H20 over two
#     zones) against the Megatron-like and Whale-like baselines, and evaluate the written plan.
#  2. Train a small GPT (demo-gpt2) for real on the built-in emulated heterogeneous cluster
#     cpu-hetero (fast-0: 2 fast devices; slow-0, slow-1: 2 spot devices each, 3x slower) with the
#     elastic agent: it plans, launches one MPI rank per device, and when the spot node slow-1 is
#     preempted mid-run (an event file in the Oobleck trace format) it saves in the grace period,
#     drops slow-1 and its disk, re-plans on what is left, relaunches and restores the state
#     local-first; training finishes and the agent prints a summary (plans before and after,
#     recovery time by tier, loss across the restart, no sample lost).
#   AH_BUILD_DIR  build directory (default build);  AH_OUT  output directory (default out)
#   AH_DEMO_BUILD_ONLY=1  set up and build (the Release configuration below), run nothing: CI's
#                 release-build stage (.ci/run), so the configuration CI compiles is this one
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${AH_BUILD_DIR:-build}
out=${AH_OUT:-out}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "${AH_JOBS:-2}" >/dev/null
if [[ ${AH_DEMO_BUILD_ONLY:-} == 1 ]]; then
    echo "demo.sh: the Release build in $build completed"
    exit 0
fi
mkdir -p "$out"
echo "== autohet plan: llama2-7b on the built-in cluster mixed-32 =="
"$build/autohet" plan --model llama2-7b --cluster mixed-32 --global-batch 512 --seq-len 4096 \
    --micro-batch auto -o "$out"/plan.json --svg "$out"/plan.svg --rankfile "$out"/rankfile
echo
echo "== autohet evaluate $out/plan.json =="
"$build/autohet" evaluate --plan "$out"/plan.json
echo
echo "Wrote $out/plan.json, $out/plan.svg (open it in a browser) and $out/rankfile."
echo
bash scripts/demo-train.sh "$build" "$out" demo-gpt2
