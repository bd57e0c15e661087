/* The search state every search offers its candidates to (contract in search_state.h). */
#define AH_PLANNER_INTERNAL
#include "planner/search_state.h"

#include <math.h>
#include <stdlib.h>

static double cand_price(const ah_sctx_t *x, const ah_cand_t *c) {
    double usd = 0;
    for (int i = 0; i < c->n_stages; i++) usd += x->t * x->cluster->nodes[c->node[i]].usd_per_gpu_hour;
    return usd;
}

double ah_search_key_of(const ah_search_t *s, double price, double value) {
    if (!isfinite(value)) return INFINITY;
    if (s->o->min_tokens_per_s > 0 && s->tokens_per_iter / value < s->o->min_tokens_per_s) return INFINITY;
    if (ah_search_over_budget(s->o, price)) return INFINITY;
    return s->o->objective == AH_OBJECTIVE_COST ? price * value : s->o->objective == AH_OBJECTIVE_PRICE ? price : value;
}

double ah_search_key(const ah_search_t *s, const ah_sctx_t *x, const ah_cand_t *c, double value) {
    return isfinite(value) ? ah_search_key_of(s, cand_price(x, c), value) : INFINITY;
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
 * kept for that type and number (a stage is a TP group of t GPUs of its node's type). */
static void note_types(ah_search_t *s, const ah_sctx_t *x, const ah_cand_t *c, double key) {
    for (int k = 0; k < x->n_types; k++) {
        int gpus = 0;
        for (int i = 0; i < c->n_stages; i++) gpus += x->cluster->nodes[c->node[i]].type == k ? x->t : 0;
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
        bound = s->o->objective == AH_OBJECTIVE_COST ? s->best_key / price : s->best_value;
    if (s->o->min_tokens_per_s > 0) /* slower is not eligible; equal still is */
        bound = fmin(bound, nextafter(s->tokens_per_iter / s->o->min_tokens_per_s, INFINITY));
    return bound;
}
