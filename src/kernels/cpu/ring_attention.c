/* Ring attention's pieces on the CPU (contract in ring_attention.h). One query head at a time:
 * the block's scores S = scale q K^T (Tq, Tk) by sgemm, the mask by position, then the online
 * softmax's update of the running maximum and sum per row, the accumulator rescaled by
 * exp(old max - new max) before P V is added. The backward recomputes P = exp(S - lse) from the
 * finished forward's logsumexp (nothing per block is kept), D = rowsum(dO * O), and adds
 * dQ = dS K, dK = dS^T Q, dV = P^T dO with dS = P (dO V^T - D) scale. Every product is taken
 * per pair of runs of consecutive positions (a query run, a key run) and a pair whose keys all
 * come after its queries is skipped: under the causal balance about half of a block. */
#include "kernels/cpu/ring_attention.h"

#include <cblas.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

size_t ah_cpu_ring_attn_scratch_floats(int B, int Tq, int Tk, int Hl, int KVl, int hd) {
    (void)B, (void)Hl, (void)KVl, (void)hd;
    return 2 * (size_t)Tq * (size_t)Tk;
}

void ah_cpu_ring_attn_init(float *acc, float *stats, int B, int Tq, int Hl, int hd) {
    memset(acc, 0, (size_t)B * Tq * Hl * hd * sizeof *acc);
    const size_t rows = (size_t)B * Hl * Tq;
    for (size_t r = 0; r < rows; r++) stats[2 * r] = -INFINITY, stats[2 * r + 1] = 0.0f;
}

/* The largest score of row i among the keys it may see (-inf: none). */
static float masked_max(const float *row, ah_cp_at_t k_at, int Tk, int qp) {
    float mx = -INFINITY;
    for (int j = 0; j < Tk; j++)
        if (ah_cp_pos(k_at, Tk, j) <= qp && row[j] > mx) mx = row[j];
    return mx;
}

/* A block's rows as its two runs of consecutive positions (kernels.h): run r is rows
 * [at[r], at[r + 1]) from position first[r]; an empty run (T = 1) is never visited. */
typedef struct {
    int at[3], first[2];
} runs_t;

static runs_t runs_of(ah_cp_at_t a, int T) { return (runs_t){{0, T / 2, T}, {a.first, a.second}}; }

/* Whether query run x sees none of key run y: y's first key is after x's last query, or either is
 * empty. Such a pair of a block is skipped whole (about half of them under the causal balance);
 * its scores are never read (every row reads only the keys it may see). */
static bool all_masked(const runs_t *q, int x, const runs_t *k, int y) {
    const int nq = q->at[x + 1] - q->at[x], nk = k->at[y + 1] - k->at[y];
    return nq == 0 || nk == 0 || k->first[y] > q->first[x] + nq - 1;
}

