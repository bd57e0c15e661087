/* Scoring a whole plan: pipelines (each replayed under its schedule), layer-wise DP sync, optimizer, memory per device.
 * Formulas: docs/cost-model.md ("Plan"); the planner optimises exactly this function, so keep
 * it and the document in step. Linear in the number of stages and devices. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/profile.h"
#include "plan/dp_overlap.h"
#include "plan/evaluate.h"
#include "plan/plan_out.h"
#include "plan/replay.h"
#include "plan/timeline_memo.h"

#define GIB 1073741824.0

void ah_eval_free(ah_eval_t *e) {
    if (!e) return;
    if (e->pipelines)
        for (int i = 0; i < e->n_pipelines; i++) free(e->pipelines[i].stages);
    free(e->pipelines);
    free(e->devices);
    memset(e, 0, sizeof *e);
}

/* Stage costs seen so far in one evaluation, by (type, block count, embedding, head, recompute):
 * all blocks are alike (cost/cost.h; the planner's stage table relies on it too), so the stages of
 * copies of a pipeline (every baseline, every template) share a few keys, and ah_stage_cost
 * dominates the evaluation's time. */
#define STAGE_CACHE 64
typedef struct {
    int type, nb, cp;
    bool embed, head, recompute;
    double cp_bw, cp_lat; /* the ring's hop */
    ah_stage_cost_t sc;
} stage_memo_t;

static void stage_cost_cached(const ah_cost_ctx_t *ctx, stage_memo_t *memo, int *n_memo, const ah_stage_t *sg,
                              bool embed, bool head, ah_stage_cost_t *out) {
    for (int i = 0; i < *n_memo; i++) {
        const stage_memo_t *k = &memo[i];
        if (k->type == sg->type && k->nb == sg->last - sg->first && k->embed == embed &&
            k->head == head && k->recompute == sg->recompute && k->cp == ctx->cp && k->cp_bw == ctx->cp_bw &&
            k->cp_lat == ctx->cp_latency_s) {
            *out = k->sc;
            return;
        }
    }
    ah_stage_cost(ctx, sg->type, sg->first, sg->last, embed, head, sg->recompute, out);
    stage_memo_t *k = &memo[*n_memo < STAGE_CACHE ? (*n_memo)++ : (sg->first + sg->last) % STAGE_CACHE];
    *k = (stage_memo_t){sg->type, sg->last - sg->first, ctx->cp, embed, head, sg->recompute, ctx->cp_bw,
                        ctx->cp_latency_s, *out};
}

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

/* The one link every DP collective is priced on: the worst kind among all devices of the plan
 * (intra-node if all in one node, inter-node if all in one zone, else inter-zone); intra uses the
 * slowest intra-node link of the types in the plan. */
static void dp_link(const ah_plan_t *p, double *bw, double *lat) {
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
                ah_link_t l = ah_link_between(c, d0->node, st->devices[r].node);
                if (l > worst) worst = l;
            }
        }
    }
    /* Against one reference device: two devices in different zones differ from d0's zone in at
     * least one case, and two different nodes differ from d0's node in at least one case, so
     * the maximum over d0-pairs is the maximum over all pairs. */
    *bw = ah_link_bw(c, worst, slow_type, slow_type);
    *lat = ah_link_latency(c, worst);
    if (c->net.n_links > 0) dp_link_overrides(p, slow_type, bw, lat);
}

static ah_status_t alloc_eval(const ah_plan_t *p, ah_eval_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    out->n_pipelines = p->n_pipelines;
    out->n_devices = ah_plan_device_count(p);
    out->pipelines = calloc((size_t)p->n_pipelines, sizeof *out->pipelines);
    out->devices = calloc((size_t)out->n_devices, sizeof *out->devices);
    bool ok = out->pipelines && out->devices;
    for (int i = 0; ok && i < p->n_pipelines; i++) {
        out->pipelines[i].stages = calloc((size_t)p->pipelines[i].n_stages, sizeof(ah_stage_eval_t));
        ok = out->pipelines[i].stages != NULL;
    }
    if (ok) return AH_OK;
    ah_eval_free(out);
    return ah_error_set(err, AH_ERR_OOM, "out of host memory evaluating a plan of %d devices",
                        ah_plan_device_count(p));
}

/* Device `rank`, device r of stage s of pipeline i (CP rank r / tp, TP rank r mod tp), holding memory_bytes: its entry in out, and
 * out's worst device (the most over its capacity, *worst_over bytes) and peak memory so far. */
