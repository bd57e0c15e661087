/* The interleaved and zero-bubble schedules replayed op by op, and the activations each keeps in
 * flight (contract and orders in replay.h). */
#include <math.h>
#include <stdlib.h>

#include "plan/replay.h"

/* Where a device is in its order: base, the position in its sequence of forwards and backwards
 * (1F1B's, or Megatron's interleaved one); for zero-bubble, wpend (>= 0) a W due before the next
 * base op, and tail, the deferred W passes run after the last backward. */
typedef struct {
    int64_t base, tail, wpend;
} cursor_t;

typedef struct {
    ah_schedule_t sched;
    int S, P, v;
    int64_t n, warm_cap; /* warm_cap: interleaved, n v (all warm-up) when n = P */
    const int *extra;    /* 1F1B, zero-bubble: stage d's warmup_extra (NULL: none) */
} order_t;

static order_t order_of(ah_schedule_t sched, int S, int P, int64_t n, const int *extra) {
    order_t o = {sched, S, P, P > 0 ? S / P : 1, n, 0, extra};
    o.warm_cap = (int64_t)o.v * n;
    return o;
}

int64_t ah_sched_ops_per_device(ah_schedule_t sched, int S, int P, int64_t n) {
    if (sched == AH_SCHED_ZERO_BUBBLE) return 3 * n;
    return 2 * n * (P > 0 ? S / P : 1);
}

/* Base op k of device d: true for a forward, its stage in *q and micro-batch in *i. */
static bool base_op(const order_t *o, int d, int64_t k, int *q, int64_t *i) {
    if (o->sched != AH_SCHED_INTERLEAVED) { /* 1F1B's sequence (replay.c warm_op_of), stage d */
        const int64_t want = o->S - d - 1 + (o->extra ? o->extra[d] : 0), warm = want < o->n ? want : o->n;
        *q = d;
        if (k < warm) return *i = k, true;
        if (k < 2 * o->n - warm) {
            const bool fwd = (k - warm) % 2 == 0;
            *i = fwd ? warm + (k - warm) / 2 : (k - warm) / 2;
            return fwd;
        }
        *i = k - o->n;
        return false;
    }
    const int64_t total = o->warm_cap, P = o->P, group = P * o->v;
    int64_t warm = o->n == P ? total : 2 * (P - d - 1) + (int64_t)(o->v - 1) * P;
    if (warm > total) warm = total;
    const int64_t rem = total - warm;
    bool fwd;
    int64_t x; /* the device's x-th forward or backward */
    if (k < warm) fwd = true, x = k;
    else if (k < warm + 2 * rem) fwd = (k - warm) % 2 == 0, x = fwd ? warm + (k - warm) / 2 : (k - warm) / 2;
    else fwd = false, x = k - total;
    const int c = (int)((x % group) / P);
    *q = (fwd ? c : o->v - 1 - c) * o->P + d;
    *i = (x / group) * P + x % P;
    return fwd;
}

/* The op at device d's cursor: its kind, stage and micro-batch. */
static ah_op_kind_t peek(const order_t *o, int d, const cursor_t *c, int *q, int64_t *i) {
    if (c->wpend >= 0) return *q = d, *i = c->wpend, AH_OP_W;
    if (c->base < 2 * o->n * o->v) return base_op(o, d, c->base, q, i) ? AH_OP_F : AH_OP_B;
    return *q = d, *i = c->tail, AH_OP_W; /* zero-bubble's deferred W(0 .. min(d, n) - 1) */
}

static void advance(const order_t *o, int d, cursor_t *c, ah_op_kind_t kind, int64_t i) {
    if (c->wpend >= 0) c->wpend = -1;
    else if (c->base < 2 * o->n * o->v) {
        c->base++;
        if (o->sched == AH_SCHED_ZERO_BUBBLE && kind == AH_OP_B && i >= d) c->wpend = i;
    } else c->tail++;
}

typedef struct {
    const order_t *o;
    const ah_stage_eval_t *st;
    bool with_p2p;
    double *fwd_end, *bwd_end, *free_at; /* [S][n], [S][n], [P] */
    double *down, *up;                   /* [S]: each hop's link, each way, free from (ah_hop_arrival) */
    cursor_t *cur;
    int64_t per;                         /* ops per device */
    int64_t *done;                       /* [P] */
    ah_op_t *ops;
} run_t;

