/* The sharded optimizer in the planner (planner.h ah_planner_opts_t.shard). Two ways to a sharded
 * plan, the better kept:
 *  - the plan the unsharded search chose, each data-parallel group of two or more members
 *    (plan.h "optimizer_shards") split evenly or in proportion to each member's free memory
 *    (sharding only lowers a device's memory: it still fits);
 *  - searches that assume every device keeps 1/n of its AdamW state (ah_train_t.opt_shard_over,
 *    n = 2, 3, 4, 6, 8 ... up to the cluster's GPUs), whose plans may need fewer stages or fit
 *    where nothing fits unsharded; each such plan is then sharded for real and kept only when
 *    its exact evaluation fits (a plan with fewer replicas than n does not);
 *  - under --cp auto, where neither those nor the CP searches fit anything (a long sequence of a
 *    large model): the same searches at CP degree 2, 4, 8 (sharded_cp), the optimizer groups then
 *    holding every replica's CP ranks, as Megatron-Core's distributed optimizer over DP x CP.
 * Guarantee: the plan is never slower than the unsharded search's (auto), and fits; it is the
 * best of those candidates, not an optimum over every sharded plan. */
#define AH_PLANNER_INTERNAL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "planner/planner.h"

#define TRY(call)                                   \
    do {                                            \
        ah_status_t s_ = (call);                    \
        if (s_ != AH_OK) return s_;                 \
    } while (0)

/* Free memory per device (plan order) of the unsharded plan once it holds no optimizer state of
 * its groups: capacity - (memory - opt_bytes x the elements of the groups it is a member of). */
static double headroom(const ah_plan_t *p, int rank, void *ctx) {
    (void)p;
    return ((const double *)ctx)[rank];
}

static ah_status_t headroom_all(const ah_eval_t *e, const ah_plan_t *even, double *out, ah_error_t *err) {
    int64_t *held = malloc(2 * (size_t)e->n_devices * sizeof *held);
    if (!held) return ah_error_set(err, AH_ERR_OOM, "out of host memory for the shares by memory");
    const ah_status_t s = ah_opt_elems_all(even, held, held + e->n_devices, err);
    const int64_t opt = ah_optimizer_state_bytes(even->train.precision);
    for (int r = 0; s == AH_OK && r < e->n_devices; r++) {
        const double f = (double)e->devices[r].capacity_bytes - (double)(e->devices[r].memory_bytes - held[r] * opt);
        out[r] = f > 0 ? f : 0;
    }
    free(held);
    return s;
}

/* Drops p's sharded groups whose members are all on one node. */
static void keep_spread(ah_plan_t *p) {
    int kept = 0;
    for (int k = 0; k < p->n_opt_groups; k++)
        if (ah_opt_group_one_node(p, &p->opt_groups[k]) < 0) p->opt_groups[kept++] = p->opt_groups[k];
        else free(p->opt_groups[k].shares);
    p->n_opt_groups = kept;
}

/* Per rank of like (its device order), how large a part its groups gave it: the mean over its
 * groups of its elements x members / the group's elements (1 for even shares). */
static double share_weight(const ah_plan_t *p, int rank, void *ctx) {
    (void)p;
    return ((const double *)ctx)[rank];
}

/* Whether p's pipelines hold the same stages (blocks) as like's. */
static bool same_stages(const ah_plan_t *p, const ah_plan_t *like) {
    bool same = p->n_pipelines == like->n_pipelines;
    for (int i = 0; same && i < p->n_pipelines; i++) {
        const ah_pipeline_t *a = &p->pipelines[i], *b = &like->pipelines[i];
        same = a->n_stages == b->n_stages;
        for (int s = 0; same && s < a->n_stages; s++)
            same = a->stages[s].first == b->stages[s].first && a->stages[s].last == b->stages[s].last;
    }
    return same;
}

