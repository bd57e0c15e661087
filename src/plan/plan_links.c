/* What a plan sends over which link, per iteration (docs/cost-model.md "Traffic and egress"):
 * bytes by link class, the egress $ of the bytes that cross zone and region boundaries, the bytes
 * no price covers, and what crosses each region boundary on which link (the rule for the open
 * internet, ah_plan_wan_check). Every link is the one cost/links.c's ah_link_of gives. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "cost/cost.h"
#include "plan/ckpt_traffic.h"
#include "plan/plan_out.h"

const char *ah_traffic_kind_name(ah_traffic_kind_t k) {
    static const char *const NAMES[AH_N_TRAFFIC_KINDS] = {"pipeline p2p", "DP sync", "TP", "CP ring", "checkpoint"};
    return k >= 0 && k < AH_N_TRAFFIC_KINDS ? NAMES[k] : "?";
}

/* Whether crossing x is the link l joins between nodes a and b: the same override, or the same
 * pair of regions for the class. */
static bool same_link(const ah_cluster_t *c, const ah_plan_crossing_t *x, const ah_link_info_t *l, int a, int b) {
    if (x->override != l->override) return false;
    if (x->override >= 0) return true;
    const char *xa = c->nodes[x->node_a].region, *xb = c->nodes[x->node_b].region;
    const char *ra = c->nodes[a].region, *rb = c->nodes[b].region;
    return (strcmp(xa, ra) == 0 && strcmp(xb, rb) == 0) || (strcmp(xa, rb) == 0 && strcmp(xb, ra) == 0);
}

static void note_crossing(const ah_cluster_t *c, const ah_link_info_t *l, int a, int b, ah_traffic_kind_t kind,
                          double bytes, double usd, ah_plan_traffic_t *t) {
    int k = 0;
    while (k < t->n_crossings && !same_link(c, &t->crossings[k], l, a, b)) k++;
    if (k == t->n_crossings) {
        if (k == AH_MAX_CROSSINGS) {
            t->crossings_unlisted++;
            return;
        }
        t->crossings[t->n_crossings++] = (ah_plan_crossing_t){.node_a = a, .node_b = b, .override = l->override,
                                                              .private_link = l->private_link,
                                                              .bytes_per_s = l->total_bw > 0 ? l->total_bw : l->bw};
    }
    t->crossings[k].bytes[kind] += bytes;
    t->crossings[k].usd += usd;
}

int ah_dp_group_nodes_of(const ah_plan_t *p, int which, int i, int *nodes) {
    const ah_pipeline_t *pl = &p->pipelines[i];
    const int last = pl->stages[pl->n_stages - 1].devices[0].node;
    if (which == AH_DP_HEAD) {
        nodes[0] = last;
        return 1;
    }
    if (which == AH_DP_EMBED) {
        nodes[0] = pl->stages[0].devices[0].node;
        nodes[1] = last;
        return p->model.tied && pl->n_stages > 1 ? 2 : 1;
    }
    int s = 0;
    while (s + 1 < pl->n_stages && which >= pl->stages[s].last) s++;
    nodes[0] = pl->stages[s].devices[0].node;
    return 1;
}

int ah_dp_group_nodes(const ah_plan_t *p, int which, int *nodes) {
    int n = 0;
    for (int i = 0; i < p->n_pipelines; i++) n += ah_dp_group_nodes_of(p, which, i, nodes + n);
    return n;
}

int ah_dp_most_domains(const ah_plan_t *p, int enough) {
    const int cap = 2 * p->n_pipelines;
    int *nodes = malloc(sizeof *nodes * (size_t)cap), *domain = malloc(sizeof *domain * (size_t)cap), most = 1;
    for (int which = AH_DP_HEAD; nodes && domain && which < (int)p->model.n_layer && most < enough; which++) {
        const int k = ah_cluster_domains(&p->cluster, nodes, ah_dp_group_nodes(p, which, nodes), domain);
        most = k > most ? k : most;
    }
    free(nodes);
    free(domain);
    return most;
}

/* bytes of kind over link l from node a to node b (b < 0: out of the cluster, listed under no
 * crossing); in_open: they count as crossing regions in the open where l is not private (a cloud
 * upload goes over HTTPS: not). */
