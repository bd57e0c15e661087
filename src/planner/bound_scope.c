/* The lower bound's scopes and hops (contract in bound_scope.h). */
#define AH_PLANNER_INTERNAL
#include "planner/bound_scope.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

double ah_p2p_least(const ah_cost_ctx_t *ctx, ah_link_t from) {
    const ah_cluster_t *c = ctx->cluster;
    double least = INFINITY;
    for (int a = 0; a < c->n_types; a++)
        for (int b = 0; b < c->n_types; b++)
            for (int k = from; k <= AH_LINK_INTER_ZONE; k++) {
                ah_link_info_t l = {.bw = ah_link_bw(c, (ah_link_t)k, a, b), .latency_s = ah_link_latency(c, (ah_link_t)k)};
                if (k == AH_LINK_INTER_ZONE) l = ah_link_best_across_zones(c, a, b); /* regions, links */
                least = fmin(least, ah_p2p_seconds_on(ctx, &l, a, b));
            }
    return least;
}

/* Zone of each node: the index of the first node in its zone (each node is compared with the
 * first nodes of the zones before it, not with every node before it). */
static void zones_of(const ah_cluster_t *c, int *zone) {
    for (int i = 0; i < c->n_nodes; i++) {
        zone[i] = i;
        for (int j = 0; j < i && zone[i] == i; j++)
            if (zone[j] == j && ah_link_between(c, i, j) < AH_LINK_INTER_ZONE) zone[i] = j;
    }
}

/* Appends the scope of link k over the nodes of zone z (z < 0: every node; node >= 0: that node
 * alone) unless an equal one is there; counts holds room for every scope. Returns the count. */
static int add_scope(const ah_cost_ctx_t *ctx, const int *zone, int k, int z, int node, ah_scope_t *sc, int n,
                     int *counts) {
    const ah_cluster_t *c = ctx->cluster;
    const int nt = c->n_types;
    int *count = counts + (size_t)n * nt;
    memset(count, 0, sizeof(int) * (size_t)nt);
    int per_node = 0, per_zone = 0;
    int *in_zone = calloc((size_t)c->n_nodes, sizeof(int)); /* groups by zone (its first node) */
    for (int i = 0; i < c->n_nodes; i++)
        if ((node >= 0 && i == node) || (node < 0 && (z < 0 || zone[i] == z))) {
            const int g = ah_node_groups(c, i, ctx->t, ctx->train->precision);
            count[c->nodes[i].type] += g;
            if (g > per_node) per_node = g;
            if (in_zone) in_zone[zone[i]] += g;
            per_zone = in_zone ? (in_zone[zone[i]] > per_zone ? in_zone[zone[i]] : per_zone) : INT32_MAX;
        }
    free(in_zone); /* (out of host memory: per_zone INT32_MAX, which claims no zone crossing) */
    for (int s = 0; s < n; s++)
        if (sc[s].k == k && memcmp(sc[s].count, count, sizeof(int) * (size_t)nt) == 0) {
            /* one bound for both: the weaker */
            if (per_node > sc[s].per_node) sc[s].per_node = per_node;
            if (per_zone > sc[s].per_zone) sc[s].per_zone = per_zone;
            return n;
        }
    sc[n] = (ah_scope_t){k, count, per_node, per_zone};
    return n + 1;
}

void ah_scope_link(const ah_cluster_t *c, const ah_scope_t *s, double *bw, double *lat) {
    *bw = 0;
    for (int ty = 0; ty < c->n_types; ty++)
        if (s->count[ty] > 0) *bw = fmax(*bw, ah_link_bw(c, (ah_link_t)s->k, ty, ty));
    *lat = ah_link_latency(c, (ah_link_t)s->k);
    if (s->k != AH_LINK_INTER_ZONE) return;
    for (int ty = 0; ty < c->n_types; ty++) /* across zones: regions and links may be faster */
        if (s->count[ty] > 0) {
            const ah_link_info_t l = ah_link_best_across_zones(c, ty, ty);
            *bw = fmax(*bw, l.bw);
            *lat = fmin(*lat, l.latency_s);
        }
}

