/* The sharded optimizer's groups in a plan (plan.h "optimizer_shards"): who the members of a
 * group are, how many elements its space has, the validity rules, and an even or weighted split
 * for builders (the CLI's --shard-optimizer, tests). Pure functions of the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

/* Whether [first, last) is exactly one DP segment: both ends are stage boundaries of some
 * pipeline (or the model's ends) and no pipeline has a boundary strictly inside. */
static bool is_segment(const ah_plan_t *p, int first, int last) {
    if (first < 0 || last > p->model.n_layer || first >= last) return false;
    bool first_cut = first == 0, last_cut = last == p->model.n_layer;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++) {
            const int b = p->pipelines[i].stages[s].first;
            if (b == first) first_cut = true;
            if (b == last) last_cut = true;
            if (b > first && b < last) return false;
        }
    return first_cut && last_cut;
}

/* ah_opt_group_members, with each member's rank (the plan's device order) in ranks when not NULL. */
static int members(const ah_plan_t *p, const ah_opt_group_t *g, ah_device_ref_t *devs, int *ranks) {
    if (g->tp_rank < 0 || g->tp_rank >= p->tp) return -1;
    if (g->kind == AH_OPT_BLOCKS && !is_segment(p, g->first, g->last)) return -1;
    if (g->kind == AH_OPT_TIED && !p->model.tied) return -1;
    int n = 0, base = 0; /* the rank of pipeline i's first device */
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int S = pl->n_stages, per_stage = ah_stage_devices(pl, p->tp);
        for (int s = 0; s < S; s++) {
            const ah_stage_t *st = &pl->stages[s];
            bool member = false;
            switch (g->kind) {
            case AH_OPT_BLOCKS: member = st->first <= g->first && g->first < st->last; break;
            case AH_OPT_EMBED: member = s == 0; break;
            case AH_OPT_HEAD: member = s == S - 1; break;
            case AH_OPT_TIED: /* once per device: one may hold both (an interleaved pipeline on one device) */
                member = s == 0 || (s == S - 1 && ah_pipeline_group_of(pl, s) != ah_pipeline_group_of(pl, 0));
                break;
            }
            /* every CP rank of the stage holds the group's tensors at that TP rank */
            for (int c = 0; member && c < ah_pipeline_cp(pl); c++) {
                const int k = c * p->tp + g->tp_rank;
                if (ranks) ranks[n] = base + ah_pipeline_group_of(pl, s) * per_stage + k;
                devs[n++] = st->devices[k];
            }
        }
        base += ah_pipeline_groups(pl) * per_stage;
    }
    return n;
}

int ah_opt_group_room(const ah_plan_t *p) {
    int n = 1;
    for (int i = 0; i < p->n_pipelines; i++) n += 2 * ah_pipeline_cp(&p->pipelines[i]);
    return n;
}

int ah_opt_group_members(const ah_plan_t *p, const ah_opt_group_t *g, ah_device_ref_t *devs) {
    return members(p, g, devs, NULL);
}

int ah_opt_group_one_node(const ah_plan_t *p, const ah_opt_group_t *g) {
    ah_device_ref_t *devs = malloc((size_t)ah_opt_group_room(p) * sizeof *devs);
    const int n = devs ? members(p, g, devs, NULL) : 0;
    int node = n > 0 ? devs[0].node : -1;
    for (int i = 1; i < n; i++)
        if (devs[i].node != node) node = -1;
    free(devs);
    return node;
}

int64_t ah_opt_group_elems(const ah_plan_t *p, const ah_opt_group_t *g) {
    const ah_model_t *m = &p->model;
    const int t = p->tp;
    if (g->tp_rank < 0 || g->tp_rank >= t) return -1;
    switch (g->kind) {
    case AH_OPT_BLOCKS:
        return is_segment(p, g->first, g->last) ? (int64_t)(g->last - g->first) * ah_layer_params(m, AH_LAYER_BLOCK, t) : -1;
    case AH_OPT_EMBED: return ah_layer_params(m, AH_LAYER_EMBED, t) - ah_tied_params(m, t);
    case AH_OPT_HEAD: return ah_layer_params(m, AH_LAYER_HEAD, t);
    case AH_OPT_TIED: return m->tied ? ah_tied_params(m, t) : -1;
    }
    return -1;
}

