/* What the lower bound's groups hold (contract in bound_holds.h). */
#define AH_PLANNER_INTERNAL
#include "planner/bound_holds.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/vec.h"

/* f + b of one stage of nb blocks and that kind. Stage time is additive: nb blocks' time plus the
 * embedding's and the head's (cost/stage.c). */
static double stage_fb(const ah_cost_ctx_t *ctx, int ty, int nb, int kind, bool rc) {
    ah_stage_cost_t sc;
    ah_stage_cost(ctx, ty, 0, nb, kind & 1, (kind & 2) != 0, rc, &sc);
    return sc.fwd_s + sc.bwd_s;
}

/* The most blocks a stage of that type, kind and recompute choice holds with one micro-batch in
 * flight. Memory grows with the block count, so bisection finds it. */
static int most_blocks(const ah_cost_ctx_t *ctx, int ty, int kind, bool rc) {
    const int64_t cap = ah_gpu_capacity_bytes(&ctx->cluster->types[ty]);
    int lo = 0, hi = (int)ctx->model->n_layer; /* lo fits (0 blocks counts as fitting) */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        ah_stage_cost_t sc;
        ah_stage_cost(ctx, ty, 0, mid, kind & 1, (kind & 2) != 0, rc, &sc);
        if (ah_stage_memory_bytes(&sc, 1) <= cap) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void ah_bound_type_costs(const ah_cost_ctx_t *ctx, type_cost_t *tc) {
    const int64_t p_block = ah_layer_params(ctx->model, AH_LAYER_BLOCK, ctx->t);
    for (int ty = 0; ty < ctx->cluster->n_types; ty++) {
        if (!ah_gpu_runs(&ctx->cluster->types[ty], ctx->train->precision)) continue;
        type_cost_t *t = &tc[ty];
        t->b = stage_fb(ctx, ty, 1, 0, false);
        t->b_rc = stage_fb(ctx, ty, 1, 0, true);
        ah_stage_cost_t one;
        ah_stage_cost(ctx, ty, 0, 1, false, false, false, &one);
        t->path = one.fwd_s + one.bwd_s - one.wgrad_s;
        ah_stage_cost(ctx, ty, 0, 1, false, false, true, &one);
        t->bwd_slow = one.bwd_s;
        t->h = fmin(stage_fb(ctx, ty, 1, 2, false), stage_fb(ctx, ty, 1, 3, false)) - t->b;
        t->opt = ah_optimizer_seconds(ctx, ty, p_block);
        /* kinds: 0 middle, 1 first, 2 last, 3 both (S = 1); an end stage has fewer p2p buffers
         * and more of the embedding or head, so any kind may hold the most */
        int most[AH_KINDS][2];
        for (int kind = 0; kind < AH_KINDS; kind++)
            for (int rc = 0; rc < 2; rc++) most[kind][rc] = most_blocks(ctx, ty, kind, rc);
        t->u_any = 0;
        for (int rc = 0; rc < 2; rc++) {
            t->u[rc] = most[0][rc] > most[1][rc] ? most[0][rc] : most[1][rc];
            t->u_head[rc] = most[2][rc] > most[3][rc] ? most[2][rc] : most[3][rc];
            const int u = t->u[rc] > t->u_head[rc] ? t->u[rc] : t->u_head[rc];
            t->u_any = u > t->u_any ? u : t->u_any;
        }
    }
}

/* Blocks a group of that type can hold in a stage no slower than M and of at most X blocks: whole
 * blocks, within its memory, with or without recomputation; a last stage (head) also runs the
 * head. (The 1e-9 slack keeps k b + h - h from rounding below k b: more room is the safe side.) */
static int64_t holds(const type_cost_t *c, double M, bool head, int X) {
    const double room = (head ? M - c->h : M) * (1 + 1e-9);
    if (room < c->b) return 0;
    const int *u = head ? c->u_head : c->u;
    const double most = fmax(fmin(u[0], floor(room / c->b)), fmin(u[1], floor(room / c->b_rc)));
    return (int64_t)fmin(most, X);
}

/* The most blocks `left` groups hold, group g of type i holding h[i] and type i having count[i]
 * groups: the types holding the most first. (Zeroes h.) */
static int64_t take_most(int64_t *h, const int64_t *count, int n, int64_t left) {
    int64_t total = 0;
    while (left > 0) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (h[i] > 0 && count[i] > 0 && (best < 0 || h[i] > h[best])) best = i;
        if (best < 0) break;
        const int64_t take = count[best] < left ? count[best] : left;
        total += take * h[best];
        left -= take;
        h[best] = 0;
    }
    return total;
}

