/* The structural validity rules of a plan (DESIGN.md "The plan"). Each failure message starts
 * with the rule's name in brackets, names the place (pipelines[p].stages[s].devices[r]) and says
 * what would fix it. Rules, in the order they are checked:
 *   [pipelines] at least one pipeline;
 *   [train]     sizes >= 1, seq_len <= the model's context, a known precision;
 *   [tp]        1 <= tp <= AH_MAX_TP and the model splits tp ways (a stage holding exactly tp
 *               devices is guaranteed by the representation and checked by the reader);
 *   [cp]        a pipeline's cp is a power of two in [1, AH_MAX_CP] and seq_len is a multiple of
 *               2 cp (the causal load balance cuts each sequence into 2 cp equal chunks; a stage
 *               holding exactly tp x cp devices is the reader's check);
 *   [layers]    each pipeline's stages cover blocks 0 .. n_layer-1 once, in order, none empty;
 *   [device]    a device names a node of the cluster and an index below its GPU count, and no
 *               device appears twice in the plan;
 *   [tp-group]  each TP group of a stage (its tp consecutive devices, one per CP rank) is in one
 *               node, and every device of the stage is on a node whose GPU type is the stage's "gpu";
 *   [precision] a stage's GPU type runs the plan's precision (the cluster gives its TFLOP/s);
 *   [batch]     micro_batches >= 1 and sum(micro_batches) x micro_batch == global_batch;
 *   [schedule]  a device on several stages only within one interleaved pipeline, with the same TP
 *               rank (a device on stages of two pipelines is a [device] error); an interleaved
 *               pipeline of P devices (its distinct TP groups) puts device d on stages d, d+P, d+2P,
 *               ... (evenly spaced: S a multiple of P, every stage k >= P on stage k-P's group, the
 *               first P on P different devices), at least 2 stages per device, and micro_batches
 *               a multiple of P (Megatron's interleaved schedule runs micro-batches in groups of P
 *               per model chunk: schedules.py refuses other counts). zero-bubble (ZB-H1) and 1f1b
 *               run on plain pipelines, one stage per device, any micro-batch count.
 *   [warmup]    a stage's warmup_extra is >= 0, 0 under interleaved, never larger than the stage's
 *               before it (the extra micro-batches in flight past a hop are fed by every stage above
 *               it: plan/replay.h "Extra warm-up") and at most AH_WARMUP_DROP_MOST (3) smaller: the
 *               MPI path posts a stage's receives one micro-batch ahead and waits for its last send
 *               before the next, so a stage warming up 4 or more micro-batches past the next one's
 *               waits on it while it waits for a gradient receive the first has not posted yet
 *               (a deadlock once the micro-batches outnumber the drop: pp2 with 4, 0 hung from 6
 *               micro-batches; every pattern of drops <= 3 runs, checked exhaustively on a model of
 *               those waits for 2-6 stages, extras 0-5, up to 29 micro-batches).
 * The version is checked by the reader (the in-memory plan has none); memory fit is
 * ah_plan_check's (plan/evaluate.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "plan/plan.h"

#include "core/str.h"

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)

ah_status_t ah_plan_check_train(const ah_model_t *model, const ah_train_t *t, ah_error_t *err) {
    struct { const char *name; int64_t v; } sizes[] = {
        {"global_batch", t->global_batch}, {"seq_len", t->seq_len}, {"micro_batch", t->micro_batch}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (sizes[i].v < 1)
            return ah_error_set(err, AH_ERR_INVALID, "[train] train.%s: must be at least 1, got %lld",
                                sizes[i].name, (long long)sizes[i].v);
    if (t->seq_len > model->max_pos)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[train] train.seq_len: %lld is longer than model %s's context of %lld "
                            "tokens; use a seq_len of at most %lld",
                            (long long)t->seq_len, model->name, (long long)model->max_pos,
                            (long long)model->max_pos);
    if (ah_model_check_window(model, t->seq_len, "[train] train.seq_len:", err) != AH_OK) return AH_ERR_INVALID;
    /* A micro-batch's attention scores (b x H x T x T) must stay countable in int64 bytes. */
    double scores = (double)t->micro_batch * (double)model->n_head * (double)t->seq_len *
                    (double)t->seq_len;
    if (t->micro_batch > ((int64_t)1 << 30) || t->global_batch > ((int64_t)1 << 40) || scores > 0x1p50)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[train] train: micro_batch %lld x seq_len %lld (global_batch %lld) is "
                            "beyond what autohet models; use a micro-batch of at most %lld sequences",
                            (long long)t->micro_batch, (long long)t->seq_len,
                            (long long)t->global_batch,
                            (long long)(0x1p50 / ((double)model->n_head * (double)t->seq_len *
                                                  (double)t->seq_len)));
    if (t->precision < AH_PREC_FP32 || t->precision > AH_PREC_FP16)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[train] train.precision: unknown precision code %d (allowed: " AH_PRECISION_VALUES ")",
                            (int)t->precision);
    return AH_OK;
}

