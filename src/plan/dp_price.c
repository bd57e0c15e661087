/* The DP sync's price: every layer's DP group on its own links (contract in plan/dp_price.h;
 * formulas: docs/cost-model.md "Links", "Hierarchical DP sync"; keep them in step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan/dp_price.h"
#include "plan/evaluate.h"

/* With per-pair "links": the slowest link between two nodes of the plan (an override may be faster
 * or slower than its class), its bandwidth shared by the devices of a pipeline, one DP ring each
 * (docs/cost-model.md "Links"), and the longest latency. Unchanged when the plan is on one node. */
static void dp_link_overrides(const ah_plan_t *p, int slow_type, double *bw, double *lat) {
    const ah_cluster_t *c = &p->cluster;
    bool *used = calloc((size_t)c->n_nodes, sizeof *used);
    if (!used) return; /* the class's figures stand */
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++) used[p->pipelines[i].stages[s].devices[0].node] = true;
    const int flows = ah_pipeline_groups(&p->pipelines[0]) * ah_stage_devices(&p->pipelines[0], p->tp);
    double least = INFINITY, longest = 0;
    for (int a = 0; a < c->n_nodes; a++)
        for (int b = a + 1; b < c->n_nodes && used[a]; b++) {
            if (!used[b]) continue;
            const ah_link_info_t l = ah_link_of(c, a, b, slow_type, slow_type);
            least = fmin(least, ah_link_shared_bw(&l, flows));
            longest = fmax(longest, l.latency_s);
        }
    free(used);
    if (isfinite(least)) {
        *bw = least;
        *lat = longest;
    }
}

static ah_link_t max_link(ah_link_t a, ah_link_t b) { return a > b ? a : b; }

/* The one link every DP collective is priced on: the worst kind among all devices of the plan
 * (intra-node if all in one node, inter-node if all in one zone, else inter-zone); intra uses the
 * slowest intra-node link of the types in the plan, whose type goes to *slow. */
static ah_link_t dp_link(const ah_plan_t *p, double *bw, double *lat, int *slow) {
    const ah_cluster_t *c = &p->cluster;
    const ah_device_ref_t *d0 = &p->pipelines[0].stages[0].devices[0];
    ah_link_t worst = AH_LINK_INTRA;
    int slow_type = p->pipelines[0].stages[0].type;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++) {
            const ah_stage_t *st = &pl->stages[s];
            if (c->types[st->type].intra_node_gb_s < c->types[slow_type].intra_node_gb_s)
                slow_type = st->type;
            for (int r = 0; r < ah_stage_devices(pl, p->tp); r++) {
                if (r > 0 && st->devices[r].node == st->devices[r - 1].node) continue; /* that node's link is in */
                if (worst < AH_LINK_INTER_ZONE) worst = max_link(worst, ah_link_between(c, d0->node, st->devices[r].node));
                else if (worst < AH_LINK_INTER_REGION && strcmp(c->nodes[d0->node].region, c->nodes[st->devices[r].node].region) != 0)
                    worst = AH_LINK_INTER_REGION; /* past a zone only a region is left (a zone is in one region) */
            }
        }
    }
    /* Against one reference device: two devices in different zones differ from d0's zone in at
     * least one case, and two different nodes differ from d0's node in at least one case, so
     * the maximum over d0-pairs is the maximum over all pairs. */
    *bw = ah_link_bw(c, worst, slow_type, slow_type);
    *lat = ah_link_latency(c, worst);
    if (c->net.n_links > 0) dp_link_overrides(p, slow_type, bw, lat);
    *slow = slow_type;
    return worst;
}

/* Whether the plan's links are in order: no per-pair links, and each class no faster and no
 * nearer than the one inside it for every type of the plan (the catalog's and the defaults'
 * figures are). Then the slowest link between two members of a group is its worst class. */