static void device_eval(const ah_plan_t *p, int i, int s, int r, int64_t memory_bytes, int rank, double *worst_over,
                        ah_eval_t *out) {
    const ah_stage_t *sg = &p->pipelines[i].stages[s];
    ah_device_eval_t *d = &out->devices[rank];
    d->pipeline = i;
    d->stage = s;
    d->tp_rank = r % p->tp;
    d->cp_rank = r / p->tp;
    d->node = sg->devices[r].node;
    d->index = sg->devices[r].index;
    d->memory_bytes = memory_bytes;
    d->capacity_bytes = ah_gpu_capacity_bytes(&p->cluster.types[p->cluster.nodes[d->node].type]);
    const double over = (double)d->memory_bytes - (double)d->capacity_bytes;
    if (rank == 0 || over > *worst_over) {
        *worst_over = over;
        out->worst_device = rank;
    }
    if (d->memory_bytes > out->pred.memory_bytes) out->pred.memory_bytes = d->memory_bytes;
}

/* The sharded optimizer's stretch of stage sg's blocks' sync: the worst of its DP segments'
 * (ah_opt_sync_factor). */
static double blocks_factor(const ah_plan_t *p, const ah_stage_t *sg) {
    double factor = 1;
    for (int a = sg->first; a < sg->last;) { /* [a, b): the next segment, cut at every stage boundary */
        int b = sg->last;
        for (int i = 0; i < p->n_pipelines; i++)
            for (int s = 0; s < p->pipelines[i].n_stages; s++) {
                const int c = p->pipelines[i].stages[s].first;
                if (c > a && c < b) b = c;
            }
        factor = fmax(factor, ah_opt_sync_factor(p, AH_OPT_BLOCKS, a, b));
        a = b;
    }
    return factor;
}

/* A stage's DP sync when the plan shards the optimizer, at the granularity of the unsharded one
 * (its blocks as one collective): each reduce-scatter + all-gather is priced as the all-reduce of
 * the same bytes stretched by the group's largest part (ah_opt_sync_factor; the worst of the
 * stage's DP segments), then the embedding / head groups'; members: a layer's DP group's. block_bytes: one block's gradient
 * bytes; norm_bytes: the head's final norm; embed_sync, head_sync: the matrices' all-reduces. */
static double sharded_sync(const ah_plan_t *p, const ah_stage_t *sg, bool embed, bool head, double block_bytes,
                           double norm_bytes, double embed_sync, double head_sync, int members, double bw, double lat,
                           ah_sync_stage_t *parts) {
    const double factor = blocks_factor(p, sg);
    double t = parts->blocks_s = ah_allreduce_seconds((double)(sg->last - sg->first) * block_bytes * factor, members, bw, lat);
    parts->head_s = parts->end_s = 0;
    if (head) t += parts->head_s = ah_allreduce_seconds(norm_bytes * ah_opt_sync_factor(p, AH_OPT_HEAD, 0, 0), members, bw, lat);
    if (embed || (head && p->model.tied))
        t += parts->end_s = embed_sync * ah_opt_sync_factor(p, p->model.tied ? AH_OPT_TIED : AH_OPT_EMBED, 0, 0);
    if (head) {
        const double h = head_sync * ah_opt_sync_factor(p, AH_OPT_HEAD, 0, 0);
        t += h;
        parts->head_s += h;
    }
    /* a ring's all-gather: half of the all-reduce */
    parts->head_ag_s = parts->head_s / 2, parts->blocks_ag_s = parts->blocks_s / 2, parts->end_ag_s = parts->end_s / 2;
    return t;
}

/* The DP sync's figures every stage shares. */
typedef struct {
    int P; /* members of a layer's DP group: the pipelines' CP degrees summed */
    double grad_elt, bw, lat;
    int64_t block_params, head_norm;
    double embed_sync, head_sync; /* the embedding's (and tied head copy's) rows, an untied head's */
    double matrix_bytes;          /* one TP rank's rows of the embedding (and untied head) matrix */
    int holders, flows;           /* the embedding's holders; the groups that sum at once */
    bool own_ring;                /* no stage spans nodes, so ah_dp_group_nodes' nodes (a pipeline's
                                   * first device's) are every member's: a group's own ring priced */
    ah_dp_links_t *links;         /* "dp_sync": hierarchical: each DP group's links once found (group_sync;
                                   * block b at [b], the embedding's at [L], the head's at [L + 1];
                                   * domains 0: not yet); NULL: found each time. Freed by the caller */
} dp_terms_t;