/* Blocks one pipeline of at most L stages holds with every stage no slower than M: its last stage
 * on a group of type `last` (which runs the head), the other L - 1 stages on the groups holding
 * the most. */
static int64_t holds_with_last(const bound_in_t *in, double M, int last) {
    int64_t h[in->n], count[in->n];
    const int64_t head = holds(in->ty[last].c, M, true, in->L);
    if (head == 0) return 0;
    for (int i = 0; i < in->n; i++) {
        h[i] = holds(in->ty[i].c, M, false, in->L);
        count[i] = in->ty[i].count - (i == last);
    }
    return head + take_most(h, count, in->n, in->L - 1);
}

/* The most blocks one such pipeline holds, whatever type its last stage is on. */
static int64_t pipeline_holds(const bound_in_t *in, double M) {
    int64_t most = 0;
    for (int last = 0; last < in->n; last++) {
        const int64_t h = holds_with_last(in, M, last);
        most = h > most ? h : most;
    }
    return most;
}

/* The least blocks a pipeline's last stage gives up to the head at M (stages of at most X
 * blocks), over the types that hold a block at M; INT64_MAX when none does. */
static int64_t head_loss(const bound_in_t *in, double M, int X) {
    int64_t loss = INT64_MAX;
    for (int i = 0; i < in->n; i++) {
        const int64_t h = holds(in->ty[i].c, M, false, X), lost = h - holds(in->ty[i].c, M, true, X);
        if (h > 0 && lost < loss) loss = lost;
    }
    return loss;
}

/* An upper bound on the blocks j pipelines hold together with every stage no slower than M and of
 * at most X blocks: the at most j L groups holding the most, less each pipeline's head_loss. */
static int64_t pooled_holds(const bound_in_t *in, int64_t j, double M, int X) {
    int64_t h[in->n], count[in->n];
    const int64_t loss = head_loss(in, M, X);
    if (loss == INT64_MAX) return 0;
    for (int i = 0; i < in->n; i++) {
        h[i] = holds(in->ty[i].c, M, false, X);
        count[i] = in->ty[i].count;
    }
    return take_most(h, count, in->n, j * in->L) - j * loss;
}

/* Whether a group of type i costs the second pipeline fewer blocks (d) per block it gives the
 * first (a) than one of type k; types that give the first nothing go last. */
static bool costs_less(const double *a, const double *d, int i, int k) {
    if (a[k] == 0) return a[i] > 0;
    return a[i] > 0 && d[i] * a[k] < d[k] * a[i];
}

/* Whether two pipelines with largest stages M1 <= M2 (each of at most X blocks) fit the scope's
 * groups, fractionally: the first needs L blocks (plus its head_loss) at M1 and takes the groups
 * that cost the second the fewest blocks per block it gains (a fractional knapsack: the greedy
 * is exact), the second needs L (plus its head_loss) from the rest at M2. */
static bool pair_fits(const bound_in_t *in, int X, double M1, double M2) {
    const int64_t loss1 = head_loss(in, M1, X), loss2 = head_loss(in, M2, X);
    if (loss1 == INT64_MAX || loss2 == INT64_MAX) return false;
    double a[in->n], d[in->n], need = (double)(in->L + loss1), rest = 0;
    int order[in->n];
    for (int i = 0; i < in->n; i++) {
        a[i] = (double)holds(in->ty[i].c, M1, false, X);
        d[i] = (double)holds(in->ty[i].c, M2, false, X);
        rest += in->ty[i].count * d[i];
        int j = i; /* by d / a increasing */
        for (; j > 0 && costs_less(a, d, i, order[j - 1]); j--) order[j] = order[j - 1];
        order[j] = i;
    }
    for (int k = 0; k < in->n && need > 0; k++) {
        const int i = order[k];
        if (a[i] == 0) break;
        const double take = fmin(in->ty[i].count, need / a[i]);
        need -= take * a[i];
        rest -= take * d[i];
    }
    return need <= 1e-9 && rest >= (double)(in->L + loss2) - 1e-9;
}

/* An upper bound on 1 / M_1 + 1 / M_2 over plans of two pipelines whose stages hold at most X
 * blocks: every candidate M1 with the least M2 >= M1 that pair_fits, while 2 / M1 can still
 * beat the best. */
