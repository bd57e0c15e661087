/* autohet plan: the fastest (or cheapest) plan for a model on a cluster, with the reasons: a
 * table of pipelines and stages, the predicted time and its breakdown, the bottleneck, the lower
 * bound and gap, the speedups over the uniform and batch-balanced baselines, and which decisions
 * produce them. Writes the plan (-o), a picture (--svg) and an Open MPI rankfile (--rankfile). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cost/profile.h"
#include "planner/planner.h"

#define GIB 1073741824.0

static const char *VERB = "plan";
static const char ABOUT[] = "Finds the plan with the smallest iteration time (or $ per token) under the cost model:\n"
                            "TP degree, pipelines and their stage order, layers per stage, micro-batches per pipeline,\n"
                            "micro-batch size, recomputation. The baselines' plans are candidates, so it is never slower\n"
                            "than any; reports the speedup (--objective cost: the saving in $ per token) over the uniform\n"
                            "(Megatron-LM), batch-balanced (Whale-like) and megatron-best (best symmetric plan on one GPU\n"
                            "type or all) baselines.";

typedef ah_baseline_out_t baseline_t; /* the planner's run of each baseline */

/* A plan's shape as "why" compares it: ranges over pipelines and stages. */
typedef struct {
    int tp, pipelines, min_s, max_s, min_l, max_l, recompute, stages, used, min_cp, max_cp;
    int64_t mb, min_n, max_n;
    bool mixed; /* some pipeline has stages of two GPU types */
} shape_t;

static shape_t shape_of(const ah_plan_t *p) {
    shape_t h = {.tp = p->tp, .pipelines = p->n_pipelines, .min_s = 1 << 30, .min_l = 1 << 30, .mb = p->train.micro_batch,
                 .min_n = INT64_MAX, .used = ah_plan_device_count(p), .min_cp = 1 << 30};
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        h.min_cp = ah_pipeline_cp(pl) < h.min_cp ? ah_pipeline_cp(pl) : h.min_cp;
        h.max_cp = ah_pipeline_cp(pl) > h.max_cp ? ah_pipeline_cp(pl) : h.max_cp;
        const int S = ah_pipeline_groups(pl); /* its devices: an interleaved one's stages are more */
        h.min_s = S < h.min_s ? S : h.min_s;
        h.max_s = S > h.max_s ? S : h.max_s;
        h.min_n = pl->micro_batches < h.min_n ? pl->micro_batches : h.min_n;
        h.max_n = pl->micro_batches > h.max_n ? pl->micro_batches : h.max_n;
        for (int s = 0; s < pl->n_stages; s++) {
            const int len = pl->stages[s].last - pl->stages[s].first;
            h.min_l = len < h.min_l ? len : h.min_l;
            h.max_l = len > h.max_l ? len : h.max_l;
            h.recompute += pl->stages[s].recompute;
            h.stages++;
            h.mixed |= pl->stages[s].type != pl->stages[0].type;
        }
    }
    return h;
}

/* "a" or "a..b" into buf. */
static const char *range(char *buf, size_t cap, int64_t lo, int64_t hi) {
    if (lo == hi) snprintf(buf, cap, "%lld", (long long)lo);
    else snprintf(buf, cap, "%lld..%lld", (long long)lo, (long long)hi);
    return buf;
}

/* Why the plan differs from a baseline: one JSON string per decision in which they differ (none
 * when they are the same plan shape), or the baseline's error when it has no plan. */
