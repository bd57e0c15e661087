/* Kernel time on a GPU type (contract and curve: kernel_time.h; sources: docs/cost-model.md,
 * "Kernel time"). */
#include <math.h>

#include "cost/kernel_time.h"

/* Tile and wave quantization of an (M x N) output, `batch` of them, in tm x tn tiles. */
static double tile_wave(const ah_gpu_type_t *g, double M, double N, double batch, double tm,
                        double tn) {
    const double rows = ceil(M / tm), cols = ceil(N / tn), tiles = rows * cols * batch;
    const double tile_eff = M * N / (rows * tm * cols * tn);
    const double waves = ceil(tiles / g->sm_count);
    return tile_eff * tiles / (waves * g->sm_count);
}

double ah_gemm_efficiency(const ah_gpu_type_t *g, double M, double N, double K, double batch) {
    const double large = fmax(tile_wave(g, M, N, batch, 256, 128), tile_wave(g, M, N, batch, 128, 256));
    const double q = fmax(large, AH_GEMM_SMALL_TILE * tile_wave(g, M, N, batch, 128, 128));
    return g->efficiency * q * K / (K + AH_GEMM_K_HALF);
}

double ah_mem_seconds(const ah_gpu_type_t *g, double bytes) { return bytes / (g->mem_bw_gb_s * 1e9); }

/* Compute-bound seconds of the products on the curve (no memory term). */
static double gemm_compute(const ah_gpu_type_t *g, double peak, double M, double N, double K,
                           double batch) {
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0) return 0;
    return 2 * M * N * K * batch / (peak * ah_gemm_efficiency(g, M, N, K, batch));
}

double ah_gemm_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                       double K, double batch) {
    const double bytes = (M * K + K * N + M * N) * batch * elt;
    return fmax(gemm_compute(g, peak, M, N, K, batch), ah_mem_seconds(g, bytes));
}

double ah_gemm_fwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                           double K) {
    return ah_gemm_seconds(g, peak, elt, M, N, K, 1);
}

double ah_gemm_bwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double M, double N,
                           double K) {
    return ah_gemm_seconds(g, peak, elt, M, K, N, 1)    /* dX (M x K) = dY (M x N) W^T */
           + ah_gemm_seconds(g, peak, elt, K, N, M, 1); /* dW (K x N) = X^T dY, over M tokens */
}

/* Bytes of the T x T square of every head of every sequence. */
static double square(double b, double T, double heads) { return b * heads * T * T; }

double ah_attention_fwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double b,
                                double T, double heads, double hd) {
    const double bh = b * heads;
    if (!g->attention_unfused) /* QK^T and PV over the causal half; q, k, v read, out written */
        return gemm_compute(g, peak, T, T / 2, hd, bh) + gemm_compute(g, peak, T, hd, T / 2, bh) +
               ah_mem_seconds(g, 4 * bh * T * hd * elt);
    /* scores (written by the product), softmax (read scores, write probabilities), dropout (read
     * them, write them and a one-byte mask), then P V */
    return ah_gemm_seconds(g, peak, elt, T, T, hd, bh) +
           ah_mem_seconds(g, square(b, T, heads) * (4 * elt + 1)) +
           ah_gemm_seconds(g, peak, elt, T, hd, T, bh);
}

double ah_attention_bwd_seconds(const ah_gpu_type_t *g, double peak, double elt, double b,
                                double T, double heads, double hd) {
    const double bh = b * heads;
    if (!g->attention_unfused) /* S again, dP, and dV, dQ, dK; q, k, v, out, dout read, dq, dk,
                                  dv written */
        return 2 * gemm_compute(g, peak, T, T / 2, hd, bh) + gemm_compute(g, peak, T / 2, hd, T, bh) +
               2 * gemm_compute(g, peak, T, hd, T / 2, bh) + ah_mem_seconds(g, 8 * bh * T * hd * elt);
    /* dP' = dO V^T and dV = P'^T dO; dropout backward (read dP' and the mask, write dP);
     * softmax backward (read P and dP, write dS); dQ = dS K and dK = dS^T Q */
    return ah_gemm_seconds(g, peak, elt, T, T, hd, bh) + ah_gemm_seconds(g, peak, elt, T, hd, T, bh) +
           ah_mem_seconds(g, square(b, T, heads) * (5 * elt + 1)) +
           2 * ah_gemm_seconds(g, peak, elt, T, hd, T, bh);
}
