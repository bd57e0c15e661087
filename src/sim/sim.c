/* The replay: one policy over one availability timeline (rules in sim.h, docs/simulator.md). */
#include "sim/sim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ckpt/placement.h"
#include "core/timing.h"
#include "core/vec.h"
#include "planner/planner.h"

void ah_sim_opts_default(ah_sim_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->train = (ah_train_t){.global_batch = 512, .seq_len = 2048, .precision = AH_PREC_BF16};
    o->ckpt_every_s = 1800;
    o->restart_s = 60;
    o->handover = true;
    o->replan_s = -1;
    o->on_demand_factor = 2.5;
    o->disk_gb_s = 8; /* an 8-GPU cloud node's local NVMe SSDs (p4d: 8 x 1 TB), about 1 GB/s each */
    o->grace_s = 120;
    o->snapshot_gb_s = AH_SIM_SNAPSHOT_GB_S;
}

double ah_sim_on_demand_price(const ah_cluster_t *c, int node, const ah_sim_opts_t *o) {
    const ah_node_t *n = &c->nodes[node];
    if (!n->spot) return n->usd_per_gpu_hour;
    for (int i = 0; i < c->n_nodes; i++)
        if (!c->nodes[i].spot && c->nodes[i].type == n->type) return c->nodes[i].usd_per_gpu_hour;
    return n->usd_per_gpu_hour * o->on_demand_factor;
}

double ah_sim_horizon_s(const ah_sim_avail_t *a, const ah_sim_opts_t *o) {
    if (o->hours > 0) return o->hours * 3600.0;
    return a->end_s > 1 ? a->end_s : 1;
}

ah_status_t ah_sim_check_horizon(const ah_sim_avail_t *a, const ah_sim_opts_t *o, ah_error_t *err) {
    if (o->hours <= 0 && a->end_s <= 0)
        return ah_error_set(err, AH_ERR_USAGE, "nothing to replay: no --trace, or its rows are all at time 0; give "
                            "--hours H");
    const double H = ah_sim_horizon_s(a, o), max_h = AH_SIM_MAX_HOURS;
    if (H > max_h * 3600)
        return ah_error_set(err, AH_ERR_USAGE, "a horizon of %.4g h (%s) is past the %.0f h (%.0f years) simulate "
                            "replays; check the trace's time unit (,unit=s|h|ms) or give a shorter --hours",
                            H / 3600, o->hours > 0 ? "--hours" : "the latest trace end", max_h, max_h / 8766);
    if (o->ckpt_every_s > 0 && H / o->ckpt_every_s > AH_SIM_MAX_CHECKPOINTS)
        return ah_error_set(err, AH_ERR_USAGE, "--ckpt-every-s %g over a horizon of %.4g h is %.3g checkpoints, more "
                            "than the %.0e simulate replays; raise --ckpt-every-s", o->ckpt_every_s, H / 3600,
                            H / o->ckpt_every_s, (double)AH_SIM_MAX_CHECKPOINTS);
    return AH_OK;
}

/* ---- plans by availability set ---- */

typedef struct {
    char *key;            /* '0'/'1' per cluster node: the set the plan was made on */
    bool ok;
    char why[384];        /* when !ok: the planner's message */
    double tokens_per_s, iteration_s, plan_s, usd_per_s, egress_usd_per_s; /* egress: while training */
    int tp;
    bool *uses;           /* [n_nodes] nodes the plan uses */
    int *gpus;            /* [n_types] GPUs of those nodes */
    ah_placement_t place;  /* the plan's devices (full-cluster nodes) and the shards they hold */
    int64_t *ckpt_bytes;  /* per device: what its checkpoint holds */
    double gather_s;      /* a sharded plan's save: the all-gather of the moments first */
    int *holder;          /* [n_nodes] memory tier (autohet, replicas on): whose memory holds the node's
                             checkpoint, -1 none; NULL: no memory tier (memory.c) */
} entry_t;

/* Work kept: tokens, and the training seconds they took (the checkpoint schedule counts those,
 * like the runtime's every-K-steps schedule counts steps). */
typedef struct {
    double tokens, train_s;
} progress_t;