static json_t *why_vs(const ah_plan_t *p, const ah_plan_t *base, const char *base_error) {
    json_t *why = json_array();
    if (!base) {
        json_array_append_new(why, json_sprintf("the baseline has no plan that fits: %s", base_error));
        return why;
    }
    const shape_t a = shape_of(p), b = shape_of(base);
    const int total = ah_cluster_gpu_count(&p->cluster);
    char r1[48], r2[48];
    if (a.tp != b.tp) json_array_append_new(why, json_sprintf("TP %d (baseline %d)", a.tp, b.tp));
    if (a.min_cp != b.min_cp || a.max_cp != b.max_cp)
        json_array_append_new(why, json_sprintf("CP %s (baseline %s)", range(r1, sizeof r1, a.min_cp, a.max_cp),
                                                range(r2, sizeof r2, b.min_cp, b.max_cp)));
    if (a.mb != b.mb)
        json_array_append_new(why, json_sprintf("micro-batch %lld (baseline %lld)", (long long)a.mb, (long long)b.mb));
    if (a.pipelines != b.pipelines || a.min_s != b.min_s || a.max_s != b.max_s)
        json_array_append_new(why, json_sprintf("grouping: %d pipeline%s of %s stage%s (baseline %d of %s)", a.pipelines,
                                                a.pipelines == 1 ? "" : "s", range(r1, sizeof r1, a.min_s, a.max_s),
                                                a.max_s == 1 ? "" : "s", b.pipelines,
                                                range(r2, sizeof r2, b.min_s, b.max_s)));
    if (a.mixed != b.mixed)
        json_array_append_new(why, json_string(a.mixed ? "pipelines mix GPU types (baseline: one type per pipeline)"
                                                       : "one GPU type per pipeline (baseline: pipelines mix types)"));
    if (a.min_l != b.min_l || a.max_l != b.max_l)
        json_array_append_new(why, json_sprintf("layers per stage %s%s (baseline %s)",
                                                range(r1, sizeof r1, a.min_l, a.max_l),
                                                a.min_l != a.max_l ? ", by stage speed and memory" : "",
                                                range(r2, sizeof r2, b.min_l, b.max_l)));
    if (a.min_n != b.min_n || a.max_n != b.max_n)
        json_array_append_new(why, json_sprintf("micro-batches per pipeline %s (baseline %s)",
                                                range(r1, sizeof r1, a.min_n, a.max_n),
                                                range(r2, sizeof r2, b.min_n, b.max_n)));
    if (a.recompute * b.stages != b.recompute * a.stages)
        json_array_append_new(why, json_sprintf("recomputation on %d of %d stages (baseline %d of %d)", a.recompute,
                                                a.stages, b.recompute, b.stages));
    if (a.used != b.used)
        json_array_append_new(why, json_sprintf("%d of %d GPUs used (baseline %d)", a.used, total, b.used));
    return why;
}

/* The "why" object: per baseline, the list of differences; "precision": why --precision auto chose
 * the plan's precision (absent when it was given). */
static json_t *why_json(const ah_plan_result_t *r, const baseline_t *bl, const ah_planner_opts_t *po) {
    const ah_plan_t *p = &r->plan;
    json_t *o = json_object();
    if (r->precision_why[0]) json_object_set_new(o, "precision", json_string(r->precision_why));
    if (r->dp_sync_why[0]) json_object_set_new(o, "dp_sync", json_string(r->dp_sync_why));
    if (r->warmup_why[0]) json_object_set_new(o, "warmup", json_string(r->warmup_why));
    if (r->hops_why[0]) json_object_set_new(o, "hops", json_string(r->hops_why));
    ah_plan_traffic_t t;
    char regions[2048];
    ah_plan_traffic(p, &t);
    if (ah_plan_region_why(p, &t, ah_planner_time_s(po, &r->eval), regions, sizeof regions)[0])
        json_object_set_new(o, "regions", json_string(regions));
    for (int k = 0; k < AH_BASELINE_COUNT; k++)
        json_object_set_new(o, ah_baseline_name((ah_baseline_t)k),
                            why_vs(p, bl[k].ok ? &bl[k].r.plan : NULL, bl[k].err.msg));
    return o;
}

static void print_why(const ah_plan_result_t *r, const baseline_t *bl, const ah_planner_opts_t *o) {
    json_t *why = why_json(r, bl, o);
    if (r->precision_why[0]) printf("why %s: %s\n", ah_precision_name(r->plan.train.precision), r->precision_why);
    if (r->dp_sync_why[0])
        printf("why %s DP sync: %s\n", r->plan.dp_sync == AH_DP_SYNC_HIERARCHICAL ? "hierarchical" : "ring",
               r->dp_sync_why);
    if (r->warmup_why[0]) printf("why extra warm-up: %s\n", r->warmup_why);
    if (r->hops_why[0]) printf("why this plan across regions: %s\n", r->hops_why);
    if (json_string_value(json_object_get(why, "regions")))
        printf("why across regions: %s\n", json_string_value(json_object_get(why, "regions")));
    printf("why: what differs from each baseline\n");
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        const char *name = ah_baseline_name((ah_baseline_t)k);
        const json_t *list = json_object_get(why, name);
        printf("  vs %s:", name);
        if (json_array_size(list) == 0) printf(" the same plan shape (TP, grouping, layer and batch split, "
                                              "recomputation, GPUs used)");
        size_t i;
        const json_t *v;
        json_array_foreach(list, i, v) printf("%s %s", i ? ";" : "", json_string_value(v));
        printf("\n");
    }
    json_decref(why);
}

