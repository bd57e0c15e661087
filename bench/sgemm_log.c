/* An LD_PRELOAD shim that logs every cblas_sgemm call of a process, one line each, to the file
 * AH_SGEMM_LOG names: "order transA transB M N K lda ldb ldc beta" (CBLAS's enum values), then
 * calls OpenBLAS's own. bench/bench_train_vs_torch.sh runs one training step under it and gives the
 * log to bench_sgemm_calls, which times each call alone: how fast the step's matmuls can be at
 * their own shapes. Built as libsgemm_log.so; never run by CTest, never linked into autohet. */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE,
                         const blasint, const blasint, const blasint, const float, const float *, const blasint,
                         const float *, const blasint, const float, float *, const blasint);

void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta, const enum CBLAS_TRANSPOSE tb,
                 const blasint M, const blasint N, const blasint K, const float alpha, const float *A,
                 const blasint lda, const float *B, const blasint ldb, const float beta, float *C,
                 const blasint ldc) {
    static sgemm_fn real;
    static FILE *out;
    if (!real && !(real = (sgemm_fn)dlsym(RTLD_NEXT, "cblas_sgemm"))) {
        fprintf(stderr, "sgemm_log: no cblas_sgemm after this library (%s)\n", dlerror());
        abort();
    }
    if (!out) {
        const char *path = getenv("AH_SGEMM_LOG");
        out = fopen(path ? path : "/dev/null", "w");
    }
    if (out)
        fprintf(out, "%d %d %d %d %d %d %d %d %d %.9g\n", (int)order, (int)ta, (int)tb, (int)M, (int)N, (int)K,
                (int)lda, (int)ldb, (int)ldc, (double)beta);
    real(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
