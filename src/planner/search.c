/* The planner's driver: for every TP degree t and micro-batch size m it builds the stage table
 * (search_pipe.c) and runs the exact search (search_exact.c) or, on large clusters, the template
 * search (search_template.c); candidates come back through ah_search_offer, which keeps the best
 * under the objective. The winner is built into a plan and scored with ah_evaluate — the reported
 * prediction is evaluate's, and the search's own value must agree with it (tests check 1e-12).
 * The three baselines run first: their pipelines are candidates, and a baseline's own plan is
 * emitted when nothing scored beats it, so the plan is never slower than a baseline. The lower
 * bound that orders and prunes the (t, m) pairs is in search_bound.c; candidates (ah_cand_t:
 * grown, scored, built into a plan) in search_cand.c; the state that keeps the best of them, which
 * every search offers to, in search_state.c. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"
#include "planner/search_state.h"

#include "core/names.h"
#include "core/str.h"
#include "core/timing.h"
#include "cost/profile.h"

#define GIB 1073741824.0

/* ---- inputs ---- */

void ah_planner_opts_default(ah_planner_opts_t *o) {
    memset(o, 0, sizeof *o);
    o->train.global_batch = 512;
    o->train.seq_len = 2048;
    o->train.micro_batch = 0;
    o->train.precision = AH_PREC_BF16;
    o->objective = AH_OBJECTIVE_TIME;
    o->exact_max_groups = 8;
    o->max_auto_mb = 8;
}

ah_status_t ah_planner_check_inputs(const ah_model_t *m, const ah_cluster_t *c, const ah_planner_opts_t *o,
                                    ah_error_t *err) {
    ah_status_t st = ah_model_validate(m, "model", err);
    if (st == AH_OK && o->profile) st = ah_profile_check(o->profile, m, c, err);
    if (st != AH_OK) return st;
    if (ah_cluster_gpu_count(c) < 1)
        return ah_error_set(err, AH_ERR_INVALID,
                            "the cluster has no GPUs (%d nodes, 0 devices); add nodes with \"count\" >= 1",
                            c->n_nodes);
    if ((st = ah_planner_require_prices(c, o, "the cluster", err)) != AH_OK) return st; /* spec/cluster.h "Prices" */
    const ah_schedule_t asked = o->schedule == AH_SCHEDULE_ONLY_INTERLEAVED    ? AH_SCHED_INTERLEAVED
                                : o->schedule == AH_SCHEDULE_ONLY_ZERO_BUBBLE ? AH_SCHED_ZERO_BUBBLE
                                                                              : AH_SCHED_1F1B;
    if (o->schedule_trainable_only && !ah_schedule_runtime_runs(asked))
        return ah_error_set(err, AH_ERR_INVALID,
                            "--schedule %s: the runtime does not run that schedule yet (issue 35), so a plan made to "
                            "train cannot use it; use --schedule auto or 1f1b (autohet plan prices it)",
                            ah_schedule_name(asked));
    const ah_train_t *tr = &o->train;
    int runs = 0;
    for (int i = 0; i < c->n_nodes; i++) runs += ah_node_groups(c, i, 1, tr->precision);
    if (runs == 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "no GPU type of the cluster runs %s: none gives tflops.%s; give that rate for the types "
                            "that run it, or plan another precision (--precision)",
                            ah_precision_name(tr->precision), ah_precision_name(tr->precision));
    return ah_planner_check_train(m, o, err);
}

