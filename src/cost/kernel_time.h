/* Kernel time on a GPU type: a matmul's achieved fraction of peak from its shape, memory-bound
 * kernels from the bytes they move, and attention as the kernel the type runs. Pure functions.
 *
 * The curve (docs/cost-model.md, "Kernel time", with every constant's source):
 *   eff(M, N, K, batch) = efficiency x tiles(M, N, batch) x K / (K + AH_GEMM_K_HALF)
 *   tiles = the better of the two large cuBLAS tile shapes (256 x 128 and 128 x 256) of
 *           M N / (tiles x tile area) (tile quantization) x tiles / (waves x sm_count) (wave
 *           quantization: tiles run in waves of one per SM)
 *   gemm seconds = max(2 M N K batch / (peak x eff), (M K + K N + M N) batch x elt / mem_bw)
 * `efficiency` is the type's ceiling: the fraction of peak its largest matmuls reach (a
 * measured maximum for the catalog's A100 and H100; see catalog.c). These functions are for
 * types with a known sm_count (> 0); stage.c prices other types by the flat roofline.
 */
#ifndef AH_COST_KERNEL_TIME_H
#define AH_COST_KERNEL_TIME_H

#include <stdint.h>

#include "spec/cluster.h"

/* K at which the main loop reaches half its rate: the tile's prologue (loading the first
 * K-blocks into shared memory) and epilogue (writing the tile) cost about this much K-loop. */
#define AH_GEMM_K_HALF 64.0

/* Relative rate of the 128 x 128 tile, which cuBLAS picks when the large tiles leave a wave
 * mostly empty: it reuses each loaded element 64 times per K step where 256 x 128 does 85. */
#define AH_GEMM_SMALL_TILE 0.9

/* Achieved fraction of the type's peak for a batch of `batch` (M x K) by (K x N) products. */
double ah_gemm_efficiency(const ah_gpu_type_t *g, double M, double N, double K, double batch);
/* Seconds of that matmul at peak FLOP/s `peak` with elements of `elt` bytes (the larger of the
 * compute time at the curve's efficiency and the time to move A, B and C once). */
double ah_gemm_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                       double K, double batch);
/* A matmul's forward (Y = X W, X: M x K) and backward (dX = dY W^T and dW = X^T dY) seconds. */
double ah_gemm_fwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                           double K);
double ah_gemm_bwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                           double K);
/* Seconds to move `bytes` through device memory once (read or write). */
double ah_mem_seconds(const ah_gpu_type_t *g, double bytes);

/* Attention over b sequences of T tokens, `heads` query heads of width hd, on one rank.
 * Fused (g->attention_unfused false): the runtime's causal FlashAttention-style kernel, whose
 * forward is QK^T and PV over the key tiles at or before each query (half the T x T square) and
 * whose backward recomputes QK^T and does four more products (dV, dP, dQ, dK), all priced
 * on the GEMM curve with K = hd or T/2. Unfused (Megatron-LM before FlashAttention): the full T x
 * T scores and probabilities are written to memory; batched matmuls over the full square, the
 * fused scale-mask-softmax and dropout on the probabilities, each memory-bound pass priced by its
 * bytes. */
double ah_attention_fwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double b,
                                double T, double heads, double hd);
double ah_attention_bwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double b,
                                double T, double heads, double hd);

#endif
