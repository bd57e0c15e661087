/* 1F1B replayed op by op, and the search's closed form of it (contract in replay.h). */
#include "plan/replay.h"

#include <math.h>
#include <stdlib.h>

/* A replay's stage: when it is free, its op times, its hop to the next stage (0 without p2p), the
 * hop's wire time and when its link is free down and up (ah_hop_arrival), and where its next
 * forward's and backward's ends go (its rows of fwd_end and bwd_end, [S][n]: each runs in
 * micro-batch order, so the next one is the one after the last). */
typedef struct {
    double free_at, f, b, hop, wire, down, up;
    double *fe, *be;
} lane_t;

typedef struct {
    int S;
    int64_t n;
    lane_t *lane;                    /* lane[0 .. S); lane[-1] a stage before the first, hop 0 */
    const double *fwd_end, *bwd_end; /* the rows' starts, to number an op for ops */
} replay_t;

/* Stage l's op at position k, ready at `ready`: it starts then or when its stage is free; its end
 * goes to *end; ops (when not NULL) gets it at slot k of its stage. */
static inline __attribute__((always_inline)) void run_op(const replay_t *r, lane_t *l, int64_t k, bool fwd,
                                                         double ready, double *end, ah_op_t *ops) {
    const double t0 = ready > l->free_at ? ready : l->free_at;
    const double t1 = t0 + (fwd ? l->f : l->b);
    *end = t1;
    l->free_at = t1;
    if (ops) {
        const int s = (int)(l - r->lane);
        const int64_t i = (int64_t)(end - (fwd ? r->fwd_end : r->bwd_end)) - s * r->n;
        ops[(size_t)s * 2 * (size_t)r->n + (size_t)k] = (ah_op_t){t0, t1, fwd, fwd ? AH_OP_F : AH_OP_B, s, i};
    }
}

/* Position-major: stage s's op at position k waits only for ops at positions <= k of its
 * neighbours (forward i of stage s - 1 sits at or before forward i's position on s, since s - 1
 * warms up one more; backward i of stage s + 1 at or before backward i's on s) and for its own
 * stage's op at k - 1. So for each k, the forwards run down the stages and then the backwards up,
 * each op once, every input already there: the times the runtime's order gives.
 * Stage s runs w = min(S-s-1, n) warm-up forwards, then pairs of a forward and a backward, then
 * the remaining backwards. At position k, with m = min(k, 2n-k-1), the stages s >= lo =
 * max(S-1-m, 0) are in their pairs (w = S-s-1 <= m: a forward where k - w is even, so every other
 * stage), and the stages below lo all warm up (k < n) or all drain (k >= n).
 * A forward waits for the stage before's forward of its micro-batch (n cells before it: stage 0's
 * row before it holds zeros, and lane[-1]'s hop is 0) and its hop; a backward for the stage
 * after's (n cells after it) and the hop back; the last stage's backward for its own forward,
 * which is the op before it on the stage: the row after the last holds -inf and its hop is 0, so
 * it is ready at 0 and starts when its stage is free, at that forward's end. A hop's messages in
 * one direction are sent in micro-batch order, the order its link's state is taken in here. */
static inline __attribute__((always_inline)) void run_positions(const replay_t *r, ah_op_t *ops) {
    const int S = r->S;
    const int64_t n = r->n;
    lane_t *const L = r->lane;
    for (int64_t k = 0; k < 2 * n; k++) {
        const int64_t m = k < 2 * n - k - 1 ? k : 2 * n - k - 1;
        const int lo = (int64_t)S - 1 - m > 0 ? (int)((int64_t)S - 1 - m) : 0;
        const int first_f = lo + (int)((k - (S - 1 - lo)) & 1), first_b = first_f == lo ? lo + 1 : lo;
        const int last_b = first_b + (S - 1 - first_b) / 2 * 2;
        for (lane_t *l = L; k < n && l < L + lo; l++) {
            double *e = l->fe++;
            run_op(r, l, k, true, ah_hop_arrival(e[-n], l[-1].hop, l[-1].wire, &l[-1].down), e, ops);
        }
        for (lane_t *l = L + first_f; l < L + S; l += 2) {
            double *e = l->fe++;
            run_op(r, l, k, true, ah_hop_arrival(e[-n], l[-1].hop, l[-1].wire, &l[-1].down), e, ops);
        }
        for (lane_t *l = L + last_b; first_b < S && l >= L + lo; l -= 2) {
            double *e = l->be++;
            run_op(r, l, k, false, ah_hop_arrival(e[n], l->hop, l->wire, &l->up), e, ops);
        }
        for (lane_t *l = L + lo - 1; k >= n && l >= L; l--) {
            double *e = l->be++;
            run_op(r, l, k, false, ah_hop_arrival(e[n], l->hop, l->wire, &l->up), e, ops);
        }
    }
}

static void run_plain(const replay_t *r) { run_positions(r, NULL); }
static void run_recorded(const replay_t *r, ah_op_t *ops) { run_positions(r, ops); }

/* ---- with extra warm-up (replay.h "Extra warm-up"): the general order, op by op ----
 * Op k (0 .. 2n) of stage s: sets *i to its micro-batch; true for a forward. Warm-up forwards
 * F(0) .. F(w-1), then F(w + j) B(j) pairs, then the remaining backwards; w = min(S-s-1+x, n), x
 * the stage's warmup_extra. */
