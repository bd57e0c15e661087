#!/usr/bin/env bash
# The CUDA emulation's protections (tests/cuda_emu_checks.cu; src/cuda_emu/emu.h): a block sum
# without its __syncthreads gives a wrong sum (and, under ThreadSanitizer, a race: that half runs
# in scripts/cuda-emu-check.sh); a host read of an asynchronous copy before the stream's sync sees
# stale data; a host dereference of a device pointer dies naming the allocation; a cuBLAS call with
# a bad leading dimension fails naming the argument; bad launch configurations give CUDA's errors;
# a diverged full-warp shuffle fails the launch, sticky, naming kernel, block and thread; a kernel
# writing past an allocation dies naming the kernel; an NCCL all-reduce on a non-blocking stream
# without the events that order it after the kernel writing its input and before the legacy
# stream's read of its output (the overlapped DP sync's, comm/nccl.h) sees neither write. Needs a -DAH_CUDA_EMU=ON build ($1); skips
# (77) in any other.
set -uo pipefail
BUILD=$1
BIN=$BUILD/cuda_emu_checks
[ -x "$BIN" ] || { echo "SKIP: $BUILD has no cuda_emu_checks (configure with -DAH_CUDA_EMU=ON)"; exit 77; }
export OPENBLAS_NUM_THREADS=1
fails=0 passes=0
# check NAME WANT_RC NEEDLE: runs the subcommand, wants its exit status and NEEDLE in its output.
check() {
    local out rc
    out=$("$BIN" "$1" 2>&1)
    rc=$?
    if [ "$rc" -eq "$2" ] && grep -qF -- "$3" <<<"$out"; then
        passes=$((passes + 1))
        echo "ok: $1: $(tail -n 1 <<<"$out")"
    else
        fails=$((fails + 1))
        echo "FAIL: $1: exit $rc (want $2), wanted \"$3\" in:"
        echo "$out"
    fi
}
check race 1 "block sum 1 (want 2080)"
check barrier 0 "block sum 2080 (want 2080)"
check stale 1 "read before the synchronisation: 0 (the kernel wrote 42)"
check synced 0 "read after the synchronisation: 42"
check host_read 134 "host code touched device memory"
check bad_ld 0 "On entry to cublasSgemm parameter number 9 (lda = 3) had an illegal value: must be >= max(1, m) = 4"
check config 0 "2048 threads: cudaErrorInvalidConfiguration"
check config 0 "64 KiB of dynamic shared memory: cudaErrorInvalidValue"
check diverged 1 "kernel half_warp_shuffle, block (0,0,0), thread (0,0,0) waits forever in __shfl_xor_sync with mask 0xffffffff: lanes 0x0000ffff arrived"
check diverged 1 "a later cudaMalloc: cudaErrorLaunchFailure"
check past_end 134 "kernel write_past, block (0,0,0), thread (0,0,0) touched byte 4496 of the device allocation of 400 bytes"
AH_CUDA_EMU_NO_PKEYS=1 check host_read 134 "host code touched device memory"
check nccl_unordered 1 "all-reduce without events: reduced 0 (the kernel wrote 42); the legacy stream read 0 before"
check nccl_ordered 0 "all-reduce with events: reduced 42 (the kernel wrote 42); the legacy stream read 42 before"
echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