ah_status_t ah_planner_check_train(const ah_model_t *m, const ah_planner_opts_t *o, ah_error_t *err) {
    const ah_train_t *tr = &o->train;
    ah_status_t st;
    if (tr->global_batch < 1 || tr->seq_len < 1 || tr->micro_batch < 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "training settings: global batch %lld, seq len %lld, micro-batch %lld; "
                            "all must be at least 1 (micro-batch 0 means auto)",
                            (long long)tr->global_batch, (long long)tr->seq_len, (long long)tr->micro_batch);
    if (tr->seq_len > m->max_pos)
        return ah_error_set(err, AH_ERR_INVALID,
                            "--seq-len %lld is longer than model %s's context of %lld tokens; use at most %lld",
                            (long long)tr->seq_len, m->name, (long long)m->max_pos, (long long)m->max_pos);
    st = ah_model_check_window(m, tr->seq_len, "--seq-len", err);
    if (st != AH_OK) return st;
    if (tr->micro_batch > 0 && tr->global_batch % tr->micro_batch != 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "--global-batch %lld is not divisible by --micro-batch %lld; pick a "
                            "micro-batch that divides it (or let the planner pick one)",
                            (long long)tr->global_batch, (long long)tr->micro_batch);
    if (m->n_layer > 4096)
        return ah_error_set(err, AH_ERR_INVALID, "model %s has %lld layers; the planner handles up to 4096",
                            m->name, (long long)m->n_layer);
    ah_train_t largest = *tr; /* the plan's own [train] rule, at the largest micro-batch tried */
    if (largest.micro_batch == 0) largest.micro_batch = o->max_auto_mb > 0 ? o->max_auto_mb : 1;
    return ah_plan_check_train(m, &largest, err);
}

/* TP degrees the model splits into and some node can hold. */
static int tp_candidates(const ah_model_t *m, const ah_cluster_t *c, int *out) {
    int n = 0, biggest = 0;
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].count > biggest) biggest = c->nodes[i].count;
    for (int t = 1; t <= AH_MAX_TP && t <= biggest; t++) {
        ah_error_t e;
        if (ah_model_check_tp(m, t, &e) == AH_OK) out[n++] = t;
    }
    return n;
}

/* Whether the profile measured TP degree t at tr's micro-batch for every GPU type it measured at
 * all (at tr's sequence length and precision). Types it never measured are timed by the roofline
 * under every setting alike, so they do not count. */
static bool profile_covers(const ah_profile_t *p, const ah_cluster_t *c, const ah_train_t *tr, int t) {
    for (int ti = 0; ti < c->n_types; ti++) {
        const char *name = c->types[ti].name;
        bool measured = false;
        for (int i = 0; i < ah_profile_count(p) && !measured; i++) {
            const ah_profile_entry_t *e = ah_profile_get(p, i);
            measured = strcmp(e->gpu, name) == 0 && e->seq_len == tr->seq_len && e->precision == tr->precision;
        }
        if (measured && !ah_profile_find(p, name, t, tr->micro_batch, tr->seq_len, tr->precision)) return false;
    }
    return true;
}

static int mb_candidates(const ah_planner_opts_t *o, int64_t *out, int cap) {
    if (o->train.micro_batch > 0) {
        out[0] = o->train.micro_batch;
        return 1;
    }
    int64_t top = o->max_auto_mb > 0 ? o->max_auto_mb : 8;
    int n = 0;
    for (int64_t m = 1; m <= top && m <= o->train.global_batch && n < cap; m++)
        if (o->train.global_batch % m == 0) out[n++] = m;
    return n;
}

/* ---- nothing fits: the closest candidate ---- */

typedef struct {
    bool have;
    double short_bytes;
    int t;
    int64_t m;
    int type, stage, S;
    int node, device; /* the worst stage's first device */
    int64_t capacity; /* its bytes */
    bool recompute_helps; /* the closest candidate already uses recomputation everywhere it helps */
} closest_t;

/* One pipeline over the groups with the most memory (largest first: early stages hold more
 * activations), at most L stages, every stage's recomputation chosen to save memory: the
 * smallest over layer splits of the largest shortfall, by bisection on the shortfall. */
