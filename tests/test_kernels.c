/* CPU kernels: every backward against central finite differences of its forward, forwards and
 * backwards against naive double-precision loops, accumulation ("+=") semantics, determinism.
 *
 * With `--torch DIR` it instead compares against PyTorch outputs written by
 * tests/torch/gpt2_ref.py (run by tests/test_kernels_torch.sh): a GPT-2 block, a whole small
 * model with the tied head and cross-entropy, LLaMA's ops in a chain (RMS norm, rotary embedding,
 * grouped-query attention, SwiGLU), and AdamW over 3 steps.
 *
 * Error measure: for a tensor, max_i |got_i - want_i| / max_i |want_i| (relative to the tensor's
 * scale). An elementwise relative error is not usable for gradients, where entries near zero
 * come from cancellation and carry only absolute accuracy. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/kernels.h"
#include "runtime/gpt_block.h"
#include "spec/model.h"

static const ah_kernels_t *K;

/* ---- helpers ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0) - 1.0);
}

static float *rand_buf(size_t n, float scale) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = scale * frand();
    return x;
}

static float *zeros(size_t n) { return calloc(n, sizeof(float)); }

static float *copy_buf(const float *x, size_t n) {
    float *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

static double rel_err_d(const float *got, const double *want, size_t n) {
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)got[i] - want[i]));
        s = fmax(s, fabs(want[i]));
    }
    return s > 0 ? d / s : d;
}

static double rel_err(const float *got, const float *want, size_t n) {
    double d = 0, s = max_abs(want, n);
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)got[i] - (double)want[i]));
    return s > 0 ? d / s : d;
}

#define CHECK_REL(got, want, n, tol, what)                                                       \
    do {                                                                                         \
        double e_ = rel_err((got), (want), (n));                                                 \
        CHECK(e_ <= (tol), "%s: relative error %.3g > %.3g", (what), e_, (double)(tol));         \
    } while (0)
#define CHECK_REL_D(got, want, n, tol, what)                                                     \
    do {                                                                                         \
        double e_ = rel_err_d((got), (want), (n));                                               \
        CHECK(e_ <= (tol), "%s: relative error %.3g > %.3g", (what), e_, (double)(tol));         \
    } while (0)

/* ---- finite differences ----
 * A case exposes its forward as "loss = sum(out * R)" for a fixed random R (in double), so the
 * gradient of the loss w.r.t. an input is what the backward computes for dout = R. */

typedef double (*loss_fn)(void *ctx);

/* Central differences of loss w.r.t. each x[i]; fd (n) receives them. */
static void finite_diff(loss_fn f, void *ctx, float *x, size_t n, float h, double *fd) {
    for (size_t i = 0; i < n; i++) {
        float x0 = x[i];
        x[i] = x0 + h;
        double lp = f(ctx);
        x[i] = x0 - h;
        double lm = f(ctx);
        x[i] = x0;
        /* Divide by the perturbation actually applied, which float rounding may have changed. */
        fd[i] = (lp - lm) / ((double)(x0 + h) - (double)(x0 - h));
    }
}

/* h = 1e-2 on O(1) inputs: truncation error ~h^2 and fp32 rounding of the loss ~1e-7 * |loss| /
 * h are both ~1e-5 relative (the largest seen is ~5e-5, printed at the end); 5e-4 leaves a 10x
 * margin and still catches real mistakes (the self-test in test_matmul shows a 1% error in one
 * entry is caught). */
#define FD_H 1e-2f
#define FD_TOL 5e-4

static double fd_worst; /* the largest finite-difference error seen, reported at the end */

static void check_fd(loss_fn f, void *ctx, float *x, size_t n, const float *analytic,
                     const char *what) {
    double *fd = malloc(n * sizeof *fd);
    finite_diff(f, ctx, x, n, FD_H, fd);
    double e = rel_err_d(analytic, fd, n);
    CHECK(e <= FD_TOL, "%s vs finite differences: relative error %.3g > %g", what, e, FD_TOL);
    fd_worst = fmax(fd_worst, e);
    free(fd);
}

static double dot_out(const float *out, const float *R, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)out[i] * R[i];
    return s;
}

/* ---- matmul ---- */

typedef struct {
    int N, IC, OC;
    float *inp, *w, *bias, *out, *R;
} mm_case_t;

static double mm_loss(void *p) {
    mm_case_t *c = p;
    K->matmul_fwd(c->out, c->inp, c->w, c->bias, c->N, c->IC, c->OC);
    return dot_out(c->out, c->R, (size_t)c->N * c->OC);
}

static void test_matmul(void) {
    const int N = 5, IC = 7, OC = 6;
    mm_case_t c = {N, IC, OC, rand_buf(N * IC, 1), rand_buf(OC * IC, 1), rand_buf(OC, 1),
                   zeros(N * OC), rand_buf(N * OC, 1)};
    /* naive forward in double, with and without bias */
    double want[N * OC], want_nb[N * OC];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0;
            for (int i = 0; i < IC; i++) s += (double)c.inp[n * IC + i] * c.w[o * IC + i];
            want_nb[n * OC + o] = s;
            want[n * OC + o] = s + c.bias[o];
        }
    K->matmul_fwd(c.out, c.inp, c.w, c.bias, N, IC, OC);
    CHECK_REL_D(c.out, want, N * OC, 1e-6, "matmul_fwd");
    K->matmul_fwd(c.out, c.inp, c.w, NULL, N, IC, OC);
    CHECK_REL_D(c.out, want_nb, N * OC, 1e-6, "matmul_fwd without bias");

    /* backward: grads start non-zero to check they accumulate */
    float *dinp = rand_buf(N * IC, 1), *dw = rand_buf(OC * IC, 1), *db = rand_buf(OC, 1);
    float *dinp0 = copy_buf(dinp, N * IC), *dw0 = copy_buf(dw, OC * IC), *db0 = copy_buf(db, OC);
    K->matmul_bwd(dinp, dw, db, c.R, c.inp, c.w, N, IC, OC);
    double wdi[N * IC], wdw[OC * IC], wdb[OC];
    for (int n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            double s = dinp0[n * IC + i];
            for (int o = 0; o < OC; o++) s += (double)c.R[n * OC + o] * c.w[o * IC + i];
            wdi[n * IC + i] = s;
        }
    for (int o = 0; o < OC; o++) {
        for (int i = 0; i < IC; i++) {
            double s = dw0[o * IC + i];
            for (int n = 0; n < N; n++) s += (double)c.R[n * OC + o] * c.inp[n * IC + i];
            wdw[o * IC + i] = s;
        }
        double s = db0[o];
        for (int n = 0; n < N; n++) s += c.R[n * OC + o];
        wdb[o] = s;
    }
    CHECK_REL_D(dinp, wdi, N * IC, 1e-6, "matmul_bwd dinp (accumulated)");
    CHECK_REL_D(dw, wdw, OC * IC, 1e-6, "matmul_bwd dw (accumulated)");
    CHECK_REL_D(db, wdb, OC, 1e-6, "matmul_bwd dbias (accumulated)");

    /* finite differences, from zeroed grads */
    K->zero(dinp, N * IC), K->zero(dw, OC * IC), K->zero(db, OC);
    K->matmul_bwd(dinp, dw, db, c.R, c.inp, c.w, N, IC, OC);
    check_fd(mm_loss, &c, c.inp, N * IC, dinp, "matmul dinp");
    check_fd(mm_loss, &c, c.w, OC * IC, dw, "matmul dw");
    check_fd(mm_loss, &c, c.bias, OC, db, "matmul dbias");

    /* NULL grads are skipped */
    float *dinp2 = zeros(N * IC);
    K->matmul_bwd(dinp2, NULL, NULL, c.R, c.inp, c.w, N, IC, OC);
    CHECK_REL(dinp2, dinp, N * IC, 0, "matmul_bwd with only dinp");
    /* zero-bubble's split backward: B (dinp and dbias), then W (dw alone) = the whole one, bit for bit */
    float *dw2 = zeros(OC * IC), *db2 = zeros(OC);
    K->zero(dinp2, N * IC);
    K->matmul_bwd(dinp2, NULL, db2, c.R, c.inp, c.w, N, IC, OC);
    K->matmul_bwd(NULL, dw2, NULL, c.R, c.inp, c.w, N, IC, OC);
    CHECK_REL(dinp2, dinp, N * IC, 0, "split matmul_bwd: dinp");
    CHECK_REL(db2, db, OC, 0, "split matmul_bwd: dbias");
    CHECK_REL(dw2, dw, OC * IC, 0, "split matmul_bwd: dw");
    free(dw2), free(db2);

    /* Self-test of the finite-difference check: a 1% error in one entry must be caught. */
    dw[3] += 0.01f * (float)max_abs(dw, OC * IC);
    double *fd = malloc(OC * IC * sizeof *fd);
    finite_diff(mm_loss, &c, c.w, OC * IC, FD_H, fd);
    CHECK(rel_err_d(dw, fd, OC * IC) > FD_TOL, "finite-difference check catches a 1%% error");
    free(fd);

    free(c.inp), free(c.w), free(c.bias), free(c.out), free(c.R);
    free(dinp), free(dw), free(db), free(dinp0), free(dw0), free(db0), free(dinp2);
}

/* ---- layernorm ---- */

typedef struct {
    int N, C;
    float *inp, *w, *b, *out, *mean, *rstd, *R;
} ln_case_t;

#define LN_EPS 1e-5f

static double ln_loss(void *p) {
    ln_case_t *c = p;
    K->layernorm_fwd(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C, LN_EPS);
    return dot_out(c->out, c->R, (size_t)c->N * c->C);
}

