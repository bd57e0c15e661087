// Internal to src/kernels/cuda/: the backend's state, error recording and small device helpers
// shared by the .cu files.
#ifndef AH_KERNELS_CUDA_COMMON_CUH
#define AH_KERNELS_CUDA_COMMON_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/kernels_cuda.h"

// Blocks of the fixed-size reductions (sum of squares, loss): each writes one double partial,
// and one more block sums the partials in a fixed order, so results are deterministic.
#define AH_CUDA_REDUCE_BLOCKS 512
#define AH_CUDA_THREADS 256

// Launches and dynamic shared memory: CUDA's syntax under nvcc; with -DAH_CUDA_EMU=ON the same
// names come from the CPU emulation (src/cuda_emu/device.h), which compiles these files as C++.
// AH_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...).
#ifndef AH_CUDA_EMU
#define AH_LAUNCH(kernel, grid, block, shared, stream) kernel<<<grid, block, shared, stream>>>
#define AH_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#endif
// A grid-stride loop over i in [0, n).
#define GRID_STRIDE(i, n)                                                                \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);              \
         i += (size_t)gridDim.x * blockDim.x)
// A 1-D grid of AH_CUDA_THREADS-thread blocks covering n elements (grid-stride loops).
#define AH_LAUNCH_1D(kernel, n) AH_LAUNCH(kernel, ah_cuda_blocks((n), AH_CUDA_THREADS), AH_CUDA_THREADS, 0, 0)

typedef struct ah_cuda_state {
    int ready;
    int device;
    cublasHandle_t blas;
    double *partials;          // (AH_CUDA_REDUCE_BLOCKS + 1) doubles on the device
    void *half_a;              // bf16 or fp16 copies of matmul operands, 2 bytes an element
    void *half_b;              // (grown to the largest seen)
    size_t half_a_n, half_b_n;
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

// kernels.h's ah_cp_pos on the device: row t of T at its position under context parallelism.
__device__ __forceinline__ int ah_cuda_cp_pos(ah_cp_at_t at, int T, int t) {
    return t < T / 2 ? at.first + t : at.second + t - T / 2;
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

// Internal entry points shared between files. The operand precision of a gemm and of the
// tables: ah_precision_t's values (0 fp32, 1 bf16, 2 fp16).
enum { AH_CUDA_FP32 = 0, AH_CUDA_BF16 = 1, AH_CUDA_FP16 = 2 };
void ah_cuda_gemm(int prec, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc);
// The bf16 and fp16 tables' matmuls (linear layers, the LM head among them).
ah_kernel_matmul_fwd_fn ah_cuda_matmul_fwd_bf16;
ah_kernel_matmul_bwd_fn ah_cuda_matmul_bwd_bf16;
ah_kernel_matmul_fwd_fn ah_cuda_matmul_fwd_fp16;
ah_kernel_matmul_bwd_fn ah_cuda_matmul_bwd_fp16;
// Column sums: dbias[c] += sum_n dy[n,c] (dbias may be NULL); with x and rstd also
// dweight[c] += sum_n dy * xhat, xhat = (x - mean) * rstd, or x * rstd when mean is NULL (RMS norm).
void ah_cuda_column_sums(float *dbias, float *dweight, const float *dy, const float *x,
                         const float *mean, const float *rstd, int N, int C);

// ah_cuda_<entry> for every entry of the fp32 table, with its type (kernels/kernels.h).
AH_KERNELS_DECLARE(ah_cuda)

#endif
