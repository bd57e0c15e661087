/* Causal multi-head self-attention with the T x T probabilities materialised (the CPU runtime
 * keeps them for the backward).
 *
 * The work is sgemm on strided views of qkv, one key/value head at a time: the g = Hl / KVl
 * query heads that read key/value head kh (heads kh g .. kh g + g - 1, grouped-query attention;
 * g = 1 is plain multi-head) are done together. Rows are taken in blocks of ATT_BLOCK queries:
 * block [i0, i1) only attends to keys [0, i1), so the sgemms skip most of the masked upper
 * triangle (about half the FLOPs at large T) while staying large enough to run at sgemm speed.
 * Within a block the group's rows are stacked query-major, row (i - i0) g + hh for query i of
 * head kh g + hh, so each sgemm is g times taller and reads its K or V once for the group; the
 * probabilities are kept in that order, probs[b, kh, i, hh, j] ((B, Hl, T, T) for g = 1), each
 * row written (0 past its diagonal) only up to its block's end i1, the columns both passes read.
 *
 * A group's q rows for query i lie together in qkv (its g heads are adjacent), but qkv's row
 * stride is (Hl + 2 KVl) hd, not g hd, so for g > 1 the block's q rows are copied into scratch
 * as one (g m, hd) matrix, and the backward's dq rows go through scratch too; out and dout rows
 * (stride Hl hd) are used in place when KVl = 1 (then Hl hd = g hd) and copied otherwise. For
 * g = 1 nothing is copied. The backward also needs one block's dP rows as scratch. */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

#define ATT_BLOCK 64

static int min_int(int a, int b) { return a < b ? a : b; }

/* The state kept for the backward: the probabilities, B Hl T T floats. */
size_t ah_cpu_attention_state_floats(int B, int T, int Hl, int hd) {
    (void)hd;
    return (size_t)B * (size_t)Hl * (size_t)T * (size_t)T;
}

/* The scratch, for a block of gm = g min(ATT_BLOCK, T) stacked rows: the backward's dP (gm, T),
 * then for g > 1 the stacked q (gm, hd), the stacked out or dout (gm, hd; KVl > 1 only) and the
 * stacked dq (gm, hd). */
typedef struct {
    float *dP, *q, *o, *dq;
} att_scratch_t;

/* Carves s from base (NULL: only counts); returns the floats used. */
static size_t carve_scratch(int T, int Hl, int KVl, int hd, att_scratch_t *s, float *base) {
    const int g = Hl / KVl;
    const size_t gm = (size_t)g * (size_t)min_int(ATT_BLOCK, T), dP = gm * (size_t)T,
                 each = g > 1 ? gm * (size_t)hd : 0, o = g > 1 && KVl > 1 ? each : 0;
    *s = (att_scratch_t){0};
    if (base) {
        s->dP = base;
        if (g > 1) s->q = base + dP, s->o = o ? s->q + each : NULL, s->dq = s->q + each + o;
    }
    return dP + 2 * each + o;
}

size_t ah_cpu_attention_scratch_floats(int B, int T, int Hl, int KVl, int hd) {
    (void)B;
    att_scratch_t s;
    return carve_scratch(T, Hl, KVl, hd, &s, NULL);
}

/* Copies m rows of g hd floats from src (row stride lds) to dst (row stride g hd). */
static void gather_rows(float *dst, const float *src, size_t lds, int m, int g, int hd) {
    const size_t w = (size_t)g * hd;
    for (int r = 0; r < m; r++) memcpy(dst + (size_t)r * w, src + (size_t)r * lds, w * sizeof *dst);
}

/* A float's bits as a signed integer that orders as the float does (NaN aside): integer maxima
 * vectorise where a float compare-and-select does not (it may trap). */
static inline int32_t float_order(float x) {
    int32_t i;
    memcpy(&i, &x, sizeof i);
    return i ^ (int32_t)((uint32_t)(i >> 31) >> 1);
}

