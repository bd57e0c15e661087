/* The agent's plans over the nodes that are up: its first plan, its re-plans (a removal, a join at a
 * checkpoint) and the next plan at a notice (agent_handover.c).
 *
 * Across regions in the open (plan_out.h ah_plan_wan_check; docs/elastic.md "Across regions"): the
 * first plan is the user's cluster as given, so one whose traffic crosses a region boundary on a
 * link not marked private is refused at its launch without --allow-unencrypted-wan (the user marks
 * the link private or passes the flag). A re-plan is made while the job runs, after capacity
 * moved: refusing it would end the job, so when the plan over every node up would cross in the
 * open, the agent plans over each region's nodes up alone and takes the best of those under the run's
 * objective (ah_planner_key: time, or cost per token under --objective cost, every node up priced:
 * ah_agent_planner_opts; ties to the region first
 * in the cluster file), said in the log and as a metrics event
 * "confined"; when no region alone has a plan, the crossing plan stands and its launch is refused
 * as before. Errors: the planner's, for the plan over every node up. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/agent_exposure.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "plan/ckpt_traffic.h"
#include "plan/plan_out.h"
#include "spec/arch.h"

static ah_status_t plan_up(agent_t *a, ah_plan_result_t *r, ah_error_t *err);

void ah_agent_planner_opts(const agent_t *a, ah_planner_opts_t *po) {
    *po = a->o->planner;
    if (po->objective != AH_OBJECTIVE_COST) return;
    po->held_usd_per_hour = 0;
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->up[i]) po->held_usd_per_hour += a->cluster.nodes[i].usd_per_gpu_hour * a->cluster.nodes[i].count;
}

/* Plans on the nodes up, in `region` alone when not NULL. */
static ah_status_t plan_on(agent_t *a, const char *region, ah_plan_result_t *r, ah_error_t *err) {
    ah_cluster_t c;
    ah_status_t s = ah_cluster_copy(&a->cluster, &c, err);
    if (s != AH_OK) return s;
    int n = 0;
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->up[i] && (!region || strcmp(a->cluster.nodes[i].region, region) == 0)) c.nodes[n++] = a->cluster.nodes[i];
    c.n_nodes = n;
    if (n == 0) s = ah_error_set(err, AH_ERR_INFEASIBLE, "no node of the cluster is up");
    else {
        ah_planner_opts_t po;
        ah_agent_planner_opts(a, &po);
        s = ah_planner_run_sharded(&a->model, &c, &po, false, r, err);
    }
    ah_cluster_free(&c);
    return s;
}

/* The best plan under the run's objective over one region's nodes up alone into *best (its region in best_region); false
 * when no region alone has one. */
static bool best_single_region(agent_t *a, ah_plan_result_t *best, const char **best_region) {
    bool have = false;
    for (int i = 0; i < a->cluster.n_nodes; i++) {
        const char *region = a->cluster.nodes[i].region;
        bool first = a->up[i];
        for (int j = 0; first && j < i; j++) first = !(a->up[j] && strcmp(a->cluster.nodes[j].region, region) == 0);
        if (!first) continue;
        ah_plan_result_t r;
        ah_error_t e;
        if (plan_on(a, region, &r, &e) != AH_OK) continue;
        ah_planner_opts_t o;
        ah_agent_planner_opts(a, &o);
        if (have && ah_planner_key(&o, &r.plan, &r.eval) >= ah_planner_key(&o, &best->plan, &best->eval)) {
            ah_plan_result_free(&r);
            continue;
        }
        if (have) ah_plan_result_free(best);
        *best = r;
        *best_region = region;
        have = true;
    }
    return have;
}

/* --exposure-aware: r, or the baseline's plan of r that earns more when a piece held alone is weighed
 * (agent_exposure.h), into r; a->exposure_note says which when it changed. */