typedef struct {
    const ah_model_t *model;
    const ah_cluster_t *c;
    const ah_sim_opts_t *o;
    ah_policy_t pol;
    ah_sim_result_t *r;
    entry_t **cache;
    int n_cache, cap_cache;
    /* replay state */
    bool *up;             /* [n_nodes] up now */
    bool *holds;          /* [n_nodes] the node still holds its part of the state plan */
    double t, recover_end, ckpt_due;
    progress_t now;
    progress_t at_ckpt;   /* the last periodic checkpoint: on the disks and in the cloud */
    progress_t at_disk;   /* the newest state on the disks: that, or a save at a notice since */
    progress_t at_mem;    /* the state the memory tier holds: the last periodic checkpoint, or a
                             memory-first save at a notice since (memory.c) */
    ah_sim_phase_t phase;
    entry_t *run;         /* the plan training, or being recovered to; NULL when stalled */
    entry_t *state;       /* the plan whose devices hold the latest state; NULL when none */
    bool fresh;           /* nothing trained yet: a start has nothing to transfer */
    bool started;         /* the first (re)start happened */
    bool pending_join;
    int cap_segs, cap_markers, cap_recs;
    bool oom;
} run_t;

static void entry_free(entry_t *e) {
    if (!e) return;
    free(e->key);
    free(e->uses);
    free(e->gpus);
    ah_placement_free(&e->place);
    free(e->ckpt_bytes);
    free(e->holder);
    free(e);
}

/* The nodes a policy plans on, given what is up: varuna keeps the type with the most GPUs up
 * among the types that run the precision. */
static void policy_mask(const run_t *x, char *key) {
    const ah_cluster_t *c = x->c;
    int keep_type = -1;
    if (x->pol == AH_POLICY_VARUNA) {
        int best = 0;
        for (int ty = 0; ty < c->n_types; ty++) {
            if (!ah_gpu_runs(&c->types[ty], x->o->train.precision)) continue;
            int n = 0;
            for (int i = 0; i < c->n_nodes; i++)
                if (x->up[i] && c->nodes[i].type == ty) n += c->nodes[i].count;
            if (n > best) {
                best = n;
                keep_type = ty;
            }
        }
    }
    for (int i = 0; i < c->n_nodes; i++) {
        bool in = x->pol == AH_POLICY_ON_DEMAND || x->up[i];
        if (x->pol == AH_POLICY_VARUNA) in = in && c->nodes[i].type == keep_type;
        key[i] = in ? '1' : '0';
    }
    key[c->n_nodes] = 0;
}

/* Fills e from a planner result on a sub-cluster whose node i is full-cluster node map[i]. */
static bool entry_fill(run_t *x, entry_t *e, const ah_plan_result_t *res, const int *map) {
    const ah_plan_t *p = &res->plan;
    const ah_cluster_t *c = x->c;
    e->tokens_per_s = res->eval.pred.tokens_per_s;
    e->iteration_s = res->eval.pred.iteration_s;
    e->egress_usd_per_s = res->egress_usd_per_hour / 3600.0;
    e->tp = p->tp;
    ah_error_t err;
    if (ah_placement_build(p, map, c->n_nodes, &e->place, &err) != AH_OK) return false;
    e->ckpt_bytes = calloc((size_t)(e->place.n_ranks > 0 ? e->place.n_ranks : 1), sizeof *e->ckpt_bytes);
    if (!e->ckpt_bytes) return false;
    ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = p->tp, .profile = x->o->profile, .cp = 1};
    /* A sharded plan's save all-gathers, on each device, the AdamW state the others own of its
     * groups, over the inter-node link (the worst device bounds it). */
    e->gather_s = 0;
    const int n_dev = ah_plan_device_count(p);
    int64_t *held = p->n_opt_groups > 0 ? malloc(2 * (size_t)n_dev * sizeof *held) : NULL;
    if (held && ah_opt_elems_all(p, held, held + n_dev, &err) == AH_OK)
        for (int i = 0; i < p->n_pipelines; i++)
            for (int s = 0; s < p->pipelines[i].n_stages; s++)
                for (int k = 0; k < ah_stage_devices(&p->pipelines[i], p->tp); k++) {
                    const int ty = p->pipelines[i].stages[s].type, r = ah_plan_rank_of(p, i, s, k);
                    const double bytes = (double)held[n_dev + r] * (double)ah_optimizer_state_bytes(p->train.precision);
                    const double t = bytes / ah_link_bw(&p->cluster, AH_LINK_INTER_NODE, ty, ty);
                    if (t > e->gather_s) e->gather_s = t;
                }
    free(held);
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++) {
            const ah_stage_t *st = &pl->stages[s];
            ah_stage_cost_t sc;
            ah_stage_cost(&ctx, st->type, st->first, st->last, s == 0, s == pl->n_stages - 1, st->recompute, &sc);
            /* every CP rank holds the stage; a device of an interleaved pipeline, several */
            for (int k = 0; k < ah_stage_devices(pl, p->tp); k++) {
                const int node = map[st->devices[k].node];
                e->ckpt_bytes[ah_plan_rank_of(p, i, s, k)] += sc.params * AH_SIM_CKPT_BYTES_PER_PARAM;
                if (!e->uses[node]) {
                    e->uses[node] = true;
                    e->gpus[c->nodes[node].type] += c->nodes[node].count;
                    const double price = x->pol == AH_POLICY_ON_DEMAND ? ah_sim_on_demand_price(c, node, x->o)
                                                                       : c->nodes[node].usd_per_gpu_hour;
                    e->usd_per_s += price * c->nodes[node].count / 3600.0;
                }
            }
        }
    }
    if (x->pol != AH_POLICY_AUTOHET || x->o->replica_memory_gb <= 0) return true;
    e->holder = malloc(sizeof *e->holder * (size_t)(c->n_nodes + 1));
    return e->holder && ah_sim_memory_holders(c, &e->place, e->ckpt_bytes, x->o->replica_memory_gb, e->holder);
}

