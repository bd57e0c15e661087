/* Causal multi-head self-attention with the T x T probabilities materialised (the CPU runtime
 * keeps them for the backward).
 *
 * Per (batch, query head) the work is sgemm on strided views of qkv: a head's q, and the k and v
 * of the key/value head it reads (h / (Hl / KVl), grouped-query attention), are (T, hd) matrices
 * with row stride (Hl + 2*KVl)*hd, and its output is (T, hd) with row stride Hl*hd, so nothing is
 * copied; the query heads of a group add their dK and dV into the same rows in head order.
 * Rows are taken in blocks of ATT_BLOCK queries: block [i0, i1) only attends to keys [0, i1), so
 * the sgemms skip most of the masked upper triangle (about half the FLOPs at large T) while
 * staying large enough to run at sgemm speed; a row of P is written (0 past its diagonal) only up
 * to its block's end i1, the columns both passes read. The backward needs one block's dP rows as
 * scratch. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#define ATT_BLOCK 64

static int min_int(int a, int b) { return a < b ? a : b; }

/* The state kept for the backward: the probabilities, (B, Hl, T, T). */
size_t ah_cpu_attention_state_floats(int B, int T, int Hl, int hd) {
    (void)hd;
    return (size_t)B * (size_t)Hl * (size_t)T * (size_t)T;
}

size_t ah_cpu_attention_scratch_floats(int B, int T, int Hl, int hd) {
    (void)B, (void)Hl, (void)hd;
    return (size_t)min_int(ATT_BLOCK, T) * (size_t)T;
}

AH_CPU_CLONES void ah_cpu_attention_fwd(float *out, float *probs, const float *qkv, int B, int T,
                                        int Hl, int KVl, int hd) {
    const int Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd, group = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const float *row0 = qkv + (size_t)b * T * ld;
            const float *q = row0 + (size_t)h * hd;
            const float *k = row0 + (size_t)(Hl + h / group) * hd;
            const float *v = row0 + (size_t)(Hl + KVl + h / group) * hd;
            float *P = probs + ((size_t)b * Hl + h) * T * T; /* (T, T) */
            float *o = out + (size_t)b * T * Cl + (size_t)h * hd;
            for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                const int i1 = min_int(T, i0 + ATT_BLOCK), m = i1 - i0;
                float *Pb = P + (size_t)i0 * T;
                /* S[i0:i1, 0:i1] = scale * Q[i0:i1] K[0:i1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hd, scale,
                            q + (size_t)i0 * ld, ld, k, ld, 0.0f, Pb, T);
                for (int i = i0; i < i1; i++) {
                    float *row = P + (size_t)i * T;
                    float mx = row[0];
                    for (int j = 1; j <= i; j++) mx = row[j] > mx ? row[j] : mx;
                    for (int j = 0; j <= i; j++) row[j] = ah_cpu_expf(row[j] - mx);
                    const float inv = 1.0f / ah_cpu_sum(row, i + 1);
                    for (int j = 0; j <= i; j++) row[j] *= inv;
                    memset(row + i + 1, 0, (size_t)(i1 - i - 1) * sizeof *row);
                }
                /* O[i0:i1] = P[i0:i1, 0:i1] V[0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, i1, 1.0f, Pb, T, v,
                            ld, 0.0f, o + (size_t)i0 * Cl, Cl);
            }
        }
}

AH_CPU_CLONES void ah_cpu_attention_bwd(float *dqkv, float *scratch, const float *dout,
                                        const float *qkv, const float *out, const float *probs,
                                        int B, int T, int Hl, int KVl, int hd) {
    (void)out; /* the probabilities are all the backward needs */
    const int Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd, group = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    float *dS = scratch; /* (min(ATT_BLOCK, T), T): dP, then dS in place, of one row block */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const size_t row0 = (size_t)b * T * ld;
            const size_t qo = row0 + (size_t)h * hd, ko = row0 + (size_t)(Hl + h / group) * hd,
                         vo = row0 + (size_t)(Hl + KVl + h / group) * hd;
            const float *q = qkv + qo, *k = qkv + ko, *v = qkv + vo;
            float *dq = dqkv + qo, *dk = dqkv + ko, *dv = dqkv + vo;
            const float *P = probs + ((size_t)b * Hl + h) * T * T;
            const float *dO = dout + (size_t)b * T * Cl + (size_t)h * hd;
            for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                const int i1 = min_int(T, i0 + ATT_BLOCK), m = i1 - i0;
                const float *Pb = P + (size_t)i0 * T;
                const float *dOb = dO + (size_t)i0 * Cl;
                /* dP[i0:i1, 0:i1] = dO[i0:i1] V[0:i1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, i1, hd, 1.0f, dOb, Cl, v,
                            ld, 0.0f, dS, T);
                /* dV[0:i1] += P[i0:i1, 0:i1]^T dO[i0:i1] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hd, m, 1.0f, Pb, T, dOb,
                            Cl, 1.0f, dv, ld);
                /* Softmax backward: dS = P * (dP - sum_j P dP) * scale. P is exactly 0 for
                 * j > i, so those entries of dS come out 0 without a branch. */
                for (int r = 0; r < m; r++) {
                    const float *prow = Pb + (size_t)r * T;
                    float *drow = dS + (size_t)r * T;
                    const float dot = ah_cpu_dot(prow, drow, i0 + r + 1);
                    for (int j = 0; j < i1; j++) drow[j] = prow[j] * (drow[j] - dot) * scale;
                }
                /* dQ[i0:i1] += dS K[0:i1] ; dK[0:i1] += dS^T Q[i0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, i1, 1.0f, dS, T, k,
                            ld, 1.0f, dq + (size_t)i0 * ld, ld);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hd, m, 1.0f, dS, T,
                            q + (size_t)i0 * ld, ld, 1.0f, dk, ld);
            }
        }
}
