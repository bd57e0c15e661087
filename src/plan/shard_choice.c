/* The sharded optimizer in the planner (planner.h ah_planner_opts_t.shard): shares for the plan the
 * search chose. The search prices every plan unsharded; this pass then splits each data-parallel
 * group of two or more members (plan.h "optimizer_shards") evenly, or in proportion to each
 * member's free memory, and keeps a sharded version when the mode asks for it (even, memory) or
 * when it is faster (auto). Sharding only lowers a device's memory, so a plan that fit still fits.
 * Not searched: plans that fit only sharded (the search does not see the memory sharding frees). */
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"

#define TRY(call)                                   \
    do {                                            \
        ah_status_t s_ = (call);                    \
        if (s_ != AH_OK) return s_;                 \
    } while (0)

/* Free memory per device of the unsharded plan once it holds no optimizer state of its sharded
 * groups: capacity - (memory - opt_bytes x the elements of its groups). */
typedef struct {
    const ah_eval_t *e;
    const ah_plan_t *even; /* the groups: every one with two or more members */
    int64_t opt_bytes;
} headroom_t;

static double headroom(const ah_plan_t *p, ah_device_ref_t dev, void *ctx) {
    const headroom_t *h = ctx;
    (void)p;
    const ah_device_eval_t *d = NULL;
    for (int i = 0; i < h->e->n_devices && !d; i++)
        if (h->e->devices[i].node == dev.node && h->e->devices[i].index == dev.index) d = &h->e->devices[i];
    if (!d) return 0;
    /* the device's elements in the groups it belongs to: what it holds less the parts it would not own */
    ah_plan_t *even = (ah_plan_t *)h->even;
    int64_t held = 0;
    ah_device_ref_t *devs = malloc((size_t)(2 * even->n_pipelines + 1) * sizeof *devs);
    for (int k = 0; devs && k < even->n_opt_groups; k++) {
        const int n = ah_opt_group_members(even, &even->opt_groups[k], devs);
        for (int m = 0; m < n; m++)
            if (devs[m].node == dev.node && devs[m].index == dev.index) held += ah_opt_group_elems(even, &even->opt_groups[k]);
    }
    free(devs);
    const double free_b = (double)d->capacity_bytes - (double)(d->memory_bytes - held * h->opt_bytes);
    return free_b > 0 ? free_b : 0;
}

/* Drops p's sharded groups whose members are all on one node. */
static void keep_spread(ah_plan_t *p) {
    ah_device_ref_t *devs = malloc((size_t)(2 * p->n_pipelines + 1) * sizeof *devs);
    int kept = 0;
    for (int k = 0; devs && k < p->n_opt_groups; k++) {
        const int n = ah_opt_group_members(p, &p->opt_groups[k], devs);
        bool spread = false;
        for (int i = 1; i < n; i++) spread |= devs[i].node != devs[0].node;
        if (spread) p->opt_groups[kept++] = p->opt_groups[k];
        else free(p->opt_groups[k].shares);
    }
    if (devs) p->n_opt_groups = kept;
    free(devs);
}

/* out = p with shares (weight NULL: even; spread_only: over two nodes at least), evaluated. */
static ah_status_t shard_one(const ah_plan_t *p, const ah_profile_t *profile, bool spread_only,
                             double (*weight)(const ah_plan_t *, ah_device_ref_t, void *), void *ctx, ah_plan_t *out,
                             ah_eval_t *e, ah_error_t *err) {
    ah_status_t s = ah_plan_copy(p, out, err);
    if (s == AH_OK) s = ah_plan_shard_all(out, weight, ctx, err);
    if (s == AH_OK && spread_only) keep_spread(out);
    if (s == AH_OK) s = ah_plan_validate(out, err);
    if (s == AH_OK) s = ah_evaluate(out, profile, e, err);
    else ah_plan_free(out);
    return s;
}

ah_status_t ah_planner_choose_shards(ah_plan_result_t *r, const ah_planner_opts_t *o, ah_error_t *err) {
    if (o->shard == AH_SHARD_NONE) return AH_OK;
    ah_plan_t even, mem;
    ah_eval_t e_even, e_mem;
    TRY(shard_one(&r->plan, o->profile, o->shard_spread_only, NULL, NULL, &even, &e_even, err));
    if (even.n_opt_groups == 0) { /* one pipeline, or no group over two nodes: nothing to shard */
        ah_eval_free(&e_even);
        ah_plan_free(&even);
        return AH_OK;
    }
    headroom_t h = {&r->eval, &even, ah_optimizer_state_bytes(r->plan.train.precision)};
    ah_status_t s = shard_one(&r->plan, o->profile, o->shard_spread_only, headroom, &h, &mem, &e_mem, err);
    if (s != AH_OK) {
        ah_eval_free(&e_even);
        ah_plan_free(&even);
        return s;
    }
    /* even, memory or the faster of the two, and (auto) the unsharded plan unless slower */
    const bool take_mem = o->shard == AH_SHARD_MEMORY ||
                          (o->shard != AH_SHARD_EVEN && e_mem.pred.iteration_s < e_even.pred.iteration_s);
    ah_plan_t *pick = take_mem ? &mem : &even;
    ah_eval_t *pick_e = take_mem ? &e_mem : &e_even;
    const bool keep = o->shard != AH_SHARD_AUTO || pick_e->pred.iteration_s < r->eval.pred.iteration_s;
    if (keep) {
        ah_plan_free(&r->plan);
        ah_eval_free(&r->eval);
        r->plan = *pick;
        r->eval = *pick_e;
        r->plan.has_predicted = true;
        r->plan.predicted = r->eval.pred;
        r->lower_bound_s = 0; /* the bound prices the optimizer step unsharded: none is claimed */
    }
    if (!keep || take_mem) ah_plan_free(&even), ah_eval_free(&e_even);
    if (!keep || !take_mem) ah_plan_free(&mem), ah_eval_free(&e_mem);
    return AH_OK;
}

bool ah_shard_mode_parse(const char *s, ah_shard_mode_t *out) {
    static const char *const names[] = {"none", "even", "memory", "auto"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (ah_shard_mode_t)i;
            return true;
        }
    return false;
}
