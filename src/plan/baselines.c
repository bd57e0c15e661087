/* The two baselines, in the same cost model (scored with ah_evaluate):
 *
 *  uniform (Megatron-LM): P identical pipelines of S stages; TP groups taken in cluster order
 *    (GPU types ignored); equal layers per stage (the remainder to the first stages); equal
 *    micro-batches per pipeline (so P divides global_batch / m); one recompute flag for all; and
 *    because types are ignored every stage must fit the smallest GPU in the plan.
 *  batch-balanced (Whale-like): the same symmetric structure, but each pipeline's micro-batches
 *    are in proportion to its speed (1 / its bottleneck stage time; largest remainders, >= 1 each),
 *    and memory must fit each device's own capacity.
 *
 * Each tries every TP degree, micro-batch size (as the planner), stage count S, pipeline count
 * (uniform: the largest that divides the micro-batch count; batch-balanced: all groups used) and
 * recompute flag, and keeps the fastest feasible plan; uniform keeps, of the feasible plans, the
 * fastest among those that use the most devices (Megatron-LM uses every GPU it is given).
 */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"

#include "cost/profile.h"

#include "core/str.h"

static const char *const BASELINE_NAMES[] = {"uniform", "batch-balanced"}; /* [ah_baseline_t] */

const char *ah_baseline_name(ah_baseline_t b) { return BASELINE_NAMES[b]; }

bool ah_baseline_parse(const char *s, ah_baseline_t *out) {
    const int i = ah_str_index(s, BASELINE_NAMES, (int)(sizeof BASELINE_NAMES / sizeof BASELINE_NAMES[0]));
    if (i >= 0) *out = (ah_baseline_t)i;
    return i >= 0;
}

typedef struct {
    int node, slot;
} bgroup_t;

/* Fills p (already holding P pipelines of S stages) with groups in order, equal layers. */
static void fill_structure(ah_plan_t *p, const bgroup_t *g, int S, bool recompute) {
    const int L = (int)p->model.n_layer, base = L / S, extra = L % S;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0, first = 0; s < S; s++) {
            ah_stage_t *st = &p->pipelines[i].stages[s];
            const bgroup_t *gr = &g[i * S + s];
            st->first = first;
            first += base + (s < extra ? 1 : 0);
            st->last = first;
            st->recompute = recompute;
            st->type = p->cluster.nodes[gr->node].type;
            for (int r = 0; r < p->tp; r++) st->devices[r] = (ah_device_ref_t){gr->node, gr->slot * p->tp + r};
        }
}

/* Micro-batches in proportion to speed (1 / bottleneck stage time), >= 1 each, largest
 * remainders for what is left. */
static void balance(ah_plan_t *p, const ah_eval_t *e, int64_t N) {
    const int P = p->n_pipelines;
    double total = 0, *share = malloc(sizeof(double) * (size_t)P);
    if (!share) return; /* keeps the equal split */
    for (int i = 0; i < P; i++) {
        const ah_stage_eval_t *b = &e->pipelines[i].stages[e->pipelines[i].bottleneck_stage];
        share[i] = 1.0 / (b->fwd_s + b->bwd_s);
        total += share[i];
    }
    int64_t given = 0;
    for (int i = 0; i < P; i++) {
        double want = (double)(N - P) * share[i] / total;
        p->pipelines[i].micro_batches = 1 + (int64_t)floor(want);
        share[i] = want - floor(want); /* now the remainder */
        given += p->pipelines[i].micro_batches;
    }
    while (given < N) {
        int best = 0;
        for (int i = 1; i < P; i++)
            if (share[i] > share[best]) best = i;
        p->pipelines[best].micro_batches++;
        share[best] = -1;
        given++;
    }
    free(share);
}

