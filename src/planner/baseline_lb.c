/* A true lower bound on the time ah_planner_time_s gives a 1F1B plan's evaluation (planner.h
 * ah_baseline_lb), far cheaper than ah_evaluate: the baselines skip a structure whose bound cannot
 * win or make megatron-best's finalists (baselines.c try_structure). Three terms, each at most its
 * part of the evaluated time (iteration = slowest pipeline's replay + DP sync, or its exposed part
 * + optimizer + checkpoint; docs/cost-model.md "Plan"):
 *
 *  pipeline (ah_1f1b_lb): per pipeline, from its stages' forward f and backward b alone (hops
 *    free, so never more than the replay with hops);
 *  optimizer: the slowest stage's AdamW step, as ah_evaluate prices it (unsharded);
 *  DP sync: each stage's sync priced as ah_evaluate prices it (ah_dp_stage_sync); with the sync
 *    overlapped, its queue (plan/dp_overlap.c) run with each block ready when the stage's own
 *    blocks below it have run their backward: the holders' least, which ah_dp_exposed_s takes, is
 *    no later, and a later ready time never makes the queue end later. The checkpoint's term is
 *    taken as 0. */
#define AH_PLANNER_INTERNAL
#include <math.h>

#include "planner/planner.h"

#include "plan/dp_price.h"

/* Summing in another order than the replay's may round the other way: the bound is taken this
 * much (relative) below what it sums to. */
#define LB_SLACK 1e-9

double ah_1f1b_lb(const double *f, const double *b, int S, int64_t n) {
    if (S < 1 || n < 1) return 0;
    double sum_f = 0, sum_b = 0, pre = 0, lb = 0;
    for (int s = 0; s < S; s++) sum_f += f[s], sum_b += b[s];
    for (int s = 0; s < S; s++) {
        /* stage s starts at the earliest when micro-batch 0's forward reaches it (the stages
         * before it) and runs n forwards and backwards; then micro-batch n - 1's backward still
         * crosses the stages before it */
        const double a = pre + (double)n * (f[s] + b[s]);
        /* its backward 0 waits for micro-batch 0 to cross every stage and come back to it; after
         * it, stage s still runs n backwards and the forwards past its warm-up's w + 1 (1F1B: w =
         * min(S - s - 1, n)), then the backward crosses the stages before it */
        const int64_t w = S - s - 1 < n ? S - s - 1 : n, ahead = w + 1 < n ? w + 1 : n;
        const double c = sum_f + sum_b + (double)(n - 1) * b[s] + (double)(n - ahead) * f[s];
        lb = fmax(lb, fmax(a, c));
        pre += f[s] + b[s];
    }
    return lb;
}

/* Whether pipeline i of p has pipeline i - 1's stages (blocks, types, recomputation) and
 * micro-batches: every term below gives it the same figures. */
static bool alike_before(const ah_plan_t *p, int i) {
    const ah_pipeline_t *x = &p->pipelines[i], *y = &p->pipelines[i - 1];
    if (x->n_stages != y->n_stages || x->micro_batches != y->micro_batches) return false;
    for (int s = 0; s < x->n_stages; s++) {
        const ah_stage_t *u = &x->stages[s], *v = &y->stages[s];
        if (u->first != v->first || u->last != v->last || u->type != v->type || u->recompute != v->recompute)
            return false;
    }
    return true;
}

/* The overlapped sync's queue on stage sg's device (its parts, its blocks' backward blk_bwd each
 * and ready as the first paragraph says): where it ends after the pipelines' backward. */
static double queue_end(const ah_stage_t *sg, bool head, const ah_sync_stage_t *parts, double blk_bwd) {
    const int nb = sg->last - sg->first;
    double t = -INFINITY;
    const double head_d = parts->head_s - parts->head_ag_s, blk_d = nb > 0 ? (parts->blocks_s - parts->blocks_ag_s) / nb : 0,
                 end_d = parts->end_s - parts->end_ag_s;
    if (head && head_d > 0) t = fmax(-(double)nb * blk_bwd, t) + head_d;
    for (int l = nb - 1; l >= 0 && blk_d > 0; l--) t = fmax(-(double)l * blk_bwd, t) + blk_d;
    if (end_d > 0) t = fmax(0, t) + end_d;
    return t;
}

/* The DP sync's term: each stage's (the distinct pipelines'), the overlapped sync's queue on it
 * when overlap, at most the stage's whole sync. */
static double sync_lb(const ah_plan_t *p, bool overlap, ah_lb_cost_fn cost, void *arg) {
    ah_dp_terms_t d;
    ah_dp_terms_init(p, &d);
    double most = 0;
    for (int i = 0; i < p->n_pipelines; i++) {
        if (i > 0 && alike_before(p, i)) continue;
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int S = pl->n_stages;
        for (int s = 0; s < S; s++) {
            const ah_stage_t *sg = &pl->stages[s];
            ah_sync_stage_t parts = {0};
            const double sync = ah_dp_stage_sync(p, &d, sg, s == 0, s == S - 1, &parts);
            const double blk_bwd = sg->last > sg->first ? cost(arg, sg->type, 0, 1, sg->recompute)->bwd_s : 0;
            most = fmax(most, overlap ? fmin(sync, queue_end(sg, s == S - 1, &parts, blk_bwd)) : sync);
        }
    }
    ah_dp_terms_free(&d);
    return most;
}

double ah_baseline_lb(const ah_planner_opts_t *o, const ah_plan_t *p, ah_lb_cost_fn cost, void *arg, double cutoff) {
    const ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = p->tp,
                               .profile = o->profile, .cp = 1};
    double pipe = 0, opt = 0, f[AH_MAX_STAGES], b[AH_MAX_STAGES];
    if (p->n_opt_groups > 0) return 0;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int S = pl->n_stages;
        if (S > AH_MAX_STAGES || pl->schedule != AH_SCHED_1F1B || ah_pipeline_cp(pl) != 1) return 0;
        if (i > 0 && alike_before(p, i)) continue;
        for (int s = 0; s < S; s++) {
            const ah_stage_t *sg = &pl->stages[s];
            if (sg->warmup_extra != 0) return 0; /* ah_1f1b_lb counts 1F1B's own warm-up */
            const ah_stage_cost_t *sc = cost(arg, sg->type, ah_stage_kind(s, S), sg->last - sg->first, sg->recompute);
            f[s] = sc->fwd_s;
            b[s] = sc->bwd_s;
            opt = fmax(opt, ah_optimizer_seconds(&ctx, sg->type, sc->params));
        }
        pipe = fmax(pipe, ah_1f1b_lb(f, b, S, pl->micro_batches));
    }
    const double lb = (pipe + opt) * (1 - LB_SLACK);
    if (lb >= cutoff) return lb;
    return (pipe + opt + sync_lb(p, !o->no_overlap_grad_sync, cost, arg)) * (1 - LB_SLACK);
}
