/* Ring attention's CPU pieces (kernels/cpu/ring_attention.h) against the existing attention
 * kernel: a sequence split over c CP ranks by the causal load balance (ah_cp_positions), each
 * rank's queries run against every rank's key/value block in ring order (its own first), the
 * output and every gradient (dq from the ranks' dqkv, dk and dv summed into each block's owner's
 * dkv) equal to one process's ah_kernels_t attention within 1e-6 (relative to the tensor's
 * largest entry, at least 1; the online merge rounds differently; dk and dv, sums over every
 * query row of g heads, within 2e-6: 8.1e-7 measured here), plain and grouped-query
 * attention, c = 2 and 4. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/kernels.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static float *fill(size_t n, unsigned seed) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n && x; i++) x[i] = frand(&seed);
    return x;
}

typedef struct {
    int B, T, Hl, KVl, hd, c;
} ring_case_t;

/* rows (B, Tl, w) of full (B, T, w) at positions pos */
static void take_rows(float *dst, const float *full, const int *pos, int B, int T, int Tl, int w) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            memcpy(dst + ((size_t)b * Tl + t) * w, full + ((size_t)b * T + pos[t]) * w, (size_t)w * sizeof *dst);
}

/* The largest difference between the rank's rows and full's at its positions, relative to the
 * largest magnitude among full's entries compared (at least 1). */
static double max_diff_rows(const float *loc, const float *full, const int *pos, int B, int T, int Tl, int w,
                            int off, int ldl, int ldf) {
    double d = 0, big = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int k = 0; k < w; k++) {
                const double f = full[((size_t)b * T + pos[t]) * ldf + off + k];
                const double e = fabs((double)loc[((size_t)b * Tl + t) * ldl + k] - f);
                d = e > d ? e : d;
                big = fabs(f) > big ? fabs(f) : big;
            }
    return d / big;
}

