/* Availability: maps each pool's trace onto the pool's nodes (rules in sim.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "core/vec.h"
#include "sim/sim.h"

void ah_sim_pool_free(ah_sim_pool_t *p) {
    if (!p) return;
    free(p->nodes);
    ah_trace_free(&p->trace);
    p->nodes = NULL;
    p->n_nodes = 0;
}

void ah_sim_avail_free(ah_sim_avail_t *a) {
    if (!a) return;
    free(a->up0);
    free(a->changes);
    free(a->initial);
    memset(a, 0, sizeof *a);
}

/* The spot nodes of pool->type in scope ("": every zone; a zone; else a region) into pool->nodes. */
static void pool_take(const ah_cluster_t *c, const char *scope, ah_sim_pool_t *pool) {
    bool is_zone = false;
    for (int i = 0; *scope && i < c->n_nodes && !is_zone; i++) is_zone = strcmp(c->nodes[i].zone, scope) == 0;
    pool->n_nodes = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        const ah_node_t *n = &c->nodes[i];
        const bool in = !*scope || strcmp(is_zone ? n->zone : n->region, scope) == 0;
        if (n->spot && n->type == pool->type && in) pool->nodes[pool->n_nodes++] = i;
    }
}

ah_status_t ah_sim_pool_resolve(const ah_cluster_t *c, const char *name, ah_sim_pool_t *pool,
                                ah_error_t *err) {
    char type[AH_NAME_MAX] = "", zone[AH_NAME_MAX] = "";
    const char *at = strchr(name, '@');
    size_t tl = at ? (size_t)(at - name) : strlen(name);
    if (tl == 0 || tl >= sizeof type || (at && (strlen(at + 1) == 0 || strlen(at + 1) >= sizeof zone)))
        return ah_error_set(err, AH_ERR_USAGE, "--trace: pool \"%s\" should be TYPE, TYPE@ZONE or TYPE@REGION, e.g. "
                            "H800 or H800@b", name);
    memcpy(type, name, tl);
    if (at) snprintf(zone, sizeof zone, "%s", at + 1);
    pool->type = ah_cluster_find_type(c, type);
    snprintf(pool->name, sizeof pool->name, "%s", name);
    snprintf(pool->zone, sizeof pool->zone, "%s", zone);
    pool->nodes = malloc(sizeof(int) * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    pool->n_nodes = 0;
    if (!pool->nodes) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    pool_take(c, zone, pool);
    if (pool->n_nodes > 0) return AH_OK;
    /* Say which pools there are: by zone, and by region where the cluster has several. */
    char have[1024];
    ah_str_t s = ah_str_fixed(have, sizeof have);
    const bool regions = ah_cluster_region_count(c) > 1;
    for (int i = 0; i < c->n_nodes; i++) {
        if (!c->nodes[i].spot) continue;
        for (int by_region = 0; by_region <= (regions ? 1 : 0); by_region++) {
            char item[2 * AH_NAME_MAX + 4];
            snprintf(item, sizeof item, "%s@%s", c->types[c->nodes[i].type].name,
                     by_region ? c->nodes[i].region : c->nodes[i].zone);
            if (!strstr(have, item)) ah_str_appendf(&s, "%s%s", s.len ? ", " : "", item);
        }
    }
    free(pool->nodes);
    pool->nodes = NULL;
    return ah_error_set(err, AH_ERR_USAGE,
                        "--trace: pool \"%s\" has no spot nodes in the cluster; spot pools there are: %s "
                        "(TYPE alone takes every zone)",
                        name, s.len ? have : "none (mark nodes \"spot\": true)");
}

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

typedef struct {
    ah_sim_change_t *v;
    int n, cap;
} changes_t;

static bool push_change(changes_t *c, ah_sim_change_t ch) {
    if (!ah_grow(&c->v, &c->cap, c->n + 1, sizeof *c->v)) return false;
    c->v[c->n++] = ch;
    return true;
}

/* Event trace: id -> first free pool node at its add. */
static bool map_events(ah_sim_pool_t *p, int pi, changes_t *out) {
    const ah_trace_t *t = &p->trace;
    int *slot_of = malloc(sizeof(int) * (size_t)(t->n_ids + 1)); /* id -> pool slot, -1 */
    bool *taken = calloc((size_t)p->n_nodes, 1);
    bool ok = slot_of && taken;
    int alive = 0;
    for (int i = 0; ok && i < t->n_ids; i++) slot_of[i] = -1;
    for (int e = 0; ok && e < t->n_events; e++) {
        const ah_trace_event_t *ev = &t->events[e];
        if (ev->add) {
            if (slot_of[ev->id] >= 0) continue; /* a second add of a live id: no change */
            alive++;
            if (alive > p->max_wanted) p->max_wanted = alive;
            int s = 0;
            while (s < p->n_nodes && taken[s]) s++;
            if (s == p->n_nodes) {
                p->capped++;
                slot_of[ev->id] = -2; /* alive in the trace, no node */
                continue;
            }
            taken[s] = true;
            slot_of[ev->id] = s;
            ok = push_change(out, (ah_sim_change_t){ev->t_s, p->nodes[s], true, pi, ev->id});
        } else {
            int s = slot_of[ev->id];
            if (s == -1) continue; /* remove of an id that is not alive */
            alive--;
            slot_of[ev->id] = -1;
            if (s == -2) continue;
            taken[s] = false;
            ok = push_change(out, (ah_sim_change_t){ev->t_s, p->nodes[s], false, pi, ev->id});
        }
    }
    free(slot_of);
    free(taken);
    return ok;
}

/* Count trace: a stack of joined slots (newest on top), or random picks. */
static bool map_counts(ah_sim_pool_t *p, int pi, uint64_t seed, changes_t *out) {
    const ah_trace_t *t = &p->trace;
    int *stack = malloc(sizeof(int) * (size_t)p->n_nodes), n = 0;
    bool *taken = calloc((size_t)p->n_nodes, 1);
    bool ok = stack && taken;
    uint64_t rng = seed ? seed : 1;
    for (int k = 0; ok && k < t->n_steps; k++) {
        int want = t->steps[k].count;
        if (want > p->max_wanted) p->max_wanted = want;
        if (want > p->n_nodes) {
            p->capped++;
            want = p->n_nodes;
        }
        while (ok && n < want) {
            int s = 0;
            if (seed) { /* a random free slot: the r-th free one (until session 25 a taken slot also added 1 to r,
                         * so a pick past a taken slot went beyond the pool: a read and a write past its arrays, a
                         * node index out of the pool; ASan, bench/sim_chaos.py trace-...p2-xlarge...-h3-seed7) */
                int r = (int)(xorshift(&rng) % (uint64_t)(p->n_nodes - n));
                for (s = 0; taken[s] || r-- > 0; s++) {
                }
            } else
                while (taken[s]) s++;
            taken[s] = true;
            stack[n++] = s;
            ok = push_change(out, (ah_sim_change_t){t->steps[k].t_s, p->nodes[s], true, pi, -1});
        }
        while (ok && n > want) {
            int i = seed ? (int)(xorshift(&rng) % (uint64_t)n) : n - 1;
            int s = stack[i];
            stack[i] = stack[--n];
            taken[s] = false;
            ok = push_change(out, (ah_sim_change_t){t->steps[k].t_s, p->nodes[s], false, pi, -1});
        }
    }
    free(stack);
    free(taken);
    return ok;
}

static int by_time(const ah_sim_change_t *x, const ah_sim_change_t *y) {
    return x->t_s < y->t_s ? -1 : x->t_s > y->t_s ? 1 : 0;
}

ah_status_t ah_sim_avail_build(const ah_cluster_t *c, ah_sim_pool_t *pools, int n_pools,
                               uint64_t seed, ah_sim_avail_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    out->cluster = c;
    out->seed = seed;
    for (int a = 0; a < n_pools; a++)
        for (int b = a + 1; b < n_pools; b++)
            for (int i = 0; i < pools[a].n_nodes; i++)
                for (int j = 0; j < pools[b].n_nodes; j++)
                    if (pools[a].nodes[i] == pools[b].nodes[j])
                        return ah_error_set(err, AH_ERR_USAGE,
                                            "--trace: pools \"%s\" and \"%s\" share node %s; give one trace "
                                            "per pool (TYPE@ZONE splits a type by zone)",
                                            pools[a].name, pools[b].name, c->nodes[pools[a].nodes[i]].name);
    out->up0 = malloc(sizeof(bool) * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    changes_t ch = {0};
    bool ok = out->up0 != NULL;
    for (int i = 0; ok && i < c->n_nodes; i++) out->up0[i] = true;
    for (int pi = 0; ok && pi < n_pools; pi++) {
        ah_sim_pool_t *p = &pools[pi];
        p->capped = p->max_wanted = 0;
        for (int i = 0; i < p->n_nodes; i++) out->up0[p->nodes[i]] = false; /* traced: down until added */
        ok = p->trace.kind == AH_TRACE_EVENTS ? map_events(p, pi, &ch) : map_counts(p, pi, seed, &ch);
        if (p->trace.end_s > out->end_s) out->end_s = p->trace.end_s;
    }
    if (!ok) {
        free(ch.v);
        ah_sim_avail_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory mapping the traces");
    }
    /* Each pool's changes are in time order; an insertion merge keeps that order among equal
     * times (qsort would not) and costs little on runs that are already sorted. */
    ah_sim_change_t *tmp = malloc(sizeof *tmp * (size_t)(ch.n + 1));
    if (!tmp) {
        free(ch.v);
        ah_sim_avail_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory mapping the traces");
    }
    int n = 0;
    for (int i = 0; i < ch.n; i++) {
        int j = n;
        while (j > 0 && by_time(&tmp[j - 1], &ch.v[i]) > 0) {
            tmp[j] = tmp[j - 1];
            j--;
        }
        tmp[j] = ch.v[i];
        n++;
    }
    free(ch.v);
    int n0 = 0;
    while (n0 < n && tmp[n0].t_s <= 0) {
        out->up0[tmp[n0].node] = tmp[n0].up;
        n0++;
    }
    out->initial = malloc(sizeof *tmp * (size_t)(n0 + 1));
    out->changes = malloc(sizeof *tmp * (size_t)(n - n0 + 1));
    if (!out->initial || !out->changes) {
        free(tmp);
        ah_sim_avail_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory mapping the traces");
    }
    memcpy(out->initial, tmp, sizeof *tmp * (size_t)n0);
    memcpy(out->changes, tmp + n0, sizeof *tmp * (size_t)(n - n0));
    out->n_initial = n0;
    out->n_changes = n - n0;
    free(tmp);
    return AH_OK;
}
