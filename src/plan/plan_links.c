/* What a plan sends over which link, per iteration (docs/cost-model.md "Traffic and egress"):
 * bytes by link class, the egress $ of the bytes that cross zone and region boundaries, and the
 * bytes no price covers. Every link is the one cost/links.c's ah_link_of gives. */
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "plan/plan_out.h"

/* The node of the stage of pipeline pl that holds block `layer`. */
static int node_of_layer(const ah_pipeline_t *pl, int layer) {
    for (int s = 0; s < pl->n_stages; s++)
        if (layer >= pl->stages[s].first && layer < pl->stages[s].last) return pl->stages[s].devices[0].node;
    return pl->stages[pl->n_stages - 1].devices[0].node;
}

static void add(const ah_plan_t *p, int node_a, int node_b, int type_a, int type_b, double bytes,
                ah_plan_traffic_t *t) {
    if (bytes <= 0) return;
    const ah_cluster_t *c = &p->cluster;
    const ah_link_info_t l = ah_link_of(c, node_a, node_b, type_a, type_b);
    t->bytes[l.cls] += bytes;
    if (l.cls < AH_LINK_INTER_ZONE) return;
    const bool priced = c->net.egress_priced || (l.override >= 0 && c->net.links[l.override].usd_per_gb >= 0);
    if (priced) {
        t->egress_usd += bytes / 1e9 * l.usd_per_gb;
        t->egress_usd_by[l.cls] += bytes / 1e9 * l.usd_per_gb;
    }
    else t->unpriced_bytes += bytes;
    if (l.cls == AH_LINK_INTER_REGION && !l.private_link) t->public_bytes += bytes;
}

/* Context parallelism's ring on stage a of pipeline pl (mb micro-batches): per micro-batch and
 * block, c - 1 key/value blocks forward (again when recomputing), c - 1 more and c gradient
 * accumulators backward, from each CP rank's device of each TP rank to the next CP rank's. */
static void ring_traffic(const ah_plan_t *p, const ah_pipeline_t *pl, const ah_stage_t *a, double mb,
                         ah_plan_traffic_t *t) {
    const int c = ah_pipeline_cp(pl);
    const double block = (double)ah_cp_ring_block_bytes(&p->model, p->tp, p->train.micro_batch, p->train.seq_len, c,
                                                        p->train.precision);
    const double steps = (a->recompute ? 2 : 1) * (c - 1) + (c - 1) + c;
    for (int j = 0; c > 1 && j < c; j++)
        for (int k = 0; k < p->tp; k++)
            add(p, a->devices[j * p->tp + k].node, a->devices[(j + 1) % c * p->tp + k].node, a->type, a->type,
                mb * (a->last - a->first) * steps * block, t);
}

/* Pipeline p2p (activations forward, their gradients back; each TP rank sends its copy) and the
 * TP all-reduces inside each stage's node (the blocks': 2 forward, 2 backward, 2 more when
 * recomputing, of N x C each; a ring moves 2 (t-1) x the bytes over the group). */
static void pipeline_traffic(const ah_plan_t *p, const ah_pipeline_t *pl, ah_plan_traffic_t *t) {
    const double nc = (double)(p->train.micro_batch * p->train.seq_len * p->model.d_model *
                               ah_precision_elt_bytes(p->train.precision));
    const double mb = (double)pl->micro_batches;
    for (int s = 0; s < pl->n_stages; s++) {
        const ah_stage_t *a = &pl->stages[s];
        const double ar = (a->recompute ? 6 : 4) * (double)(a->last - a->first);
        add(p, a->devices[0].node, a->devices[0].node, a->type, a->type, mb * ar * 2.0 * (p->tp - 1) * nc, t);
        ring_traffic(p, pl, a, mb, t);
        if (s + 1 == pl->n_stages) break;
        const ah_stage_t *b = &pl->stages[s + 1];
        if (memcmp(&a->devices[0], &b->devices[0], sizeof a->devices[0]) == 0) continue;
        add(p, a->devices[0].node, b->devices[0].node, a->type, b->type, 2.0 * mb * p->tp * nc, t);
    }
}

/* The DP sync as rings over the pipelines in order (each member sends 2 (P-1)/P of its gradient
 * bytes to the next; every TP rank its shard): each block's ring, the last stages' final norm
 * (and untied head), and the embedding's holders (stage 0 of each pipeline, and a tied head's
 * separate last stage). A sharded optimizer's reduce-scatter and all-gather move the same bytes. */
static void dp_traffic(const ah_plan_t *p, ah_plan_traffic_t *t) {
    const int P = p->n_pipelines;
    const ah_model_t *m = &p->model;
    const double elt = (double)ah_precision_elt_bytes(p->train.precision), share = 2.0 * (P - 1) / P;
    const double block = (double)ah_layer_params(m, AH_LAYER_BLOCK, p->tp) * elt * p->tp;
    const double matrix = (double)ah_head_matrix_params(m, p->tp) * elt * p->tp;
    const double last = (double)ah_head_norm_params(m, p->tp) * elt * p->tp + (m->tied ? 0 : matrix);
    const int ty = p->pipelines[0].stages[0].type;
    for (int i = 0; P > 1 && i < P; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i], *nx = &p->pipelines[(i + 1) % P];
        for (int l = 0; l < (int)m->n_layer; l++)
            add(p, node_of_layer(pl, l), node_of_layer(nx, l), ty, ty, share * block, t);
        add(p, pl->stages[pl->n_stages - 1].devices[0].node, nx->stages[nx->n_stages - 1].devices[0].node, ty, ty,
            share * last, t);
    }
    int *holders = malloc(sizeof *holders * 2 * (size_t)P), h = 0;
    for (int i = 0; i < P && holders; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        holders[h++] = pl->stages[0].devices[0].node;
        if (m->tied && pl->n_stages > 1) holders[h++] = pl->stages[pl->n_stages - 1].devices[0].node;
    }
    for (int k = 0; h > 1 && k < h; k++)
        add(p, holders[k], holders[(k + 1) % h], ty, ty, 2.0 * (h - 1) / h * matrix, t);
    free(holders);
}

void ah_plan_traffic(const ah_plan_t *p, ah_plan_traffic_t *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < p->n_pipelines; i++) pipeline_traffic(p, &p->pipelines[i], out);
    dp_traffic(p, out);
}
