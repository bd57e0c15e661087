/* The agent's plan choice weighing single-copy rollback exposure (agent_exposure.h). */
#include "elastic/agent_exposure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/placement.h"
#include "ckpt/replica.h"

/* Plan p (its eval e) weighed into *w; false when out of host memory. */
static bool weigh(const ah_plan_t *p, const ah_eval_t *e, const ah_planner_opts_t *o, const ah_exposure_facts_t *f,
                  ah_exposure_weighed_t *w) {
    const ah_cluster_t *c = f->cluster;
    int *map = malloc(sizeof *map * (size_t)(p->cluster.n_nodes + 1));
    int *spot = calloc((size_t)c->n_types + 1, sizeof *spot), *alone_spot = calloc((size_t)c->n_types + 1, sizeof *spot);
    bool *alone = calloc((size_t)c->n_nodes + 1, sizeof *alone);
    ah_placement_t pl = {0};
    ah_error_t err;
    bool ok = map && spot && alone_spot && alone;
    for (int i = 0; ok && i < p->cluster.n_nodes; i++) {
        map[i] = ah_cluster_find_node(c, p->cluster.nodes[i].name);
        ok = map[i] >= 0;
    }
    ok = ok && ah_placement_build(p, map, c->n_nodes, &pl, &err) == AH_OK && ah_replica_alone_nodes(&pl, c->n_nodes, alone);
    *w = (ah_exposure_weighed_t){.score = 0};
    for (int i = 0; ok && i < p->cluster.n_nodes; i++) {
        const ah_node_t *n = &c->nodes[map[i]];
        if (!n->spot) continue;
        spot[n->type]++;
        alone_spot[n->type] += alone[map[i]];
        w->alone_spot += alone[map[i]];
    }
    if (ok) {
        w->hit_rate = ah_churn_hit_rate(&f->churn, spot);
        w->alone_hit_rate = ah_churn_hit_rate(&f->churn, alone_spot);
        w->rollback_s = f->memory_tier ? 0 : (double)f->ckpt_every * e->pred.iteration_s / 2;
        w->kept = ah_exposure_kept(w->hit_rate, f->recovery_s, w->alone_hit_rate, w->rollback_s);
        const double key = ah_planner_key(o, p, e);
        w->score = key > 0 && isfinite(key) ? w->kept / key : 0;
    }
    ah_placement_free(&pl);
    free(map);
    free(spot);
    free(alone_spot);
    free(alone);
    return ok;
}

int ah_exposure_pick(const ah_plan_result_t *r, const ah_planner_opts_t *o, const ah_exposure_facts_t *f,
                     ah_exposure_weighed_t w[1 + AH_BASELINE_COUNT], bool *ok) {
    *ok = weigh(&r->plan, &r->eval, o, f, &w[0]);
    int best = -1;
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        w[1 + k] = (ah_exposure_weighed_t){.score = -1};
        if (!*ok || !r->baselines || !r->baselines[k].ok) continue;
        *ok = weigh(&r->baselines[k].r.plan, &r->baselines[k].r.eval, o, f, &w[1 + k]);
        if (*ok && w[1 + k].score > w[1 + best].score) best = k;
    }
    return *ok ? best : -1;
}

bool ah_exposure_leavers_kept(const ah_plan_t *p, const ah_cluster_t *c, const bool *leaving, bool *ok) {
    int *map = malloc(sizeof *map * (size_t)(p->cluster.n_nodes + 1));
    bool *alive = calloc((size_t)c->n_nodes + 1, sizeof *alive);
    ah_placement_t pl = {0};
    ah_shard_group_t *gs = NULL;
    ah_error_t err;
    *ok = map && alive;
    for (int i = 0; *ok && i < p->cluster.n_nodes; i++) *ok = (map[i] = ah_cluster_find_node(c, p->cluster.nodes[i].name)) >= 0;
    *ok = *ok && ah_placement_build(p, map, c->n_nodes, &pl, &err) == AH_OK &&
          (gs = malloc((size_t)(pl.max_groups > 0 ? pl.max_groups : 1) * sizeof *gs));
    bool kept = *ok;
    for (int x = 0; kept && x < c->n_nodes; x++) alive[x] = !leaving[x];
    for (int r = 0; kept && r < pl.n_ranks; r++) {
        const int y = pl.ranks[r].node, n = y >= 0 && leaving[y] ? ah_placement_groups(&pl, r, false, gs) : 0;
        for (int i = 0; kept && i < n; i++) kept = ah_placement_survives(&pl, gs[i], pl.ranks[r].tp_index, alive);
    }
    ah_placement_free(&pl);
    free(gs);
    free(map);
    free(alive);
    return kept;
}