/* Scores one structure; keeps it in *best when it is feasible and faster. */
static ah_status_t try_structure(const ah_model_t *m, const ah_cluster_t *c, const ah_planner_opts_t *o,
                                 ah_baseline_t kind, const ah_train_t *tr, int t, const bgroup_t *g, int P,
                                 int S, bool recompute, ah_plan_result_t *best, ah_error_t *err) {
    const int64_t N = tr->global_batch / tr->micro_batch;
    ah_plan_t p;
    ah_status_t st = ah_plan_init(&p, m, tr, t, c, P, err);
    for (int i = 0; i < P && st == AH_OK; i++) {
        st = ah_pipeline_alloc(&p.pipelines[i], S, err);
        p.pipelines[i].micro_batches = N / P;
    }
    if (st != AH_OK) {
        ah_plan_free(&p);
        return st;
    }
    fill_structure(&p, g, S, recompute);
    ah_eval_t e;
    st = ah_evaluate(&p, o->profile, &e, err);
    if (st == AH_OK && kind == AH_BASELINE_BATCH_BALANCED) {
        balance(&p, &e, N);
        ah_eval_free(&e);
        st = ah_evaluate(&p, o->profile, &e, err);
    }
    if (st != AH_OK) {
        ah_plan_free(&p);
        return st;
    }
    bool fits = e.feasible;
    if (kind == AH_BASELINE_UNIFORM) { /* types ignored: every stage must fit the smallest GPU */
        int64_t smallest = INT64_MAX;
        for (int r = 0; r < e.n_devices; r++)
            if (e.devices[r].capacity_bytes < smallest) smallest = e.devices[r].capacity_bytes;
        for (int r = 0; r < e.n_devices; r++) fits &= e.devices[r].memory_bytes <= smallest;
    }
    /* Megatron-LM runs on every GPU it is given (world size = DP x PP x TP); picking a subset by
     * speed would be type-aware. So uniform keeps the layout that uses the most devices and only
     * then the fastest; without this, a large micro-batch (few micro-batches, so few pipelines)
     * let it keep just the first, fast devices in cluster order. */
    const int used = P * S * t, best_used = best->plan.pipelines ? best->plan.n_pipelines *
                                                                       best->plan.pipelines[0].n_stages * best->plan.tp
                                                                 : 0;
    const bool better = !best->plan.pipelines ||
                        (kind == AH_BASELINE_UNIFORM && used != best_used
                             ? used > best_used
                             : e.pred.iteration_s < best->eval.pred.iteration_s);
    if (fits && better) {
        ah_plan_result_free(best);
        best->plan = p;
        best->eval = e;
        best->plan.has_predicted = true;
        best->plan.predicted = e.pred;
        best->search_value_s = e.pred.iteration_s;
        return AH_OK;
    }
    ah_eval_free(&e);
    ah_plan_free(&p);
    return AH_OK;
}

ah_status_t ah_baseline_run(const ah_model_t *model, const ah_cluster_t *cluster,
                            const ah_planner_opts_t *opts, ah_baseline_t kind,
                            ah_plan_result_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    const ah_status_t checked = opts->profile ? ah_profile_check(opts->profile, model, cluster, err) : AH_OK;
    if (checked != AH_OK) return checked;
    const int G1 = ah_cluster_gpu_count(cluster);
    bgroup_t *g = malloc(sizeof *g * (size_t)(G1 > 0 ? G1 : 1));
    if (!g) return ah_error_set(err, AH_ERR_OOM, "out of host memory for the %s baseline", ah_baseline_name(kind));
    ah_status_t st = AH_OK;
    const int L = (int)model->n_layer;
    const int64_t top_mb = opts->train.micro_batch > 0 ? opts->train.micro_batch
                                                         : (opts->max_auto_mb > 0 ? opts->max_auto_mb : 8);
    for (int t = 1; t <= AH_MAX_TP && st == AH_OK; t++) {
        ah_error_t e;
        if (ah_model_check_tp(model, t, &e) != AH_OK) continue;
        int G = 0;
        for (int i = 0; i < cluster->n_nodes; i++)
            for (int k = 0; k < ah_node_groups(cluster, i, t, opts->train.precision); k++) g[G++] = (bgroup_t){i, k};
        for (int64_t mb = opts->train.micro_batch > 0 ? opts->train.micro_batch : 1; mb <= top_mb && st == AH_OK;
             mb++) {
            if (opts->train.global_batch % mb) continue;
            ah_train_t tr = opts->train;
            tr.micro_batch = mb;
            const int64_t N = tr.global_batch / mb;
            for (int S = 1; S <= L && S <= G && S <= AH_MAX_STAGES && st == AH_OK; S++) {
                int P = G / S;
                if (P > N) P = (int)N;
                if (kind == AH_BASELINE_UNIFORM)
                    while (P > 1 && N % P) P--;
                for (int rc = 0; rc < 2 && st == AH_OK; rc++)
                    st = try_structure(model, cluster, opts, kind, &tr, t, g, P, S, rc, out, err);
            }
        }
    }
    free(g);
    if (st == AH_OK && !out->plan.pipelines)
        st = ah_error_set(err, AH_ERR_INFEASIBLE,
                          "the %s baseline finds no plan that fits: %s",
                          ah_baseline_name(kind),
                          kind == AH_BASELINE_UNIFORM
                              ? "with types ignored every stage must fit the smallest GPU; use a smaller "
                                "micro-batch or more GPUs"
                              : "no symmetric layout fits; use a smaller micro-batch or more GPUs");
    if (st != AH_OK) ah_plan_result_free(out);
    return st;
}