/* Plans the set in key (cached). NULL only when out of host memory. */
static entry_t *plan_for(run_t *x) {
    const ah_cluster_t *c = x->c;
    char *key = malloc((size_t)c->n_nodes + 1);
    if (!key) return NULL;
    policy_mask(x, key);
    for (int i = 0; i < x->n_cache; i++)
        if (strcmp(x->cache[i]->key, key) == 0) {
            free(key);
            return x->cache[i];
        }
    entry_t *e = calloc(1, sizeof *e);
    int *map = malloc(sizeof(int) * (size_t)(c->n_nodes + 1));
    ah_cluster_t sub = {0};
    ah_error_t err = {0};
    bool mem_ok = e && map;
    if (mem_ok) {
        e->key = key;
        key = NULL;
        e->uses = calloc((size_t)c->n_nodes + 1, sizeof(bool));
        e->gpus = calloc((size_t)c->n_types + 1, sizeof(int));
        mem_ok = e->uses && e->gpus && ah_cluster_copy(c, &sub, &err) == AH_OK;
    }
    if (mem_ok) {
        int n = 0;
        for (int i = 0; i < c->n_nodes; i++)
            if (e->key[i] == '1') {
                sub.nodes[n] = c->nodes[i];
                if (x->pol == AH_POLICY_ON_DEMAND) /* its objective and budget at the prices it pays */
                    sub.nodes[n].usd_per_gpu_hour = ah_sim_on_demand_price(c, i, x->o);
                map[n++] = i;
            }
        sub.n_nodes = n;
        ah_planner_opts_t po;
        ah_planner_opts_default(&po);
        po.train = x->o->train;
        po.profile = x->o->profile;
        po.shard = x->o->shard;
        po.objective = x->o->objective;
        po.budget_usd_per_hour = x->o->budget_usd_per_hour;
        po.schedule = x->o->schedule;
        po.cp = x->o->cp;
        po.schedule_trainable_only = true; /* the policies train */
        ah_plan_result_t res;
        ah_status_t st;
        const double t0 = ah_now_s();
        if (n == 0) st = ah_error_set(&err, AH_ERR_INFEASIBLE, "no nodes are up");
        else if (x->pol == AH_POLICY_AUTOHET || x->pol == AH_POLICY_ON_DEMAND) {
            st = ah_planner_run_sharded(x->model, &sub, &po, false, &res, &err);
        } else
            st = ah_baseline_run(x->model, &sub, &po,
                                 x->pol == AH_POLICY_MEGATRON_BEST ? AH_BASELINE_MEGATRON_BEST : AH_BASELINE_UNIFORM,
                                 &res, &err);
        e->plan_s = ah_now_s() - t0;
        if (st == AH_OK) {
            e->ok = true;
            mem_ok = entry_fill(x, e, &res, map);
            ah_plan_result_free(&res);
        } else
            snprintf(e->why, sizeof e->why, "%s", err.msg);
        x->r->planner_s += e->plan_s;
        if (x->r->plans_computed++ == 0) x->r->first_plan_s = e->plan_s;
    }
    ah_cluster_free(&sub);
    free(map);
    free(key);
    mem_ok = mem_ok && ah_grow(&x->cache, &x->cap_cache, x->n_cache + 1, sizeof *x->cache);
    if (!mem_ok) {
        entry_free(e);
        return NULL;
    }
    x->cache[x->n_cache++] = e;
    return e;
}