ah_status_t ah_planner_reshard_like(ah_plan_t *p, const ah_plan_t *like, bool spread_only, ah_error_t *err) {
    if (same_stages(p, like)) return ah_plan_copy_shards(like, p, err); /* like's own */
    const int n = ah_plan_device_count(like), n_nodes = like->cluster.n_nodes;
    double *w = calloc(2 * (size_t)n, sizeof *w); /* then the groups counted per rank */
    int *node_base = malloc(((size_t)n_nodes + 1) * sizeof *node_base), *rank_at = NULL;
    if (node_base) node_base[0] = 0;
    for (int k = 0; node_base && k < n_nodes; k++) node_base[k + 1] = node_base[k] + like->cluster.nodes[k].count;
    if (node_base) rank_at = malloc(((size_t)node_base[n_nodes] + 1) * sizeof *rank_at);
    ah_status_t s = w && rank_at ? AH_OK : ah_error_set(err, AH_ERR_OOM, "out of host memory redrawing the optimizer shards");
    for (int r = 0; s == AH_OK && r < n; r++) {
        const ah_device_ref_t *d = ah_plan_rank_device(like, r);
        rank_at[node_base[d->node] + d->index] = r;
    }
    for (int k = 0; s == AH_OK && k < like->n_opt_groups; k++) {
        const ah_opt_group_t *g = &like->opt_groups[k];
        const double elems = (double)ah_opt_group_elems(like, g);
        for (int i = 0; i < g->n_shares && elems > 0; i++) {
            const int r = rank_at[node_base[g->shares[i].dev.node] + g->shares[i].dev.index];
            w[r] += (double)(g->shares[i].end - g->shares[i].begin) * g->n_shares / elems;
            w[n + r] += 1;
        }
    }
    for (int r = 0; r < n && s == AH_OK; r++) w[r] = w[n + r] > 0 ? w[r] / w[n + r] : 0;
    if (s == AH_OK) s = ah_plan_shard_all(p, share_weight, w, err);
    if (s == AH_OK && spread_only) keep_spread(p);
    free(w);
    free(node_base);
    free(rank_at);
    return s;
}

/* out = p with shares (weight NULL: even; spread_only: over two nodes at least), evaluated. */
static ah_status_t shard_one(const ah_plan_t *p, const ah_profile_t *profile, bool spread_only,
                             double (*weight)(const ah_plan_t *, int, void *), void *ctx, ah_plan_t *out,
                             ah_eval_t *e, ah_error_t *err) {
    ah_status_t s = ah_plan_copy(p, out, err);
    if (s == AH_OK) s = ah_plan_shard_all(out, weight, ctx, err);
    if (s == AH_OK && spread_only) keep_spread(out);
    if (s == AH_OK) s = ah_plan_validate(out, err);
    if (s == AH_OK) s = ah_evaluate(out, profile, e, err);
    else ah_plan_free(out);
    return s;
}

/* r's plan sharded (o->shard's way; auto: the faster of even and memory) replaces r's plan and
 * evaluation when it fits and, in auto mode unless `must`, is faster; r->eval is the plan's
 * unsharded evaluation. *taken says whether it did. */