static ah_status_t check_tp(const ah_plan_t *p, ah_error_t *err) {
    if (p->tp < 1 || p->tp > AH_MAX_TP)
        return ah_error_set(err, AH_ERR_INVALID, "[tp] tp: expected a tensor-parallel degree in [1, %d], got %d",
                            AH_MAX_TP, p->tp);
    ah_status_t s = ah_model_check_tp(&p->model, p->tp, err);
    if (s != AH_OK) ah_error_prefix(err, "[tp] tp: %d", p->tp);
    return s;
}

static ah_status_t check_cp(const ah_plan_t *p, int pi, ah_error_t *err) {
    const int c = ah_pipeline_cp(&p->pipelines[pi]);
    if (c > AH_MAX_CP || (c & (c - 1)) != 0)
        return ah_error_set(err, AH_ERR_INVALID, "[cp] pipelines[%d].cp: %d; a context-parallel degree is a power "
                            "of two in [1, %d] (1, 2, 4, 8)", pi, c, AH_MAX_CP);
    if (p->train.seq_len % (2 * c) != 0)
        return ah_error_set(err, AH_ERR_INVALID, "[cp] pipelines[%d].cp: %d, but train.seq_len %lld is not a "
                            "multiple of 2 x cp = %d; the causal load balance cuts each sequence into 2 cp equal "
                            "chunks (CP rank i holds chunks i and 2cp-1-i): use a seq_len of %lld or %lld, or a "
                            "smaller cp", pi, c, (long long)p->train.seq_len, 2 * c,
                            (long long)(p->train.seq_len / (2 * c) * (2 * c)),
                            (long long)((p->train.seq_len / (2 * c) + 1) * (2 * c)));
    return AH_OK;
}

/* "layer 5 is" / "layers 5 .. 7 are" for blocks [a, b). */
static const char *layer_range(char *buf, size_t cap, int64_t a, int64_t b) {
    if (b - a == 1) snprintf(buf, cap, "layer %lld is", (long long)a);
    else snprintf(buf, cap, "layers %lld .. %lld are", (long long)a, (long long)(b - 1));
    return buf;
}

static ah_status_t check_layers(const ah_plan_t *p, int pi, ah_error_t *err) {
    const ah_pipeline_t *pl = &p->pipelines[pi];
    const int64_t L = p->model.n_layer;
    if (pl->n_stages < 1 || !pl->stages)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[layers] pipelines[%d].stages: empty; a pipeline needs at least one stage "
                            "holding all %lld layers",
                            pi, (long long)L);
    int64_t next = 0; /* the first block not yet held by an earlier stage */
    char range[64];
    for (int s = 0; s < pl->n_stages; s++) {
        const ah_stage_t *st = &pl->stages[s];
        if (st->first >= st->last)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] pipelines[%d].stages[%d].layers: [%d, %d) holds no layer; "
                                "give every stage a non-empty range [first, last) with first < last",
                                pi, s, st->first, st->last);
        if (st->first < 0)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] pipelines[%d].stages[%d].layers: [%d, %d) starts before layer 0",
                                pi, s, st->first, st->last);
        if (st->first > next)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] pipelines[%d].stages[%d].layers: [%d, %d) starts after layer "
                                "%lld, so %s missing from pipeline %d; stage ranges must be contiguous "
                                "from 0",
                                pi, s, st->first, st->last, (long long)next,
                                layer_range(range, sizeof range, next, st->first), pi);
        if (st->first < next)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] pipelines[%d].stages[%d].layers: [%d, %d) overlaps stage %d, "
                                "so %s held twice in pipeline %d; stages must be in order and not overlap",
                                pi, s, st->first, st->last, s - 1,
                                layer_range(range, sizeof range, st->first, next), pi);
        if (st->last > L)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] pipelines[%d].stages[%d].layers: [%d, %d) goes past the "
                                "model's %lld layers (blocks 0 .. %lld)",
                                pi, s, st->first, st->last, (long long)L, (long long)(L - 1));
        next = st->last;
    }
    if (next < L)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[layers] pipelines[%d]: the last stage ends at layer %lld, so %s missing "
                            "from pipeline %d; its stages must cover all %lld layers",
                            pi, (long long)next, layer_range(range, sizeof range, next, L), pi,
                            (long long)L);
    return AH_OK;
}