static void closest_for(const ah_sctx_t *x, closest_t *best) {
    const ah_cluster_t *c = x->cluster;
    int S = 0, ty[AH_MAX_STAGES], node[AH_MAX_STAGES], dev[AH_MAX_STAGES];
    /* types by capacity, largest first; groups of each */
    int order[64], no = 0;
    for (int k = 0; k < x->n_types && no < 64; k++) order[no++] = k;
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0 && x->capacity[order[j]] > x->capacity[order[j - 1]]; j--) {
            int tmp = order[j];
            order[j] = order[j - 1];
            order[j - 1] = tmp;
        }
    for (int k = 0; k < no; k++)
        for (int i = 0; i < c->n_nodes; i++)
            if (c->nodes[i].type == order[k])
                for (int g = 0, G = ah_node_groups(c, i, x->t, x->train.precision); g < G && S < x->L && S < AH_MAX_STAGES;
                     g++) {
                    node[S] = i;
                    dev[S] = g * x->t;
                    ty[S++] = order[k];
                }
    if (S == 0) return;
    double lo = 0, hi = 0;
    for (int s = 0; s < S; s++) { /* everything on one stage bounds the shortfall */
        size_t i = ah_sctx_index(x, ty[s], ah_stage_kind(s, S), x->L, 1);
        double need = (double)ah_stage_memory_bytes(&x->sc[i], ah_inflight(S, 0, x->N));
        if (need > hi) hi = need;
    }
    int worst_stage = 0;
    for (int it = 0; it < 60; it++) {
        double mid = (lo + hi) / 2, total = 0;
        bool ok = true;
        for (int s = 0; s < S && ok; s++) {
            const int kind = ah_stage_kind(s, S);
            const int64_t inflight = ah_inflight(S, s, x->N);
            int u = 0;
            while (u < x->L) {
                size_t i0 = ah_sctx_index(x, ty[s], kind, u + 1, 0), i1 = ah_sctx_index(x, ty[s], kind, u + 1, 1);
                double need = fmin((double)ah_stage_memory_bytes(&x->sc[i0], inflight),
                                   (double)ah_stage_memory_bytes(&x->sc[i1], inflight));
                if (need > (double)x->capacity[ty[s]] + mid) break;
                u++;
            }
            if (u == 0) {
                ok = false;
                worst_stage = s;
            }
            total += u;
        }
        if (ok && total >= x->L) hi = mid;
        else lo = mid;
    }
    /* the stage that is short at the bound: the one with the least room left */
    double room_min = INFINITY;
    for (int s = 0; s < S; s++) {
        size_t i = ah_sctx_index(x, ty[s], ah_stage_kind(s, S), 1, 1);
        double room = (double)x->capacity[ty[s]] - (double)ah_stage_memory_bytes(&x->sc[i], ah_inflight(S, s, x->N));
        if (room < room_min) {
            room_min = room;
            worst_stage = s;
        }
    }
    if (!best->have || hi < best->short_bytes) {
        best->have = true;
        best->short_bytes = hi;
        best->t = x->t;
        best->m = x->train.micro_batch;
        best->type = ty[worst_stage];
        best->stage = worst_stage;
        best->node = node[worst_stage];
        best->device = dev[worst_stage];
        best->capacity = x->capacity[ty[worst_stage]];
        best->S = S;
    }
}

static ah_status_t infeasible_error(const ah_model_t *m, const ah_cluster_t *c, const closest_t *cl,
                                    ah_error_t *err) {
    if (!cl->have)
        return ah_error_set(err, AH_ERR_INFEASIBLE,
                            "model %s fits nowhere on this cluster: no node can form a TP group the "
                            "model splits into; add nodes with more GPUs",
                            m->name);
    const ah_gpu_type_t *g = &c->types[cl->type];
    const int64_t short_bytes = (int64_t)ceil(cl->short_bytes), capacity = cl->capacity;
    const double more = ceil(cl->short_bytes * cl->S / (g->memory_gib * GIB));
    return ah_error_set(
        err, AH_ERR_INFEASIBLE,
        "model %s does not fit on this cluster. Closest candidate: TP degree %d, micro-batch %lld, "
        "one pipeline of %d stage%s over the largest-memory groups with recomputation where it "
        "saves memory, layers split to minimise the shortfall: its stage %d, on %s:%d (%s), needs %lld bytes "
        "of its %lld: short by %lld bytes (%.2f GiB), and no stage is short by more. To fit: add "
        "GPUs (about %.0f more %s-sized TP groups of %d), use a smaller --micro-batch or --seq-len, or a GPU "
        "type with more memory",
        m->name, cl->t, (long long)cl->m, cl->S, cl->S == 1 ? "" : "s", cl->stage, c->nodes[cl->node].name,
        cl->device, g->name, (long long)(capacity + short_bytes), (long long)capacity, (long long)short_bytes,
        cl->short_bytes / GIB, more > 0 ? more : 1, g->name, cl->t);
}

/* ---- the driver ---- */

