/* 1F1B replayed op by op, and the search's closed form of it (contract in replay.h). */
#include "plan/replay.h"

#include <math.h>
#include <stdlib.h>

/* Op k (0 .. 2n) of stage s: sets *i to its micro-batch; true for a forward. Warm-up forwards
 * F(0) .. F(w-1), then F(w + j) B(j) pairs, then the remaining backwards; w = min(S-s-1, n). */
static bool op_of(int S, int s, int64_t n, int64_t k, int64_t *i) {
    const int64_t warm = S - s - 1 < n ? S - s - 1 : n;
    if (k < warm) return *i = k, true;
    if (k < 2 * n - warm) {
        const bool fwd = (k - warm) % 2 == 0;
        *i = fwd ? warm + (k - warm) / 2 : (k - warm) / 2;
        return fwd;
    }
    *i = k - n;
    return false;
}

/* Runs stage s's next ops while their inputs are there; returns how many ran. fwd_end and
 * bwd_end are [S][n], NAN until the op ran. */
static int64_t run_stage(const ah_stage_eval_t *st, int S, int s, int64_t n, bool with_p2p, double *fwd_end,
                         double *bwd_end, int64_t *next, double *free_at, ah_op_t *ops) {
    int64_t ran = 0, i;
    const size_t row = (size_t)s * (size_t)n;
    const double hop_in = s > 0 && with_p2p ? st[s - 1].p2p_s : 0, hop_out = with_p2p ? st[s].p2p_s : 0;
    while (next[s] < 2 * n) {
        const bool fwd = op_of(S, s, n, next[s], &i);
        double ready;
        if (fwd) {
            ready = s > 0 ? fwd_end[row - (size_t)n + (size_t)i] + hop_in : 0;
        } else if (s < S - 1) {
            ready = bwd_end[row + (size_t)n + (size_t)i] + hop_out;
        } else {
            ready = fwd_end[row + (size_t)i]; /* its own forward ran before it */
        }
        if (isnan(ready)) break; /* its input has not arrived yet */
        const double t0 = ready > free_at[s] ? ready : free_at[s];
        const double t1 = t0 + (fwd ? st[s].fwd_s : st[s].bwd_s);
        (fwd ? fwd_end : bwd_end)[row + (size_t)i] = t1;
        if (ops) ops[(size_t)s * 2 * (size_t)n + (size_t)next[s]] = (ah_op_t){t0, t1, fwd, fwd ? AH_OP_F : AH_OP_B, s, i};
        free_at[s] = t1;
        next[s]++;
        ran++;
    }
    return ran;
}

double ah_1f1b_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops) {
    if (S < 1 || n < 1) return 0;
    const size_t cells = (size_t)S * (size_t)n;
    double *ends = malloc(sizeof(double) * (2 * cells + (size_t)S)); /* fwd_end, bwd_end, free_at */
    int64_t *next = calloc((size_t)S, sizeof(int64_t));
    double span = NAN;
    if (!ends || !next) goto out;
    double *fwd_end = ends, *bwd_end = ends + cells, *free_at = ends + 2 * cells;
    for (size_t k = 0; k < 2 * cells; k++) ends[k] = NAN;
    for (int s = 0; s < S; s++) free_at[s] = 0;
    /* forwards flow down and backwards up, so sweep down then up until every op ran; each sweep
     * pair moves some stage on (1F1B cannot deadlock) */
    for (int64_t done = 0, total = 2 * (int64_t)cells; done < total;) {
        int64_t ran = 0;
        for (int s = 0; s < S; s++) ran += run_stage(st, S, s, n, with_p2p, fwd_end, bwd_end, next, free_at, ops);
        for (int s = S - 1; s >= 0; s--) ran += run_stage(st, S, s, n, with_p2p, fwd_end, bwd_end, next, free_at, ops);
        if (ran == 0) goto out; /* cannot happen for 1F1B's order; never loop forever */
        done += ran;
    }
    span = 0;
    for (int s = 0; s < S; s++)
        if (free_at[s] > span) span = free_at[s];
out:
    free(ends);
    free(next);
    return span;
}

double ah_p2p_pace(const double *hop_s, int S) {
    double pace = 0;
    for (int a = 0; a < S; a++) {
        double hops = 0;
        for (int b = a + 1; b < S; b++) {
            hops += hop_s[b - 1];
            const double v = 2 * hops / (double)(b - a + 1);
            if (v > pace) pace = v;
        }
    }
    return pace;
}

double ah_1f1b_estimate(double sum_c, double max_c, double sum_hop, double pace, int64_t n) {
    return sum_c + 2 * sum_hop + (double)(n - 1) * (max_c + pace);
}