void ah_hier_bound_of(const ah_cluster_t *c, const ah_scope_t *whole, int zones, ah_hier_bound_t *hb) {
    *hb = (ah_hier_bound_t){.domains = zones, .per_node = whole->per_node};
    for (int a = 0; a < c->n_types; a++)
        for (int b = 0; b < c->n_types; b++) {
            hb->near_bw = fmax(hb->near_bw, ah_link_bw(c, AH_LINK_INTRA, a, b));
            hb->far_bw = fmax(hb->far_bw, fmax(ah_link_bw(c, AH_LINK_INTER_NODE, a, b), ah_link_best_across_zones(c, a, b).bw));
        }
    hb->near_bw = fmax(hb->near_bw, hb->far_bw);
}

double ah_bound_dp_sum_s(double bytes, int64_t n_lo, int64_t n_hi, double bw, double lat, const ah_hier_bound_t *hier) {
    double least = ah_allreduce_seconds(bytes, (int)n_lo, bw, lat);
    if (!hier || n_lo < 2) return least;
    for (int64_t k = 1; k <= hier->domains && k <= n_hi; k++) { /* k 1: a group inside one domain, its own ring */
        const int64_t r_max = (n_lo + k - 1) / k, r_min = n_hi / k;
        const double near = r_max > hier->per_node ? hier->far_bw : hier->near_bw;
        const double inside = r_max > 1 ? 2.0 * (double)(r_max - 1) / (double)r_max * bytes / near : 0;
        const double across = 2.0 * (double)(k - 1) / (double)k * bytes / ((double)r_min * bw) + 2.0 * (double)(k - 1) * lat;
        least = fmin(least, inside + across);
    }
    return least;
}

int ah_bound_scopes(const ah_cost_ctx_t *ctx, int *zone, ah_scope_t *sc, int *counts) {
    zones_of(ctx->cluster, zone);
    int n = add_scope(ctx, zone, AH_LINK_INTER_ZONE, -1, -1, sc, 0, counts);
    for (int i = 0; i < ctx->cluster->n_nodes; i++) {
        if (zone[i] == i) n = add_scope(ctx, zone, AH_LINK_INTER_NODE, i, -1, sc, n, counts);
        n = add_scope(ctx, zone, AH_LINK_INTRA, -1, i, sc, n, counts);
    }
    return n;
}

void ah_zone_rates(const ah_cost_ctx_t *ctx, const int *zone, const double *block_s, int L, double *zone_rate) {
    const ah_cluster_t *c = ctx->cluster;
    const int nt = c->n_types;
    for (int S = 0; S <= L; S++) zone_rate[S] = 0;
    int *left = malloc(sizeof(int) * (size_t)(nt > 0 ? nt : 1));
    if (!left) { /* out of host memory: no zone's rate known, so none is claimed below another's */
        for (int S = 1; S <= L; S++) zone_rate[S] = INFINITY;
        return;
    }
    for (int z = 0; z < c->n_nodes; z++) {
        if (zone[z] != z) continue;
        memset(left, 0, sizeof(int) * (size_t)nt);
        for (int i = 0; i < c->n_nodes; i++)
            if (zone[i] == z) left[c->nodes[i].type] += ah_node_groups(c, i, ctx->t, ctx->train->precision);
        double rate = 0;
        for (int S = 1; S <= L; S++) { /* the zone's fastest group left */
            int best = -1;
            for (int ty = 0; ty < nt; ty++)
                if (left[ty] > 0 && block_s[ty] > 0 && (best < 0 || block_s[ty] < block_s[best])) best = ty;
            if (best < 0) break;
            left[best]--;
            rate += 1 / block_s[best];
            zone_rate[S] = fmax(zone_rate[S], rate);
        }
    }
    free(left);
}
