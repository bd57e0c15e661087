/* The planner's candidates (planner.h, ah_cand_t): a set of pipelines, each a list of TP
 * groups by node, grown and copied by the searches; scored with the stage table's costs (the
 * search's own value) and built into a plan. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"
#include "plan/replay.h"

#include "core/vec.h"

void ah_cand_free(ah_cand_t *c) {
    free(c->S);
    free(c->cp);
    free(c->off);
    free(c->node);
    free(c->n);
    free(c->caps);
    memset(c, 0, sizeof *c);
}

bool ah_cand_push_cp(ah_cand_t *c, int S, const int *nodes, int cp) {
    /* S, cp, off and n share cap_P: each grows from it to the same capacity */
    int cap_s = c->cap_P, cap_cp = c->cap_P, cap_off = c->cap_P, cap_n = c->cap_P;
    if (!ah_grow(&c->S, &cap_s, c->P + 1, sizeof *c->S) || !ah_grow(&c->cp, &cap_cp, c->P + 1, sizeof *c->cp) ||
        !ah_grow(&c->off, &cap_off, c->P + 1, sizeof *c->off) || !ah_grow(&c->n, &cap_n, c->P + 1, sizeof *c->n))
        return false;
    c->cap_P = cap_s;
    if (!ah_grow(&c->node, &c->cap_stages, c->n_stages + S, sizeof *c->node)) return false;
    c->S[c->P] = S;
    c->cp[c->P] = cp;
    c->off[c->P] = c->n_stages;
    c->n[c->P] = 0;
    memcpy(c->node + c->n_stages, nodes, sizeof(int) * (size_t)S);
    c->n_stages += S;
    c->P++;
    return true;
}

bool ah_cand_copy(ah_cand_t *dst, const ah_cand_t *src, int caps_len) {
    ah_cand_free(dst);
    for (int p = 0; p < src->P; p++)
        if (!ah_cand_push_cp(dst, src->S[p], src->node + src->off[p], src->cp[p])) return false;
    memcpy(dst->n, src->n, sizeof(int64_t) * (size_t)src->P);
    dst->hier = src->hier;
    if (src->caps) {
        dst->caps = malloc(sizeof(int) * (size_t)caps_len);
        if (!dst->caps) return false;
        memcpy(dst->caps, src->caps, sizeof(int) * (size_t)caps_len);
    }
    return true;
}

int ah_node_groups(const ah_cluster_t *c, int node, int t, ah_precision_t p) {
    return ah_gpu_runs(&c->types[c->nodes[node].type], p) ? c->nodes[node].count / t : 0;
}

/* Stage types of pipeline p. */
static void cand_types(const ah_sctx_t *x, const ah_cand_t *c, int p, int *ty) {
    for (int s = 0; s < c->S[p]; s++) ty[s] = x->cluster->nodes[c->node[c->off[p] + s]].type;
}

/* Whether c's stages are in two zones or more (nodes: or on two nodes or more). */
static bool spans(const ah_cluster_t *cl, const ah_cand_t *c, bool nodes) {
    for (int i = 1; i < c->n_stages; i++)
        if (nodes ? c->node[i] != c->node[0] : strcmp(cl->nodes[c->node[i]].zone, cl->nodes[c->node[0]].zone) != 0)
            return true;
    return false;
}

/* Whether a DP group of c may sit on faster links than c's worst (`worst`, on which the closed
 * form prices every group): not on one node, nor, without per-pair links, where the worst is
 * between nodes of one zone and no node holds two of c's stages (every group of two members or
 * more then crosses nodes of that zone: the closed form's link). true when out of host memory. */
static bool may_stay_local(const ah_cluster_t *cl, const ah_cand_t *c, ah_link_t worst) {
    if (worst == AH_LINK_INTRA) return false;
    if (cl->net.n_links > 0 || worst > AH_LINK_INTER_NODE) return true;
    bool *seen = calloc((size_t)cl->n_nodes, sizeof *seen), twice = !seen;
    for (int i = 0; seen && i < c->n_stages && !twice; i++) {
        twice = seen[c->node[i]];
        seen[c->node[i]] = true;
    }
    free(seen);
    return twice;
}

static ah_status_t cand_pipelines(ah_sctx_t *x, const ah_cand_t *c, ah_plan_t *p, ah_stage_t *into, ah_error_t *err);

/* A view of the plan c (scored) builds into: the search's model, training and cluster, not copies;
 * its pipelines and stages in x's room (x->view_pipes, view_stages), valid until the next view.
 * false when out of host memory. */
static bool view_of(ah_sctx_t *x, const ah_cand_t *c, ah_plan_t *view) {
    *view = (ah_plan_t){.model = *x->model, .train = x->train, .tp = x->t, .cluster = *x->cluster, .n_pipelines = c->P};
    if (!ah_grow(&x->view_pipes, &x->view_cap_pipes, c->P, sizeof *x->view_pipes) ||
        !ah_grow(&x->view_stages, &x->view_cap_stages, c->n_stages, sizeof *x->view_stages))
        return false;
    view->pipelines = x->view_pipes;
    ah_error_t err = {0};
    return cand_pipelines(x, c, view, x->view_stages, &err) == AH_OK;
}