static bool classes_ordered(const ah_plan_t *p, int slow_type) {
    const ah_cluster_t *c = &p->cluster;
    if (c->net.n_links > 0) return false;
    for (int k = AH_LINK_INTER_NODE; k < AH_N_LINK_CLASSES; k++)
        if (ah_link_latency(c, (ah_link_t)k) < ah_link_latency(c, (ah_link_t)(k - 1))) return false;
    for (int k = AH_LINK_INTER_ZONE; k < AH_N_LINK_CLASSES; k++)
        if (ah_link_bw(c, (ah_link_t)k, 0, 0) > ah_link_bw(c, (ah_link_t)(k - 1), 0, 0)) return false;
    /* every type of the plan: the one with the slowest intra-node link (dp_link's slow_type) decides */
    return ah_link_bw(c, AH_LINK_INTRA, slow_type, slow_type) >= ah_link_bw(c, AH_LINK_INTER_NODE, slow_type, slow_type);
}

/* The end of the DP segment that starts at block a of a stage ending at last: the next block a
 * stage of the plan starts at (d->cut); without memory for the cuts, the stage's end (the stage as
 * its first block's group). */
static int segment_end(const ah_dp_terms_t *d, int a, int last) {
    if (!d->cut) return last;
    int b = a + 1;
    while (b < last && !d->cut[b]) b++;
    return b;
}

/* The sharded optimizer's stretch of stage sg's blocks' sync: the worst of its DP segments'
 * (ah_opt_sync_factor). */
static double blocks_factor(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg) {
    double factor = 1;
    for (int a = sg->first, b; a < sg->last; a = b) {
        b = segment_end(d, a, sg->last);
        factor = fmax(factor, ah_opt_sync_factor(p, AH_OPT_BLOCKS, a, b));
    }
    return factor;
}


/* DP group `which`'s links (ah_dp_links_of over ah_dp_group_nodes), from d's memo once found; the
 * rings sharing a link d->flows over the group's members a pipeline. false without host memory to
 * find them. */
static bool group_links(const ah_plan_t *p, const ah_dp_terms_t *d, int which, ah_dp_links_t *l) {
    const int at = which >= 0 ? which : (int)p->model.n_layer - 1 - which; /* d->links' index */
    ah_dp_links_t *memo = d->links ? &d->links[at] : NULL;
    if (memo && memo->domains > 0) {
        *l = *memo;
        return true;
    }
    *l = (ah_dp_links_t){.domains = 1};
    int *nodes = malloc(sizeof *nodes * 2 * (size_t)p->n_pipelines);
    if (!nodes) return false;
    /* each device sums in one ring at a time: a group with m members a pipeline (the tied
     * embedding's two) runs beside at most d->flows / m rings, not d->flows */
    const int n = ah_dp_group_nodes(p, which, nodes);
    const int flows = n > p->n_pipelines ? d->flows * p->n_pipelines / n : d->flows;
    ah_dp_links_memo_of(d->links_memo, &p->cluster, nodes, n, flows > 0 ? flows : 1, l);
    free(nodes);
    if (memo) *memo = *l;
    return true;
}

/* The link DP group `which`'s flat ring is priced on: the slowest between two of its members
 * (shared by d->flows rings) and the longest latency (ah_dp_links_t ring_bw, ring_lat), not the
 * plan's DP link, which a group inside one region (zone, node) does not cross. Where a stage spans
 * nodes (a CP group across alike nodes: its other ranks' nodes are not listed) or without memory
 * to find the group's links, the plan's DP link. With the links in order (d->ordered) the worst
 * class between the group's first member and another, as dp_link finds the plan's (two members in
 * different zones differ from the first's zone in at least one case; likewise nodes, regions), the
 * pass stopping at the plan's worst class: ah_dp_links_of's figures without its pairs of kinds,
 * which the search's many candidates would pay for. */