static void dp_setup(const ah_plan_t *p, dp_terms_t *d) {
    const ah_model_t *m = &p->model;
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
    dp_link(p, &d->bw, &d->lat);
    /* Holders of the embedding matrix: stage 0 of every pipeline, plus, when tied, the separate
     * last stage's copy. */
    int holders = 0;
    for (int i = 0; i < p->n_pipelines; i++)
        holders += ((m->tied && p->pipelines[i].n_stages > 1) ? 2 : 1) * ah_pipeline_cp(&p->pipelines[i]);
    d->matrix_bytes = VC_grad;
    d->holders = holders;
    d->flows = ah_pipeline_groups(&p->pipelines[0]) * p->tp;
    d->embed_sync = ah_allreduce_seconds(VC_grad, holders, d->bw, d->lat);
    d->head_sync = m->tied ? 0 : ah_allreduce_seconds(VC_grad, d->P, d->bw, d->lat);
    d->links = p->dp_sync == AH_DP_SYNC_HIERARCHICAL ? calloc((size_t)m->n_layer + 2, sizeof *d->links) : NULL;
    d->own_ring = true;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++) {
            const ah_stage_t *st = &p->pipelines[i].stages[s];
            for (int r = 1; r < ah_stage_devices(&p->pipelines[i], p->tp); r++)
                d->own_ring = d->own_ring && st->devices[r].node == st->devices[0].node;
        }
}

/* Under "dp_sync": hierarchical, the sum of `bytes` over the DP group `which` (ah_dp_group_nodes)
 * of n members on its own links, as the runtime runs it: across domains hierarchically
 * (ah_dp_hier_seconds), inside one its flat ring on the links that ring crosses (ah_dp_links_t
 * ring_bw: the slowest between two members, not the plan's DP link); a sharded group (factor: its
 * stretch) also all-gathers its updated weights flat on that ring, as the runtime does (half an
 * all-reduce of the stretched bytes). Without memory to find the links, or where a stage spans
 * nodes (a CP group across alike nodes: its other ranks' nodes are not listed), the flat ring is
 * priced on the plan's DP link, as before. */
static double group_sync(const ah_plan_t *p, const dp_terms_t *d, int which, int n, double bytes, double factor,
                         double *ag) {
    const int at = which >= 0 ? which : (int)p->model.n_layer - 1 - which; /* d->links' index */
    ah_dp_links_t l = {.domains = 1}, *memo = d->links ? &d->links[at] : NULL;
    if (memo && memo->domains > 0) l = *memo;
    else {
        int *nodes = malloc(sizeof *nodes * 2 * (size_t)p->n_pipelines);
        if (nodes) ah_dp_links_of(&p->cluster, nodes, ah_dp_group_nodes(p, which, nodes), d->flows, &l);
        if (nodes && memo) *memo = l;
        free(nodes); /* without memory to find them, the group is priced as the ring */
    }
    const bool own = d->own_ring && l.ring_bw > 0; /* the group's links found */
    const double ring = ah_allreduce_seconds(bytes * factor, n, own ? l.ring_bw : d->bw, own ? l.ring_lat : d->lat);
    *ag = p->n_opt_groups > 0 ? ring / 2 : 0; /* the all-gather after the optimizer */
    if (l.domains < 2) return ring;
    return ah_dp_hier_seconds(&l, bytes) + *ag;
}

/* stage_sync under "dp_sync": hierarchical: each group on its own links (group_sync; the blocks'
 * as the group of the stage's first block), the final norm apart from the blocks, as the runtime
 * sums them. */
