#!/usr/bin/env bash
# CI's cuda-emu stage: the CUDA backend run on the CPU emulation of CUDA, cuBLAS and NCCL
# (src/cuda_emu; docs/gpu.md says what that proves and what only a GPU can):
#   1. scripts/gpu-check.sh with AH_GPU_EMU=1 (build-gpu-emu/): the GPU tests (every kernel against
#      the CPU backend; the device communicator on 1 and 2 ranks, NCCL and staged; the ring's buffers
#      in bf16 and fp16 against the memory model, test_cp_ring on 4 ranks, its exchange over NCCL
#      and staged against the CPU ring) and the training
#      checks (14 plans against the CPU, one zero-bubble, one at CP 2, one at CP 2 x PP 2; bf16 curve, LLaMA bf16, CP 2 vs no CP in
#      bf16 and fp16, fp16 with an injected overflow; the overlapped DP sync on the communication
#      stream against the blocking one, plain and sharded; every pipeline plan's transfers over NCCL
#      where its devices are distinct, and pp4's against the forced staged path, the same bits;
#      asynchronous checkpoints, the snapshot copied into pinned memory on a side stream, against
#      --ckpt-sync, and that stream's ordering);
#   2. tests/test_train_joined.sh on that build with AH_BACKEND=cuda (two mpirun jobs joined into
#      one world, the emulated NCCL's communicators made over it), and tests/test_cuda_emu.sh on
#      that build: the emulation's protections (an NCCL call on a
#      non-blocking stream without its events sees stale data among them);
#   3. a ThreadSanitizer build (build-emu-tsan/, -DAH_CUDA_EMU_TSAN=ON): every kernel test again,
#      with no race allowed, and a block sum without its __syncthreads, where TSan must report one.
# Prints "cuda-emu: P passed, F failed" (one per gpu-check stage, protection and TSan check).
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
JOBS=${AH_JOBS:-2}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
passed=0 failed=0
result() { # NAME STATUS
    if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok: $1"; else failed=$((failed + 1)); echo "FAILED: $1"; fi
}

AH_GPU_EMU=1 OUT=$OUT/gpu AH_JOBS=$JOBS AH_GPU_BUDGET_S=${AH_GPU_BUDGET_S:-900} bash scripts/gpu-check.sh
rc=$?
cat "$OUT/gpu/summary.txt"
p=$(grep -cE '^[a-z0-9_-]+: ok in' "$OUT/gpu/summary.txt")
f=$(grep -cE '^[a-z0-9_-]+: FAILED' "$OUT/gpu/summary.txt")
passed=$((passed + p)) failed=$((failed + f))
((rc != 0 && f == 0)) && result "gpu-check.sh (exit $rc)" 1

AH_BACKEND=cuda bash tests/test_train_joined.sh build-gpu-emu . >"$OUT/joined.log" 2>&1
rc=$?
tail -n 3 "$OUT/joined.log"
result "tests/test_train_joined.sh on the CUDA backend (a world of two mpirun jobs, the emulated NCCL over it)" $rc
cmake --build build-gpu-emu -j "$JOBS" --target cuda_emu_checks >/dev/null
bash tests/test_cuda_emu.sh build-gpu-emu | tee "$OUT/protections.log"
line=$(tail -n 1 "$OUT/protections.log")
[[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]] && passed=$((passed + BASH_REMATCH[1])) failed=$((failed + BASH_REMATCH[2])) ||
    result "tests/test_cuda_emu.sh" 1

if cmake -S . -B build-emu-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAH_CUDA_EMU=ON -DAH_CUDA_EMU_TSAN=ON >/dev/null &&
    cmake --build build-emu-tsan -j "$JOBS" --target test_cuda_kernels cuda_emu_checks >"$OUT/tsan-build.log" 2>&1; then
    result "TSan build" 0
    TSAN_OPTIONS="halt_on_error=1" build-emu-tsan/test_cuda_kernels >"$OUT/tsan-kernels.log" 2>&1
    rc=$?
    tail -n 1 "$OUT/tsan-kernels.log"
    grep -q "ThreadSanitizer" "$OUT/tsan-kernels.log" && { grep -A20 -m1 "WARNING: ThreadSanitizer" "$OUT/tsan-kernels.log"; rc=1; }
    result "test_cuda_kernels under ThreadSanitizer, no race" $rc
    build-emu-tsan/cuda_emu_checks race >"$OUT/tsan-race.log" 2>&1
    grep -q "WARNING: ThreadSanitizer: data race" "$OUT/tsan-race.log"
    result "a block sum without its __syncthreads: TSan reports a data race" $?
    build-emu-tsan/cuda_emu_checks barrier >"$OUT/tsan-barrier.log" 2>&1
    rc=$?
    grep -q "ThreadSanitizer" "$OUT/tsan-barrier.log" && rc=1
    result "the same with its __syncthreads: no race" $rc
else
    tail -n 30 "$OUT/tsan-build.log"
    result "TSan build" 1
fi
echo "cuda-emu: $passed passed, $failed failed"
((failed == 0))
