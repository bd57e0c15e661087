#!/usr/bin/env bash
# One prepared run on a GPU machine (docs/gpu.md): builds the CUDA backend, runs the GPU tests
# and the GPT-2 benchmark against PyTorch eager, and writes everything to ${OUT:-out/gpu}/:
#   env.txt        nvidia-smi, nvcc, cmake, torch versions
#   build.log      configure + build (Release, -DAH_CUDA=ON, sm_90;75)
#   test_cuda_kernels.log, test_cuda_comm.log, test_cuda_comm_np2.log, ctest.log
#   bench.jsonl    one JSON line per (implementation, model, precision) run
#   summary.txt    pass/fail per stage and the benchmark side by side
# Every stage has its own timeout and the whole run stops starting new stages after
# AH_GPU_BUDGET_S seconds (default 420), so it ends in under 8 minutes. Exit status: 0 when the
# build and the GPU tests pass (benchmark figures never fail the run).
# Usage: bash scripts/gpu-check.sh        (in the repository root; the device tool sets $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
BUILD=${AH_GPU_BUILD_DIR:-build-gpu}
BUDGET=${AH_GPU_BUDGET_S:-420}
JOBS=${AH_JOBS:-$(nproc)}
T0=$(date +%s)
export PATH=/usr/local/cuda/bin:$PATH
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
status=0
summary() { echo "$*" | tee -a "$OUT/summary.txt"; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# stage NAME TIMEOUT CMD...: runs CMD with a timeout into $OUT/NAME.log, records the result.
stage() {
    local name=$1 limit=$2 rc
    shift 2
    if (($(left) < 20)); then
        summary "$name: SKIPPED (time budget spent)"
        return 1
    fi
    ((limit > $(left))) && limit=$(left)
    local t=$(date +%s)
    timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    summary "$name: $([[ $rc == 0 ]] && echo ok || echo "FAILED (exit $rc)") in $(($(date +%s) - t)) s"
    return $rc
}

: >"$OUT/summary.txt"
{
    date -u
    nvidia-smi || echo "nvidia-smi: not available"
    nvcc --version || echo "nvcc: not found"
    cmake --version | head -1
    for py in /usr/bin/python3 python3; do
        "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' \
            2>/dev/null && break
    done
    git log --oneline -1 2>/dev/null
} >"$OUT/env.txt" 2>&1

if ! stage build 300 bash -c "cmake -S . -B '$BUILD' -DCMAKE_BUILD_TYPE=Release -DAH_CUDA=ON \
        -DCMAKE_CUDA_COMPILER=\$(command -v nvcc) && cmake --build '$BUILD' -j $JOBS --target \
        autohet test_cuda_kernels test_cuda_comm bench_gpu_gpt2"; then
    summary "build failed: see build.log"
    exit 1
fi

stage test_cuda_kernels 120 "$BUILD/test_cuda_kernels" || status=1
grep -q '^SKIP' "$OUT/test_cuda_kernels.log" && { summary "test_cuda_kernels SKIPPED: no GPU?"; status=1; }
stage test_cuda_comm 60 "$BUILD/test_cuda_comm" || status=1
stage test_cuda_comm_np2 60 mpirun --oversubscribe --bind-to none -np 2 "$BUILD/test_cuda_comm" ||
    status=1

# Benchmark: GPT-2 124M and 350M, T = 1024, batch 8, autohet vs PyTorch eager, bf16 (and 124M
# fp32 for the precision comparison). Failures are recorded, never fatal.
PY=""
for py in /usr/bin/python3 python3; do
    if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
        PY=$py
        break
    fi
done
: >"$OUT/bench.jsonl"
bench() { # name model-flags...
    local name=$1
    shift
    if stage "bench_$name-autohet" 90 "$BUILD/bench_gpu_gpt2" --steps 10 "$@"; then
        tail -n 1 "$OUT/bench_$name-autohet.log" >>"$OUT/bench.jsonl"
    fi
    if [[ -n $PY ]] && stage "bench_$name-torch" 90 "$PY" bench/bench_gpu_torch.py --steps 10 "$@"; then
        tail -n 1 "$OUT/bench_$name-torch.log" >>"$OUT/bench.jsonl"
    fi
}
[[ -z $PY ]] && summary "torch with CUDA: not found, autohet only"
GPT2_124M=(--layers 12 --d 768 --heads 12 --seq-len 1024 --vocab 50257)
GPT2_350M=(--layers 24 --d 1024 --heads 16 --seq-len 1024 --vocab 50257)
bench 124m-bf16 "${GPT2_124M[@]}" --batch 8 --precision bf16
bench 350m-bf16 "${GPT2_350M[@]}" --batch 8 --precision bf16
bench 124m-fp32 "${GPT2_124M[@]}" --batch 8 --precision fp32 --peak-tflops 67

# Whatever time is left: the whole CTest suite of the GPU build is not run (the CPU suite is CI's
# job); the summary tabulates the benchmark.
summary ""
summary "benchmark (tokens/s, MFU):"
if [[ -s $OUT/bench.jsonl ]]; then
    python3 - "$OUT/bench.jsonl" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    print(f"{r['impl']:13s} {r['layers']:2d}L d{r['d']:<5d} {r['precision']} B{r['batch']} "
          f"T{r['seq_len']}: {r['tokens_per_s']:>9.0f} tok/s  MFU {100 * r['mfu']:5.1f} %  "
          f"step {1000 * r['step_s']:.1f} ms  loss {r['loss']}")
PY
fi
summary "total $(($(date +%s) - T0)) s, status $status"
exit $status