static double hier_stage_sync(const ah_plan_t *p, const dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                              ah_sync_stage_t *parts) {
    const bool sharded = p->n_opt_groups > 0;
    const double head_factor = sharded ? ah_opt_sync_factor(p, AH_OPT_HEAD, 0, 0) : 1;
    double ag;
    parts->blocks_s = group_sync(p, d, sg->first, d->P, (double)(sg->last - sg->first) * d->block_params * d->grad_elt,
                                 sharded ? blocks_factor(p, sg) : 1, &parts->blocks_ag_s);
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

/* The DP sync of stage sg (embed: it holds the embedding; head: it is a last stage), and its parts
 * in the overlapped sync's order (plan/dp_overlap.h; parts->first, last, head and blk_bwd_s are the
 * caller's). */
static double stage_sync(const ah_plan_t *p, const dp_terms_t *d, const ah_stage_t *sg, bool embed, bool head,
                         ah_sync_stage_t *parts) {
    if (p->dp_sync == AH_DP_SYNC_HIERARCHICAL) return hier_stage_sync(p, d, sg, embed, head, parts);
    if (p->n_opt_groups > 0)
        return sharded_sync(p, sg, embed, head, (double)d->block_params * d->grad_elt,
                            (double)d->head_norm * d->grad_elt, d->embed_sync, d->head_sync, d->P, d->bw, d->lat, parts);
    const int64_t sync_params = (int64_t)(sg->last - sg->first) * d->block_params + (head ? d->head_norm : 0);
    const double sync = ah_allreduce_seconds((double)sync_params * d->grad_elt, d->P, d->bw, d->lat);
    /* the blocks' and the final norm's bytes are one all-reduce here: shared out by bytes */
    const double norm_share = sync_params > 0 && head ? (double)d->head_norm / (double)sync_params : 0;
    parts->head_s = sync * norm_share + (head ? d->head_sync : 0);
    parts->blocks_s = sync * (1 - norm_share);
    parts->end_s = embed || (head && p->model.tied) ? d->embed_sync : 0;
    parts->head_ag_s = parts->blocks_ag_s = parts->end_ag_s = 0; /* not sharded: no all-gather */
    return sync + parts->end_s + (head ? d->head_sync : 0);
}

double ah_plan_dp_sync_s(const ah_plan_t *p) {
    dp_terms_t d;
    dp_setup(p, &d);
    double most = 0;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int S = pl->n_stages, P = ah_pipeline_groups(pl);
        for (int g = 0; g < P; g++) { /* device g's stages g, g + P, ... as cost_stages sums them */
            double sum = 0;
            for (int s = g; s < S; s += P) {
                ah_sync_stage_t parts = {0};
                sum += stage_sync(p, &d, &pl->stages[s], s == 0, s == S - 1, &parts);
            }
            most = fmax(most, sum);
        }
    }
    free(d.links);
    return most;
}

/* A sharded optimizer's per-device state kept by its groups' other members (*unowned, NULL for
 * an unsharded plan; the caller frees it). */
static ah_status_t unowned_state(const ah_plan_t *p, int n_devices, int64_t **unowned, ah_error_t *err) {
    *unowned = NULL;
    if (p->n_opt_groups == 0) return AH_OK;
    int64_t *held = malloc((size_t)n_devices * sizeof *held);
    *unowned = malloc((size_t)n_devices * sizeof **unowned);
    ah_status_t st = held && *unowned ? ah_opt_elems_all(p, held, *unowned, err)
                                      : ah_error_set(err, AH_ERR_OOM, "out of host memory evaluating a sharded plan");
    free(held);
    if (st != AH_OK) {
        free(*unowned);
        *unowned = NULL;
    }
    return st;
}

/* Pipeline i (n micro-batches; bottleneck device's f + b max_fb, its TP part tp_k, its ring's part cp_k)
 * is the slowest so far: the breakdown is its (bubble and p2p: critical_bubble, at the end). */
static void take_critical(ah_eval_t *out, int i, int64_t n, double max_fb, double tp_k, double cp_k) {
    out->critical_pipeline = i;
    out->bottleneck_stage = out->pipelines[i].bottleneck_stage;
    ah_breakdown_t *b = &out->pred.breakdown;
    b->compute_s = (double)n * (max_fb - tp_k - cp_k);
    b->tp_comm_s = (double)n * tp_k;
    b->cp_comm_s = (double)n * cp_k;
    b->bubble_s = (double)n * max_fb; /* less the replay with free hops, in critical_bubble */
}

/* The critical pipeline's bubble and p2p terms, from its replay with free hops; false: out of memory. */
static bool critical_bubble(const ah_plan_t *p, ah_eval_t *out) {
    const ah_pipeline_t *pl = &p->pipelines[out->critical_pipeline];
    const ah_pipeline_eval_t *pe = &out->pipelines[out->critical_pipeline];
    const double no_p2p = ah_sched_replay(pl->schedule, pe->stages, pl->n_stages, ah_pipeline_groups(pl),
                                          pl->micro_batches, false, NULL);
    ah_breakdown_t *b = &out->pred.breakdown;
    b->bubble_s = fmax(0, no_p2p - b->bubble_s);
    b->p2p_s = pe->time_s - no_p2p;
    return !isnan(no_p2p);
}

/* Pipeline pl's time: its schedule replayed (time_s), and the search's closed form of it
 * (estimate_s; plan/replay.h; the 1F1B one: for the other schedules, which the search does not
 * weigh yet, the replay itself); same (NULL for none) is an earlier pipeline with the same
 * timeline, whose figures are taken (a plan's pipelines often are copies). P: pl's device
 * groups. false when out of host memory. */
