/* The schedule of each pipeline (planner.h ah_planner_choose_schedules, --schedule).
 *
 * The search weighs 1F1B pipelines only (its closed form, plan/replay.h); the schedules are chosen
 * on the plan it built, group by group of alike pipelines (a template's copies), in plan order.
 * Every option is priced by evaluating the whole plan with the group's pipelines rebuilt under it
 * (ah_evaluate: the schedule's own replay over the pipeline's mixed stage times, its in-flight
 * activations in the memory rule, the DP sync as the overlap leaves it), so the choice is exact in
 * the cost model over a group's options given the groups before it; groups interact only through
 * the iteration's max and the shared DP sync, and a group's own pipeline time breaks ties, so each
 * pipeline ends on its fastest option that does not slow the iteration. It is not a joint search
 * over pipeline sets and schedules: a pipeline set the search ranked below the chosen one under
 * 1F1B is not re-weighed with schedules (docs/planner.md "Schedules"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/planner.h"

#include "core/str.h"

typedef struct {
    ah_schedule_t sched;
    int v; /* interleaved: stages per device; else 1 */
} option_t;

static const char *const MODE_NAMES[] = {"auto", "1f1b", "interleaved", "zero-bubble"};

bool ah_schedule_mode_parse(const char *s, ah_schedule_mode_t *out) {
    const int i = ah_str_index(s, MODE_NAMES, 4);
    if (i >= 0) *out = (ah_schedule_mode_t)i;
    return i >= 0;
}

double ah_planner_time_s(const ah_planner_opts_t *o, const ah_eval_t *e) {
    return ah_plan_priced_iteration_s(e, !o->no_overlap_grad_sync);
}

static int options(const ah_planner_opts_t *o, int v_max, option_t *out);

ah_bound_space_t ah_planner_space(const ah_planner_opts_t *o) {
    option_t probe[3];
    return (ah_bound_space_t){.any_schedule = options(o, 2, probe) > 1, .overlap = !o->no_overlap_grad_sync};
}

/* Whether pipelines a and b of p are alike: the same stages (layers, type, recomputation), hops on
 * the same kind of link, micro-batches, schedule and CP degree, so every option prices them alike. */
static bool alike(const ah_plan_t *p, int a, int b) {
    const ah_pipeline_t *x = &p->pipelines[a], *y = &p->pipelines[b];
    if (x->n_stages != y->n_stages || x->micro_batches != y->micro_batches || x->schedule != y->schedule ||
        ah_pipeline_cp(x) != ah_pipeline_cp(y))
        return false;
    for (int s = 0; s < x->n_stages; s++) {
        const ah_stage_t *u = &x->stages[s], *w = &y->stages[s];
        if (u->first != w->first || u->last != w->last || u->type != w->type || u->recompute != w->recompute)
            return false;
        if (s + 1 < x->n_stages &&
            ah_link_between(&p->cluster, u->devices[0].node, x->stages[s + 1].devices[0].node) !=
                ah_link_between(&p->cluster, w->devices[0].node, y->stages[s + 1].devices[0].node))
            return false;
    }
    return true;
}

/* base (a 1F1B pipeline: one stage per device) under option o into out: interleaved cuts each
 * device's blocks into v chunks in order (the first chunks one more when they do not divide),
 * stage q = c P + d holding device d's chunk c; rc_all turns recomputation on everywhere. */
static ah_status_t build(const ah_pipeline_t *base, option_t o, bool rc_all, ah_pipeline_t *out, ah_error_t *err) {
    const int P = base->n_stages, S = P * o.v;
    ah_status_t st = ah_pipeline_alloc(out, S, err);
    if (st != AH_OK) return st;
    out->micro_batches = base->micro_batches;
    out->schedule = o.sched;
    out->cp = base->cp;
    int first = base->stages[0].first;
    for (int q = 0; q < S; q++) {
        const int c = q / P, d = q % P;
        const ah_stage_t *b = &base->stages[d];
        const int nb = b->last - b->first, k = nb / o.v + (c < nb % o.v ? 1 : 0);
        out->stages[q] = *b;
        out->stages[q].first = first;
        out->stages[q].last = first += k;
        if (rc_all) out->stages[q].recompute = true;
    }
    return AH_OK;
}