static void weigh_exposure(agent_t *a, ah_plan_result_t *r) {
    a->exposure_note[0] = 0;
    if (!a->o->exposure_aware || !r->baselines) return;
    const ah_exposure_facts_t f = {.cluster = &a->cluster, .churn = ah_agent_churn(a),
                                   .recovery_s = ah_agent_preempt_cost_s(a), .ckpt_every = a->o->ckpt_every,
                                   .memory_tier = a->o->planner.train.ckpt.replica_gb > 0};
    ah_exposure_weighed_t w[1 + AH_BASELINE_COUNT];
    bool ok;
    ah_planner_opts_t po;
    ah_agent_planner_opts(a, &po);
    const int k = ah_exposure_pick(r, &po, &f, w, &ok);
    if (!ok) say(a, "warning: out of host memory: the plan's exposure not weighed (the planner's plan taken)");
    if (k < 0) return;
    snprintf(a->exposure_note, sizeof a->exposure_note,
             "exposure-aware: the %s baseline's plan (%.4f s/iteration, %d spot node%s holding a piece alone, %.3g of "
             "its time kept) over the planner's (%.4f s/iteration, %d such node%s hit %.3g/h, each a rollback of "
             "%.3g s; %.3g kept)", ah_baseline_name((ah_baseline_t)k), r->baselines[k].r.eval.pred.iteration_s,
             w[1 + k].alone_spot, w[1 + k].alone_spot == 1 ? "" : "s", w[1 + k].kept, r->eval.pred.iteration_s,
             w[0].alone_spot, w[0].alone_spot == 1 ? "" : "s", w[0].alone_hit_rate * 3600, w[0].rollback_s, w[0].kept);
    ah_plan_result_t b = r->baselines[k].r;
    memset(&r->baselines[k].r, 0, sizeof r->baselines[k].r);
    r->baselines[k].ok = false;
    ah_plan_result_free(r);
    *r = b;
}

ah_status_t ah_agent_plan_up(agent_t *a, ah_plan_result_t *r, ah_error_t *err) {
    ah_status_t s = plan_up(a, r, err);
    if (s == AH_OK) weigh_exposure(a, r);
    return s;
}

/* The plan over every node up, or over one region's when it crosses in the open (above). */
static ah_status_t plan_up(agent_t *a, ah_plan_result_t *r, ah_error_t *err) {
    ah_status_t s = plan_on(a, NULL, r, err);
    if (s != AH_OK || !a->have_cur || a->o->allow_unencrypted_wan) return s;
    ah_error_t open;
    if (ah_plan_wan_check(&r->plan, false, &open) == AH_OK) return AH_OK;
    ah_plan_result_t one;
    const char *region = NULL;
    if (!best_single_region(a, &one, &region)) {
        say(a, "re-plan: the plan over every node up crosses a region boundary in the open and no region alone "
            "has a plan; its launch is refused without --allow-unencrypted-wan");
        return AH_OK;
    }
    say(a, "re-plan: the plan over every node up (%.4f s/iteration) crosses a region boundary in the open; without "
        "--allow-unencrypted-wan (or a link marked \"private\") the agent plans in region %s alone: %d devices, "
        "%.4f s/iteration", r->eval.pred.iteration_s, region, ah_plan_device_count(&one.plan),
        one.eval.pred.iteration_s);
    emit(a, json_pack("{s:s, s:s, s:f, s:f}", "event", "confined", "region", region, "across_iteration_s",
                      r->eval.pred.iteration_s, "iteration_s", one.eval.pred.iteration_s));
    ah_plan_result_free(r);
    *r = one;
    return AH_OK;
}

#define DISK_GB_S_DEFAULT 8.0 /* simulate's --disk-gb-s default: an 8-GPU cloud node's local NVMe */

/* The node writing the most: each node writes each shard its ranks hold once (a data-parallel replica on the same
 * node does not write it again), weights and AdamW m and v in fp32, as the runtime does (plan/ckpt_traffic.h). */
double ah_agent_plan_save_s(const ah_plan_t *p, double *bytes, double *gb_s) {
    const char *env = getenv("AH_AGENT_DISK_GB_S");
    char *end = NULL;
    const double v = env ? strtod(env, &end) : NAN;
    *gb_s = env && end != env && !*end && isfinite(v) && v > 0 ? v : DISK_GB_S_DEFAULT;
    int64_t *own = calloc((size_t)p->cluster.n_nodes + 1, sizeof *own);
    *bytes = 0;
    if (own && ah_ckpt_node_bytes(p, own, NULL, NULL, &(ah_error_t){0}) == AH_OK)
        for (int n = 0; n < p->cluster.n_nodes; n++)
            if ((double)own[n] > *bytes) *bytes = (double)own[n];
    free(own);
    return *bytes / (*gb_s * 1e9);
}