/* Runs device d's next ops while their inputs are there; returns how many ran. */
static int64_t run_device(run_t *r, int d) {
    const order_t *o = r->o;
    const int64_t n = o->n;
    int64_t ran = 0, i;
    int q;
    while (r->done[d] < r->per) {
        const ah_op_kind_t kind = peek(o, d, &r->cur[d], &q, &i);
        const size_t cell = (size_t)q * (size_t)n + (size_t)i;
        double ready, dur;
        /* the hop its input crossed (its link each way), taken only when the op runs: in
         * micro-batch order, as the sends */
        double *link = NULL, hop = 0, wire = 0;
        if (kind == AH_OP_F) {
            ready = q > 0 ? r->fwd_end[cell - (size_t)n] : 0;
            if (q > 0 && r->with_p2p) link = &r->down[q - 1], hop = r->st[q - 1].p2p_s, wire = r->st[q - 1].p2p_wire_s;
            dur = r->st[q].fwd_s;
        } else if (kind == AH_OP_B) {
            ready = q < o->S - 1 ? r->bwd_end[cell + (size_t)n] : r->fwd_end[cell];
            if (q < o->S - 1 && r->with_p2p) link = &r->up[q], hop = r->st[q].p2p_s, wire = r->st[q].p2p_wire_s;
            dur = r->st[q].bwd_s - (o->sched == AH_SCHED_ZERO_BUBBLE ? r->st[q].wgrad_s : 0);
        } else {
            ready = r->bwd_end[cell];
            dur = r->st[q].wgrad_s;
        }
        if (isnan(ready)) break; /* its input has not arrived yet */
        if (link) ready = ah_hop_arrival(ready, hop, wire, link);
        const double t0 = ready > r->free_at[d] ? ready : r->free_at[d], t1 = t0 + dur;
        if (kind == AH_OP_F) r->fwd_end[cell] = t1;
        if (kind == AH_OP_B) r->bwd_end[cell] = t1;
        if (r->ops) r->ops[(size_t)d * (size_t)r->per + (size_t)r->done[d]] = (ah_op_t){t0, t1, kind == AH_OP_F, (uint8_t)kind, q, i};
        r->free_at[d] = t1;
        advance(o, d, &r->cur[d], kind, i);
        r->done[d]++;
        ran++;
    }
    return ran;
}

double ah_sched_replay(ah_schedule_t sched, const ah_stage_eval_t *st, int S, int P, int64_t n, bool with_p2p,
                       ah_op_t *ops) {
    if (sched == AH_SCHED_1F1B) return ah_1f1b_replay(st, S, n, with_p2p, ops);
    if (S < 1 || n < 1 || P < 1 || S % P != 0 || (sched == AH_SCHED_ZERO_BUBBLE && P != S) ||
        (sched == AH_SCHED_INTERLEAVED && n % P != 0))
        return NAN;
    bool any = false; /* a stage's warmup_extra not 0: the order takes them */
    for (int q = 0; q < S && sched != AH_SCHED_INTERLEAVED; q++) any = any || st[q].warmup_extra != 0;
    int *extra = any ? malloc(sizeof *extra * (size_t)S) : NULL;
    for (int q = 0; extra && q < S; q++) extra[q] = st[q].warmup_extra;
    const order_t o = order_of(sched, S, P, n, extra);
    const size_t cells = (size_t)S * (size_t)n;
    run_t r = {.o = &o, .st = st, .with_p2p = with_p2p, .per = ah_sched_ops_per_device(sched, S, P, n), .ops = ops};
    double *ends = malloc(sizeof(double) * (2 * cells + (size_t)P + 2 * (size_t)S));
    r.cur = malloc(sizeof *r.cur * (size_t)P);
    r.done = calloc((size_t)P, sizeof *r.done);
    double span = NAN;
    if (!ends || !r.cur || !r.done || (any && !extra)) goto out;
    r.fwd_end = ends, r.bwd_end = ends + cells, r.free_at = ends + 2 * cells;
    r.down = r.free_at + P, r.up = r.down + S;
    for (size_t k = 0; k < 2 * cells; k++) ends[k] = NAN;
    for (int q = 0; q < S; q++) r.down[q] = r.up[q] = 0;
    for (int d = 0; d < P; d++) r.free_at[d] = 0, r.cur[d] = (cursor_t){0, 0, -1};
    /* forwards flow down (and round to device 0 for the next chunk), backwards up: sweep down then
     * up until every op ran; a sweep pair that runs nothing means an order that cannot run */
    for (int64_t left = r.per * P; left > 0;) {
        int64_t ran = 0;
        for (int d = 0; d < P; d++) ran += run_device(&r, d);
        for (int d = P - 1; d >= 0; d--) ran += run_device(&r, d);
        if (ran == 0) goto out;
        left -= ran;
    }
    span = 0;
    for (int d = 0; d < P; d++) span = fmax(span, r.free_at[d]);
out:
    free(extra);
    free(ends);
    free(r.cur);
    free(r.done);
    return span;
}

