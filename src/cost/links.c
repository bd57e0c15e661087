/* Links: the one place that says what connects two nodes (class, bandwidth, latency, egress $,
 * private), from the cluster's network and its per-pair "links" (spec/cluster.h). Formulas:
 * docs/cost-model.md "Links"; keep them in step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"

const char *ah_link_class_name(ah_link_t link) {
    static const char *const NAMES[AH_N_LINK_CLASSES] = {"intra-node", "inter-node", "inter-zone",
                                                         "inter-region"};
    return link >= 0 && link < AH_N_LINK_CLASSES ? NAMES[link] : "?";
}

static ah_link_t class_of(const ah_cluster_t *c, int a, int b) {
    const ah_node_t *x = &c->nodes[a], *y = &c->nodes[b];
    if (a == b) return AH_LINK_INTRA;
    if (strcmp(x->zone, y->zone) == 0) return AH_LINK_INTER_NODE;
    if (strcmp(x->region, y->region) == 0) return AH_LINK_INTER_ZONE;
    return AH_LINK_INTER_REGION;
}

ah_link_t ah_link_between(const ah_cluster_t *c, int node_a, int node_b) {
    return class_of(c, node_a, node_b);
}

double ah_link_bw(const ah_cluster_t *c, ah_link_t link, int type_a, int type_b) {
    switch (link) {
    case AH_LINK_INTRA:
        return fmin(c->types[type_a].intra_node_gb_s, c->types[type_b].intra_node_gb_s) * 1e9;
    case AH_LINK_INTER_NODE: return c->net.inter_node_gb_s * 1e9;
    case AH_LINK_INTER_ZONE: return c->net.inter_zone_gb_s * 1e9;
    case AH_LINK_INTER_REGION: return c->net.inter_region_gb_s * 1e9;
    }
    return 0;
}

double ah_link_latency(const ah_cluster_t *c, ah_link_t link) {
    switch (link) {
    case AH_LINK_INTRA: return c->net.intra_latency_us * 1e-6;
    case AH_LINK_INTER_NODE: return c->net.latency_us * 1e-6;
    case AH_LINK_INTER_ZONE: return c->net.inter_zone_latency_us * 1e-6;
    case AH_LINK_INTER_REGION: return c->net.inter_region_latency_us * 1e-6;
    }
    return 0;
}

static bool joins(const ah_net_link_t *l, const char *x, const char *y) {
    return (strcmp(l->a, x) == 0 && strcmp(l->b, y) == 0) || (strcmp(l->a, y) == 0 && strcmp(l->b, x) == 0);
}

/* The override for nodes in different zones: their zones' pair first, then their regions'. */
static int find_override(const ah_cluster_t *c, const ah_node_t *x, const ah_node_t *y) {
    for (int k = 0; k < c->net.n_links; k++)
        if (!c->net.links[k].regions && joins(&c->net.links[k], x->zone, y->zone)) return k;
    if (strcmp(x->region, y->region) == 0) return -1;
    for (int k = 0; k < c->net.n_links; k++)
        if (c->net.links[k].regions && joins(&c->net.links[k], x->region, y->region)) return k;
    return -1;
}

ah_link_info_t ah_link_of(const ah_cluster_t *c, int node_a, int node_b, int type_a, int type_b) {
    const ah_link_t cls = class_of(c, node_a, node_b);
    const ah_network_t *w = &c->net;
    ah_link_info_t l = {.cls = cls, .bw = ah_link_bw(c, cls, type_a, type_b),
                        .latency_s = ah_link_latency(c, cls), .private_link = cls < AH_LINK_INTER_REGION,
                        .override = -1};
    if (w->egress_priced && cls == AH_LINK_INTER_ZONE) l.usd_per_gb = w->egress_inter_zone_usd_per_gb;
    if (w->egress_priced && cls == AH_LINK_INTER_REGION) l.usd_per_gb = w->egress_inter_region_usd_per_gb;
    if (cls < AH_LINK_INTER_ZONE) return l;
    l.override = find_override(c, &c->nodes[node_a], &c->nodes[node_b]);
    if (l.override < 0) return l;
    const ah_net_link_t *o = &w->links[l.override];
    if (o->gb_s >= 0) l.bw = o->gb_s * 1e9;
    if (o->latency_us >= 0) l.latency_s = o->latency_us * 1e-6;
    if (o->usd_per_gb >= 0) l.usd_per_gb = o->usd_per_gb;
    l.total_bw = o->total_gb_s * 1e9;
    l.private_link = o->private_link;
    return l;
}

double ah_link_shared_bw(const ah_link_info_t *l, int flows) {
    if (l->total_bw <= 0 || flows <= 0) return l->bw;
    return fmin(l->bw, l->total_bw / flows);
}

ah_link_info_t ah_link_best_across_zones(const ah_cluster_t *c, int type_a, int type_b) {
    ah_link_info_t l = {.cls = AH_LINK_INTER_ZONE, .override = -1, .bw = ah_link_bw(c, AH_LINK_INTER_ZONE, type_a, type_b),
                        .latency_s = ah_link_latency(c, AH_LINK_INTER_ZONE)};
    if (ah_cluster_region_count(c) > 1) { /* one region: no inter-region link exists */
        l.bw = fmax(l.bw, ah_link_bw(c, AH_LINK_INTER_REGION, type_a, type_b));
        l.latency_s = fmin(l.latency_s, ah_link_latency(c, AH_LINK_INTER_REGION));
    }
    for (int k = 0; k < c->net.n_links; k++) {
        const ah_net_link_t *o = &c->net.links[k];
        if (o->gb_s >= 0) l.bw = fmax(l.bw, o->gb_s * 1e9);
        if (o->latency_us >= 0) l.latency_s = fmin(l.latency_s, o->latency_us * 1e-6);
    }
    return l;
}