/* ---- timeline ---- */

static void seg_open(run_t *x, ah_sim_phase_t phase, const char *fmt, const char *arg) {
    ah_sim_result_t *r = x->r;
    const int n_types = x->c->n_types;
    if (r->n_segs > 0) {
        ah_sim_segment_t *prev = &r->segs[r->n_segs - 1];
        prev->end_s = x->t;
        if (prev->end_s <= prev->start_s) { /* zero length: replace it */
            free(prev->gpus);
            r->n_segs--;
        }
    }
    if (!ah_grow(&r->segs, &x->cap_segs, r->n_segs + 1, sizeof *r->segs)) {
        x->oom = true;
        return;
    }
    ah_sim_segment_t *s = &r->segs[r->n_segs];
    memset(s, 0, sizeof *s);
    s->gpus = calloc((size_t)n_types + 1, sizeof(int));
    if (!s->gpus) {
        x->oom = true;
        return;
    }
    r->n_segs++;
    s->start_s = s->end_s = x->t;
    s->phase = phase;
    if (phase == AH_PHASE_TRAIN) s->tokens_per_s = x->run->tokens_per_s;
    if (phase != AH_PHASE_STALLED && x->run) memcpy(s->gpus, x->run->gpus, sizeof(int) * (size_t)n_types);
    snprintf(s->event, sizeof s->event, fmt, arg);
}

static void mark(run_t *x, bool replan) {
    ah_sim_result_t *r = x->r;
    if (!ah_grow(&r->markers, &x->cap_markers, r->n_markers + 1, sizeof *r->markers)) {
        x->oom = true;
        return;
    }
    r->markers[r->n_markers++] = (ah_sim_marker_t){x->t, replan};
}

/* ---- recovery ---- */

/* dt seconds of training on the running plan */
static void train(run_t *x, double dt) {
    x->now.tokens += x->run->tokens_per_s * dt;
    x->now.train_s += dt;
    x->r->egress_usd += x->run->egress_usd_per_s * dt; /* also in usd */
    x->r->usd += x->run->egress_usd_per_s * dt;
}

/* Layer l of 0 .. L + 1 (the embedding, blocks 0 .. L - 1, the head) as a shard group. */
static ah_shard_group_t layer_group(int layer, int L) {
    return layer == 0 ? (ah_shard_group_t){AH_SHARD_EMBED, -1}
           : layer == L + 1 ? (ah_shard_group_t){AH_SHARD_HEAD, -1} : (ah_shard_group_t){AH_SHARD_BLOCK, layer - 1};
}

static ah_layer_kind_t layer_kind(int layer, int L) {
    return layer == 0 ? AH_LAYER_EMBED : layer == L + 1 ? AH_LAYER_HEAD : AH_LAYER_BLOCK;
}

/* Appends an empty record at x->t; NULL when out of host memory. */
static ah_sim_recovery_t *rec_push(run_t *x, const char *label, const char *arg) {
    ah_sim_result_t *r = x->r;
    if (!ah_grow(&r->recs, &x->cap_recs, r->n_recs + 1, sizeof *r->recs)) {
        x->oom = true;
        return NULL;
    }
    ah_sim_recovery_t *v = &r->recs[r->n_recs++];
    memset(v, 0, sizeof *v);
    v->t_s = x->t;
    snprintf(v->event, sizeof v->event, label, arg);
    return v;
}

/* The save at the notice: a sharded plan's all-gather of the moments, then every node writes its
 * devices' checkpoints to its own disk, in parallel. */
static double save_s(run_t *x, const entry_t *from) {
    double *node = calloc((size_t)x->c->n_nodes + 1, sizeof(double)), worst = 0;
    if (!node) {
        x->oom = true;
        return 0;
    }
    for (int i = 0; i < from->place.n_ranks; i++) node[from->place.ranks[i].node] += (double)from->ckpt_bytes[i];
    for (int n = 0; n < x->c->n_nodes; n++)
        if (node[n] > worst) worst = node[n];
    free(node);
    return from->gather_s + worst / (x->o->disk_gb_s * 1e9);
}

/* Seconds to move the state onto plan `to`, with bytes and seconds per tier in v, and whether
 * some of it comes from the cloud, i.e. the run rolls back to the last periodic checkpoint. */