static void test_layernorm_case(int N, int C) {
    ln_case_t c = {N,           C,          rand_buf(N * C, 2), rand_buf(C, 1), rand_buf(C, 1),
                   zeros(N * C), zeros(N), zeros(N),           rand_buf(N * C, 1)};
    for (int i = 0; i < N * C; i++) c.inp[i] += 3.0f; /* a non-zero mean */
    for (int i = 0; i < C; i++) c.w[i] += 1.5f;
    ln_loss(&c);
    double want[N * C];
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += c.inp[n * C + i];
        m /= C;
        for (int i = 0; i < C; i++) v += (c.inp[n * C + i] - m) * (c.inp[n * C + i] - m);
        v /= C;
        for (int i = 0; i < C; i++)
            want[n * C + i] = (c.inp[n * C + i] - m) / sqrt(v + LN_EPS) * c.w[i] + c.b[i];
        CHECK_NEAR(c.mean[n], m, 1e-6);
        CHECK_NEAR(c.rstd[n], 1 / sqrt(v + LN_EPS), 1e-5);
    }
    CHECK_REL_D(c.out, want, N * C, 1e-6, "layernorm_fwd");

    float *dinp = zeros(N * C), *dw = zeros(C), *db = zeros(C);
    K->layernorm_bwd(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, N, C);
    check_fd(ln_loss, &c, c.inp, N * C, dinp, "layernorm dinp");
    check_fd(ln_loss, &c, c.w, C, dw, "layernorm dweight");
    check_fd(ln_loss, &c, c.b, C, db, "layernorm dbias");

    /* a second call adds the same again */
    float *dinp1 = copy_buf(dinp, N * C), *dw1 = copy_buf(dw, C);
    K->layernorm_bwd(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, N, C);
    for (int i = 0; i < N * C; i++) dinp1[i] *= 2;
    for (int i = 0; i < C; i++) dw1[i] *= 2;
    CHECK_REL(dinp, dinp1, N * C, 1e-6, "layernorm_bwd dinp accumulates");
    CHECK_REL(dw, dw1, C, 1e-6, "layernorm_bwd dweight accumulates");

    free(c.inp), free(c.w), free(c.b), free(c.out), free(c.mean), free(c.rstd), free(c.R);
    free(dinp), free(dw), free(db), free(dinp1), free(dw1);
}

/* The CPU sums a row in 16 lanes (kernels/cpu/cpu.h): C = 9 is all tail, C = 37 two full lane
 * blocks and a tail of 5. */
static void test_layernorm(void) {
    test_layernorm_case(4, 9);
    test_layernorm_case(3, 37);
}

/* ---- GELU ---- */

typedef struct {
    size_t n;
    float *inp, *out, *R;
} gelu_case_t;

static double gelu_loss(void *p) {
    gelu_case_t *c = p;
    K->gelu_fwd(c->out, c->inp, c->n);
    return dot_out(c->out, c->R, c->n);
}

static void test_gelu(void) {
    enum { n = 41 };
    gelu_case_t c = {n, rand_buf(n, 4), zeros(n), rand_buf(n, 1)};
    gelu_loss(&c);
    double want[n];
    for (int i = 0; i < n; i++) {
        double x = c.inp[i];
        want[i] = 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    }
    CHECK_REL_D(c.out, want, n, 1e-6, "gelu_fwd");
    float *dinp = rand_buf(n, 1); /* garbage in the output: the kernel writes, not adds */
    K->gelu_bwd(dinp, c.R, c.inp, n);
    check_fd(gelu_loss, &c, c.inp, n, dinp, "gelu dinp (written)");
    free(c.inp), free(c.out), free(c.R), free(dinp);
}

/* ---- RMS norm ---- */

typedef struct {
    int N, C;
    float *inp, *w, *out, *rstd, *R;
} rms_case_t;

static double rms_loss(void *p) {
    rms_case_t *c = p;
    K->rmsnorm_fwd(c->out, c->rstd, c->inp, c->w, c->N, c->C, LN_EPS);
    return dot_out(c->out, c->R, (size_t)c->N * c->C);
}

static void test_rmsnorm_case(int N, int C) {
    rms_case_t c = {N, C, rand_buf(N * C, 2), rand_buf(C, 1), zeros(N * C), zeros(N),
                    rand_buf(N * C, 1)};
    for (int i = 0; i < C; i++) c.w[i] += 1.5f;
    rms_loss(&c);
    double *want = malloc((size_t)N * C * sizeof *want);
    for (int n = 0; n < N; n++) {
        double ms = 0;
        for (int i = 0; i < C; i++) ms += (double)c.inp[n * C + i] * c.inp[n * C + i];
        const double r = 1 / sqrt(ms / C + LN_EPS);
        for (int i = 0; i < C; i++) want[n * C + i] = c.inp[n * C + i] * r * c.w[i];
        CHECK_NEAR(c.rstd[n], r, 1e-6);
    }
    CHECK_REL_D(c.out, want, (size_t)N * C, 1e-6, "rmsnorm_fwd");

    float *dinp = zeros(N * C), *dw = zeros(C);
    K->rmsnorm_bwd(dinp, dw, c.R, c.inp, c.w, c.rstd, N, C);
    check_fd(rms_loss, &c, c.inp, N * C, dinp, "rmsnorm dinp");
    check_fd(rms_loss, &c, c.w, C, dw, "rmsnorm dweight");

    /* a second call adds the same again; without dinp only dweight moves */
    float *dinp1 = copy_buf(dinp, N * C), *dw1 = copy_buf(dw, C);
    K->rmsnorm_bwd(dinp, dw, c.R, c.inp, c.w, c.rstd, N, C);
    for (int i = 0; i < N * C; i++) dinp1[i] *= 2;
    for (int i = 0; i < C; i++) dw1[i] *= 2;
    CHECK_REL(dinp, dinp1, N * C, 1e-6, "rmsnorm_bwd dinp accumulates");
    CHECK_REL(dw, dw1, C, 1e-6, "rmsnorm_bwd dweight accumulates");
    K->rmsnorm_bwd(NULL, dw, c.R, c.inp, c.w, c.rstd, N, C);
    for (int i = 0; i < C; i++) dw1[i] *= 1.5f;
    CHECK_REL(dw, dw1, C, 1e-6, "rmsnorm_bwd with dinp NULL still adds dweight");

    free(c.inp), free(c.w), free(c.out), free(c.rstd), free(c.R), free(want);
    free(dinp), free(dw), free(dinp1), free(dw1);
}

static void test_rmsnorm(void) {
    test_rmsnorm_case(4, 9);
    test_rmsnorm_case(3, 37);
}

/* ---- rotary position embedding ---- */

typedef struct {
    int B, T, n_heads, hd, stride;
    ah_rope_t rope;
    const float *x;
    float *out, *R;
} rope_case_t;

static double rope_loss(void *p) {
    rope_case_t *c = p;
    const size_t n = (size_t)c->B * c->T * c->stride;
    memcpy(c->out, c->x, n * sizeof *c->out);
    K->rope_fwd(c->out, c->B, c->T, c->n_heads, c->hd, c->stride, c->rope);
    return dot_out(c->out, c->R, n);
}

/* inv_freq of pair i as transformers forms it in fp32 (modeling_rope_utils.py: the default
 * parameters, then _compute_llama3_parameters when r.factor > 0), written from that code, not
 * from kernels/rope_freq.h; a Python number over a tensor is torch's reciprocal-then-multiply. */
static float hf_inv_freq(ah_rope_t r, int i, int hd) {
    const float inv_freq = 1.0f / powf(r.theta, (float)(2 * i) / (float)hd);
    if (r.factor == 0) return inv_freq;
    const float wavelen = (1.0f / inv_freq) * (float)(2 * 3.14159265358979323846);
    const float low_freq_wavelen = r.original_max_pos / r.low_freq_factor;
    const float high_freq_wavelen = r.original_max_pos / r.high_freq_factor;
    const float llama = wavelen > low_freq_wavelen ? inv_freq / r.factor : inv_freq;
    const float smooth =
        ((1.0f / wavelen) * r.original_max_pos - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    const float smoothed = (1 - smooth) * llama / r.factor + smooth * llama;
    return !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen) ? smoothed : llama;
}

/* B = 2, T = 5 positions; rows of `stride` floats of which n_heads * hd rotate. */
static void test_rope_case(int n_heads, int hd, int stride, ah_rope_t rope) {
    const int B = 2, T = 5, half = hd / 2;
    const size_t n = (size_t)B * T * stride;
    float *x = rand_buf(n, 1);
    rope_case_t c = {B, T, n_heads, hd, stride, rope, x, zeros(n), rand_buf(n, 1)};
    rope_loss(&c);
    /* the definition, with the angle rounded as the contract says */
    double *want = malloc(n * sizeof *want);
    for (size_t r = 0; r < (size_t)B * T; r++) {
        const int t = (int)(r % T);
        for (int e = 0; e < stride; e++) want[r * stride + e] = x[r * stride + e];
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < half; i++) {
                const double a = (double)((float)t * hf_inv_freq(rope, i, hd));
                const size_t o = r * stride + (size_t)h * hd + i;
                want[o] = x[o] * cos(a) - x[o + half] * sin(a);
                want[o + half] = x[o + half] * cos(a) + x[o] * sin(a);
            }
    }
    CHECK_REL_D(c.out, want, n, 1e-6, "rope_fwd");
    int untouched = 1;
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int e = n_heads * hd; e < stride; e++)
            untouched &= c.out[r * stride + e] == x[r * stride + e];
    CHECK(untouched, "rope_fwd leaves the rest of each row alone");

    /* the backward is the transposed rotation: of the forward's output it gives x back, and of R
     * the gradient of sum(rope(x) * R) */
    K->rope_bwd(c.out, B, T, n_heads, hd, stride, rope);
    CHECK_REL(c.out, x, n, 1e-6, "rope_bwd(rope_fwd(x)) = x");
    float *dx = copy_buf(c.R, n);
    K->rope_bwd(dx, B, T, n_heads, hd, stride, rope);
    check_fd(rope_loss, &c, x, n, dx, "rope dx");
    free(x), free(c.out), free(c.R), free(want), free(dx);
}