static inline float order_float(int32_t i) {
    i ^= (int32_t)((uint32_t)(i >> 31) >> 1);
    float x;
    memcpy(&x, &i, sizeof x);
    return x;
}

/* max of x[0, n), n >= 1, in AH_CPU_LANES lanes. */
static inline float row_max(const float *x, int n) {
    const int n_lanes = n - n % AH_CPU_LANES;
    int32_t acc[AH_CPU_LANES];
    for (int k = 0; k < AH_CPU_LANES; k++) acc[k] = INT32_MIN;
    for (int i = 0; i < n_lanes; i += AH_CPU_LANES)
        for (int k = 0; k < AH_CPU_LANES; k++) {
            const int32_t v = float_order(x[i + k]);
            acc[k] = v > acc[k] ? v : acc[k];
        }
    for (int i = n_lanes; i < n; i++) {
        const int32_t v = float_order(x[i]);
        acc[i - n_lanes] = v > acc[i - n_lanes] ? v : acc[i - n_lanes];
    }
    int32_t mx = acc[0];
    for (int k = 1; k < AH_CPU_LANES; k++) mx = acc[k] > mx ? acc[k] : mx;
    return order_float(mx);
}

/* x[j] = exp(x[j] - mx) for j < n, returning their sum (ah_cpu_sum's lanes and order). */
static inline float exp_sum(float *x, int n, float mx) {
    const int n_lanes = n - n % AH_CPU_LANES;
    float acc[AH_CPU_LANES] = {0};
    for (int i = 0; i < n_lanes; i += AH_CPU_LANES)
        for (int k = 0; k < AH_CPU_LANES; k++) acc[k] += (x[i + k] = ah_cpu_expf(x[i + k] - mx));
    for (int i = n_lanes; i < n; i++) acc[i - n_lanes] += (x[i] = ah_cpu_expf(x[i] - mx));
    return ah_cpu_lanes_total(acc);
}

