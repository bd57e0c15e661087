/* Context parallelism in the planner (planner.h ah_planner_opts_t.cp, --cp auto|1|2|4|8; issue 38;
 * docs/planner.md "Context parallelism").
 *
 * auto, per pipeline and exactly where the exact search covers the instance: the search itself
 * runs with every CP degree open (ah_planner_opts_t.cp_per_pipeline): its stage tables per degree
 * c price a stage as a CP group of c TP groups of one node (per CP rank T / c tokens, 1 / c of the
 * causal attention, the ring on the node's link, memory per CP rank; the same cost functions
 * ah_evaluate uses), and the exact search (search_exact.c) lists pipelines of every degree, each
 * its own, so the result is the optimum of its closed form over every per-pipeline assignment of
 * degrees 1, 2, 4, 8 x the search space (tests/test_planner_exact_cp.c checks it against a brute
 * force). That search is run where the cluster has at most exact_max_groups GPUs (else TP 1 alone
 * would leave the exact search) and is kept when every (t, m) was searched exactly.
 *
 * Elsewhere (larger clusters, template mode), one degree c for every pipeline, as Megatron-Core
 * sets it, found by the search run on one CP rank's view of the problem (cp_view.c): the cluster
 * with every node holding count / c devices (a device of the view stands for the c devices of its
 * CP group, node-local) and the sequence T / c tokens. The view's plan is expanded on the real
 * cluster: a stage on TP group g of a node becomes the node's devices g tp c .. (g + 1) tp c - 1,
 * cp-major, the pipeline's "cp" c, the sequence T again; and that plan is checked and evaluated
 * whole. Each degree is also planned with its CP groups across alike nodes (the view's span,
 * ah_cp_max_span: TP inside each node, the ring over their link), on clusters of the exact search
 * too, and the better plan kept (plan_cp_spans). Where it
 * does not fit, it is tried again with every stage recomputing, then the view searched once more
 * with each type's reserve raised by its devices' overshoot (tighten_view). The view is a proxy: its attention
 * is (T / c)^2 where a CP rank's is 1 / c of T^2, and it has no ring; the choice between degrees is
 * by the whole-plan evaluation only. Then, per pipeline (refine_per_pipeline), a pipeline of CP
 * c >= 2 is split into two of c / 2 (its CP ranks halved, the micro-batches shared) while that
 * lowers the whole plan's key and fits: greedy, the first improving pipeline each round.
 *
 * auto weighs CP from AH_CP_AUTO_MIN_SEQ tokens up or where the plain search fits nothing; the plan
 * with the least ah_planner_key wins (the plain one on ties). --cp N: N alone on every pipeline (1:
 * never CP), by the view.
 *
 * The lower_bound_s of a result of a search with CP is 0: the relaxation's memory and group terms
 * assume whole sequences on a TP group (CP does not reduce the FLOPs, but it does reduce the memory
 * a stage needs, which those terms bound). Baselines are the plain search's (none without it).
 * Errors: AH_ERR_INFEASIBLE when no degree plans (the message the asked degree's search gave),
 * AH_ERR_INVALID for a degree the sequence or cluster cannot take, AH_ERR_OOM. */
#define AH_PLANNER_INTERNAL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "plan/evaluate.h"
#include "planner/planner.h"

static const int DEGREES[] = {2, 4, 8};
#define ALL_DEGREES 0xEu /* cp_per_pipeline bits of 2, 4 and 8 */

bool ah_cp_mode_parse(const char *s, int *out) {
    static const char *const names[] = {"auto", "1", "2", "4", "8"};
    static const int values[] = {0, 1, 2, 4, 8};
    for (int i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0) {
            *out = values[i];
            return true;
        }
    return false;
}

unsigned ah_cp_degrees_allowed(const ah_cluster_t *c, const ah_planner_opts_t *o) {
    unsigned mask = 0;
    char why[160];
    for (size_t i = 0; i < sizeof DEGREES / sizeof DEGREES[0]; i++) {
        const unsigned bit = 1u << __builtin_ctz((unsigned)DEGREES[i]);
        if (!(o->cp_per_pipeline & bit)) continue;
        ah_cp_unfit(c, o, DEGREES[i], why, sizeof why);
        bool local = false; /* the exact search's stages are CP groups of one node */
        for (int n = 0; n < c->n_nodes && !local; n++) local = c->nodes[n].count >= DEGREES[i];
        if (!why[0] && local) mask |= bit;
    }
    return mask;
}