static void ring_link(const ah_plan_t *p, const ah_dp_terms_t *d, int which, double *bw, double *lat) {
    const int at = which >= 0 ? which : (int)p->model.n_layer - 1 - which;
    double *memo = d->ring && d->own_ring ? &d->ring[2 * at] : NULL;
    *bw = d->bw;
    *lat = d->lat;
    if (memo && memo[0] > 0) {
        *bw = memo[0];
        *lat = memo[1];
        return;
    }
    ah_dp_links_t l;
    if (!d->own_ring) return;
    if (d->ordered) { /* pipeline by pipeline, stopping at the plan's worst class */
        const ah_cluster_t *c = &p->cluster;
        int first = -1, at_i[2], n = 0;
        ah_link_t worst = AH_LINK_INTRA;
        for (int i = 0; i < p->n_pipelines && worst < d->worst; i++)
            for (int k = 0, m = ah_dp_group_nodes_of(p, which, i, at_i); k < m; k++, n++) {
                if (first < 0) first = at_i[k];
                const ah_link_t cls = ah_link_between(c, first, at_i[k]);
                worst = cls > worst ? cls : worst;
            }
        if (n > 1) { /* else (the plan inside one node, the pass not entered: first is -1) the plan's link */
            const int ty = c->nodes[first].type;
            *bw = ah_link_bw(c, worst, ty, ty);
            *lat = ah_link_latency(c, worst);
        }
    } else if (group_links(p, d, which, &l) && l.ring_bw > 0) {
        *bw = l.ring_bw;
        *lat = l.ring_lat;
    }
    if (memo) {
        memo[0] = *bw;
        memo[1] = *lat;
    }
}

/* The all-reduce of each block of stage sg (`block_bytes` each) and, on a last stage, of the final
 * norm's `norm_bytes`, as one all-reduce over n members whose bytes each travel their own group's
 * ring: the stage's blocks cut at every stage boundary of the plan into segments, each one DP group
 * (a segment of another pipeline's stage may be held elsewhere), 2 (n - 1) / n of each segment's
 * bytes at its group's ring bandwidth, plus the one all-reduce's 2 (n - 1) latencies at the longest
 * of those rings'. On one link for all, ah_allreduce_seconds of the sum. *norm_s: the norm's part
 * of the bandwidth term. */
static double blocks_ring(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, double block_bytes,
                          double norm_bytes, int n, double *norm_s) {
    double t = 0, longest = 0, bw, lat;
    for (int a = sg->first, b; a < sg->last; a = b) { /* [a, b): the next segment */
        b = segment_end(d, a, sg->last);
        ring_link(p, d, a, &bw, &lat);
        t += ah_allreduce_seconds((double)(b - a) * block_bytes, n, bw, 0);
        longest = fmax(longest, lat);
    }
    *norm_s = 0;
    if (norm_bytes > 0) {
        ring_link(p, d, AH_DP_HEAD, &bw, &lat);
        t += *norm_s = ah_allreduce_seconds(norm_bytes, n, bw, 0);
        longest = fmax(longest, lat);
    }
    return t + ah_allreduce_seconds(0, n, 1, longest);
}

/* A stage's DP sync when the plan shards the optimizer, at the granularity of the unsharded one
 * (its blocks as one collective): each reduce-scatter + all-gather is priced as the all-reduce of
 * the same bytes stretched by the group's largest part (ah_opt_sync_factor; the worst of the
 * stage's DP segments), each segment on its own group's ring (blocks_ring), then the embedding /
 * head groups'. */
static double sharded_sync(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                           ah_sync_stage_t *parts) {
    const double factor = blocks_factor(p, d, sg), head_factor = ah_opt_sync_factor(p, AH_OPT_HEAD, 0, 0);
    double norm_s, bw, lat;
    double t = parts->blocks_s = blocks_ring(p, d, sg, (double)d->block_params * d->grad_elt * factor, 0, d->P, &norm_s);
    parts->head_s = parts->end_s = 0;
    if (head) {
        ring_link(p, d, AH_DP_HEAD, &bw, &lat);
        t += parts->head_s = ah_allreduce_seconds((double)d->head_norm * d->grad_elt * head_factor, d->P, bw, lat);
    }
    if (embed || (head && p->model.tied))
        t += parts->end_s = d->embed_sync * ah_opt_sync_factor(p, p->model.tied ? AH_OPT_TIED : AH_OPT_EMBED, 0, 0);
    if (head) {
        const double h = d->head_sync * head_factor;
        t += h;
        parts->head_s += h;
    }
    /* a ring's all-gather: half of the all-reduce */
    parts->head_ag_s = parts->head_s / 2, parts->blocks_ag_s = parts->blocks_s / 2, parts->end_ag_s = parts->end_s / 2;
    return t;
}