/* Why option o cannot run on base (NULL when it can). */
static const char *cannot(const ah_pipeline_t *base, option_t o) {
    const int P = base->n_stages;
    if (o.sched == AH_SCHED_1F1B) return NULL;
    if (P < 2) return "needs two stages or more";
    if (o.sched != AH_SCHED_INTERLEAVED) return NULL;
    if (base->micro_batches % P) return "needs micro-batches in multiples of its devices";
    for (int d = 0; d < P; d++)
        if (base->stages[d].last - base->stages[d].first < o.v) return "needs a block per chunk on every device";
    return NULL;
}

/* The options --schedule allows, 1F1B first; the interleaved ones up to v_max. */
static int options(const ah_planner_opts_t *o, int v_max, option_t *out) {
    int n = 0;
    out[n++] = (option_t){AH_SCHED_1F1B, 1};
    const bool any = o->schedule == AH_SCHEDULE_AUTO;
    if ((any || o->schedule == AH_SCHEDULE_ONLY_ZERO_BUBBLE) &&
        (!o->schedule_trainable_only || ah_schedule_runtime_runs(AH_SCHED_ZERO_BUBBLE)))
        out[n++] = (option_t){AH_SCHED_ZERO_BUBBLE, 1};
    if ((any || o->schedule == AH_SCHEDULE_ONLY_INTERLEAVED) &&
        (!o->schedule_trainable_only || ah_schedule_runtime_runs(AH_SCHED_INTERLEAVED)))
        for (int v = 2; v <= v_max && v <= AH_PLAN_MAX_VIRTUAL; v++) out[n++] = (option_t){AH_SCHED_INTERLEAVED, v};
    return n;
}

/* One group's pricing: the plan with the group's pipelines under each option. */
typedef struct {
    const ah_planner_opts_t *o;
    ah_plan_result_t *out;
    const ah_plan_t *base; /* the search's plan: every pipeline 1F1B */
    const int *members;
    int n_members;
    bool forced;           /* --schedule names one: it wins wherever it fits */
    double best_key[3];    /* (1F1B under a forced schedule, the objective's value (ah_planner_key:
                            * time, or $ with the egress the schedule's hops send), the group's own
                            * pipeline time) */
    option_t best;
    bool best_rc;
    ah_eval_t best_eval;
    double f1b_group_s;    /* the group's pipeline time under 1F1B */
    const char *why_not;   /* why the schedule asked for cannot run here (NULL: it does not fit) */
    int tried;             /* options other than 1F1B priced */
} group_t;

static bool key_less(const double *a, const double *b) {
    for (int k = 0; k < 3; k++) {
        const double tol = 1e-12 * fmax(1, fabs(b[k]));
        if (a[k] < b[k] - tol) return true;
        if (a[k] > b[k] + tol) return false;
    }
    return false;
}

/* Prices option opt (recomputation everywhere with rc_all) for the group; keeps it when better.
 * *fits: it fit. AH_ERR_OOM only (an option the validator refuses is skipped: not a plan). */
