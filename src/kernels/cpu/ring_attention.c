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

/* Runs of consecutive positions: a block's rows by the causal balance are two chunks, each in
 * order. At most MAX_RUNS; more (no such layout here) are taken as one run, never skipped. */
#define MAX_RUNS 4
typedef struct {
    int n, at[MAX_RUNS + 1]; /* run r: rows [at[r], at[r + 1]) */
} runs_t;

static runs_t runs_of(const int *pos, int n) {
    runs_t r = {.n = 1, .at = {0}};
    for (int i = 1; i < n; i++)
        if (pos[i] != pos[i - 1] + 1) {
            if (r.n == MAX_RUNS) return (runs_t){.n = 1, .at = {0, n}};
            r.at[r.n++] = i;
        }
    r.at[r.n] = n;
    return r;
}

/* Whether query run a sees none of key run b: b's first key is after a's last query. Such a pair
 * of a block is skipped whole (about half of them under the causal balance); its scores are never
 * read (every row reads only the keys it may see). */
static bool all_masked(const runs_t *q, int a, const int *q_pos, const runs_t *k, int b, const int *k_pos) {
    return k_pos[k->at[b]] > q_pos[q->at[a + 1] - 1];
}

AH_CPU_CLONES void ah_cpu_ring_attn_fwd_block(float *acc, float *stats, float *scratch, const float *qkv,
                                              const int *q_pos, const float *kv, const int *k_pos, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    const runs_t qr = runs_of(q_pos, Tq), kr = runs_of(k_pos, Tk);
    float *S = scratch;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const float *q = qkv + (size_t)b * Tq * ld + (size_t)h * hd;
            const float *k = kv + (size_t)b * Tk * ldkv + (size_t)kh * hd;
            const float *v = kv + (size_t)b * Tk * ldkv + (size_t)(KVl + kh) * hd;
            float *a = acc + (size_t)b * Tq * Cl + (size_t)h * hd;
            float *st = stats + ((size_t)b * Hl + h) * Tq * 2;
            for (int x = 0; x < qr.n; x++)
                for (int y = 0; y < kr.n; y++) {
                    if (all_masked(&qr, x, q_pos, &kr, y, k_pos)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y];
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, qr.at[x + 1] - i0, kr.at[y + 1] - j0, hd,
                                scale, q + (size_t)i0 * ld, ld, k + (size_t)j0 * ldkv, ldkv, 0.0f,
                                S + (size_t)i0 * Tk + j0, Tk);
                }
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
            for (int x = 0; x < qr.n; x++)
                for (int y = 0; y < kr.n; y++) {
                    if (all_masked(&qr, x, q_pos, &kr, y, k_pos)) continue;
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
                                              const int *q_pos, const float *kv, const int *k_pos, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd) {
    const int ld = (Hl + 2 * KVl) * hd, ldkv = 2 * KVl * hd, Cl = Hl * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    const runs_t qr = runs_of(q_pos, Tq), kr = runs_of(k_pos, Tk);
    float *P = scratch, *dS = scratch + (size_t)Tq * Tk;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++) {
            const int kh = h / g;
            const size_t qo = (size_t)b * Tq * ld + (size_t)h * hd, oo = (size_t)b * Tq * Cl + (size_t)h * hd;
            const size_t ko = (size_t)b * Tk * ldkv + (size_t)kh * hd, vo = ko + (size_t)KVl * hd;
            const float *q = qkv + qo, *dO = dout + oo, *O = out + oo;
            const float *L = lse + ((size_t)b * Hl + h) * Tq;
            for (int x = 0; x < qr.n; x++)
                for (int y = 0; y < kr.n; y++) {
                    if (all_masked(&qr, x, q_pos, &kr, y, k_pos)) continue;
                    const int i0 = qr.at[x], j0 = kr.at[y], m = qr.at[x + 1] - i0, n = kr.at[y + 1] - j0;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, hd, scale, q + (size_t)i0 * ld, ld,
                                kv + ko + (size_t)j0 * ldkv, ldkv, 0.0f, P + (size_t)i0 * Tk + j0, Tk);
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, hd, 1.0f, dO + (size_t)i0 * Cl, Cl,
                                kv + vo + (size_t)j0 * ldkv, ldkv, 0.0f, dS + (size_t)i0 * Tk + j0, Tk);
                }
            for (int i = 0; i < Tq; i++) {
                float *prow = P + (size_t)i * Tk, *drow = dS + (size_t)i * Tk;
                const float D = ah_cpu_dot(dO + (size_t)i * Cl, O + (size_t)i * Cl, hd);
                for (int j = 0; j < Tk; j++) {
                    const bool seen = k_pos[j] <= q_pos[i]; /* a skipped pair's entries are unset */
                    prow[j] = seen ? ah_cpu_expf(prow[j] - L[i]) : 0.0f;
                    drow[j] = seen ? prow[j] * (drow[j] - D) * scale : 0.0f;
                }
            }
            for (int x = 0; x < qr.n; x++)
                for (int y = 0; y < kr.n; y++) {
                    if (all_masked(&qr, x, q_pos, &kr, y, k_pos)) continue;
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

void ah_cp_positions(int *pos, int T, int c, int i) {
    const int chunk = T / (2 * c);
    for (int t = 0; t < chunk; t++) pos[t] = i * chunk + t, pos[chunk + t] = (2 * c - 1 - i) * chunk + t;
}