/* The DP sync of c (its split and micro-batches set) as ah_evaluate prices it, each DP group on the
 * links it crosses (plan/dp_price.h): the flat ring's into *ring and, where weigh_hier and a DP group
 * of c spans two domains (regions, else zones), the hierarchical sync's into *hier; NAN for either
 * not found (out of host memory; no group across domains). The hierarchical sync is weighed only
 * where a DP ring cannot stay inside a region or zone: elsewhere both price a group on its own
 * ring. */
static void view_syncs(ah_sctx_t *x, const ah_cand_t *c, bool weigh_hier, double *ring, double *hier) {
    ah_plan_t view;
    *ring = *hier = NAN;
    if (!view_of(x, c, &view)) return;
    if (!x->links_memo) x->links_memo = ah_dp_links_memo_new(x->cluster); /* NULL: each group found afresh */
    ah_plan_dp_syncs(&view, x->links_memo, ring, weigh_hier && ah_dp_most_domains(&view, 2) >= 2 ? hier : NULL);
}

double ah_cand_score_below(ah_sctx_t *x, ah_cand_t *c, double beat) {
    const ah_cluster_t *cl = x->cluster;
    const int P = c->P;
    ah_pentry_t **ent = malloc(sizeof *ent * (size_t)P);
    double *extra = malloc(sizeof *extra * (size_t)P), *pace = malloc(sizeof *pace * (size_t)P);
    if (!ent || !extra || !pace) {
        free(ent);
        free(extra);
        free(pace);
        return NAN;
    }
    /* the plan-wide DP link, as ah_evaluate finds it */
    const int d0 = c->node[0];
    ah_link_t worst = AH_LINK_INTRA;
    int slow = cl->nodes[d0].type, holders = 0, dp_ranks = 0;
    double result = 0;
    int ty[AH_MAX_STAGES];
    for (int p = 0; p < P && !isnan(result); p++) {
        const int S = c->S[p], *nd = c->node + c->off[p];
        ah_sctx_t *xp = ah_sctx_of_cp(x, c->cp[p]); /* NULL: a degree x has no table for */
        if (!xp) {
            result = NAN;
            break;
        }
        const ah_cost_ctx_t ctx = ah_sctx_cost(xp); /* a hop carries a CP rank's T / cp tokens */
        cand_types(x, c, p, ty);
        double p2p = 0, hop[AH_MAX_STAGES];
        for (int s = 0; s < S; s++) {
            ah_link_t l = ah_link_between(cl, d0, nd[s]);
            if (l > worst) worst = l;
            if (cl->types[ty[s]].intra_node_gb_s < cl->types[slow].intra_node_gb_s) slow = ty[s];
            if (s + 1 < S) { /* as ah_evaluate prices the hop */
                ah_link_info_t l = ah_link_of(cl, nd[s], nd[s + 1], ty[s], ty[s + 1]);
                l.bw = ah_link_shared_bw(&l, x->t * P);
                p2p += hop[s] = ah_p2p_seconds_on(&ctx, &l, ty[s], ty[s + 1]);
            }
        }
        extra[p] = 2 * p2p;
        pace[p] = ah_p2p_pace(hop, S);
        /* a layer's DP group: every pipeline's CP ranks, as ah_evaluate sums them */
        holders += ((x->model->tied && S > 1) ? 2 : 1) * c->cp[p];
        dp_ranks += c->cp[p];
        ent[p] = ah_pipe_get(xp, S, ty, c->caps);
        if (!ent[p]) result = NAN;
    }
    if (!isnan(result)) result = ah_greedy_split(P, ent, extra, pace, x->N, c->n);
    const double bw = ah_link_bw(cl, worst, slow, slow), lat = ah_link_latency(cl, worst);
    c->pipe_s = result;
    c->hier = false;
    c->dp_bw = bw;
    c->dp_lat = lat;
    c->holders = holders;
    c->dp_ranks = dp_ranks;
    if (isfinite(result)) {
        double sync = 0, opt = 0;
        ah_split_t sp;
        for (int p = 0; p < P && isfinite(result); p++) {
            /* identical neighbours (templates) have the same split, so the same sync and opt */
            if (p > 0 && ent[p] == ent[p - 1] && c->n[p] == c->n[p - 1]) continue;
            if (!ah_pipe_split(ah_sctx_of_cp(x, c->cp[p]), ent[p], c->n[p], &sp)) result = NAN;
            const int S = c->S[p];
            cand_types(x, c, p, ty);
            for (int s = 0; s < S; s++) {
                const int kind = ah_stage_kind(s, S);
                double v = ah_stage_sync_s(x, sp.nb[s], kind, dp_ranks, holders, bw, lat);
                if (v > sync) sync = v;
                v = ah_stage_opt_s(x, ty[s], kind, sp.nb[s]);
                if (v > opt) opt = v;
            }
        }
        /* Where the candidate could still beat `beat` with no sync at all and a group may stay
         * off its worst link: each DP group's flat ring on its own links, as ah_evaluate prices it
         * (the closed form above prices every group on the plan's slowest link, which a group
         * inside one node, zone or region does not cross), and across zones the hierarchical
         * sync too */
        if (isfinite(result) && !(result + opt > beat) && may_stay_local(cl, c, worst)) {
            double ring, hier;
            view_syncs(x, c, !x->ring_only && spans(cl, c, false), &ring, &hier);
            if (!isnan(ring)) sync = ring; /* NAN (out of host memory): the closed form */
            c->hier = hier < sync;         /* NAN: the ring */
            if (c->hier) sync = hier;
        }
        result = result + sync + opt;
    }
    free(ent);
    free(extra);
    free(pace);
    return result;
}