static ah_status_t try_option(group_t *g, option_t opt, bool rc_all, bool *fits, ah_error_t *err) {
    ah_plan_t *p = &g->out->plan;
    *fits = false;
    ah_pipeline_t *saved = malloc(sizeof *saved * (size_t)g->n_members);
    if (!saved) return ah_error_set(err, AH_ERR_OOM, "out of host memory pricing the schedules");
    ah_status_t st = AH_OK;
    int built = 0;
    for (; built < g->n_members && st == AH_OK; built++) {
        const int i = g->members[built];
        ah_pipeline_t next = {0};
        st = build(&g->base->pipelines[i], opt, rc_all, &next, err);
        saved[built] = p->pipelines[i];
        p->pipelines[i] = next;
    }
    if (st == AH_OK && g->base->n_opt_groups > 0) st = ah_planner_reshard_like(p, g->base, g->o->shard_spread_only, err);
    ah_error_t quiet;
    ah_eval_t e = {0};
    bool have = false;
    if (st == AH_OK && ah_plan_validate(p, &quiet) == AH_OK) {
        st = ah_evaluate(p, g->o->profile, &e, err);
        have = st == AH_OK;
    }
    if (have && e.feasible) {
        double group_s = 0;
        for (int k = 0; k < g->n_members; k++) group_s = fmax(group_s, e.pipelines[g->members[k]].time_s);
        if (opt.sched == AH_SCHED_1F1B && !rc_all) g->f1b_group_s = group_s;
        const double key[3] = {g->forced && opt.sched == AH_SCHED_1F1B ? 1 : 0, ah_planner_key(g->o, p, &e), group_s};
        *fits = true;
        if (!g->best_eval.pipelines || key_less(key, g->best_key)) {
            memcpy(g->best_key, key, sizeof key);
            g->best = opt;
            g->best_rc = rc_all;
            ah_eval_free(&g->best_eval);
            g->best_eval = e;
            have = false; /* kept */
        }
    }
    if (have) ah_eval_free(&e);
    for (int k = 0; k < built; k++) { /* back to the plan as it was */
        const int i = g->members[k];
        free(p->pipelines[i].stages);
        p->pipelines[i] = saved[k];
    }
    free(saved);
    /* the shards as the plan had them: redrawn alike for the pipelines it is back to */
    if (st == AH_OK && g->base->n_opt_groups > 0) st = ah_planner_reshard_like(p, g->base, g->o->shard_spread_only, err);
    return st;
}

/* One clause of the note for the group: its choice and what it bought against 1F1B. */
static void say_choice(const group_t *g, const ah_pipeline_t *first, ah_str_t *why) {
    const int i = g->members[0];
    const double own = g->best_key[2];
    if (g->best.sched == AH_SCHED_1F1B && !g->forced && g->tried == 0) return; /* nothing else could run */
    ah_str_appendf(why, "%spipeline %d", why->len ? "; " : "", i);
    if (g->n_members > 1) ah_str_appendf(why, " (and %d alike)", g->n_members - 1);
    ah_str_appendf(why, " (%d stage%s, %lld micro-batches): ", first->n_stages, first->n_stages == 1 ? "" : "s",
                   (long long)first->micro_batches);
    if (g->best.sched == AH_SCHED_1F1B) {
        if (g->forced)
            ah_str_appendf(why, "1f1b (the schedule asked for %s), %.4f s",
                           g->why_not ? g->why_not : "does not fit, even with recomputation everywhere", own);
        else ah_str_appendf(why, "1f1b, %.4f s (no other schedule beats it or fits)", own);
        return;
    }
    ah_str_appendf(why, "%s", ah_schedule_name(g->best.sched));
    if (g->best.sched == AH_SCHED_INTERLEAVED) ah_str_appendf(why, " with %d stages per device", g->best.v);
    if (g->best_rc) ah_str_appendf(why, " and recomputation everywhere (to fit its activations)");
    if (g->f1b_group_s > 0)
        ah_str_appendf(why, ", %.4f s instead of 1f1b's %.4f s (%.4f s %s)", own, g->f1b_group_s,
                       fabs(g->f1b_group_s - own),
                       own <= g->f1b_group_s ? "less" : g->forced ? "more: asked for" : "more, the iteration shorter");
    else ah_str_appendf(why, ", %.4f s (1f1b does not fit)", own);
}

