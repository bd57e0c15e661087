/* The lower bound's scopes (plan/search_bound.c): the sets of TP groups a plan may use, by the
 * worst link it crosses, and what the hops between their groups cost at least. Pure functions of
 * the cluster at one TP degree; no ownership beyond the caller's buffers. */
#ifndef AH_PLAN_BOUND_SCOPE_H
#define AH_PLAN_BOUND_SCOPE_H

#include "cost/cost.h"

/* A plan whose worst link is k uses the groups of one node (k intra), of one zone (inter-node) or
 * of the cluster (inter-zone); its DP sync runs on link k. A scope is such a set of groups, as
 * groups per type; scopes with equal counts and link are one. */
typedef struct ah_scope {
    int k;
    int *count;     /* [n_types] groups */
    int per_node;   /* the most of its groups one node holds (1: every hop between stages leaves a node) */
    int per_zone;   /* the most of its groups one zone holds */
} ah_scope_t;

/* The least time one micro-batch's activation takes between two stages, on any link from `from`
 * on (AH_LINK_INTRA: any link; AH_LINK_INTER_NODE: between nodes; AH_LINK_INTER_ZONE: between zones). */
double ah_p2p_least(const ah_cost_ctx_t *ctx, ah_link_t from);

/* The scopes of the cluster's groups at ctx's TP degree into sc (the whole cluster first; room for
 * 2 n_nodes + 1), their counts into counts (room for n_types per scope), each node's zone (the
 * index of the first node in its zone) into zone. Returns how many. */
int ah_bound_scopes(const ah_cost_ctx_t *ctx, int *zone, ah_scope_t *sc, int *counts);

/* The fastest bandwidth and least latency of the scope's link among its types (intra-node: the
 * plan's one node, whose type sets it). */
void ah_scope_link(const ah_cluster_t *c, const ah_scope_t *s, double *bw, double *lat);

/* What the hierarchical DP sync can gain at least in a scope across zones (the search weighs it
 * per candidate there, search_cand.c): how many domains (zones or regions) a DP group can span at
 * most, the most TP groups one node of the scope holds, and the fastest link between two groups
 * of one node (near_bw) and of two nodes anywhere (far_bw). */
typedef struct ah_hier_bound {
    int domains;
    int per_node;
    double near_bw, far_bw;
} ah_hier_bound_t;

/* hb's figures for the cluster's scope (domains: its zones; per_node as the scope's). */
void ah_hier_bound_of(const ah_cluster_t *c, const ah_scope_t *whole, int zones, ah_hier_bound_t *hb);

/* The least seconds of a DP sum of `bytes` per member over n_lo .. n_hi members on a scope's link
 * (bw, lat: ah_scope_link): the flat ring on it (n_lo members), or, where hier is not NULL, the
 * lesser of that and the hierarchical sync's least (cost/links.c ah_dp_hier_seconds) over k = 1 ..
 * hier->domains domains: its largest domain has r_max >= ceil(n_lo / k) members, whose ring inside
 * moves 2 (r_max - 1) / r_max x bytes at most near_bw (far_bw once r_max > per_node: two of them
 * are on two nodes); its smallest has r_min <= floor(n_hi / k), and the all-reduce across moves
 * 2 (k - 1) / k x bytes / r_min over a link no faster than bw, with 2 (k - 1) latencies >= lat.
 * k = 1 is a group inside one domain, priced as its own ring on the links it crosses (the plan's
 * other groups may cross zones: plan/evaluate.c group_sync). */
double ah_bound_dp_sum_s(double bytes, int64_t n_lo, int64_t n_hi, double bw, double lat, const ah_hier_bound_t *hier);

/* zone_rate[S] for S = 1 .. L: the most blocks per second S groups of one zone run, each zone's
 * fastest groups first (0 past the largest zone's groups); block_s[type] is a block's seconds on
 * a group of that type. zone as ah_bound_scopes fills it. */
void ah_zone_rates(const ah_cost_ctx_t *ctx, const int *zone, const double *block_s, int L, double *zone_rate);

#endif