double ah_bound_pair_q(const bound_in_t *in, int X) {
    const double *c = in->cand;
    const int n = in->n_cand;
    double best = 0;
    for (int i = 0; i < n && 2 / c[i] > best; i++) {
        if (!pair_fits(in, X, c[i], c[n - 1])) continue;
        int lo = i, hi = n - 1;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (pair_fits(in, X, c[i], c[mid])) hi = mid;
            else lo = mid + 1;
        }
        best = fmax(best, 1 / c[i] + 1 / c[lo]);
    }
    return best;
}

/* Every M at which some stage's time can end: whole numbers of a type's block time (with and
 * without recomputation), plus its head time for a last stage; sorted, into cand (room for 4 L n
 * values). Returns how many. */
int ah_bound_stage_times(const bound_in_t *in, double *cand) {
    int n = 0;
    for (int i = 0; i < in->n; i++)
        for (int k = 1; k <= in->L; k++) {
            const type_cost_t *c = in->ty[i].c;
            cand[n++] = k * c->b;
            cand[n++] = k * c->b_rc;
            cand[n++] = k * c->b + c->h;
            cand[n++] = k * c->b_rc + c->h;
        }
    qsort(cand, (size_t)n, sizeof *cand, ah_cmp_double);
    return n;
}

/* The least M of cand[0 .. n) at which one pipeline holds L blocks (pipeline_holds); +inf when it
 * never does. pipeline_holds grows with M and changes only at the candidates, so bisection finds
 * it. */
static double least_stage_time(const bound_in_t *in, const double *cand, int n) {
    if (n == 0 || pipeline_holds(in, cand[n - 1]) < in->L) return INFINITY;
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (pipeline_holds(in, cand[mid]) >= in->L) hi = mid;
        else lo = mid + 1;
    }
    return cand[lo];
}

/* Fills in's per-type figures from the scope's counts (the rest the caller set). cand: room for
 * 4 L n_types values. */
void ah_bound_scope_inputs(const type_cost_t *tc, const int *count, int nt, bound_in_t *in, double *cand) {
    in->n = 0;
    in->G = 0;
    in->b_min = in->path_min = in->h_min = in->kappa = in->h1 = in->opt_block = INFINITY;
    in->bwd_max = 0;
    for (int ty = 0; ty < nt; ty++) {
        if (count[ty] == 0) continue;
        const type_cost_t *c = &tc[ty];
        int j = in->n++; /* insertion by increasing block time */
        for (; j > 0 && in->ty[j - 1].c->b > c->b; j--) in->ty[j] = in->ty[j - 1];
        in->ty[j] = (tgroups_t){c, count[ty]};
        in->G += count[ty];
        in->b_min = fmin(in->b_min, c->b);
        in->path_min = fmin(in->path_min, c->path);
        in->bwd_max = fmax(in->bwd_max, c->bwd_slow);
        in->h_min = fmin(in->h_min, c->h);
        in->kappa = fmin(in->kappa, c->h / c->b);
        in->h1 = fmin(in->h1, c->b + c->h);
        in->opt_block = fmin(in->opt_block, c->opt);
    }
    in->m_one = least_stage_time(in, cand, ah_bound_stage_times(in, cand));
}

/* Whether P pipelines of L blocks fit in the memory of the scope's groups at all (each group
 * holds at most u_any blocks). */
bool ah_bound_memory_allows(const bound_in_t *in, int64_t P) {
    int64_t room = 0;
    for (int i = 0; i < in->n; i++) room += (int64_t)in->ty[i].count * in->ty[i].c->u_any;
    return room >= P * in->L;
}

/* Q_P >= sum_p 1 / M_p for P = 1 .. P_max pipelines whose stages hold at most X blocks (into
 * q[P]; room for P_max + 1): with the pipelines sorted by M_p, the first j of them hold j L blocks
 * at M_j, so M_j is at least m_j, the least candidate M at which pooled_holds reaches j L, and at
 * least every m_i before it (so the search for m_j starts at m_(j-1)). cand: the scope's
 * stage_times (n of them). Returns the last P with a finite m_P. */
int64_t ah_bound_pooled_q(const bound_in_t *in, int64_t P_max, int X, const double *cand, int n, double *q) {
    int at = 0; /* m_(j-1) = cand[at] */
    q[0] = 0;
    for (int64_t j = 1; j <= P_max; j++) {
        const int64_t need = j * in->L;
        if (n == 0 || pooled_holds(in, j, cand[n - 1], X) < need) return j - 1;
        int lo = at, hi = n - 1;
        while (lo < hi) {
            const int mid = (lo + hi) / 2;
            if (pooled_holds(in, j, cand[mid], X) >= need) hi = mid;
            else lo = mid + 1;
        }
        at = lo;
        q[j] = q[j - 1] + 1 / cand[at];
    }
    return P_max;
}