typedef struct {
    int pipeline, stage, rank; /* pipeline -1: slot unused */
} place_t;

/* A device of stage s (TP rank r) that an earlier stage of the same pipeline holds (`first`):
 * only an interleaved pipeline may, and only with the same TP rank (the whole group's equality and
 * the spacing are check_interleaved's). */
static ah_status_t check_repeat(const ah_plan_t *p, int pi, int s, int r, const place_t *first, ah_error_t *err) {
    const ah_pipeline_t *pl = &p->pipelines[pi];
    const ah_device_ref_t *d = &pl->stages[s].devices[r];
    const char *node = p->cluster.nodes[d->node].name;
    if (pl->schedule != AH_SCHED_INTERLEAVED)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[schedule] pipelines[%d] (schedule %s): %s GPU %d holds stages %d and %d; only an "
                            "interleaved pipeline puts a device on several of its stages (virtual stages): set "
                            "\"schedule\": \"interleaved\", or give stage %d devices of its own",
                            pi, ah_schedule_name(pl->schedule), node, d->index, first->stage, s, s);
    if (first->rank != r)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[schedule] pipelines[%d].stages[%d].devices[%d]: %s GPU %d is TP rank %d of stage %d; a "
                            "device on several stages has the same TP rank on each (the same TP group, in order)",
                            pi, s, r, node, d->index, first->rank, first->stage);
    return AH_OK;
}

/* [device] and [tp-group] for one stage; `slots` (one per GPU of the cluster, from `base`)
 * remembers the first place each device was used. */
static ah_status_t check_stage_devices(const ah_plan_t *p, int pi, int s, const int *base,
                                       place_t *slots, ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    const ah_stage_t *st = &p->pipelines[pi].stages[s];
    const int n_dev = ah_stage_devices(&p->pipelines[pi], p->tp);
    for (int r = 0; r < n_dev; r++) {
        const ah_device_ref_t *d = &st->devices[r];
        if (d->node < 0 || d->node >= c->n_nodes)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[device] pipelines[%d].stages[%d].devices[%d].node: node number %d is "
                                "not in the cluster (it has %d nodes)",
                                pi, s, r, d->node, c->n_nodes);
        const ah_node_t *n = &c->nodes[d->node];
        if (d->index < 0 || d->index >= n->count)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[device] pipelines[%d].stages[%d].devices[%d].index: %d, but node %s "
                                "has %d GPUs (indices 0 .. %d)",
                                pi, s, r, d->index, n->name, n->count, n->count - 1);
        place_t *slot = &slots[base[d->node] + d->index];
        if (slot->pipeline >= 0 && slot->pipeline != pi)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[device] %s GPU %d is on stages of two pipelines: pipelines[%d].stages[%d].devices[%d] "
                                "and pipelines[%d].stages[%d].devices[%d]; a device runs one rank, in one pipeline "
                                "(an interleaved pipeline may put it on several of its own stages)",
                                n->name, d->index, slot->pipeline, slot->stage, slot->rank, pi, s, r);
        if (slot->pipeline >= 0) TRY(check_repeat(p, pi, s, r, slot, err));
        else *slot = (place_t){pi, s, r};
    }
    if (st->type < 0 || st->type >= c->n_types)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[tp-group] pipelines[%d].stages[%d].gpu: type number %d is not in the "
                            "cluster (it has %d types)",
                            pi, s, st->type, c->n_types);
    for (int r = 0; r < n_dev; r++) {
        const int lead = r - r % p->tp; /* device 0 of r's TP group (its CP rank's) */
        const ah_node_t *n0 = &c->nodes[st->devices[lead].node];
        if (st->devices[r].node != st->devices[lead].node)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[tp-group] pipelines[%d].stages[%d].devices: device %d is on node %s but "
                                "device %d is on node %s; a TP group must be inside one node",
                                pi, s, lead, n0->name, r, c->nodes[st->devices[r].node].name);
        char which[32] = ""; /* which CP rank's group, when there are several */
        if (n_dev > p->tp) snprintf(which, sizeof which, " (device %d)", r);
        if (n0->type != st->type)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[tp-group] pipelines[%d].stages[%d].gpu: the stage says \"%s\" but node %s%s "
                                "has %s GPUs; set \"gpu\" to \"%s\" or use devices of a %s node",
                                pi, s, c->types[st->type].name, n0->name, which, c->types[n0->type].name,
                                c->types[n0->type].name, c->types[st->type].name);
    }
    if (!ah_gpu_runs(&c->types[st->type], p->train.precision))
        return ah_error_set(err, AH_ERR_INVALID,
                            "[precision] pipelines[%d].stages[%d].gpu: GPU type %s has no %s rate "
                            "(gpu_types.%s.tflops.%s), so it cannot run this %s plan; give the rate, or use "
                            "another type or precision",
                            pi, s, c->types[st->type].name, ah_precision_name(p->train.precision),
                            c->types[st->type].name, ah_precision_name(p->train.precision),
                            ah_precision_name(p->train.precision));
    return AH_OK;
}