static bool warm_op_of(int S, int s, int x, int64_t n, int64_t k, int64_t *i) {
    const int64_t warm = S - s - 1 + x < n ? S - s - 1 + x : n;
    if (k < warm) return *i = k, true;
    if (k < 2 * n - warm) {
        const bool fwd = (k - warm) % 2 == 0;
        *i = fwd ? warm + (k - warm) / 2 : (k - warm) / 2;
        return fwd;
    }
    *i = k - n;
    return false;
}

static void warm_run_op(const ah_stage_eval_t *st, int s, int64_t n, int64_t k, bool fwd, int64_t i, double ready,
                        double *ends, double *free_at, ah_op_t *ops) {
    const double t0 = ready > free_at[s] ? ready : free_at[s];
    const double t1 = t0 + (fwd ? st[s].fwd_s : st[s].bwd_s);
    ends[(size_t)s * (size_t)n + (size_t)i] = t1;
    if (ops) ops[(size_t)s * 2 * (size_t)n + (size_t)k] = (ah_op_t){t0, t1, fwd, fwd ? AH_OP_F : AH_OP_B, s, i};
    free_at[s] = t1;
}

/* Position-major as run_positions, every stage at every position: forward i of stage s - 1 sits at
 * or before its position on s (s - 1 warms up at least as many: one more, its warmup_extra no
 * smaller by one), backward i of stage s + 1 at or before its position on s; a hop's messages
 * queue on its link each way in micro-batch order (ah_hop_arrival). */
static double warm_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops) {
    const size_t cells = (size_t)S * (size_t)n;
    /* fwd_end, bwd_end, free_at, each hop's link down and up (ah_hop_arrival) */
    double *ends = malloc(sizeof(double) * (2 * cells + 3 * (size_t)S));
    if (!ends) return NAN;
    double *fwd_end = ends, *bwd_end = ends + cells, *free_at = ends + 2 * cells, *down = free_at + S, *up = down + S;
    for (int s = 0; s < S; s++) free_at[s] = down[s] = up[s] = 0;
    int64_t i;
    for (int64_t k = 0; k < 2 * n; k++) {
        for (int s = 0; s < S; s++)
            if (warm_op_of(S, s, st[s].warmup_extra, n, k, &i))
                warm_run_op(st, s, n, k, true, i,
                            s == 0 ? 0
                            : with_p2p ? ah_hop_arrival(fwd_end[(size_t)(s - 1) * (size_t)n + (size_t)i], st[s - 1].p2p_s,
                                                        st[s - 1].p2p_wire_s, &down[s - 1])
                                       : fwd_end[(size_t)(s - 1) * (size_t)n + (size_t)i],
                            fwd_end, free_at, ops);
        for (int s = S - 1; s >= 0; s--)
            if (!warm_op_of(S, s, st[s].warmup_extra, n, k, &i))
                warm_run_op(st, s, n, k, false, i,
                            s == S - 1 ? fwd_end[(size_t)s * (size_t)n + (size_t)i]
                            : with_p2p ? ah_hop_arrival(bwd_end[(size_t)(s + 1) * (size_t)n + (size_t)i], st[s].p2p_s,
                                                        st[s].p2p_wire_s, &up[s])
                                       : bwd_end[(size_t)(s + 1) * (size_t)n + (size_t)i],
                            bwd_end, free_at, ops);
    }
    double span = 0;
    for (int s = 0; s < S; s++)
        if (free_at[s] > span) span = free_at[s];
    free(ends);
    return span;
}

double ah_1f1b_replay(const ah_stage_eval_t *st, int S, int64_t n, bool with_p2p, ah_op_t *ops) {
    if (S < 1 || n < 1) return 0;
    for (int s = 0; s < S; s++)
        if (isnan(st[s].fwd_s) || isnan(st[s].bwd_s) || (with_p2p && s < S - 1 && isnan(st[s].p2p_s))) return NAN;
    for (int s = 0; s < S; s++)
        if (st[s].warmup_extra != 0) return warm_replay(st, S, n, with_p2p, ops);
    const size_t cells = (size_t)S * (size_t)n, row = (size_t)n;
    /* a row of zeros, fwd_end, bwd_end, a row of -inf (run_positions) */
    double *ends = malloc(sizeof(double) * (2 * cells + 2 * row));
    lane_t *lane = malloc(sizeof *lane * ((size_t)S + 1));
    if (!ends || !lane) {
        free(ends);
        free(lane);
        return NAN;
    }
    double *fwd_end = ends + row, *bwd_end = fwd_end + cells;
    for (size_t j = 0; j < row; j++) ends[j] = 0, bwd_end[cells + j] = -INFINITY;
    lane[0] = (lane_t){0};
    for (int s = 0; s < S; s++)
        lane[s + 1] = (lane_t){.f = st[s].fwd_s, .b = st[s].bwd_s, .hop = with_p2p ? st[s].p2p_s : 0,
                               .wire = with_p2p ? st[s].p2p_wire_s : 0, .fe = fwd_end + (size_t)s * row,
                               .be = bwd_end + (size_t)s * row};
    /* the last stage has no hop after it (run_positions: its backward is ready at the -inf row
     * plus its hop), whatever its p2p_s holds */
    lane[S].hop = lane[S].wire = 0;
    const replay_t r = {S, n, lane + 1, fwd_end, bwd_end};
    if (ops) run_recorded(&r, ops);
    else run_plain(&r);
    double span = 0;
    for (int s = 1; s <= S; s++)
        if (lane[s].free_at > span) span = lane[s].free_at;
    free(ends);
    free(lane);
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