static void print_table(const ah_plan_t *p, const ah_eval_t *e) {
    const ah_cluster_t *c = &p->cluster;
    printf("%-4s %-5s %-10s %-24s %-10s %5s %5s %-22s\n", "pipe", "stage", "gpu", "devices", "layers", "mb", "rc",
           "memory used / capacity");
    int base = 0; /* the rank of the pipeline's first device */
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++) {
            const ah_stage_t *st = &pl->stages[s];
            char dev[96], layers[32], mem[48];
            const int n = ah_stage_devices(pl, p->tp); /* tp x cp */
            const ah_device_ref_t *d0 = &st->devices[0], *dn = &st->devices[n - 1];
            if (n == 1) snprintf(dev, sizeof dev, "%s:%d", c->nodes[d0->node].name, d0->index);
            else if (dn->node == d0->node) snprintf(dev, sizeof dev, "%s:%d-%d", c->nodes[d0->node].name, d0->index, dn->index);
            else snprintf(dev, sizeof dev, "%s:%d-%s:%d", c->nodes[d0->node].name, d0->index, c->nodes[dn->node].name, dn->index);
            snprintf(layers, sizeof layers, "[%d, %d)", st->first, st->last);
            const ah_device_eval_t *de = &e->devices[base + ah_pipeline_group_of(pl, s) * n];
            snprintf(mem, sizeof mem, "%.2f / %.2f GiB", (double)de->memory_bytes / GIB,
                     (double)de->capacity_bytes / GIB);
            if (s == 0) printf("%-4d ", i);
            else printf("%-4s ", "");
            printf("%-5d %-10s %-24s %-10s ", s, c->types[st->type].name, dev, layers);
            if (s == 0) printf("%5lld ", (long long)pl->micro_batches);
            else printf("%5s ", "");
            printf("%5s %-22s\n", st->recompute ? "yes" : "-", mem);
        }
        base += ah_pipeline_groups(pl) * ah_stage_devices(pl, p->tp);
    }
}

/* ", CP 4" for a baseline whose pipelines split the sequence (megatron-best's one degree), else "",
 * into buf. */
static const char *cp_note(const ah_plan_t *p, char *buf, size_t cap) {
    const int cp = p->n_pipelines ? ah_pipeline_cp(&p->pipelines[0]) : 1;
    if (cp > 1) snprintf(buf, cap, ", CP %d", cp);
    else if (cap > 0) buf[0] = '\0';
    return buf;
}

/* Under the cost objective the plan is compared with each baseline in $ per token (a plan slower
 * than a baseline may be its cheaper one), under the time objective in iteration time. */