AH_CPU_CLONES void ah_cpu_attention_fwd(float *out, float *probs, float *scratch, const float *qkv,
                                        int B, int T, int Hl, int KVl, int hd) {
    const int Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    att_scratch_t s;
    carve_scratch(T, Hl, KVl, hd, &s, scratch);
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KVl; kh++) {
            const float *row0 = qkv + (size_t)b * T * ld;
            const float *k = row0 + (size_t)(Hl + kh) * hd;
            const float *v = row0 + (size_t)(Hl + KVl + kh) * hd;
            float *P = probs + ((size_t)b * KVl + kh) * g * T * T; /* (T, g, T) */
            for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                const int i1 = min_int(T, i0 + ATT_BLOCK), m = i1 - i0;
                float *Pb = P + (size_t)i0 * g * T;
                /* the block's q rows (g m, hd), and where its out rows go */
                const float *q = row0 + (size_t)i0 * ld + (size_t)kh * g * hd;
                float *o = out + ((size_t)b * T + i0) * Cl + (size_t)kh * g * hd;
                int ldq = ld, ldo = Cl;
                if (g > 1) {
                    gather_rows(s.q, q, (size_t)ld, m, g, hd);
                    q = s.q, ldq = hd, ldo = hd;
                }
                float *os = s.o ? s.o : o;
                /* S[(i, hh), 0:i1] = scale * Q[(i, hh)] K[0:i1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g * m, i1, hd, scale, q, ldq,
                            k, ld, 0.0f, Pb, T);
                for (int r = 0; r < g * m; r++) {
                    const int i = i0 + r / g;
                    float *row = Pb + (size_t)r * T;
                    const float inv = 1.0f / exp_sum(row, i + 1, row_max(row, i + 1));
                    for (int j = 0; j <= i; j++) row[j] *= inv;
                    memset(row + i + 1, 0, (size_t)(i1 - i - 1) * sizeof *row);
                }
                /* O[(i, hh)] = P[(i, hh), 0:i1] V[0:i1] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g * m, hd, i1, 1.0f, Pb, T,
                            v, ld, 0.0f, os, ldo);
                if (s.o)
                    for (int r = 0; r < m; r++)
                        memcpy(o + (size_t)r * Cl, s.o + (size_t)r * g * hd, (size_t)g * hd * sizeof *o);
            }
        }
}

AH_CPU_CLONES void ah_cpu_attention_bwd(float *dqkv, float *scratch, const float *dout,
                                        const float *qkv, const float *out, const float *probs,
                                        int B, int T, int Hl, int KVl, int hd) {
    (void)out; /* the probabilities are all the backward needs */
    const int Cl = Hl * hd, ld = (Hl + 2 * KVl) * hd, g = Hl / KVl;
    const float scale = 1.0f / sqrtf((float)hd);
    att_scratch_t s;
    carve_scratch(T, Hl, KVl, hd, &s, scratch);
    float *dS = s.dP; /* (g m, T): dP, then dS in place, of one row block */
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < KVl; kh++) {
            const size_t row0 = (size_t)b * T * ld;
            const size_t ko = row0 + (size_t)(Hl + kh) * hd, vo = row0 + (size_t)(Hl + KVl + kh) * hd;
            const float *k = qkv + ko, *v = qkv + vo;
            float *dk = dqkv + ko, *dv = dqkv + vo;
            const float *P = probs + ((size_t)b * KVl + kh) * g * T * T;
            for (int i0 = 0; i0 < T; i0 += ATT_BLOCK) {
                const int i1 = min_int(T, i0 + ATT_BLOCK), m = i1 - i0;
                const float *Pb = P + (size_t)i0 * g * T;
                const size_t qo = row0 + (size_t)i0 * ld + (size_t)kh * g * hd;
                const float *q = qkv + qo, *dO = dout + ((size_t)b * T + i0) * Cl + (size_t)kh * g * hd;
                float *dq = dqkv + qo;
                int ldq = ld, ldo = Cl;
                if (g > 1) {
                    gather_rows(s.q, q, (size_t)ld, m, g, hd);
                    q = s.q, ldq = hd, ldo = hd;
                    if (s.o) gather_rows(s.o, dO, (size_t)Cl, m, g, hd), dO = s.o;
                }
                /* dP[(i, hh), 0:i1] = dO[(i, hh)] V[0:i1]^T */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g * m, i1, hd, 1.0f, dO, ldo,
                            v, ld, 0.0f, dS, T);
                /* dV[0:i1] += P[block, 0:i1]^T dO[block] */
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hd, g * m, 1.0f, Pb, T, dO,
                            ldo, 1.0f, dv, ld);
                /* Softmax backward: dS = P * (dP - sum_j P dP) * scale. P is exactly 0 for
                 * j > i, so those entries of dS come out 0 without a branch. */
                for (int r = 0; r < g * m; r++) {
                    const float *prow = Pb + (size_t)r * T;
                    float *drow = dS + (size_t)r * T;
                    const float dot = ah_cpu_dot(prow, drow, i0 + r / g + 1);
                    for (int j = 0; j < i1; j++) drow[j] = prow[j] * (drow[j] - dot) * scale;
                }
                /* dQ[block] += dS K[0:i1] (through scratch for g > 1); dK[0:i1] += dS^T Q[block] */
                if (g == 1) {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, hd, i1, 1.0f, dS, T,
                                k, ld, 1.0f, dq, ld);
                } else {
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g * m, hd, i1, 1.0f, dS,
                                T, k, ld, 0.0f, s.dq, hd);
                    for (int r = 0; r < m; r++) {
                        float *d = dq + (size_t)r * ld;
                        const float *src = s.dq + (size_t)r * g * hd;
                        for (int c = 0; c < g * hd; c++) d[c] += src[c];
                    }
                }
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i1, hd, g * m, 1.0f, dS, T, q,
                            ldq, 1.0f, dk, ld);
            }
        }
}
