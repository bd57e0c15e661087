/* When the search scored no plan that meets --budget or --min-tokens-per-s although plans fit.
 * With --budget, the planner runs again for the least $/h of a plan that meets
 * --min-tokens-per-s (AH_OBJECTIVE_PRICE: the same search, minimising the $/h of the GPUs used
 * and the egress at the plan's rate;
 * a search under a budget skips what breaks it, and its template mode, whose every move starts
 * over the budget, can find nothing although a plan fits): when that plan meets --budget, it is
 * the plan. Otherwise the error says what would: the true fastest plan (the planner run without
 * the constraints: the fastest the constrained search scored is not the fastest there is), and
 * the least $/h found, which --budget then admits by the rule above. That figure is proven the
 * least when every (TP, micro-batch) setting was searched exactly (every pipeline set scored) and
 * no egress is weighed (the search splits each set for time, not for its egress); else it is the
 * least the search found, and the message says which. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "planner/planner.h"

bool ah_search_over_budget(const ah_planner_opts_t *o, double usd) {
    return o->budget_usd_per_hour > 0 && usd > o->budget_usd_per_hour * (1 + 1e-9);
}

/* usd rounded up to the cent (a figure already on a cent stays), so "--budget" with it admits. */
static double cents_up(double usd) {
    const double c = usd * 100;
    return (fabs(c - round(c)) < 1e-6 ? round(c) : ceil(c)) / 100;
}

/* The planner run without --budget and --min-tokens-per-s (obj: time for the fastest plan, or
 * price with min_tps kept), nothing explained or sharded, its schedules chosen. */
static ah_status_t rerun(const ah_model_t *m, const ah_cluster_t *c, const ah_planner_opts_t *o, ah_objective_t obj,
                         ah_plan_result_t *out, ah_error_t *err) {
    ah_planner_opts_t r = *o;
    r.objective = obj;
    r.budget_usd_per_hour = 0;
    if (obj == AH_OBJECTIVE_TIME) r.min_tokens_per_s = 0;
    r.explain_idle = false;
    r.shard = AH_SHARD_NONE;
    ah_status_t st = ah_planner_run(m, c, &r, out, err);
    if (st == AH_OK && (st = ah_planner_choose_schedules(&r, out, err)) != AH_OK) ah_plan_result_free(out);
    return st; /* the schedules as autohet plan chooses them, so its figures are that plan's */
}

/* "no plan meets the constraints: ..." into err: the fastest plan, and with cheap (the least-$/h
 * run's result, over the budget; NULL without --budget) the least budget that admits a plan. */
static ah_status_t unmet_error(const ah_planner_opts_t *o, const ah_plan_result_t *fast, const ah_plan_result_t *cheap,
                               ah_error_t *err) {
    const double tps = fast->eval.pred.tokens_per_s, usd = ah_planner_usd_per_hour(o, &fast->plan, &fast->eval);
    char fastest[256];
    snprintf(fastest, sizeof fastest, "the fastest plan (the planner's plan without --budget and --min-tokens-per-s) "
             "runs %.0f tokens/s (%.4f s per iteration) at $%.2f/h", tps, fast->eval.pred.iteration_s, usd);
    if (!cheap)
        return ah_error_set(err, AH_ERR_INFEASIBLE, "no plan meets the constraints: no plan reaches --min-tokens-per-s "
                            "%.0f: %s; lower --min-tokens-per-s", o->min_tokens_per_s, fastest);
    /* the fastest plan meets --min-tokens-per-s here (else cheap is NULL), so it bounds the least $/h too */
    const double cheap_usd = ah_planner_usd_per_hour(o, &cheap->plan, &cheap->eval);
    const ah_plan_result_t *least = cheap_usd <= usd ? cheap : fast;
    const double price = least == cheap ? cheap_usd : usd;
    char speed[96] = "";
    if (o->min_tokens_per_s > 0) snprintf(speed, sizeof speed, " that reaches --min-tokens-per-s %.0f", o->min_tokens_per_s);
    /* the search splits for time: with egress weighed, a split it did not score may cost less per hour */
    const bool proven = least == cheap && cheap->exact && !ah_planner_weighs_egress(o, &cheap->plan.cluster);
    return ah_error_set(err, AH_ERR_INFEASIBLE,
                        "no plan meets the constraints: every plan%s costs more than --budget $%.2f/h; %s; the "
                        "cheapest plan%s %s costs $%.2f/h (%.0f tokens/s, %.4f s per iteration, %d GPU%s), so "
                        "--budget %.2f %s",
                        speed, o->budget_usd_per_hour, fastest, speed,
                        proven ? "(the search was exact for every (TP, micro-batch) setting: no cheaper plan fits)"
                               : "that the search found (its template mode, or the egress its splits weigh, leaves a cheaper plan possible)",
                        price, least->eval.pred.tokens_per_s, least->eval.pred.iteration_s,
                        ah_plan_device_count(&least->plan), ah_plan_device_count(&least->plan) == 1 ? "" : "s", cents_up(price),
                        proven ? "is the least budget that admits a plan" : "admits a plan; a lower one may too");
}

ah_status_t ah_search_unmet(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                            ah_plan_result_t *out, ah_error_t *err) {
    ah_plan_result_t fast, cheap;
    const bool by_price = o->budget_usd_per_hour > 0;
    ah_status_t st = by_price ? rerun(model, cluster, o, AH_OBJECTIVE_PRICE, &cheap, err) : AH_OK;
    bool have_cheap = by_price && st == AH_OK;
    if (st == AH_ERR_INFEASIBLE) st = AH_OK; /* no plan reaches --min-tokens-per-s: said below */
    if (st != AH_OK) return st;
    if (have_cheap && !ah_search_over_budget(o, ah_planner_usd_per_hour(o, &cheap.plan, &cheap.eval))) {
        ah_plan_result_free(out); /* the search's own baselines: the rerun ran them again */
        *out = cheap;
        out->cheapest = true;
        return AH_OK;
    }
    st = rerun(model, cluster, o, AH_OBJECTIVE_TIME, &fast, err);
    if (st == AH_OK) {
        if (have_cheap && o->min_tokens_per_s > 0 && fast.eval.pred.tokens_per_s < o->min_tokens_per_s) {
            ah_plan_result_free(&cheap); /* (cannot be: the cheapest plan reaches it, and so does the fastest) */
            have_cheap = false;
        }
        st = unmet_error(o, &fast, have_cheap ? &cheap : NULL, err);
        ah_plan_result_free(&fast);
    }
    if (have_cheap) ah_plan_result_free(&cheap);
    return st;
}
ah_status_t ah_planner_require_prices(const ah_cluster_t *c, const ah_planner_opts_t *o, const char *where,
                                      ah_error_t *err) {
    const bool cost = o->objective == AH_OBJECTIVE_COST, budget = o->budget_usd_per_hour > 0;
    if (!cost && !budget) return AH_OK;
    return ah_cluster_require_prices(c, cost && budget ? "--objective cost with --budget" : cost ? "--objective cost"
                                                                                               : "--budget",
                                     where, err);
}
