// cuBLAS for the CUDA emulation (emu.h): the GEMMs the backend calls, column-major, checked as
// cuBLAS checks its arguments, queued on the handle's stream and computed by OpenBLAS's sgemm.
// 16-bit inputs are widened exactly to fp32 (their products are exact in fp32) and, under
// CUBLAS_TF32_TENSOR_OP_MATH or CUBLAS_COMPUTE_32F_FAST_TF32, fp32 inputs are first rounded to
// TF32 (10 mantissa bits, to nearest even) as tensor cores read them.
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include <vector>

#include "cuda_emu/emu.h"
#include "cuda_emu/include/cublas_v2.h"

struct ah_emu_blas {
    cudaStream_t stream = nullptr;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
};

namespace {

// One argument's check: `ok`, else cuBLAS's legacy message naming it.
bool arg(bool ok, const char *call, int number, const char *name, long long value, const char *rule) {
    if (!ok)
        fprintf(stderr, " ** On entry to %s parameter number %d (%s = %lld) had an illegal value: %s\n",
                call, number, name, value, rule);
    return ok;
}

// The checks cuBLAS makes on a GEMM's shape: the op codes, m, n, k >= 0, and each leading
// dimension at least the rows of its matrix as stored.
bool gemm_args(const char *call, cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
               int n, int k, int lda, int ldb, int ldc, int lda_no, int ldb_no, int ldc_no) {
    char rule[96];
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    bool ok = arg(h != nullptr, call, 1, "handle", 0, "not a handle from cublasCreate");
    ok = ok && arg(ta >= CUBLAS_OP_N && ta <= CUBLAS_OP_C, call, 2, "transa", ta, "not a cublasOperation_t");
    ok = ok && arg(tb >= CUBLAS_OP_N && tb <= CUBLAS_OP_C, call, 3, "transb", tb, "not a cublasOperation_t");
    ok = ok && arg(m >= 0, call, 4, "m", m, "must be >= 0");
    ok = ok && arg(n >= 0, call, 5, "n", n, "must be >= 0");
    ok = ok && arg(k >= 0, call, 6, "k", k, "must be >= 0");
    snprintf(rule, sizeof rule, "must be >= max(1, %s) = %d", ta == CUBLAS_OP_N ? "m" : "k", rows_a > 1 ? rows_a : 1);
    ok = ok && arg(lda >= (rows_a > 1 ? rows_a : 1), call, lda_no, "lda", lda, rule);
    snprintf(rule, sizeof rule, "must be >= max(1, %s) = %d", tb == CUBLAS_OP_N ? "k" : "n", rows_b > 1 ? rows_b : 1);
    ok = ok && arg(ldb >= (rows_b > 1 ? rows_b : 1), call, ldb_no, "ldb", ldb, rule);
    snprintf(rule, sizeof rule, "must be >= max(1, m) = %d", m > 1 ? m : 1);
    ok = ok && arg(ldc >= (m > 1 ? m : 1), call, ldc_no, "ldc", ldc, rule);
    return ok;
}

// Whether a matrix of `cols` columns with leading dimension ld and `rows` rows, of elements of
// `size` bytes at p, lies in one device allocation.
bool on_device(const char *call, const char *name, const void *p, int rows, int cols, int ld, size_t size) {
    if (rows == 0 || cols == 0) return true;
    const size_t bytes = ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * size;
    if (ah_emu::is_device(p, bytes)) return true;
    fprintf(stderr, " ** %s: %s (%p, %zu bytes as given by its shape and leading dimension) is not inside one device allocation\n",
            call, name, p, bytes);
    return false;
}

float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    memcpy(&x, &u, 4);
    return x;
}

size_t elem_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : 2; }

