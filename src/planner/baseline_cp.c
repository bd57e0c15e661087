/* megatron-best with context parallelism (issue 38), as Megatron-Core runs it: one CP degree c for
 * every pipeline (--context-parallel-size), each CP group tp x c devices, TP innermost
 * (Megatron-Core's default rank order tp-cp-dp-pp), inside one node or across alike nodes (the
 * faster of the two), the causal load balance of the runtime. A degree's plan is megatron-best's
 * own search (baselines.c) run on one CP rank's view of the problem (cp_view.c ah_cp_view: the
 * devices / c, the sequence / c) and expanded to
 * the real cluster (ah_cp_expand), then checked and evaluated whole (ah_evaluate prices CP: per CP
 * rank T / c tokens and 1 / c of the causal work, the ring's transfers, memory to the byte); where
 * it does not fit, with every stage recomputing (one flag for all, as Megatron's).
 *
 * The degree, as a Megatron-Core user who tried each would pick it: --cp N: N; --cp auto: the
 * fastest by ah_planner_time_s of CP 1 and, from AH_CP_AUTO_MIN_SEQ tokens up or where CP 1 fits
 * nothing, of CP 2, 4, 8 (each that ah_cp_unfit allows); ties to the smaller degree. The plain
 * search does not take such a plan as a candidate (search.c baseline_comparable): it plans whole
 * sequences; the CP searches meet megatron-best at their degree on their view.
 *
 * Errors: --cp N: AH_ERR_INVALID naming why N cannot be (ah_cp_unfit), AH_ERR_INFEASIBLE when N's
 * view has no megatron-best plan or its plan does not fit (the message names which); auto:
 * AH_ERR_INFEASIBLE with CP 1's message when no degree plans; AH_ERR_OOM. out is freed on every
 * error. */
#define AH_PLANNER_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "plan/evaluate.h"
#include "planner/planner.h"

/* megatron-best at CP degree cp, its CP groups across `span` nodes (1: one node), into *out (fits,
 * evaluated). */
static ah_status_t megatron_best_span(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                      int cp, int span, ah_plan_result_t *out, ah_error_t *err) {
    ah_cp_view_t view;
    ah_plan_result_t v;
    memset(out, 0, sizeof *out);
    out->from_baseline = -1;
    ah_status_t st = ah_cp_view(cluster, o, cp, span, &view, err);
    if (st != AH_OK) return st;
    st = ah_baseline_run(model, &view.cluster, &view.opts, AH_BASELINE_MEGATRON_BEST, &v, err);
    if (st != AH_OK) {
        ah_cp_view_free(&view);
        return ah_error_prefix(err, "at CP %d, on one CP rank's view", cp), st;
    }
    bool fits = false;
    st = ah_cp_expand_fit(&view, &v.plan, cluster, o, &out->plan, &out->eval, &fits, err);
    ah_cp_view_free(&view);
    ah_plan_result_free(&v);
    if (st == AH_OK && !fits)
        st = ah_error_set(err, AH_ERR_INFEASIBLE, "the megatron-best baseline at CP %d: its view's plan does not fit "
                          "on the cluster, recomputing or not", cp);
    if (st == AH_OK) { /* the plan carries its evaluation, as every result */
        out->plan.has_predicted = true;
        out->plan.predicted = out->eval.pred;
        out->search_value_s = out->eval.search_estimate_s;
        ah_result_price(o, out);
    } else
        ah_plan_result_free(out);
    return st;
}

/* megatron-best at CP degree cp into *out: the faster of its CP groups inside one node (where a
 * node holds cp devices) and across the most alike nodes the cluster has (ah_cp_max_span). */
static ah_status_t megatron_best_at(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                    int cp, ah_plan_result_t *out, ah_error_t *err) {
    bool local = false, have = false;
    for (int n = 0; n < cluster->n_nodes && !local; n++) local = cluster->nodes[n].count >= cp;
    const int spans[2] = {1, ah_cp_max_span(cluster, cp)};
    ah_status_t st = AH_ERR_INFEASIBLE;
    for (int k = 0; k < 2; k++) {
        if ((k == 0 && !local) || (k == 1 && spans[1] == 1)) continue;
        ah_plan_result_t r;
        ah_error_t why = {0};
        const ah_status_t s = megatron_best_span(model, cluster, o, cp, spans[k], &r, &why);
        if (s == AH_ERR_OOM) {
            if (have) ah_plan_result_free(out);
            return *err = why, s;
        }
        if (s != AH_OK) {
            if (!have) *err = why, st = s;
            continue;
        }
        if (have && !(ah_planner_time_s(o, &r.eval) < ah_planner_time_s(o, &out->eval))) {
            ah_plan_result_free(&r);
            continue;
        }
        if (have) ah_plan_result_free(out);
        *out = r;
        have = true;
        st = AH_OK;
    }
    return st;
}

ah_status_t ah_megatron_best_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                ah_plan_result_t *out, ah_error_t *err) {
    static const int DEGREES[] = {2, 4, 8};
    ah_planner_opts_t whole = *o;
    whole.cp = 1;
    bool have = false;
    ah_error_t first = {0};
    if (o->cp == 0) { /* auto: CP 1 first */
        const ah_status_t st = ah_baseline_run(model, cluster, &whole, AH_BASELINE_MEGATRON_BEST, out, &first);
        if (st != AH_OK && st != AH_ERR_INFEASIBLE) return *err = first, st;
        have = st == AH_OK;
        if (have && o->train.seq_len < AH_CP_AUTO_MIN_SEQ) return AH_OK;
    }
    for (size_t i = 0; i < sizeof DEGREES / sizeof *DEGREES; i++) {
        const int cp = DEGREES[i];
        if (o->cp != 0 && o->cp != cp) continue;
        char unfit[160];
        ah_cp_unfit(cluster, o, cp, unfit, sizeof unfit);
        if (unfit[0] && o->cp != 0)
            return ah_error_set(err, AH_ERR_INVALID, "the megatron-best baseline at --cp %d: %s", cp, unfit);
        if (unfit[0]) continue;
        ah_plan_result_t r;
        ah_error_t why = {0};
        const ah_status_t st = megatron_best_at(model, cluster, o, cp, &r, &why);
        if (st != AH_OK && (st == AH_ERR_OOM || o->cp != 0)) {
            if (have) ah_plan_result_free(out);
            return *err = why, st;
        }
        if (st != AH_OK) continue;
        if (have && !(ah_planner_time_s(o, &r.eval) < ah_planner_time_s(o, &out->eval))) {
            ah_plan_result_free(&r);
            continue;
        }
        if (have) ah_plan_result_free(out);
        *out = r;
        have = true;
    }
    if (!have) *err = first;
    return have ? AH_OK : first.code;
}