static ah_status_t shard_result(ah_plan_result_t *r, const ah_planner_opts_t *o, bool must, bool *taken, ah_error_t *err) {
    *taken = false;
    ah_plan_t even, mem;
    ah_eval_t e_even, e_mem;
    TRY(shard_one(&r->plan, o->profile, o->shard_spread_only, NULL, NULL, &even, &e_even, err));
    if (even.n_opt_groups == 0) { /* one pipeline, or no group over two nodes: nothing to shard */
        ah_eval_free(&e_even);
        ah_plan_free(&even);
        return AH_OK;
    }
    double *room = malloc((size_t)r->eval.n_devices * sizeof *room);
    ah_status_t s = room ? headroom_all(&r->eval, &even, room, err)
                         : ah_error_set(err, AH_ERR_OOM, "out of host memory for the shares by memory");
    if (s == AH_OK) s = shard_one(&r->plan, o->profile, o->shard_spread_only, headroom, room, &mem, &e_mem, err);
    free(room);
    if (s != AH_OK) {
        ah_eval_free(&e_even);
        ah_plan_free(&even);
        return s;
    }
    /* even, memory, or the faster of the two that fits */
    const bool take_mem = o->shard == AH_SHARD_MEMORY ||
                          (o->shard != AH_SHARD_EVEN && e_mem.feasible &&
                           (!e_even.feasible || e_mem.pred.iteration_s < e_even.pred.iteration_s));
    ah_plan_t *pick = take_mem ? &mem : &even;
    ah_eval_t *pick_e = take_mem ? &e_mem : &e_even;
    *taken = pick_e->feasible &&
             (must || o->shard != AH_SHARD_AUTO || pick_e->pred.iteration_s < r->eval.pred.iteration_s);
    if (*taken) {
        ah_plan_free(&r->plan);
        ah_eval_free(&r->eval);
        r->plan = *pick;
        r->eval = *pick_e;
        r->plan.has_predicted = true;
        r->plan.predicted = r->eval.pred;
        r->lower_bound_s = 0; /* the bound prices the optimizer step unsharded: none is claimed */
        r->idle_why[0] = 0;   /* its comparisons were with the plan before sharding */
    }
    if (!*taken || take_mem) ah_plan_free(&even), ah_eval_free(&e_even);
    if (!*taken || !take_mem) ah_plan_free(&mem), ah_eval_free(&e_mem);
    return AH_OK;
}

/* The searches under the sharding assumption (ah_train_t.opt_shard_over): AdamW state split n
 * ways for these n, up to the cluster's GPUs. */
static const int64_t SHARD_OVER[] = {2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};

/* One search assuming the optimizer split `over` ways, its plan sharded for real; true (r filled)
 * when that plan fits. cp > 1: the search at that CP degree (ah_planner_run_cp, --cp cp), whose
 * optimizer groups hold every replica's CP ranks (Megatron-Core's distributed optimizer over
 * DP x CP). */
static bool search_sharded(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                           bool auto_half, int cp, int64_t over, ah_plan_result_t *r) {
    ah_planner_opts_t o2 = *o;
    o2.shard = o->shard == AH_SHARD_NONE ? AH_SHARD_AUTO : o->shard;
    o2.train.opt_shard_over = over;
    o2.schedule = AH_SCHEDULE_ONLY_1F1B; /* the schedules come last, on the plan kept (ah_planner_choose_schedules) */
    o2.cp = cp;
    ah_error_t e;
    const ah_status_t st = cp > 1 ? ah_planner_run_cp(model, cluster, &o2, auto_half, r, &e)
                                  : (auto_half ? ah_planner_run_auto : ah_planner_run)(model, cluster, &o2, r, &e);
    if (st != AH_OK) return false;
    /* the plan's own pricing: unsharded (then its shares) */
    r->plan.train.opt_shard_over = 0;
    ah_eval_free(&r->eval);
    bool taken = false;
    if (ah_evaluate(&r->plan, o->profile, &r->eval, &e) != AH_OK || shard_result(r, &o2, true, &taken, &e) != AH_OK ||
        !taken) {
        ah_plan_result_free(r);
        return false;
    }
    return true;
}

/* --cp auto where nothing fits, split or sharded alone (a long sequence of a large model): CP c = 2,
 * 4, 8 with the optimizer sharded over c, 2c, 4c ... devices (a CP plan's groups hold c CP ranks a
 * replica), the fastest plan that fits into *out (*have; a search that fails, out of memory too, is
 * skipped, as search_sharded's callers do). */