static bool time_pipeline(ah_pipeline_eval_t *pe, const ah_pipeline_t *pl, int P, const ah_pipeline_eval_t *same,
                          ah_timeline_memo_t *m, double sum_fb, double max_fb, double sum_p2p) {
    const int S = pl->n_stages;
    const int64_t n = pl->micro_batches;
    if (same) {
        pe->time_s = same->time_s;
        pe->estimate_s = same->estimate_s;
        return true;
    }
    if (pl->schedule != AH_SCHED_1F1B) {
        pe->estimate_s = pe->time_s = ah_sched_replay(pl->schedule, pe->stages, S, P, n, true, NULL);
        return !isnan(pe->time_s);
    }
    pe->estimate_s = ah_1f1b_estimate(sum_fb, max_fb, sum_p2p, ah_timeline_memo_pace(m, pe->stages, S), n);
    pe->time_s = ah_1f1b_replay(pe->stages, S, n, true, NULL);
    return !isnan(pe->time_s);
}

/* What one evaluation carries from pipeline to pipeline. */
typedef struct {
    const ah_plan_t *p;
    const ah_cost_ctx_t *ctx;
    dp_terms_t dp;
    const int64_t *unowned; /* NULL unless sharded */
    int64_t opt_bytes;
    stage_memo_t memo[STAGE_CACHE];
    int n_memo, rank;
    double worst_over, dp_sync, optimizer, worst_pipe, worst_estimate;
    ah_sync_stage_t *sync_st; /* per stage of the plan, the overlapped sync's parts (plan/dp_overlap.h) */
    int n_sync;
    ah_timeline_memo_t timelines; /* the timelines replayed so far (plan/timeline_memo.h) */
    void *scratch;          /* a pipeline's group sums and per-stage bytes, grown as needed */
    size_t scratch_cap;
} eval_run_t;

/* What the stages of one device group (stages d, d + P, ... of its pipeline) add up to. */
typedef struct {
    double fb, tp, cp, sync;
    int64_t params, own_bytes, shared_bytes; /* own: state + each stage's p2p buffers; shared: the
                                              * largest stage's workspace and reserved constant */
    int64_t wgrad_keep;                      /* zero-bubble: one micro-batch's W inputs */
} group_sum_t;

/* The ring's slowest hop on stage sg of a pipeline of CP degree cp (cost/cost.h ah_cost_ctx_t's
 * cp_bw, cp_latency_s): CP rank j's device of each TP rank sends to CP rank j + 1's (mod cp), on
 * the link ah_link_of gives, whose bandwidth the stage's TP ranks' flows share. 0: no ring. */
static void ring_link(const ah_plan_t *p, const ah_stage_t *sg, int cp, double *bw, double *lat) {
    *bw = *lat = 0;
    for (int j = 0; cp > 1 && j < cp; j++)
        for (int k = 0; k < p->tp; k++) {
            const ah_device_ref_t *a = &sg->devices[j * p->tp + k], *b = &sg->devices[(j + 1) % cp * p->tp + k];
            const ah_link_info_t l = ah_link_of(&p->cluster, a->node, b->node, sg->type, sg->type);
            const double flow_bw = ah_link_shared_bw(&l, p->tp);
            if (*bw == 0 || flow_bw < *bw) *bw = flow_bw;
            *lat = fmax(*lat, l.latency_s);
        }
}

/* Seconds of the hop from stage sg to next (one micro-batch's boundary activation): the slowest
 * of its CP ranks' (each sends to the same CP rank there). */
static double hop_seconds(const ah_plan_t *p, const ah_cost_ctx_t *ctx, const ah_stage_t *sg, const ah_stage_t *next) {
    double most = 0;
    for (int j = 0; j < ah_cost_cp(ctx); j++) {
        const ah_device_ref_t *a = &sg->devices[j * p->tp], *b = &next->devices[j * p->tp];
        ah_link_info_t l = ah_link_of(&p->cluster, a->node, b->node, sg->type, next->type);
        l.bw = ah_link_shared_bw(&l, p->tp * p->n_pipelines); /* docs/cost-model.md "Links" */
        most = fmax(most, ah_p2p_seconds_on(ctx, &l));
    }
    return most;
}

/* Pipeline i's stages into pe (times, hops) and their groups' sums into g[P]; act[s]: stage s's
 * activation bytes per micro-batch; *sum_fb and *sum_p2p over the stages. */
