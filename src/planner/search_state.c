/* The search state every search offers its candidates to (contract in search_state.h). */
#define AH_PLANNER_INTERNAL
#include "planner/search_state.h"

#include <math.h>
#include <stdlib.h>

static double cand_price(const ah_sctx_t *x, const ah_cand_t *c) {
    double usd = 0;
    for (int p = 0; p < c->P; p++)
        for (int s = 0; s < c->S[p]; s++)
            usd += x->t * c->cp[p] * x->cluster->nodes[c->node[c->off[p] + s]].usd_per_gpu_hour;
    return usd;
}

/* The objective value of a plan of that price (its GPUs' $/h), egress ($ per iteration) and
 * iteration time: the $/h weighed is price + egress x iterations per hour (o->held_usd_per_hour in
 * place of the price under the cost objective when set); +inf when it breaks the constraints
 * (--min-tokens-per-s, --budget: on price + egress). */
static double key_of(const ah_planner_opts_t *o, double tokens_per_iter, double price, double egress_usd,
                     double value) {
    if (!isfinite(value)) return INFINITY;
    if (o->min_tokens_per_s > 0 && tokens_per_iter / value < o->min_tokens_per_s) return INFINITY;
    const double egress_per_hour = ah_usd_per_hour_at(egress_usd, value), usd_per_hour = price + egress_per_hour;
    if (ah_search_over_budget(o, usd_per_hour)) return INFINITY;
    return o->objective == AH_OBJECTIVE_COST ? (o->held_usd_per_hour > 0 ? o->held_usd_per_hour + egress_per_hour
                                                                         : usd_per_hour) * value
           : o->objective == AH_OBJECTIVE_PRICE ? usd_per_hour : value;
}

double ah_planner_usd_per_hour(const ah_planner_opts_t *o, const ah_plan_t *p, const ah_eval_t *e) {
    ah_plan_traffic_t t;
    ah_plan_traffic(p, &t);
    return ah_plan_usd_per_hour_at(p, &t, ah_planner_time_s(o, e), NULL);
}

double ah_planner_key(const ah_planner_opts_t *o, const ah_plan_t *p, const ah_eval_t *e) {
    ah_plan_traffic_t t;
    ah_plan_traffic(p, &t);
    return key_of(o, (double)p->train.global_batch * (double)p->train.seq_len, ah_plan_usd_per_hour(p), t.egress_usd,
                  ah_planner_time_s(o, e));
}

bool ah_planner_weighs_egress(const ah_planner_opts_t *o, const ah_cluster_t *c) {
    if (o->objective == AH_OBJECTIVE_TIME && o->budget_usd_per_hour <= 0) return false;
    const ah_network_t *w = &c->net;
    bool priced = w->egress_priced && (w->egress_inter_zone_usd_per_gb > 0 || w->egress_inter_region_usd_per_gb > 0);
    for (int k = 0; k < w->n_links && !priced; k++) priced = w->links[k].usd_per_gb > 0;
    return priced;
}

double ah_search_key(const ah_search_t *s, ah_sctx_t *x, const ah_cand_t *c, double value) {
    if (!isfinite(value)) return INFINITY;
    const double egress = ah_planner_weighs_egress(s->o, s->cluster) ? ah_cand_egress_usd(x, c) : 0;
    return isnan(egress) ? INFINITY : key_of(s->o, s->tokens_per_iter, cand_price(x, c), egress, value);
}

void ah_result_price(const ah_planner_opts_t *o, ah_plan_result_t *r) {
    ah_plan_traffic_t t;
    ah_plan_traffic(&r->plan, &t);
    const double iteration_s = ah_planner_time_s(o, &r->eval);
    r->usd_per_hour = ah_plan_usd_per_hour_at(&r->plan, &t, iteration_s, &r->egress_usd_per_hour);
    r->usd_per_mtoken = r->usd_per_hour / ah_usd_per_hour_at(1, iteration_s) /
                        ((double)r->plan.train.global_batch * (double)r->plan.train.seq_len) * 1e6;
}

void ah_result_take(const ah_planner_opts_t *o, ah_plan_result_t *r, ah_plan_t *p, ah_eval_t *e) {
    ah_plan_free(&r->plan);
    r->plan = *p;
    ah_eval_free(&r->eval);
    r->eval = *e;
    r->plan.has_predicted = true;
    r->plan.predicted = e->pred;
    r->search_value_s = e->search_estimate_s;
    ah_result_price(o, r);
}

/* *dst = a copy of c; false (dst untouched) when out of host memory. */
static bool replace_cand(ah_cand_t *dst, const ah_sctx_t *x, const ah_cand_t *c) {
    ah_cand_t copy = {0};
    if (!ah_cand_copy(&copy, c, x->n_types * AH_KINDS)) {
        ah_cand_free(&copy);
        return false;
    }
    ah_cand_free(dst);
    *dst = copy;
    return true;
}

/* Keeps c as the best candidate using its number of GPUs of each type, where it beats the best
 * kept for that type and number (a stage is a TP group of t GPUs of its node's type, x its CP
 * degree). */
static void note_types(ah_search_t *s, const ah_sctx_t *x, const ah_cand_t *c, double key) {
    for (int k = 0; k < x->n_types; k++) {
        int gpus = 0;
        for (int p = 0; p < c->P; p++)
            for (int s = 0; s < c->S[p]; s++)
                gpus += x->cluster->nodes[c->node[c->off[p] + s]].type == k ? x->t * c->cp[p] : 0;
        if (gpus == 0) continue;
        ah_type_best_t *b = &s->by_type[s->type_base[k] + gpus];
        if ((b->have && key >= b->key) || !replace_cand(&b->cand, x, c)) continue;
        b->have = true;
        b->key = key;
        b->t = x->t;
        b->m = x->train.micro_batch;
    }
}

void ah_search_offer(ah_search_t *s, ah_sctx_t *x, ah_cand_t *c, double value) {
    s->candidates++;
    if (!isfinite(value)) return;
    if (value < s->fastest) s->fastest = value;
    const double key = ah_search_key(s, x, c, value);
    if (isfinite(key) && s->by_type) note_types(s, x, c, key);
    /* equal keys (the cost objective on free GPUs, equal $ per token) go to the faster plan */
    if (!isfinite(key) || (s->have && (key > s->best_key || (key == s->best_key && value >= s->best_value)))) return;
    if (!replace_cand(&s->best, x, c)) return; /* keeps the previous best */
    s->have = true;
    s->best_key = key;
    s->best_value = value;
    s->best_t = x->t;
    s->best_m = x->train.micro_batch;
}

ah_objective_t ah_search_objective(const ah_search_t *s) { return s->o->objective; }

double ah_search_bound(const ah_search_t *s, const ah_sctx_t *x, const ah_cand_t *c) {
    const double price = cand_price(x, c);
    if (ah_search_over_budget(s->o, price)) return -INFINITY;
    if (s->o->objective == AH_OBJECTIVE_PRICE && s->have && price >= s->best_key) return -INFINITY; /* no cheaper */
    double bound = INFINITY;
    if (s->have && s->o->objective != AH_OBJECTIVE_PRICE)
        bound = s->o->objective == AH_OBJECTIVE_COST
                    ? s->best_key / (s->o->held_usd_per_hour > 0 ? s->o->held_usd_per_hour : price) /* key_of's $ */
                    : s->best_value;
    if (s->o->min_tokens_per_s > 0) /* slower is not eligible; equal still is */
        bound = fmin(bound, nextafter(s->tokens_per_iter / s->o->min_tokens_per_s, INFINITY));
    return bound;
}