static void add_on(const ah_plan_t *p, const ah_link_info_t *l, int node_a, int node_b, ah_traffic_kind_t kind,
                   double bytes, bool in_open, ah_plan_traffic_t *t) {
    const ah_cluster_t *c = &p->cluster;
    t->bytes[l->cls] += bytes;
    t->kind_bytes[kind][l->cls] += bytes;
    if (l->cls < AH_LINK_INTER_ZONE) return;
    const bool priced = c->net.egress_priced || (l->override >= 0 && c->net.links[l->override].usd_per_gb >= 0);
    const double usd = priced ? bytes / 1e9 * l->usd_per_gb : 0;
    if (priced) {
        t->egress_usd += usd;
        t->egress_usd_by[l->cls] += usd;
        t->kind_usd[kind] += usd;
    }
    else t->unpriced_bytes += bytes;
    if (l->cls < AH_LINK_INTER_REGION) return;
    if (in_open && !l->private_link) t->public_bytes += bytes;
    if (node_b >= 0) note_crossing(c, l, node_a, node_b, kind, bytes, usd, t);
}

static void add(const ah_plan_t *p, int node_a, int node_b, int type_a, int type_b, ah_traffic_kind_t kind,
                double bytes, ah_plan_traffic_t *t) {
    if (bytes <= 0) return;
    const ah_link_info_t l = ah_link_of(&p->cluster, node_a, node_b, type_a, type_b);
    add_on(p, &l, node_a, node_b, kind, bytes, true, t);
}

/* Context parallelism's ring on stage a of pipeline pl (mb micro-batches): per micro-batch and
 * block, c - 1 key/value blocks forward (again when recomputing), c - 1 more and c gradient
 * accumulators backward, from each CP rank's device of each TP rank to the next CP rank's. */
static void ring_traffic(const ah_plan_t *p, const ah_pipeline_t *pl, const ah_stage_t *a, double mb,
                         ah_plan_traffic_t *t) {
    const int c = ah_pipeline_cp(pl);
    const double block = (double)ah_cp_ring_block_bytes(&p->model, p->tp, p->train.micro_batch, p->train.seq_len, c);
    const double steps = (a->recompute ? 2 : 1) * (c - 1) + (c - 1) + c;
    for (int j = 0; c > 1 && j < c; j++)
        for (int k = 0; k < p->tp; k++)
            add(p, a->devices[j * p->tp + k].node, a->devices[(j + 1) % c * p->tp + k].node, a->type, a->type,
                AH_TRAFFIC_CP_RING, mb * (a->last - a->first) * steps * block, t);
}

/* Pipeline p2p (activations forward, their gradients back; each TP rank sends its copy, or under
 * scatter-gather its 1/t part, which the receiving TP group all-gathers inside its node: (t-1) x
 * N x C / t per rank, (t-1) x N x C in all) and the TP all-reduces inside each
 * stage's node (the blocks': 2 forward, 2 backward, 2 more when recomputing, of N x C each; a ring
 * moves 2 (t-1) x the bytes over the group). */
static void pipeline_traffic(const ah_plan_t *p, const ah_pipeline_t *pl, ah_plan_traffic_t *t) {
    const double nc = (double)(p->train.micro_batch * p->train.seq_len * p->model.d_model *
                               ah_precision_elt_bytes(p->train.precision));
    const double mb = (double)pl->micro_batches;
    for (int s = 0; s < pl->n_stages; s++) {
        const ah_stage_t *a = &pl->stages[s];
        const double ar = (a->recompute ? 6 : 4) * (double)(a->last - a->first);
        add(p, a->devices[0].node, a->devices[0].node, a->type, a->type, AH_TRAFFIC_TP, mb * ar * 2.0 * (p->tp - 1) * nc, t);
        ring_traffic(p, pl, a, mb, t);
        if (s + 1 == pl->n_stages) break;
        const ah_stage_t *b = &pl->stages[s + 1];
        if (memcmp(&a->devices[0], &b->devices[0], sizeof a->devices[0]) == 0) continue;
        const int parts = p->p2p == AH_P2P_WHOLE ? 1 : p->tp;
        add(p, a->devices[0].node, b->devices[0].node, a->type, b->type, AH_TRAFFIC_P2P, 2.0 * mb * p->tp / parts * nc, t);
        for (int k = 0; parts > 1 && k < 2; k++) { /* the activation's gather on b, the gradient's on a */
            const ah_stage_t *g = k == 0 ? b : a;
            add(p, g->devices[0].node, g->devices[0].node, g->type, g->type, AH_TRAFFIC_TP, mb * (p->tp - 1) * nc, t);
        }
    }
}

/* One DP group's sum of `bytes` (each member's) over its members on nodes[0 .. n): a ring in member
 * order (each member sends 2 (n-1)/n of the bytes to the next), or with "dp_sync": hierarchical
 * over two domains or more (runtime/dp_hier.h) a ring inside each domain (its reduce-scatter and
 * all-gather) and, per piece (P of them, P the largest domain's members), a ring of its holders
 * across the domains. */
