/* One CP rank's view of a planning problem (planner.h ah_cp_view_t; issue 38; docs/planner.md
 * "Context parallelism"), shared by the CP search (cp_choice.c) and megatron-best with CP
 * (baseline_cp.c).
 *
 * A device of the view stands for the cp devices of a CP group (one per CP rank, for one TP rank):
 * a view TP group of t devices is a CP group of t x cp real devices, cp-major. Node-local (span
 * 1): every node holds count / cp view devices. Spanning nodes (span k > 1, as Megatron-Core runs
 * CP across nodes with TP inside each): k alike nodes (one GPU type, zone, region, spot and price)
 * next to each other in cluster order form one view node; CP ranks 0 .. cp/k - 1 of a group sit
 * on the first, the next cp/k on the second, and so on, so each node holds t x cp/k devices of
 * each group and the view node min(count / (cp/k)) view devices; the TP groups stay inside a node.
 * Nodes left over (fewer than k alike in a run) stay node-local view nodes. The ring then crosses
 * the nodes' link: ah_evaluate prices it on the slowest hop (plan/evaluate.c ring_link).
 *
 * Ownership: the view owns its node table and member map (ah_cp_view_free); types and the network
 * are the real cluster's (shared). Errors: AH_ERR_OOM; ah_cp_expand_fit: the check's or the
 * evaluation's. Collectives: none. */
#define AH_PLANNER_INTERNAL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/evaluate.h"
#include "planner/planner.h"

/* Whether nodes a and b can hold one CP group between them. */
static bool alike(const ah_node_t *a, const ah_node_t *b) {
    return a->type == b->type && strcmp(a->zone, b->zone) == 0 && strcmp(a->region, b->region) == 0 &&
           a->spot == b->spot && a->usd_per_gpu_hour == b->usd_per_gpu_hour && a->no_price == b->no_price;
}

/* The view's nodes for (cp, span) into v (its node table, span and members sized for c->n_nodes
 * view nodes), or only counted with v NULL; returns their count. *spanning: how many span nodes. */
static int build_nodes(const ah_cluster_t *c, int cp, int span, ah_cp_view_t *v, int *spanning) {
    const int per = cp / span;
    bool *used = calloc((size_t)c->n_nodes, sizeof *used);
    int n = 0;
    *spanning = 0;
    for (int i = 0; used && i < c->n_nodes; i++) {
        if (used[i]) continue;
        int run[8] = {i}, k = 1; /* up to span alike nodes from i on, each with per devices */
        for (int j = i + 1; span > 1 && c->nodes[i].count >= per && j < c->n_nodes && k < span; j++)
            if (!used[j] && alike(&c->nodes[i], &c->nodes[j]) && c->nodes[j].count >= per) run[k++] = j;
        if (k < span) k = 1; /* a node-local view node */
        int count = c->nodes[i].count / cp;
        if (k > 1) {
            count = c->nodes[i].count / per;
            for (int m = 1; m < k; m++)
                if (c->nodes[run[m]].count / per < count) count = c->nodes[run[m]].count / per;
            ++*spanning;
        }
        for (int m = 0; m < k; m++) used[run[m]] = true;
        if (v) {
            v->cluster.nodes[n] = c->nodes[i];
            v->cluster.nodes[n].count = count;
            v->span[n] = k;
            memcpy(v->members + (size_t)n * cp, run, sizeof(int) * (size_t)k);
        }
        n++;
    }
    free(used);
    return n;
}

int ah_cp_max_span(const ah_cluster_t *c, int cp) {
    int best = 1, spanning;
    for (int k = 2; k <= cp && k <= 8; k *= 2) {
        build_nodes(c, cp, k, NULL, &spanning);
        if (spanning) best = k;
    }
    return best;
}

void ah_cp_unfit(const ah_cluster_t *c, const ah_planner_opts_t *o, int cp, char *why, size_t cap) {
    int devices = 0;
    for (int i = 0; i < c->n_nodes; i++) devices += c->nodes[i].count / cp;
    why[0] = '\0';
    if (o->train.seq_len % (2 * cp) != 0)
        snprintf(why, cap, "--seq-len %lld is not a multiple of 2 x %d (the causal load balance's chunks)",
                 (long long)o->train.seq_len, cp);
    else if (devices == 0 && ah_cp_max_span(c, cp) == 1)
        snprintf(why, cap, "no node of the cluster has %d devices for a CP group, nor do alike nodes of one zone "
                 "between them", cp);
}

