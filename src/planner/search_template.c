/* Template search for clusters too large to enumerate: exploit that groups of one GPU type in one
 * zone are interchangeable up to node identity, and that at scale most pipelines are copies.
 *
 * A template is S stages of one type; the type's groups are laid out node by node and cut into
 * k = floor(G / S) pipelines of consecutive groups (so stages of a pipeline share a node where
 * they can and p2p stays on the fastest link). The DP sync is priced on the worst link of the
 * whole plan, so the search runs once per zone (DP sync on the inter-node link), on clusters of
 * two regions or more once per region of two zones or more (its inter-zone links, no WAN), and
 * once over all zones (types merged across zones). In each run every type has the options
 * "idle", S = S_min .. S_min + WINDOW (S_min: the shortest pipeline that fits memory) and, past
 * the window, the NEAR shortest pipelines whose stages hold at most X blocks, for every X (less DP
 * sync; a stage more lets the last stage hold fewer blocks beside the head); for the cost
 * objective also fewer copies (k, k/4, k/16, k/64). One more coordinate chooses a mixed template
 * (stages of several types, memory-rich types first; in a run of more than MIX_TYPES types, of
 * the MIX_TYPES with the most memory), repeated once or as often as the groups
 * allow; single-type pipelines use what it leaves: small ones (up to MIX_PER_TYPE stages of each
 * type) on runs of at most MIX_MAX_GROUPS groups, and "spread" ones (a subset of the types' groups
 * dealt out over c copies) on runs of any size.
 *
 * The descent starts from every type at S_min, then from every X level (levels()), and changes
 * one coordinate at a time while that improves the objective. Every candidate is scored exactly
 * (search.c: exact layer split and recomputation per pipeline — with memory priced as if n >= S,
 * see ah_sctx_t.coarse_memory — exact micro-batch split, DP sync and optimizer) and offered.
 *
 * Not searched: other mixed orders and sizes, more than one mixed template, other groupings, and
 * option combinations the descent does not reach; the planner's lower bound shows what that can
 * cost.
 */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#define MAX_OPTS 256
#define WINDOW 8
#define NEAR 4 /* stage counts kept past the window, per most-blocks-per-stage X */
#define ROUNDS 4
#define MIX_MAX_GROUPS 64 /* mixed templates only in runs with at most this many groups */
#define MIX_PER_TYPE 4    /* stages of one type in a mixed template: 0 .. 4 */
#define MAX_MIX 512
#define SPREAD_LONGEST 12 /* spread templates kept whatever their stage count */
#define MIX_TYPES 8       /* types a mixed template draws on: a run's MIX_TYPES with the most memory */

typedef struct {
    int type;
    int G;
    int *gnode; /* [G] node of each group, node by node */
    int nopt;
    int optS[MAX_OPTS], optK[MAX_OPTS];
} tclass_t;