void ah_sched_order(ah_schedule_t sched, int S, int P, int64_t n, int d, ah_op_t *ops) {
    ah_sched_order_warm(sched, S, P, n, d, NULL, ops);
}

void ah_sched_order_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra, ah_op_t *ops) {
    const order_t o = order_of(sched, S, P, n, sched == AH_SCHED_INTERLEAVED ? NULL : extra);
    const int64_t per = ah_sched_ops_per_device(sched, S, P, n);
    cursor_t cur = {0, 0, -1};
    int64_t i;
    int q;
    for (int64_t k = 0; k < per; k++) {
        const ah_op_kind_t kind = peek(&o, d, &cur, &q, &i);
        ops[k] = (ah_op_t){0, 0, kind == AH_OP_F, (uint8_t)kind, q, i};
        advance(&o, d, &cur, kind, i);
    }
}

int64_t ah_sched_wgrad_inflight(ah_schedule_t sched, int S, int P, int64_t n, int d) {
    return ah_sched_wgrad_inflight_warm(sched, S, P, n, d, NULL);
}

int64_t ah_sched_wgrad_inflight_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra) {
    if (sched != AH_SCHED_ZERO_BUBBLE) return 0;
    const order_t o = order_of(sched, S, P, n, extra);
    const int64_t per = ah_sched_ops_per_device(sched, S, P, n);
    cursor_t cur = {0, 0, -1};
    int64_t now = 0, peak = 0, i;
    int q;
    for (int64_t k = 0; k < per; k++) {
        const ah_op_kind_t kind = peek(&o, d, &cur, &q, &i);
        now += kind == AH_OP_B ? 1 : kind == AH_OP_W ? -1 : 0;
        if (now > peak) peak = now;
        advance(&o, d, &cur, kind, i);
    }
    return peak;
}

int64_t ah_sched_peak_act(ah_schedule_t sched, int S, int P, int64_t n, int d, const int64_t *act_per_mb,
                          int64_t *live) {
    return ah_sched_peak_act_warm(sched, S, P, n, d, NULL, act_per_mb, live);
}

int64_t ah_sched_peak_act_warm(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra,
                               const int64_t *act_per_mb, int64_t *live) {
    if (sched == AH_SCHED_INTERLEAVED) extra = NULL;
    if (sched == AH_SCHED_1F1B) { /* min(S - d + x, n): the warm-ups and the one in its pair */
        const int64_t want = S - d + (extra ? extra[d] : 0), k = want < n ? want : n;
        if (live) live[d] = k;
        return act_per_mb[d] * k;
    }
    const order_t o = order_of(sched, S, P, n, extra);
    const int64_t per = ah_sched_ops_per_device(sched, S, P, n);
    const int v = o.v;
    /* live counts per chunk, now and at the peak, on the stack for the usual few chunks */
    int64_t now_small[16], best_small[16];
    int64_t *now = v <= 16 ? now_small : calloc((size_t)v, sizeof *now);
    int64_t *best = v <= 16 ? best_small : calloc((size_t)v, sizeof *best);
    if (!now || !best) {
        if (v > 16) free(now), free(best);
        return -1;
    }
    for (int c = 0; c < v; c++) now[c] = best[c] = 0;
    cursor_t cur = {0, 0, -1};
    int64_t bytes = 0, peak = 0, i;
    int q;
    for (int64_t k = 0; k < per; k++) {
        const ah_op_kind_t kind = peek(&o, d, &cur, &q, &i);
        const int c = q / P;
        const bool frees = sched == AH_SCHED_ZERO_BUBBLE ? kind == AH_OP_W : kind == AH_OP_B;
        if (kind == AH_OP_F) now[c]++, bytes += act_per_mb[q];
        else if (frees) now[c]--, bytes -= act_per_mb[q];
        if (sched == AH_SCHED_INTERLEAVED) { /* each chunk's own most (its slots), not the sum's */
            if (now[c] > best[c]) best[c] = now[c];
        } else if (bytes > peak) {
            for (int x = 0; x < v; x++) best[x] = now[x];
            peak = bytes;
        }
        advance(&o, d, &cur, kind, i);
    }
    for (int c = 0; sched == AH_SCHED_INTERLEAVED && c < v; c++) peak += best[c] * act_per_mb[c * P + d];
    for (int c = 0; live && c < v; c++) live[c * P + d] = best[c];
    if (v > 16) free(now), free(best);
    return peak;
}
