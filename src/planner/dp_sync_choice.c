/* The DP sync of the planner's plan (planner.h ah_planner_choose_dp_sync): the flat ring or, where
 * the plan's DP groups span regions (else zones), the hierarchical sync (plan.h ah_dp_sync_t;
 * docs/cost-model.md "Hierarchical DP sync"), whichever ah_evaluate prices lower, on the plan the
 * search built (which weighed both per candidate where a group spans domains). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan/evaluate.h"
#include "planner/planner.h"

ah_status_t ah_planner_choose_dp_sync(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err) {
    ah_plan_t *p = &out->plan;
    out->dp_sync_why[0] = '\0';
    const int domains = ah_dp_most_domains(p, INT_MAX);
    if (domains < 2) return AH_OK;
    ah_plan_t h;
    ah_status_t st = ah_plan_copy(p, &h, err);
    if (st != AH_OK) return st;
    h.dp_sync = p->dp_sync == AH_DP_SYNC_RING ? AH_DP_SYNC_HIERARCHICAL : AH_DP_SYNC_RING;
    ah_eval_t e;
    if ((st = ah_evaluate(&h, o->profile, &e, err)) != AH_OK) {
        ah_plan_free(&h);
        return st;
    }
    const bool hier_now = p->dp_sync == AH_DP_SYNC_HIERARCHICAL;
    const double now_s = out->eval.pred.breakdown.dp_sync_s, other_s = e.pred.breakdown.dp_sync_s;
    const bool take = e.feasible && ah_planner_key(o, &h, &e) < ah_planner_key(o, p, &out->eval);
    const double hier_s = hier_now ? now_s : other_s, ring_s = hier_now ? other_s : now_s;
    if (take) ah_result_take(o, out, &h, &e);
    else {
        ah_plan_free(&h);
        ah_eval_free(&e);
    }
    snprintf(out->dp_sync_why, sizeof out->dp_sync_why,
             p->dp_sync == AH_DP_SYNC_HIERARCHICAL
                 ? "DP groups span %d regions or zones: the hierarchical sync (reduce-scatter inside each, "
                   "all-reduce of the shards across, all-gather inside), %.4f s per iteration predicted, vs %.4f s "
                   "for the flat ring"
                 : "DP groups span %d regions or zones: the flat ring, %.4f s per iteration predicted, vs %.4f s "
                   "for the hierarchical sync (reduce-scatter inside each, all-reduce across, all-gather inside)",
             domains, p->dp_sync == AH_DP_SYNC_HIERARCHICAL ? hier_s : ring_s,
             p->dp_sync == AH_DP_SYNC_HIERARCHICAL ? ring_s : hier_s);
    return AH_OK;
}
