/* Times a logged set of cblas_sgemm calls (bench/sgemm_log.c's lines) each on its own: every
 * distinct call (same shape, transposes, leading dimensions and beta) is run on its own matrices,
 * at least 3 times and 10 ms, its best time counted once per time it was logged. Prints
 * "KINDS CALLS GFLOP SECONDS": the calls' executed GFLOP and their summed best seconds, i.e. what
 * the logged matmuls cost at their own shapes with hot caches and nothing in between — the bound a
 * training step built on them can reach. Set OPENBLAS_NUM_THREADS for the thread count. Never run
 * by CTest. usage: bench_sgemm_calls LOG */
#include <cblas.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"

typedef struct {
    int order, ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
    long count;
} call_t;

static bool same_call(const call_t *a, const call_t *b) {
    return a->order == b->order && a->ta == b->ta && a->tb == b->tb && a->m == b->m && a->n == b->n &&
           a->k == b->k && a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->beta == b->beta;
}

/* The leading (non-ld) dimension of a stored r x c operand: its rows when row-major and not
 * transposed, else its columns (a row-major op(A) of M x K is stored K x M when transposed). */
static size_t rows(int order, int trans, int r, int c) {
    return (order == CblasRowMajor) == (trans == CblasNoTrans) ? (size_t)r : (size_t)c;
}

/* Best seconds of one call over at least 3 runs and 10 ms; -1 when out of memory. */
static double best_seconds(const call_t *q) {
    const size_t na = rows(q->order, q->ta, q->m, q->k) * (size_t)q->lda;
    const size_t nb = rows(q->order, q->tb, q->k, q->n) * (size_t)q->ldb;
    const size_t nc = rows(q->order, CblasNoTrans, q->m, q->n) * (size_t)q->ldc;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = calloc(nc, sizeof *c);
    double best = -1;
    if (a && b && c) {
        for (size_t i = 0; i < na; i++) a[i] = (float)(i % 97) * 1e-2f;
        for (size_t i = 0; i < nb; i++) b[i] = (float)(i % 89) * 1e-2f;
        best = 1e30;
        const double start = ah_now_s();
        for (int r = 0; r < 3 || ah_now_s() - start < 0.01; r++) {
            const double t0 = ah_now_s();
            cblas_sgemm(q->order, q->ta, q->tb, q->m, q->n, q->k, 1.0f, a, q->lda, b, q->ldb, q->beta, c, q->ldc);
            const double dt = ah_now_s() - t0;
            if (dt < best) best = dt;
        }
    }
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv) {
    FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
    if (!f) {
        fprintf(stderr, "usage: bench_sgemm_calls LOG (lines of bench/sgemm_log.c)%s\n", argc == 2 ? ": cannot open" : "");
        return 2;
    }
    call_t *calls = NULL, x = {0};
    int kinds = 0, cap = 0;
    long total = 0;
    while (fscanf(f, "%d %d %d %d %d %d %d %d %d %f", &x.order, &x.ta, &x.tb, &x.m, &x.n, &x.k, &x.lda, &x.ldb,
                  &x.ldc, &x.beta) == 10) {
        if (x.m <= 0 || x.n <= 0 || x.k <= 0) continue; /* no work */
        int j = 0;
        while (j < kinds && !same_call(&calls[j], &x)) j++;
        if (j == kinds) {
            if (kinds == cap) {
                cap = cap ? 2 * cap : 64;
                call_t *grown = realloc(calls, (size_t)cap * sizeof *calls);
                if (!grown) {
                    fprintf(stderr, "bench_sgemm_calls: out of memory\n");
                    return 1;
                }
                calls = grown;
            }
            calls[kinds++] = x;
        }
        calls[j].count++;
        total++;
    }
    fclose(f);
    double seconds = 0, flops = 0;
    for (int j = 0; j < kinds; j++) {
        const double t = best_seconds(&calls[j]);
        if (t < 0) {
            fprintf(stderr, "bench_sgemm_calls: out of memory for a %d x %d x %d call\n", calls[j].m, calls[j].n,
                    calls[j].k);
            return 1;
        }
        seconds += t * (double)calls[j].count;
        flops += 2.0 * calls[j].m * (double)calls[j].n * calls[j].k * (double)calls[j].count;
    }
    printf("%d %ld %.6f %.6f\n", kinds, total, flops / 1e9, seconds);
    free(calls);
    return 0;
}