static double transfer_s(run_t *x, const entry_t *to, ah_sim_recovery_t *v, bool *rollback) {
    *rollback = !x->fresh;
    if (x->fresh) return 0;
    const ah_cluster_t *c = x->c;
    const int L = (int)x->model->n_layer;
    const bool local_first = x->pol == AH_POLICY_AUTOHET && x->state;
    double *cloud = calloc((size_t)c->n_nodes + 1, sizeof(double));
    if (!cloud) {
        x->oom = true;
        return 0;
    }
    double peer_max = 0, mem_max = 0;
    bool lost = false;
    const ah_placement_t *was = local_first ? &x->state->place : NULL;
    /* the memory tier: a node's pieces survive in memory while the node holding its replica holds */
    bool *in_mem = local_first && x->state->holder ? calloc((size_t)c->n_nodes + 1, sizeof *in_mem) : NULL;
    for (int n = 0; in_mem && n < c->n_nodes; n++) in_mem[n] = x->state->holder[n] >= 0 && x->holds[x->state->holder[n]];
    for (int i = 0; i < to->place.n_ranks; i++) {
        const ah_shard_holder_t *d = &to->place.ranks[i];
        int64_t b_cloud = 0, b_local = 0, b_mem = 0;
        if (!local_first) b_cloud = to->ckpt_bytes[i];
        else
            for (int l = 0; l <= L + 1; l++) {
                const ah_shard_group_t g = layer_group(l, L);
                if (!ah_placement_holds(&to->place, i, g, d->tp_index)) continue;
                const int64_t lb = ah_layer_params(x->model, layer_kind(l, L), to->tp) * AH_SIM_CKPT_BYTES_PER_PARAM;
                /* on a surviving device of the state; resharding needs every old shard somewhere */
                const bool same_tp = to->tp == was->tp;
                bool avail = !same_tp || ah_placement_survives(was, g, d->tp_index, x->holds);
                for (int k = 0; !same_tp && avail && k < was->tp; k++) avail = ah_placement_survives(was, g, k, x->holds);
                bool local = false;
                for (int j = 0; same_tp && !local && j < was->n_ranks; j++) {
                    const ah_shard_holder_t *o = &was->ranks[j];
                    local = o->node == d->node && o->index == d->index && x->holds[o->node] &&
                            ah_placement_holds(was, j, g, d->tp_index);
                }
                bool mem = !local && !avail && in_mem;
                for (int k = 0; mem && k < (same_tp ? 1 : was->tp); k++)
                    mem = ah_placement_survives(was, g, same_tp ? d->tp_index : k, in_mem);
                if (local) b_local += lb;
                else if (mem) b_mem += lb;
                else if (!avail) {
                    b_cloud += lb;
                    lost = true;
                }
            }
        int64_t b_peer = to->ckpt_bytes[i] - b_cloud - b_local - b_mem;
        if (b_peer < 0) b_peer = 0;
        v->bytes[AH_TIER_LOCAL] += b_local;
        v->bytes[AH_TIER_PEER] += b_peer;
        v->bytes[AH_TIER_CLOUD] += b_cloud;
        v->bytes[AH_TIER_MEMORY] += b_mem;
        cloud[d->node] += (double)b_cloud;
        const double ps = (double)b_peer / (c->net.inter_node_gb_s * 1e9), ms = (double)b_mem / (c->net.inter_node_gb_s * 1e9);
        if (ps > peer_max) peer_max = ps;
        if (ms > mem_max) mem_max = ms;
    }
    free(in_mem);
    double cloud_max = 0;
    for (int n = 0; n < c->n_nodes; n++) {
        const double cs = cloud[n] / (c->net.cloud_gb_s * 1e9);
        if (cs > cloud_max) cloud_max = cs;
    }
    free(cloud);
    v->tier_s[AH_TIER_PEER] = peer_max;
    v->tier_s[AH_TIER_CLOUD] = cloud_max;
    v->tier_s[AH_TIER_MEMORY] = mem_max;
    *rollback = !local_first || lost;
    return cloud_max + peer_max + mem_max;
}

/* The handover at a notice (memory.c's header; the runtime's ckpt/handover.h): every device of the state
 * plan is alive, so each device of the next plan e receives what it reads and its own device did not
 * hold, at inter_node_gb_s per device, the slowest bounding it. */
