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

/* What divides ah_planner_key into the figure said: $ per iteration under --objective cost (the key
 * is $/h x s/iteration), $/h under --budget's price objective. */
static double per_key(const ah_planner_opts_t *o) { return o->objective == AH_OBJECTIVE_COST ? 3600.0 : 1.0; }

bool ah_agent_join_restarts_now(agent_t *a, const ah_plan_result_t *r) {
    /* better under the run's objective: faster, or cheaper per token (--objective cost) or per hour */
    const ah_planner_opts_t *o = &a->o->planner;
    const double now_key = ah_planner_key(o, &a->cur.plan, &a->cur.eval), new_key = ah_planner_key(o, &r->plan, &r->eval);
    const double now_s = a->cur.eval.pred.iteration_s, new_s = r->eval.pred.iteration_s;
    const bool better = ah_agent_join_restarts(now_key, new_key);
    const char *left = better ? ah_agent_plan_leaves_out(&a->cur.plan, &r->plan) : NULL;
    const bool restart = better && !left;
    if (o->objective == AH_OBJECTIVE_TIME)
        say(a, "checkpoint taken; a plan with the joined nodes is %s (%.4f vs %.4f s/iteration)%s", better ? "faster" : "not faster",
            new_s, now_s, restart ? ": restarting" : better ? "" : ": no restart");
    else
        say(a, "checkpoint taken; a plan with the joined nodes is %s under --objective %s ($%.6g vs $%.6g %s, %.4f vs "
            "%.4f s/iteration)%s", better ? "better" : "not better", o->objective == AH_OBJECTIVE_COST ? "cost" : "price",
            new_key / per_key(o), now_key / per_key(o), o->objective == AH_OBJECTIVE_COST ? "per iteration" : "per hour",
            new_s, now_s, restart ? ": restarting" : better ? "" : ": no restart");
    if (better && !restart)
        say(a, "but it leaves out %s, which holds part of the step the restart would resume from (on its disk and in "
            "its memory): the new plan's ranks could not read it, so the restart would roll back: no restart", left);
    return restart;
}
