// Linear layers (the LM head among them) through cuBLAS.
//
// Row-major vs cuBLAS's column-major: a row-major (r, c) matrix is, bit for bit, its transpose
// as a column-major (c, r) matrix with leading dimension c. So a row-major product Y = X W^T is
// computed as the column-major Y^T = W X^T, with W's buffer read transposed: no copies.
//
// bf16 and fp16: both operands are rounded to the 16-bit type into the backend's workspace and
// multiplied with fp32 accumulation and fp32 output (cublasGemmEx, CUBLAS_COMPUTE_32F). fp16
// rounding saturates to inf past 65504 (__float2half_rn): a scaled gradient that overflows shows
// up as a non-finite gradient, which the runtime's loss scaling (runtime/loss_scale.h) detects.
#include "kernels/cuda/common.cuh"

__global__ void to_bf16_kernel(__nv_bfloat16 *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void to_fp16_kernel(__half *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2half_rn(in[i]);
}

// The 16-bit copy (prec AH_CUDA_BF16 or AH_CUDA_FP16) of a column-major operand of `n` elements,
// in workspace slot *buf (grown once to the largest operand seen: the first step allocates,
// later ones do not).
static const void *as_half(int prec, const float *x, size_t n, void **buf, size_t *cap) {
    if (n > *cap) {
        if (*buf) AH_CUDA_CALL(cudaFree(*buf));
        *buf = NULL;
        *cap = 0;
        AH_CUDA_CALL(cudaMalloc(buf, n * 2));
        if (!*buf) return NULL;
        *cap = n;
    }
    const unsigned blocks = ah_cuda_blocks(n, AH_CUDA_THREADS);
    if (prec == AH_CUDA_BF16) AH_LAUNCH(to_bf16_kernel, blocks, AH_CUDA_THREADS, 0, 0)((__nv_bfloat16 *)*buf, x, n);
    else AH_LAUNCH(to_fp16_kernel, blocks, AH_CUDA_THREADS, 0, 0)((__half *)*buf, x, n);
    AH_CUDA_LAUNCHED();
    return *buf;
}

void ah_cuda_gemm(int prec, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    const float one = 1.0f;
    const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (prec == AH_CUDA_FP32) {
        AH_BLAS_CALL(cublasSgemm(ah_cuda_g.blas, oa, ob, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
        return;
    }
    // Column-major A is (ta ? k : m) x (ta ? m : k) with leading dimension lda.
    const size_t na = (size_t)lda * (size_t)(ta ? m : k), nb = (size_t)ldb * (size_t)(tb ? k : n);
    const void *a16 = as_half(prec, A, na, &ah_cuda_g.half_a, &ah_cuda_g.half_a_n);
    const void *b16 = as_half(prec, B, nb, &ah_cuda_g.half_b, &ah_cuda_g.half_b_n);
    if (!a16 || !b16) return; // the failed cudaMalloc is recorded
    const cudaDataType_t t16 = prec == AH_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    AH_BLAS_CALL(cublasGemmEx(ah_cuda_g.blas, oa, ob, m, n, k, &one, a16, t16, lda, b16, t16, ldb,
                              &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

__global__ void fill_rows_kernel(float *out, const float *row, int N, int C) {
    const size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = row[i % C];
}

static void matmul_fwd(int prec, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC) {
    // As the CPU backend: the bias is written first and the product accumulated onto it.
    float beta = 0.0f;
    if (bias) {
        AH_LAUNCH(fill_rows_kernel, ah_cuda_blocks((size_t)N * OC, AH_CUDA_THREADS), AH_CUDA_THREADS, 0, 0)(
            out, bias, N, OC);
        AH_CUDA_LAUNCHED();
        beta = 1.0f;
    }
    // out^T (OC, N) = w (OC, IC) inp^T (IC, N); w's buffer is column-major (IC, OC).
    ah_cuda_gemm(prec, true, false, OC, N, IC, w, IC, inp, IC, beta, out, OC);
}

static void matmul_bwd(int prec, float *dinp, float *dw, float *dbias, const float *dout,
                       const float *inp, const float *w, int N, int IC, int OC) {
    if (dinp) // dinp^T (IC, N) += w^T (IC, OC) dout^T (OC, N)
        ah_cuda_gemm(prec, false, false, IC, N, OC, w, IC, dout, OC, 1.0f, dinp, IC);
    if (dw) // dw^T (IC, OC) += inp^T (IC, N) dout (N, OC)
        ah_cuda_gemm(prec, false, true, IC, OC, N, inp, IC, dout, OC, 1.0f, dw, IC);
    if (dbias) ah_cuda_column_sums(dbias, NULL, dout, NULL, NULL, NULL, N, OC);
}

// The entry points of kernels/kernels.h: a forward and a backward per input precision.
#define MATMUL_ENTRIES(SUFFIX, PREC)                                                                  \
    void ah_cuda_matmul_fwd##SUFFIX(float *out, const float *inp, const float *w, const float *bias, \
                                    int N, int IC, int OC) {                                         \
        matmul_fwd(PREC, out, inp, w, bias, N, IC, OC);                                              \
    }                                                                                                \
    void ah_cuda_matmul_bwd##SUFFIX(float *dinp, float *dw, float *dbias, const float *dout,          \
                                    const float *inp, const float *w, int N, int IC, int OC) {       \
        matmul_bwd(PREC, dinp, dw, dbias, dout, inp, w, N, IC, OC);                                  \
    }
MATMUL_ENTRIES(, AH_CUDA_FP32)
MATMUL_ENTRIES(_bf16, AH_CUDA_BF16)
MATMUL_ENTRIES(_fp16, AH_CUDA_FP16)