/* Replaces best by cand (keeping best's baselines) when cand's key is lower. */
static bool take_if_better(const ah_planner_opts_t *o, bool *have, ah_plan_result_t *best, ah_plan_result_t *cand) {
    const bool better = !*have || ah_planner_key(o, &cand->plan, &cand->eval) < ah_planner_key(o, &best->plan, &best->eval);
    if (!better) {
        ah_plan_result_free(cand);
        return false;
    }
    if (*have) {
        cand->baselines = best->baselines;
        best->baselines = NULL;
        ah_plan_result_free(best);
    }
    *best = *cand;
    *have = true;
    return true;
}

/* view with each GPU type's reserve raised by the most any of its devices exceeds its capacity in
 * e (the expanded plan's evaluation on cluster, whose type table the view shares): the view's
 * plans then leave the room a CP rank needs beyond the view's estimate (the ring's buffers).
 * view->types becomes an allocated copy. False when no device exceeds (nothing to tighten) or out
 * of host memory. */
static bool tighten_view(ah_cluster_t *view, const ah_cluster_t *cluster, const ah_eval_t *e) {
    double *over = calloc((size_t)view->n_types, sizeof *over);
    ah_gpu_type_t *types = malloc(sizeof *types * (size_t)view->n_types);
    bool any = false;
    for (int d = 0; over && types && d < e->n_devices; d++) {
        const double x = (double)(e->devices[d].memory_bytes - e->devices[d].capacity_bytes);
        const int t = cluster->nodes[e->devices[d].node].type;
        if (x > over[t]) over[t] = x, any = true;
    }
    if (any) {
        memcpy(types, view->types, sizeof *types * (size_t)view->n_types);
        for (int t = 0; t < view->n_types; t++) types[t].reserved_gib += over[t] / (1024.0 * 1024 * 1024);
        view->types = types;
    } else
        free(types);
    free(over);
    return any;
}

/* The plan of CP degree cp, its CP groups spanning `span` nodes where the view can (1: node-local),
 * into *out (fits, evaluated), or false with why. Where the view's plan does not fit expanded, the
 * view is searched once more with each type's reserve raised by its devices' overshoot
 * (tighten_view). */
static bool plan_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o, bool auto_half,
                    int cp, int span, ah_plan_result_t *out, ah_error_t *why) {
    ah_cp_view_t view;
    if (ah_cp_view(cluster, o, cp, span, &view, why) != AH_OK) return false;
    ah_plan_result_t r;
    if ((auto_half ? ah_planner_run_auto : ah_planner_run)(model, &view.cluster, &view.opts, &r, why) != AH_OK) {
        ah_cp_view_free(&view);
        return false;
    }
    memset(out, 0, sizeof *out);
    bool fits = false;
    ah_status_t st = ah_cp_expand_fit(&view, &r.plan, cluster, o, &out->plan, &out->eval, &fits, why);
    if (st == AH_OK && !fits && tighten_view(&view.cluster, cluster, &out->eval)) {
        ah_plan_result_t again;
        if ((auto_half ? ah_planner_run_auto : ah_planner_run)(model, &view.cluster, &view.opts, &again, why) == AH_OK) {
            ah_plan_result_free(&r);
            r = again;
            st = ah_cp_expand_fit(&view, &r.plan, cluster, o, &out->plan, &out->eval, &fits, why);
        }
        free(view.cluster.types);
    }
    ah_cp_view_free(&view);
    if (st == AH_OK && !fits)
        ah_error_set(why, AH_ERR_INFEASIBLE, "the CP %d plan of the search's view does not fit, recomputing or not", cp);
    else if (fits && !isfinite(ah_planner_key(o, &out->plan, &out->eval))) {
        fits = false;
        ah_error_set(why, AH_ERR_INFEASIBLE, "the CP %d plan breaks --budget or --min-tokens-per-s (its egress or rate)", cp);
    }
    out->exact = r.exact;
    out->candidates = r.candidates;
    memcpy(out->precision_why, r.precision_why, sizeof out->precision_why);
    memcpy(out->left_out, r.left_out, sizeof out->left_out);
    out->from_baseline = -1;
    ah_plan_result_free(&r);
    if (!fits) {
        ah_plan_result_free(out);
        return false;
    }
    out->plan.has_predicted = true;
    out->plan.predicted = out->eval.pred;
    out->search_value_s = out->search_best_s = out->eval.search_estimate_s;
    out->lower_bound_s = 0;
    ah_result_price(o, out);
    return true;
}

/* The best plan of CP degree cp over its spans (node-local where a node holds cp devices, and
 * across the most alike nodes the cluster has: ah_cp_max_span), into *out; false with why when
 * neither fits. exact_local: the exact search already covered the node-local plans (only
 * spanning ones then). */
