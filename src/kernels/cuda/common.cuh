// Internal to src/kernels/cuda/: the backend's state, error recording and small device helpers
// shared by the .cu files.
#ifndef AH_KERNELS_CUDA_COMMON_CUH
#define AH_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/kernels_cuda.h"

// Blocks of the fixed-size reductions (sum of squares, loss): each writes one double partial,
// and one more block sums the partials in a fixed order, so results are deterministic.
#define AH_CUDA_REDUCE_BLOCKS 512
#define AH_CUDA_THREADS 256

typedef struct ah_cuda_state {
    int ready;
    int device;
    cublasHandle_t blas;
    double *partials;          // (AH_CUDA_REDUCE_BLOCKS + 1) doubles on the device
    __nv_bfloat16 *bf16_a;     // bf16 copies of matmul operands (grown to the largest seen)
    __nv_bfloat16 *bf16_b;
    size_t bf16_a_n, bf16_b_n;
    // The first failure since the last ah_cuda_check.
    ah_status_t status;
    char msg[512];
} ah_cuda_state_t;

extern ah_cuda_state_t ah_cuda_g;

// Records a failure once (the first one wins); file:line says which call failed.
void ah_cuda_fail(const char *what, const char *detail, const char *file, int line);

#define AH_CUDA_CALL(expr)                                                              \
    do {                                                                                \
        cudaError_t e_ = (expr);                                                        \
        if (e_ != cudaSuccess) ah_cuda_fail(#expr, cudaGetErrorString(e_), __FILE__, __LINE__); \
    } while (0)
#define AH_BLAS_CALL(expr)                                                              \
    do {                                                                                \
        cublasStatus_t s_ = (expr);                                                     \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                \
            ah_cuda_fail(#expr, cublasGetStatusString(s_), __FILE__, __LINE__);         \
    } while (0)
// After a kernel launch: a bad configuration shows up here, a fault at ah_cuda_check.
#define AH_CUDA_LAUNCHED() AH_CUDA_CALL(cudaGetLastError())

static inline unsigned ah_cuda_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b > 65535u * 16u ? 65535u * 16u : (b ? b : 1));
}

__device__ __forceinline__ float ah_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double ah_warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float ah_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum of one double per thread over a block of blockDim.x (a multiple of 32, <= 1024) threads,
// in a fixed order; the result is valid in thread 0.
__device__ __forceinline__ double ah_block_sum_d(double v) {
    __shared__ double warp_part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = ah_warp_sum_d(v);
    __syncthreads(); // warp_part may still be read by a previous call
    if (lane == 0) warp_part[warp] = v;
    __syncthreads();
    double s = 0.0;
    if (threadIdx.x == 0)
        for (int w = 0; w < nw; w++) s += warp_part[w];
    return s;
}

// Sums partials[0, n) written by the reduction blocks into partials[n] and returns it on the
// host (synchronises).
double ah_cuda_finish_reduction(int n);

// Internal entry points shared between files.
void ah_cuda_gemm(int bf16, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);
void ah_cuda_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                        int IC, int OC);
void ah_cuda_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                        const float *w, int N, int IC, int OC);
void ah_cuda_matmul_fwd_bf16(float *out, const float *inp, const float *w, const float *bias,
                             int N, int IC, int OC);
void ah_cuda_matmul_bwd_bf16(float *dinp, float *dw, float *dbias, const float *dout,
                             const float *inp, const float *w, int N, int IC, int OC);
double ah_cuda_head_loss(float *dx, float *dwte, float *logits, const float *x, const float *wte,
                         const int32_t *targets, float scale, int N, int C, int V);
double ah_cuda_head_loss_bf16(float *dx, float *dwte, float *logits, const float *x,
                              const float *wte, const int32_t *targets, float scale, int N, int C,
                              int V);
// Column sums: dbias[c] += sum_n dy[n,c]; with x, mean, rstd also dweight[c] += sum_n dy * xhat.
void ah_cuda_column_sums(float *dbias, float *dweight, const float *dy, const float *x,
                         const float *mean, const float *rstd, int N, int C);

void ah_cuda_zero(float *x, size_t n);
void ah_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps);
void ah_cuda_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C);
void ah_cuda_gelu_fwd(float *out, const float *inp, size_t n);
void ah_cuda_gelu_bwd(float *dinp, const float *dout, const float *inp, size_t n);
void ah_cuda_residual_fwd(float *out, const float *a, const float *b, size_t n);
void ah_cuda_residual_bwd(float *da, float *db, const float *dout, size_t n);
void ah_cuda_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                           int B, int T, int C);
void ah_cuda_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                           int B, int T, int C);
void ah_cuda_attention_fwd(float *out, float *lse, const float *qkv, int B, int T, int Hl,
                           int hd);
void ah_cuda_attention_bwd(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *out, const float *lse, int B, int T, int Hl, int hd);
size_t ah_cuda_attention_state_floats(int B, int T, int Hl, int hd);
size_t ah_cuda_attention_scratch_floats(int B, int T, int Hl, int hd);
void ah_cuda_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                   const ah_adamw_hparams_t *hp, float grad_scale, int64_t t);
double ah_cuda_sum_squares(const float *x, size_t n);

#endif
