/* Exact search for small clusters: every set of disjoint pipelines, each an ordered sequence of
 * TP groups. Groups of one node are interchangeable (the cost model sees a group only through its
 * node and type), so a pipeline is a sequence of nodes and a set is a multiset of such sequences
 * within each node's group count. With CP degrees to search (x->by_cp, from
 * ah_planner_opts_t.cp_per_pipeline) a pipeline is a CP degree c and a sequence of nodes, each
 * stage c TP groups of its node (a CP group on one node, its ring on the node's link), so every
 * pipeline has its own degree; everything else is solved exactly per set:
 *  - layer split + recompute per pipeline and micro-batch count: search_pipe.c (exact DP);
 *  - micro-batches over pipelines: greedy, optimal for nondecreasing pipeline times;
 *  - the DP sync and optimizer terms, which couple the pipelines through max_{p,s} of per-stage
 *    values that grow with the stage's block count: for every pair (X, Y) of candidate values of
 *    max sync and max optimizer time, the stages are capped to block counts whose sync <= X and
 *    optimizer <= Y, the pipelines re-solved, and the plan scored exactly. The optimum's own
 *    (X*, Y*) is among the pairs and its capped problem contains the optimum, so the minimum
 *    over pairs is exact. Pairs are visited in increasing X, then Y, and cut off once
 *    F(unconstrained) + X + Y cannot beat the best plan.
 */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#include "core/vec.h"

/* Limits past which the exact search is not attempted: sequences, sets, and the enumeration's
 * own work (sequences looked at while listing the sets). */
#define EXACT_MAX_SEQUENCES 50000
#define EXACT_MAX_SETS 20000
#define EXACT_MAX_WORK 2e6

typedef struct {
    ah_search_t *s;
    ah_sctx_t *x;
    int nU;          /* nodes with at least one group */
    int *unode;      /* [nU] node ids */
    int *avail;      /* [nU] groups left */
    int nseq;
    int *seq_off, *seq_len, *seq_nodes; /* seq_nodes: node ids */
    int *seq_cp;     /* [nseq] CP degree */
    int *seq_use;    /* [nseq][nU] groups used */
    int seq_cap, nodes_cap; /* allocated entries: arrays grow by doubling */
    int *sel;        /* selected sequences */
    ah_cand_t cand;
    double *xs, *ys; /* candidate X, Y */
    int *caps, *prev_caps;
    bool oom;
} ex_t;

/* Node i's TP groups, 0 for a node the search leaves out (skip[i]; skip NULL: none). */
static int groups_of(const ah_sctx_t *x, const bool *skip, int i) {
    return skip && skip[i] ? 0 : ah_node_groups(x->cluster, i, x->t, x->train.precision);
}

static int total_groups(const ah_sctx_t *x, const bool *skip) {
    int g = 0;
    for (int i = 0; i < x->cluster->n_nodes; i++) g += groups_of(x, skip, i);
    return g;
}

/* Sequences of length k over nU letters with letter u used at most avail[u] times. */
static double count_sequences(const int *avail, int nU, int *used, int depth) {
    if (depth == 0) return 1;
    double total = 1; /* the sequence ending here */
    for (int u = 0; u < nU; u++)
        if (used[u] < avail[u]) {
            used[u]++;
            total += count_sequences(avail, nU, used, depth - 1);
            used[u]--;
            if (total > EXACT_MAX_SEQUENCES) return total;
        }
    return total;
}

/* Whether the sequences stay within the cap; else false with the reason in why[cap]. */
static bool exact_fits(const ah_sctx_t *x, const bool *skip, int max_groups, char *why, size_t cap) {
    const int G = total_groups(x, skip);
    if (G < 1) return false;
    if (G > max_groups) {
        snprintf(why, cap, "%d TP groups, more than --exact-max-groups %d", G, max_groups);
        return false;
    }
    int avail[64], used[64] = {0}, nU = 0;
    for (int i = 0; i < x->cluster->n_nodes && nU < 64; i++) {
        int g = groups_of(x, skip, i);
        if (g > 0) avail[nU++] = g;
    }
    int depth = G < x->L ? G : x->L;
    if (count_sequences(avail, nU, used, depth) - 1 <= EXACT_MAX_SEQUENCES) return true;
    snprintf(why, cap, "%d TP groups give more than %d distinct pipelines, the exact search's cap", G,
             EXACT_MAX_SEQUENCES);
    return false;
}