static ah_status_t check_devices(const ah_plan_t *p, ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    int *base = calloc((size_t)c->n_nodes + 1, sizeof *base);
    if (!base) return ah_error_set(err, AH_ERR_OOM, "out of host memory checking devices");
    for (int i = 0; i < c->n_nodes; i++) base[i + 1] = base[i] + (c->nodes[i].count > 0 ? c->nodes[i].count : 0);
    place_t *slots = malloc(((size_t)base[c->n_nodes] + 1) * sizeof *slots);
    if (!slots) {
        free(base);
        return ah_error_set(err, AH_ERR_OOM, "out of host memory checking devices");
    }
    for (int i = 0; i < base[c->n_nodes]; i++) slots[i].pipeline = -1;
    ah_status_t s = AH_OK;
    for (int pi = 0; pi < p->n_pipelines && s == AH_OK; pi++)
        for (int si = 0; si < p->pipelines[pi].n_stages && s == AH_OK; si++)
            s = check_stage_devices(p, pi, si, base, slots, err);
    free(slots);
    free(base);
    return s;
}

static bool same_group(const ah_plan_t *p, const ah_pipeline_t *pl, const ah_stage_t *a, const ah_stage_t *b) {
    for (int r = 0; r < ah_stage_devices(pl, p->tp); r++)
        if (a->devices[r].node != b->devices[r].node || a->devices[r].index != b->devices[r].index) return false;
    return true;
}

/* The interleaved pipeline pi's placement and micro-batch count: P device groups (the distinct
 * ones), device d on stages d, d + P, d + 2P, ... (so S a multiple of P), at least two stages each,
 * micro_batches a multiple of P. */
static ah_status_t check_interleaved(const ah_plan_t *p, int pi, ah_error_t *err) {
    const ah_pipeline_t *pl = &p->pipelines[pi];
    const int S = pl->n_stages, P = ah_pipeline_groups(pl);
    const ah_cluster_t *c = &p->cluster;
    for (int k = 0; k < S; k++) {
        const ah_device_ref_t *d = &pl->stages[k].devices[0];
        for (int t = 0; k < P && t < k; t++)
            if (same_group(p, pl, &pl->stages[t], &pl->stages[k]) || (pl->stages[t].devices[0].node == d->node &&
                                                                  pl->stages[t].devices[0].index == d->index))
                return ah_error_set(err, AH_ERR_INVALID,
                                    "[schedule] pipelines[%d].stages[%d]: %s GPU %d holds stages %d and %d, %d apart; "
                                    "an interleaved pipeline of %d devices puts device d on stages d, d+%d, d+%d, ... "
                                    "(evenly spaced), so its first %d stages are on %d different devices",
                                    pi, k, c->nodes[d->node].name, d->index, t, k, k - t, P, P, 2 * P, P, P);
        if (k >= P && !same_group(p, pl, &pl->stages[k], &pl->stages[k - P])) {
            const ah_device_ref_t *e = &pl->stages[k - P].devices[0];
            return ah_error_set(err, AH_ERR_INVALID,
                                "[schedule] pipelines[%d].stages[%d]: on %s GPU %d, but an interleaved pipeline of "
                                "%d devices holds stage %d on the TP group of stage %d (%s GPU %d%s): device d is on "
                                "stages d, d+%d, d+%d, ... (evenly spaced)",
                                pi, k, c->nodes[d->node].name, d->index, P, k, k - P, c->nodes[e->node].name, e->index,
                                p->tp > 1 ? " and its group" : "", P, 2 * P);
        }
    }
    if (S % P != 0 || S / P < 2)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[schedule] pipelines[%d]: interleaved, %d stages over %d devices; each device holds the "
                            "same number of evenly spaced stages, at least 2 (device d on stages d, d+%d, ...): %s",
                            pi, S, P, P,
                            S % P ? "make the stage count a multiple of the device count"
                                  : "give each device 2 or more stages, or set \"schedule\": \"1f1b\"");
    if (pl->micro_batches >= 1 && pl->micro_batches % P != 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[schedule] pipelines[%d].micro_batches: %lld, but Megatron's interleaved 1F1B schedule "
                            "runs micro-batches in groups of the pipeline's %d devices, so it needs a multiple of %d "
                            "(e.g. %lld or %lld)",
                            pi, (long long)pl->micro_batches, P, P, (long long)(pl->micro_batches / P * P),
                            (long long)((pl->micro_batches / P + 1) * P));
    return AH_OK;
}