static void cost_stages(eval_run_t *r, int i, int P, ah_pipeline_eval_t *pe, group_sum_t *g, int64_t *act,
                        double *sum_fb, double *sum_p2p) {
    const ah_plan_t *p = r->p;
    const ah_pipeline_t *pl = &p->pipelines[i];
    const int S = pl->n_stages;
    ah_cost_ctx_t ctx = *r->ctx; /* the pipeline's CP degree, each stage's ring */
    ctx.cp = ah_pipeline_cp(pl);
    for (int d = 0; d < P; d++) g[d] = (group_sum_t){0};
    double fwd_start = 0;
    for (int s = 0; s < S; s++) {
        const ah_stage_t *sg = &pl->stages[s];
        ah_stage_eval_t *se = &pe->stages[s];
        group_sum_t *gs = &g[s % P];
        const bool embed = s == 0, head = s == S - 1;
        ah_stage_cost_t sc;
        ring_link(p, sg, ctx.cp, &ctx.cp_bw, &ctx.cp_latency_s);
        stage_cost_cached(&ctx, r->memo, &r->n_memo, sg, embed, head, &sc);
        if (head && !embed && s % P == 0 && p->model.tied) { /* on the embedding's device: its one copy */
            const int64_t copy = ah_tied_params(&p->model, p->tp);
            sc.params -= copy;
            sc.state_bytes -= copy * ah_param_state_bytes(p->train.precision);
        }
        se->fwd_s = sc.fwd_s;
        se->bwd_s = sc.bwd_s;
        se->wgrad_s = sc.wgrad_s;
        se->p2p_s = 0;
        if (s + 1 < S && (s + 1) % P != s % P) se->p2p_s = hop_seconds(p, &ctx, sg, &pl->stages[s + 1]);
        act[s] = sc.act_bytes_per_mb;
        *sum_fb += sc.fwd_s + sc.bwd_s;
        *sum_p2p += se->p2p_s;
        gs->fb += sc.fwd_s + sc.bwd_s;
        gs->tp += sc.tp_comm_fwd_s + sc.tp_comm_bwd_s;
        gs->cp += sc.cp_comm_fwd_s + sc.cp_comm_bwd_s;
        /* the overlapped sync's queue per device: its chunks from the last down (each chunk's
         * backward ends before the one below it), so an interleaved device's stages chain */
        const int v = S / P, c = s / P;
        ah_sync_stage_t *ss = &r->sync_st[r->n_sync + (s % P) * v + (v - 1 - c)];
        ss->chain = c < v - 1;
        gs->sync += stage_sync(p, &r->dp, sg, embed, head, ss);
        if (sg->last > sg->first) { /* one block's backward: all blocks are alike */
            const ah_stage_t one = {.first = sg->first, .last = sg->first + 1, .type = sg->type, .recompute = sg->recompute};
            ah_stage_cost_t b1;
            stage_cost_cached(&ctx, r->memo, &r->n_memo, &one, false, false, &b1);
            /* zero-bubble: the stage's last op is a W, whose blocks' gradients come final one by one */
            ss->blk_bwd_s = pl->schedule == AH_SCHED_ZERO_BUBBLE ? b1.wgrad_s : b1.bwd_s;
            ss->blk_fwd_s = b1.fwd_s;
        }
        ss->fwd_start_s = fwd_start; /* the first micro-batch's forward reaches it then, at the least */
        fwd_start += sc.fwd_s + se->p2p_s;
        ss->first = sg->first;
        ss->last = sg->last;
        ss->head = head;
        gs->params += sc.params;
        gs->wgrad_keep += sc.wgrad_keep_bytes;
        gs->own_bytes += sc.state_bytes + sc.fixed_bytes - sc.shared_bytes;
        if (sc.shared_bytes > gs->shared_bytes) gs->shared_bytes = sc.shared_bytes;
    }
    r->n_sync += S;
}

/* Pipeline i: its stages, its devices' memory (out->devices from r->rank on), the DP sync and
 * optimizer terms, its timeline; the critical pipeline so far. false when out of host memory. */