static void test_rope(void) {
    test_rope_case(3, 8, 3 * 8, (ah_rope_t){.theta = 10000.0f});
    /* the q and k heads of a GQA qkv row (Hl = 2, KVl = 1): the v head stays */
    test_rope_case(3, 4, 4 * 4, (ah_rope_t){.theta = 500000.0f});
    /* LLaMA 3.1's scaling, all three regions: at hd 16 and theta 1e4 the wavelengths are 6.3,
     * 19.9, 62.8, 199, ...: kept below 64 / 4, blended up to 64 / 1, divided by 8 above */
    const ah_rope_t scaled = {.theta = 10000.0f, .factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                              .original_max_pos = 64.0f};
    int region[3] = {0};
    for (int i = 0; i < 8; i++) {
        const float base = 1.0f / powf(10000.0f, (float)(2 * i) / 16.0f), got = hf_inv_freq(scaled, i, 16);
        region[got == base ? 0 : got == base / 8.0f ? 2 : 1]++;
    }
    CHECK(region[0] == 1 && region[1] == 2 && region[2] == 5, "the scaled case covers every region");
    test_rope_case(2, 16, 2 * 16, scaled);
}

/* The LLaMA 3.1 presets' rotary scaling reaches the kernels as the runtime forms it
 * (runtime/block_llama.c ah_llama_rope): head dim 128 and theta 5e5 put pairs in all three of the
 * published formula's regions (wavelength under 8192 / 4 kept, over 8192 divided by 8, between
 * blended), and at positions 8191 and 131071 (the context's last) the rotation is the formula's,
 * far from the unscaled one's. */
static void test_rope_llama31_presets(void) {
    static const char *const names[] = {"llama3.1-8b", "llama3.1-70b"};
    for (int k = 0; k < 2; k++) {
        ah_model_t m;
        ah_error_t err;
        CHECK(ah_model_preset(names[k], &m, &err) == AH_OK, "%s: %s", names[k], err.msg);
        const ah_rope_t r = ah_llama_rope(&m), plain = {.theta = r.theta};
        CHECK(r.theta == 500000.0f && r.factor == 8.0f && r.low_freq_factor == 1.0f && r.high_freq_factor == 4.0f &&
                  r.original_max_pos == 8192.0f,
              "%s: theta %g, factor %g, low %g, high %g, from %g", names[k], r.theta, r.factor, r.low_freq_factor,
              r.high_freq_factor, r.original_max_pos);
        const int hd = (int)(m.d_model / m.n_head), half = hd / 2, pos[2] = {8191, 131071};
        int region[3] = {0};
        for (int i = 0; i < half; i++) {
            const float base = hf_inv_freq(plain, i, hd), got = hf_inv_freq(r, i, hd);
            region[got == base ? 0 : got == base / 8.0f ? 2 : 1]++;
        }
        CHECK(hd == 128 && region[0] > 0 && region[1] > 0 && region[2] > 0, "%s: pairs kept %d, blended %d, divided %d",
              names[k], region[0], region[1], region[2]);
        float *x = rand_buf(2 * (size_t)hd, 1), *out = copy_buf(x, 2 * (size_t)hd), *unscaled = copy_buf(x, 2 * (size_t)hd);
        double want[2 * 128], apart = 0;
        const ah_cp_at_t at = {pos[0], pos[1]}; /* row 0 at pos[0], row 1 at pos[1] */
        ah_cpu_rope_fwd_at(out, at, 1, 2, 1, hd, hd, r);
        ah_cpu_rope_fwd_at(unscaled, at, 1, 2, 1, hd, hd, plain);
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < half; i++) {
                const double a = (double)((float)pos[t] * hf_inv_freq(r, i, hd));
                const float *xr = x + t * hd;
                want[t * hd + i] = xr[i] * cos(a) - xr[i + half] * sin(a);
                want[t * hd + i + half] = xr[i + half] * cos(a) + xr[i] * sin(a);
            }
        for (int e = 0; e < 2 * hd; e++) apart = fmax(apart, fabs((double)out[e] - unscaled[e]));
        CHECK_REL_D(out, want, 2 * (size_t)hd, 1e-6, "rope of the LLaMA 3.1 preset at positions 8191 and 131071");
        CHECK(apart > 0.1, "%s: the scaled rotation differs from the unscaled one (by %g at most)", names[k], apart);
        free(x), free(out), free(unscaled);
    }
}

/* ---- SwiGLU ---- */

typedef struct {
    int N, F;
    float *gu, *out, *R;
} swiglu_case_t;

static double swiglu_loss(void *p) {
    swiglu_case_t *c = p;
    K->swiglu_fwd(c->out, c->gu, c->N, c->F);
    return dot_out(c->out, c->R, (size_t)c->N * c->F);
}

static void test_swiglu(void) {
    const int N = 3, F = 21;
    swiglu_case_t c = {N, F, rand_buf(2 * N * F, 4), zeros(N * F), rand_buf(N * F, 1)};
    swiglu_loss(&c);
    double want[N * F];
    for (int n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            const double g = c.gu[n * 2 * F + i], u = c.gu[n * 2 * F + F + i];
            want[n * F + i] = g / (1 + exp(-g)) * u;
        }
    CHECK_REL_D(c.out, want, N * F, 1e-6, "swiglu_fwd");
    float *dgu = rand_buf(2 * N * F, 1); /* garbage in the output: the kernel writes, not adds */
    K->swiglu_bwd(dgu, c.R, c.gu, N, F);
    check_fd(swiglu_loss, &c, c.gu, 2 * N * F, dgu, "swiglu dgu (written)");
    free(c.gu), free(c.out), free(c.R), free(dgu);
}

/* ---- attention ---- */

typedef struct {
    int B, T, Hl, KVl, hd;
    float *qkv, *out, *probs, *R, *scratch;
} att_case_t;

static double att_loss(void *p) {
    att_case_t *c = p;
    K->attention_fwd(c->out, c->probs, c->scratch, c->qkv, c->B, c->T, c->Hl, c->KVl, c->hd);
    return dot_out(c->out, c->R, (size_t)c->B * c->T * c->Hl * c->hd);
}

/* Naive attention in double straight from the definition: forward out and probs, and the
 * gradient of sum(out * R) w.r.t. qkv. */
static void att_naive(const att_case_t *c, double *out, double *probs, double *dqkv) {
    const int B = c->B, T = c->T, Hl = c->Hl, hd = c->hd, Cl = Hl * hd;
    const double scale = 1 / sqrt(hd);
    double *s = malloc((size_t)T * sizeof *s), *dp = malloc((size_t)T * sizeof *dp);
    memset(dqkv, 0, (size_t)B * T * 3 * Cl * sizeof *dqkv);
#define Q(b, t, h, d) ((((size_t)(b) * T + (t)) * 3 * Cl) + (size_t)(h) * hd + (d))
    for (int b = 0; b < B; b++)
        for (int h = 0; h < Hl; h++)
            for (int i = 0; i < T; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= i; j++) {
                    double d = 0;
                    for (int e = 0; e < hd; e++)
                        d += (double)c->qkv[Q(b, i, h, e)] * c->qkv[Q(b, j, h, e) + Cl];
                    s[j] = d * scale;
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
                double *prow = probs + (((size_t)b * Hl + h) * T + i) * T;
                for (int j = 0; j < T; j++) prow[j] = j <= i ? s[j] / sum : 0;
                const float *r = c->R + ((size_t)b * T + i) * Cl + (size_t)h * hd;
                double pd = 0;
                for (int e = 0; e < hd; e++) {
                    double o = 0;
                    for (int j = 0; j <= i; j++) o += prow[j] * c->qkv[Q(b, j, h, e) + 2 * Cl];
                    out[((size_t)b * T + i) * Cl + (size_t)h * hd + e] = o;
                }
                for (int j = 0; j <= i; j++) { /* dprobs, dv */
                    dp[j] = 0;
                    for (int e = 0; e < hd; e++) {
                        dp[j] += r[e] * (double)c->qkv[Q(b, j, h, e) + 2 * Cl];
                        dqkv[Q(b, j, h, e) + 2 * Cl] += prow[j] * r[e];
                    }
                    pd += prow[j] * dp[j];
                }
                for (int j = 0; j <= i; j++) { /* dscores -> dq, dk */
                    double ds = prow[j] * (dp[j] - pd) * scale;
                    for (int e = 0; e < hd; e++) {
                        dqkv[Q(b, i, h, e)] += ds * c->qkv[Q(b, j, h, e) + Cl];
                        dqkv[Q(b, j, h, e) + Cl] += ds * c->qkv[Q(b, i, h, e)];
                    }
                }
            }
#undef Q
    free(s), free(dp);
}