/* One stage's sync as priced (ah_dp_stage_sync): its key (blocks, ends, mode; -1: empty) and figures. */
struct ah_dp_stage_memo {
    int64_t key;
    double sync, head_s, blocks_s, end_s, head_ag_s, blocks_ag_s, end_ag_s;
};

/* ah_dp_terms_init; with_links: the links memo whatever p's mode (both modes priced on d); memo: d's
 * links_memo. */
static void terms_init(const ah_plan_t *p, ah_dp_terms_t *d, bool with_links, ah_dp_links_memo_t *memo) {
    const ah_model_t *m = &p->model;
    const int L = (int)m->n_layer;
    /* a layer's DP group: every replica's CP ranks (docs/runtime.md "Context parallelism") */
    d->P = 0;
    for (int i = 0; i < p->n_pipelines; i++) d->P += ah_pipeline_cp(&p->pipelines[i]);
    d->grad_elt = (double)ah_precision_elt_bytes(p->train.precision);
    /* One TP rank's rows of the embedding (and of an untied head) matrix: each rank syncs its own
     * shard with its peers, all ranks at once. */
    const double VC_grad = (double)ah_head_matrix_params(m, p->tp) * d->grad_elt;
    /* Gradient-sync bytes beside the blocks on the last stage: the final norm only. */
    d->head_norm = ah_head_norm_params(m, p->tp);
    d->block_params = ah_layer_params(m, AH_LAYER_BLOCK, p->tp);
    int slow_type;
    d->worst = dp_link(p, &d->bw, &d->lat, &slow_type);
    d->ordered = classes_ordered(p, slow_type);
    /* the full links are read by the hierarchical sync and, out of order, by the ring */
    d->hierarchical = p->dp_sync == AH_DP_SYNC_HIERARCHICAL;
    d->links_memo = memo;
    d->links = with_links || d->hierarchical || !d->ordered ? calloc((size_t)L + 2, sizeof *d->links) : NULL;
    /* Holders of the embedding matrix: stage 0 of every pipeline, plus, when tied, the separate
     * last stage's copy. */
    int holders = 0;
    for (int i = 0; i < p->n_pipelines; i++)
        holders += ((m->tied && p->pipelines[i].n_stages > 1) ? 2 : 1) * ah_pipeline_cp(&p->pipelines[i]);
    d->matrix_bytes = VC_grad;
    d->holders = holders;
    d->flows = ah_pipeline_groups(&p->pipelines[0]) * p->tp;
    d->cut = calloc((size_t)L + 1, sizeof *d->cut);
    d->ring = calloc(2 * ((size_t)L + 2), sizeof *d->ring);
    d->n_stage_memo = 4;
    while (d->n_stage_memo < 4 * (L + 1)) d->n_stage_memo *= 2;
    d->stages = malloc(sizeof *d->stages * (size_t)d->n_stage_memo);
    for (int i = 0; d->stages && i < d->n_stage_memo; i++) d->stages[i].key = -1;
    d->own_ring = true;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++) {
            const ah_stage_t *st = &p->pipelines[i].stages[s];
            if (d->cut && st->first >= 0 && st->first <= L) d->cut[st->first] = true;
            for (int r = 1; r < ah_stage_devices(&p->pipelines[i], p->tp); r++)
                d->own_ring = d->own_ring && st->devices[r].node == st->devices[0].node;
        }
    double bw, lat;
    ring_link(p, d, AH_DP_EMBED, &bw, &lat);
    d->embed_sync = ah_allreduce_seconds(VC_grad, holders, bw, lat);
    ring_link(p, d, AH_DP_HEAD, &bw, &lat);
    d->head_sync = m->tied ? 0 : ah_allreduce_seconds(VC_grad, d->P, bw, lat);
}

