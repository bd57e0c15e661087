/* Linear layers through OpenBLAS sgemm. The weight is stored (OC, IC) like torch's nn.Linear,
 * so the forward multiplies by its transpose; no operand is ever copied or transposed in memory. */
#include <cblas.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

void ah_cpu_matmul_fwd(float *out, const float *inp, const float *w, const float *bias, int N,
                       int IC, int OC) {
    /* Writing the bias into out first and letting sgemm accumulate onto it (beta = 1) saves a
     * second pass over out. */
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, (size_t)OC * sizeof *out);
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, w, IC, beta,
                out, OC);
}

void ah_cpu_matmul_bwd(float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
                       const float *w, int N, int IC, int OC) {
    if (dinp) /* (N, OC) @ (OC, IC) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, w, IC,
                    1.0f, dinp, IC);
    if (dw) /* (OC, N) @ (N, IC) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC,
                    1.0f, dw, IC);
    if (dbias) {
        /* Row by row, so the inner loop over OC vectorises and the sum order is fixed. */
        for (int n = 0; n < N; n++) {
            const float *row = dout + (size_t)n * OC;
            for (int o = 0; o < OC; o++) dbias[o] += row[o];
        }
    }
}