static bool add_seq(ex_t *e, const int *letters, int len, int cp) {
    int n = e->nseq;
    int base = n ? e->seq_off[n - 1] + e->seq_len[n - 1] : 0;
    int cap = e->seq_cap, cap2 = e->seq_cap, cap3 = e->seq_cap, cap4 = e->seq_cap;
    /* seq_off, seq_len, seq_cp and seq_use share one capacity: grow them all before committing it */
    if (!ah_grow(&e->seq_off, &cap, n + 1, sizeof(int)) || !ah_grow(&e->seq_len, &cap2, n + 1, sizeof(int)) ||
        !ah_grow(&e->seq_cp, &cap4, n + 1, sizeof(int)) ||
        !ah_grow(&e->seq_use, &cap3, n + 1, sizeof(int) * (size_t)e->nU))
        return false;
    e->seq_cap = cap;
    if (!ah_grow(&e->seq_nodes, &e->nodes_cap, base + len, sizeof(int))) return false;
    e->seq_off[n] = base;
    e->seq_len[n] = len;
    e->seq_cp[n] = cp;
    memset(e->seq_use + (size_t)n * e->nU, 0, sizeof(int) * (size_t)e->nU);
    for (int i = 0; i < len; i++) {
        e->seq_nodes[base + i] = e->unode[letters[i]];
        e->seq_use[(size_t)n * e->nU + letters[i]] += cp;
    }
    e->nseq++;
    return true;
}

/* Every sequence of CP degree cp (its stages cp groups each), extending letters[0..len). */
static bool gen_seqs(ex_t *e, int *letters, int len, int *used, int maxlen, int cp) {
    if (len > 0 && !add_seq(e, letters, len, cp)) return false;
    if (len == maxlen) return true;
    for (int u = 0; u < e->nU; u++)
        if (used[u] + cp <= e->avail[u]) {
            used[u] += cp;
            letters[len] = u;
            if (!gen_seqs(e, letters, len + 1, used, maxlen, cp)) return false;
            used[u] -= cp;
        }
    return true;
}

static int sort_unique(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, ah_cmp_double);
    int u = 0;
    for (int i = 0; i < n; i++)
        if (u == 0 || v[i] != v[u - 1]) v[u++] = v[i];
    return u;
}

/* Scores the selected set and its (X, Y)-capped variants. */
static void score_set(ex_t *e, int P) {
    ah_sctx_t *x = e->x;
    ah_cand_t *c = &e->cand;
    c->P = 0;
    c->n_stages = 0;
    c->caps = NULL;
    for (int p = 0; p < P; p++)
        if (!ah_cand_push_cp(c, e->seq_len[e->sel[p]], e->seq_nodes + e->seq_off[e->sel[p]], e->seq_cp[e->sel[p]])) {
            e->oom = true;
            return;
        }
    double bound = ah_search_bound(e->s, x, c);
    if (bound == -INFINITY) return; /* over the budget */
    double v0 = ah_cand_score(x, c);
    if (isnan(v0)) e->oom = true;
    ah_search_offer(e->s, x, c, v0);
    if (!isfinite(v0)) return; /* caps only make it harder */
    const double F = c->pipe_s;
    bound = fmin(bound, v0);

    /* (type, kind) pairs present, and the candidate values of max sync (X) and max opt (Y) */
    const int L = x->L, nk = x->n_types * AH_KINDS;
    bool present[4 * 64] = {false}, kind_present[AH_KINDS] = {false};
    for (int p = 0; p < P; p++)
        for (int s = 0; s < c->S[p]; s++) {
            int kind = ah_stage_kind(s, c->S[p]);
            present[x->cluster->nodes[c->node[c->off[p] + s]].type * AH_KINDS + kind] = true;
            kind_present[kind] = true;
        }
    int nx = 0, ny = 0;
    for (int k = 0; k < AH_KINDS; k++)
        if (kind_present[k])
            for (int nb = 1; nb <= L; nb++)
                e->xs[nx++] = ah_stage_sync_s(x, nb, k, c->dp_ranks, c->holders, c->dp_bw, c->dp_lat);
    for (int i = 0; i < nk; i++)
        if (present[i])
            for (int nb = 1; nb <= L; nb++) e->ys[ny++] = ah_stage_opt_s(x, i / AH_KINDS, i % AH_KINDS, nb);
    nx = sort_unique(e->xs, nx);
    ny = sort_unique(e->ys, ny);
    for (int i = 0; i < nk; i++) e->prev_caps[i] = -1;
    for (int ix = 0; ix < nx && !e->oom; ix++) {
        const double X = e->xs[ix];
        if (F + X + e->ys[0] >= bound) break;
        for (int iy = 0; iy < ny && !e->oom; iy++) {
            const double Y = e->ys[iy];
            if (F + X + Y >= bound) break;
            bool usable = true, same = true;
            for (int i = 0; i < nk; i++) {
                int cap = 0;
                if (present[i])
                    while (cap < L &&
                           ah_stage_sync_s(x, cap + 1, i % AH_KINDS, c->dp_ranks, c->holders, c->dp_bw, c->dp_lat) <= X &&
                           ah_stage_opt_s(x, i / AH_KINDS, i % AH_KINDS, cap + 1) <= Y)
                        cap++;
                else
                    cap = L;
                if (cap == 0) usable = false;
                e->caps[i] = cap;
                if (cap != e->prev_caps[i]) same = false;
            }
            if (!usable || same) continue;
            memcpy(e->prev_caps, e->caps, sizeof(int) * (size_t)nk);
            c->caps = e->caps;
            double v = ah_cand_score(x, c);
            if (isnan(v)) e->oom = true;
            ah_search_offer(e->s, x, c, v);
            if (v < bound) bound = v;
            c->caps = NULL;
        }
    }
}

