/* The availability bound (sim.h ah_sim_bound): what training on every availability set at the
 * planner's plan of that set, with no recovery and no checkpoint, would train and pay. An accounting
 * for analysis (docs/simulator.md "What bounds autohet's share"), not a policy: it knows each set
 * the moment it comes, restarts for free and joins at once. One thread; out of host memory is
 * AH_ERR_INTERNAL. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/replay.h"

void ah_sim_bound_free(ah_sim_bound_t *b) {
    free(b->gpu_hours_up);
    free(b->t_s); /* and tokens_per_s */
    memset(b, 0, sizeof *b);
}

/* Adds dt seconds on the set x->up: its plan's tokens and $ (every node up, at its prices, as the
 * policies pay since session 22, and the plan's egress), and the GPU-hours of every node up by type. */
static bool add_interval(ah_sim_replay_t *x, double dt, ah_sim_bound_t *b) {
    const ah_cluster_t *c = x->c;
    for (int i = 0; i < c->n_nodes; i++)
        if (x->up[i]) b->gpu_hours_up[c->nodes[i].type] += c->nodes[i].count * dt / 3600;
    ah_sim_entry_t *e = ah_sim_plan_for(x);
    if (!e) return false;
    double held_gpus;
    if (!x->o->release_idle) b->usd += ah_sim_held_usd_per_s(x, &held_gpus) * dt; /* every node up (rule 2) */
    b->tokens_per_s[b->n_steps++] = e->ok ? e->tokens_per_s : 0;
    if (!e->ok) {
        b->no_plan_s += dt;
        return true;
    }
    b->tokens += e->tokens_per_s * dt;
    b->usd += (e->egress_usd_per_s + (x->o->release_idle ? e->usd_per_s : 0)) * dt;
    for (int ty = 0; ty < c->n_types; ty++) b->gpu_hours_used += e->gpus[ty] * dt / 3600;
    if (e->bound_tokens_per_s > 0) b->any_plan_tokens += e->bound_tokens_per_s * dt;
    else b->any_plan_unknown_s += dt;
    return true;
}

ah_status_t ah_sim_bound(const ah_model_t *model, const ah_sim_avail_t *a, const ah_sim_opts_t *o,
                         ah_sim_bound_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    ah_status_t st = ah_sim_check_horizon(a, o, err);
    if (st != AH_OK) return st;
    const ah_cluster_t *c = a->cluster;
    ah_sim_result_t r = {0};
    ah_sim_replay_t x = {.model = model, .c = c, .o = o, .pol = AH_POLICY_AUTOHET, .r = &r};
    if ((st = ah_sim_cloud_node(c, o, &x.bucket, err)) != AH_OK) return st;
    x.up = malloc(sizeof(bool) * (size_t)(c->n_nodes + 1));
    out->gpu_hours_up = calloc((size_t)c->n_types + 1, sizeof(double));
    out->t_s = malloc(2 * sizeof(double) * (size_t)(a->n_changes + 1)); /* tokens_per_s in its second half */
    out->tokens_per_s = out->t_s ? out->t_s + a->n_changes + 1 : NULL;
    bool ok = x.up && out->gpu_hours_up && out->t_s;
    if (ok) memcpy(x.up, a->up0, sizeof(bool) * (size_t)c->n_nodes);
    const double H = ah_sim_horizon_s(a, o);
    double t = 0;
    for (int ci = 0; ok && t < H;) {
        const double next = ci < a->n_changes ? fmin(a->changes[ci].t_s, H) : H;
        out->t_s[out->n_steps] = t;
        ok = add_interval(&x, next - t, out);
        t = next;
        for (; ci < a->n_changes && a->changes[ci].t_s == t; ci++) x.up[a->changes[ci].node] = a->changes[ci].up;
    }
    out->sets = r.plans_computed;
    if (ok) { /* every node up: on-demand's set */
        for (int i = 0; i < c->n_nodes; i++) x.up[i] = true;
        const ah_sim_entry_t *e = ah_sim_plan_for(&x);
        ok = e != NULL;
        if (ok && e->ok) {
            out->all_up_tokens = e->tokens_per_s * H;
            out->all_up_any_plan_tokens = e->bound_tokens_per_s * H;
        }
    }
    for (int i = 0; i < x.n_cache; i++) ah_sim_entry_free(x.cache[i]);
    free(x.cache);
    free(x.up);
    if (!ok) {
        ah_sim_bound_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "simulate --bound: out of host memory planning the availability sets");
    }
    return AH_OK;
}

