/* Cluster spec, the network: "network" in and out, nodes' regions, per-pair links.
 * Format in spec/cluster.h; how the cost model uses it in docs/cost-model.md ("Links").
 * Errors name the document and the field path ("c.json: network.links[1].between[0]: ..."). */
#include "spec/cluster.h"

#include <jansson.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>

#include "core/json.h"

/* Network defaults, used for every field a cluster file leaves out:
 *  inter_node_gb_s 25:     one 200 Gb/s InfiniBand HDR / RoCE NIC per GPU (DGX A100/H100 layout).
 *  inter_zone_gb_s 3:      ~25 Gb/s per GPU across a zone boundary, where many nodes share the
 *                          data-centre interconnect.
 *  latency_us 10:          IB/RoCE message latency (~2-5 us) plus NCCL/MPI launch overhead.
 *  inter_zone_latency_us 500: a few hundred metres to kilometres of fibre plus switching hops.
 *  intra_latency_us 5:     NVLink/PCIe hop plus kernel launch.
 *  cloud_gb_s 1:           S3-style object storage with parallel streams, per node (~8 Gb/s).
 *  inter_region_gb_s 0.6:  AWS limits a flow leaving a region to 5 Gb/s (EC2 User Guide,
 *                          "Amazon EC2 instance network bandwidth": "traffic to other Regions
 *                          ... single-flow 5 Gbps"), ~0.6 GB/s; one flow per GPU.
 *  inter_region_latency_us 35000: one way between us-east-1 and eu-west-1 (~70 ms round trip
 *                          on AWS's inter-region latency dashboards, e.g. cloudping.co); within
 *                          one continent it is 5-35 ms, so give it for the regions you use.
 * Egress has no default: a cloud's list price (AWS: $0.01/GB each way between zones, $0.02/GB
 * between US regions, EC2 On-Demand pricing, "Data Transfer") is the file's to give; without
 * "egress_usd_per_gb" egress is unpriced and every $ figure says so. */
static const ah_network_t DEFAULT_NET = {
    .inter_node_gb_s = 25,
    .inter_zone_gb_s = 3,
    .latency_us = 10,
    .inter_zone_latency_us = 500,
    .intra_latency_us = 5,
    .cloud_gb_s = 1,
    .inter_region_gb_s = 0.6,
    .inter_region_latency_us = 35000,
};

/* Ranges of the numeric fields (as in cluster.c): positive quantities are at least POS_MIN so
 * that a zero, a division by zero later, is refused with the range in the message. */
#define POS_MIN 1e-6
#define BIG 1e9

static const char *const NET_KEYS[] = {"inter_node_gb_s", "inter_zone_gb_s", "latency_us",
                                       "inter_zone_latency_us", "intra_latency_us", "cloud_gb_s",
                                       "inter_region_gb_s", "inter_region_latency_us",
                                       "egress_usd_per_gb", "links", NULL};
static const char *const EGRESS_KEYS[] = {"inter_zone", "inter_region", NULL};
static const char *const LINK_KEYS[] = {"between", "gb_s", "latency_us", "usd_per_gb", "private",
                                        "total_gb_s", NULL};

#define DEFAULT_REGION "default"

/* The region of the first node in `zone` that names one; NULL when none does. */
static const char *zone_region(const ah_cluster_t *c, const char *zone, const bool *given) {
    for (int i = 0; i < c->n_nodes; i++)
        if (given[i] && strcmp(c->nodes[i].zone, zone) == 0) return c->nodes[i].region;
    return NULL;
}

/* Nodes without "region" (region[0] == 0) take their zone's; a zone in two regions is refused,
 * naming both nodes. */
