/* The agent's plans over the nodes that are up: its first plan, its re-plans (a removal, a join at a
 * checkpoint) and the next plan at a notice (agent_handover.c).
 *
 * Across regions in the open (plan_out.h ah_plan_wan_check; docs/elastic.md "Across regions"): the
 * first plan is the user's cluster as given, so one whose traffic crosses a region boundary on a
 * link not marked private is refused at its launch without --allow-unencrypted-wan (the user marks
 * the link private or passes the flag). A re-plan is made while the job runs, after capacity
 * moved: refusing it would end the job, so when the plan over every node up would cross in the
 * open, the agent plans over each region's nodes up alone and takes the best of those under the run's
 * objective (ah_planner_key: time, or cost per token under --objective cost; ties to the region first
 * in the cluster file), said in the log and as a metrics event
 * "confined"; when no region alone has a plan, the crossing plan stands and its launch is refused
 * as before. Errors: the planner's, for the plan over every node up. */
#include <stdlib.h>
#include <string.h>

#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "plan/plan_out.h"

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
    else s = ah_planner_run_sharded(&a->model, &c, &a->o->planner, false, r, err);
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
        const ah_planner_opts_t *o = &a->o->planner;
        if (have && ah_planner_key(o, &r.plan, &r.eval) >= ah_planner_key(o, &best->plan, &best->eval)) {
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

ah_status_t ah_agent_plan_up(agent_t *a, ah_plan_result_t *r, ah_error_t *err) {
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
