/* OpenBLAS sgemm peak on this machine: the best GFLOP/s of a square NN cblas_sgemm (default
 * 1024^3) over repeats filling about 0.5 s, then the kernel that ran it, on one line:
 * "154.21 OpenBLAS Cooperlake kernel (OpenBLAS's own choice for this CPU)"; on stderr a warning
 * when that kernel is far below what the CPU's flags allow (kernels/cpu/blas_kernel.h), since the
 * figure is then OpenBLAS's choice, not the machine's. bench/bench_train_vs_torch.sh prints it
 * beside the trainer's achieved GFLOP/s. Set OPENBLAS_NUM_THREADS for the thread count. Never run
 * by CTest.
 * usage: bench_sgemm_peak [n] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/blas_kernel.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 1024;
    if (n < 16 || n > 8192) {
        fprintf(stderr, "usage: bench_sgemm_peak [n], 16 <= n <= 8192\n");
        return 2;
    }
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b);
    float *c = malloc((size_t)n * n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_sgemm_peak: out of memory for %d x %d matrices\n", n, n);
        return 1;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 1000) * 1e-3f - 0.5f;
    double best = 1e30, start = now_s();
    for (int r = 0; r < 3 || now_s() - start < 0.5; r++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
    }
    char kernel[160], advice[512];
    ah_cpu_blas_describe(kernel, sizeof kernel);
    printf("%.2f %s\n", 2.0 * n * (double)n * n / best / 1e9, kernel);
    if (ah_cpu_blas_advice(advice, sizeof advice)) fprintf(stderr, "bench_sgemm_peak: warning: %s\n", advice);
    free(a);
    free(b);
    free(c);
    return 0;
}