/* Prices every option for the group of pipeline `lead` and leaves its best in the plan. */
static ah_status_t choose_group(group_t *g, ah_str_t *why, ah_error_t *err) {
    const ah_pipeline_t *first = &g->base->pipelines[g->members[0]];
    int v_max = INT32_MAX;
    for (int d = 0; d < first->n_stages; d++)
        if (first->stages[d].last - first->stages[d].first < v_max) v_max = first->stages[d].last - first->stages[d].first;
    option_t *opts = malloc(sizeof *opts * (size_t)(2 + (v_max > 1 ? v_max : 1)));
    if (!opts) return ah_error_set(err, AH_ERR_OOM, "out of host memory pricing the schedules");
    const int n = options(g->o, v_max, opts);
    ah_status_t st = AH_OK;
    bool rc_everywhere = true;
    for (int d = 0; d < first->n_stages; d++) rc_everywhere = rc_everywhere && first->stages[d].recompute;
    for (int k = 0; k < n && st == AH_OK; k++) {
        if (cannot(first, opts[k])) {
            if (k == 1) g->why_not = cannot(first, opts[k]); /* the first after 1F1B: the one asked for */
            continue;
        }
        bool fits;
        g->tried += opts[k].sched != AH_SCHED_1F1B;
        st = try_option(g, opts[k], false, &fits, err);
        if (st == AH_OK && !fits && !rc_everywhere) st = try_option(g, opts[k], true, &fits, err);
    }
    free(opts);
    if (st != AH_OK || !g->best_eval.pipelines) return st;
    ah_plan_t *p = &g->out->plan;
    for (int k = 0; k < g->n_members && st == AH_OK; k++) {
        const int i = g->members[k];
        ah_pipeline_t next = {0};
        st = build(&g->base->pipelines[i], g->best, g->best_rc, &next, err);
        if (st != AH_OK) break;
        free(p->pipelines[i].stages);
        p->pipelines[i] = next;
    }
    if (st == AH_OK && g->base->n_opt_groups > 0) st = ah_planner_reshard_like(p, g->base, g->o->shard_spread_only, err);
    ah_eval_free(&g->out->eval);
    g->out->eval = g->best_eval;
    g->best_eval = (ah_eval_t){0};
    say_choice(g, first, why);
    return st;
}

static ah_status_t choose_schedules(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err) {
    ah_str_t why = ah_str_fixed(out->schedule_why, sizeof out->schedule_why);
    option_t probe[3];
    if (options(o, 2, probe) == 1) return AH_OK; /* 1F1B alone */
    ah_plan_t *p = &out->plan;
    ah_plan_t base;
    ah_status_t st = ah_plan_copy(p, &base, err);
    if (st != AH_OK) return st;
    int *members = malloc(sizeof *members * (size_t)p->n_pipelines);
    bool *done = calloc((size_t)p->n_pipelines, sizeof *done);
    if (!members || !done) st = ah_error_set(err, AH_ERR_OOM, "out of host memory pricing the schedules");
    for (int i = 0; i < p->n_pipelines && st == AH_OK; i++) {
        if (done[i] || base.pipelines[i].schedule != AH_SCHED_1F1B) continue;
        group_t g = {.o = o, .out = out, .base = &base, .members = members,
                     .forced = o->schedule != AH_SCHEDULE_AUTO};
        for (int j = i; j < p->n_pipelines; j++)
            if (!done[j] && alike(&base, i, j)) members[g.n_members++] = j, done[j] = true;
        st = choose_group(&g, &why, err);
        ah_eval_free(&g.best_eval);
    }
    free(members);
    free(done);
    ah_plan_free(&base);
    if (st != AH_OK) return st;
    for (int i = 0; i < p->n_pipelines; i++)
        out->untrainable = out->untrainable || !ah_schedule_runtime_runs(p->pipelines[i].schedule);
    p->has_predicted = true;
    p->predicted = out->eval.pred;
    out->search_value_s = out->eval.search_estimate_s;
    ah_result_price(o, out);
    return AH_OK;
}

ah_status_t ah_planner_choose_schedules(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err) {
    const ah_status_t st = choose_schedules(o, out, err);
    return st == AH_OK ? ah_planner_choose_dp_sync(o, out, err) : st;
}