/* How many sets choose() would score and how many sequences it would look at; stops once past
 * the limits. */
static void count_sets(ex_t *e, int start, int P, double *count, double *work) {
    if (P + 1 > e->x->N) return;
    for (int i = start; i < e->nseq && *count <= EXACT_MAX_SETS && *work <= EXACT_MAX_WORK; i++) {
        (*work)++;
        const int *use = e->seq_use + (size_t)i * e->nU;
        bool fits = true;
        for (int u = 0; u < e->nU; u++) fits &= use[u] <= e->avail[u];
        if (!fits) continue;
        for (int u = 0; u < e->nU; u++) e->avail[u] -= use[u];
        (*count)++;
        count_sets(e, i, P + 1, count, work);
        for (int u = 0; u < e->nU; u++) e->avail[u] += use[u];
    }
}

/* Multisets of sequences, in nondecreasing sequence index. */
static void choose(ex_t *e, int start, int P) {
    if (P + 1 > e->x->N) return; /* every pipeline needs a micro-batch */
    for (int i = start; i < e->nseq && !e->oom; i++) {
        const int *use = e->seq_use + (size_t)i * e->nU;
        bool fits = true;
        for (int u = 0; u < e->nU; u++) fits &= use[u] <= e->avail[u];
        if (!fits) continue;
        for (int u = 0; u < e->nU; u++) e->avail[u] -= use[u];
        e->sel[P] = i;
        score_set(e, P + 1);
        choose(e, i, P + 1);
        for (int u = 0; u < e->nU; u++) e->avail[u] += use[u];
    }
}