/* The pipelines of a scored candidate into p's (allocated, c->P of them; devices: the next free TP
 * group of each node), their stages allocated or, where into is not NULL, in into (c->n_stages of
 * them, pipeline i's from c->off[i]; of each stage its blocks, type, recompute flag and devices
 * written, the devices past its own left as they were: no reader passes ah_stage_devices). */
static ah_status_t cand_pipelines(ah_sctx_t *x, const ah_cand_t *c, ah_plan_t *p, ah_stage_t *into, ah_error_t *err) {
    int *used = calloc((size_t)x->cluster->n_nodes, sizeof *used);
    if (!used) return ah_error_set(err, AH_ERR_OOM, "out of host memory building a plan");
    ah_status_t st = AH_OK;
    int ty[AH_MAX_STAGES];
    for (int i = 0; i < c->P && st == AH_OK; i++) {
        ah_pipeline_t *pl = &p->pipelines[i];
        const int S = c->S[i];
        if (into)
            *pl = (ah_pipeline_t){.n_stages = S, .stages = into + c->off[i], .cp = 1};
        else if ((st = ah_pipeline_alloc(pl, S, err)) != AH_OK)
            break;
        pl->micro_batches = c->n[i];
        if (c->cp[i] > 1) pl->cp = c->cp[i];
        cand_types(x, c, i, ty);
        ah_split_t sp;
        ah_sctx_t *xi = ah_sctx_of_cp(x, c->cp[i]);
        ah_pentry_t *e = xi ? ah_pipe_get(xi, S, ty, c->caps) : NULL;
        if (!e || !ah_pipe_split(xi, e, c->n[i], &sp)) {
            st = ah_error_set(err, AH_ERR_INTERNAL, "planner: pipeline %d of the chosen plan has no split", i);
            break;
        }
        for (int s = 0, first = 0; s < S; s++) {
            ah_stage_t *sg = &pl->stages[s];
            const int node = c->node[c->off[i] + s], g = used[node]; /* CP: c->cp[i] TP groups in a row */
            used[node] += c->cp[i];
            sg->first = first;
            sg->last = first + sp.nb[s];
            first = sg->last;
            sg->type = ty[s];
            sg->recompute = sp.rc[s];
            for (int r = 0; r < x->t * c->cp[i]; r++) sg->devices[r] = (ah_device_ref_t){node, g * x->t + r};
        }
    }
    free(used);
    return st;
}

/* The plan of a scored candidate. */
static ah_status_t cand_build(ah_sctx_t *x, const ah_cand_t *c, ah_plan_t *out, ah_error_t *err) {
    ah_status_t st = ah_plan_init(out, x->model, &x->train, x->t, x->cluster, c->P, err);
    if (st == AH_OK) st = cand_pipelines(x, c, out, NULL, err);
    if (st != AH_OK) ah_plan_free(out);
    return st;
}

double ah_cand_egress_usd(ah_sctx_t *x, const ah_cand_t *c) {
    const bool uploads = x->train.ckpt.every > 0 && x->train.ckpt.cloud_region[0]; /* maybe from another region */
    if (!spans(x->cluster, c, false) && !uploads) return 0;
    ah_plan_t view;
    double usd = NAN;
    if (view_of(x, c, &view)) {
        ah_plan_traffic_t t;
        ah_plan_traffic(&view, &t);
        usd = t.egress_usd;
    }
    return usd;
}

ah_status_t ah_cand_plan(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o, int t,
                         int64_t m, ah_cand_t *c, double *value, ah_plan_t *out, ah_error_t *err) {
    ah_train_t tr = o->train;
    tr.micro_batch = m;
    unsigned cp_mask = 0; /* the CP degrees c takes */
    for (int p = 0; p < c->P; p++) cp_mask |= c->cp[p] > 1 ? 1u << __builtin_ctz((unsigned)c->cp[p]) : 0;
    ah_sctx_t x;
    ah_status_t st = ah_sctx_init_cp(&x, model, cluster, &tr, t, o->profile, cp_mask, err);
    if (st != AH_OK) return st;
    x.ring_only = o->search_ring_only;
    *value = ah_cand_score(&x, c); /* fills the memo the split needs; the value as offered */
    st = cand_build(&x, c, out, err);
    if (st == AH_OK) out->dp_sync = c->hier ? AH_DP_SYNC_HIERARCHICAL : AH_DP_SYNC_RING;
    ah_sctx_free(&x);
    return st;
}