static void sharded_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                       bool auto_half, ah_plan_result_t *out, bool *have) {
    static const int DEGREES[] = {2, 4, 8};
    const int64_t gpus = ah_cluster_gpu_count(cluster);
    for (size_t d = 0; d < sizeof DEGREES / sizeof *DEGREES; d++) {
        char unfit[160];
        ah_cp_unfit(cluster, o, DEGREES[d], unfit, sizeof unfit);
        for (int64_t over = DEGREES[d]; !unfit[0] && over <= gpus; over *= 2) {
            ah_plan_result_t r;
            if (!search_sharded(model, cluster, o, auto_half, DEGREES[d], over, &r)) continue;
            if (*have && !(r.eval.pred.iteration_s < out->eval.pred.iteration_s)) {
                ah_plan_result_free(&r);
                continue;
            }
            if (*have) ah_plan_result_free(out);
            *out = r;
            *have = true;
            snprintf(out->cp_why, sizeof out->cp_why,
                     "every pipeline splits the sequence %d ways, the optimizer sharded over its CP ranks: %.4f s; "
                     "nothing fits unsplit, nor unsharded", DEGREES[d], ah_planner_time_s(o, &out->eval));
        }
    }
}

/* ah_planner_run_sharded before the schedules are chosen. */
static ah_status_t run_sharded(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                               bool auto_half, ah_plan_result_t *out, ah_error_t *err) {
    const double t0 = ah_now_s();
    ah_status_t s = ah_planner_run_cp(model, cluster, o, auto_half, out, err);
    if (o->shard == AH_SHARD_NONE || (s != AH_OK && s != AH_ERR_INFEASIBLE)) return s;
    bool have = s == AH_OK, taken;
    const ah_error_t unsharded_err = *err;
    if (have) TRY(shard_result(out, o, false, &taken, err));
    const int64_t gpus = ah_cluster_gpu_count(cluster);
    /* the searches assuming sharded state plan unsplit sequences: not under --cp N */
    for (size_t i = 0; o->cp <= 1 && i < sizeof SHARD_OVER / sizeof SHARD_OVER[0] && SHARD_OVER[i] <= gpus; i++) {
        ah_plan_result_t r;
        ah_planner_opts_t o2 = *o;
        if (have) o2.train.precision = out->plan.train.precision;
        if (!search_sharded(model, cluster, &o2, auto_half && !have, 1, SHARD_OVER[i], &r)) continue;
        if (have && r.eval.pred.iteration_s >= out->eval.pred.iteration_s) {
            ah_plan_result_free(&r);
            continue;
        }
        if (have) { /* the baselines as reported are the unsharded search's */
            ah_baseline_out_t *keep = out->baselines;
            out->baselines = r.baselines;
            r.baselines = keep;
            r.from_baseline = -1;
            ah_plan_result_free(out);
        }
        *out = r;
        have = true;
    }
    if (!have && o->cp == 0) sharded_cp(model, cluster, o, auto_half, out, &have);
    if (!have) *err = unsharded_err;
    else out->seconds = ah_now_s() - t0; /* every search, baselines included */
    return have ? AH_OK : AH_ERR_INFEASIBLE;
}

ah_status_t ah_planner_run_sharded(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                   bool auto_half, ah_plan_result_t *out, ah_error_t *err) {
    const double t0 = ah_now_s();
    ah_status_t s = run_sharded(model, cluster, o, auto_half, out, err);
    if (s != AH_OK) return s;
    if ((s = ah_planner_choose_schedules(o, out, err)) == AH_OK && (s = ah_planner_choose_warmup(o, out, err)) == AH_OK)
        s = ah_planner_hide_hops(model, cluster, o, auto_half, out, err);
    if (s != AH_OK) ah_plan_result_free(out);
    if (s == AH_OK) out->seconds = ah_now_s() - t0;
    return s;
}

bool ah_shard_mode_parse(const char *s, ah_shard_mode_t *out) {
    static const char *const names[] = {"none", "even", "memory", "auto"};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = (ah_shard_mode_t)i;
            return true;
        }
    return false;
}
