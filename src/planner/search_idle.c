/* Why the chosen plan leaves GPUs of a type idle (the report's "idle:" line). The search keeps,
 * per GPU type and number of its GPUs used, the best eligible candidate (search.c, note_types);
 * for each type that can run the precision and of which the chosen plan leaves GPUs idle, the
 * best candidate using more of them than the chosen plan does is built into a plan, evaluated
 * like the chosen one, and compared: how much slower it is and which terms of the breakdown grow
 * (time objective), or how much dearer per token, from its $/h and its iteration time (cost
 * objective). The candidate is the best the search scored, not proven the best with that many:
 * the search skips what its bound says cannot beat the best so far. */
#define AH_PLANNER_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#include "core/names.h"
#include "core/str.h"

/* "H20, 8 GPUs on h20-0" (none used) or "A100, 6 of 8 GPUs used, on a100-0, a100-1" */
static void name_type(const ah_cluster_t *c, int k, int used, ah_str_t *s) {
    const char **names = malloc(sizeof *names * (size_t)c->n_nodes);
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].type == k && names) names[n++] = c->nodes[i].name;
    if (used == 0)
        ah_str_appendf(s, "%s, %d GPUs on ", c->types[k].name, ah_cluster_type_gpus(c, k));
    else
        ah_str_appendf(s, "%s, %d of %d GPUs used, on ", c->types[k].name, used, ah_cluster_type_gpus(c, k));
    if (names) ah_names_append(s, names, n, ", ", 6);
    free(names);
}

/* The breakdown terms that move from `chosen` to `with` by more than 1 % of the chosen
 * iteration: those that grow, largest first, at most three ("DP sync 3.90 s (chosen 0.39)"),
 * then the one that shrinks most ("against compute 26.9 s (chosen 28.4)"). */
static void name_terms(const ah_breakdown_t *with, const ah_breakdown_t *chosen, double chosen_s, ah_str_t *s) {
    const char *names[] = {"compute", "TP comm", "bubble", "p2p", "DP sync", "optimizer"};
    const double w[] = {with->compute_s, with->tp_comm_s, with->bubble_s, with->p2p_s, with->dp_sync_s,
                        with->optimizer_s};
    const double c[] = {chosen->compute_s, chosen->tp_comm_s, chosen->bubble_s, chosen->p2p_s, chosen->dp_sync_s,
                        chosen->optimizer_s};
    bool used[6] = {false};
    int listed = 0;
    for (; listed < 3; listed++) {
        int pick = -1;
        for (int i = 0; i < 6; i++)
            if (!used[i] && w[i] - c[i] > 0.01 * chosen_s && (pick < 0 || w[i] - c[i] > w[pick] - c[pick])) pick = i;
        if (pick < 0) break;
        used[pick] = true;
        ah_str_appendf(s, "%s %s %.4g s (chosen %.4g)", listed ? "," : ":", names[pick], w[pick], c[pick]);
    }
    if (listed == 0) ah_str_appendf(s, ": no term of the breakdown grows by more than 1 %%");
    int gain = -1;
    for (int i = 0; i < 6; i++)
        if (c[i] - w[i] > 0.01 * chosen_s && (gain < 0 || c[i] - w[i] > c[gain] - w[gain])) gain = i;
    if (gain >= 0) ah_str_appendf(s, ", against %s %.4g s (chosen %.4g)", names[gain], w[gain], c[gain]);
}

/* ", +4.2 % on the chosen plan's" (ratio: the evaluated figure over the chosen plan's). Below 1 the
 * search still ranked it behind: it ranks the candidates by its own estimate of the iteration
 * (value_s; the chosen plan's chosen_s), not by the evaluation, so that is said with both. */
static void compared(ah_str_t *s, double ratio, double value_s, double chosen_s) {
    if (ratio >= 1) {
        ah_str_appendf(s, ", %+.1f %% on the chosen plan's", 100.0 * (ratio - 1));
        return;
    }
    ah_str_appendf(s, ", %.1f %% less than the chosen plan's as evaluated, though the search's own estimate, "
                      "by which it ranks the candidates, put it at %.4f s per iteration against the chosen "
                      "plan's %.4f s",
                   100.0 * (1 - ratio), value_s, chosen_s);
}