static double handover_s(const run_t *x, const entry_t *e) {
    const int L = (int)x->model->n_layer;
    const ah_placement_t *was = &x->state->place;
    double worst = 0;
    for (int i = 0; i < e->place.n_ranks; i++) {
        const ah_shard_holder_t *d = &e->place.ranks[i];
        int64_t moved = e->ckpt_bytes[i];
        for (int l = 0; e->tp == was->tp && l <= L + 1; l++) {
            const ah_shard_group_t g = layer_group(l, L);
            if (!ah_placement_holds(&e->place, i, g, d->tp_index)) continue;
            bool local = false;
            for (int j = 0; !local && j < was->n_ranks; j++)
                local = was->ranks[j].node == d->node && was->ranks[j].index == d->index &&
                        ah_placement_holds(was, j, g, d->tp_index);
            if (local) moved -= ah_layer_params(x->model, layer_kind(l, L), e->tp) * AH_SIM_CKPT_BYTES_PER_PARAM;
        }
        const double t = (double)(moved > 0 ? moved : 0) / (x->c->net.inter_node_gb_s * 1e9);
        if (t > worst) worst = t;
    }
    return worst;
}

/* A (re)start onto plan e. join: every node got the notice (a restart to take in joined nodes). */
static void begin_recovery(run_t *x, entry_t *e, bool join, const char *label, const char *arg) {
    ah_sim_result_t *r = x->r;
    if (x->phase == AH_PHASE_RECOVER && r->n_recs > 0) r->recs[r->n_recs - 1].interrupted = true;
    ah_sim_recovery_t *v = rec_push(x, label, arg);
    if (!v) return;
    bool unsaved = false, handover = false;
    if (x->phase == AH_PHASE_TRAIN && x->pol == AH_POLICY_AUTOHET) {
        /* autohet reacts to the notice like the runtime: the step in progress finishes, then
         * every node saves to its disk (a checkpoint of the disks; the cloud keeps the last
         * periodic one) when the runtime's rule says so (ckpt/policy.h); if not, the disks hold
         * what they held */
        v->wait_s = x->run->iteration_s / 2;
        train(x, v->wait_s);
        const double sv = save_s(x, x->run);
        ah_ckpt_notice_t notice = {.elapsed_s = v->wait_s, .grace_s = x->o->grace_s, .save_s = sv,
                                   .redo_s = x->now.train_s - x->at_disk.train_s, .every_node = join};
        /* the memory tier (memory.c): when it commits sooner than the disks, what commits the step is
         * the snapshot and the replication; the disks follow until the job ends, at the removal at
         * the latest */
        notice.memory = x->run->holder != NULL;
        notice.memory_s = -1;
        /* the handover (memory.c; not for a join): each device's pieces into the memory of the host
         * that reads them under e, when ckpt/policy.h's rule takes it */
        notice.handover = notice.memory && x->o->handover && !join && x->state;
        if (notice.handover) { /* against the disks plus what the relaunch would fetch without it */
            ah_sim_recovery_t without = {0};
            bool rolls_back;
            notice.fetch_s = transfer_s(x, e, &without, &rolls_back);
            notice.memory_s = x->run->gather_s + ah_sim_memory_snapshot_s(&x->run->place, x->run->ckpt_bytes, x->o) +
                              handover_s(x, e);
            notice.handover = ah_ckpt_notice_handover(&notice);
        }
        if (notice.memory && !notice.handover)
            notice.memory_s = x->run->gather_s + ah_sim_memory_save_s(x->c, &x->run->place, x->run->ckpt_bytes, x->o);
        handover = notice.handover;
        v->saved = ah_ckpt_save_at_notice(&notice);
        v->save_s = v->saved ? sv : 0;
        handover = handover && v->saved;
        if (handover) {
            v->save_s = notice.memory_s;
            x->at_mem = x->now;
        } else if (v->saved && ah_ckpt_notice_memory_first(&notice)) {
            v->save_s = fmin(notice.memory_s + sv - x->run->gather_s, x->o->grace_s - v->wait_s);
            x->at_mem = x->now;
        }
        if (v->saved) x->at_disk = x->now; /* a handover's: written right after the relaunch, in the background */
        unsaved = !v->saved;
    }
    bool cloud_rollback;
    v->transfer_s = transfer_s(x, e, v, &cloud_rollback);
    v->handover = handover;
    if (handover) {
        ah_sim_handed_over(v);
        cloud_rollback = false;
    }
    /* state from the cloud: back to the periodic checkpoint; all from the disks but not saved at
     * the notice: back to the newest state on the disks */
    /* a lost node's pieces from a peer's memory: back to the state it holds */
    const progress_t back_to = cloud_rollback                   ? x->at_ckpt
                               : v->bytes[AH_TIER_MEMORY] > 0 ? x->at_mem
                               : unsaved                        ? x->at_disk
                                                                : x->now;
    v->tokens_lost = x->now.tokens - back_to.tokens;
    r->tokens_lost += v->tokens_lost;
    x->now = back_to;
    /* nothing newer than the state resumed from is on the disks or in memory any more */
    if (x->at_disk.tokens > x->now.tokens) x->at_disk = x->now;
    if (x->at_mem.tokens > x->now.tokens) x->at_mem = x->now;
    r->bytes_local += v->bytes[AH_TIER_LOCAL];
    r->bytes_peer += v->bytes[AH_TIER_PEER];
    r->bytes_cloud += v->bytes[AH_TIER_CLOUD];
    r->bytes_memory += v->bytes[AH_TIER_MEMORY];
    v->replan_s = x->o->replan_s >= 0 ? x->o->replan_s : e->plan_s;
    v->restart_s = x->o->restart_s;
    v->first_step_s = e->iteration_s;
    v->seconds = v->wait_s + v->save_s + v->replan_s + v->restart_s + v->transfer_s + v->first_step_s;
    if (x->started) {
        r->replans++;
        mark(x, true);
    }
    x->started = true;
    x->run = e;
    x->phase = AH_PHASE_RECOVER;
    x->recover_end = x->t + v->seconds;
    seg_open(x, AH_PHASE_RECOVER, label, arg);
}