/* The exact search over the nodes that skip (NULL: none) does not leave out. */
static ah_status_t search_exact_in(ah_search_t *s, ah_sctx_t *x, int max_groups, const bool *skip, bool *searched,
                                   char *why, size_t why_cap, ah_error_t *err) {
    *searched = false;
    why[0] = '\0';
    if (!exact_fits(x, skip, max_groups, why, why_cap)) return AH_OK;
    ex_t e = {0};
    e.s = s;
    e.x = x;
    const ah_cluster_t *c = x->cluster;
    const int G = total_groups(x, skip);
    e.unode = malloc(sizeof(int) * (size_t)c->n_nodes);
    e.avail = malloc(sizeof(int) * (size_t)c->n_nodes);
    e.sel = malloc(sizeof(int) * (size_t)(G + 1));
    e.xs = malloc(sizeof(double) * (size_t)AH_KINDS * (size_t)x->L);
    e.ys = malloc(sizeof(double) * (size_t)x->n_types * AH_KINDS * (size_t)x->L);
    e.caps = malloc(sizeof(int) * (size_t)x->n_types * AH_KINDS);
    e.prev_caps = malloc(sizeof(int) * (size_t)x->n_types * AH_KINDS);
    int *letters = malloc(sizeof(int) * (size_t)(G + 1));
    int *used = calloc((size_t)c->n_nodes, sizeof(int));
    e.oom = !e.unode || !e.avail || !e.sel || !e.xs || !e.ys || !e.caps || !e.prev_caps || !letters || !used ||
            x->n_types > 64;
    if (!e.oom) {
        for (int i = 0; i < c->n_nodes; i++) {
            int g = groups_of(x, skip, i);
            if (g > 0) {
                e.unode[e.nU] = i;
                e.avail[e.nU++] = g;
            }
        }
        int maxlen = G < x->L ? G : x->L;
        if (maxlen > AH_MAX_STAGES) maxlen = AH_MAX_STAGES;
        for (int k = 0; k < AH_CP_LEVELS && !e.oom; k++)
            if (k == 0 || x->by_cp[k]) e.oom = !gen_seqs(&e, letters, 0, used, maxlen, 1 << k);
    }
    double sets = 0, work = 0;
    if (!e.oom) count_sets(&e, 0, 0, &sets, &work);
    if (!e.oom && sets <= EXACT_MAX_SETS && work <= EXACT_MAX_WORK) {
        choose(&e, 0, 0);
        *searched = true;
    } else if (!e.oom && sets > EXACT_MAX_SETS) {
        snprintf(why, why_cap, "%d TP groups form more than %d pipeline sets, the exact search's cap", G,
                 EXACT_MAX_SETS);
    } else if (!e.oom) {
        snprintf(why, why_cap, "%d TP groups: listing their pipeline sets takes more than %.0e steps, the exact "
                 "search's cap", G, EXACT_MAX_WORK);
    }
    free(letters);
    free(used);
    free(e.unode);
    free(e.avail);
    free(e.sel);
    free(e.xs);
    free(e.ys);
    free(e.caps);
    free(e.prev_caps);
    free(e.seq_off);
    free(e.seq_len);
    free(e.seq_cp);
    free(e.seq_nodes);
    free(e.seq_use);
    ah_cand_free(&e.cand);
    if (e.oom) return ah_error_set(err, AH_ERR_OOM, "out of host memory in the exact plan search");
    return AH_OK;
}

ah_status_t ah_search_exact(ah_search_t *s, ah_sctx_t *x, int max_groups, bool *searched, char *why, size_t why_cap,
                            ah_error_t *err) {
    return search_exact_in(s, x, max_groups, NULL, searched, why, why_cap, err);
}

/* For a setting too large for the exact search: the exact search over the cluster without one
 * node, and without one GPU type's nodes, wherever what is left is small enough for it (a plan
 * there is a plan of the whole cluster that leaves those devices idle; the template search alone
 * can miss it: fuzz-4-17, docs/planner.md "Grouping — template mode"). */
ah_status_t ah_search_exact_subsets(ah_search_t *s, ah_sctx_t *x, int max_groups, ah_error_t *err) {
    const ah_cluster_t *c = x->cluster;
    const int n = c->n_nodes, G = total_groups(x, NULL);
    bool *skip = calloc((size_t)n + 1, sizeof *skip);
    int *g = calloc((size_t)n + 1, sizeof *g), *tg = calloc((size_t)x->n_types + 1, sizeof *tg),
        *tn = calloc((size_t)x->n_types + 1, sizeof *tn); /* groups per node; per type, groups and nodes */
    ah_status_t st = AH_OK;
    if (!skip || !g || !tg || !tn) st = ah_error_set(err, AH_ERR_OOM, "out of host memory in the exact plan search");
    for (int i = 0; st == AH_OK && i < n; i++) {
        g[i] = ah_node_groups(c, i, x->t, x->train.precision);
        tg[c->nodes[i].type] += g[i];
        tn[c->nodes[i].type] += g[i] > 0;
    }
    char why[200];
    for (int k = 0; k < n + x->n_types && st == AH_OK; k++) { /* node k, then type k - n (of two nodes or more) */
        const int ty = k - n, left = G - (k < n ? g[k] : tg[ty]);
        if ((k < n ? g[k] : tn[ty] > 1 ? tg[ty] : 0) == 0 || left < 1 || left > max_groups) continue;
        for (int i = 0; i < n; i++) skip[i] = k < n ? i == k : c->nodes[i].type == ty;
        bool searched = false;
        st = search_exact_in(s, x, max_groups, skip, &searched, why, sizeof why, err);
    }
    free(skip);
    free(g);
    free(tg);
    free(tn);
    return st;
}