static void group_traffic(const ah_plan_t *p, const int *nodes, int n, int *domain, double bytes, int ty,
                          ah_plan_traffic_t *t) {
    const int k = p->dp_sync == AH_DP_SYNC_HIERARCHICAL ? ah_cluster_domains(&p->cluster, nodes, n, domain) : 1;
    if (k < 2) {
        for (int m = 0; n > 1 && m < n; m++) add(p, nodes[m], nodes[(m + 1) % n], ty, ty, AH_TRAFFIC_DP_SYNC, 2.0 * (n - 1) / n * bytes, t);
        return;
    }
    int pieces = 0, *of = domain + n; /* of: a domain's members, in member order */
    for (int d = 0; d < k; d++) {
        int r = 0;
        for (int m = 0; m < n; m++)
            if (domain[m] == d) of[r++] = nodes[m];
        pieces = r > pieces ? r : pieces;
        for (int j = 0; r > 1 && j < r; j++) add(p, of[j], of[(j + 1) % r], ty, ty, AH_TRAFFIC_DP_SYNC, 2.0 * (r - 1) / r * bytes, t);
    }
    for (int q = 0; q < pieces; q++) { /* piece q's holder in each domain, then their ring */
        for (int d = 0; d < k; d++) {
            int r = 0, at = 0;
            for (int m = 0; m < n; m++) r += domain[m] == d;
            int j = 0; /* the member whose pieces [j P / r, (j + 1) P / r) hold q */
            while ((j + 1) * pieces / r <= q) j++;
            for (int m = 0, seen = 0; m < n; m++)
                if (domain[m] == d && seen++ == j) at = nodes[m];
            of[d] = at;
        }
        for (int d = 0; d < k; d++) add(p, of[d], of[(d + 1) % k], ty, ty, AH_TRAFFIC_DP_SYNC, 2.0 * (k - 1) / k * bytes / pieces, t);
    }
}

/* The DP sync: each block's group, the last stages' (final norm, and untied head) and the
 * embedding's holders'; every TP rank its shard. A sharded optimizer's reduce-scatter and all-gather
 * move the same bytes. */
static void dp_traffic(const ah_plan_t *p, ah_plan_traffic_t *t) {
    const ah_model_t *m = &p->model;
    const double elt = (double)ah_precision_elt_bytes(p->train.precision);
    const double block = (double)ah_layer_params(m, AH_LAYER_BLOCK, p->tp) * elt * p->tp;
    const double matrix = (double)ah_head_matrix_params(m, p->tp) * elt * p->tp;
    const double last = (double)ah_head_norm_params(m, p->tp) * elt * p->tp + (m->tied ? 0 : matrix);
    const int ty = p->pipelines[0].stages[0].type, cap = 2 * p->n_pipelines;
    int *nodes = malloc(sizeof *nodes * (size_t)cap), *domain = malloc(sizeof *domain * 2 * (size_t)cap);
    for (int l = 0; nodes && domain && l < (int)m->n_layer; l++)
        group_traffic(p, nodes, ah_dp_group_nodes(p, l, nodes), domain, block, ty, t);
    if (nodes && domain) {
        group_traffic(p, nodes, ah_dp_group_nodes(p, AH_DP_HEAD, nodes), domain, last, ty, t);
        group_traffic(p, nodes, ah_dp_group_nodes(p, AH_DP_EMBED, nodes), domain, matrix, ty, t);
    }
    free(nodes);
    free(domain);
}

/* A node's cloud upload (bytes per iteration) to the bucket, in the region of node `bucket` (-1:
 * a region of none of the cluster's nodes): inside its region it leaves the node for the region's
 * object store (inter-node, no egress: clouds do not bill a transfer to their object storage in
 * the same region); from another region it crosses that region pair's link at its egress price. */
static void cloud_upload(const ah_plan_t *p, int node, int bucket, double bytes, ah_plan_traffic_t *t) {
    const ah_cluster_t *c = &p->cluster;
    const int ty = c->nodes[node].type;
    ah_link_info_t l;
    if (bucket >= 0 && strcmp(c->nodes[node].region, c->nodes[bucket].region) == 0)
        l = (ah_link_info_t){.cls = AH_LINK_INTER_NODE, .override = -1};
    else if (bucket >= 0)
        l = ah_link_of(c, node, bucket, ty, c->nodes[bucket].type);
    else
        l = (ah_link_info_t){.cls = AH_LINK_INTER_REGION, .usd_per_gb = c->net.egress_inter_region_usd_per_gb, .override = -1};
    add_on(p, &l, node, bucket, AH_TRAFFIC_CKPT, bytes, false, t);
}

