/* The planner's schedules (issue 35; planner.h ah_planner_choose_schedules, --schedule): on
 * paper-24 with few micro-batches (where 1F1B idles) --schedule auto beats 1F1B alone and says
 * what each choice bought; a plan made to train (run, the agent, simulate) has only schedules the
 * runtime runs; --schedule interleaved / zero-bubble put every pipeline that can run it on it;
 * megatron-best runs Megatron-Core's interleaved 1F1B (one virtual-stage count for all) where it
 * is faster, and 1F1B under --schedule 1f1b; the reported bound is over the larger space and
 * below the plan; --no-overlap-grad-sync compares by the whole sync. The exactness of the choice
 * against every combination is in test_planner_exact.c. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "planner/planner.h"
#include "runtime/gpt.h"

static ah_model_t model;
static ah_cluster_t cluster;

static void plan_with(const ah_planner_opts_t *o, ah_plan_result_t *r) {
    ah_error_t err = {0};
    const ah_status_t st = ah_planner_run_sharded(&model, &cluster, o, false, r, &err);
    CHECK(st == AH_OK, "planner: %s", err.msg);
    if (st != AH_OK) memset(r, 0, sizeof *r);
}

static int count_schedule(const ah_plan_t *p, ah_schedule_t s) {
    int n = 0;
    for (int i = 0; i < p->n_pipelines; i++) n += p->pipelines[i].schedule == s;
    return n;
}

/* Whether pipeline i could run sched (as ah_planner_choose_schedules would build it). */
static bool could_run(const ah_plan_t *p, int i, ah_schedule_t sched) {
    const ah_pipeline_t *pl = &p->pipelines[i];
    const int P = ah_pipeline_groups(pl);
    if (P < 2) return false;
    if (sched == AH_SCHED_ZERO_BUBBLE) return true;
    for (int d = 0; d < P; d++)
        if (pl->stages[d].last - pl->stages[d].first < 2) return false;
    return pl->micro_batches % P == 0;
}

static void check_forced(const ah_planner_opts_t *base, ah_schedule_mode_t mode, ah_schedule_t sched, int64_t batch) {
    ah_planner_opts_t o = *base;
    o.schedule = mode;
    o.train.global_batch = batch;
    ah_plan_result_t r;
    plan_with(&o, &r);
    if (!r.plan.pipelines) return;
    CHECK(count_schedule(&r.plan, sched) > 0, "--schedule %s: no pipeline runs it (%s)", ah_schedule_name(sched),
          r.schedule_why);
    for (int i = 0; i < r.plan.n_pipelines; i++)
        if (r.plan.pipelines[i].schedule != sched)
            CHECK(!could_run(&r.plan, i, sched) || r.plan.pipelines[i].schedule == AH_SCHED_1F1B,
                  "--schedule %s: pipeline %d runs %s", ah_schedule_name(sched), i,
                  ah_schedule_name(r.plan.pipelines[i].schedule));
    CHECK(count_schedule(&r.plan, sched == AH_SCHED_ZERO_BUBBLE ? AH_SCHED_INTERLEAVED : AH_SCHED_ZERO_BUBBLE) == 0,
          "--schedule %s: a pipeline runs the other schedule", ah_schedule_name(sched));
    ah_plan_result_free(&r);
}

/* megatron-best: one schedule and one virtual-stage count for every pipeline; interleaved when
 * --schedule allows it and that is faster; 1F1B under --schedule 1f1b. */
