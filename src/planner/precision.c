/* --precision auto on a GPU cluster (planner.h, ah_planner_run_auto): bf16 where every type runs
 * it; else both 16-bit precisions planned, the better plan kept and the choice explained; fp32
 * where no type runs either. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/timing.h"
#include "planner/planner.h"

/* The plan's objective value: seconds per iteration, or $ per million tokens. */
static double objective_of(const ah_plan_result_t *r, ah_objective_t obj) {
    return obj == AH_OBJECTIVE_COST ? r->usd_per_mtoken : r->eval.pred.iteration_s;
}

/* Whether some / every type with GPUs in c runs p. */
static void runs(const ah_cluster_t *c, ah_precision_t p, bool *some, bool *every) {
    *some = false;
    *every = true;
    for (int i = 0; i < c->n_nodes; i++) {
        const bool r = ah_gpu_runs(&c->types[c->nodes[i].type], p);
        *some |= r;
        *every &= r;
    }
}

ah_status_t ah_planner_run_auto(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *opts,
                                ah_plan_result_t *out, ah_error_t *err) {
    bool some_bf16, all_bf16, some_fp16, all_fp16;
    runs(cluster, AH_PREC_BF16, &some_bf16, &all_bf16);
    runs(cluster, AH_PREC_FP16, &some_fp16, &all_fp16);
    ah_planner_opts_t o = *opts;
    if (!some_bf16 && !some_fp16) { /* every type gives its fp32 rate only */
        o.train.precision = AH_PREC_FP32;
        ah_status_t s = ah_planner_run(model, cluster, &o, out, err);
        if (s == AH_OK)
            snprintf(out->precision_why, sizeof out->precision_why, "fp32: no GPU type gives a bf16 or fp16 rate");
        return s;
    }
    o.train.precision = AH_PREC_BF16;
    if (all_bf16 || !some_fp16) {
        ah_status_t s = ah_planner_run(model, cluster, &o, out, err);
        if (s == AH_OK)
            snprintf(out->precision_why, sizeof out->precision_why, "bf16: %s",
                     all_bf16 ? "every GPU type runs it" : "no GPU type gives an fp16 rate");
        return s;
    }
    ah_plan_result_t r16;
    ah_error_t e16 = {0}, ebf = {0};
    const double t0 = ah_now_s(); /* the result's planning time is both searches' */
    o.train.precision = AH_PREC_FP16;
    const bool ok16 = ah_planner_run(model, cluster, &o, &r16, &e16) == AH_OK;
    o.train.precision = AH_PREC_BF16;
    const bool okbf = some_bf16 && ah_planner_run(model, cluster, &o, out, &ebf) == AH_OK;
    if (!ok16 && !okbf) { /* fp16 runs on the most types: its reason is the one to give */
        *err = e16;
        return ah_error_prefix(err, "--precision auto: neither bf16 nor fp16 plans; fp16");
    }
    const char *unit = opts->objective == AH_OBJECTIVE_COST ? "$ per million tokens" : "s per iteration";
    const double v16 = ok16 ? objective_of(&r16, opts->objective) : INFINITY;
    const double vbf = okbf ? objective_of(out, opts->objective) : INFINITY;
    if (ok16 && v16 < vbf) {
        char bf[160];
        if (okbf) snprintf(bf, sizeof bf, "its best plan %.6g %s", vbf, unit);
        else if (some_bf16) snprintf(bf, sizeof bf, "no plan fits: %.120s", ebf.msg);
        else snprintf(bf, sizeof bf, "no GPU type of the cluster runs it");
        if (okbf) ah_plan_result_free(out);
        *out = r16;
        out->seconds = ah_now_s() - t0;
        snprintf(out->precision_why, sizeof out->precision_why,
                 "fp16 (with dynamic loss scaling): %.6g %s; bf16: %s; %s", v16, unit, bf,
                 all_fp16 ? "every GPU type runs fp16" : "some types run neither 16-bit precision");
        return AH_OK;
    }
    char f16[160];
    if (ok16) snprintf(f16, sizeof f16, "its best plan %.6g %s", v16, unit);
    else snprintf(f16, sizeof f16, "no plan fits: %.120s", e16.msg);
    if (ok16) ah_plan_result_free(&r16);
    out->seconds = ah_now_s() - t0;
    snprintf(out->precision_why, sizeof out->precision_why,
             "bf16: %.6g %s, the types without a bf16 rate left out; fp16: %s", vbf, unit, f16);
    return AH_OK;
}