ah_status_t ah_cp_view(const ah_cluster_t *cluster, const ah_planner_opts_t *o, int cp, int span, ah_cp_view_t *v,
                       ah_error_t *err) {
    memset(v, 0, sizeof *v);
    v->cluster = *cluster;
    v->cp = cp;
    const size_t n = (size_t)cluster->n_nodes;
    v->cluster.nodes = malloc(sizeof *v->cluster.nodes * n);
    v->span = malloc(sizeof *v->span * n);
    v->members = malloc(sizeof *v->members * n * (size_t)cp);
    if (!v->cluster.nodes || !v->span || !v->members) {
        ah_cp_view_free(v);
        return ah_error_set(err, AH_ERR_OOM, "out of host memory for the CP view");
    }
    int spanning;
    v->cluster.n_nodes = build_nodes(cluster, cp, span, v, &spanning);
    v->opts = *o; /* the view holds 1 / cp of the GPUs and of the tokens per iteration */
    v->opts.train.seq_len = o->train.seq_len / cp;
    v->opts.budget_usd_per_hour = o->budget_usd_per_hour / cp;
    v->opts.min_tokens_per_s = o->min_tokens_per_s / cp;
    v->opts.cp = 1; /* a CP rank's view is planned whole (its baselines too) */
    v->opts.cp_per_pipeline = 0;
    return AH_OK;
}

void ah_cp_view_free(ah_cp_view_t *v) {
    free(v->cluster.nodes);
    free(v->span);
    free(v->members);
    v->cluster.nodes = NULL, v->span = v->members = NULL;
}

/* The real device of CP rank j, TP rank r of view TP group g on view node vn (tp devices a group). */
static ah_device_ref_t real_device(const ah_cp_view_t *view, int vn, int g, int j, int r, int tp) {
    const int k = view->span[vn], per = view->cp / k;
    return (ah_device_ref_t){view->members[(size_t)vn * view->cp + j / per], (g * per + j % per) * tp + r};
}

ah_status_t ah_cp_expand(const ah_cp_view_t *view, const ah_plan_t *v, const ah_cluster_t *cluster,
                         const ah_train_t *train, bool recompute_all, ah_plan_t *out, ah_error_t *err) {
    ah_train_t tr = v->train;
    tr.seq_len = train->seq_len;
    const int cp = view->cp;
    ah_status_t st = ah_plan_init(out, &v->model, &tr, v->tp, cluster, v->n_pipelines, err);
    for (int i = 0; i < v->n_pipelines && st == AH_OK; i++) {
        const ah_pipeline_t *vp = &v->pipelines[i];
        ah_pipeline_t *pl = &out->pipelines[i];
        if ((st = ah_pipeline_alloc(pl, vp->n_stages, err)) != AH_OK) break;
        pl->micro_batches = vp->micro_batches;
        pl->schedule = vp->schedule;
        pl->cp = cp;
        for (int s = 0; s < vp->n_stages; s++) {
            const ah_stage_t *vs = &vp->stages[s];
            ah_stage_t *sg = &pl->stages[s];
            sg->first = vs->first;
            sg->last = vs->last;
            sg->type = vs->type;
            sg->recompute = vs->recompute || recompute_all;
            const int g = vs->devices[0].index / v->tp;
            for (int j = 0; j < cp; j++)
                for (int r = 0; r < v->tp; r++)
                    sg->devices[j * v->tp + r] = real_device(view, vs->devices[0].node, g, j, r, v->tp);
        }
    }
    if (st != AH_OK) ah_plan_free(out);
    return st;
}

ah_status_t ah_cp_expand_fit(const ah_cp_view_t *view, const ah_plan_t *v, const ah_cluster_t *cluster,
                             const ah_planner_opts_t *o, ah_plan_t *plan, ah_eval_t *eval, bool *fits,
                             ah_error_t *err) {
    ah_status_t st = AH_OK;
    *fits = false;
    for (int rc = 0; rc < 2 && st == AH_OK && !*fits; rc++) {
        ah_plan_free(plan);
        ah_eval_free(eval);
        st = ah_cp_expand(view, v, cluster, &o->train, rc == 1, plan, err);
        if (st == AH_OK) st = ah_plan_validate(plan, err);
        if (st == AH_OK) st = ah_evaluate(plan, o->profile, eval, err);
        *fits = st == AH_OK && eval->feasible;
    }
    return st;
}
