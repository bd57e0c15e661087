/* Ring attention's pieces on the CPU (contract in ring_attention.h). One query head at a time:
 * the block's scores S = scale q K^T (Tq, Tk) by sgemm, the mask by position, then the online
 * softmax's update of the running maximum and sum per row, the accumulator rescaled by
 * exp(old max - new max) before P V is added. The backward recomputes P = exp(S - lse) from the
 * finished forward's logsumexp (nothing per block is kept), D = rowsum(dO * O), and adds
 * dQ = dS K, dK = dS^T Q, dV = P^T dO with dS = P (dO V^T - D) scale. */
#include "kernels/cpu/ring_attention.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

size_t ah_cpu_ring_attn_scratch_floats(int Tq, int Tk) { return 2 * (size_t)Tq * (size_t)Tk; }

void ah_cpu_ring_attn_init(float *acc, float *stats, int B, int Tq, int Hl, int hd) {
    memset(acc, 0, (size_t)B * Tq * Hl * hd * sizeof *acc);
    const size_t rows = (size_t)B * Hl * Tq;
    for (size_t r = 0; r < rows; r++) stats[2 * r] = -INFINITY, stats[2 * r + 1] = 0.0f;
}

/* The largest score of row i among the keys it may see (-inf: none). */
static float masked_max(const float *row, const int *k_pos, int Tk, int q_pos) {
    float mx = -INFINITY;
    for (int j = 0; j < Tk; j++)
        if (k_pos[j] <= q_pos && row[j] > mx) mx = row[j];
    return mx;
}

AH_CPU_CLONES void ah_cpu_ring_attn_fwd_block(float *acc, float *stats, float *scratch, const float *qkv,
                                              const int *q_pos, const float *kv, const int *k_pos, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    float *S = scratch;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const float *q = qkv + (size_t)b * Tq * ld + (size_t)h * hd;
            const float *k = kv + (size_t)b * Tk * ldkv + (size_t)kh * hd;
            const float *v = kv + (size_t)b * Tk * ldkv + (size_t)(KVl + kh) * hd;
            float *a = acc + (size_t)b * Tq * Cl + (size_t)h * hd;
            float *st = stats + ((size_t)b * Hl + h) * Tq * 2;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, hd, scale, q, ld, k, ldkv, 0.0f, S, Tk);
            for (int i = 0; i < Tq; i++) {
                float *row = S + (size_t)i * Tk;
                const float bm = masked_max(row, k_pos, Tk, q_pos[i]);
                if (bm == -INFINITY) { /* no key of this block is visible: nothing to add */
                    memset(row, 0, (size_t)Tk * sizeof *row);
                    continue;
                }
                const float m_old = st[2 * i], m_new = m_old > bm ? m_old : bm;
                const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                float sum = 0.0f;
                for (int j = 0; j < Tk; j++) {
                    row[j] = k_pos[j] <= q_pos[i] ? ah_cpu_expf(row[j] - m_new) : 0.0f;
                    sum += row[j];
                }
                st[2 * i] = m_new;
                st[2 * i + 1] = st[2 * i + 1] * alpha + sum;
                float *ar = a + (size_t)i * Cl;
                for (int c = 0; c < hd; c++) ar[c] *= alpha;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, hd, Tk, 1.0f, S, Tk, v, ldkv, 1.0f, a, Cl);
        }
}

void ah_cpu_ring_attn_finish(float *out, float *lse, const float *acc, const float *stats, int B, int Tq, int Hl,
                             int hd) {
    const int Cl = Hl * hd;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++)
            for (int i = 0; i < Tq; i++) {
                const size_t r = ((size_t)b * Hl + h) * Tq + i;
                const float inv = 1.0f / stats[2 * r + 1];
                const size_t o = ((size_t)b * Tq + i) * Cl + (size_t)h * hd;
                for (int c = 0; c < hd; c++) out[o + c] = acc[o + c] * inv;
                lse[r] = stats[2 * r] + logf(stats[2 * r + 1]);
            }
}

AH_CPU_CLONES void ah_cpu_ring_attn_bwd_block(float *dqkv, float *dkv, float *scratch, const float *dout,
                                              const float *qkv, const float *out, const float *lse,
                                              const int *q_pos, const float *kv, const int *k_pos, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    float *P = scratch, *dS = scratch + (size_t)Tq * Tk;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const size_t qo = (size_t)b * Tq * ld + (size_t)h * hd, oo = (size_t)b * Tq * Cl + (size_t)h * hd;
            const size_t ko = (size_t)b * Tk * ldkv + (size_t)kh * hd, vo = ko + (size_t)KVl * hd;
            const float *q = qkv + qo, *dO = dout + oo, *O = out + oo;
            const float *L = lse + ((size_t)b * Hl + h) * Tq;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, hd, scale, q, ld, kv + ko, ldkv, 0.0f, P,
                        Tk);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Tq, Tk, hd, 1.0f, dO, Cl, kv + vo, ldkv, 0.0f, dS,
                        Tk);
            for (int i = 0; i < Tq; i++) {
                float *prow = P + (size_t)i * Tk, *drow = dS + (size_t)i * Tk;
                const float D = ah_cpu_dot(dO + (size_t)i * Cl, O + (size_t)i * Cl, hd);
                for (int j = 0; j < Tk; j++) {
                    prow[j] = k_pos[j] <= q_pos[i] ? ah_cpu_expf(prow[j] - L[i]) : 0.0f;
                    drow[j] = prow[j] * (drow[j] - D) * scale;
                }
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Tq, hd, Tk, 1.0f, dS, Tk, kv + ko, ldkv, 1.0f,
                        dqkv + qo, ld);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, hd, Tq, 1.0f, dS, Tk, q, ld, 1.0f, dkv + ko,
                        ldkv);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, Tk, hd, Tq, 1.0f, P, Tk, dO, Cl, 1.0f, dkv + vo,
                        ldkv);
        }
}

void ah_cpu_ring_kv_pack(float *kv, const float *qkv, int B, int T, int Hl, int KVl, int hd) {
    const size_t ld = (size_t)(Hl + 2 * KVl) * hd, w = (size_t)2 * KVl * hd;
    for (size_t r = 0; r < (size_t)B * T; r++) memcpy(kv + r * w, qkv + r * ld + (size_t)Hl * hd, w * sizeof *kv);
}

void ah_cp_positions(int *pos, int T, int c, int i) {
    const int chunk = T / (2 * c);
    for (int t = 0; t < chunk; t++) pos[t] = i * chunk + t, pos[chunk + t] = (2 * c - 1 - i) * chunk + t;
}