static bool plan_cp_spans(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                          bool auto_half, int cp, bool exact_local, ah_plan_result_t *out, ah_error_t *why) {
    bool have = false, local = false;
    for (int n = 0; n < cluster->n_nodes && !local; n++) local = cluster->nodes[n].count >= cp;
    const int spans[2] = {1, ah_cp_max_span(cluster, cp)};
    for (int k = 0; k < 2; k++) {
        if ((k == 0 && (!local || exact_local)) || (k == 1 && spans[1] == 1)) continue;
        ah_plan_result_t r;
        ah_error_t e = {0};
        if (!plan_cp(model, cluster, o, auto_half, cp, spans[k], &r, &e)) {
            if (e.code == AH_ERR_OOM || !have) *why = e;
            if (e.code == AH_ERR_OOM) break;
            continue;
        }
        take_if_better(o, &have, out, &r);
    }
    return have;
}

/* p with pipeline i's CP groups halved (cp c -> c / 2): CP ranks 0 .. c/2 - 1 stay pipeline i,
 * the others become a new last pipeline of the same stages; i's micro-batches split ceil / floor. */
static ah_status_t halve_pipeline(const ah_plan_t *p, int i, ah_plan_t *out, ah_error_t *err) {
    ah_status_t st = ah_plan_init(out, &p->model, &p->train, p->tp, &p->cluster, p->n_pipelines + 1, err);
    for (int q = 0; q <= p->n_pipelines && st == AH_OK; q++) {
        const ah_pipeline_t *src = &p->pipelines[q < p->n_pipelines ? q : i];
        ah_pipeline_t *pl = &out->pipelines[q];
        if ((st = ah_pipeline_alloc(pl, src->n_stages, err)) != AH_OK) break;
        const bool halved = q == i || q == p->n_pipelines, upper = q == p->n_pipelines;
        const int half = p->tp * ah_pipeline_cp(src) / 2;
        pl->schedule = src->schedule;
        pl->cp = halved ? ah_pipeline_cp(src) / 2 : src->cp;
        pl->micro_batches = !halved ? src->micro_batches
                            : upper ? src->micro_batches / 2
                                    : src->micro_batches - src->micro_batches / 2;
        for (int s = 0; s < src->n_stages; s++) {
            pl->stages[s] = src->stages[s];
            if (upper) memmove(pl->stages[s].devices, src->stages[s].devices + half, sizeof(ah_device_ref_t) * (size_t)half);
        }
    }
    if (st != AH_OK) ah_plan_free(out);
    return st;
}

/* Per pipeline (auto): while halving some pipeline's CP degree (its CP ranks then two pipelines,
 * each at half the degree, the micro-batches shared) lowers the whole plan's key and fits, do it,
 * the first such pipeline in plan order each round; so pipelines whose devices hold the sequence
 * at a lower degree (memory-rich types) drop CP while the others keep it. The count of halvings
 * into *halved. AH_ERR_OOM only. */
static ah_status_t refine_per_pipeline(const ah_planner_opts_t *o, ah_plan_result_t *out, int *halved, ah_error_t *err) {
    *halved = 0;
    for (bool again = true; again;) {
        again = false;
        for (int i = 0; i < out->plan.n_pipelines && !again; i++) {
            const ah_pipeline_t *pl = &out->plan.pipelines[i];
            if (ah_pipeline_cp(pl) < 2 || pl->micro_batches < 2) continue;
            ah_plan_t h;
            ah_eval_t e;
            if (halve_pipeline(&out->plan, i, &h, err) != AH_OK) return AH_ERR_OOM;
            ah_error_t why = {0};
            if (ah_plan_validate(&h, &why) != AH_OK || ah_evaluate(&h, o->profile, &e, &why) != AH_OK) {
                ah_plan_free(&h);
                if (why.code == AH_ERR_OOM) return ah_error_set(err, AH_ERR_OOM, "%s", why.msg);
                continue;
            }
            again = e.feasible && ah_planner_key(o, &h, &e) < ah_planner_key(o, &out->plan, &out->eval);
            ah_plan_t *drop_p = again ? &out->plan : &h;
            ah_eval_t *drop_e = again ? &out->eval : &e;
            ah_plan_free(drop_p);
            ah_eval_free(drop_e);
            if (again) {
                out->plan = h;
                out->eval = e;
                ++*halved;
            }
        }
    }
    out->plan.has_predicted = true;
    out->plan.predicted = out->eval.pred;
    out->search_value_s = out->search_best_s = out->eval.search_estimate_s;
    ah_result_price(o, out);
    return AH_OK;
}