static ah_status_t resolve_regions(ah_cluster_t *c, const char *doc, ah_error_t *err) {
    bool given[c->n_nodes > 0 ? c->n_nodes : 1];
    for (int i = 0; i < c->n_nodes; i++) given[i] = c->nodes[i].region[0] != 0;
    for (int i = 0; i < c->n_nodes; i++) {
        ah_node_t *n = &c->nodes[i];
        const char *r = zone_region(c, n->zone, given);
        if (!given[i]) {
            snprintf(n->region, sizeof n->region, "%s", r ? r : DEFAULT_REGION);
            continue;
        }
        if (strcmp(r, n->region) != 0) {
            int j = 0;
            while (!given[j] || strcmp(c->nodes[j].zone, n->zone) != 0) j++;
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: nodes[%d].region: zone \"%s\" is in region \"%s\" (nodes[%d] %s) "
                                "and in \"%s\" (nodes[%d] %s); a zone belongs to one region",
                                doc, i, n->zone, r, j, c->nodes[j].name, n->region, i, n->name);
        }
    }
    return AH_OK;
}

static bool is_zone(const ah_cluster_t *c, const char *name) {
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].zone, name) == 0) return true;
    return false;
}

static bool is_region(const ah_cluster_t *c, const char *name) {
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].region, name) == 0) return true;
    return false;
}

/* "between": two distinct names, both zones (taken first) or both regions of c's nodes. */
static ah_status_t parse_between(const json_t *v, const char *where, const ah_cluster_t *c,
                                 ah_net_link_t *l, ah_error_t *err) {
    const json_t *b = json_object_get(v, "between");
    if (!b)
        return ah_error_set(err, AH_ERR_INVALID, "%s: missing field \"between\" (two zones or two "
                            "regions, e.g. [\"us-east-1\", \"eu-west-1\"])", where);
    if (!json_is_array(b) || json_array_size(b) != 2 || !json_is_string(json_array_get(b, 0)) ||
        !json_is_string(json_array_get(b, 1)))
        return ah_error_set(err, AH_ERR_INVALID, "%s.between: expected two names (zones or regions), "
                            "got %s", where, json_is_array(b) ? "another list" : ah_json_type_name(b));
    const char *a = json_string_value(json_array_get(b, 0)), *z = json_string_value(json_array_get(b, 1));
    if (strlen(a) >= AH_NAME_MAX || strlen(z) >= AH_NAME_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "%s.between: a name longer than %d characters", where,
                            AH_NAME_MAX - 1);
    if (strcmp(a, z) == 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.between: \"%s\" twice; a link joins two zones or "
                            "two regions", where, a);
    const char *names[2] = {a, z};
    for (int k = 0; k < 2; k++)
        if (!is_zone(c, names[k]) && !is_region(c, names[k]))
            return ah_error_set(err, AH_ERR_INVALID, "%s.between[%d]: \"%s\" is neither a zone nor a "
                                "region of any node", where, k, names[k]);
    if (is_zone(c, a) && is_zone(c, z)) l->regions = false;
    else if (is_region(c, a) && is_region(c, z)) l->regions = true;
    else
        return ah_error_set(err, AH_ERR_INVALID, "%s.between: \"%s\" and \"%s\" are a zone and a "
                            "region; name two zones or two regions", where, a, z);
    snprintf(l->a, sizeof l->a, "%s", a);
    snprintf(l->b, sizeof l->b, "%s", z);
    return AH_OK;
}

static bool same_pair(const ah_net_link_t *x, const ah_net_link_t *y) {
    return x->regions == y->regions && ((strcmp(x->a, y->a) == 0 && strcmp(x->b, y->b) == 0) ||
                                        (strcmp(x->a, y->b) == 0 && strcmp(x->b, y->a) == 0));
}