/* (Re)starts on what is up now; stalls when no plan fits. */
static void try_start(run_t *x, const char *label, const char *arg) {
    entry_t *e = plan_for(x);
    if (!e) {
        x->oom = true;
        return;
    }
    if (!e->ok) {
        x->run = NULL;
        x->phase = AH_PHASE_STALLED;
        if (!x->r->note[0]) snprintf(x->r->note, sizeof x->r->note, "stalled at %.2f h: %.200s", x->t / 3600, e->why);
        seg_open(x, AH_PHASE_STALLED, "stalled: no plan fits what is up", "");
        return;
    }
    begin_recovery(x, e, false, label, arg);
}

static void advance(run_t *x, double tn) {
    const double dt = tn - x->t;
    if (dt > 0 && x->phase != AH_PHASE_STALLED && x->run) {
        if (x->phase == AH_PHASE_TRAIN) train(x, dt);
        x->r->usd += x->run->usd_per_s * dt;
        int gpus = 0;
        for (int ty = 0; ty < x->c->n_types; ty++) gpus += x->run->gpus[ty];
        x->r->gpu_hours += gpus * dt / 3600.0;
    }
    if (dt > 0 && x->phase == AH_PHASE_RECOVER) x->r->recovery_s += dt;
    x->t = tn;
}

static void on_internal(run_t *x) {
    if (x->phase == AH_PHASE_RECOVER) { /* the first step after it finished: its tokens count */
        train(x, x->run->iteration_s);
        x->phase = AH_PHASE_TRAIN;
        x->state = x->run;
        x->fresh = false;
        for (int i = 0; i < x->c->n_nodes; i++) x->holds[i] = x->run->uses[i];
        /* the schedule counts training time since the last checkpoint (0 after a rollback to it) */
        x->ckpt_due = fmax(x->t, x->t + x->o->ckpt_every_s - (x->now.train_s - x->at_ckpt.train_s));
        seg_open(x, AH_PHASE_TRAIN, "training", "");
        return;
    }
    /* a checkpoint */
    x->at_ckpt = x->at_disk = x->at_mem = x->now; /* replicated after its commit */
    x->ckpt_due = x->t + x->o->ckpt_every_s;
    if (!x->pending_join) return;
    x->pending_join = false;
    entry_t *e = plan_for(x);
    if (!e) x->oom = true;
    else if (e->ok && e != x->run && e->tokens_per_s > x->run->tokens_per_s)
        begin_recovery(x, e, true, "join at checkpoint", "");
}

