/* Pipelines across regions (planner.h ah_planner_choose_warmup, ah_planner_hide_hops): extra
 * warm-up above each hop that crosses a region boundary (plan/replay.h "Extra warm-up"), and the
 * plan searched with the WAN's hops as if hidden, then hidden. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "plan/evaluate.h"
#include "planner/planner.h"

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)
#define WARMUP_MOST AH_WARMUP_DROP_MOST /* extra micro-batches in flight tried above a hop (all fall at it) */
#define GAIN 0.005    /* what one more must take off the pipeline's time (its activations are kept) */

/* The last stage of pipeline pl above a hop to another region; -1 when none crosses. */
static int region_hop(const ah_plan_t *p, const ah_pipeline_t *pl) {
    int h = -1;
    for (int s = 0; pl->schedule != AH_SCHED_INTERLEAVED && s + 1 < pl->n_stages; s++)
        if (ah_link_between(&p->cluster, pl->stages[s].devices[0].node, pl->stages[s + 1].devices[0].node) ==
            AH_LINK_INTER_REGION)
            h = s;
    return h;
}

static void set_warmup(ah_pipeline_t *pl, int h, int x) {
    for (int s = 0; s < pl->n_stages; s++) pl->stages[s].warmup_extra = s <= h ? x : 0;
}

/* Pipeline i's least time over x = 0 .. WARMUP_MOST more micro-batches above its hop h (the
 * smallest x at that time, the plan fitting), left in the plan; *time_s its time. AH_ERR_OOM only. */
static ah_status_t choose_pipeline(const ah_planner_opts_t *o, ah_plan_t *p, int i, int h, double *time_s,
                                   int *chosen, ah_error_t *err) {
    ah_pipeline_t *pl = &p->pipelines[i];
    double best = INFINITY;
    *chosen = 0;
    for (int x = 0; x <= WARMUP_MOST; x++) {
        set_warmup(pl, h, x);
        ah_eval_t e;
        ah_error_t quiet;
        if (ah_plan_validate(p, &quiet) != AH_OK) break;
        TRY(ah_evaluate(p, o->profile, &e, err));
        const bool fits = e.feasible;
        const double t = e.pipelines[i].time_s;
        ah_eval_free(&e);
        if (!fits) break; /* more in flight only keeps more */
        if (t < best * (1 - GAIN)) best = t, *chosen = x;
        else if (x > 0) break; /* covered: more would only keep more */
    }
    set_warmup(pl, h, *chosen);
    *time_s = best;
    return AH_OK;
}

ah_status_t ah_planner_choose_warmup(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err) {
    ah_plan_t *p = &out->plan;
    out->warmup_why[0] = '\0';
    ah_str_t why = ah_str_fixed(out->warmup_why, sizeof out->warmup_why);
    ah_plan_t q;
    bool any = false;
    for (int i = 0; i < p->n_pipelines && !any; i++) any = region_hop(p, &p->pipelines[i]) >= 0;
    if (!any) return AH_OK;
    TRY(ah_plan_copy(p, &q, err));
    ah_status_t st = AH_OK;
    int said = 0, alike = 0;
    double last[4] = {-1, -1, -1, -1}; /* the last clause's x, h, time, time before */
    for (int i = 0; i < q.n_pipelines && st == AH_OK; i++) {
        const int h = region_hop(&q, &q.pipelines[i]);
        if (h < 0) continue;
        double t;
        int x;
        st = choose_pipeline(o, &q, i, h, &t, &x, err);
        if (st != AH_OK || x == 0) continue;
        const double now[4] = {x, h, t, out->eval.pipelines[i].time_s};
        if (memcmp(now, last, sizeof now) == 0) {
            alike++;
            continue;
        }
        if (alike) ah_str_appendf(&why, " (and %d alike)", alike);
        alike = 0;
        memcpy(last, now, sizeof now);
        if (said++ < 4)
            ah_str_appendf(&why, "%spipeline %d: %d more micro-batch%s in flight on stages 0-%d, above its hop "
                                 "across regions, %.4f s instead of %.4f s",
                           why.len ? "; " : "", i, x, x == 1 ? "" : "es", h, t, now[3]);
    }
    if (alike && said <= 4) ah_str_appendf(&why, " (and %d alike)", alike);
    ah_eval_t e = {0};
    bool take = false;
    if (st == AH_OK && said > 0 && (st = ah_evaluate(&q, o->profile, &e, err)) == AH_OK)
        take = e.feasible && ah_planner_key(o, &q, &e) < ah_planner_key(o, p, &out->eval);
    if (take) {
        if (said > 4) ah_str_appendf(&why, "; and %d more", said - 4);
        ah_result_take(o, out, &q, &e);
        return AH_OK;
    }
    out->warmup_why[0] = '\0';
    if (e.pipelines) ah_eval_free(&e);
    ah_plan_free(&q);
    return st;
}

