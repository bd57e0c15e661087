/* The agent's joins (issue 36; docs/elastic.md "Joins"): when a node that was not in the job is up
 * again, whether to restart onto a plan with it now, by the rule of elastic/join_rule.h, which the
 * simulator prices too (sim/sim.c). Decided when a join comes in while the job trains, when a
 * launch's first step finishes with joins pending, and at each checkpoint: a restart that pays is
 * taken at once (the notice to every rank: the trainers stop at the next step boundary and save,
 * the handover's notice), one that does not waits for the next of those moments, so joins that
 * come close together are taken in one restart.
 *
 * The facts the rule takes, each measured in this run:
 *  - the stay: `--join-horizon-s` when given, else 1 / the joined plan's hit rate from the removals
 *    of spot nodes the events file made so far and the seconds the spot nodes were up (the
 *    simulator's statistics, join_rule.h ah_churn_hit_rate);
 *  - the cost: the mean notice-to-first-step of this run's finished recoveries (stop and save,
 *    re-plan, start-up, transfer, first step; agent.h ah_agent_recovery_t.total_s) together with the
 *    first launch's start to its first finished step (no stop, no save: the one sample before any
 *    recovery); plus the exposure (join_rule.h), its recovery the mean of the finished recoveries
 *    after a preemption (not a join's), each with the steps it redid at this run's mean step time
 *    (the cost above before any).
 * Errors: out of host memory at the start only (ah_agent_join_init). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "elastic/join_rule.h"

bool ah_agent_join_init(agent_t *a) {
    const int nt = a->cluster.n_types;
    a->churn = calloc((size_t)(4 * nt + 1), sizeof *a->churn); /* removals, events, node-seconds, last event */
    a->churn_tick_t = 0;
    a->first_start_s = -1;
    for (int ty = 0; a->churn && ty < nt; ty++) a->churn[3 * nt + ty] = -1;
    return a->churn != NULL;
}

void ah_agent_join_free(agent_t *a) {
    free(a->churn);
    a->churn = NULL;
}

void ah_agent_churn_tick(agent_t *a) {
    const double now = since_start(a), dt = now - a->churn_tick_t;
    const int nt = a->cluster.n_types;
    a->churn_tick_t = now;
    for (int i = 0; dt > 0 && i < a->cluster.n_nodes; i++)
        if (a->up[i] && a->cluster.nodes[i].spot) a->churn[2 * nt + a->cluster.nodes[i].type] += dt;
}

void ah_agent_churn_removed(agent_t *a, int node, double t_s) {
    const ah_node_t *n = &a->cluster.nodes[node];
    const int nt = a->cluster.n_types;
    if (!n->spot) return;
    a->churn[n->type]++;
    if (a->churn[3 * nt + n->type] != t_s) a->churn[nt + n->type]++; /* one removing change a type */
    a->churn[3 * nt + n->type] = t_s;
}

/* The rule's cost: the mean of the finished recoveries' seconds and the first launch's start. */
static double join_cost_s(const agent_t *a) {
    double sum = a->first_start_s >= 0 ? a->first_start_s : 0;
    int n = a->first_start_s >= 0;
    for (int i = 0; i < a->res->n_recoveries; i++)
        if (a->res->recoveries[i].complete) {
            sum += a->res->recoveries[i].total_s;
            n++;
        }
    return n > 0 ? sum / n : 0;
}

/* The exposure's recovery: the mean finished recovery after a preemption with the steps it redid at the
 * run's mean step time; the join's cost before any. */
double ah_agent_preempt_cost_s(const agent_t *a) {
    double step_s = 0, steps = 0, sum = 0;
    for (int k = 0; k < a->res->n_launches; k++)
        if (a->res->launches[k].first_step >= 0) {
            step_s += a->res->launches[k].step_s_sum;
            steps += (double)(a->res->launches[k].end_step - a->res->launches[k].first_step);
        }
    int n = 0;
    for (int i = 0; i < a->res->n_recoveries; i++) {
        const ah_agent_recovery_t *r = &a->res->recoveries[i];
        if (!r->complete || r->cause == AH_CAUSE_JOIN) continue;
        sum += r->total_s + (steps > 0 ? (double)(r->stopped_at - r->resumed_at) * step_s / steps : 0);
        n++;
    }
    return n > 0 ? sum / n : join_cost_s(a);
}

ah_churn_t ah_agent_churn(agent_t *a) {
    const int nt = a->cluster.n_types;
    ah_agent_churn_tick(a);
    return (ah_churn_t){.n_types = nt, .removals = a->churn, .removal_events = a->churn + nt,
                        .node_s = a->churn + 2 * nt, .elapsed_s = since_start(a)};
}

/* Plan p's hit rate at the churn seen so far (join_rule.h). */
static double hit_rate(agent_t *a, const ah_plan_t *p) {
    const int nt = a->cluster.n_types;
    int *spot = calloc((size_t)nt + 1, sizeof *spot);
    if (!spot) return 0; /* out of host memory: as with no removal seen */
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->cluster.nodes[i].spot && ah_agent_plan_uses(p, a->cluster.nodes[i].name)) spot[a->cluster.nodes[i].type]++;
    const ah_churn_t c = ah_agent_churn(a);
    const double rate = ah_churn_hit_rate(&c, spot);
    free(spot);
    return rate;
}