void ah_dp_terms_init(const ah_plan_t *p, ah_dp_terms_t *d) { terms_init(p, d, false, NULL); }

void ah_dp_terms_free(ah_dp_terms_t *d) {
    free(d->links);
    free(d->cut);
    free(d->ring);
    free(d->stages);
    d->links = NULL;
    d->cut = NULL;
    d->ring = NULL;
    d->stages = NULL;
}

/* Under "dp_sync": hierarchical, the sum of `bytes` over the DP group `which` (ah_dp_group_nodes)
 * of n members on its own links, as the runtime runs it: across domains hierarchically
 * (ah_dp_hier_seconds), inside one its flat ring on the links that ring crosses (ring_link); a
 * sharded group (factor: its stretch) also all-gathers its updated weights flat on that ring, as the
 * runtime does (half an all-reduce of the stretched bytes). */
static double group_sync(const ah_plan_t *p, const ah_dp_terms_t *d, int which, int n, double bytes, double factor,
                         double *ag) {
    ah_dp_links_t l;
    if (!group_links(p, d, which, &l)) l = (ah_dp_links_t){.domains = 1}; /* priced as the ring */
    double bw, lat;
    ring_link(p, d, which, &bw, &lat);
    const double ring = ah_allreduce_seconds(bytes * factor, n, bw, lat);
    *ag = p->n_opt_groups > 0 ? ring / 2 : 0; /* the all-gather after the optimizer */
    if (l.domains < 2) return ring;
    return ah_dp_hier_seconds(&l, bytes) + *ag;
}

/* stage_sync under "dp_sync": hierarchical: each group on its own links (group_sync; the blocks'
 * as the group of the stage's first block), the final norm apart from the blocks, as the runtime
 * sums them. */
static double hier_stage_sync(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                              ah_sync_stage_t *parts) {
    const bool sharded = p->n_opt_groups > 0;
    const double head_factor = sharded ? ah_opt_sync_factor(p, AH_OPT_HEAD, 0, 0) : 1;
    double ag;
    parts->blocks_s = group_sync(p, d, sg->first, d->P, (double)(sg->last - sg->first) * d->block_params * d->grad_elt,
                                 sharded ? blocks_factor(p, d, sg) : 1, &parts->blocks_ag_s);
    parts->head_s = parts->end_s = parts->head_ag_s = parts->end_ag_s = 0;
    if (head) {
        parts->head_s = group_sync(p, d, AH_DP_HEAD, d->P, (double)d->head_norm * d->grad_elt, head_factor, &parts->head_ag_s);
        if (!p->model.tied) parts->head_s += group_sync(p, d, AH_DP_HEAD, d->P, d->matrix_bytes, head_factor, &ag);
        if (!p->model.tied) parts->head_ag_s += ag;
    }
    if (embed || (head && p->model.tied))
        parts->end_s = group_sync(p, d, AH_DP_EMBED, d->holders, d->matrix_bytes,
                                  sharded ? ah_opt_sync_factor(p, p->model.tied ? AH_OPT_TIED : AH_OPT_EMBED, 0, 0) : 1,
                                  &parts->end_ag_s);
    return parts->blocks_s + parts->head_s + parts->end_s;
}

