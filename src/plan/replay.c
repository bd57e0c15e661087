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

/* Stage s's op at position k (op_of): its start after what it waits for (ready) and its stage,
 * written to fwd_end or bwd_end ([S][n]) and ops. */
static inline void run_op(const ah_stage_eval_t *st, int s, int64_t n, int64_t k, bool fwd, int64_t i, double ready,
                   double *ends, double *free_at, ah_op_t *ops) {
    const double t0 = ready > free_at[s] ? ready : free_at[s];
    const double t1 = t0 + (fwd ? st[s].fwd_s : st[s].bwd_s);
    ends[(size_t)s * (size_t)n + (size_t)i] = t1;
    if (ops) ops[(size_t)s * 2 * (size_t)n + (size_t)k] = (ah_op_t){t0, t1, fwd, fwd ? AH_OP_F : AH_OP_B, s, i};
    free_at[s] = t1;
}

double ah_1f1b_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops) {
    if (S < 1 || n < 1) return 0;
    for (int s = 0; s < S; s++)
        if (isnan(st[s].fwd_s) || isnan(st[s].bwd_s) || (with_p2p && isnan(st[s].p2p_s))) return NAN;
    const size_t cells = (size_t)S * (size_t)n;
    double *ends = malloc(sizeof(double) * (2 * cells + (size_t)S)); /* fwd_end, bwd_end, free_at */
    if (!ends) return NAN;
    double *fwd_end = ends, *bwd_end = ends + cells, *free_at = ends + 2 * cells;
    for (int s = 0; s < S; s++) free_at[s] = 0;
    /* Position-major: stage s's op at position k waits only for ops at positions <= k of its
     * neighbours (forward i of stage s - 1 sits at or before forward i's position on s, since s - 1
     * warms up one more; backward i of stage s + 1 at or before backward i's on s) and for its own
     * stage's op at k - 1. So for each k, the forwards run down the stages and then the backwards
     * up, each op once, every input already there: the times the runtime's order gives. */
    int64_t i;
    for (int64_t k = 0; k < 2 * n; k++) {
        for (int s = 0; s < S; s++)
            if (op_of(S, s, n, k, &i))
                run_op(st, s, n, k, true, i,
                       s > 0 ? fwd_end[(size_t)(s - 1) * (size_t)n + (size_t)i] + (with_p2p ? st[s - 1].p2p_s : 0) : 0,
                       fwd_end, free_at, ops);
        for (int s = S - 1; s >= 0; s--)
            if (!op_of(S, s, n, k, &i))
                run_op(st, s, n, k, false, i,
                       s < S - 1 ? bwd_end[(size_t)(s + 1) * (size_t)n + (size_t)i] + (with_p2p ? st[s].p2p_s : 0)
                                 : fwd_end[(size_t)s * (size_t)n + (size_t)i], /* its own forward ran before it */
                       bwd_end, free_at, ops);
    }
    double span = 0;
    for (int s = 0; s < S; s++)
        if (free_at[s] > span) span = free_at[s];
    free(ends);
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
