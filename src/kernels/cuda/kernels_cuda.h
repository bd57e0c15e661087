/* The CUDA backend, as seen from C: no CUDA header here, so the runtime, the tests and the
 * benchmarks include it from plain C files. Built only with -DAH_CUDA=ON (docs/gpu.md).
 *
 * Tables. ah_kernels_cuda() fills every entry of ah_kernels_t for fp32 with device pointers
 * (from ah_cuda_alloc, e.g. by an arena of the CUDA backend's memory space): cuBLAS for the
 * matmuls, fused kernels for the rest. ah_kernels_cuda_bf16() is the same table except that its
 * matmuls (linear layers, the LM head among them) round both operands to bf16 and accumulate in
 * fp32 (cublasGemmEx, CUBLAS_COMPUTE_32F); parameters, gradients and AdamW m, v stay fp32, which
 * makes the fp32 buffers the master weights. ah_kernels_cuda_fp16() is the same with fp16
 * operands (V100, T4: no bf16 tensor cores); fp16's range ends at 65504, so the runtime scales
 * the loss (runtime/loss_scale.h) and an overflow appears as a non-finite gradient, seen by
 * sum_squares; the scale enters through xent_grad's scale and leaves through adamw's grad_scale.
 * All three return NULL when there is no usable device; ah_cuda_init says why.
 *
 * Attention. attention_fwd is a fused flash-style kernel (online softmax, no T x T matrix); its
 * state for the backward is one logsumexp per query row, attention_state_floats = B*Hl*T, and
 * attention_bwd recomputes the probabilities tile by tile from it and the forward's output.
 *
 * Errors. Kernels return void, like the table says; the first CUDA or cuBLAS failure is kept
 * and ah_cuda_check reports it (call it once per step, and after setup).
 *
 * Streams: everything runs on the legacy default stream, so a cudaMemcpy by the caller is
 * ordered with the kernels. xent_grad and sum_squares return a host double and therefore
 * synchronise.
 */
#ifndef AH_KERNELS_CUDA_KERNELS_CUDA_H
#define AH_KERNELS_CUDA_KERNELS_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* The project's headers are C: the .cu files see them with C linkage too. */
#ifdef __cplusplus
extern "C" {
#endif

#include "core/status.h"
#include "kernels/kernels.h"

/* Selects the current device (`device` >= 0; -1 keeps the current one), creates the cuBLAS
 * handle and the backend's small fixed workspace. Idempotent. AH_ERR_INVALID with the driver's
 * reason when no device is usable. */
ah_status_t ah_cuda_init(int device, ah_error_t *err);
/* Number of visible devices, 0 when none or no driver (never fails). */
int ah_cuda_device_count(void);
/* "NVIDIA H200 (sm_90, 139.8 GiB)" into buf. */
void ah_cuda_device_name(char *buf, size_t len);

const ah_kernels_t *ah_kernels_cuda(void);
const ah_kernels_t *ah_kernels_cuda_bf16(void);
const ah_kernels_t *ah_kernels_cuda_fp16(void);

/* The first error any kernel hit since the last call (then cleared), plus a device
 * synchronisation so asynchronous faults surface here. */
ah_status_t ah_cuda_check(ah_error_t *err);
ah_status_t ah_cuda_synchronize(ah_error_t *err);

/* ---- memory ----
 * The allocator of the CUDA backend's memory space (backend/backend.h), under which a budget of
 * runtime/mem.h tracks device memory as it does the host's. ah_cuda_alloc returns `bytes` zeroed
 * bytes of device memory (cudaMalloc + cudaMemset), or NULL with the reason in `why`, which also
 * says how much the device holds in all; ah_cuda_free takes what it returned, or NULL. */
void *ah_cuda_alloc(size_t bytes, char *why, size_t why_len);
void ah_cuda_free(void *p);
/* What the device itself says is in use (total - free, all processes), for comparing the
 * tracked high-water mark with the truth. */
ah_status_t ah_cuda_device_memory(int64_t *used_bytes, int64_t *total_bytes, ah_error_t *err);

/* Copies between host and device (synchronous). */
ah_status_t ah_cuda_upload(void *dst_dev, const void *src_host, size_t bytes, ah_error_t *err);
ah_status_t ah_cuda_download(void *dst_host, const void *src_dev, size_t bytes, ah_error_t *err);

#ifdef __cplusplus
}
#endif

#endif