static void att_case_run(int B, int T, int Hl, int hd, bool with_fd) {
    const size_t nqkv = (size_t)B * T * 3 * Hl * hd, nout = (size_t)B * T * Hl * hd,
                 np = (size_t)B * Hl * T * T;
    /* The state starts as NaN: the forward need not write a row past its block of queries, and
     * the backward must not read what it did not write (a NaN would reach dqkv). */
    float *probs = malloc(np * sizeof *probs);
    for (size_t i = 0; i < np; i++) probs[i] = NAN;
    /* the scratch too: neither pass may read what it did not write there */
    const size_t nscratch = K->attention_scratch_floats(B, T, Hl, Hl, hd);
    float *scratch = malloc(nscratch * sizeof *scratch);
    for (size_t i = 0; i < nscratch; i++) scratch[i] = NAN;
    att_case_t c = {B, T, Hl, Hl, hd, rand_buf(nqkv, 1.5f), zeros(nout), probs, rand_buf(nout, 1), scratch};
    char what[128];
    CHECK(K->attention_state_floats(B, T, Hl, hd) == np, "the CPU's attention state is the probabilities");
    double *wout = malloc(nout * sizeof *wout), *wp = malloc(np * sizeof *wp),
           *wd = malloc(nqkv * sizeof *wd);
    att_naive(&c, wout, wp, wd);
    att_loss(&c);
    snprintf(what, sizeof what, "attention_fwd out (B=%d T=%d Hl=%d hd=%d)", B, T, Hl, hd);
    CHECK_REL_D(c.out, wout, nout, 1e-5, what);
    /* above the diagonal: exactly 0 where written, NaN (untouched) elsewhere; then compared as 0 */
    int upper_ok = 1;
    float *seen = copy_buf(c.probs, np);
    for (size_t r = 0; r < (size_t)B * Hl * T; r++)
        for (int j = (int)(r % T) + 1; j < T; j++) {
            upper_ok &= seen[r * T + j] == 0.0f || isnan(seen[r * T + j]);
            seen[r * T + j] = 0.0f;
        }
    CHECK(upper_ok, "attention probs above the diagonal are 0 where the forward wrote them");
    snprintf(what, sizeof what, "attention_fwd probs (B=%d T=%d Hl=%d hd=%d)", B, T, Hl, hd);
    CHECK_REL_D(seen, wp, np, 1e-5, what);
    free(seen);

    float *dqkv = rand_buf(nqkv, 1), *dqkv0 = copy_buf(dqkv, nqkv);
    K->attention_bwd(dqkv, scratch, c.R, c.qkv, c.out, c.probs, B, T, Hl, Hl, hd);
    for (size_t i = 0; i < nqkv; i++) wd[i] += dqkv0[i];
    snprintf(what, sizeof what, "attention_bwd dqkv accumulated (B=%d T=%d Hl=%d hd=%d)", B, T,
             Hl, hd);
    CHECK_REL_D(dqkv, wd, nqkv, 1e-5, what);
    if (with_fd) {
        for (size_t i = 0; i < nqkv; i++) dqkv[i] -= dqkv0[i];
        check_fd(att_loss, &c, c.qkv, nqkv, dqkv, "attention dqkv");
    }
    free(c.qkv), free(c.out), free(c.probs), free(c.R), free(wout), free(wp), free(wd);
    free(dqkv), free(dqkv0), free(scratch);
}

/* Grouped-query attention (Hl query heads, KVl key/value heads) against the multi-head kernel on
 * the key/value heads repeated for each query head of their group (torch's repeat_interleave):
 * the outputs agree, and the GQA gradient of a key/value head is the sum of the expanded ones over
 * its group. */
static void gqa_case_run(int B, int T, int Hl, int KVl, int hd, bool with_fd) {
    const int group = Hl / KVl, ld = (Hl + 2 * KVl) * hd, ldx = 3 * Hl * hd;
    const size_t rows = (size_t)B * T, nqkv = rows * ld, nx = rows * ldx, nout = rows * Hl * hd;
    float *qkv = rand_buf(nqkv, 1.5f), *xqkv = zeros(nx);
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < Hl; h++) {
            const float *src = qkv + r * ld;
            float *dst = xqkv + r * ldx;
            memcpy(dst + h * hd, src + h * hd, hd * sizeof *dst);
            memcpy(dst + (Hl + h) * hd, src + (Hl + h / group) * hd, hd * sizeof *dst);
            memcpy(dst + (2 * Hl + h) * hd, src + (Hl + KVl + h / group) * hd, hd * sizeof *dst);
        }
    const size_t np = K->attention_state_floats(B, T, Hl, hd);
    float *out = zeros(nout), *xout = zeros(nout), *probs = zeros(np), *xprobs = zeros(np);
    float *R = rand_buf(nout, 1);
    const size_t nscratch = K->attention_scratch_floats(B, T, Hl, KVl, hd),
                 nxscratch = K->attention_scratch_floats(B, T, Hl, Hl, hd);
    float *scratch = malloc(nscratch * sizeof *scratch), *xscratch = malloc(nxscratch * sizeof *xscratch);
    for (size_t i = 0; i < nscratch; i++) scratch[i] = NAN;
    for (size_t i = 0; i < nxscratch; i++) xscratch[i] = NAN;
    char what[128];
    K->attention_fwd(out, probs, scratch, qkv, B, T, Hl, KVl, hd);
    K->attention_fwd(xout, xprobs, xscratch, xqkv, B, T, Hl, Hl, hd);
    snprintf(what, sizeof what, "GQA attention_fwd (Hl=%d KVl=%d) vs MHA on repeated heads", Hl, KVl);
    CHECK_REL(out, xout, nout, 1e-6, what);

    float *dqkv = zeros(nqkv), *dx = zeros(nx);
    K->attention_bwd(dqkv, scratch, R, qkv, out, probs, B, T, Hl, KVl, hd);
    K->attention_bwd(dx, xscratch, R, xqkv, xout, xprobs, B, T, Hl, Hl, hd);
    float *want = zeros(nqkv); /* the expanded gradient summed back over each group */
    for (size_t r = 0; r < rows; r++)
        for (int h = 0; h < Hl; h++)
            for (int e = 0; e < hd; e++) {
                const float *src = dx + r * ldx;
                float *dst = want + r * ld;
                dst[h * hd + e] = src[h * hd + e];
                dst[(Hl + h / group) * hd + e] += src[(Hl + h) * hd + e];
                dst[(Hl + KVl + h / group) * hd + e] += src[(2 * Hl + h) * hd + e];
            }
    snprintf(what, sizeof what, "GQA attention_bwd (Hl=%d KVl=%d) vs MHA summed over groups", Hl, KVl);
    CHECK_REL(dqkv, want, nqkv, 1e-6, what);
    if (with_fd) {
        att_case_t c = {B, T, Hl, KVl, hd, qkv, out, probs, R, scratch};
        check_fd(att_loss, &c, qkv, nqkv, dqkv, "GQA attention dqkv");
    }
    free(qkv), free(xqkv), free(out), free(xout), free(probs), free(xprobs), free(R), free(scratch);
    free(xscratch);
    free(dqkv), free(dx), free(want);
}

static void test_attention(void) {
    att_case_run(2, 5, 2, 3, true);
    att_case_run(1, 1, 1, 4, true);
    /* T across the 64-query row blocks, not a multiple of them */
    att_case_run(1, 150, 2, 8, false);
    att_case_run(1, 67, 2, 4, true);
    gqa_case_run(2, 5, 4, 2, 3, true);
    gqa_case_run(1, 70, 6, 1, 4, false);
    gqa_case_run(1, 9, 3, 1, 2, true);
    /* groups of 4 over 2 key/value heads, T across three row blocks */
    gqa_case_run(2, 131, 8, 2, 8, false);
}

/* ---- residual, embedding ---- */

static void test_residual(void) {
    enum { n = 13 };
    float *a = rand_buf(n, 1), *b = rand_buf(n, 1), *out = zeros(n), *d = rand_buf(n, 1);
    float *da = rand_buf(n, 1), *da0 = copy_buf(da, n), *db = zeros(n);
    K->residual_fwd(out, a, b, n);
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= out[i] == a[i] + b[i];
    CHECK(ok, "residual_fwd is a + b");
    K->residual_fwd(a, a, b, n);
    CHECK(memcmp(a, out, sizeof(float) * n) == 0, "residual_fwd in place");
    K->residual_bwd(da, db, d, n);
    K->residual_bwd(NULL, db, d, n);
    ok = 1;
    for (int i = 0; i < n; i++) ok &= da[i] == da0[i] + d[i] && db[i] == d[i] + d[i];
    CHECK(ok, "residual_bwd accumulates dout into both");
    free(a), free(b), free(out), free(d), free(da), free(da0), free(db);
}

typedef struct {
    int B, T, C, V;
    const int32_t *tok;
    float *wte, *wpe, *out, *R;
} emb_case_t;

static double emb_loss(void *p) {
    emb_case_t *c = p;
    K->embedding_fwd(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C, 0, c->V);
    return dot_out(c->out, c->R, (size_t)c->B * c->T * c->C);
}