static ah_status_t parse_link(const json_t *v, const char *doc, int i, ah_cluster_t *c,
                              ah_error_t *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: network.links[%d]", doc, i);
    ah_net_link_t *l = &c->net.links[i];
    *l = (ah_net_link_t){.gb_s = -1, .latency_us = -1, .usd_per_gb = -1};
    ah_status_t s;
    if ((s = ah_json_expect_object(v, where, err)) || (s = ah_json_check_keys(v, where, LINK_KEYS, err)) ||
        (s = parse_between(v, where, c, l, err)) ||
        (s = ah_json_get_num(v, where, "gb_s", false, POS_MIN, BIG, &l->gb_s, err)) ||
        (s = ah_json_get_num(v, where, "latency_us", false, 0, BIG, &l->latency_us, err)) ||
        (s = ah_json_get_num(v, where, "usd_per_gb", false, 0, BIG, &l->usd_per_gb, err)) ||
        (s = ah_json_get_num(v, where, "total_gb_s", false, POS_MIN, BIG, &l->total_gb_s, err)) ||
        (s = ah_json_get_bool(v, where, "private", false, &l->private_link, err)))
        return s;
    for (int j = 0; j < i; j++)
        if (same_pair(&c->net.links[j], l))
            return ah_error_set(err, AH_ERR_INVALID, "%s.between: %s and %s are joined already by "
                                "links[%d]; give each pair once", where, l->a, l->b, j);
    return AH_OK;
}

static ah_status_t parse_links(const json_t *net, const char *doc, ah_cluster_t *c, ah_error_t *err) {
    char where[300];
    snprintf(where, sizeof where, "%s: network", doc);
    json_t *links = NULL;
    ah_status_t s = ah_json_get_typed(net, where, "links", JSON_ARRAY, false, &links, err);
    if (s || !links) return s;
    if (json_array_size(links) > AH_MAX_NET_LINKS)
        return ah_error_set(err, AH_ERR_INVALID, "%s.links: %zu links, more than %d", where,
                            json_array_size(links), AH_MAX_NET_LINKS);
    for (size_t i = 0; i < json_array_size(links); i++) {
        if ((s = parse_link(json_array_get(links, i), doc, (int)i, c, err))) return s;
        c->net.n_links++;
    }
    return AH_OK;
}

static ah_status_t parse_egress(const json_t *net, const char *where, ah_network_t *w,
                                ah_error_t *err) {
    json_t *e = NULL;
    ah_status_t s = ah_json_get_typed(net, where, "egress_usd_per_gb", JSON_OBJECT, false, &e, err);
    if (s || !e) return s;
    char ew[300];
    snprintf(ew, sizeof ew, "%s.egress_usd_per_gb", where);
    if ((s = ah_json_check_keys(e, ew, EGRESS_KEYS, err)) ||
        (s = ah_json_get_num(e, ew, "inter_zone", true, 0, BIG, &w->egress_inter_zone_usd_per_gb, err)) ||
        (s = ah_json_get_num(e, ew, "inter_region", true, 0, BIG, &w->egress_inter_region_usd_per_gb,
                             err)))
        return s;
    w->egress_priced = true;
    return AH_OK;
}

ah_status_t ah_cluster_parse_network(const json_t *v, const char *doc, ah_cluster_t *c,
                                     ah_error_t *err) {
    char where[256];
    snprintf(where, sizeof where, "%s: network", doc);
    ah_network_t *net = &c->net;
    *net = DEFAULT_NET;
    ah_status_t s = resolve_regions(c, doc, err);
    if (s || !v) return s;
    if ((s = ah_json_check_keys(v, where, NET_KEYS, err)) ||
        (s = ah_json_get_num(v, where, "inter_node_gb_s", false, POS_MIN, BIG, &net->inter_node_gb_s,
                             err)) ||
        (s = ah_json_get_num(v, where, "inter_zone_gb_s", false, POS_MIN, BIG, &net->inter_zone_gb_s,
                             err)) ||
        (s = ah_json_get_num(v, where, "latency_us", false, 0, BIG, &net->latency_us, err)) ||
        (s = ah_json_get_num(v, where, "inter_zone_latency_us", false, 0, BIG,
                             &net->inter_zone_latency_us, err)) ||
        (s = ah_json_get_num(v, where, "intra_latency_us", false, 0, BIG, &net->intra_latency_us,
                             err)) ||
        (s = ah_json_get_num(v, where, "cloud_gb_s", false, POS_MIN, BIG, &net->cloud_gb_s, err)) ||
        (s = ah_json_get_num(v, where, "inter_region_gb_s", false, POS_MIN, BIG,
                             &net->inter_region_gb_s, err)) ||
        (s = ah_json_get_num(v, where, "inter_region_latency_us", false, 0, BIG,
                             &net->inter_region_latency_us, err)) ||
        (s = parse_egress(v, where, net, err)))
        return s;
    return parse_links(v, doc, c, err);
}