void ah_plan_result_free(ah_plan_result_t *r) {
    if (!r) return;
    for (int k = 0; r->baselines && k < AH_BASELINE_COUNT; k++) ah_plan_result_free(&r->baselines[k].r);
    free(r->baselines);
    ah_plan_free(&r->plan);
    ah_eval_free(&r->eval);
    memset(r, 0, sizeof *r);
}

/* Whether a baseline's plan may be a candidate: with a profile that restricts the search to the
 * settings it measured (profiled_only), only a baseline at such a setting (a setting timed by the
 * roofline is not comparable with a measured one); and not megatron-best's plan with context
 * parallelism (baseline_cp.c): this search plans whole sequences, the CP searches weigh CP
 * (cp_choice.c). Either is still reported as a baseline. */
static bool baseline_comparable(const ah_cluster_t *cluster, const ah_planner_opts_t *o, bool profiled_only,
                                const ah_plan_t *bp) {
    for (int i = 0; i < bp->n_pipelines; i++)
        if (ah_pipeline_cp(&bp->pipelines[i]) > 1) return false;
    return !profiled_only || profile_covers(o->profile, cluster, &bp->train, bp->tp);
}

/* The baselines' plans as candidates: runs each baseline into out->baselines, and offers its
 * pipelines (as node sequences) to the search, which scores them with its own layer, recompute and
 * micro-batch split. A baseline without a plan only leaves its message. */
static ah_status_t offer_baselines(const ah_model_t *model, const ah_cluster_t *cluster,
                                   const ah_planner_opts_t *o, bool profiled_only, ah_search_t *s,
                                   ah_plan_result_t *out, ah_error_t *err) {
    out->baselines = calloc(AH_BASELINE_COUNT, sizeof *out->baselines);
    if (!out->baselines) return ah_error_set(err, AH_ERR_OOM, "out of host memory for the baselines");
    ah_status_t st = AH_OK;
    for (int k = 0; k < AH_BASELINE_COUNT && st == AH_OK; k++) {
        ah_baseline_out_t *b = &out->baselines[k];
        b->ok = ah_baseline_run(model, cluster, o, (ah_baseline_t)k, &b->r, &b->err) == AH_OK;
        if (!b->ok) {
            if (b->err.code == AH_ERR_OOM) st = ah_error_set(err, AH_ERR_OOM, "%s", b->err.msg);
            continue;
        }
        const ah_plan_t *bp = &b->r.plan;
        if (!baseline_comparable(cluster, o, profiled_only, bp)) continue;
        ah_sctx_t x;
        st = ah_sctx_init(&x, model, cluster, &bp->train, bp->tp, o->profile, err);
        if (st != AH_OK) break;
        x.ring_only = o->search_ring_only;
        ah_cand_t c = {0};
        int nodes[AH_MAX_STAGES];
        bool ok = true;
        for (int i = 0; i < bp->n_pipelines && ok; i++) { /* its devices: an interleaved one's first P stages */
            const int P = ah_pipeline_groups(&bp->pipelines[i]);
            for (int j = 0; j < P; j++) nodes[j] = bp->pipelines[i].stages[j].devices[0].node;
            ok = ah_cand_push(&c, P, nodes);
        }
        const double value = ok ? ah_cand_score(&x, &c) : NAN;
        if (isnan(value)) st = ah_error_set(err, AH_ERR_OOM, "out of host memory scoring the %s baseline's pipelines",
                                            ah_baseline_name((ah_baseline_t)k));
        else ah_search_offer(s, &x, &c, value);
        ah_cand_free(&c);
        ah_sctx_free(&x);
    }
    return st;
}

/* When a baseline's own plan is still better under the objective than the built one (the search
 * re-splits the baselines' pipelines, which can lose on DP sync: it minimises the pipeline part
 * first; and megatron-best may run interleaved), emit a copy of the best such baseline instead.
 * Times are ah_planner_time_s (the overlapped sync unless --no-overlap-grad-sync). */
/* Whether every pipeline of bp runs a schedule o allows (1F1B always; another under --schedule auto
 * or its name, and for a plan to train only one the runtime runs). */
