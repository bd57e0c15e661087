/* Scoring a whole plan: pipelines (each replayed under its schedule), layer-wise DP sync, optimizer, memory per device.
 * Formulas: docs/cost-model.md ("Plan"); the planner optimises exactly this function, so keep
 * it and the document in step. Linear in the number of stages and devices. */
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/profile.h"
#include "plan/dp_overlap.h"
#include "plan/dp_price.h"
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
    ah_dp_terms_t dp;
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
static double hop_seconds(const ah_plan_t *p, const ah_cost_ctx_t *ctx, const ah_stage_t *sg, const ah_stage_t *next,
                          double *wire) {
    double most = 0;
    *wire = 0;
    for (int j = 0; j < ah_cost_cp(ctx); j++) {
        const ah_device_ref_t *a = &sg->devices[j * p->tp], *b = &next->devices[j * p->tp];
        ah_link_info_t l = ah_link_of(&p->cluster, a->node, b->node, sg->type, next->type);
        l.bw = ah_link_shared_bw(&l, p->tp * p->n_pipelines); /* docs/cost-model.md "Links" */
        most = fmax(most, ah_p2p_seconds_on(ctx, &l, sg->type, next->type));
        *wire = fmax(*wire, ah_p2p_wire_seconds_on(ctx, &l));
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
        se->p2p_s = se->p2p_wire_s = 0;
        se->warmup_extra = sg->warmup_extra;
        if (s + 1 < S && (s + 1) % P != s % P) se->p2p_s = hop_seconds(p, &ctx, sg, &pl->stages[s + 1], &se->p2p_wire_s);
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
        gs->sync += ah_dp_stage_sync(p, &r->dp, sg, embed, head, ss);
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
    const size_t need = sizeof(group_sum_t) * (size_t)P + sizeof(int64_t) * 2 * (size_t)S + sizeof(int) * (size_t)S;
    if (need > r->scratch_cap) {
        void *more = realloc(r->scratch, need);
        if (!more) return false;
        r->scratch = more;
        r->scratch_cap = need;
    }
    group_sum_t *g = r->scratch;
    int64_t *act = (int64_t *)(g + P), *live = act + S;
    int *extra = (int *)(live + S); /* the stages' warmup_extra */
    for (int s = 0; s < S; s++) extra[s] = pl->stages[s].warmup_extra;
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
        const int64_t peak = ah_sched_peak_act_warm(pl->schedule, S, P, n, d, extra, act, live);
        ok = ok && peak >= 0;
        const int64_t mem = g[d].own_bytes + g[d].shared_bytes + peak +
                            ah_sched_wgrad_inflight_warm(pl->schedule, S, P, n, d, extra) * g[d].wgrad_keep;
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
    const ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = p->tp, .profile = profile,
                               .cp = 1, .p2p_whole = p->p2p == AH_P2P_WHOLE};
    eval_run_t *r = malloc(sizeof *r);
    if (r) {
        *r = (eval_run_t){.p = p, .ctx = &ctx, .unowned = unowned, .worst_pipe = -1, .worst_estimate = -1,
                          .opt_bytes = ah_optimizer_state_bytes(p->train.precision)};
        ah_dp_terms_init(p, &r->dp);
        int n_stages = 0;
        for (int i = 0; i < p->n_pipelines; i++) n_stages += p->pipelines[i].n_stages;
        r->sync_st = calloc((size_t)n_stages + (size_t)p->model.n_layer + 2, sizeof *r->sync_st);
        const bool memo = ah_timeline_memo_init(&r->timelines, p);
        if (!r->sync_st || !memo) {
            ah_dp_terms_free(&r->dp);
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
        ah_dp_terms_free(&r->dp);
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