/* The GPU types of pipeline i's stages, "A10G+H100" (each once, in stage order), into buf. */
static void types_str(const ah_plan_t *p, int i, char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const ah_pipeline_t *pl = &p->pipelines[i];
    for (int k = 0; k < pl->n_stages; k++) {
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) seen = pl->stages[j].type == pl->stages[k].type;
        if (!seen) ah_str_appendf(&s, "%s%s", k ? "+" : "", p->cluster.types[pl->stages[k].type].name);
    }
}

/* How many nodes pipeline i's first CP group spans (its TP rank 0's CP ranks). */
static int cp_nodes(const ah_plan_t *p, int i) {
    const ah_pipeline_t *pl = &p->pipelines[i];
    int n = 0;
    for (int j = 0; j < ah_pipeline_cp(pl); j++) {
        bool seen = false;
        for (int k = 0; k < j && !seen; k++) seen = pl->stages[0].devices[k * p->tp].node == pl->stages[0].devices[j * p->tp].node;
        n += !seen;
    }
    return n;
}

/* Which pipelines split the sequence, runs of alike pipelines together: "pipelines 0-1 (A10G)
 * split it 2 ways, pipeline 2 (H100) does not", into buf. */
static void pipelines_str(const ah_plan_t *p, char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    for (int i = 0; i < p->n_pipelines;) {
        char ty[96], ty2[96];
        types_str(p, i, ty, sizeof ty);
        const int c = ah_pipeline_cp(&p->pipelines[i]);
        int j = i + 1;
        for (; j < p->n_pipelines && ah_pipeline_cp(&p->pipelines[j]) == c; j++) {
            types_str(p, j, ty2, sizeof ty2);
            if (strcmp(ty, ty2) != 0) break;
        }
        ah_str_appendf(&s, "%s", i ? ", " : "");
        if (j - i > 1) ah_str_appendf(&s, "pipelines %d-%d (%s) ", i, j - 1, ty);
        else ah_str_appendf(&s, "pipeline %d (%s) ", i, ty);
        const int nodes = cp_nodes(p, i);
        if (c > 1 && nodes > 1) ah_str_appendf(&s, "split%s the sequence %d ways across %d nodes", j - i > 1 ? "" : "s", c, nodes);
        else if (c > 1) ah_str_appendf(&s, "split%s the sequence %d ways", j - i > 1 ? "" : "s", c);
        else ah_str_appendf(&s, "do%s not", j - i > 1 ? "" : "es");
        i = j;
    }
}

/* The baselines on the real cluster at r's precision, for a CP result without the plain search's:
 * the verbs report them beside every plan (each one's plan, or why it has none). */
static ah_status_t run_baselines(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                 ah_plan_result_t *r, ah_error_t *err) {
    r->baselines = calloc(AH_BASELINE_COUNT, sizeof *r->baselines);
    if (!r->baselines) return ah_error_set(err, AH_ERR_OOM, "out of host memory for the baselines");
    ah_planner_opts_t ob = *o;
    ob.train.precision = r->plan.train.precision;
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        ah_baseline_out_t *b = &r->baselines[k];
        b->ok = ah_baseline_run(model, cluster, &ob, (ah_baseline_t)k, &b->r, &b->err) == AH_OK;
        if (!b->ok && b->err.code == AH_ERR_OOM) return ah_error_set(err, AH_ERR_OOM, "%s", b->err.msg);
    }
    return AH_OK;
}

/* st, with out freed when it is not AH_OK (the planner's results are freed on every error). */
static ah_status_t out_of_memory(ah_plan_result_t *out, ah_status_t st) {
    if (st != AH_OK) ah_plan_result_free(out);
    return st;
}

static double time_of(const ah_planner_opts_t *o, const ah_plan_result_t *r) { return ah_planner_time_s(o, &r->eval); }