/* The checkpoints under the plan's policy (p->train.ckpt), per iteration: each save's replication
 * to the partners (--replica-memory-gb: each node's step to its partner, while the partner's budget
 * lasts, sources in node order as ah_replica_fit takes them, counted by bytes, not by whole file)
 * and its cloud upload, over the save interval; the replication's seconds (blocking, the pairs in the
 * runtime's rounds, each over one flow a rank of the smaller node: ah_ckpt_pairs_in_rounds,
 * ah_ckpt_lane_count, ah_ckpt_pairs_s, the simulator's rule too) into ckpt_blocked_s. */
static void ckpt_traffic(const ah_plan_t *p, ah_plan_traffic_t *t) {
    const ah_ckpt_policy_t *pol = &p->train.ckpt;
    t->ckpt_every = pol->every > 0 ? pol->every : 0;
    if (!t->ckpt_every || (pol->replica_gb <= 0 && !pol->cloud_region[0])) return;
    const ah_cluster_t *c = &p->cluster;
    const int nn = c->n_nodes;
    int64_t *own = calloc((size_t)nn + 1, sizeof *own), *cloud = calloc((size_t)nn + 1, sizeof *cloud);
    int *partner = calloc((size_t)nn + 1, sizeof *partner), *leader = calloc((size_t)nn + 1, sizeof *leader);
    int *ranks = calloc((size_t)nn + 1, sizeof *ranks);
    const char **zones = calloc((size_t)nn + 1, sizeof *zones);
    double *held = calloc((size_t)nn + 1, sizeof *held);
    ah_ckpt_pair_t *pairs = calloc((size_t)nn + 1, sizeof *pairs);
    int n_pairs = 0;
    bool ok = own && cloud && partner && leader && ranks && zones && held && pairs &&
              ah_ckpt_node_bytes(p, own, cloud, NULL, &(ah_error_t){0}) == AH_OK && ah_ckpt_node_ranks(p, ranks);
    for (int n = 0; ok && n < nn; n++) {
        zones[n] = c->nodes[n].zone;
        leader[n] = own[n] > 0 ? 0 : -1; /* the node holds ranks */
    }
    if (ok && ah_ckpt_partners(nn, leader, zones, partner)) {
        const double every = (double)pol->every, budget = pol->replica_gb * 1e9;
        for (int y = 0; pol->replica_gb > 0 && y < nn; y++) {
            const int h = partner[y];
            if (h < 0) continue;
            const double sent = fmin((double)own[y], budget - held[h]);
            held[h] += sent;
            const ah_link_info_t l = ah_link_of(c, y, h, c->nodes[y].type, c->nodes[h].type);
            if (sent > 0) add_on(p, &l, y, h, AH_TRAFFIC_CKPT, sent / every, true, t);
            pairs[n_pairs++] = (ah_ckpt_pair_t){.from = y, .to = h, .bytes = sent, .lanes = ah_ckpt_lane_count(ranks[y], ranks[h])};
        }
        ah_ckpt_pairs_in_rounds(pairs, n_pairs);
        const double blocked = ah_ckpt_pairs_s(c, pairs, n_pairs);
        if (blocked < 0) t->ckpt_every = 0; /* out of host memory: said as not counted */
        else t->ckpt_blocked_s += blocked / every;
        int bucket = -1;
        for (int n = 0; pol->cloud_region[0] && n < nn && bucket < 0; n++)
            if (strcmp(c->nodes[n].region, pol->cloud_region) == 0) bucket = n;
        for (int n = 0; pol->cloud_region[0] && n < nn; n++)
            if (cloud[n] > 0) cloud_upload(p, n, bucket, (double)cloud[n] / every, t);
    } else
        t->ckpt_every = 0; /* no host memory to size them: said as not counted */
    free(own);
    free(cloud);
    free(partner);
    free(leader);
    free(ranks);
    free(zones);
    free(held);
    free(pairs);
}

void ah_plan_traffic(const ah_plan_t *p, ah_plan_traffic_t *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < p->n_pipelines; i++) pipeline_traffic(p, &p->pipelines[i], out);
    dp_traffic(p, out);
    ckpt_traffic(p, out);
}