static void test_embedding(void) {
    const int B = 2, T = 3, C = 4, V = 5, P = 4;
    const int32_t tok[] = {1, 4, 1, 0, 1, 3}; /* token 1 three times: its grads add up */
    emb_case_t c = {B, T, C, V, tok, rand_buf(V * C, 1), rand_buf(P * C, 1), zeros(B * T * C),
                    rand_buf(B * T * C, 1)};
    emb_loss(&c);
    int ok = 1;
    for (int r = 0; r < B * T; r++)
        for (int i = 0; i < C; i++)
            ok &= c.out[r * C + i] == c.wte[tok[r] * C + i] + c.wpe[(r % T) * C + i];
    CHECK(ok, "embedding_fwd is wte[token] + wpe[position]");
    float *dwte = zeros(V * C), *dwpe = zeros(P * C);
    K->embedding_bwd(dwte, dwpe, c.R, tok, B, T, C, 0, V);
    check_fd(emb_loss, &c, c.wte, V * C, dwte, "embedding dwte");
    check_fd(emb_loss, &c, c.wpe, P * C, dwpe, "embedding dwpe");
    CHECK(max_abs(dwte + 2 * C, C) == 0 && max_abs(dwpe + 3 * C, C) == 0,
          "rows of unused tokens and positions get no gradient");
    free(c.wte), free(c.wpe), free(c.out), free(c.R), free(dwte), free(dwpe);
}

/* The vocabulary split in two ranges as a TP group of 2 holds it (V = 5 padded to 6: rank 1 has
 * rows [3, 6), row 5 padding; rank 0 passes wpe): the ranks' outputs summed are the whole
 * embedding, bitwise, and their wte gradients are the rows of the whole one. */
static void test_embedding_split(void) {
    const int B = 2, T = 3, C = 4, V = 5, P = 4, Vl = 3;
    const int32_t tok[] = {1, 4, 1, 0, 3, 3};
    float *wte = rand_buf((size_t)2 * Vl * C, 1), *wpe = rand_buf(P * C, 1);
    float *whole = zeros(B * T * C), *part0 = zeros(B * T * C), *part1 = zeros(B * T * C);
    K->embedding_fwd(whole, tok, wte, wpe, B, T, C, 0, V);
    K->embedding_fwd(part0, tok, wte, wpe, B, T, C, 0, Vl);
    K->embedding_fwd(part1, tok, wte + Vl * C, NULL, B, T, C, Vl, Vl);
    int ok = 1, only_own = 1;
    for (int r = 0; r < B * T; r++)
        for (int i = 0; i < C; i++) {
            ok &= part0[r * C + i] + part1[r * C + i] == whole[r * C + i];
            only_own &= tok[r] < Vl ? part1[r * C + i] == 0 : part0[r * C + i] == wpe[(r % T) * C + i];
        }
    CHECK(ok, "embedding over two vocabulary ranges sums to the whole, bitwise");
    CHECK(only_own, "a rank's embedding is 0 (or wpe) for tokens outside its range");
    float *dout = rand_buf(B * T * C, 1);
    float *dwte = zeros(2 * Vl * C), *dwpe = zeros(P * C), *dwte_s = zeros(2 * Vl * C);
    float *dwpe_s = zeros(P * C);
    K->embedding_bwd(dwte, dwpe, dout, tok, B, T, C, 0, V);
    K->embedding_bwd(dwte_s, dwpe_s, dout, tok, B, T, C, 0, Vl);
    K->embedding_bwd(dwte_s + Vl * C, NULL, dout, tok, B, T, C, Vl, Vl);
    CHECK(memcmp(dwte, dwte_s, (size_t)2 * Vl * C * sizeof *dwte) == 0,
          "embedding_bwd over two ranges gives the whole dwte");
    CHECK(memcmp(dwpe, dwpe_s, (size_t)P * C * sizeof *dwpe) == 0, "embedding_bwd dwpe");
    CHECK(max_abs(dwte_s + 5 * C, C) == 0, "the padding row gets no gradient");
    free(wte), free(wpe), free(whole), free(part0), free(part1), free(dout), free(dwte), free(dwpe);
    free(dwte_s), free(dwpe_s);
}

/* ---- split cross-entropy ---- */

/* The cross-entropy over V = 11 columns held by `t` ranks of Vl = ceil(11 / t) padded columns each
 * (t = 2: nvalid 6 and 5, one padding column; t = 3 with Vl = 6: nvalid 6, 5 and 0, a rank of
 * padding only), with the group's max and sum formed by hand, against one rank holding all 11
 * and against logsumexp in double. Padding logits hold a large value that must be ignored. */
static void xent_split_case(int t, int Vl) {
    enum { N = 5, V = 11 };
    const int32_t tgt[N] = {0, 10, 5, 6, 3};
    const float scale = 0.25f;
    float *whole = rand_buf(N * V, 3), *dwhole = zeros(N * V);
    float rowmax[N], stats[2 * N];
    K->xent_max(rowmax, whole, N, V, V);
    K->xent_stats(stats, whole, rowmax, tgt, N, V, V, 0);
    memcpy(dwhole, whole, sizeof(float) * N * V);
    const double loss1 = K->xent_grad(dwhole, rowmax, stats, tgt, scale, N, V, V, 0);
    double want = 0, dwant[N * V];
    for (int n = 0; n < N; n++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < V; j++) mx = fmax(mx, whole[n * V + j]);
        for (int j = 0; j < V; j++) sum += exp(whole[n * V + j] - mx);
        want += mx + log(sum) - whole[n * V + tgt[n]];
        for (int j = 0; j < V; j++)
            dwant[n * V + j] = scale * (exp(whole[n * V + j] - mx) / sum - (j == tgt[n]));
    }
    CHECK_NEAR(loss1, want, 1e-6);
    CHECK_REL_D(dwhole, dwant, N * V, 1e-6, "xent_grad dlogits, one rank");

    float *lg = malloc(sizeof(float) * (size_t)t * N * Vl); /* rank r's (N, Vl) at r * N * Vl */
    float gmax[N], part[N], gstats[2 * N] = {0}, pstats[2 * N];
    for (int n = 0; n < N; n++) gmax[n] = -FLT_MAX;
    for (int r = 0; r < t; r++) {
        const int v0 = r * Vl, nvalid = V - v0 < 0 ? 0 : V - v0 < Vl ? V - v0 : Vl;
        float *l = lg + (size_t)r * N * Vl;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < Vl; j++) l[n * Vl + j] = j < nvalid ? whole[n * V + v0 + j] : 1e4f;
        K->xent_max(part, l, N, Vl, nvalid);
        if (nvalid == 0) CHECK(part[0] == -FLT_MAX, "xent_max of padding only is -FLT_MAX");
        for (int n = 0; n < N; n++) gmax[n] = fmaxf(gmax[n], part[n]);
    }
    for (int n = 0; n < N; n++) CHECK(gmax[n] == rowmax[n], "group max of row %d", n);
    for (int r = 0; r < t; r++) {
        const int v0 = r * Vl, nvalid = V - v0 < 0 ? 0 : V - v0 < Vl ? V - v0 : Vl;
        K->xent_stats(pstats, lg + (size_t)r * N * Vl, gmax, tgt, N, Vl, nvalid, v0);
        for (int i = 0; i < 2 * N; i++) gstats[i] += pstats[i];
    }
    CHECK_REL(gstats, stats, 2 * N, 1e-6, "summed xent_stats of the ranks = one rank's");
    float *dsplit = zeros(N * V);
    int pad_zero = 1;
    for (int r = 0; r < t; r++) {
        const int v0 = r * Vl, nvalid = V - v0 < 0 ? 0 : V - v0 < Vl ? V - v0 : Vl;
        float *l = lg + (size_t)r * N * Vl;
        const double loss = K->xent_grad(l, gmax, gstats, tgt, scale, N, Vl, nvalid, v0);
        CHECK_NEAR(loss, loss1, 1e-6);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < Vl; j++) {
                if (j < nvalid) dsplit[n * V + v0 + j] = l[n * Vl + j];
                else pad_zero &= l[n * Vl + j] == 0.0f;
            }
    }
    char what[96];
    snprintf(what, sizeof what, "xent_grad dlogits over %d ranks of %d columns", t, Vl);
    CHECK_REL(dsplit, dwhole, N * V, 1e-6, what);
    CHECK(pad_zero, "xent_grad writes 0 in the padded columns");
    free(whole), free(dwhole), free(lg), free(dsplit);
}

static void test_xent_split(void) {
    xent_split_case(2, 6);
    xent_split_case(3, 6);
}

/* ---- head + loss ---- */

/* The tied LM head and cross-entropy over the whole vocabulary (one TP rank), composed from the
 * kernels as the runtime composes them: logits = x @ wte^T, xent_max, xent_stats, xent_grad, then
 * (when dx or dwte is non-NULL) dx += dlogits @ wte and dwte += dlogits^T @ x. Returns the summed
 * loss; logits (N, V) holds dlogits on return. */
static double head_xent(float *dx, float *dwte, float *logits, const float *x, const float *wte,
                        const int32_t *tgt, float scale, int N, int C, int V) {
    float *rowmax = zeros((size_t)N), *stats = zeros(2 * (size_t)N);
    K->matmul_fwd(logits, x, wte, NULL, N, C, V);
    K->xent_max(rowmax, logits, N, V, V);
    K->xent_stats(stats, logits, rowmax, tgt, N, V, V, 0);
    const double loss = K->xent_grad(logits, rowmax, stats, tgt, scale, N, V, V, 0);
    if (dx || dwte) K->matmul_bwd(dx, dwte, NULL, logits, x, wte, N, C, V);
    free(rowmax), free(stats);
    return loss;
}

typedef struct {
    int N, C, V;
    const int32_t *tgt;
    float *x, *wte, *logits;
} head_case_t;

static double head_fwd_loss(void *p) {
    head_case_t *c = p;
    return head_xent(NULL, NULL, c->logits, c->x, c->wte, c->tgt, 1.0f, c->N, c->C, c->V);
}

