/* The CUDA backend, as seen from C: no CUDA header here, so the runtime, the tests and the
 * benchmarks include it from plain C files. Built only with -DAH_CUDA=ON (docs/gpu.md).
 *
 * Tables. ah_kernels_cuda() fills every entry of ah_kernels_t for fp32 with device pointers
 * (cudaMalloc'd, e.g. through ah_cuda_arena_*): cuBLAS for the matmuls, fused kernels for the
 * rest. ah_kernels_cuda_bf16() is the same table except that its matmuls (linear layers and the
 * tied head) round both operands to bf16 and accumulate in fp32 (cublasGemmEx,
 * CUBLAS_COMPUTE_32F); parameters, gradients and AdamW m, v stay fp32, which makes the fp32
 * buffers the master weights. Both return NULL when there is no usable device; ah_cuda_init says
 * why.
 *
 * Attention. The table's attention entries keep the CPU contract's buffer sizes but NOT its
 * content: attention_fwd is a fused flash-style kernel (online softmax, no T x T matrix) and
 * stores only the per-row logsumexp in probs[0, B*Hl*T); attention_bwd recomputes the
 * probabilities from it. The runtime must treat `probs` as opaque state for the backward (it
 * does). ah_cuda_attention_fwd_lse / _bwd_lse are the interface variant the runtime should move
 * to (docs/gpu.md): the state is B*Hl*T floats, and the backward takes the forward's output so
 * it need not recompute it.
 *
 * Errors. Kernels return void, like the table says; the first CUDA or cuBLAS failure is kept
 * and ah_cuda_check reports it (call it once per step, and after setup).
 *
 * Streams: everything runs on the legacy default stream, so a cudaMemcpy by the caller is
 * ordered with the kernels. head_loss and sum_squares return a host double and therefore
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
#include "runtime/mem.h"

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

/* The first error any kernel hit since the last call (then cleared), plus a device
 * synchronisation so asynchronous faults surface here. */
ah_status_t ah_cuda_check(ah_error_t *err);
ah_status_t ah_cuda_synchronize(ah_error_t *err);

/* ---- memory ----
 * Device arenas with the accounting of runtime/mem.h (the same ah_mem_t budget: live bytes,
 * high-water mark, cap with an out-of-memory message naming the tensor), backed by cudaMalloc.
 * An arena initialised with ah_arena_init and filled by ah_cuda_arena_alloc must be released with
 * ah_cuda_arena_free (never ah_arena_free). Allocations are zeroed. */
ah_status_t ah_cuda_arena_alloc(ah_arena_t *a, int64_t bytes, const char *tensor, void **out,
                                ah_error_t *err);
ah_status_t ah_cuda_arena_floats(ah_arena_t *a, int64_t n, const char *tensor, float **out,
                                 ah_error_t *err);
void ah_cuda_arena_free(ah_arena_t *a);
/* What the device itself says is in use (total - free, all processes), for comparing the
 * tracked high-water mark with the truth. */
ah_status_t ah_cuda_device_memory(int64_t *used_bytes, int64_t *total_bytes, ah_error_t *err);

/* Copies between host and device (synchronous). */
ah_status_t ah_cuda_upload(void *dst_dev, const void *src_host, size_t bytes, ah_error_t *err);
ah_status_t ah_cuda_download(void *dst_host, const void *src_dev, size_t bytes, ah_error_t *err);

/* ---- attention, the interface variant (see the file comment) ----
 * fwd: out (B,T,Cl) as the table's; lse (B,Hl,T) = logsumexp_j<=i of the scaled scores.
 * bwd: dqkv += ...; scratch holds ah_cuda_attention_lse_scratch_floats floats; out and lse are
 * the forward's. Any hd up to 128 (GPT-2: 64; LLaMA: 128). */
void ah_cuda_attention_fwd_lse(float *out, float *lse, const float *qkv, int B, int T, int Hl,
                               int hd);
void ah_cuda_attention_bwd_lse(float *dqkv, float *scratch, const float *dout, const float *qkv,
                               const float *out, const float *lse, int B, int T, int Hl, int hd);
size_t ah_cuda_attention_lse_scratch_floats(int B, int T, int Hl, int hd);

#ifdef __cplusplus
}
#endif

#endif