static bool eval_pipeline(eval_run_t *r, int i, ah_eval_t *out) {
    const ah_plan_t *p = r->p;
    const ah_pipeline_t *pl = &p->pipelines[i];
    ah_pipeline_eval_t *pe = &out->pipelines[i];
    const int S = pl->n_stages, P = ah_pipeline_groups(pl);
    const int64_t n = pl->micro_batches;
    const size_t need = sizeof(group_sum_t) * (size_t)P + sizeof(int64_t) * 2 * (size_t)S;
    if (need > r->scratch_cap) {
        void *more = realloc(r->scratch, need);
        if (!more) return false;
        r->scratch = more;
        r->scratch_cap = need;
    }
    group_sum_t *g = r->scratch;
    int64_t *act = (int64_t *)(g + P), *live = act + S;
    double sum_fb = 0, sum_p2p = 0, max_fb = -1, tp_k = 0, cp_k = 0;
    const int devs = ah_stage_devices(pl, p->tp);
    cost_stages(r, i, P, pe, g, act, &sum_fb, &sum_p2p);
    bool ok = true;
    for (int d = 0; d < P; d++) {
        if (g[d].fb > max_fb) {
            max_fb = g[d].fb;
            pe->bottleneck_stage = d;
            tp_k = g[d].tp;
            cp_k = g[d].cp;
        }
        r->dp_sync = fmax(r->dp_sync, g[d].sync);
        /* the optimizer steps the parameters the group's slowest TP rank keeps state for */
        int64_t opt_params = g[d].params;
        for (int k = 0; r->unowned && k < devs; k++) {
            const int64_t own = g[d].params - r->unowned[r->rank + k];
            if (k == 0 || own > opt_params) opt_params = own;
        }
        r->optimizer = fmax(r->optimizer, ah_optimizer_seconds(r->ctx, pl->stages[d].type, opt_params));
        const int64_t peak = ah_sched_peak_act(pl->schedule, S, P, n, d, act, live);
        ok = ok && peak >= 0;
        const int64_t mem = g[d].own_bytes + g[d].shared_bytes + peak +
                            ah_sched_wgrad_inflight(pl->schedule, S, P, n, d) * g[d].wgrad_keep;
        for (int s = d; s < S; s += P) {
            pe->stages[s].memory_bytes = mem;
            pe->stages[s].inflight = live[s];
        }
        for (int k = 0; k < devs; k++, r->rank++)
            device_eval(p, i, d, k, mem - (r->unowned ? r->unowned[r->rank] * r->opt_bytes : 0), r->rank,
                        &r->worst_over, out);
    }
    bool seen;
    int *slot = ah_timeline_memo_find(&r->timelines, p, out, i, P, &seen);
    if (!ok || !time_pipeline(pe, pl, P, seen ? &out->pipelines[*slot] : NULL, &r->timelines, sum_fb, max_fb, sum_p2p))
        return false;
    if (!seen) *slot = i;
    if (pe->estimate_s > r->worst_estimate) r->worst_estimate = pe->estimate_s;
    if (pe->time_s > r->worst_pipe) {
        r->worst_pipe = pe->time_s;
        take_critical(out, i, n, max_fb, tp_k, cp_k);
    }
    return true;
}

ah_status_t ah_evaluate(const ah_plan_t *p, const ah_profile_t *profile, ah_eval_t *out,
                        ah_error_t *err) {
    memset(out, 0, sizeof *out);
    ah_status_t st = profile ? ah_profile_check(profile, &p->model, &p->cluster, err) : AH_OK;
    if (st != AH_OK) return st;
    st = alloc_eval(p, out, err);
    if (st != AH_OK) return st;
    /* a sharded optimizer: per device, the AdamW state its groups' other members keep */
    int64_t *unowned = NULL;
    st = unowned_state(p, out->n_devices, &unowned, err);
    if (st != AH_OK) {
        ah_eval_free(out);
        return st;
    }
    const ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = p->tp, .profile = profile, .cp = 1};
    eval_run_t *r = malloc(sizeof *r);
    if (r) {
        *r = (eval_run_t){.p = p, .ctx = &ctx, .unowned = unowned, .worst_pipe = -1, .worst_estimate = -1,
                          .opt_bytes = ah_optimizer_state_bytes(p->train.precision)};
        dp_setup(p, &r->dp);
        int n_stages = 0;
        for (int i = 0; i < p->n_pipelines; i++) n_stages += p->pipelines[i].n_stages;
        r->sync_st = calloc((size_t)n_stages + (size_t)p->model.n_layer + 2, sizeof *r->sync_st);
        const bool memo = ah_timeline_memo_init(&r->timelines, p);
        if (!r->sync_st || !memo) {
            free(r->dp.links);
            free(r->sync_st);
            if (memo) ah_timeline_memo_free(&r->timelines);
            free(r);
            r = NULL;
        }
    }
    for (int i = 0; r && i < p->n_pipelines && st == AH_OK; i++)
        if (!eval_pipeline(r, i, out))
            st = ah_error_set(err, AH_ERR_OOM, "out of host memory replaying pipeline %d's schedule", i);
    if (r && st == AH_OK && !critical_bubble(p, out))
        st = ah_error_set(err, AH_ERR_OOM, "out of host memory replaying pipeline %d's schedule with free hops",
                          out->critical_pipeline);
    free(unowned);
    if (!r) st = ah_error_set(err, AH_ERR_OOM, "out of host memory evaluating a plan");
    if (r) {
        free(r->dp.links);
        free(r->scratch);
        ah_timeline_memo_free(&r->timelines);
    }
    if (st != AH_OK) {
        if (r) free(r->sync_st);
        free(r);
        ah_eval_free(out);
        return st;
    }
    out->feasible = r->worst_over <= 0;
    /* the overlapped sync: what is left of it after the backward (the runtime's default) */
    const double exposed =
        fmin(r->dp_sync, ah_dp_exposed_s(r->sync_st, r->n_sync, (int)p->model.n_layer, (double *)(r->sync_st + r->n_sync)) +
                             (out->dp_gather_exposed_s = ah_dp_gather_exposed_s(r->sync_st, r->n_sync)));
    out->dp_sync_exposed_s = exposed;
    const double ckpt = out->pred.breakdown.ckpt_s = ah_plan_ckpt_blocked_s(p);
    out->iteration_overlap_s = r->worst_pipe + exposed + r->optimizer + ckpt;
    out->pred.breakdown.dp_sync_s = r->dp_sync;
    out->pred.breakdown.optimizer_s = r->optimizer;
    out->pred.iteration_s = r->worst_pipe + r->dp_sync + r->optimizer + ckpt;
    out->search_estimate_s = r->worst_estimate + r->dp_sync + r->optimizer;
    out->pred.tokens_per_s =
        (double)(p->train.global_batch * p->train.seq_len) / out->pred.iteration_s;
    free(r->sync_st);
    free(r);
    return AH_OK;
}