static void print_report(const ah_plan_result_t *r, const baseline_t *bl, const char *chosen,
                         const ah_planner_opts_t *o) {
    const bool cost = o->objective == AH_OBJECTIVE_COST;
    const ah_bound_space_t space = ah_planner_space(o);
    const ah_plan_t *p = &r->plan;
    const ah_eval_t *e = &r->eval;
    const ah_breakdown_t *b = &e->pred.breakdown;
    printf("plan for %s on %d GPUs (%s): TP %d, micro-batch %lld, %d pipeline%s, %d GPUs used, %s\n\n",
           p->model.name, ah_cluster_gpu_count(&p->cluster), chosen, p->tp, (long long)p->train.micro_batch,
           p->n_pipelines, p->n_pipelines == 1 ? "" : "s", ah_plan_device_count(p), ah_precision_name(p->train.precision));
    if (r->left_out[0]) printf("left out: %s\n\n", r->left_out);
    if (r->idle_why[0]) printf("idle: %s\n\n", r->idle_why);
    if (r->cp_why[0]) printf("context parallelism: %s\n", r->cp_why);
    if (r->schedule_why[0]) printf("schedules: %s\n", r->schedule_why);
    if (r->untrainable) {
        bool seen[3] = {0};
        for (int i = 0; i < p->n_pipelines; i++)
            seen[p->pipelines[i].schedule] |= !ah_schedule_runtime_runs(p->pipelines[i].schedule);
        printf("schedules: autohet train does not run %s%s%s pipelines yet (issue 35): `autohet run` plans only the "
               "schedules it runs; to train this plan now, plan with --schedule 1f1b\n",
               seen[AH_SCHED_INTERLEAVED] ? "interleaved" : "", seen[1] && seen[2] ? " or " : "",
               seen[AH_SCHED_ZERO_BUBBLE] ? "zero-bubble" : "");
    }
    if (r->schedule_why[0] || r->untrainable || r->cp_why[0]) printf("\n");
    print_table(p, e);
    char price[400];
    const ah_plan_price_t pr = ah_plan_price(p, ah_planner_time_s(o, e));
    printf("\npredicted: %.4f s per iteration, %.0f tokens/s, %s\n", e->pred.iteration_s, e->pred.tokens_per_s,
           ah_plan_price_str(&pr, price, sizeof price));
    printf("%s\n", ah_plan_traffic_str(&pr, price, sizeof price));
    printf("%s\n", ah_plan_ckpt_str(&pr, price, sizeof price));
    char crossings[1024];
    if (ah_plan_crossings_str(p, &pr.traffic, false, crossings, sizeof crossings)[0]) printf("%s\n", crossings);
    printf("with the DP sync overlapped with the backward (train's default): %.4f s per iteration, %.4f s of the "
           "%.4f s sync exposed%s\n", e->iteration_overlap_s, e->dp_sync_exposed_s, b->dp_sync_s,
           o->no_overlap_grad_sync ? " (not what the planner compared: --no-overlap-grad-sync)" : "");
    printf("breakdown: compute %.4f + TP comm %.4f + bubble %.4f + p2p %.4f + DP sync %.4f + optimizer %.4f",
           b->compute_s, b->tp_comm_s, b->bubble_s, b->p2p_s, b->dp_sync_s, b->optimizer_s);
    if (b->ckpt_s > 0) printf(" + checkpoint replication %.4f", b->ckpt_s);
    printf(" s\n");
    const ah_stage_t *bs = &p->pipelines[e->critical_pipeline].stages[e->bottleneck_stage];
    printf("bottleneck: pipeline %d, stage %d (%s, layers [%d, %d))\n", e->critical_pipeline, e->bottleneck_stage,
           p->cluster.types[bs->type].name, bs->first, bs->last);
    if (p->n_opt_groups > 0)
        printf("optimizer: AdamW state sharded over %d data-parallel groups (plan.json optimizer_shards; docs/runtime.md); "
               "no lower bound is claimed (it prices the optimizer unsharded)\n", p->n_opt_groups);
    if (r->lower_bound_s > 0 && cost)
        printf("lower bound on time: %.4f s (compute, bubble, DP sync; docs/planner.md), not on $ per token, which this "
               "plan minimises; search %s\n", r->lower_bound_s,
               r->exact ? "exact (proven optimal)" : "template (not proven optimal)");
    else if (r->lower_bound_s > 0 && !space.any_schedule && !space.overlap)
        printf("lower bound: %.4f s on the search's closed form of the iteration, which is %.4f s for this plan "
               "(the prediction above replays its schedule; compute, bubble, hops, DP sync; docs/planner.md); gap "
               "%.1f%%; search %s\n", r->lower_bound_s, r->search_value_s,
               100.0 * (r->search_value_s / r->lower_bound_s - 1),
               r->exact ? "exact (proven optimal under the closed form)" : "template (not proven optimal)");
    else if (r->lower_bound_s > 0)
        printf("lower bound: %.4f s on every plan's iteration%s%s, which is %.4f s for this plan (compute, bubble, "
               "DP sync; docs/planner.md \"Schedules\"); gap %.1f%%; search %s\n", r->lower_bound_s,
               space.any_schedule ? " under any schedule" : " under 1F1B",
               space.overlap ? " with the DP sync overlapped" : "", ah_planner_time_s(o, e),
               100.0 * (ah_planner_time_s(o, e) / r->lower_bound_s - 1),
               r->exact ? "exact over 1F1B pipeline sets, schedules chosen per pipeline on its plan"
                        : "template (not proven optimal)");
    if (!r->exact) printf("template mode: %s\n", r->template_why);
    if (r->from_baseline >= 0)
        printf("search: nothing it scored beat the %s baseline's own plan, which is the plan\n",
               ah_baseline_name((ah_baseline_t)r->from_baseline));
    if (r->cheapest)
        printf("search: nothing it scored met --budget; the cheapest plan a search for the least $/h found meets it "
               "and is the plan\n");
    printf("planning: %.3f s (baselines included), %lld candidates scored\n\n", r->seconds, (long long)r->candidates);
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        const char *name = ah_baseline_name((ah_baseline_t)k);
        const char *what = cost ? "saving over " : "speedup over";
        char note[32];
        if (bl[k].ok && cost && r->usd_per_mtoken > 0)
            printf("saving over  %-15s %.2fx ($%.4f per million tokens, %.4f s per iteration)\n", name,
                   bl[k].r.usd_per_mtoken / r->usd_per_mtoken, bl[k].r.usd_per_mtoken, ah_planner_time_s(o, &bl[k].r.eval));
        else if (bl[k].ok && cost) /* every GPU it uses is priced $0 */
            printf("saving over  %-15s n/a: the plan costs $0 ($%.4f per million tokens, %.4f s per iteration)\n",
                   name, bl[k].r.usd_per_mtoken, ah_planner_time_s(o, &bl[k].r.eval));
        else if (bl[k].ok)
            printf("speedup over %-15s %.2fx (%.4f s per iteration%s%s)\n", name,
                   ah_planner_time_s(o, &bl[k].r.eval) / ah_planner_time_s(o, e), ah_planner_time_s(o, &bl[k].r.eval),
                   o->no_overlap_grad_sync ? "" : ", both with the DP sync overlapped",
                   cp_note(&bl[k].r.plan, note, sizeof note));
        else
            printf("%s %-15s n/a: %s\n", what, name, bl[k].err.msg);
    }
    print_why(r, bl, o);
}