/* One kind of member of a DP group: its nodes share a type, a zone and a region, so a pair of
 * them on two nodes, or with a member of another kind, is joined by the same link whichever
 * members they are (ah_link_of reads only those and whether the nodes are one). */
typedef struct {
    int node, other; /* a node of the kind, and a second one (-1: none) */
    bool shared;     /* some node holds two of the group's members */
    int domain;
} member_kind_t;

/* The members' kinds into kind (room for n), each node's into of (room for c->n_nodes, -1 for a
 * node not seen yet). Returns how many kinds. */
static int member_kinds(const ah_cluster_t *c, const int *nodes, const int *domain, int n, int *of,
                        member_kind_t *kind) {
    int k = 0;
    for (int m = 0; m < n; m++) {
        const ah_node_t *x = &c->nodes[nodes[m]];
        if (of[nodes[m]] >= 0) { /* a node seen before: its kind holds it twice */
            kind[of[nodes[m]]].shared = true;
            continue;
        }
        int j = 0;
        for (; j < k; j++) {
            const ah_node_t *y = &c->nodes[kind[j].node];
            if (x->type == y->type && strcmp(x->zone, y->zone) == 0 && strcmp(x->region, y->region) == 0) break;
        }
        if (j == k) kind[k++] = (member_kind_t){.node = nodes[m], .other = -1, .domain = domain[m]};
        else if (kind[j].other < 0) kind[j].other = nodes[m];
        of[nodes[m]] = j;
    }
    return k;
}

/* Takes the link between nodes a and b into out's least bandwidth and longest latency, inside a
 * domain or across two. */
static void take_link(const ah_cluster_t *c, int a, int b, bool across, int flows, ah_dp_links_t *out) {
    const ah_link_info_t l = ah_link_of(c, a, b, c->nodes[a].type, c->nodes[b].type);
    const double bw = ah_link_shared_bw(&l, flows * (across ? out->r_min : 1));
    double *least = across ? &out->x_bw : &out->in_bw, *longest = across ? &out->x_lat : &out->in_lat;
    *least = fmin(*least, bw);
    *longest = fmax(*longest, l.latency_s);
    out->ring_bw = fmin(out->ring_bw, ah_link_shared_bw(&l, flows)); /* the flat ring: one flow a group */
    out->ring_lat = fmax(out->ring_lat, l.latency_s);
}

void ah_dp_links_of(const ah_cluster_t *c, const int *nodes, int n, int flows, ah_dp_links_t *out) {
    *out = (ah_dp_links_t){.domains = 1, .x_bw = INFINITY, .in_bw = INFINITY, .ring_bw = INFINITY};
    const size_t room = (size_t)(n > 0 ? n : 1);
    int *domain = malloc(room * sizeof *domain), *members = calloc(room, sizeof *members);
    int *of = malloc((size_t)(c->n_nodes > 0 ? c->n_nodes : 1) * sizeof *of);
    member_kind_t *kind = malloc(room * sizeof *kind);
    if (domain && members && of && kind && n >= 2) {
        out->domains = ah_cluster_domains(c, nodes, n, domain);
        for (int m = 0; m < n; m++) members[domain[m]]++;
        out->r_min = n;
        for (int d = 0; d < out->domains; d++) {
            out->r_min = members[d] < out->r_min ? members[d] : out->r_min;
            out->r_max = members[d] > out->r_max ? members[d] : out->r_max;
        }
        /* every pair of members, by kind: one node's two members, two nodes of one kind, and
         * each two kinds (the same links as every pair, each taken once) */
        for (int i = 0; i < c->n_nodes; i++) of[i] = -1;
        const int k = member_kinds(c, nodes, domain, n, of, kind);
        for (int i = 0; i < k; i++) {
            if (kind[i].shared) take_link(c, kind[i].node, kind[i].node, false, flows, out);
            if (kind[i].other >= 0) take_link(c, kind[i].node, kind[i].other, false, flows, out);
            for (int j = i + 1; j < k; j++)
                take_link(c, kind[i].node, kind[j].node, kind[i].domain != kind[j].domain, flows, out);
        }
        if (!isfinite(out->in_bw)) out->in_bw = 0;
    } /* else no group to split (or no memory): priced as the ring */
    if (!isfinite(out->ring_bw)) out->ring_bw = 0;
    free(domain);
    free(members);
    free(of);
    free(kind);
}

double ah_dp_hier_seconds(const ah_dp_links_t *l, double bytes) {
    if (l->domains < 2) return 0;
    const double inside = l->r_max > 1 ? ah_allreduce_seconds(bytes, l->r_max, l->in_bw, l->in_lat) : 0;
    const int pieces = (l->r_max + l->r_min - 1) / l->r_min; /* a smallest domain's member's */
    const int k = l->domains;
    return inside + 2.0 * (k - 1) / k * (bytes / l->r_min) / l->x_bw + pieces * 2.0 * (k - 1) * l->x_lat;
}