ah_status_t ah_plan_check(const ah_plan_t *p, const ah_profile_t *profile, ah_error_t *err) {
    ah_status_t st = ah_plan_validate(p, err);
    if (st != AH_OK) return st;
    ah_eval_t e;
    st = ah_evaluate(p, profile, &e, err);
    if (st != AH_OK) return st;
    if (e.feasible) {
        ah_eval_free(&e);
        return AH_OK;
    }
    int over = 0;
    for (int r = 0; r < e.n_devices; r++) over += e.devices[r].memory_bytes > e.devices[r].capacity_bytes;
    const ah_device_eval_t *d = &e.devices[e.worst_device];
    const ah_stage_t *sg = &p->pipelines[d->pipeline].stages[d->stage];
    const ah_node_t *node = &p->cluster.nodes[d->node];
    char others[96] = "";
    if (over > 1) snprintf(others, sizeof others, " (the worst of %d devices over capacity)", over);
    /* GiB for GPUs, MiB for small (emulated) devices, so the figures never read 0.00 */
    bool small = d->capacity_bytes < 4 * GIB;
    double unit = small ? GIB / 1024.0 : GIB;
    st = ah_error_set(
        err, AH_ERR_INFEASIBLE,
        "[memory] pipelines[%d].stages[%d] (blocks [%d, %d)), device %s:%d (%s): needs %.2f %s but "
        "has %.2f %s, short by %lld bytes%s: %s",
        d->pipeline, d->stage, sg->first, sg->last, node->name, d->index,
        p->cluster.types[node->type].name, (double)d->memory_bytes / unit, small ? "MiB" : "GiB",
        (double)d->capacity_bytes / unit, small ? "MiB" : "GiB",
        (long long)(d->memory_bytes - d->capacity_bytes), others,
        sg->recompute ? "recompute is already on; use a smaller micro-batch or split its layers "
                        "over more stages"
                      : "turn on recompute for this stage, use a smaller micro-batch, or split its "
                        "layers over more stages");
    ah_eval_free(&e);
    return st;
}

int ah_profile_missing_types(const ah_profile_t *profile, const ah_plan_t *p, char *out, size_t cap) {
    int n = 0;
    if (cap) out[0] = '\0';
    for (int ti = 0; ti < p->cluster.n_types; ti++) {
        bool used = false;
        for (int i = 0; i < p->n_pipelines && !used; i++)
            for (int s = 0; s < p->pipelines[i].n_stages && !used; s++) used = p->pipelines[i].stages[s].type == ti;
        const char *name = p->cluster.types[ti].name;
        if (!used || ah_profile_find(profile, name, p->tp, p->train.micro_batch, p->train.seq_len, p->train.precision))
            continue;
        const size_t len = strlen(out);
        snprintf(out + len, cap - len, "%s%s", n ? ", " : "", name);
        n++;
    }
    return n;
}
