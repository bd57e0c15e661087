/* Which of OpenBLAS's kernels the CPU backend's matmuls run. A DYNAMIC_ARCH OpenBLAS (Debian's)
 * picks them when it loads, from the CPU or from OPENBLAS_CORETYPE, and the choice moves step
 * times a lot: on this project's Zen 5 machine a one-thread 1024^3 sgemm runs at about 105
 * GFLOP/s with the AVX2 "Haswell" kernel and 195 with the AVX-512 ones (bench_sgemm_peak). So a
 * run and a profile say which one they ran with. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels/cpu/blas_kernel.h"

void ah_cpu_blas_describe(char *buf, size_t n) {
    const char *forced = getenv("OPENBLAS_CORETYPE");
    if (forced && *forced)
        snprintf(buf, n, "OpenBLAS %s kernel (OPENBLAS_CORETYPE=%s)", openblas_get_corename(), forced);
    else
        snprintf(buf, n, "OpenBLAS %s kernel (OpenBLAS's own choice for this CPU)", openblas_get_corename());
}