ah_status_t ah_planner_run_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                              bool auto_half, ah_plan_result_t *out, ah_error_t *err) {
    char unfit[160];
    if (o->cp > 1) { /* --cp N */
        ah_cp_unfit(cluster, o, o->cp, unfit, sizeof unfit);
        if (unfit[0]) return ah_error_set(err, AH_ERR_INVALID, "--cp %d: %s; use --cp 1 or auto", o->cp, unfit);
        if (!plan_cp_spans(model, cluster, o, auto_half, o->cp, false, out, err)) {
            ah_error_prefix(err, "--cp %d", o->cp);
            return err->code == AH_OK ? AH_ERR_INFEASIBLE : err->code;
        }
        snprintf(out->cp_why, sizeof out->cp_why,
                 "every pipeline splits the sequence %d ways (--cp %d): %.4f s before the schedule choice", o->cp, o->cp,
                 time_of(o, out));
        return out_of_memory(out, run_baselines(model, cluster, o, out, err));
    }
    ah_status_t st = (auto_half ? ah_planner_run_auto : ah_planner_run)(model, cluster, o, out, err);
    if (o->cp == 1 || (st != AH_OK && st != AH_ERR_INFEASIBLE)) return st;
    bool have = st == AH_OK;
    if (have && o->train.seq_len < AH_CP_AUTO_MIN_SEQ) return AH_OK;
    const double plain_s = have ? time_of(o, out) : INFINITY;
    const ah_error_t plain_err = *err;
    /* every pipeline its own degree, where the exact search covers the instance */
    ah_planner_opts_t op = *o;
    if (have) op.train.precision = out->plan.train.precision;
    op.cp_per_pipeline = ALL_DEGREES;
    bool exact = false;
    /* (auto_half without a plan: the precision is the one ah_planner_run_auto picks); not where TP 1
     * already has more groups than the exact search takes (the search would not be exact) */
    const int max_groups = o->exact_max_groups > 0 ? o->exact_max_groups : 8;
    if (ah_cluster_gpu_count(cluster) <= max_groups && ((auto_half && !have) || ah_cp_degrees_allowed(cluster, &op))) {
        ah_plan_result_t r;
        ah_error_t why = {0};
        if ((auto_half && !have ? ah_planner_run_auto : ah_planner_run)(model, cluster, &op, &r, &why) == AH_OK) {
            exact = r.exact;
            take_if_better(o, &have, out, &r);
        } else if (why.code == AH_ERR_OOM) {
            return out_of_memory(out, ah_error_set(err, AH_ERR_OOM, "%s", why.msg));
        }
    }
    int chosen = 1; /* the one degree of the view's search (exact: CP groups spanning nodes only) */
    for (size_t i = 0; i < sizeof DEGREES / sizeof DEGREES[0]; i++) {
        ah_planner_opts_t oc = *o;
        if (have) oc.train.precision = out->plan.train.precision;
        ah_cp_unfit(cluster, &oc, DEGREES[i], unfit, sizeof unfit);
        ah_plan_result_t r;
        ah_error_t why = {0};
        if (unfit[0] || !plan_cp_spans(model, cluster, &oc, auto_half && !have, DEGREES[i], exact, &r, &why)) {
            if (why.code == AH_ERR_OOM) return out_of_memory(out, ah_error_set(err, AH_ERR_OOM, "%s", why.msg));
            continue;
        }
        if (take_if_better(o, &have, out, &r)) chosen = DEGREES[i];
    }
    if (!have) {
        *err = plain_err;
        return st;
    }
    if (!out->baselines && run_baselines(model, cluster, o, out, err) != AH_OK) return out_of_memory(out, AH_ERR_OOM);
    int halved = 0;
    const double all_s = time_of(o, out);
    if (chosen > 1 && refine_per_pipeline(o, out, &halved, err) != AH_OK) return out_of_memory(out, AH_ERR_OOM);
    char how[160], which[384];
    if (exact && chosen == 1)
        snprintf(how, sizeof how, "each pipeline's degree searched exactly");
    else if (halved)
        snprintf(how, sizeof how, "CP %d for all searched, then halved per pipeline: %.4f s at %d", chosen, all_s, chosen);
    else
        snprintf(how, sizeof how, "one CP degree for all searched");
    pipelines_str(&out->plan, which, sizeof which);
    bool split = false;
    for (int i = 0; i < out->plan.n_pipelines; i++) split |= ah_pipeline_cp(&out->plan.pipelines[i]) > 1;
    if (split && isfinite(plain_s))
        snprintf(out->cp_why, sizeof out->cp_why, "%s (%s): %.4f s against %.4f s unsplit (before the schedule choice)",
                 which, how, time_of(o, out), plain_s);
    else if (split)
        snprintf(out->cp_why, sizeof out->cp_why, "%s (%s): %.4f s before the schedule choice; nothing fits unsplit", which,
                 how, time_of(o, out));
    else
        snprintf(out->cp_why, sizeof out->cp_why,
                 "no pipeline splits the sequence: no CP degree (2, 4, 8) beat %.4f s (before the schedule choice)", plain_s);
    return AH_OK;
}