double ah_plan_ckpt_blocked_s(const ah_plan_t *p) {
    if (p->train.ckpt.every <= 0 || p->train.ckpt.replica_gb <= 0) return 0;
    ah_plan_traffic_t t;
    memset(&t, 0, sizeof t);
    ckpt_traffic(p, &t); /* the checkpoints alone: ah_evaluate asks it of every plan it prices */
    return t.ckpt_blocked_s;
}

const char *ah_plan_crossings_str(const ah_plan_t *p, const ah_plan_traffic_t *t, bool open_only, char *buf,
                                  size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const ah_cluster_t *c = &p->cluster;
    for (int k = 0; k < t->n_crossings; k++) {
        const ah_plan_crossing_t *x = &t->crossings[k];
        if (open_only && x->private_link) continue;
        const ah_net_link_t *o = x->override >= 0 ? &c->net.links[x->override] : NULL;
        ah_str_appendf(&s, "%s%s <-> %s (%s%s): ", s.len ? "; " : "across regions: ",
                       o ? o->a : c->nodes[x->node_a].region, o ? o->b : c->nodes[x->node_b].region,
                       o ? "its network.links entry, " : "", x->private_link ? "private" : "not marked private");
        for (int kind = 0, n = 0; kind < AH_N_TRAFFIC_KINDS; kind++)
            if (x->bytes[kind] > 0)
                ah_str_appendf(&s, "%s%s %.3f GB", n++ ? ", " : "", ah_traffic_kind_name((ah_traffic_kind_t)kind),
                               x->bytes[kind] / 1e9);
        ah_str_appendf(&s, " per iteration");
    }
    if (t->crossings_unlisted > 0 && s.len)
        ah_str_appendf(&s, "; and %d more crossings of region pairs", t->crossings_unlisted);
    if (!open_only && t->public_bytes > 0)
        ah_str_appendf(&s, " (train and run refuse traffic on a link not marked private without "
                           "--allow-unencrypted-wan)");
    return buf;
}

const char *ah_plan_region_why(const ah_plan_t *p, const ah_plan_traffic_t *t, double iteration_s, char *buf,
                               size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const ah_cluster_t *c = &p->cluster;
    if (ah_cluster_region_count(c) > 1 && t->n_crossings == 0)
        ah_str_appendf(&s, "nothing crosses a region boundary: every transfer stays inside one region");
    for (int k = 0; k < t->n_crossings; k++) {
        const ah_plan_crossing_t *x = &t->crossings[k];
        const ah_net_link_t *o = x->override >= 0 ? &c->net.links[x->override] : NULL;
        double bytes = 0;
        for (int kind = 0; kind < AH_N_TRAFFIC_KINDS; kind++) bytes += x->bytes[kind];
        ah_str_appendf(&s, "%s%s <-> %s: %.3f GB per iteration (", k ? "; " : "", o ? o->a : c->nodes[x->node_a].region,
                       o ? o->b : c->nodes[x->node_b].region, bytes / 1e9);
        for (int kind = 0, n = 0; kind < AH_N_TRAFFIC_KINDS; kind++)
            if (x->bytes[kind] > 0)
                ah_str_appendf(&s, "%s%s %.3f GB", n++ ? ", " : "", ah_traffic_kind_name((ah_traffic_kind_t)kind),
                               x->bytes[kind] / 1e9);
        ah_str_appendf(&s, "), %.3f s of the link at %.3f GB/s%s, egress $%.4f per iteration ($%.2f/h at %.4f s per "
                       "iteration)", bytes / x->bytes_per_s, x->bytes_per_s / 1e9,
                       o && o->total_gb_s > 0 ? " (its total_gb_s)" : " (one GPU's flow)", x->usd,
                       ah_usd_per_hour_at(x->usd, iteration_s), iteration_s);
    }
    if (t->crossings_unlisted > 0) ah_str_appendf(&s, "; and %d more crossings of region pairs", t->crossings_unlisted);
    return buf;
}

ah_status_t ah_plan_wan_check(const ah_plan_t *p, bool allowed, ah_error_t *err) {
    if (allowed) return AH_OK;
    ah_plan_traffic_t t;
    ah_plan_traffic(p, &t);
    if (t.public_bytes <= 0) return AH_OK;
    char links[1024];
    ah_plan_crossings_str(p, &t, true, links, sizeof links);
    return ah_error_set(err, AH_ERR_USAGE, "the plan's traffic crosses a region boundary in the open, unencrypted "
                        "(MPI's TCP and the peer tier are not encrypted): %s; run it over a VPN such as WireGuard "
                        "or cloud peering and mark the link \"private\": true in the cluster's network.links "
                        "(docs/multi-host.md \"Across regions\"), or pass --allow-unencrypted-wan", links);
}