static void test_head(void) {
    const int N = 6, C = 5, V = 11;
    const int32_t tgt[] = {0, 10, 3, 3, 7, 1};
    head_case_t c = {N, C, V, tgt, rand_buf(N * C, 1), rand_buf(V * C, 1), zeros(N * V)};
    /* naive: logits, loss and dlogits in double */
    double want_loss = 0, dlog[N * V];
    for (int n = 0; n < N; n++) {
        double l[V], mx = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++) {
            l[v] = 0;
            for (int i = 0; i < C; i++) l[v] += (double)c.x[n * C + i] * c.wte[v * C + i];
            mx = fmax(mx, l[v]);
        }
        for (int v = 0; v < V; v++) sum += exp(l[v] - mx);
        want_loss += mx + log(sum) - l[tgt[n]];
        for (int v = 0; v < V; v++) dlog[n * V + v] = 0.25 * (exp(l[v] - mx) / sum - (v == tgt[n]));
    }
    double loss = head_fwd_loss(&c);
    CHECK_NEAR(loss, want_loss, 1e-6);
    float *dx = zeros(N * C), *dwte = zeros(V * C);
    double loss2 = head_xent(dx, dwte, c.logits, c.x, c.wte, tgt, 0.25f, N, C, V);
    CHECK(loss2 == loss, "head returns the same loss with the backward on");
    CHECK_REL_D(c.logits, dlog, N * V, 1e-6, "head dlogits in place");
    /* the gradients are 0.25 x those of the summed loss */
    for (int i = 0; i < N * C; i++) dx[i] *= 4;
    for (int i = 0; i < V * C; i++) dwte[i] *= 4;
    check_fd(head_fwd_loss, &c, c.x, N * C, dx, "head dx");
    check_fd(head_fwd_loss, &c, c.wte, V * C, dwte, "head dwte");
    /* chunking rows gives the same sums */
    float *dx2 = zeros(N * C), *dwte2 = zeros(V * C);
    double l1 = head_xent(dx2, dwte2, c.logits, c.x, c.wte, tgt, 1.0f, 4, C, V);
    double l2 = head_xent(dx2 + 4 * C, dwte2, c.logits, c.x + 4 * C, c.wte, tgt + 4, 1.0f, 2,
                             C, V);
    CHECK_NEAR(l1 + l2, loss, 1e-12);
    CHECK_REL(dx2, dx, N * C, 1e-6, "head dx over two row chunks");
    CHECK_REL(dwte2, dwte, V * C, 1e-6, "head dwte over two row chunks");
    free(c.x), free(c.wte), free(c.logits), free(dx), free(dwte), free(dx2), free(dwte2);
}

/* ---- optimizer, norm ---- */

static void test_adamw(void) {
    enum { n = 37 };
    const ah_adamw_hparams_t hp = {.lr = 0.05f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                   .weight_decay = 0.1f};
    float *p = rand_buf(n, 1), *m = zeros(n), *v = zeros(n), *g = zeros(n);
    double P[n], M[n] = {0}, Vv[n] = {0};
    for (int i = 0; i < n; i++) P[i] = p[i];
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < n; i++) g[i] = frand();
        const float gs = t == 3 ? 0.5f : 1.0f; /* clipping on the last step */
        K->adamw(p, g, m, v, n, &hp, gs, t);
        for (int i = 0; i < n; i++) { /* the textbook form, in double */
            double gi = (double)g[i] * gs;
            M[i] = hp.beta1 * M[i] + (1 - hp.beta1) * gi;
            Vv[i] = hp.beta2 * Vv[i] + (1 - hp.beta2) * gi * gi;
            double mh = M[i] / (1 - pow(hp.beta1, t)), vh = Vv[i] / (1 - pow(hp.beta2, t));
            P[i] -= hp.lr * (mh / (sqrt(vh) + hp.eps) + hp.weight_decay * P[i]);
        }
    }
    CHECK_REL_D(p, P, n, 1e-6, "adamw params after 3 steps");
    CHECK_REL_D(m, M, n, 1e-6, "adamw m after 3 steps");
    CHECK_REL_D(v, Vv, n, 1e-6, "adamw v after 3 steps");
    free(p), free(m), free(v), free(g);
}

static void test_sum_squares(void) {
    const size_t n = 1003; /* not a multiple of the 8 partial sums */
    float *x = rand_buf(n, 3);
    double want = 0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    CHECK_NEAR(K->sum_squares(x, n), want, 1e-14);
    CHECK(K->sum_squares(x, 0) == 0, "sum_squares of nothing is 0");
    CHECK_NEAR(K->sum_squares(x, 5), (double)x[0] * x[0] + (double)x[1] * x[1] +
                                         (double)x[2] * x[2] + (double)x[3] * x[3] +
                                         (double)x[4] * x[4],
               1e-15);
    free(x);
}

/* ---- a GPT-2 block composed from the kernels (also used by the torch comparison) ---- */

enum { P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B,
       P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_FCPROJ_W, P_FCPROJ_B, P_COUNT };
static const char *const block_param_names[P_COUNT] = {
    "ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
    "ln2_w", "ln2_b", "fc_w",  "fc_b",  "fcproj_w", "fcproj_b"};

static void block_param_sizes(int C, size_t sz[P_COUNT]) {
    const size_t c = (size_t)C;
    const size_t s[P_COUNT] = {c, c, 3 * c * c, 3 * c, c * c, c, c, c, 4 * c * c, 4 * c, 4 * c * c, c};
    memcpy(sz, s, sizeof s);
}

/* Activations of one block for one micro-batch: what the forward saves for the backward. */
typedef struct {
    float *ln1, *mean1, *rstd1, *qkv, *probs, *atty, *x2, *ln2, *mean2, *rstd2, *fc, *gelu, *out;
} block_acts_t;

typedef struct {
    float *dx2, *dfcp, *dgelu, *dfc, *dln2, *dproj, *datty, *dqkv, *dln1, *att_scratch;
} block_grads_t;

typedef struct {
    int B, T, C, H;
} shape_t;

/* block_acts_t and block_grads_t are plain lists of float* fields: allocate and free them as
 * arrays, with one size per field in declaration order. */
static void alloc_struct_bufs(float **fields, const size_t *n, int count) {
    for (int i = 0; i < count; i++) fields[i] = zeros(n[i]);
}

static void block_acts_alloc(block_acts_t *a, shape_t s) {
    const size_t N = (size_t)s.B * s.T, C = s.C;
    const size_t n[] = {N * C, N, N, N * 3 * C, (size_t)s.B * s.H * s.T * s.T, N * C, N * C,
                        N * C, N,     N,     N * 4 * C,     N * 4 * C, N * C};
    _Static_assert(sizeof n / sizeof *n == sizeof *a / sizeof(float *), "a size per field");
    alloc_struct_bufs((float **)a, n, sizeof n / sizeof *n);
}

static void block_grads_alloc(block_grads_t *g, shape_t s) {
    const size_t N = (size_t)s.B * s.T, C = s.C;
    const size_t n[] = {N * C,     N * C, N * 4 * C, N * 4 * C, N * C, N * C, N * C, N * 3 * C,
                        N * C,
                        K->attention_scratch_floats(s.B, s.T, s.H, s.H, s.C / s.H)};
    _Static_assert(sizeof n / sizeof *n == sizeof *g / sizeof(float *), "a size per field");
    alloc_struct_bufs((float **)g, n, sizeof n / sizeof *n);
}

static void free_struct_bufs(void *p, size_t bytes) {
    float **f = p;
    for (size_t i = 0; i < bytes / sizeof(float *); i++) free(f[i]);
}

static void block_fwd(block_acts_t *a, float *const *p, const float *x, shape_t s) {
    const int N = s.B * s.T, C = s.C, hd = C / s.H;
    K->layernorm_fwd(a->ln1, a->mean1, a->rstd1, x, p[P_LN1_W], p[P_LN1_B], N, C, LN_EPS);
    K->matmul_fwd(a->qkv, a->ln1, p[P_QKV_W], p[P_QKV_B], N, C, 3 * C);
    float *scratch = zeros(K->attention_scratch_floats(s.B, s.T, s.H, s.H, hd));
    K->attention_fwd(a->atty, a->probs, scratch, a->qkv, s.B, s.T, s.H, s.H, hd);
    free(scratch);
    K->matmul_fwd(a->x2, a->atty, p[P_PROJ_W], p[P_PROJ_B], N, C, C);
    K->residual_fwd(a->x2, a->x2, x, (size_t)N * C);
    K->layernorm_fwd(a->ln2, a->mean2, a->rstd2, a->x2, p[P_LN2_W], p[P_LN2_B], N, C, LN_EPS);
    K->matmul_fwd(a->fc, a->ln2, p[P_FC_W], p[P_FC_B], N, C, 4 * C);
    K->gelu_fwd(a->gelu, a->fc, (size_t)N * 4 * C);
    K->matmul_fwd(a->out, a->gelu, p[P_FCPROJ_W], p[P_FCPROJ_B], N, 4 * C, C);
    K->residual_fwd(a->out, a->out, a->x2, (size_t)N * C);
}