static int print_json(const ah_plan_result_t *r, const baseline_t *bl, const char *chosen, const ah_planner_opts_t *po) {
    const ah_plan_price_t pr = ah_plan_price(&r->plan, ah_planner_time_s(po, &r->eval));
    json_t *bj = json_object();
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        const ah_plan_result_t *b = &bl[k].r;
        json_t *o = bl[k].ok ? json_pack("{s:f, s:f, s:f}", "iteration_s", b->eval.pred.iteration_s,
                                         "iteration_overlap_s", b->eval.iteration_overlap_s, "speedup",
                                         ah_planner_time_s(po, &b->eval) / ah_planner_time_s(po, &r->eval))
                             : json_pack("{s:n, s:s}", "iteration_s", "error", bl[k].err.msg);
        if (bl[k].ok) { /* its CP degree (megatron-best's, one for all pipelines); $ figures: null where
                         * unpriced, saving null where the plan costs $0 */
            json_object_set_new(o, "cp", json_integer(ah_pipeline_cp(&b->plan.pipelines[0])));
            const ah_plan_price_t bp = ah_plan_price(&b->plan, ah_planner_time_s(po, &b->eval));
            json_object_set_new(o, "usd_per_mtoken", bp.priced ? json_real(bp.usd_per_mtoken) : json_null());
            json_object_set_new(o, "saving", bp.priced && pr.priced && pr.usd_per_mtoken > 0
                                                 ? json_real(bp.usd_per_mtoken / pr.usd_per_mtoken)
                                                 : json_null());
        }
        json_object_set_new(bj, ah_baseline_name((ah_baseline_t)k), o);
    }
    json_t *doc = json_pack("{s:s, s:f, s:f, s:f, s:f, s:b}", "plan_kind", chosen, "iteration_s",
                            r->eval.pred.iteration_s, "tokens_per_s", r->eval.pred.tokens_per_s, "search_value_s",
                            r->search_value_s, "lower_bound_s", r->lower_bound_s, "exact", r->exact);
    ah_plan_price_json(&pr, doc);
    ah_plan_crossings_json(&r->plan, &pr.traffic, doc);
    json_object_set_new(doc, "iteration_overlap_s", json_real(r->eval.iteration_overlap_s));
    json_object_set_new(doc, "schedules", r->schedule_why[0] ? json_string(r->schedule_why) : json_null());
    json_object_set_new(doc, "context_parallel", r->cp_why[0] ? json_string(r->cp_why) : json_null());
    json_object_set_new(doc, "untrainable", json_boolean(r->untrainable));
    json_object_set_new(doc, "planning_s", json_real(r->seconds));
    json_object_set_new(doc, "candidates", json_integer((json_int_t)r->candidates));
    json_object_set_new(doc, "baselines", bj);
    json_object_set_new(doc, "plan", ah_plan_to_json(&r->plan));
    const ah_eval_t *e = &r->eval;
    const ah_stage_t *bs = &r->plan.pipelines[e->critical_pipeline].stages[e->bottleneck_stage];
    json_object_set_new(doc, "template_why", r->exact ? json_null() : json_string(r->template_why));
    json_object_set_new(doc, "left_out", r->left_out[0] ? json_string(r->left_out) : json_null());
    json_object_set_new(doc, "idle", r->idle_why[0] ? json_string(r->idle_why) : json_null());
    json_object_set_new(doc, "from_baseline", r->from_baseline >= 0
                                                  ? json_string(ah_baseline_name((ah_baseline_t)r->from_baseline))
                                                  : json_null());
    json_object_set_new(doc, "cheapest", json_boolean(r->cheapest));
    json_object_set_new(doc, "bottleneck",
                        json_pack("{s:i, s:i, s:s, s:[i,i]}", "pipeline", e->critical_pipeline, "stage",
                                  e->bottleneck_stage, "gpu", r->plan.cluster.types[bs->type].name, "layers",
                                  bs->first, bs->last));
    json_object_set_new(doc, "why", why_json(r, bl, po));
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(doc);
    return rc == 0 ? 0 : 1;
}