AH_CPU_CLONES void ah_cpu_ring_attn_fwd_block(float *acc, float *stats, float *scratch, const float *qkv,
                                              ah_cp_at_t q_at, const float *kv, ah_cp_at_t k_at, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    const runs_t qr = runs_of(q_at, Tq), kr = runs_of(k_at, Tk);
    float *S = scratch;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const float *q = qkv + (size_t)b * Tq * ld + (size_t)h * hd;
            const float *k = kv + (size_t)b * Tk * ldkv + (size_t)kh * hd;
            const float *v = kv + (size_t)b * Tk * ldkv + (size_t)(KVl + kh) * hd;
            float *a = acc + (size_t)b * Tq * Cl + (size_t)h * hd;
            float *st = stats + ((size_t)b * Hl + h) * Tq * 2;
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) {
                    if (all_masked(&qr, x, &kr, y)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y];
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qr.at[x + 1] - i0, kr.at[y + 1] - j0, hd,
                                scale, q + (size_t)i0 * ld, ld, k + (size_t)j0 * ldkv, ldkv, 0.0f,
                                S + (size_t)i0 * Tk + j0, Tk);
                }
            for (int i = 0; i < Tq; i++) {
                float *row = S + (size_t)i * Tk;
                const int qp = ah_cp_pos(q_at, Tq, i);
                const float bm = masked_max(row, k_at, Tk, qp);
                if (bm == -INFINITY) { /* no key of this block is visible: nothing to add */
                    memset(row, 0, (size_t)Tk * sizeof *row);
                    continue;
                }
                const float m_old = st[2 * i], m_new = m_old > bm ? m_old : bm;
                const float alpha = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
                float sum = 0.0f;
                for (int j = 0; j < Tk; j++) {
                    row[j] = ah_cp_pos(k_at, Tk, j) <= qp ? ah_cpu_expf(row[j] - m_new) : 0.0f;
                    sum += row[j];
                }
                st[2 * i] = m_new;
                st[2 * i + 1] = st[2 * i + 1] * alpha + sum;
                float *ar = a + (size_t)i * Cl;
                for (int c = 0; c < hd; c++) ar[c] *= alpha;
            }
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) {
                    if (all_masked(&qr, x, &kr, y)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y];
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, qr.at[x + 1] - i0, hd, kr.at[y + 1] - j0,
                                1.0f, S + (size_t)i0 * Tk + j0, Tk, v + (size_t)j0 * ldkv, ldkv, 1.0f,
                                a + (size_t)i0 * Cl, Cl);
                }
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
                                              ah_cp_at_t q_at, const float *kv, ah_cp_at_t k_at, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    const runs_t qr = runs_of(q_at, Tq), kr = runs_of(k_at, Tk);
    float *P = scratch, *dS = scratch + (size_t)Tq * Tk;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const size_t qo = (size_t)b * Tq * ld + (size_t)h * hd, oo = (size_t)b * Tq * Cl + (size_t)h * hd;
            const size_t ko = (size_t)b * Tk * ldkv + (size_t)kh * hd, vo = ko + (size_t)KVl * hd;
            const float *q = qkv + qo, *dO = dout + oo, *O = out + oo;
            const float *L = lse + ((size_t)b * Hl + h) * Tq;
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) {
                    if (all_masked(&qr, x, &kr, y)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y], m = qr.at[x + 1] - i0, n = kr.at[y + 1] - j0;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, hd, scale, q + (size_t)i0 * ld, ld,
                                kv + ko + (size_t)j0 * ldkv, ldkv, 0.0f, P + (size_t)i0 * Tk + j0, Tk);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, hd, 1.0f, dO + (size_t)i0 * Cl, Cl,
                                kv + vo + (size_t)j0 * ldkv, ldkv, 0.0f, dS + (size_t)i0 * Tk + j0, Tk);
                }
            for (int i = 0; i < Tq; i++) {
                float *prow = P + (size_t)i * Tk, *drow = dS + (size_t)i * Tk;
                const float D = ah_cpu_dot(dO + (size_t)i * Cl, O + (size_t)i * Cl, hd);
                const int qp = ah_cp_pos(q_at, Tq, i);
                for (int j = 0; j < Tk; j++) {
                    const bool seen = ah_cp_pos(k_at, Tk, j) <= qp; /* a skipped pair's entries are unset */
                    prow[j] = seen ? ah_cpu_expf(prow[j] - L[i]) : 0.0f;
                    drow[j] = seen ? prow[j] * (drow[j] - D) * scale : 0.0f;
                }
            }
            for (int x = 0; x < 2; x++)
                for (int y = 0; y < 2; y++) {
                    if (all_masked(&qr, x, &kr, y)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y], m = qr.at[x + 1] - i0, n = kr.at[y + 1] - j0;
                    const float *dSb = dS + (size_t)i0 * Tk + j0, *Pb = P + (size_t)i0 * Tk + j0;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, n, 1.0f, dSb, Tk,
                                kv + ko + (size_t)j0 * ldkv, ldkv, 1.0f, dqkv + qo + (size_t)i0 * ld, ld);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, m, 1.0f, dSb, Tk, q + (size_t)i0 * ld,
                                ld, 1.0f, dkv + ko + (size_t)j0 * ldkv, ldkv);
                    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, hd, m, 1.0f, Pb, Tk, dO + (size_t)i0 * Cl,
                                Cl, 1.0f, dkv + vo + (size_t)j0 * ldkv, ldkv);
                }
        }
}

void ah_cpu_ring_kv_pack(float *kv, const float *qkv, int B, int T, int Hl, int KVl, int hd) {
    const size_t ld = (size_t)(Hl + 2 * KVl) * hd, w = (size_t)2 * KVl * hd;
    for (size_t r = 0; r < (size_t)B * T; r++) memcpy(kv + r * w, qkv + r * ld + (size_t)Hl * hd, w * sizeof *kv);
}

void ah_cpu_ring_kv_add(float *dqkv, const float *dkv, int B, int T, int Hl, int KVl, int hd) {
    const size_t ld = (size_t)(Hl + 2 * KVl) * hd, w = (size_t)2 * KVl * hd;
    for (size_t r = 0; r < (size_t)B * T; r++) {
        float *d = dqkv + r * ld + (size_t)Hl * hd;
        const float *g = dkv + r * w;
        for (size_t k = 0; k < w; k++) d[k] += g[k];
    }
}

void ah_cp_positions(int *pos, int T, int c, int i) {
    const ah_cp_at_t at = ah_cp_at(T, c, i);
    for (int t = 0; t < T / c; t++) pos[t] = ah_cp_pos(at, T / c, t);
}