/* dx += d(block)/dx^T dout; dp[i] += gradients of the parameters. */
static void block_bwd(float *dx, float *const *dp, block_grads_t *g, const block_acts_t *a,
                      float *const *p, const float *x, const float *dout, shape_t s) {
    const int N = s.B * s.T, C = s.C, hd = C / s.H;
    const size_t nc = (size_t)N * C, n4c = 4 * nc;
    K->zero(g->dx2, nc), K->zero(g->dfcp, nc), K->zero(g->dgelu, n4c), K->zero(g->dfc, n4c);
    K->zero(g->dln2, nc), K->zero(g->dproj, nc), K->zero(g->datty, nc);
    K->zero(g->dqkv, 3 * nc), K->zero(g->dln1, nc);
    K->residual_bwd(g->dx2, g->dfcp, dout, nc);
    K->matmul_bwd(g->dgelu, dp[P_FCPROJ_W], dp[P_FCPROJ_B], g->dfcp, a->gelu, p[P_FCPROJ_W], N,
                  4 * C, C);
    K->gelu_bwd(g->dfc, g->dgelu, a->fc, n4c);
    K->matmul_bwd(g->dln2, dp[P_FC_W], dp[P_FC_B], g->dfc, a->ln2, p[P_FC_W], N, C, 4 * C);
    K->layernorm_bwd(g->dx2, dp[P_LN2_W], dp[P_LN2_B], g->dln2, a->x2, p[P_LN2_W], a->mean2,
                     a->rstd2, N, C);
    K->residual_bwd(dx, g->dproj, g->dx2, nc);
    K->matmul_bwd(g->datty, dp[P_PROJ_W], dp[P_PROJ_B], g->dproj, a->atty, p[P_PROJ_W], N, C, C);
    K->attention_bwd(g->dqkv, g->att_scratch, g->datty, a->qkv, a->atty, a->probs, s.B, s.T, s.H,
                     s.H, hd);
    K->matmul_bwd(g->dln1, dp[P_QKV_W], dp[P_QKV_B], g->dqkv, a->ln1, p[P_QKV_W], N, C, 3 * C);
    K->layernorm_bwd(dx, dp[P_LN1_W], dp[P_LN1_B], g->dln1, x, p[P_LN1_W], a->mean1, a->rstd1, N,
                     C);
}

/* Bitwise the same results from two runs of a block forward + backward. */
static void test_determinism(void) {
    const shape_t s = {2, 70, 16, 2};
    size_t sz[P_COUNT];
    block_param_sizes(s.C, sz);
    float *p[P_COUNT], *dp[2][P_COUNT];
    for (int i = 0; i < P_COUNT; i++) {
        p[i] = rand_buf(sz[i], 0.3f);
        dp[0][i] = zeros(sz[i]), dp[1][i] = zeros(sz[i]);
    }
    const size_t nc = (size_t)s.B * s.T * s.C;
    float *x = rand_buf(nc, 1), *dout = rand_buf(nc, 1), *dx[2] = {zeros(nc), zeros(nc)};
    float *outs[2];
    for (int r = 0; r < 2; r++) {
        block_acts_t a;
        block_grads_t g;
        block_acts_alloc(&a, s), block_grads_alloc(&g, s);
        block_fwd(&a, p, x, s);
        block_bwd(dx[r], dp[r], &g, &a, p, x, dout, s);
        outs[r] = copy_buf(a.out, nc);
        free_struct_bufs(&a, sizeof a), free_struct_bufs(&g, sizeof g);
    }
    int same = memcmp(outs[0], outs[1], nc * sizeof(float)) == 0 &&
               memcmp(dx[0], dx[1], nc * sizeof(float)) == 0;
    for (int i = 0; i < P_COUNT; i++) same &= memcmp(dp[0][i], dp[1][i], sz[i] * 4) == 0;
    CHECK(same, "block forward + backward is bitwise deterministic");
    for (int i = 0; i < P_COUNT; i++) free(p[i]), free(dp[0][i]), free(dp[1][i]);
    free(x), free(dout), free(dx[0]), free(dx[1]), free(outs[0]), free(outs[1]);
}

/* ---- comparison with PyTorch (tests/torch/gpt2_ref.py) ---- */

#define TORCH_TOL 1e-5

static const char *torch_dir;
static double torch_worst; /* the largest error seen, reported at the end */

/* Reads DIR/name.bin (format in gpt2_ref.py) into a new buffer of `numel` elements of `dtype`
 * (0 f32, 1 i32, 2 f64); NULL, with a failed CHECK, if missing or of another size. */
static void *torch_load(const char *name, int dtype, size_t numel) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", torch_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        CHECK(0, "%s: cannot open (did gpt2_ref.py run?)", path);
        return NULL;
    }
    char magic[4];
    int32_t hdr[2], dims[8];
    size_t n = 1;
    int ok = fread(magic, 1, 4, f) == 4 && memcmp(magic, "AHT1", 4) == 0 &&
             fread(hdr, 4, 2, f) == 2 && hdr[0] == dtype && hdr[1] >= 0 && hdr[1] <= 8 &&
             fread(dims, 4, (size_t)hdr[1], f) == (size_t)hdr[1];
    for (int i = 0; ok && i < hdr[1]; i++) n *= (size_t)dims[i];
    const size_t esize = dtype == 2 ? 8 : 4;
    void *buf = ok && n == numel ? malloc(n * esize) : NULL;
    ok = buf && fread(buf, esize, n, f) == n;
    fclose(f);
    CHECK(ok, "%s: bad header, dtype or size (want dtype %d, %zu elements)", path, dtype, numel);
    if (!ok) {
        free(buf);
        return NULL;
    }
    return buf;
}

static float *tload(const char *prefix, const char *name, size_t numel) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return torch_load(full, 0, numel);
}

static void torch_cmp(const float *got, const char *prefix, const char *name, size_t numel) {
    float *want = tload(prefix, name, numel);
    if (!want) return;
    char what[256];
    snprintf(what, sizeof what, "torch %s%s", prefix, name);
    CHECK_REL(got, want, numel, TORCH_TOL, what);
    torch_worst = fmax(torch_worst, rel_err(got, want, numel));
    free(want);
}

typedef struct {
    float *p[P_COUNT], *dp[P_COUNT];
} block_params_t;

static int block_params_load(block_params_t *bp, const char *prefix, int C) {
    size_t sz[P_COUNT];
    block_param_sizes(C, sz);
    int ok = 1;
    for (int i = 0; i < P_COUNT; i++) {
        bp->p[i] = tload(prefix, block_param_names[i], sz[i]);
        bp->dp[i] = zeros(sz[i]);
        ok &= bp->p[i] != NULL;
    }
    return ok;
}

static void block_params_cmp_free(block_params_t *bp, const char *prefix, int C) {
    size_t sz[P_COUNT];
    block_param_sizes(C, sz);
    char name[64];
    for (int i = 0; i < P_COUNT; i++) {
        snprintf(name, sizeof name, "d%s", block_param_names[i]);
        torch_cmp(bp->dp[i], prefix, name, sz[i]);
        free(bp->p[i]), free(bp->dp[i]);
    }
}

static void torch_block(shape_t s) {
    const size_t N = (size_t)s.B * s.T, nc = N * s.C;
    block_params_t bp;
    float *x = tload("block_", "x", nc), *dout = tload("block_", "dout", nc);
    if (!block_params_load(&bp, "block_", s.C) || !x || !dout) return;
    block_acts_t a;
    block_grads_t g;
    block_acts_alloc(&a, s), block_grads_alloc(&g, s);
    float *dx = zeros(nc);
    block_fwd(&a, bp.p, x, s);
    torch_cmp(a.qkv, "block_", "qkv", 3 * nc);
    torch_cmp(a.probs, "block_", "probs", (size_t)s.B * s.H * s.T * s.T);
    torch_cmp(a.atty, "block_", "atty", nc);
    torch_cmp(a.x2, "block_", "x2", nc);
    torch_cmp(a.out, "block_", "out", nc);
    block_bwd(dx, bp.dp, &g, &a, bp.p, x, dout, s);
    torch_cmp(dx, "block_", "dx", nc);
    block_params_cmp_free(&bp, "block_", s.C);
    free_struct_bufs(&a, sizeof a), free_struct_bufs(&g, sizeof g);
    free(x), free(dout), free(dx);
}

