/* CPU kernels at GPT-2 block shapes: GFLOP/s of the matmul path (forward with bias; backward
 * dinp + dw + dbias) against raw cblas_sgemm on this machine, measured side by side in one run
 * and printed as ratios; plus attention, and a whole block forward + backward.
 *
 * usage: bench_kernels [B T C H]   (default 1 1024 768 12, GPT-2 124M at full context)
 * Set OPENBLAS_NUM_THREADS to compare at a given thread count. The peak's line names the OpenBLAS
 * kernel that ran (and stderr warns when it is far below the CPU: kernels/cpu/blas_kernel.h).
 * Never run by CTest. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/cpu/blas_kernel.h"
#include "kernels/kernels.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float *buf(size_t n) {
    float *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "bench_kernels: out of memory allocating %zu floats\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return x;
}

/* Best time of one call over repeats filling at least 0.3 s (and at least 3 calls). */
typedef void (*op_fn)(void *ctx);
static double best_time(op_fn f, void *ctx) {
    double best = 1e30, start = now_s();
    for (int i = 0; i < 3 || now_s() - start < 0.3; i++) {
        double t0 = now_s();
        f(ctx);
        double t = now_s() - t0;
        best = t < best ? t : best;
    }
    return best;
}

typedef struct {
    const ah_kernels_t *k;
    int N, IC, OC, B, T, H, hd;
    float *inp, *w, *bias, *out, *dout, *dinp, *dw, *dbias, *qkv, *probs, *scratch;
    CBLAS_TRANSPOSE ta, tb;
    int m, n, kk; /* raw sgemm shape */
} ctx_t;

static void raw_sgemm(void *p) {
    ctx_t *c = p;
    /* C(m, n) = A(m, k) B(k, n) with the given transposes, no bias, beta = 0 */
    cblas_sgemm(CblasRowMajor, c->ta, c->tb, c->m, c->n, c->kk, 1.0f, c->inp,
                c->ta == CblasNoTrans ? c->kk : c->m, c->w, c->tb == CblasNoTrans ? c->n : c->kk,
                0.0f, c->out, c->n);
}
static void mm_fwd(void *p) {
    ctx_t *c = p;
    c->k->matmul_fwd(c->out, c->inp, c->w, c->bias, c->N, c->IC, c->OC);
}
static void mm_bwd(void *p) {
    ctx_t *c = p;
    c->k->matmul_bwd(c->dinp, c->dw, c->dbias, c->dout, c->inp, c->w, c->N, c->IC, c->OC);
}
static void att_fwd(void *p) {
    ctx_t *c = p;
    c->k->attention_fwd(c->out, c->probs, c->scratch, c->qkv, c->B, c->T, c->H, c->H, c->hd);
}
static void att_bwd(void *p) {
    ctx_t *c = p;
    c->k->attention_bwd(c->dinp, c->scratch, c->dout, c->qkv, c->out, c->probs, c->B, c->T, c->H,
                        c->H, c->hd);
}

static double raw_gflops(ctx_t *c, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k) {
    c->ta = ta, c->tb = tb, c->m = m, c->n = n, c->kk = k;
    return 2.0 * m * n * k / best_time(raw_sgemm, c) * 1e-9;
}