static bool schedules_allowed(const ah_planner_opts_t *o, const ah_plan_t *bp) {
    for (int i = 0; i < bp->n_pipelines; i++) {
        const ah_schedule_t s = bp->pipelines[i].schedule;
        const bool named = (s == AH_SCHED_INTERLEAVED && o->schedule == AH_SCHEDULE_ONLY_INTERLEAVED) ||
                           (s == AH_SCHED_ZERO_BUBBLE && o->schedule == AH_SCHEDULE_ONLY_ZERO_BUBBLE);
        if (s != AH_SCHED_1F1B && (!(named || o->schedule == AH_SCHEDULE_AUTO) ||
                                   (o->schedule_trainable_only && !ah_schedule_runtime_runs(s))))
            return false;
    }
    return true;
}

static ah_status_t keep_baselines(const ah_cluster_t *cluster, const ah_planner_opts_t *o, bool profiled_only,
                                  ah_plan_result_t *out, ah_error_t *err) {
    int pick = -1;
    const double own = ah_planner_time_s(o, &out->eval);
    double best = ah_planner_key(o, &out->plan, &out->eval), best_s = own;
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        const ah_baseline_out_t *b = &out->baselines[k];
        if (!b->ok || !baseline_comparable(cluster, o, profiled_only, &b->r.plan) || !schedules_allowed(o, &b->r.plan))
            continue;
        const double t = ah_planner_time_s(o, &b->r.eval), key = ah_planner_key(o, &b->r.plan, &b->r.eval);
        if (!isfinite(key)) continue; /* it breaks --budget or --min-tokens-per-s */
        if (key < best || (key == best && t < best_s)) { /* equal keys: the faster */
            best = key;
            best_s = t;
            pick = k;
        }
    }
    out->from_baseline = pick;
    if (pick < 0) return AH_OK;
    const ah_plan_result_t *b = &out->baselines[pick].r;
    ah_plan_free(&out->plan);
    ah_eval_free(&out->eval);
    ah_status_t st = ah_plan_copy(&b->plan, &out->plan, err);
    if (st == AH_OK) st = ah_evaluate(&out->plan, o->profile, &out->eval, err);
    if (st != AH_OK) return st;
    out->plan.has_predicted = true;
    out->plan.predicted = out->eval.pred;
    out->search_value_s = out->eval.search_estimate_s;
    ah_result_price(o, out);
    return AH_OK;
}

/* Builds the best candidate into out and scores it with ah_evaluate. */
static ah_status_t finish(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                          ah_search_t *s, ah_plan_result_t *out, ah_error_t *err) {
    ah_status_t st =
        ah_cand_plan(model, cluster, o, s->best_t, s->best_m, &s->best, &out->search_value_s, &out->plan, err);
    if (st != AH_OK) return st;
    st = ah_plan_check(&out->plan, o->profile, err);
    if (st == AH_OK) st = ah_evaluate(&out->plan, o->profile, &out->eval, err);
    if (st != AH_OK) {
        ah_error_prefix(err, "planner: the chosen plan does not check (a bug)");
        err->code = AH_ERR_INTERNAL;
        ah_plan_free(&out->plan);
        return AH_ERR_INTERNAL;
    }
    out->plan.has_predicted = true;
    out->plan.predicted = out->eval.pred;
    out->search_best_s = out->search_value_s;
    ah_result_price(o, out);
    return AH_OK;
}