/* embedding -> L blocks -> final LN -> tied head + mean cross-entropy, forward and backward. */
static void torch_model(shape_t s, int V, int L, int P) {
    const int N = s.B * s.T, C = s.C;
    const size_t nc = (size_t)N * C;
    int32_t *tok = torch_load("model_tokens", 1, N), *tgt = torch_load("model_targets", 1, N);
    float *wte = tload("model_", "wte", (size_t)V * C), *wpe = tload("model_", "wpe", (size_t)P * C);
    float *lnf_w = tload("model_", "lnf_w", C), *lnf_b = tload("model_", "lnf_b", C);
    double *want_loss = torch_load("model_loss_sum", 2, 1);
    double *want_sq = torch_load("model_grad_sumsq", 2, 1);
    block_params_t *bp = calloc((size_t)L, sizeof *bp);
    block_acts_t *acts = calloc((size_t)L, sizeof *acts);
    char prefix[32];
    int ok = tok && tgt && wte && wpe && lnf_w && lnf_b && want_loss && want_sq;
    for (int l = 0; l < L; l++) {
        snprintf(prefix, sizeof prefix, "model_l%d_", l);
        ok &= block_params_load(&bp[l], prefix, C);
        block_acts_alloc(&acts[l], s);
    }
    block_grads_t g;
    block_grads_alloc(&g, s);
    float *x0 = zeros(nc), *xf = zeros(nc), *meanf = zeros(N), *rstdf = zeros(N);
    float *logits = zeros((size_t)N * V), *dxf = zeros(nc), *dres = zeros(nc), *dres2 = zeros(nc);
    float *dwte = zeros((size_t)V * C), *dwpe = zeros((size_t)P * C), *dlnf_w = zeros(C),
          *dlnf_b = zeros(C);
    if (ok) {
        K->embedding_fwd(x0, tok, wte, wpe, s.B, s.T, C, 0, V);
        const float *x = x0;
        for (int l = 0; l < L; l++) {
            block_fwd(&acts[l], bp[l].p, x, s);
            x = acts[l].out;
        }
        K->layernorm_fwd(xf, meanf, rstdf, x, lnf_w, lnf_b, N, C, LN_EPS);
        double loss = head_xent(dxf, dwte, logits, xf, wte, tgt, 1.0f / (float)N, N, C, V);
        CHECK(fabs(loss - *want_loss) <= TORCH_TOL * fabs(*want_loss),
              "torch model loss sum: %.9g vs %.9g", loss, *want_loss);

        K->layernorm_bwd(dres, dlnf_w, dlnf_b, dxf, x, lnf_w, meanf, rstdf, N, C);
        for (int l = L - 1; l >= 0; l--) {
            const float *xin = l ? acts[l - 1].out : x0;
            K->zero(dres2, nc);
            block_bwd(dres2, bp[l].dp, &g, &acts[l], bp[l].p, xin, dres, s);
            float *t = dres;
            dres = dres2, dres2 = t;
        }
        K->embedding_bwd(dwte, dwpe, dres, tok, s.B, s.T, C, 0, V);

        torch_cmp(dwte, "model_", "dwte", (size_t)V * C);
        torch_cmp(dwpe, "model_", "dwpe", (size_t)P * C);
        torch_cmp(dlnf_w, "model_", "dlnf_w", C);
        torch_cmp(dlnf_b, "model_", "dlnf_b", C);
        double sq = K->sum_squares(dwte, (size_t)V * C) + K->sum_squares(dwpe, (size_t)P * C) +
                    K->sum_squares(dlnf_w, C) + K->sum_squares(dlnf_b, C);
        size_t sz[P_COUNT];
        block_param_sizes(C, sz);
        for (int l = 0; l < L; l++)
            for (int i = 0; i < P_COUNT; i++) sq += K->sum_squares(bp[l].dp[i], sz[i]);
        CHECK(fabs(sq - *want_sq) <= TORCH_TOL * *want_sq, "torch grad sum of squares: %.9g vs %.9g",
              sq, *want_sq);
    }
    for (int l = 0; l < L; l++) {
        snprintf(prefix, sizeof prefix, "model_l%d_", l);
        if (ok) block_params_cmp_free(&bp[l], prefix, C);
        free_struct_bufs(&acts[l], sizeof acts[l]);
    }
    free_struct_bufs(&g, sizeof g);
    free(bp), free(acts), free(tok), free(tgt), free(wte), free(wpe), free(lnf_w), free(lnf_b);
    free(want_loss), free(want_sq), free(x0), free(xf), free(meanf), free(rstdf), free(logits);
    free(dxf), free(dres), free(dres2), free(dwte), free(dwpe), free(dlnf_w), free(dlnf_b);
}

/* The CPU's attention probabilities (kernels/kernels.h: probs[b, kh, i, hh, j], head
 * h = kh g + hh) in torch's (B, H, T, T) order. */
static float *probs_by_head(const float *probs, int B, int T, int H, int KV) {
    const int g = H / KV;
    float *p = zeros((size_t)B * H * T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                memcpy(p + (((size_t)b * H + h) * T + i) * T,
                       probs + ((((size_t)b * KV + h / g) * T + i) * g + h % g) * T, (size_t)T * sizeof *p);
    return p;
}

/* LLaMA's ops in gpt2_ref.py's chain: rmsnorm -> qkv -> rope (q and k heads, in place) -> GQA
 * attention -> gate/up -> swiglu, forward and backward. */
static void torch_llama(shape_t s) {
    int32_t *cfg = torch_load("llama_config", 1, 4); /* H KV F theta */
    if (!cfg) return;
    const int N = s.B * s.T, C = s.C, H = cfg[0], KV = cfg[1], F = cfg[2], hd = C / H;
    const float theta = (float)cfg[3];
    const int Q = (H + 2 * KV) * hd;
    const size_t nc = (size_t)N * C, nq = (size_t)N * Q, ngu = (size_t)N * 2 * F;
    float *x = tload("llama_", "x", nc), *rms_w = tload("llama_", "rms_w", C);
    float *qkv_w = tload("llama_", "qkv_w", (size_t)Q * C);
    float *gu_w = tload("llama_", "gu_w", (size_t)2 * F * C);
    float *dout = tload("llama_", "dout", (size_t)N * F);
    const size_t np = K->attention_state_floats(s.B, s.T, H, hd);
    float *rms = zeros(nc), *rstd = zeros(N), *qkv = zeros(nq), *probs = zeros(np), *y = zeros(nc);
    float *gu = zeros(ngu), *out = zeros((size_t)N * F), *dgu = zeros(ngu), *dy = zeros(nc);
    float *dqkv = zeros(nq), *drms = zeros(nc), *dx = zeros(nc), *drms_w = zeros(C);
    float *dqkv_w = zeros((size_t)Q * C), *dgu_w = zeros((size_t)2 * F * C);
    float *scratch = zeros(K->attention_scratch_floats(s.B, s.T, H, KV, hd));
    if (x && rms_w && qkv_w && gu_w && dout) {
        K->rmsnorm_fwd(rms, rstd, x, rms_w, N, C, LN_EPS);
        K->matmul_fwd(qkv, rms, qkv_w, NULL, N, C, Q);
        K->rope_fwd(qkv, s.B, s.T, H + KV, hd, Q, (ah_rope_t){.theta = theta});
        K->attention_fwd(y, probs, scratch, qkv, s.B, s.T, H, KV, hd);
        K->matmul_fwd(gu, y, gu_w, NULL, N, C, 2 * F);
        K->swiglu_fwd(out, gu, N, F);
        torch_cmp(rms, "llama_", "rms", nc);
        torch_cmp(qkv, "llama_", "roped", nq);
        float *by_head = probs_by_head(probs, s.B, s.T, H, KV);
        torch_cmp(by_head, "llama_", "probs", np);
        free(by_head);
        torch_cmp(y, "llama_", "y", nc);
        torch_cmp(out, "llama_", "out", (size_t)N * F);
        K->swiglu_bwd(dgu, dout, gu, N, F);
        K->matmul_bwd(dy, dgu_w, NULL, dgu, y, gu_w, N, C, 2 * F);
        K->attention_bwd(dqkv, scratch, dy, qkv, y, probs, s.B, s.T, H, KV, hd);
        K->rope_bwd(dqkv, s.B, s.T, H + KV, hd, Q, (ah_rope_t){.theta = theta});
        K->matmul_bwd(drms, dqkv_w, NULL, dqkv, rms, qkv_w, N, C, Q);
        K->rmsnorm_bwd(dx, drms_w, drms, x, rms_w, rstd, N, C);
        torch_cmp(dx, "llama_", "dx", nc);
        torch_cmp(drms_w, "llama_", "drms_w", C);
        torch_cmp(dqkv_w, "llama_", "dqkv_w", (size_t)Q * C);
        torch_cmp(dgu_w, "llama_", "dgu_w", (size_t)2 * F * C);
    }
    free(cfg), free(x), free(rms_w), free(qkv_w), free(gu_w), free(dout), free(rms), free(rstd);
    free(qkv), free(probs), free(y), free(gu), free(out), free(dgu), free(dy), free(dqkv);
    free(drms), free(dx), free(drms_w), free(dqkv_w), free(dgu_w), free(scratch);
}

static void torch_adam(void) {
    const size_t n = 1000;
    double *h = torch_load("adam_hparams", 2, 5);
    float *p = tload("adam_", "p0", n), *m = zeros(n), *v = zeros(n);
    if (!h || !p) return;
    const ah_adamw_hparams_t hp = {(float)h[0], (float)h[1], (float)h[2], (float)h[3], (float)h[4]};
    char name[16];
    for (int t = 1; t <= 3; t++) {
        snprintf(name, sizeof name, "g%d", t);
        float *g = tload("adam_", name, n);
        if (!g) break;
        K->adamw(p, g, m, v, n, &hp, 1.0f, t);
        snprintf(name, sizeof name, "p%d", t);
        torch_cmp(p, "adam_", name, n);
        free(g);
    }
    torch_cmp(m, "adam_", "m", n);
    torch_cmp(v, "adam_", "v", n);
    free(h), free(p), free(m), free(v);
}

static void run_torch(void) {
    int32_t *cfg = torch_load("config", 1, 7); /* B T C H V L P */
    if (!cfg) return;
    const shape_t s = {cfg[0], cfg[1], cfg[2], cfg[3]};
    torch_block(s);
    torch_model(s, cfg[4], cfg[5], cfg[6]);
    torch_llama(s);
    torch_adam();
    free(cfg);
}

int main(int argc, char **argv) {
    K = ah_kernels_cpu();
    CHECK(strcmp(K->name, "cpu") == 0, "cpu backend name");
    if (argc == 3 && strcmp(argv[1], "--torch") == 0) {
        torch_dir = argv[2];
        run_torch();
        printf("largest relative error vs torch over all tensors: %.3g (tolerance %g)\n",
               torch_worst, TORCH_TOL);
        return ah_test_finish();
    }
    test_matmul();
    test_layernorm();
    test_rmsnorm();
    test_rope();
    test_rope_llama31_presets();
    test_swiglu();
    test_gelu();
    test_attention();
    test_residual();
    test_embedding();
    test_embedding_split();
    test_xent_split();
    test_head();
    test_adamw();
    test_sum_squares();
    test_determinism();
    printf("largest relative error vs finite differences: %.3g (tolerance %g)\n", fd_worst,
           FD_TOL);
    return ah_test_finish();
}
