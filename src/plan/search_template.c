/* Template search for clusters too large to enumerate: exploit that groups of one class (GPU type
 * + zone) are interchangeable up to node identity, and that at scale most pipelines are copies.
 *
 * A template is S stages of one class; the class's groups are laid out node by node and cut into
 * k = floor(G / S) pipelines of consecutive groups (so stages of a pipeline share a node where
 * they can, and p2p stays on the node's link). Per class the search tries S = 0 (class idle) and
 * S from the smallest length that fits memory up to a window above it; for the cost objective
 * also fewer copies (k, k/4, k/16, k/64). Every combination across classes is scored exactly
 * (search.c: exact layer split, recomputation and micro-batch split for those pipelines, exact DP
 * sync and optimizer) and offered. Not searched: pipelines that mix classes, and other groupings;
 * the planner's lower bound shows what that can cost.
 */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/planner.h"

#define MAX_CLASSES 32
#define MAX_OPTS 24
#define MAX_COMBOS 1500

typedef struct {
    int type, zone_node; /* zone_node: a node of the class, to compare zones */
    int G;
    int *gnode;          /* [G] node of each group, node by node */
    int nopt;
    int optS[MAX_OPTS], optK[MAX_OPTS];
} tclass_t;

typedef struct {
    ah_search_t *s;
    ah_sctx_t *x;
    int nc;
    tclass_t *cls;
    int choice[MAX_CLASSES];
    ah_cand_t cand;
    bool oom;
} tp_t;

static int smallest_fitting(ah_sctx_t *x, const tclass_t *c) {
    int ty[AH_MAX_STAGES];
    int top = c->G < x->L ? c->G : x->L;
    if (top > AH_MAX_STAGES) top = AH_MAX_STAGES;
    for (int S = 1; S <= top; S++) {
        for (int s = 0; s < S; s++) ty[s] = c->type;
        ah_pentry_t *e = ah_pipe_get(x, S, ty, NULL);
        if (!e) return -1;
        if (isfinite(ah_pipe_time(x, e, 1))) return S;
    }
    return 0;
}

static void combos(tp_t *t, int i) {
    if (t->oom) return;
    if (i == t->nc) {
        ah_cand_t *c = &t->cand;
        c->P = 0;
        c->n_stages = 0;
        for (int k = 0; k < t->nc; k++) {
            const tclass_t *cl = &t->cls[k];
            const int S = cl->optS[t->choice[k]], n = cl->optK[t->choice[k]];
            for (int p = 0; p < n && !t->oom; p++)
                if (!ah_cand_push(c, S, cl->gnode + p * S)) t->oom = true;
        }
        if (c->P == 0 || c->P > t->x->N || t->oom) return;
        double v = ah_cand_score(t->x, c);
        if (isnan(v)) t->oom = true;
        ah_search_offer(t->s, t->x, c, v);
        return;
    }
    for (int o = 0; o < t->cls[i].nopt; o++) {
        t->choice[i] = o;
        combos(t, i + 1);
    }
}

ah_status_t ah_search_template(ah_search_t *s, ah_sctx_t *x, ah_error_t *err) {
    const ah_cluster_t *c = x->cluster;
    tp_t t = {0};
    t.s = s;
    t.x = x;
    t.cls = calloc(MAX_CLASSES, sizeof *t.cls);
    if (!t.cls) return ah_error_set(err, AH_ERR_OOM, "out of host memory in the template search");
    /* classes: (type, zone) */
    for (int i = 0; i < c->n_nodes && !t.oom; i++) {
        const int g = ah_node_groups(c, i, x->t);
        if (g == 0) continue;
        int k = 0;
        while (k < t.nc && !(t.cls[k].type == c->nodes[i].type &&
                             ah_link_between(c, t.cls[k].zone_node, i) != AH_LINK_INTER_ZONE))
            k++;
        if (k == t.nc) {
            if (t.nc == MAX_CLASSES) continue; /* beyond the classes this search handles: left idle */
            t.cls[t.nc++] = (tclass_t){.type = c->nodes[i].type, .zone_node = i};
        }
        tclass_t *cl = &t.cls[k];
        int *gn = realloc(cl->gnode, sizeof(int) * (size_t)(cl->G + g));
        if (!gn) {
            t.oom = true;
            break;
        }
        cl->gnode = gn;
        for (int j = 0; j < g; j++) cl->gnode[cl->G++] = i;
    }
    /* per class: a window of lengths above the smallest that fits (and for the cost objective a
     * few copy counts each), sized so that the product of the option counts stays near
     * MAX_COMBOS */
    const int kc = ah_search_objective(s) == AH_OBJECTIVE_COST ? 4 : 1;
    int window = (MAX_OPTS - 1) / kc;
    while (window > 1 && pow(1 + window * kc, t.nc) > MAX_COMBOS) window--;
    for (int k = 0; k < t.nc && !t.oom; k++) {
        tclass_t *cl = &t.cls[k];
        cl->optS[0] = 0;
        cl->optK[0] = 0;
        cl->nopt = 1;
        int smin = smallest_fitting(x, cl);
        if (smin < 0) t.oom = true;
        if (smin <= 0) continue;
        int top = cl->G < x->L ? cl->G : x->L;
        if (top > AH_MAX_STAGES) top = AH_MAX_STAGES;
        for (int S = smin; S <= top && S < smin + window; S++)
            for (int j = 0, prev = 0; j < kc && cl->nopt < MAX_OPTS; j++) {
                int copies = (cl->G / S) >> (2 * j); /* k, k/4, k/16, k/64 */
                if (copies < 1) copies = 1;
                if (copies == prev) break;
                prev = copies;
                cl->optS[cl->nopt] = S;
                cl->optK[cl->nopt++] = copies;
            }
    }
    if (!t.oom) combos(&t, 0);
    for (int k = 0; k < t.nc; k++) free(t.cls[k].gnode);
    free(t.cls);
    ah_cand_free(&t.cand);
    if (t.oom) return ah_error_set(err, AH_ERR_OOM, "out of host memory in the template search");
    return AH_OK;
}