typedef struct {
    ah_search_t *s;
    ah_sctx_t *x;
    int nc;
    tclass_t *cls;
    int *choice;    /* [nc + 1]: an option per type, then the mixed template's */
    int *used;      /* [nc] groups of each class a candidate's mixed pipelines took */
    /* mixed templates draw on n_slots <= MIX_TYPES classes, slot j being class slot_cls[j];
     * order[q]: the slots in stage order. Option 0 none; option o: mix_a[o][j] stages of slot j's
     * class, mix_k[o] copies */
    int n_slots, slot_cls[MIX_TYPES], order[MIX_TYPES];
    int n_mix;
    int mix_a[MAX_MIX][MIX_TYPES];
    int mix_k[MAX_MIX];
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

/* Puts the nodes in prev's zone first (stable), so a mixed pipeline crosses zones as few times as
 * its types allow. */
static void same_zone_first(const ah_cluster_t *c, int prev, int *nodes, int n) {
    int out[AH_MAX_STAGES], k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if ((ah_link_between(c, prev, nodes[i]) < AH_LINK_INTER_ZONE) == (pass == 0)) out[k++] = nodes[i];
    memcpy(nodes, out, sizeof(int) * (size_t)n);
}

/* Scores the current choice; returns its objective key (+inf: infeasible or not eligible).
 * Mixed pipelines take their groups from the end of each type's list, single-type pipelines from
 * the start, as many copies as the option asks for and the rest allows. */
static double score_choice(tp_t *t) {
    ah_cand_t *c = &t->cand;
    c->P = 0;
    c->n_stages = 0;
    const int mo = t->choice[t->nc];
    int *used = t->used, nodes[AH_MAX_STAGES];
    memset(used, 0, sizeof(int) * (size_t)t->nc);
    for (int j = 0; mo > 0 && j < t->mix_k[mo] && !t->oom; j++) {
        int S = 0;
        for (int q = 0; q < t->n_slots; q++) {
            const int slot = t->order[q], k = t->slot_cls[slot], from = S;
            for (int i = 0; i < t->mix_a[mo][slot]; i++) nodes[S++] = t->cls[k].gnode[t->cls[k].G - 1 - used[k]++];
            if (from > 0) same_zone_first(t->x->cluster, nodes[from - 1], nodes + from, S - from);
        }
        if (!ah_cand_push(c, S, nodes)) t->oom = true;
    }
    for (int k = 0; k < t->nc; k++) {
        const tclass_t *cl = &t->cls[k];
        const int S = cl->optS[t->choice[k]];
        int n = cl->optK[t->choice[k]];
        if (S > 0 && n > (cl->G - used[k]) / S) n = (cl->G - used[k]) / S;
        for (int p = 0; p < n && !t->oom; p++)
            if (!ah_cand_push(c, S, cl->gnode + p * S)) t->oom = true;
    }
    if (c->P == 0 || c->P > t->x->N || t->oom) return INFINITY;
    double v = ah_cand_score_below(t->x, c, ah_search_bound(t->s, t->x, c));
    if (isnan(v)) {
        t->oom = true;
        return INFINITY;
    }
    ah_search_offer(t->s, t->x, c, v);
    return ah_search_key(t->s, t->x, c, v);
}

/* Option counts per coordinate: the types, then the mixed template. */
static int n_options(const tp_t *t, int k) { return k < t->nc ? t->cls[k].nopt : t->n_mix; }

/* The first option of class cl with at least S stages (all copies), or its last. */
static int option_at_least(const tclass_t *cl, int S) {
    int o = 1;
    while (o + 1 < cl->nopt && cl->optS[o] < S) o++;
    return o;
}

/* Starting points by DP-sync level: for every X (most blocks per stage), every type on the
 * shortest pipelines whose stages hold at most X blocks, then each type idle or one or two stages
 * longer. Leaves the best point in t->choice and returns its key. */
static double levels(tp_t *t, double best) {
    int *keep = malloc(sizeof(int) * (size_t)(t->nc + 1));
    if (!keep) {
        t->oom = true;
        return best;
    }
    memcpy(keep, t->choice, sizeof(int) * (size_t)(t->nc + 1));
    const int L = t->x->L;
    for (int X = 1; X <= L && !t->oom; X++) {
        const int S = (L + X - 1) / X;
        if (X > 1 && S == (L + X - 2) / (X - 1)) continue; /* same stage count as X - 1 */
        for (int k = 0; k < t->nc; k++) t->choice[k] = t->cls[k].nopt > 1 ? option_at_least(&t->cls[k], S) : 0;
        t->choice[t->nc] = 0;
        double v = score_choice(t);
        for (int k = 0; k < t->nc && !t->oom; k++) {
            const int at = t->choice[k], alt[3] = {0, at + 1, at + 2};
            for (int i = 0; i < 3; i++) {
                if (alt[i] >= t->cls[k].nopt || alt[i] == t->choice[k]) continue;
                const int before = t->choice[k];
                t->choice[k] = alt[i];
                const double w = score_choice(t);
                if (w < v) v = w;
                else t->choice[k] = before;
            }
        }
        if (v < best) {
            best = v;
            memcpy(keep, t->choice, sizeof(int) * (size_t)(t->nc + 1));
        }
    }
    memcpy(t->choice, keep, sizeof(int) * (size_t)(t->nc + 1));
    free(keep);
    return best;
}

static void descend(tp_t *t) {
    for (int k = 0; k < t->nc; k++) t->choice[k] = t->cls[k].nopt > 1 ? 1 : 0; /* S_min, all copies */
    t->choice[t->nc] = 0;
    double best = score_choice(t);
    /* no single-type pipeline fits: start from the first mixed template that does */
    for (int o = 1; !isfinite(best) && o < t->n_mix && !t->oom; o++) {
        for (int k = 0; k < t->nc; k++) t->choice[k] = 0;
        t->choice[t->nc] = o;
        best = score_choice(t);
    }
    if (isfinite(best)) best = levels(t, best);
    for (int round = 0; round < ROUNDS && !t->oom; round++) {
        bool improved = false;
        for (int k = 0; k <= t->nc && !t->oom; k++) {
            const int keep = t->choice[k];
            int best_o = keep;
            for (int o = 0; o < n_options(t, k) && !t->oom; o++) {
                if (o == keep) continue;
                t->choice[k] = o;
                double v = score_choice(t);
                if (v < best) {
                    best = v;
                    best_o = o;
                }
            }
            t->choice[k] = best_o;
            improved |= best_o != keep;
        }
        if (!improved) break;
    }
}

/* Whether stage count S is worth a template of its own: the window above S_min (memory), and the
 * few shortest pipelines whose stages hold at most X blocks, for every X (fewer blocks per stage
 * means less DP sync; a stage or two more lets the last stage hold fewer blocks beside the head). */
static bool worth_trying(int S, int smin, int L) {
    if (S <= smin + WINDOW) return true;
    const int X = (L + S - 1) / S;      /* most blocks per stage at S stages */
    return S - (L + X - 1) / X < NEAR;  /* within NEAR of the fewest stages with that X */
}

/* Appends mixed option (a[k] stages of class k, `copies` copies) while there is room. */
static void add_mix(tp_t *t, const int *a, int copies) {
    if (t->n_mix >= MAX_MIX) return;
    memcpy(t->mix_a[t->n_mix], a, sizeof t->mix_a[0]);
    t->mix_k[t->n_mix++] = copies;
}

static int slot_max(const tp_t *t, int j) {
    const int G = t->cls[t->slot_cls[j]].G;
    return G < MIX_PER_TYPE ? G : MIX_PER_TYPE;
}

/* Small mixed templates (runs of at most MIX_MAX_GROUPS groups): up to MIX_PER_TYPE stages of
 * each type, at least two types, one copy or as many as the groups allow. */
static void small_mixes(tp_t *t) {
    int a[MIX_TYPES] = {0};
    for (;;) { /* odometer over a[j] in 0 .. min(MIX_PER_TYPE, G of slot j) */
        int j = 0;
        while (j < t->n_slots && ++a[j] > slot_max(t, j)) a[j++] = 0;
        if (j == t->n_slots) break;
        int types = 0, S = 0, copies = 1 << 30;
        for (int q = 0; q < t->n_slots; q++) {
            const int G = t->cls[t->slot_cls[q]].G;
            types += a[q] > 0;
            S += a[q];
            if (a[q] > 0 && G / a[q] < copies) copies = G / a[q];
        }
        if (types < 2 || S > t->x->L) continue;
        add_mix(t, a, 1);
        if (copies > 1) add_mix(t, a, copies);
    }
}

/* Spread mixed templates, for runs of any size: the groups of two or more types dealt out over c
 * copies, floor(G_k / c) stages of each type per copy (for each such split, the most copies it
 * allows): the SPREAD_LONGEST longest with at most L stages, and past them those whose stage count
 * is the fewest for its most blocks per stage X. */
static void spread_mixes(tp_t *t) {
    const int L = t->x->L, top = L < AH_MAX_STAGES ? L : AH_MAX_STAGES;
    for (unsigned sub = 1; sub < 1u << t->n_slots; sub++) {
        if (__builtin_popcount(sub) < 2) continue;
        int kept = 0;
        for (int c = 1;; c++) {
            int a[MIX_TYPES] = {0}, S = 0, S_next = 0;
            bool all = true;
            for (int j = 0; j < t->n_slots; j++)
                if (sub & (1u << j)) {
                    const int G = t->cls[t->slot_cls[j]].G;
                    a[j] = G / c;
                    all &= a[j] > 0;
                    S += a[j];
                    S_next += G / (c + 1);
                }
            if (!all) break;
            if (S_next == S) continue; /* the same stages per copy with c + 1: take the most copies */
            const int X = (L + S - 1) / S; /* most blocks per stage at S stages */
            if (S <= top && (kept++ < SPREAD_LONGEST || S == (L + X - 1) / X)) add_mix(t, a, c);
        }
    }
}

/* A class's memory in the run: its groups times a group's capacity. */
static double class_memory(const tp_t *t, int k) { return t->cls[k].G * t->x->capacity[t->cls[k].type]; }

/* Mixed templates over the run's classes, or in a run of more than MIX_TYPES types over the
 * MIX_TYPES with the most memory (in class order), their stages ordered by memory (largest first:
 * early 1F1B stages hold the most activations). Option 0 is none. */
static void mixed_options(tp_t *t) {
    const ah_sctx_t *x = t->x;
    t->n_mix = 1;
    t->n_slots = 0;
    for (int k = 0; k < t->nc; k++) {
        int richer = 0; /* classes ahead of k: more memory, or as much and earlier */
        for (int i = 0; i < t->nc; i++)
            richer += class_memory(t, i) > class_memory(t, k) || (class_memory(t, i) == class_memory(t, k) && i < k);
        if (richer < MIX_TYPES) t->slot_cls[t->n_slots++] = k;
    }
    int G = 0;
    for (int j = 0; j < t->n_slots; j++) G += t->cls[t->slot_cls[j]].G;
    if (t->n_slots < 2) return;
    for (int q = 0; q < t->n_slots; q++) t->order[q] = q;
    for (int i = 1; i < t->n_slots; i++)
        for (int j = i; j > 0; j--) {
            const int a = t->slot_cls[t->order[j]], b = t->slot_cls[t->order[j - 1]];
            if (x->capacity[t->cls[a].type] <= x->capacity[t->cls[b].type]) break;
            const int o = t->order[j];
            t->order[j] = t->order[j - 1];
            t->order[j - 1] = o;
        }
    if (G <= MIX_MAX_GROUPS) small_mixes(t);
    spread_mixes(t);
}

/* The options of one type: idle, then S = S_min .. min(G, L) as worth_trying keeps, each with
 * all copies the groups allow (and, for the cost and price objectives, a quarter, 1/16 and 1/64 of them). */
static void type_options(tp_t *t, tclass_t *cl) {
    ah_sctx_t *x = t->x;
    const int kc = ah_search_objective(t->s) != AH_OBJECTIVE_TIME ? 4 : 1; /* cost, price: fewer copies too */
    cl->optS[0] = 0;
    cl->optK[0] = 0;
    cl->nopt = 1;
    const int smin = smallest_fitting(x, cl);
    if (smin < 0) t->oom = true;
    if (smin <= 0) return;
    int top = cl->G < x->L ? cl->G : x->L;
    if (top > AH_MAX_STAGES) top = AH_MAX_STAGES;
    for (int S = smin; S <= top; S++) {
        if (!worth_trying(S, smin, x->L)) continue;
        for (int j = 0, prev = 0; j < kc && cl->nopt < MAX_OPTS; j++) {
            int copies = (cl->G / S) >> (2 * j); /* k, k/4, k/16, k/64 */
            if (copies < 1) copies = 1;
            if (copies == prev) break;
            prev = copies;
            cl->optS[cl->nopt] = S;
            cl->optK[cl->nopt++] = copies;
        }
    }
}

/* One run over the nodes joined to node `within` by a link below `apart` (AH_LINK_INTER_ZONE: its
 * zone; AH_LINK_INTER_REGION: its region; within < 0: every node). */
static void run(tp_t *t, int within, ah_link_t apart) {
    const ah_cluster_t *c = t->x->cluster;
    ah_sctx_t *x = t->x;
    t->nc = 0;
    for (int i = 0; i < c->n_nodes && !t->oom; i++) {
        const int g = ah_node_groups(c, i, x->t, x->train.precision);
        if (g == 0 || (within >= 0 && ah_link_between(c, within, i) >= apart)) continue;
        int k = 0;
        while (k < t->nc && t->cls[k].type != c->nodes[i].type) k++;
        if (k == t->nc) t->cls[t->nc++] = (tclass_t){.type = c->nodes[i].type};
        tclass_t *cl = &t->cls[k];
        int *gn = realloc(cl->gnode, sizeof(int) * (size_t)(cl->G + g));
        if (!gn) {
            t->oom = true;
            break;
        }
        cl->gnode = gn;
        for (int j = 0; j < g; j++) cl->gnode[cl->G++] = i;
    }
    for (int k = 0; k < t->nc && !t->oom; k++) type_options(t, &t->cls[k]);
    if (!t->oom && t->nc > 0) {
        mixed_options(t);
        descend(t);
    }
    for (int k = 0; k < t->nc; k++) {
        free(t->cls[k].gnode);
        t->cls[k].gnode = NULL;
        t->cls[k].G = 0;
    }
}

ah_status_t ah_search_template(ah_search_t *s, ah_sctx_t *x, ah_error_t *err) {
    const ah_cluster_t *c = x->cluster;
    tp_t t = {0};
    t.s = s;
    t.x = x;
    x->coarse_memory = true;
    t.cls = calloc((size_t)x->n_types, sizeof *t.cls);
    t.choice = calloc((size_t)x->n_types + 1, sizeof *t.choice);
    t.used = calloc((size_t)x->n_types, sizeof *t.used);
    int *zone_rep = malloc(sizeof(int) * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    t.oom = !t.cls || !t.choice || !t.used || !zone_rep;
    int nz = 0;
    for (int i = 0; i < c->n_nodes && !t.oom; i++) {
        int z = 0;
        while (z < nz && ah_link_between(c, zone_rep[z], i) >= AH_LINK_INTER_ZONE) z++;
        if (z == nz) zone_rep[nz++] = i;
    }
    if (nz > 1)
        for (int z = 0; z < nz && !t.oom; z++) run(&t, zone_rep[z], AH_LINK_INTER_ZONE);
    /* across regions, each region of two zones or more too: its zones' DP sync and hops on their
     * own links, none on the WAN */
    bool regions = false;
    for (int z = 1; z < nz; z++) regions |= ah_link_between(c, zone_rep[0], zone_rep[z]) == AH_LINK_INTER_REGION;
    for (int z = 0; regions && z < nz && !t.oom; z++) {
        bool first = true, more = false; /* zone z is its region's first zone; the region has another */
        for (int y = 0; y < nz; y++)
            if (y != z && ah_link_between(c, zone_rep[z], zone_rep[y]) < AH_LINK_INTER_REGION) {
                first &= y > z;
                more = true;
            }
        if (first && more) run(&t, zone_rep[z], AH_LINK_INTER_REGION);
    }
    if (!t.oom) run(&t, -1, AH_LINK_INTER_ZONE);
    free(zone_rep);
    free(t.cls);
    free(t.choice);
    free(t.used);
    ah_cand_free(&t.cand);
    if (t.oom) return ah_error_set(err, AH_ERR_OOM, "out of host memory in the template search");
    return AH_OK;
}