static ah_status_t check_warmup(const ah_plan_t *p, int pi, ah_error_t *err) {
    const ah_pipeline_t *pl = &p->pipelines[pi];
    for (int s = 0; s < pl->n_stages; s++) {
        const int x = pl->stages[s].warmup_extra, above = s > 0 ? pl->stages[s - 1].warmup_extra : x;
        if (x < 0 || x > above || above - x > AH_WARMUP_DROP_MOST || (x > 0 && pl->schedule == AH_SCHED_INTERLEAVED))
            return ah_error_set(err, AH_ERR_INVALID,
                                "[warmup] pipelines[%d].stages[%d].warmup_extra: %d; it must be >= 0, at most the "
                                "stage before's (%d) and at most %d less than it (more would deadlock the runtime's "
                                "p2p, which posts receives one micro-batch ahead), and 0 under the interleaved schedule",
                                pi, s, x, above, AH_WARMUP_DROP_MOST);
    }
    return AH_OK;
}

bool ah_schedule_runtime_runs(ah_schedule_t s) {
    return s == AH_SCHED_1F1B || s == AH_SCHED_INTERLEAVED || s == AH_SCHED_ZERO_BUBBLE;
}

static ah_status_t check_batch(const ah_plan_t *p, ah_error_t *err) {
    int64_t sum = 0;
    char terms[256];
    ah_str_t sum_text = ah_str_fixed(terms, sizeof terms); /* "4 + 4 + 2", " + ..." once full */
    for (int i = 0; i < p->n_pipelines; i++) {
        int64_t n = p->pipelines[i].micro_batches;
        if (n < 1)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[batch] pipelines[%d].micro_batches: must be at least 1, got %lld; "
                                "drop a pipeline that gets no micro-batches",
                                i, (long long)n);
        sum += n;
        if (sum_text.len + 24 < sizeof terms) ah_str_appendf(&sum_text, "%s%lld", i ? " + " : "", (long long)n);
        else if (i == p->n_pipelines - 1) ah_str_appendf(&sum_text, " + ...");
    }
    const ah_train_t *t = &p->train;
    /* sum x micro_batch == global_batch, without overflowing the product */
    if (t->global_batch % t->micro_batch != 0 || sum != t->global_batch / t->micro_batch)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[batch] pipelines[*].micro_batches: they sum to %lld (%s), and %lld x "
                            "micro_batch %lld = %.0f sequences, but global_batch is %lld; %s",
                            (long long)sum, terms, (long long)sum, (long long)t->micro_batch,
                            (double)sum * (double)t->micro_batch, (long long)t->global_batch,
                            t->global_batch % t->micro_batch
                                ? "global_batch must be a multiple of micro_batch"
                                : "make the micro-batch counts sum to global_batch / micro_batch");
    return AH_OK;
}

ah_status_t ah_plan_validate(const ah_plan_t *p, ah_error_t *err) {
    if (p->n_pipelines < 1 || !p->pipelines)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[pipelines] pipelines: the plan has none; it needs at least one pipeline");
    TRY(ah_plan_check_train(&p->model, &p->train, err));
    TRY(check_tp(p, err));
    for (int i = 0; i < p->n_pipelines; i++) TRY(check_cp(p, i, err));
    for (int i = 0; i < p->n_pipelines; i++) TRY(check_layers(p, i, err));
    TRY(check_devices(p, err));
    TRY(check_batch(p, err));
    for (int i = 0; i < p->n_pipelines; i++)
        if (p->pipelines[i].schedule == AH_SCHED_INTERLEAVED) TRY(check_interleaved(p, i, err));
    for (int i = 0; i < p->n_pipelines; i++) TRY(check_warmup(p, i, err));
    return ah_plan_check_shards(p, err);
}