/* Applies every change at time changes[*ci].t_s. */
static void on_changes(run_t *x, const ah_sim_avail_t *a, int *ci) {
    const double t = a->changes[*ci].t_s;
    const char *hit_name = NULL;
    bool added = false;
    for (; *ci < a->n_changes && a->changes[*ci].t_s == t; (*ci)++) {
        const ah_sim_change_t *ch = &a->changes[*ci];
        x->up[ch->node] = ch->up;
        if (ch->up) {
            added = true;
            continue;
        }
        bool hit = (x->run && x->phase != AH_PHASE_STALLED && x->run->uses[ch->node]) || x->holds[ch->node];
        x->holds[ch->node] = false;
        if (hit && !hit_name) hit_name = x->c->nodes[ch->node].name;
    }
    if (hit_name && x->phase != AH_PHASE_STALLED) {
        x->r->preemptions++;
        mark(x, false);
        try_start(x, "preempt %s", hit_name);
    } else if (added && x->phase == AH_PHASE_STALLED)
        try_start(x, "nodes up", "");
    else if (added)
        x->pending_join = true;
}

void ah_sim_result_free(ah_sim_result_t *r) {
    if (!r) return;
    for (int i = 0; i < r->n_segs; i++) free(r->segs[i].gpus);
    free(r->segs);
    free(r->markers);
    free(r->recs);
    memset(r, 0, sizeof *r);
}

ah_status_t ah_sim_run(const ah_model_t *model, const ah_sim_avail_t *a, const ah_sim_opts_t *o,
                       ah_policy_t policy, ah_sim_result_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (o->ckpt_every_s <= 0 || o->restart_s < 0 || o->on_demand_factor <= 0 || o->disk_gb_s <= 0 || o->grace_s < 0 ||
        o->replica_memory_gb < 0 || o->snapshot_gb_s <= 0)
        return ah_error_set(err, AH_ERR_USAGE,
                            "simulate: --ckpt-every-s %g must be > 0, --restart-s %g >= 0, --on-demand-factor %g > 0, "
                            "--disk-gb-s %g > 0, --grace-s %g >= 0, --replica-memory-gb %g >= 0, --snapshot-gb-s %g > 0",
                            o->ckpt_every_s, o->restart_s, o->on_demand_factor, o->disk_gb_s, o->grace_s,
                            o->replica_memory_gb, o->snapshot_gb_s);
    ah_status_t hs = ah_sim_check_horizon(a, o, err);
    if (hs != AH_OK) return hs;
    const double t_start = ah_now_s();
    const ah_cluster_t *c = a->cluster;
    run_t x = {.model = model, .c = c, .o = o, .pol = policy, .r = out, .fresh = true};
    out->policy = policy;
    x.up = malloc(sizeof(bool) * (size_t)(c->n_nodes + 1));
    x.holds = calloc((size_t)c->n_nodes + 1, sizeof(bool));
    if (!x.up || !x.holds) x.oom = true;
    else memcpy(x.up, a->up0, sizeof(bool) * (size_t)c->n_nodes);
    const double H = ah_sim_horizon_s(a, o);
    const bool replay = policy != AH_POLICY_ON_DEMAND;
    int ci = 0;
    x.phase = AH_PHASE_STALLED;
    if (!x.oom) try_start(&x, "start", "");
    while (!x.oom && x.t < H) {
        const double t_change = replay && ci < a->n_changes ? a->changes[ci].t_s : INFINITY;
        const double t_int = x.phase == AH_PHASE_RECOVER ? x.recover_end
                             : x.phase == AH_PHASE_TRAIN ? x.ckpt_due
                                                         : INFINITY;
        const double tn = fmin(fmin(t_change, t_int), H);
        advance(&x, tn);
        if (tn >= H) break;
        if (t_int <= t_change) on_internal(&x);
        else on_changes(&x, a, &ci);
    }
    if (!x.oom) {
        seg_open(&x, x.phase, "end", ""); /* closes the last segment at H */
        if (out->n_segs > 0) {            /* drop the zero-length "end" marker segment */
            free(out->segs[out->n_segs - 1].gpus);
            out->n_segs--;
        }
    }
    out->tokens = x.now.tokens;
    out->wall_s = H;
    for (int i = 0; i < x.n_cache; i++) entry_free(x.cache[i]);
    free(x.cache);
    free(x.up);
    free(x.holds);
    out->sim_wall_s = ah_now_s() - t_start;
    if (x.oom) {
        ah_sim_result_free(out);
        return ah_error_set(err, AH_ERR_INTERNAL, "simulate: out of host memory during the %s replay",
                            ah_policy_name(policy));
    }
    return AH_OK;
}