/* --baseline: the emitted result is that baseline's (priced by its run), with the planner's
 * search time, lower bound, search mode and notes (the report still compares). */
static ah_plan_result_t *baseline_result(baseline_t *b, const ah_plan_result_t *planned) {
    ah_plan_result_t *emit = &b->r;
    emit->seconds = planned->seconds;
    emit->candidates = planned->candidates;
    emit->lower_bound_s = planned->lower_bound_s;
    emit->exact = planned->exact;
    memcpy(emit->template_why, planned->template_why, sizeof emit->template_why);
    memcpy(emit->left_out, planned->left_out, sizeof emit->left_out);
    memcpy(emit->precision_why, planned->precision_why, sizeof emit->precision_why);
    return emit;
}

/* -o, --svg and --rankfile, each when asked for. */
static ah_status_t write_files(const ah_plan_result_t *emit, const char *out_path, const char *svg_path,
                               const char *rank_path, ah_error_t *err) {
    ah_status_t st = AH_OK;
    if (out_path) st = ah_plan_save(&emit->plan, out_path, err);
    if (st == AH_OK && svg_path) st = ah_plan_svg_write(&emit->plan, &emit->eval, svg_path, err);
    if (st == AH_OK && rank_path) st = ah_plan_rankfile_write(&emit->plan, rank_path, err);
    return st;
}

/* Plans (auto_half: ah_planner_run_auto), runs the baselines at the plan's precision and reports;
 * the exit code. */
