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
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build=${AH_BUILD_DIR:-build}
out=${AH_OUT:-out}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j2 >/dev/null
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
echo "== autohet tokenize: the GPL-3 text, byte-level =="
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || text=README.md
"$build/autohet" tokenize "$text" -o "$out"/gpl3.bin
echo
echo "== autohet run: demo-gpt2 on cpu-hetero; the spot node slow-1 is preempted 6 s in =="
# Open MPI as root needs these; the agent's mpirun runs every rank on this machine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# 6 s in: mid-run both on a quiet machine (~0.1 s a step: step ~45 of 120) and on a loaded one.
echo "6000,remove,slow-1" >"$out"/preempt.csv
rm -rf "$out"/run
"$build/autohet" run --model demo-gpt2 --cluster cpu-hetero --data "$out"/gpl3.bin \
    --global-batch 8 --seq-len 128 --steps 120 --lr 3e-3 --warmup 10 --ckpt-every 10 --grace-s 10 \
    --events "$out"/preempt.csv --work-dir "$out"/run --metrics "$out"/run/metrics.jsonl --quiet
echo
echo "Plans: $out/run/plan-*.json; merged metrics (steps, checkpoint, preempt, replan, recover): $out/run/metrics.jsonl"