int main(int argc, char **argv) {
    int B = 1, T = 1024, C = 768, H = 12;
    if (argc == 5) B = atoi(argv[1]), T = atoi(argv[2]), C = atoi(argv[3]), H = atoi(argv[4]);
    if (argc != 1 && argc != 5) {
        fprintf(stderr, "usage: %s [B T C H]\n", argv[0]);
        return 2;
    }
    if (B <= 0 || T <= 0 || C <= 0 || H <= 0 || C % H) {
        fprintf(stderr, "bench_kernels: need positive B T C H with C divisible by H\n");
        return 2;
    }
    const int N = B * T;
    /* also room for the 1024^3 peak's operands (small shapes crashed it) */
    const size_t SQ = (size_t)1024 * 1024, W = (size_t)4 * C * C > SQ ? (size_t)4 * C * C : SQ;
    size_t big = (size_t)N * 4 * C > (size_t)B * H * T * T ? (size_t)N * 4 * C : (size_t)B * H * T * T;
    big = big > SQ ? big : SQ;
    ctx_t c = {.k = ah_kernels_cpu(), .B = B, .T = T, .H = H, .hd = C / H};
    c.inp = buf(big), c.w = buf(W), c.bias = buf((size_t)4 * C),
    c.out = buf(big), c.dout = buf(big), c.dinp = buf(big), c.dw = buf((size_t)4 * C * C),
    c.dbias = buf((size_t)4 * C), c.qkv = buf((size_t)N * 3 * C), c.probs = buf(big);
    c.scratch = buf(c.k->attention_scratch_floats(B, T, H, H, C / H));

    const char *env = getenv("OPENBLAS_NUM_THREADS");
    printf("bench_kernels: B=%d T=%d C=%d H=%d (N=%d rows), OPENBLAS_NUM_THREADS=%s\n", B, T, C,
           H, N, env ? env : "(unset)");
    const int sq = 1024;
    double peak = raw_gflops(&c, CblasNoTrans, CblasNoTrans, sq, sq, sq);
    char kernel[160], advice[512];
    ah_cpu_blas_describe(kernel, sizeof kernel);
    printf("raw cblas_sgemm peak (%d^3, NN): %.1f GFLOP/s, %s\n\n", sq, peak, kernel);
    if (ah_cpu_blas_advice(advice, sizeof advice)) fprintf(stderr, "bench_kernels: warning: %s\n", advice);

    printf("%-8s %5s %5s | %9s %9s %6s %6s | %9s %9s %6s %6s\n", "layer", "IC", "OC",
           "fwd GF/s", "sgemm NT", "/same", "/peak", "bwd GF/s", "sgemm", "/same", "/peak");
    const struct { const char *name; int ic, oc; } layers[] = {
        {"qkv", C, 3 * C}, {"proj", C, C}, {"fc", C, 4 * C}, {"fcproj", 4 * C, C}};
    double tot_flops = 0, tot_time = 0;
    for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) {
        c.N = N, c.IC = layers[i].ic, c.OC = layers[i].oc;
        const double f = 2.0 * N * c.IC * c.OC;
        double tf = best_time(mm_fwd, &c), tb = best_time(mm_bwd, &c);
        /* the same products as bare sgemm calls: NT forward; NN (dinp) + TN (dw) backward */
        double raw_f = raw_gflops(&c, CblasNoTrans, CblasTrans, N, c.OC, c.IC);
        c.ta = CblasNoTrans, c.tb = CblasNoTrans, c.m = N, c.n = c.IC, c.kk = c.OC;
        double t_nn = best_time(raw_sgemm, &c);
        c.ta = CblasTrans, c.tb = CblasNoTrans, c.m = c.OC, c.n = c.IC, c.kk = N;
        double t_tn = best_time(raw_sgemm, &c);
        double raw_b = 2 * f / (t_nn + t_tn) * 1e-9;
        double gf = f / tf * 1e-9, gb = 2 * f / tb * 1e-9;
        printf("%-8s %5d %5d | %9.1f %9.1f %6.2f %6.2f | %9.1f %9.1f %6.2f %6.2f\n",
               layers[i].name, c.IC, c.OC, gf, raw_f, gf / raw_f, gf / peak, gb, raw_b,
               gb / raw_b, gb / peak);
        tot_flops += 3 * f, tot_time += tf + tb;
    }
    printf("all block matmuls, fwd + bwd: %.1f GFLOP/s = %.2f of peak\n\n",
           tot_flops / tot_time * 1e-9, tot_flops / tot_time * 1e-9 / peak);

    /* Attention: the causal FLOPs (half of the full T x T products) are what is counted. */
    const double af = 2.0 * 2.0 * B * H * (double)T * T * (C / H) / 2;
    double ta = best_time(att_fwd, &c), tab = best_time(att_bwd, &c);
    printf("attention fwd: %7.2f ms, %.1f GFLOP/s (%.2f of peak, causal FLOPs)\n", ta * 1e3,
           af / ta * 1e-9, af / ta * 1e-9 / peak);
    printf("attention bwd: %7.2f ms, %.1f GFLOP/s (%.2f of peak, causal FLOPs)\n", tab * 1e3,
           2 * af / tab * 1e-9, 2 * af / tab * 1e-9 / peak);
    printf("block matmuls fwd+bwd %.2f ms, attention fwd+bwd %.2f ms\n", tot_time * 1e3,
           (ta + tab) * 1e3);

    free(c.inp), free(c.w), free(c.bias), free(c.out), free(c.dout), free(c.dinp), free(c.dw);
    free(c.dbias), free(c.qkv), free(c.probs), free(c.scratch);
    return 0;
}