static void check_megatron(const ah_planner_opts_t *o) {
    ah_plan_result_t up, train;
    ah_error_t err;
    ah_planner_opts_t t = *o;
    t.schedule = AH_SCHEDULE_ONLY_1F1B;
    const bool ok = ah_baseline_run(&model, &cluster, o, AH_BASELINE_MEGATRON_BEST, &up, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    if (!ok) return;
    if (ah_baseline_run(&model, &cluster, &t, AH_BASELINE_MEGATRON_BEST, &train, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        ah_plan_result_free(&up);
        return;
    }
    const ah_pipeline_t *p0 = &up.plan.pipelines[0];
    for (int i = 0; i < up.plan.n_pipelines; i++)
        CHECK(up.plan.pipelines[i].schedule == p0->schedule && up.plan.pipelines[i].n_stages == p0->n_stages,
              "megatron-best: pipeline %d differs from pipeline 0", i);
    CHECK(p0->schedule == AH_SCHED_INTERLEAVED && p0->n_stages / ah_pipeline_groups(p0) >= 2,
          "megatron-best does not run interleaved here (%s, %d stages on %d devices)", ah_schedule_name(p0->schedule),
          p0->n_stages, ah_pipeline_groups(p0));
    CHECK(count_schedule(&train.plan, AH_SCHED_1F1B) == train.plan.n_pipelines,
          "megatron-best under --schedule 1f1b runs another schedule");
    CHECK(ah_planner_time_s(o, &up.eval) < ah_planner_time_s(o, &train.eval), "interleaved megatron-best %.6f s is not "
          "faster than its 1F1B %.6f s", ah_planner_time_s(o, &up.eval), ah_planner_time_s(o, &train.eval));
    printf("megatron-best: interleaved, %d stages per device, %.4f s (1F1B: %.4f s)\n",
           p0->n_stages / ah_pipeline_groups(p0), ah_planner_time_s(o, &up.eval), ah_planner_time_s(o, &train.eval));
    ah_plan_result_free(&up);
    ah_plan_result_free(&train);
}

int main(void) {
    ah_error_t err;
    CHECK(ah_model_load("llama2-13b", &model, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_cluster_open(ah_test_src_path("examples/clusters/paper-24.json"), &cluster, &err) == AH_OK, "%s", err.msg);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 32;
    o.train.seq_len = 2048;

    CHECK(AH_PLAN_MAX_VIRTUAL == AH_GPT_MAX_CHUNKS, "the planner offers %d stages per device, the runtime runs %d",
          AH_PLAN_MAX_VIRTUAL, AH_GPT_MAX_CHUNKS);
    ah_schedule_mode_t mode;
    CHECK(ah_schedule_mode_parse("zero-bubble", &mode) && mode == AH_SCHEDULE_ONLY_ZERO_BUBBLE, "parse zero-bubble");
    CHECK(!ah_schedule_mode_parse("gpipe", &mode), "gpipe parsed");

    ah_plan_result_t all, only;
    plan_with(&o, &all);
    ah_planner_opts_t f = o;
    f.schedule = AH_SCHEDULE_ONLY_1F1B;
    plan_with(&f, &only);
    if (all.plan.pipelines && only.plan.pipelines) {
        const double a = ah_planner_time_s(&o, &all.eval), b = ah_planner_time_s(&o, &only.eval);
        printf("auto %.4f s, 1f1b %.4f s (%.3fx): %s\n", a, b, b / a, all.schedule_why);
        CHECK(a < b, "schedules %.6f s not faster than 1F1B alone %.6f s", a, b);
        CHECK(count_schedule(&all.plan, AH_SCHED_1F1B) < all.plan.n_pipelines && all.schedule_why[0],
              "auto: no schedule but 1F1B chosen, or not said");
        bool untrainable = false;
        for (int i = 0; i < all.plan.n_pipelines; i++)
            untrainable = untrainable || !ah_schedule_runtime_runs(all.plan.pipelines[i].schedule);
        CHECK(all.untrainable == untrainable, "untrainable is not what ah_schedule_runtime_runs says of the plan");
        CHECK(!only.untrainable && !only.schedule_why[0] &&
                  count_schedule(&only.plan, AH_SCHED_1F1B) == only.plan.n_pipelines,
              "--schedule 1f1b: a pipeline runs another schedule");
        CHECK(all.lower_bound_s > 0 && all.lower_bound_s <= a, "bound %.6f s over any schedule, plan %.6f s",
              all.lower_bound_s, a);
        CHECK(only.lower_bound_s >= all.lower_bound_s, "the 1F1B space's bound %.6f s below the larger space's %.6f s",
              only.lower_bound_s, all.lower_bound_s);
    }
    ah_plan_result_free(&all);
    ah_plan_result_free(&only);

    ah_planner_opts_t t = o; /* run, the agent, simulate */
    t.schedule_trainable_only = true;
    ah_plan_result_t tr;
    plan_with(&t, &tr);
    for (int i = 0; tr.plan.pipelines && i < tr.plan.n_pipelines; i++)
        CHECK(ah_schedule_runtime_runs(tr.plan.pipelines[i].schedule), "a plan to train has pipeline %d %s", i,
              ah_schedule_name(tr.plan.pipelines[i].schedule));
    CHECK(!tr.untrainable, "a plan to train is said untrainable");
    ah_error_t e2;
    if (tr.plan.pipelines) CHECK(ah_plan_check(&tr.plan, NULL, &e2) == AH_OK, "train refuses run's plan: %s", e2.msg);
    ah_plan_result_free(&tr);

    /* 72: a micro-batch split the pipelines' devices divide (interleaved needs it) */
    check_forced(&o, AH_SCHEDULE_ONLY_INTERLEAVED, AH_SCHED_INTERLEAVED, 72);
    check_forced(&o, AH_SCHEDULE_ONLY_ZERO_BUBBLE, AH_SCHED_ZERO_BUBBLE, 32);
    check_megatron(&o);

    /* --no-overlap-grad-sync: plans compared by the whole sync, and the bound with it */
    ah_planner_opts_t w = o;
    w.no_overlap_grad_sync = true;
    ah_plan_result_t whole;
    plan_with(&w, &whole);
    if (whole.plan.pipelines)
        CHECK(whole.lower_bound_s <= whole.eval.pred.iteration_s && ah_planner_time_s(&w, &whole.eval) ==
                                                                         whole.eval.pred.iteration_s,
              "--no-overlap-grad-sync: bound %.6f s, plan %.6f s", whole.lower_bound_s, whole.eval.pred.iteration_s);
    ah_plan_result_free(&whole);
    ah_cluster_free(&cluster);
    return ah_test_finish();
}