int ah_cluster_region_count(const ah_cluster_t *c) {
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++) {
        int j = 0;
        while (j < i && strcmp(c->nodes[j].region, c->nodes[i].region) != 0) j++;
        n += j == i;
    }
    return n;
}

#define FIRST_KEPT 64 /* domains whose first member number_by keeps */

/* Whether nodes a and b have the same name at field offset `off` of their ah_node_t. */
static bool same_name(const ah_cluster_t *c, int a, int b, size_t off) {
    return a == b || strcmp((const char *)&c->nodes[a] + off, (const char *)&c->nodes[b] + off) == 0;
}

/* Numbers nodes[] by the name at field offset `off` of their ah_node_t (region or zone), in the
 * order the names first appear: each member is compared with the first member of each name so
 * far (past FIRST_KEPT names, with the earlier members of the names not kept). */
static int number_by(const ah_cluster_t *c, const int *nodes, int n, size_t off, int *domain) {
    int first[FIRST_KEPT], k = 0;
    for (int m = 0; m < n; m++) {
        const int kept = k < FIRST_KEPT ? k : FIRST_KEPT;
        int d = 0;
        while (d < kept && !same_name(c, nodes[first[d]], nodes[m], off)) d++;
        if (d == kept && k > kept) {
            int j = 0;
            while (j < m && (domain[j] < kept || !same_name(c, nodes[j], nodes[m], off))) j++;
            d = j < m ? domain[j] : k;
        }
        if (d == k && k++ < FIRST_KEPT) first[d] = m;
        domain[m] = d;
    }
    return k;
}

int ah_cluster_domains(const ah_cluster_t *c, const int *nodes, int n, int *domain) {
    const int k = number_by(c, nodes, n, offsetof(ah_node_t, region), domain);
    return k > 1 ? k : number_by(c, nodes, n, offsetof(ah_node_t, zone), domain);
}

static json_t *link_to_json(const ah_net_link_t *l) {
    json_t *o = json_pack("{s:[s,s]}", "between", l->a, l->b);
    if (l->gb_s >= 0) json_object_set_new(o, "gb_s", json_real(l->gb_s));
    if (l->latency_us >= 0) json_object_set_new(o, "latency_us", json_real(l->latency_us));
    if (l->usd_per_gb >= 0) json_object_set_new(o, "usd_per_gb", json_real(l->usd_per_gb));
    if (l->total_gb_s > 0) json_object_set_new(o, "total_gb_s", json_real(l->total_gb_s));
    if (l->private_link) json_object_set_new(o, "private", json_true());
    return o;
}

json_t *ah_network_to_json(const ah_cluster_t *c) {
    const ah_network_t *w = &c->net;
    json_t *net = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "inter_node_gb_s", w->inter_node_gb_s,
                            "inter_zone_gb_s", w->inter_zone_gb_s, "latency_us", w->latency_us,
                            "inter_zone_latency_us", w->inter_zone_latency_us, "intra_latency_us",
                            w->intra_latency_us, "cloud_gb_s", w->cloud_gb_s);
    if (ah_cluster_region_count(c) > 1 || w->n_links > 0) {
        json_object_set_new(net, "inter_region_gb_s", json_real(w->inter_region_gb_s));
        json_object_set_new(net, "inter_region_latency_us", json_real(w->inter_region_latency_us));
    }
    if (w->egress_priced)
        json_object_set_new(net, "egress_usd_per_gb",
                            json_pack("{s:f, s:f}", "inter_zone", w->egress_inter_zone_usd_per_gb,
                                      "inter_region", w->egress_inter_region_usd_per_gb));
    if (w->n_links > 0) {
        json_t *links = json_array();
        for (int i = 0; i < w->n_links; i++) json_array_append_new(links, link_to_json(&w->links[i]));
        json_object_set_new(net, "links", links);
    }
    return net;
}