// A column-major (rows x cols, ld) matrix of type t as fp32, every stored element widened.
std::vector<float> widen(const void *p, cudaDataType_t t, int rows, int cols, int ld, bool to_tf32) {
    const size_t n = rows && cols ? (size_t)(cols - 1) * ld + rows : 0;
    std::vector<float> out(n);
    for (size_t i = 0; i < n; i++) {
        float v;
        if (t == CUDA_R_32F) v = ((const float *)p)[i];
        else if (t == CUDA_R_16BF) v = ah_emu_bf16_bits_to_float(((const uint16_t *)p)[i]);
        else v = ah_emu_half_bits_to_float(((const uint16_t *)p)[i]);
        out[i] = to_tf32 ? tf32(v) : v;
    }
    return out;
}

CBLAS_TRANSPOSE op(cublasOperation_t t) { return t == CUBLAS_OP_N ? CblasNoTrans : CblasTrans; }

} // namespace

using namespace ah_emu;

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t *handle) {
    api_lock l;
    int d = 0;
    if (cudaGetDevice(&d) != cudaSuccess) return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new ah_emu_blas;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    api_lock l;
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    drain(handle->stream, false);
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
    if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode < CUBLAS_DEFAULT_MATH || mode > CUBLAS_TF32_TENSOR_OP_MATH) return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
                            const void *B, cudaDataType_t bt, int ldb, const void *beta, void *C,
                            cudaDataType_t ct, int ldc, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    api_lock l;
    const char *call = "cublasGemmEx";
    (void)algo;
    if (!gemm_args(call, h, ta, tb, m, n, k, lda, ldb, ldc, 10, 13, 17)) return CUBLAS_STATUS_INVALID_VALUE;
    if (ct != CUDA_R_32F || at != bt || (at != CUDA_R_32F && at != CUDA_R_16F && at != CUDA_R_16BF) ||
        (compute != CUBLAS_COMPUTE_32F && compute != CUBLAS_COMPUTE_32F_PEDANTIC &&
         compute != CUBLAS_COMPUTE_32F_FAST_TF32)) {
        fprintf(stderr, " ** %s: types A %d, B %d, C %d with compute type %d: the emulation serves equal 32F, 16F "
                "or 16BF inputs with a 32F output and 32F compute\n", call, at, bt, ct, compute);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    const int ra = ta == CUBLAS_OP_N ? m : k, ca = ta == CUBLAS_OP_N ? k : m;
    const int rb = tb == CUBLAS_OP_N ? k : n, cb = tb == CUBLAS_OP_N ? n : k;
    if (!on_device(call, "A", A, ra, ca, lda, elem_size(at)) || !on_device(call, "B", B, rb, cb, ldb, elem_size(bt)) ||
        !on_device(call, "C", C, m, n, ldc, 4))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (sticky() != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    const bool to_tf32 = at == CUDA_R_32F && (compute == CUBLAS_COMPUTE_32F_FAST_TF32 ||
                                             (h->math == CUBLAS_TF32_TENSOR_OP_MATH && compute == CUBLAS_COMPUTE_32F));
    // Alpha and beta are host scalars (the default pointer mode), read now.
    const float al = *(const float *)alpha, be = *(const float *)beta;
    enqueue(h->stream, [=]() {
        // OpenBLAS works on host copies: its worker threads may not touch device memory (only the
        // thread running device work has it open).
        std::vector<float> a = widen(A, at, ra, ca, lda, to_tf32), b = widen(B, bt, rb, cb, ldb, to_tf32);
        std::vector<float> c = widen(C, CUDA_R_32F, m, n, ldc, false);
        if (m && n) {
            cblas_sgemm(CblasColMajor, op(ta), op(tb), m, n, k, al, a.data(), lda, b.data(), ldb, be,
                        c.data(), ldc);
            memcpy(C, c.data(), c.size() * sizeof(float));
        }
        return cudaSuccess;
    });
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                           int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc) {
    api_lock l;
    if (!gemm_args("cublasSgemm", h, ta, tb, m, n, k, lda, ldb, ldc, 9, 11, 14)) return CUBLAS_STATUS_INVALID_VALUE;
    return cublasGemmEx(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, beta, C,
                        CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

} // extern "C"