static void run_case(const ah_kernels_t *K, ring_case_t k) {
    const int ld = (k.Hl + 2 * k.KVl) * k.hd, Cl = k.Hl * k.hd, ldkv = 2 * k.KVl * k.hd, Tl = k.T / k.c;
    const size_t nq = (size_t)k.B * k.T * ld, no = (size_t)k.B * k.T * Cl;
    float *qkv = fill(nq, 7u + (unsigned)k.KVl), *dout = fill(no, 11u + (unsigned)k.c);
    float *out = calloc(no, sizeof *out), *dqkv = calloc(nq, sizeof *dqkv);
    float *probs = calloc(K->attention_state_floats(k.B, k.T, k.Hl, k.hd), sizeof *probs);
    float *scr = calloc(K->attention_scratch_floats(k.B, k.T, k.Hl, k.KVl, k.hd), sizeof *scr);
    K->attention_fwd(out, probs, scr, qkv, k.B, k.T, k.Hl, k.KVl, k.hd);
    K->attention_bwd(dqkv, scr, dout, qkv, out, probs, k.B, k.T, k.Hl, k.KVl, k.hd);
    const int c = k.c;
    int *pos = malloc((size_t)c * Tl * sizeof *pos);
    float *lq = malloc((size_t)c * k.B * Tl * ld * sizeof *lq), *lkv = malloc((size_t)c * k.B * Tl * ldkv * sizeof *lkv);
    float *ldo = malloc((size_t)c * k.B * Tl * Cl * sizeof *ldo), *lo = malloc((size_t)c * k.B * Tl * Cl * sizeof *lo);
    float *lse = malloc((size_t)c * k.B * k.Hl * Tl * sizeof *lse), *st = malloc((size_t)k.B * k.Hl * Tl * 2 * sizeof *st);
    float *ldq = calloc((size_t)c * k.B * Tl * ld, sizeof *ldq), *ldkv_ = calloc((size_t)c * k.B * Tl * ldkv, sizeof *ldkv_);
    float *rs = malloc(K->ring_attn_scratch_floats(k.B, Tl, Tl, k.Hl, k.KVl, k.hd) * sizeof *rs);
#define R_(buf, r, w) ((buf) + (size_t)(r) * k.B * Tl * (w))
    for (int r = 0; r < c; r++) {
        ah_cp_positions(pos + r * Tl, k.T, c, r);
        take_rows(R_(lq, r, ld), qkv, pos + r * Tl, k.B, k.T, Tl, ld);
        take_rows(R_(ldo, r, Cl), dout, pos + r * Tl, k.B, k.T, Tl, Cl);
        K->ring_kv_pack(R_(lkv, r, ldkv), R_(lq, r, ld), k.B, Tl, k.Hl, k.KVl, k.hd);
    }
    double dout_max = 0, dq_max = 0, dkv_max = 0;
    for (int r = 0; r < c; r++) {
        K->ring_attn_init(R_(lo, r, Cl), st, k.B, Tl, k.Hl, k.hd);
        for (int s = 0; s < c; s++) {
            const int src = (r - s + c) % c;
            K->ring_attn_fwd_block(R_(lo, r, Cl), st, rs, R_(lq, r, ld), ah_cp_at(k.T, c, r), R_(lkv, src, ldkv),
                                   ah_cp_at(k.T, c, src), k.B, Tl, Tl, k.Hl, k.KVl, k.hd);
        }
        K->ring_attn_finish(R_(lo, r, Cl), lse + (size_t)r * k.B * k.Hl * Tl, R_(lo, r, Cl), st, k.B, Tl, k.Hl, k.hd);
        const double d = max_diff_rows(R_(lo, r, Cl), out, pos + r * Tl, k.B, k.T, Tl, Cl, 0, Cl, Cl);
        dout_max = d > dout_max ? d : dout_max;
    }
    for (int r = 0; r < c; r++)
        for (int s = 0; s < c; s++) {
            const int src = (r - s + c) % c;
            K->ring_attn_bwd_block(R_(ldq, r, ld), R_(ldkv_, src, ldkv), rs, R_(ldo, r, Cl), R_(lq, r, ld),
                                   R_(lo, r, Cl), lse + (size_t)r * k.B * k.Hl * Tl, ah_cp_at(k.T, c, r),
                                   R_(lkv, src, ldkv), ah_cp_at(k.T, c, src), k.B, Tl, Tl, k.Hl, k.KVl, k.hd);
        }
    for (int r = 0; r < c; r++) {
        double d = max_diff_rows(R_(ldq, r, ld), dqkv, pos + r * Tl, k.B, k.T, Tl, Cl, 0, ld, ld);
        dq_max = d > dq_max ? d : dq_max;
        d = max_diff_rows(R_(ldkv_, r, ldkv), dqkv, pos + r * Tl, k.B, k.T, Tl, ldkv, Cl, ldkv, ld);
        dkv_max = d > dkv_max ? d : dkv_max;
    }
#undef R_
    printf("B=%d T=%d Hl=%d KVl=%d hd=%d cp=%d: out %.2e, dq %.2e, dk/dv %.2e\n", k.B, k.T, k.Hl, k.KVl, k.hd, c,
           dout_max, dq_max, dkv_max);
    CHECK(dout_max <= 1e-6 && dq_max <= 1e-6 && dkv_max <= 2e-6, "cp %d, KVl %d: ring attention within 1e-6 of "
          "one process's (dk/dv 2e-6) (out %.2e, dq %.2e, dk/dv %.2e)", c, k.KVl, dout_max, dq_max, dkv_max);
    free(qkv), free(dout), free(out), free(dqkv), free(probs), free(scr), free(pos), free(lq), free(lkv);
    free(ldo), free(lo), free(lse), free(st), free(ldq), free(ldkv_), free(rs);
}

static bool rows_equal(const float *loc, const float *full, const int *pos, int B, int T, int Tl, int w) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            if (memcmp(loc + ((size_t)b * Tl + t) * w, full + ((size_t)b * T + pos[t]) * w, (size_t)w * sizeof *loc))
                return false;
    return true;
}