static int plan_and_report(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *opts,
                           bool auto_half, const char *baseline_arg, ah_baseline_t chosen_baseline,
                           const char *profile_arg, const char *out_path, const char *svg_path, const char *rank_path,
                           double replica_gb, bool json) {
    ah_error_t err = {0};
    ah_plan_result_t planned;
    if (ah_planner_run_sharded(model, cluster, opts, auto_half, &planned, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    /* the baselines ran inside, at the plan's precision (auto: the winner's) */
    const ah_planner_opts_t *o = opts;
    baseline_t *bl = planned.baselines;
    ah_plan_result_t *emit = &planned;
    const char *chosen = baseline_arg ? ah_baseline_name(chosen_baseline) : "planner";
    int rc = 0;
    if (baseline_arg && !bl[chosen_baseline].ok) rc = ah_cli_fail(VERB, &bl[chosen_baseline].err);
    else if (baseline_arg) emit = baseline_result(&bl[chosen_baseline], &planned);
    if (o->profile) snprintf(emit->plan.predicted_profile, sizeof emit->plan.predicted_profile, "%s", profile_arg);
    /* the snapshots' host memory; the note on unchecked nodes in the text report only (--json is
     * read by programs, which often take stderr with it) */
    if (rc == 0) rc = ah_cli_host_memory(VERB, &emit->plan, replica_gb, !json);
    if (rc == 0 && write_files(emit, out_path, svg_path, rank_path, &err) != AH_OK) rc = ah_cli_fail(VERB, &err);
    if (rc == 0 && o->profile) ah_cli_profile_note(VERB, profile_arg, o->profile, &emit->plan);
    if (rc == 0) ah_cli_precision_note(VERB, &emit->plan);
    if (rc == 0 && json) {
        rc = print_json(emit, bl, chosen, o);
    } else if (rc == 0) {
        print_report(emit, bl, chosen, o);
        if (out_path) printf("\nplan written to %s\n", out_path);
        if (svg_path) printf("picture written to %s\n", svg_path);
        if (rank_path) printf("rankfile written to %s (mpirun --hostfile %s --map-by seq --bind-to none)\n", rank_path, rank_path);
    }
    ah_plan_result_free(&planned);
    return rc;
}

/* --baseline NAME (none: arg NULL) into *b; false after saying why it cannot be (a usage error). */
static bool baseline_flag(const char *arg, const ah_planner_opts_t *o, ah_baseline_t *b) {
    if (!arg) return true;
    if (!ah_baseline_parse(arg, b)) {
        fprintf(stderr, "autohet plan: --baseline: expected uniform, batch-balanced or megatron-best, got \"%s\"\n", arg);
        return false;
    }
    if (o->shard != AH_SHARD_NONE) {
        fprintf(stderr, "autohet plan: --shard-optimizer applies to the planner's plan, not to --baseline's\n");
        return false;
    }
    return true;
}

int ah_cli_plan(int argc, char **argv) {
    const char *model_arg = NULL, *cluster_arg = NULL;
    const char *profile_arg = NULL, *baseline_arg = NULL, *out_path = NULL, *svg_path = NULL, *rank_path = NULL;
    ah_cli_plan_flags_t pf = {0}; /* the shared flags (cli.h): NULL, 0 for the rule's default */
    int64_t global_batch = 512, seq_len = 2048, exact_groups = 8;
    double min_tps = 0, replica_gb = 0;
    int64_t ckpt_every = 0;
    const char *cloud = NULL, *cloud_region = NULL;
    bool json = false, no_overlap = false;
    ah_flag_t flags[] = {
        {"--model", AH_FLAG_STR, &model_arg, "M", "preset name or HF config.json (required)", false},
        {"--cluster", AH_FLAG_STR, &cluster_arg, "C", "cluster JSON or built-in name, e.g. mixed-32 (required)", false},
        ah_cli_shared_flag("--global-batch", &global_batch),
        ah_cli_shared_flag("--seq-len", &seq_len),
        AH_CLI_PLAN_FLAGS(&pf),
        {"--min-tokens-per-s", AH_FLAG_NUM_MIN(0), &min_tps, "X", "only plans at least this fast", false},
        ah_cli_shared_flag("--profile", &profile_arg),
        ah_cli_shared_flag_as("--replica-memory-gb", &replica_gb,
                              "refuse the plan when a node's host_memory_gib cannot hold its asynchronous snapshots plus "
                              "in-memory replicas of at most G GB a host, as train --replica-memory-gb G does, and with "
                              "--ckpt-every count their replication to the partners (default 0: snapshots only; "
                              "docs/checkpoints.md)"),
        ah_cli_shared_flag_as("--ckpt-every", &ckpt_every,
                              "count the checkpoints' traffic, egress and blocking replication of a save every K steps, "
                              "as train --ckpt-every K saves, in the price --objective cost and --budget weigh (default 0: "
                              "not counted, said; docs/cost-model.md \"Checkpoint traffic\")"),
        ah_cli_shared_flag_as("--cloud", &cloud,
                              "with --ckpt-every, count each save's upload to this bucket, as train --cloud uploads "
                              "(the bucket's region: --cloud-region, else AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1)"),
        ah_cli_shared_flag("--cloud-region", &cloud_region),
        ah_cli_shared_flag("--shard-optimizer", &pf.shard),
        ah_cli_shared_flag_as("--no-overlap-grad-sync", &no_overlap,
                              "compare plans with the whole data-parallel gradient sync after the backward, as train "
                              "--no-overlap-grad-sync runs it (default: the part the overlapped sync leaves exposed; "
                              "docs/cost-model.md)"),
        {"--baseline", AH_FLAG_STR, &baseline_arg, "uniform|batch-balanced|megatron-best",
         "emit that baseline's plan instead of the planner's", false},
        {"-o", AH_FLAG_STR, &out_path, "plan.json", "write the plan", false},
        {"--svg", AH_FLAG_STR, &svg_path, "plan.svg", "write a picture of the plan and its 1F1B timeline", false},
        {"--rankfile", AH_FLAG_STR, &rank_path, "F",
         "write F: rank r's host on the r-th host line, its GPU in a comment (mpirun --hostfile F --map-by seq "
         "--bind-to none)", false},
        {"--exact-max-groups", AH_FLAG_INT_IN(1, 4096), &exact_groups, "G",
         "exact search up to G TP groups, templates above (default 8); the exact search also stops past 50000 "
         "distinct pipelines or 20000 pipeline sets, and the report's \"template mode:\" line says which cap "
         "applied", false},
        {"--json", AH_FLAG_BOOL, &json, NULL,
         "print the result as JSON: the report's figures, \"bottleneck\", \"why\" (per baseline, what differs), "
         "\"template_why\", \"baselines\" and \"plan\"", false},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    int rc = 0;
    if (!ah_cli_parse(VERB, "--model M --cluster C [flags]", ABOUT, flags, n_flags, argc, argv, &rc)) return rc;
    if (!model_arg || !cluster_arg) {
        fprintf(stderr, "autohet plan: %s is required (autohet plan --help)\n", !model_arg ? "--model" : "--cluster");
        return 2;
    }
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.explain_idle = true; /* the report's "idle:" line */
    o.train.global_batch = global_batch;
    o.train.seq_len = seq_len;
    o.min_tokens_per_s = min_tps;
    o.exact_max_groups = (int)exact_groups;
    o.no_overlap_grad_sync = no_overlap;
    bool auto_precision = false;
    ah_baseline_t chosen_baseline = AH_BASELINE_UNIFORM;
    if (!ah_cli_plan_flags(VERB, &pf, &o, &auto_precision)) return 2;
    if (!baseline_flag(baseline_arg, &o, &chosen_baseline)) return 2;

    ah_error_t err = {0};
    ah_model_t model;
    ah_cluster_t cluster = {0};
    ah_profile_t *profile = NULL;
    if (ah_model_load(model_arg, &model, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    if (!ah_cli_flag_seen(flags, n_flags, "--seq-len") && ah_model_context(&model) < seq_len)
        o.train.seq_len = ah_model_context(&model);
    if (ah_cluster_open(cluster_arg, &cluster, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    if (ah_planner_require_prices(&cluster, &o, cluster_arg, &err) != AH_OK) { /* spec/cluster.h "Prices" */
        ah_cluster_free(&cluster);
        return ah_cli_fail(VERB, &err);
    }
    if ((rc = ah_cli_ckpt_policy(VERB, &cluster, ckpt_every, replica_gb, cloud, cloud_region, &o.train.ckpt)) != 0) {
        ah_cluster_free(&cluster);
        return rc;
    }
    const bool auto_half = auto_precision && !ah_cli_all_cpu(&cluster);
    if (auto_precision && !auto_half) o.train.precision = AH_PREC_FP32;
    if (profile_arg && ah_profile_load(profile_arg, &profile, &err) != AH_OK) {
        ah_cluster_free(&cluster);
        return ah_cli_fail(VERB, &err);
    }
    o.profile = profile;
    rc = plan_and_report(&model, &cluster, &o, auto_half, baseline_arg, chosen_baseline, profile_arg, out_path, svg_path,
                         rank_path, replica_gb, json);
    ah_profile_free(profile);
    ah_cluster_free(&cluster);
    return rc;
}
