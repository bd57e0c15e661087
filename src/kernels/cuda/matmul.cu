// Linear layers (the LM head among them) through cuBLAS.
//
// Row-major vs cuBLAS's column-major: a row-major (r, c) matrix is, bit for bit, its transpose
// as a column-major (c, r) matrix with leading dimension c. So a row-major product Y = X W^T is
// computed as the column-major Y^T = W X^T, with W's buffer read transposed: no copies.
//
// bf16: both operands are rounded to bf16 into the backend's workspace and multiplied with
// fp32 accumulation and fp32 output (cublasGemmEx, CUBLAS_COMPUTE_32F).
#include "kernels/cuda/common.cuh"

__global__ void to_bf16_kernel(__nv_bfloat16 *out, const float *in, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

// The bf16 copy of a column-major operand of `n` elements, in workspace slot *buf (grown once
// to the largest operand seen: the first step allocates, later ones do not).
static const __nv_bfloat16 *as_bf16(const float *x, size_t n, __nv_bfloat16 **buf, size_t *cap) {
    if (n > *cap) {
        if (*buf) AH_CUDA_CALL(cudaFree(*buf));
        *buf = NULL;
        *cap = 0;
        AH_CUDA_CALL(cudaMalloc(buf, n * sizeof **buf));
        if (!*buf) return NULL;
        *cap = n;
    }
    to_bf16_kernel<<<ah_cuda_blocks(n, AH_CUDA_THREADS), AH_CUDA_THREADS>>>(*buf, x, n);
    AH_CUDA_LAUNCHED();
    return *buf;
}

void ah_cuda_gemm(int bf16, bool ta, bool tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
    const float one = 1.0f;
    const cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (!bf16) {
        AH_BLAS_CALL(cublasSgemm(ah_cuda_g.blas, oa, ob, m, n, k, &one, A, lda, B, ldb, &beta, C, ldc));
        return;
    }
    // Column-major A is (ta ? k : m) x (ta ? m : k) with leading dimension lda.
    const size_t na = (size_t)lda * (size_t)(ta ? m : k), nb = (size_t)ldb * (size_t)(tb ? k : n);
    const __nv_bfloat16 *a16 = as_bf16(A, na, &ah_cuda_g.bf16_a, &ah_cuda_g.bf16_a_n);
    const __nv_bfloat16 *b16 = as_bf16(B, nb, &ah_cuda_g.bf16_b, &ah_cuda_g.bf16_b_n);
    if (!a16 || !b16) return; // the failed cudaMalloc is recorded
    AH_BLAS_CALL(cublasGemmEx(ah_cuda_g.blas, oa, ob, m, n, k, &one, a16, CUDA_R_16BF, lda, b16,
                              CUDA_R_16BF, ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
}

__global__ void fill_rows_kernel(float *out, const float *row, int N, int C) {
    const size_t n = (size_t)N * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = row[i % C];
}

static void matmul_fwd(int bf16, float *out, const float *inp, const float *w, const float *bias,
                       int N, int IC, int OC) {
    // As the CPU backend: the bias is written first and the product accumulated onto it.
    float beta = 0.0f;
    if (bias) {
        fill_rows_kernel<<<ah_cuda_blocks((size_t)N * OC, AH_CUDA_THREADS), AH_CUDA_THREADS>>>(
            out, bias, N, OC);
        AH_CUDA_LAUNCHED();
        beta = 1.0f;
    }
    // out^T (OC, N) = w (OC, IC) inp^T (IC, N); w's buffer is column-major (IC, OC).
    ah_cuda_gemm(bf16, true, false, OC, N, IC, w, IC, inp, IC, beta, out, OC);
}

static void matmul_bwd(int bf16, float *dinp, float *dw, float *dbias, const float *dout,
                       const float *inp, const float *w, int N, int IC, int OC) {
    if (dinp) // dinp^T (IC, N) += w^T (IC, OC) dout^T (OC, N)
        ah_cuda_gemm(bf16, false, false, IC, N, OC, w, IC, dout, OC, 1.0f, dinp, IC);
    if (dw) // dw^T (IC, OC) += inp^T (IC, N) dout (N, OC)
        ah_cuda_gemm(bf16, false, true, IC, OC, N, inp, IC, dout, OC, 1.0f, dw, IC);
    if (dbias) ah_cuda_column_sums(dbias, NULL, dout, NULL, NULL, NULL, N, OC);
}

void ah_cuda_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                        int IC, int OC) {
    matmul_fwd(0, out, inp, w, bias, N, IC, OC);
}
void ah_cuda_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                        const float *w, int N, int IC, int OC) {
    matmul_bwd(0, dinp, dw, dbias, dout, inp, w, N, IC, OC);
}
void ah_cuda_matmul_fwd_bf16(float *out, const float *inp, const float *w, const float *bias,
                             int N, int IC, int OC) {
    matmul_fwd(1, out, inp, w, bias, N, IC, OC);
}
void ah_cuda_matmul_bwd_bf16(float *dinp, float *dw, float *dbias, const float *dout,
                             const float *inp, const float *w, int N, int IC, int OC) {
    matmul_bwd(1, dinp, dw, dbias, dout, inp, w, N, IC, OC);
}