/* What divides ah_planner_key into the figure said: $ per iteration under --objective cost (the key
 * is $/h x s/iteration), $/h under --budget's price objective. */
static double per_key(const ah_planner_opts_t *o) { return o->objective == AH_OBJECTIVE_COST ? 3600.0 : 1.0; }

bool ah_agent_join_weigh(agent_t *a, const ah_plan_result_t *from, const ah_plan_result_t *to, ah_join_weighed_t *w) {
    ah_planner_opts_t held;
    ah_agent_planner_opts(a, &held); /* the nodes up priced under --objective cost */
    const ah_planner_opts_t *o = &held;
    const double hit = hit_rate(a, &to->plan);
    w->stay_s = ah_join_stay_s(hit, a->o->join_horizon_s);
    w->restart_s = join_cost_s(a);
    w->exposure_s = ah_join_exposure_s(hit_rate(a, &from->plan), hit, w->stay_s, ah_agent_preempt_cost_s(a));
    w->cost_s = w->restart_s + w->exposure_s;
    return ah_join_pays(ah_planner_key(o, &from->plan, &from->eval), ah_planner_key(o, &to->plan, &to->eval), w->stay_s,
                        w->cost_s, &w->gain_s);
}

ah_join_verdict_t ah_agent_join_restarts_now(agent_t *a, const ah_plan_result_t *r, const char *when) {
    ah_planner_opts_t held;
    ah_agent_planner_opts(a, &held); /* the nodes up priced under --objective cost */
    const ah_planner_opts_t *o = &held;
    const double now_key = ah_planner_key(o, &a->cur.plan, &a->cur.eval), new_key = ah_planner_key(o, &r->plan, &r->eval);
    const double now_s = a->cur.eval.pred.iteration_s, new_s = r->eval.pred.iteration_s;
    const bool better = ah_join_pays(now_key, new_key, INFINITY, 0, NULL);
    ah_join_weighed_t w;
    const bool pays = ah_agent_join_weigh(a, &a->cur, r, &w);
    const double stay = w.stay_s, cost = w.cost_s, restart = w.restart_s, exposure = w.exposure_s, gain = w.gain_s;
    const char *left = better ? ah_agent_plan_leaves_out(&a->cur.plan, &r->plan) : NULL;
    const bool verdict_restart = pays && !left;
    if (o->objective == AH_OBJECTIVE_TIME)
        say(a, "%s; a plan with the joined nodes is %s (%.4f vs %.4f s/iteration)%s", when,
            better ? "faster" : "not faster", new_s, now_s, better ? "" : ": no restart");
    else
        say(a, "%s; a plan with the joined nodes is %s under --objective %s ($%.6g vs $%.6g %s, %.4f vs %.4f "
            "s/iteration)%s", when, better ? "better" : "not better", o->objective == AH_OBJECTIVE_COST ? "cost" : "price",
            new_key / per_key(o), now_key / per_key(o), o->objective == AH_OBJECTIVE_COST ? "per iteration" : "per hour",
            new_s, now_s, better ? "" : ": no restart");
    if (better && left)
        say(a, "but it leaves out %s, which holds part of the step the restart would resume from (on its disk and in "
            "its memory): the new plan's ranks could not read it, so the restart would roll back: no restart", left);
    else if (better)
        say(a, "the restart would gain %.3g s of training over the expected stay of %.4g s (%s) against its cost of %.3g s "
            "(this run's mean recovery %.3g s + the joined nodes' expected preemptions %.3g s): %s", gain, stay,
            a->o->join_horizon_s > 0 ? "--join-horizon-s" : "the removals seen", cost, restart, exposure,
            verdict_restart ? "restarting" : "waiting (decided again at the next join, checkpoint or first step)");
    return verdict_restart ? AH_JOIN_RESTART : better && !left ? AH_JOIN_WAIT : AH_JOIN_DROP;
}

bool ah_agent_consider_join(agent_t *a, const char *when) {
    if (!a->join_pending || a->stopping || !a->running || a->res->launches[a->res->n_launches - 1].first_step < 0)
        return false;
    ah_plan_result_t r;
    ah_error_t e;
    const double t = ah_now_s();
    if (ah_agent_plan_up(a, &r, &e) != AH_OK) {
        a->join_pending = false;
        say(a, "with the joined nodes: no plan (%s); going on with the current one", e.msg);
        return false;
    }
    const ah_join_verdict_t v = ah_agent_join_restarts_now(a, &r, when);
    a->join_pending = v == AH_JOIN_WAIT;
    if (v != AH_JOIN_RESTART) {
        ah_plan_result_free(&r);
        return false;
    }
    ah_agent_next_plan_join(a, &r, t); /* which nodes the relaunch reads, for the trainers' uploads */
    return true;
}
