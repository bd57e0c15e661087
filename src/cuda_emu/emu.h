/* The CUDA emulation (-DAH_CUDA_EMU=ON): the CUDA backend's own sources (src/kernels/cuda's .cu files,
 * src/comm/nccl.c) compiled with the host C++ compiler and run on the CPU, so that their logic
 * runs in CI before any GPU is lent. One source for nvcc and for this: the .cu files launch
 * through AH_LAUNCH and declare dynamic shared memory through AH_DYNAMIC_SHARED.
 *
 * What it models, exactly:
 * - Grids and blocks. The threads of a block run concurrently as fibers (one stack each, switched
 *   on one OS thread) with threadIdx/blockIdx/blockDim/gridDim; __syncthreads is a real barrier
 *   (threads that have exited count as arrived, as on Volta and later); a barrier that can never
 *   complete is reported as a fault. The blocks of a launch run one after another, in x, y, z
 *   order, so __shared__ variables are function statics and races between blocks of one launch are
 *   not seen. Under ThreadSanitizer (AH_CUDA_EMU_TSAN) every thread is a TSan fiber and the
 *   barriers and warp exchanges are its only synchronisation, so a missing __syncthreads or
 *   __syncwarp between a write and another thread's read is reported as a data race.
 * - Warps: shuffles (__shfl_sync, _xor, _up, _down with width) and votes (__ballot_sync,
 *   __any_sync, __all_sync) exchange values among the 32 lanes of a warp (linear thread id / 32)
 *   exactly; the mask must name the calling lane, be the same on every lane of the exchange and
 *   name only lanes that have not exited, and a shuffle must read a lane of the mask, else fault.
 * - Launch configuration as CUDA checks it: more than 1024 threads a block, a block dimension
 *   past (1024, 1024, 64), a grid dimension past (2^31-1, 65535, 65535), a zero dimension, or
 *   dynamic shared memory past 48 KiB give cudaErrorInvalidConfiguration / cudaErrorInvalidValue
 *   through cudaGetLastError (not sticky); a fault inside a kernel is sticky
 *   (cudaErrorLaunchFailure from every later call), with the kernel, block and thread on stderr.
 * - Device memory: each cudaMalloc is its own mapping, 256-byte aligned and ending at most 255
 *   bytes before an inaccessible guard page; all device mappings are inaccessible except while
 *   device work runs (kernels, copies, cuBLAS, NCCL), so host code reading or writing a device
 *   pointer dies at once with a message naming the allocation, and so does a kernel running past
 *   an allocation's end (by more than its padding). The device's size is AH_CUDA_EMU_MEMORY_MIB
 *   (default 16384); cudaMalloc past it fails with cudaErrorMemoryAllocation. Pinned memory
 *   (cudaMallocHost) is host memory the emulation tracks.
 * - Streams and events: work is queued and runs lazily, only when the host waits for it
 *   (cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize or a query that finds it,
 *   a blocking cudaMemcpy, an asynchronous copy to pageable memory, which CUDA makes synchronous),
 *   so a host read of a result before its synchronisation sees stale data. Waiting for a stream
 *   (or an event) runs only what its last operation depends on: the stream's earlier work, the
 *   work recorded in the events it waits for (cudaStreamWaitEvent), and CUDA's legacy default
 *   stream rules (the legacy stream and the streams made without cudaStreamNonBlocking wait for
 *   each other's earlier work); the rest stays queued. So a missing cross-stream dependency is
 *   seen: work on a non-blocking stream that does not wait for a kernel's event reads the buffer
 *   as it was before the kernel (cudaDeviceSynchronize and the blocking calls still run all).
 * - cuBLAS (cublasSgemm, cublasGemmEx with fp32, bf16 or fp16 inputs and fp32 compute): column-
 *   major, served by OpenBLAS's sgemm after rounding 16-bit inputs (and fp32 inputs under
 *   CUBLAS_TF32_TENSOR_OP_MATH to TF32); the arguments are checked as cuBLAS checks them, and a bad
 *   one returns CUBLAS_STATUS_INVALID_VALUE and prints "On entry to <call> parameter number <n>
 *   (<name>) had an illegal value" as cuBLAS's legacy logging does.
 * - NCCL (cuda_emu/nccl.cpp): communicators of MPI processes, all-reduce, reduce, broadcast,
 *   all-gather, reduce-scatter, send/recv and group calls, queued on the stream like kernels,
 *   served by MPI with NCCL's in-place rules; two ranks on one emulated device are refused as
 *   NCCL refuses them. An NCCL call is queued like the rest and then run at once with the work it
 *   depends on (above; nccl.cpp says why), so the stale-read protection above does not cover what
 *   an NCCL call has made run, and an NCCL call on a stream that did not wait for the kernels
 *   writing its buffer reduces the buffer as it was before them. AH_CUDA_EMU_DEVICES (default 8) devices are visible per process.
 *
 * What it does not model: speed (nothing here says how fast a GPU is), the real allocator's
 * fragmentation and memory use beyond the bytes asked for, concurrency between streams (an NCCL
 * call blocks its host until its peers reach it, where a GPU's host goes on) and
 * between blocks, warp divergence inside an exchange's lanes (they run as independent threads),
 * the memory model's weaker orderings (atomics are sequentially consistent), fast-math
 * intrinsics' error (__expf is expf), tensor-core accumulation order, NVLink or InfiniBand.
 *
 * Internal to src/cuda_emu: the runtime's pieces that the block scheduler, cuBLAS and NCCL
 * share. */
#ifndef AH_CUDA_EMU_EMU_H
#define AH_CUDA_EMU_EMU_H

#include <functional>

#include "cuda_emu/include/cuda_runtime.h"

namespace ah_emu {

// Runs one launch's grid, block after block; returns false after a fault (already reported).
bool run_grid(const launch_config &cfg, const std::function<void()> &body);

// Device work: the body runs with device memory accessible and returns cudaSuccess or the
// (sticky) error of its failure. Queued on `stream` (NULL: the legacy default stream), in the
// order of the calls, and run when the host waits for it.
void enqueue(cudaStream_t stream, std::function<cudaError_t()> work);
// Runs queued work up to and including the last operation of `stream` (all if `all`); returns
// the sticky error, if any.
cudaError_t drain(cudaStream_t stream, bool all);
// Runs `work` at once with device memory accessible (for the synchronous calls).
void with_device_access(const std::function<void()> &work);
// The API's lock: every entry point of the runtime, cuBLAS and NCCL holds it.
struct api_lock {
    api_lock();
    ~api_lock();
};
// The kernel running now, its block and thread, for a fault's message ("" outside kernels).
void describe_current(char *buf, size_t len);
// Whether [p, p + bytes) lies inside one device allocation.
bool is_device(const void *p, size_t bytes);
// The first sticky error, if any (cudaSuccess otherwise).
cudaError_t sticky();
// Sets the per-thread last error (non-sticky) and returns it.
cudaError_t set_error(cudaError_t e);

} // namespace ah_emu

#endif