void ah_planner_left_out(const ah_cluster_t *c, ah_precision_t p, char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const char **names = malloc(sizeof *names * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    for (int k = 0; k < c->n_types && names; k++) {
        if (ah_gpu_runs(&c->types[k], p)) continue;
        int n = 0;
        for (int i = 0; i < c->n_nodes; i++)
            if (c->nodes[i].type == k) names[n++] = c->nodes[i].name;
        if (n == 0) continue;
        ah_str_appendf(&s, "%s%s (%d GPUs on ", s.len ? "; " : "", c->types[k].name, ah_cluster_type_gpus(c, k));
        ah_names_append(&s, names, n, ", ", 8);
        ah_str_appendf(&s, "): no %s rate (tflops.%s), so it cannot run %s", ah_precision_name(p), ah_precision_name(p),
                       ah_precision_name(p));
    }
    free(names);
}

/* (t, m) pairs in increasing order of their lower bound, so that good plans come early and a
 * pair whose bound cannot beat the best plan (time objective) is skipped. */
typedef struct {
    int t;
    int64_t m;
    double lb;
} pair_t;

/* The pairs to search, into pairs (sorted by the search's own bound: 1F1B, the whole sync);
 * *lower_bound: the least bound of them all over the space plans are compared in (ah_planner_space).
 * With a profile, only the (t, m) settings it measured, when it measured any: a setting timed by
 * the roofline is not comparable with a measured one (either may come out faster). */
static bool profiled_only_of(const ah_cluster_t *cluster, const ah_planner_opts_t *opts, const int *tps, int n_tp,
                             const int64_t *mbs, int n_mb) {
    bool profiled_only = false;
    for (int i = 0; i < n_tp && opts->profile && !profiled_only; i++)
        for (int j = 0; j < n_mb && !profiled_only; j++) {
            ah_train_t tr = opts->train;
            tr.micro_batch = mbs[j];
            profiled_only = profile_covers(opts->profile, cluster, &tr, tps[i]);
        }
    return profiled_only;
}

static int order_pairs(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *opts,
                       const int *tps, int n_tp, const int64_t *mbs, int n_mb, pair_t *pairs, double *lower_bound) {
    int n_pairs = 0;
    const bool profiled_only = profiled_only_of(cluster, opts, tps, n_tp, mbs, n_mb);
    for (int i = 0; i < n_tp; i++)
        for (int j = 0; j < n_mb; j++) {
            ah_train_t tr = opts->train;
            tr.micro_batch = mbs[j];
            if (profiled_only && !profile_covers(opts->profile, cluster, &tr, tps[i])) continue;
            /* lb: the search's own; the reported bound: over the space the plans are compared in
             * (schedules, overlap) */
            const ah_bound_space_t space = ah_planner_space(opts);
            double lb;
            const double reported = space.any_schedule || space.overlap
                                        ? ah_planner_lower_bounds(model, cluster, &tr, tps[i], opts->profile, space, &lb)
                                        : (lb = ah_planner_lower_bound(model, cluster, &tr, tps[i], opts->profile));
            if (reported < *lower_bound) *lower_bound = reported;
            if (!isfinite(lb)) continue; /* no group of this size */
            int k = n_pairs++;
            while (k > 0 && pairs[k - 1].lb > lb) {
                pairs[k] = pairs[k - 1];
                k--;
            }
            pairs[k] = (pair_t){tps[i], mbs[j], lb};
        }
    return n_pairs;
}

/* out->template_why (the first setting's) followed by how many of the settings searched were
 * searched in template mode. */
static void note_template_count(ah_plan_result_t *out, int n_template, int n_searched) {
    const size_t len = strlen(out->template_why);
    if (n_template == n_searched)
        snprintf(out->template_why + len, sizeof out->template_why - len, " (template mode for all %d (TP, "
                 "micro-batch) settings searched)", n_searched);
    else
        snprintf(out->template_why + len, sizeof out->template_why - len, " (template mode for %d of the %d (TP, "
                 "micro-batch) settings searched)", n_template, n_searched);
}

ah_status_t ah_planner_run(const ah_model_t *model, const ah_cluster_t *cluster,
                           const ah_planner_opts_t *opts, ah_plan_result_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    const double t0 = ah_now_s();
    ah_status_t st = ah_planner_check_inputs(model, cluster, opts, err);
    if (st != AH_OK) return st;
    ah_planner_left_out(cluster, opts->train.precision, out->left_out, sizeof out->left_out);
    int tps[AH_MAX_TP];
    const int n_tp = tp_candidates(model, cluster, tps);
    if (n_tp == 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "model %s cannot be split over any TP degree that a node of this cluster "
                            "holds (heads %lld, kv heads %lld, d_ff %lld)",
                            model->name, (long long)model->n_head, (long long)model->n_kv_head,
                            (long long)model->d_ff);
    int64_t mbs[64];
    const int n_mb = mb_candidates(opts, mbs, 64);
    ah_search_t s = {0};
    s.o = opts;
    s.cluster = cluster;
    s.tokens_per_iter = (double)opts->train.global_batch * (double)opts->train.seq_len;
    s.fastest = INFINITY;
    int n_by_type = 0;
    if (opts->explain_idle && (s.type_base = malloc(sizeof *s.type_base * (size_t)cluster->n_types))) {
        for (int k = 0; k < cluster->n_types; k++) {
            s.type_base[k] = n_by_type;
            n_by_type += 1 + ah_cluster_type_gpus(cluster, k);
        }
        s.by_type = calloc((size_t)n_by_type, sizeof *s.by_type); /* NULL: no note */
    }
    closest_t closest = {0};
    out->exact = true;
    out->lower_bound_s = INFINITY;
    const int max_groups = opts->exact_max_groups > 0 ? opts->exact_max_groups : 8;
    pair_t pairs[AH_MAX_TP * 64];
    const int n_pairs = order_pairs(model, cluster, opts, tps, n_tp, mbs, n_mb, pairs, &out->lower_bound_s);
    out->from_baseline = -1;
    const bool profiled_only = profiled_only_of(cluster, opts, tps, n_tp, mbs, n_mb);
    st = offer_baselines(model, cluster, opts, profiled_only, &s, out, err);
    int n_template = 0, n_searched = 0;
    /* pipelines of their own CP degrees (cp_choice.c): the bounds price whole sequences, which CP
     * undercuts in memory, so they neither prune nor bound the result */
    const unsigned cp_mask = ah_cp_degrees_allowed(cluster, opts);
    if (cp_mask) out->lower_bound_s = 0;
    for (int i = 0; i < n_pairs && st == AH_OK; i++) {
        if (opts->objective == AH_OBJECTIVE_TIME && s.have && !cp_mask && pairs[i].lb >= s.best_value) break;
        ah_train_t tr = opts->train;
        tr.micro_batch = pairs[i].m;
        ah_sctx_t x;
        st = ah_sctx_init_cp(&x, model, cluster, &tr, pairs[i].t, opts->profile, cp_mask, err);
        if (st != AH_OK) break;
        x.ring_only = opts->search_ring_only;
        bool searched = false;
        char why[200];
        st = ah_search_exact(&s, &x, max_groups, &searched, why, sizeof why, err);
        if (st == AH_OK && !searched) {
            if (out->exact)
                snprintf(out->template_why, sizeof out->template_why, "TP %d, micro-batch %lld: %s", pairs[i].t,
                         (long long)pairs[i].m, why);
            out->exact = false;
            n_template++;
            st = ah_search_exact_subsets(&s, &x, max_groups, err);
            if (st == AH_OK) st = ah_search_template(&s, &x, err);
        }
        n_searched++;
        if (!s.have) closest_for(&x, &closest);
        ah_sctx_free(&x);
    }
    out->candidates = s.candidates;
    if (n_template > 1) note_template_count(out, n_template, n_searched);
    bool replaced = false; /* by the cheapest plan, which meets --budget (search_budget.c) */
    if (st == AH_OK && !s.have && isfinite(s.fastest)) {
        st = ah_search_unmet(model, cluster, opts, out, err);
        replaced = st == AH_OK;
    } else if (st == AH_OK && !s.have) {
        st = infeasible_error(model, cluster, &closest, err);
    }
    if (st == AH_OK && !replaced) st = finish(model, cluster, opts, &s, out, err);
    if (st == AH_OK && !replaced) st = keep_baselines(cluster, opts, profiled_only, out, err);
    /* the egress $/h depends on the time: a candidate within --budget at the search's time can be
     * over it at the built plan's evaluated time; then the cheapest plan, as when none met it */
    if (st == AH_OK && !replaced && ah_search_over_budget(opts, ah_planner_usd_per_hour(opts, &out->plan, &out->eval))) {
        st = ah_search_unmet(model, cluster, opts, out, err);
        replaced = st == AH_OK;
    }
    if (st == AH_OK && !replaced && s.by_type) ah_idle_explain(model, cluster, opts, s.by_type, s.type_base, out);
    if (replaced) out->candidates += s.candidates;
    for (int i = 0; s.by_type && i < n_by_type; i++) ah_cand_free(&s.by_type[i].cand);
    free(s.by_type);
    free(s.type_base);
    ah_cand_free(&s.best);
    out->seconds = ah_now_s() - t0;
    if (st != AH_OK) ah_plan_result_free(out);
    return st;
}