/* The plan of b (using `gpus` GPUs of the type; 0: the type was unused), evaluated, compared
 * with the chosen plan, into s. */
static void compare_with(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                         ah_type_best_t *b, int gpus, const ah_plan_result_t *out, ah_str_t *s) {
    ah_error_t err = {0};
    ah_plan_t plan = {0};
    ah_eval_t ev = {0};
    double value;
    const bool ok = ah_cand_plan(model, cluster, o, b->t, b->m, &b->cand, &value, &plan, &err) == AH_OK &&
                    ah_evaluate(&plan, o->profile, &ev, &err) == AH_OK;
    if (!ok) {
        ah_str_appendf(s, ": no plan with them could be rebuilt for comparison");
    } else {
        const double it = ah_planner_time_s(o, &ev), chosen = ah_planner_time_s(o, &out->eval); /* as compared, priced */
        if (gpus == 0)
            ah_str_appendf(s, ": the best plan with them that the search scored (");
        else
            ah_str_appendf(s, ": the best plan with more of them that the search scored (%d of them, ", gpus);
        ah_str_appendf(s, "TP %d, micro-batch %lld, %d pipeline%s) ", plan.tp, (long long)plan.train.micro_batch,
                       plan.n_pipelines, plan.n_pipelines == 1 ? "" : "s");
        if (o->objective == AH_OBJECTIVE_COST) {
            ah_plan_traffic_t traffic;
            ah_plan_traffic(&plan, &traffic);
            const double usd_h = ah_plan_usd_per_hour_at(&plan, &traffic, it, NULL);
            const double usd = usd_h / ah_usd_per_hour_at(1, it) / (double)(plan.train.global_batch * plan.train.seq_len) * 1e6;
            ah_str_appendf(s, "costs $%.4f per million tokens", usd);
            if (out->usd_per_mtoken > 0) /* a plan of $0 GPUs has no ratio */
                compared(s, usd / out->usd_per_mtoken, value, out->search_value_s);
            ah_str_appendf(s, ": $%.2f/h for %.4f s per iteration (chosen $%.2f/h for %.4f s)", usd_h,
                           it, out->usd_per_hour, chosen);
        } else {
            ah_str_appendf(s, "takes %.4f s per iteration", it);
            compared(s, it / chosen, value, out->search_value_s);
            name_terms(&ev.pred.breakdown, &out->eval.pred.breakdown, chosen, s);
        }
    }
    ah_eval_free(&ev);
    ah_plan_free(&plan);
}

void ah_idle_explain(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                     ah_type_best_t *by_type, const int *type_base, ah_plan_result_t *out) {
    ah_str_t s = ah_str_fixed(out->idle_why, sizeof out->idle_why);
    const ah_plan_t *p = &out->plan;
    for (int k = 0; k < cluster->n_types; k++) {
        if (!ah_gpu_runs(&cluster->types[k], p->train.precision)) continue; /* said by "left out:" */
        const int total = ah_cluster_type_gpus(cluster, k);
        int used = 0;
        for (int i = 0; i < p->n_pipelines; i++)
            for (int j = 0, P = ah_pipeline_groups(&p->pipelines[i]); j < P; j++) /* devices, once each */
                used += p->pipelines[i].stages[j].type == k ? ah_stage_devices(&p->pipelines[i], p->tp) : 0;
        if (used >= total) continue;
        int pick = 0; /* the best kept candidate using more of the type than the chosen plan */
        for (int g = used + 1; g <= total; g++) {
            const ah_type_best_t *b = &by_type[type_base[k] + g];
            if (b->have && (!pick || b->key < by_type[type_base[k] + pick].key)) pick = g;
        }
        if (s.len) ah_str_appendf(&s, "; ");
        name_type(cluster, k, used, &s);
        if (pick)
            compare_with(model, cluster, o, &by_type[type_base[k] + pick], used ? pick : 0, out, &s);
        else
            ah_str_appendf(&s, ": no plan with %s was scored (each was cut by the search's bound, broke a "
                               "constraint or did not fit)", used ? "more of them" : "them");
    }
    static const char cut[] = " ... (cut)";
    if (s.failed && sizeof out->idle_why > sizeof cut) /* said, not silently clipped */
        memcpy(out->idle_why + sizeof out->idle_why - sizeof cut, cut, sizeof cut);
}