static void test_positions(const ah_kernels_t *K, int c) {
    const int B = 2, T = 32, Tl = T / c, H = 3, hd = 8, stride = 4 * hd, C = 16, V = 11;
    const ah_rope_t rope = {10000.0f, 8.0f, 1.0f, 4.0f, 16.0f};
    float *x = fill((size_t)B * T * stride, 3u), *full = malloc((size_t)B * T * stride * sizeof *full);
    float *loc = malloc((size_t)B * Tl * stride * sizeof *loc);
    float *wte = fill((size_t)V * C, 4u), *wpe = fill((size_t)T * C, 5u), *dout = fill((size_t)B * T * C, 6u);
    float *emb = malloc((size_t)B * T * C * sizeof *emb), *lemb = malloc((size_t)B * Tl * C * sizeof *lemb);
    float *dwte = calloc((size_t)V * C, sizeof *dwte), *dwpe = calloc((size_t)T * C, sizeof *dwpe);
    float *ldwte = calloc((size_t)V * C, sizeof *ldwte), *ldwpe = calloc((size_t)T * C, sizeof *ldwpe);
    float *ldout = malloc((size_t)B * Tl * C * sizeof *ldout);
    int32_t tokens[2 * 32], ltok[2 * 32];
    int pos[32];
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 7) % V;
    K->embedding_fwd(emb, tokens, wte, wpe, B, T, C, 0, V);
    K->embedding_bwd(dwte, dwpe, dout, tokens, B, T, C, 0, V);
    bool rope_ok = true, emb_ok = true;
    for (int dir = 0; dir < 2; dir++) {
        memcpy(full, x, (size_t)B * T * stride * sizeof *full);
        (dir ? K->rope_bwd : K->rope_fwd)(full, B, T, H, hd, stride, rope);
        for (int r = 0; r < c; r++) {
            ah_cp_positions(pos, T, c, r);
            take_rows(loc, x, pos, B, T, Tl, stride);
            (dir ? K->rope_bwd_at : K->rope_fwd_at)(loc, ah_cp_at(T, c, r), B, Tl, H, hd, stride, rope);
            rope_ok = rope_ok && rows_equal(loc, full, pos, B, T, Tl, stride);
        }
    }
    for (int r = 0; r < c; r++) {
        ah_cp_positions(pos, T, c, r);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < Tl; t++) ltok[b * Tl + t] = tokens[b * T + pos[t]];
        take_rows(ldout, dout, pos, B, T, Tl, C);
        K->embedding_fwd_at(lemb, ltok, wte, wpe, ah_cp_at(T, c, r), B, Tl, C, 0, V);
        emb_ok = emb_ok && rows_equal(lemb, emb, pos, B, T, Tl, C);
        K->embedding_bwd_at(ldwte, ldwpe, ldout, ltok, ah_cp_at(T, c, r), B, Tl, C, 0, V);
    }
    double dte = 0;
    for (int i = 0; i < V * C; i++) dte = fmax(dte, fabs(ldwte[i] - dwte[i]) / fmax(1.0, fabs(dwte[i])));
    CHECK(rope_ok, "cp %d: rotary angles by position equal the one-process rows, forward and backward", c);
    CHECK(emb_ok, "cp %d: the embedding by position equals the one-process rows", c);
    CHECK(memcmp(ldwpe, dwpe, (size_t)T * C * sizeof *dwpe) == 0, "cp %d: the position rows' gradient, bit for bit", c);
    CHECK(dte <= 1e-6, "cp %d: the token table's gradient summed over the ranks within 1e-6 (%.2e)", c, dte);
    free(x), free(full), free(loc), free(wte), free(wpe), free(dout), free(emb), free(lemb);
    free(dwte), free(dwpe), free(ldwte), free(ldwpe), free(ldout);
}

int main(void) {
    const ah_kernels_t *K = ah_kernels_cpu();
    test_positions(K, 2);
    test_positions(K, 4);
    const ring_case_t cases[] = {
        {2, 32, 4, 4, 8, 2}, {2, 32, 4, 4, 8, 4}, {1, 64, 4, 2, 16, 2}, {2, 48, 4, 1, 8, 4}, {1, 16, 2, 2, 8, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(K, cases[i]);
    return ah_test_finish();
}