/* ah_dp_stage_sync unmemoised. */
static double stage_sync(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                         ah_sync_stage_t *parts) {
    if (d->hierarchical) return hier_stage_sync(p, d, sg, embed, head, parts);
    if (p->n_opt_groups > 0) return sharded_sync(p, d, sg, embed, head, parts);
    const int64_t sync_params = (int64_t)(sg->last - sg->first) * d->block_params + (head ? d->head_norm : 0);
    double norm_s;
    const double sync = blocks_ring(p, d, sg, (double)d->block_params * d->grad_elt,
                                    head ? (double)d->head_norm * d->grad_elt : 0, d->P, &norm_s);
    /* the blocks' and the final norm's bytes are one all-reduce here: shared out by bytes */
    const double norm_share = sync_params > 0 && head ? (double)d->head_norm / (double)sync_params : 0;
    parts->head_s = sync * norm_share + (head ? d->head_sync : 0);
    parts->blocks_s = sync * (1 - norm_share);
    parts->end_s = embed || (head && p->model.tied) ? d->embed_sync : 0;
    parts->head_ag_s = parts->blocks_ag_s = parts->end_ag_s = 0; /* not sharded: no all-gather */
    return sync + parts->end_s + (head ? d->head_sync : 0);
}

/* A stage's sync is a function of its blocks, whether it holds the embedding or the head, and the
 * mode (every term above reads the plan-wide d and p, and of the stage only those): the pipelines
 * of a plan share most of their stages' syncs, each priced once (d->stages, direct-mapped: a slot
 * taken by another stage is priced again). */
double ah_dp_stage_sync(const ah_plan_t *p, const ah_dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                        ah_sync_stage_t *parts) {
    const int L1 = (int)p->model.n_layer + 1;
    const bool in_range = sg->first >= 0 && sg->first <= sg->last && sg->last < L1 && d->stages;
    const int64_t key = (((int64_t)sg->first * L1 + sg->last) * 4 + (embed ? 2 : 0) + (head ? 1 : 0)) * 2 + (d->hierarchical ? 1 : 0);
    struct ah_dp_stage_memo *slot =
        in_range ? &d->stages[(uint64_t)(key * 0x9E3779B97F4A7C15ull) >> 40 & (uint64_t)(d->n_stage_memo - 1)] : NULL;
    if (slot && slot->key == key) {
        parts->head_s = slot->head_s, parts->blocks_s = slot->blocks_s, parts->end_s = slot->end_s;
        parts->head_ag_s = slot->head_ag_s, parts->blocks_ag_s = slot->blocks_ag_s, parts->end_ag_s = slot->end_ag_s;
        return slot->sync;
    }
    const double sync = stage_sync(p, d, sg, embed, head, parts);
    if (slot)
        *slot = (struct ah_dp_stage_memo){key, sync, parts->head_s, parts->blocks_s, parts->end_s, parts->head_ag_s,
                                          parts->blocks_ag_s, parts->end_ag_s};
    return sync;
}

/* The most any device's stages' syncs sum to, on d. */
static double most_of_devices(const ah_plan_t *p, const ah_dp_terms_t *d) {
    double most = 0;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int S = pl->n_stages, P = ah_pipeline_groups(pl);
        for (int g = 0; g < P; g++) { /* device g's stages g, g + P, ... as cost_stages sums them */
            double sum = 0;
            for (int s = g; s < S; s += P) {
                ah_sync_stage_t parts = {0};
                sum += ah_dp_stage_sync(p, d, &pl->stages[s], s == 0, s == S - 1, &parts);
            }
            most = fmax(most, sum);
        }
    }
    return most;
}

double ah_plan_dp_sync_s(const ah_plan_t *p) {
    ah_dp_terms_t d;
    ah_dp_terms_init(p, &d);
    const double most = most_of_devices(p, &d);
    ah_dp_terms_free(&d);
    return most;
}

void ah_plan_dp_syncs(const ah_plan_t *p, ah_dp_links_memo_t *memo, double *ring, double *hier) {
    ah_dp_terms_t d;
    terms_init(p, &d, hier != NULL, memo);
    d.hierarchical = false;
    *ring = most_of_devices(p, &d);
    if (hier) {
        d.hierarchical = true;
        *hier = most_of_devices(p, &d);
    }
    ah_dp_terms_free(&d);
}