const char *ah_opt_group_name(const ah_opt_group_t *g, char *buf, size_t cap) {
    static const char *const kinds[] = {"blocks", "embedding", "head", "tied"};
    if (g->kind == AH_OPT_BLOCKS) snprintf(buf, cap, "blocks [%d, %d) tp %d", g->first, g->last, g->tp_rank);
    else snprintf(buf, cap, "%s tp %d", kinds[g->kind], g->tp_rank);
    return buf;
}

static bool same_dev(ah_device_ref_t a, ah_device_ref_t b) { return a.node == b.node && a.index == b.index; }

static bool same_group(const ah_opt_group_t *a, const ah_opt_group_t *b) {
    return a->kind == b->kind && a->tp_rank == b->tp_rank &&
           (a->kind != AH_OPT_BLOCKS || (a->first == b->first && a->last == b->last));
}

static int by_begin(const void *a, const void *b) {
    const ah_opt_share_t *x = *(ah_opt_share_t *const *)a, *y = *(ah_opt_share_t *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* One listed group: it exists, each share is a member's, at most one per member, none negative,
 * and together they cover [0, elems) once. */
static ah_status_t check_group(const ah_plan_t *p, int k, ah_device_ref_t *devs, ah_error_t *err) {
    const ah_opt_group_t *g = &p->opt_groups[k];
    char name[64];
    ah_opt_group_name(g, name, sizeof name);
    const int n = ah_opt_group_members(p, g, devs);
    const int64_t elems = ah_opt_group_elems(p, g);
    if (n < 0 || elems < 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[shards] optimizer_shards[%d] (%s): no such data-parallel group in this plan (%s)", k, name,
                            g->tp_rank < 0 || g->tp_rank >= p->tp ? "tp_rank is outside [0, tp)"
                            : g->kind == AH_OPT_TIED          ? "the model's head is not tied"
                                                                : "blocks must be one segment: cut at every stage boundary of every pipeline");
    for (int j = 0; j < k; j++)
        if (same_group(&p->opt_groups[j], g))
            return ah_error_set(err, AH_ERR_INVALID, "[shards] optimizer_shards[%d] (%s): listed twice (also [%d])", k,
                                name, j);
    const ah_opt_share_t **order = malloc((size_t)(g->n_shares + 1) * sizeof *order);
    if (!order) return ah_error_set(err, AH_ERR_OOM, "out of host memory checking optimizer shards");
    ah_status_t s = AH_OK;
    for (int i = 0; i < g->n_shares && s == AH_OK; i++) {
        const ah_opt_share_t *sh = &g->shares[i];
        const char *node = p->cluster.nodes[sh->dev.node].name;
        bool member = false;
        for (int m = 0; m < n; m++) member |= same_dev(devs[m], sh->dev);
        if (!member)
            s = ah_error_set(err, AH_ERR_INVALID,
                             "[shards] optimizer_shards[%d] (%s).shares[%d]: device %s:%d is not in the group (its members "
                             "hold the group's tensors at that TP rank: one stage per pipeline, each of its CP ranks)",
                             k, name, i, node, sh->dev.index);
        else if (sh->begin < 0 || sh->end < sh->begin)
            s = ah_error_set(err, AH_ERR_INVALID,
                             "[shards] optimizer_shards[%d] (%s).shares[%d]: elements [%lld, %lld) on %s:%d: a share is "
                             "[begin, end) with 0 <= begin <= end",
                             k, name, i, (long long)sh->begin, (long long)sh->end, node, sh->dev.index);
        for (int j = 0; j < i && s == AH_OK; j++)
            if (same_dev(g->shares[j].dev, sh->dev))
                s = ah_error_set(err, AH_ERR_INVALID,
                                 "[shards] optimizer_shards[%d] (%s).shares[%d]: device %s:%d has two shares ([%d] too)", k,
                                 name, i, node, sh->dev.index, j);
        order[i] = sh;
    }
    if (s == AH_OK) {
        qsort(order, (size_t)g->n_shares, sizeof *order, by_begin);
        int64_t at = 0;
        for (int i = 0; i < g->n_shares && s == AH_OK; i++) {
            if (order[i]->begin == order[i]->end) continue;
            if (order[i]->begin != at)
                s = ah_error_set(err, AH_ERR_INVALID,
                                 "[shards] optimizer_shards[%d] (%s): elements [%lld, %lld) %s; the shares must cover the "
                                 "group's %lld elements exactly once",
                                 k, name, (long long)(order[i]->begin < at ? order[i]->begin : at),
                                 (long long)(order[i]->begin < at ? at : order[i]->begin),
                                 order[i]->begin < at ? "are in two shares" : "are in no share", (long long)elems);
            at = order[i]->end;
        }
        if (s == AH_OK && at != elems)
            s = ah_error_set(err, AH_ERR_INVALID,
                             "[shards] optimizer_shards[%d] (%s): the shares end at element %lld, but the group has %lld; "
                             "they must cover [0, %lld) exactly once",
                             k, name, (long long)at, (long long)elems, (long long)elems);
    }
    free(order);
    return s;
}

ah_status_t ah_plan_check_shards(const ah_plan_t *p, ah_error_t *err) {
    if (p->n_opt_groups == 0) return AH_OK;
    ah_device_ref_t *devs = malloc((size_t)ah_opt_group_room(p) * sizeof *devs);
    if (!devs) return ah_error_set(err, AH_ERR_OOM, "out of host memory checking optimizer shards");
    ah_status_t s = AH_OK;
    for (int k = 0; k < p->n_opt_groups && s == AH_OK; k++) s = check_group(p, k, devs, err);
    free(devs);
    return s;
}

static void free_groups(ah_plan_t *p) {
    for (int k = 0; k < p->n_opt_groups; k++) free(p->opt_groups[k].shares);
    free(p->opt_groups);
    p->opt_groups = NULL;
    p->n_opt_groups = 0;
}

ah_status_t ah_plan_copy_shards(const ah_plan_t *p, ah_plan_t *out, ah_error_t *err) {
    free_groups(out);
    if (p->n_opt_groups == 0) return AH_OK;
    if (!(out->opt_groups = calloc((size_t)p->n_opt_groups, sizeof *out->opt_groups)))
        return ah_error_set(err, AH_ERR_OOM, "out of host memory copying optimizer shards");
    out->n_opt_groups = p->n_opt_groups;
    for (int k = 0; k < p->n_opt_groups; k++) {
        const ah_opt_group_t *g = &p->opt_groups[k];
        out->opt_groups[k] = *g;
        out->opt_groups[k].shares = malloc((size_t)(g->n_shares + 1) * sizeof *g->shares);
        if (!out->opt_groups[k].shares) {
            out->opt_groups[k].n_shares = 0;
            free_groups(out);
            return ah_error_set(err, AH_ERR_OOM, "out of host memory copying optimizer shards");
        }
        memcpy(out->opt_groups[k].shares, g->shares, (size_t)g->n_shares * sizeof *g->shares);
    }
    return AH_OK;
}

/* Appends group g (kind, range, tp rank) with shares in proportion to the weights, when it has
 * more than one member. */
static ah_status_t add_group(ah_plan_t *p, ah_opt_group_t g, ah_device_ref_t *devs, int *ranks, int *cap,
                             double (*weight)(const ah_plan_t *, int, void *), void *ctx, ah_error_t *err) {
    const int n = members(p, &g, devs, ranks);
    const int64_t elems = ah_opt_group_elems(p, &g);
    if (n < 2 || elems <= 0) return AH_OK;
    if (p->n_opt_groups == *cap) {
        const int c = *cap ? 2 * *cap : 16;
        ah_opt_group_t *grown = realloc(p->opt_groups, (size_t)c * sizeof *grown);
        if (!grown) return ah_error_set(err, AH_ERR_OOM, "out of host memory for optimizer shards");
        p->opt_groups = grown;
        *cap = c;
    }
    if (!(g.shares = malloc((size_t)n * sizeof *g.shares)))
        return ah_error_set(err, AH_ERR_OOM, "out of host memory for optimizer shards");
    double total = 0, acc = 0;
    for (int i = 0; i < n; i++) total += weight ? weight(p, ranks[i], ctx) : 1.0;
    const bool even = !weight || !(total > 0); /* no weight anywhere: even parts */
    if (even) total = n;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        acc += even ? 1.0 : weight(p, ranks[i], ctx);
        const int64_t end = i == n - 1 ? elems : (int64_t)((double)elems * (acc / total));
        g.shares[i] = (ah_opt_share_t){devs[i], at, end > at ? end : at};
        at = g.shares[i].end;
    }
    g.n_shares = n;
    p->opt_groups[p->n_opt_groups++] = g;
    return AH_OK;
}

/* Room for one group's members (ah_opt_group_room): *devs and *ranks, both
 * freed by the caller; false (nothing to free) when out of host memory. */
static bool alloc_members(const ah_plan_t *p, ah_device_ref_t **devs, int **ranks) {
    *devs = malloc((size_t)ah_opt_group_room(p) * sizeof **devs);
    *ranks = malloc((size_t)ah_opt_group_room(p) * sizeof **ranks);
    if (*devs && *ranks) return true;
    free(*devs);
    free(*ranks);
    return false;
}

ah_status_t ah_plan_shard_all(ah_plan_t *p, double (*weight)(const ah_plan_t *, int, void *),
                              void *ctx, ah_error_t *err) {
    free_groups(p);
    ah_device_ref_t *devs;
    int *ranks;
    if (!alloc_members(p, &devs, &ranks)) return ah_error_set(err, AH_ERR_OOM, "out of host memory for optimizer shards");
    int cap = 0;
    ah_status_t s = AH_OK;
    for (int r = 0; r < p->tp && s == AH_OK; r++) {
        for (int b = 0, first = 0; b < p->model.n_layer && s == AH_OK; b++) { /* segments: b + 1 a cut */
            ah_opt_group_t g = {.kind = AH_OPT_BLOCKS, .first = first, .last = b + 1, .tp_rank = r};
            if (!is_segment(p, first, b + 1)) continue;
            s = add_group(p, g, devs, ranks, &cap, weight, ctx, err);
            first = b + 1;
        }
        for (int kind = AH_OPT_EMBED; kind <= AH_OPT_TIED && s == AH_OK; kind++)
            s = add_group(p, (ah_opt_group_t){.kind = (ah_opt_kind_t)kind, .tp_rank = r}, devs, ranks, &cap, weight, ctx, err);
    }
    free(devs);
    free(ranks);
    if (s != AH_OK) free_groups(p);
    return s;
}

ah_status_t ah_opt_elems_all(const ah_plan_t *p, int64_t *held, int64_t *unowned, ah_error_t *err) {
    const int n_dev = ah_plan_device_count(p);
    for (int r = 0; r < n_dev; r++) held[r] = unowned[r] = 0;
    ah_device_ref_t *devs;
    int *ranks;
    if (!alloc_members(p, &devs, &ranks))
        return ah_error_set(err, AH_ERR_OOM, "out of host memory counting optimizer shares");
    for (int k = 0; k < p->n_opt_groups; k++) {
        const ah_opt_group_t *g = &p->opt_groups[k];
        const int n = members(p, g, devs, ranks);
        const int64_t elems = ah_opt_group_elems(p, g);
        for (int m = 0; m < n; m++) {
            int64_t own = 0;
            for (int i = 0; i < g->n_shares; i++)
                if (same_dev(g->shares[i].dev, devs[m])) own += g->shares[i].end - g->shares[i].begin;
            held[ranks[m]] += elems;
            unowned[ranks[m]] += elems - own;
        }
    }
    free(devs);
    free(ranks);
    return AH_OK;
}

double ah_opt_sync_factor(const ah_plan_t *p, ah_opt_kind_t kind, int first, int last) {
    double worst = 1.0;
    for (int k = 0; k < p->n_opt_groups; k++) {
        const ah_opt_group_t *g = &p->opt_groups[k];
        if (g->kind != kind || (kind == AH_OPT_BLOCKS && (g->first != first || g->last != last))) continue;
        ah_device_ref_t *devs = malloc((size_t)ah_opt_group_room(p) * sizeof *devs);
        const int n = devs ? ah_opt_group_members(p, g, devs) : 0;
        free(devs);
        const int64_t elems = ah_opt_group_elems(p, g);
        int64_t largest = 0;
        for (int i = 0; i < g->n_shares; i++)
            if (g->shares[i].end - g->shares[i].begin > largest) largest = g->shares[i].end - g->shares[i].begin;
        if (n > 0 && elems > 0 && (double)largest * n / (double)elems > worst) worst = (double)largest * n / (double)elems;
    }
    return worst;
}