/* cluster with every link between regions as fast as a zone link, into view. */
static ah_status_t zone_speed_view(const ah_cluster_t *cluster, ah_cluster_t *view, ah_error_t *err) {
    TRY(ah_cluster_copy(cluster, view, err));
    ah_network_t *n = &view->net;
    n->inter_region_gb_s = n->inter_zone_gb_s;
    n->inter_region_latency_us = n->inter_zone_latency_us;
    for (int k = 0; k < n->n_links; k++)
        if (n->links[k].regions) {
            n->links[k].gb_s = n->inter_zone_gb_s;
            n->links[k].latency_us = n->inter_zone_latency_us;
            n->links[k].total_gb_s = 0;
        }
    return AH_OK;
}

/* r's plan moved onto cluster (the same nodes), evaluated there, its DP sync and warm-up chosen
 * there. false when it does not check there (then r is as it was); AH_ERR_OOM in *st. */
static bool rehome(const ah_cluster_t *cluster, const ah_planner_opts_t *o, ah_plan_result_t *r, ah_status_t *st,
                   ah_error_t *err) {
    ah_plan_t q;
    ah_eval_t e;
    ah_error_t quiet;
    if ((*st = ah_plan_copy(&r->plan, &q, err)) != AH_OK) return false;
    ah_cluster_free(&q.cluster);
    if ((*st = ah_cluster_copy(cluster, &q.cluster, err)) != AH_OK || ah_plan_check(&q, o->profile, &quiet) != AH_OK ||
        (*st = ah_evaluate(&q, o->profile, &e, err)) != AH_OK) {
        ah_plan_free(&q);
        return false;
    }
    ah_result_take(o, r, &q, &e);
    if ((*st = ah_planner_choose_dp_sync(o, r, err)) != AH_OK) return false;
    return (*st = ah_planner_choose_warmup(o, r, err)) == AH_OK;
}

ah_status_t ah_planner_hide_hops(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                 bool auto_half, ah_plan_result_t *out, ah_error_t *err) {
    out->hops_why[0] = '\0';
    if (o->keep_wan_hops || ah_cluster_region_count(cluster) < 2) return AH_OK;
    ah_cluster_t view;
    TRY(zone_speed_view(cluster, &view, err));
    ah_planner_opts_t ov = *o;
    ov.keep_wan_hops = true;
    ah_plan_result_t r;
    ah_error_t quiet;
    ah_status_t st = AH_OK;
    const bool planned = ah_planner_run_sharded(model, &view, &ov, auto_half, &r, &quiet) == AH_OK;
    ah_cluster_free(&view);
    if (!planned) return AH_OK;
    const double before = ah_planner_time_s(o, &out->eval);
    if (rehome(cluster, o, &r, &st, err) && r.eval.feasible &&
        ah_planner_key(o, &r.plan, &r.eval) < ah_planner_key(o, &out->plan, &out->eval)) {
        ah_plan_free(&out->plan);
        ah_eval_free(&out->eval);
        out->plan = r.plan;
        out->eval = r.eval;
        r.plan = (ah_plan_t){0};
        r.eval = (ah_eval_t){0};
        out->search_value_s = r.search_value_s;
        memcpy(out->schedule_why, r.schedule_why, sizeof out->schedule_why);
        memcpy(out->dp_sync_why, r.dp_sync_why, sizeof out->dp_sync_why);
        memcpy(out->warmup_why, r.warmup_why, sizeof out->warmup_why);
        out->untrainable = r.untrainable;
        ah_result_price(o, out);
        snprintf(out->hops_why, sizeof out->hops_why,
                 "the plan the search finds with every link between regions as fast as a zone link, on the real "
                 "links with extra warm-up above its hops across regions: %.4f s per iteration, vs %.4f s for the "
                 "search's plan on the real links",
                 ah_planner_time_s(o, &out->eval), before);
    }
    ah_plan_result_free(&r);
    return st;
}
