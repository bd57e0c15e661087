/* Baselines and planner API: the uniform baseline is symmetric (identical pipelines, layers per
 * stage within one, equal micro-batches) and fits the smallest GPU; batch-balanced keeps the
 * structure and gives faster pipelines at least as many micro-batches; the planner is never slower
 * than either and its own value equals ah_evaluate's (template mode too); the cost objective is
 * never dearer per token than the time objective, and with held_usd_per_hour (a run paying every
 * node it holds) it trains on more of them than the plan priced by the GPUs it uses; bad inputs give
 * clear errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "planner/planner.h"

static void check_uniform(const ah_plan_result_t *r) {
    const ah_plan_t *p = &r->plan;
    const ah_pipeline_t *p0 = &p->pipelines[0];
    int64_t smallest = INT64_MAX;
    for (int d = 0; d < r->eval.n_devices; d++)
        if (r->eval.devices[d].capacity_bytes < smallest) smallest = r->eval.devices[d].capacity_bytes;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        CHECK_EQ_I64(pl->n_stages, p0->n_stages);
        CHECK_EQ_I64(pl->micro_batches, p0->micro_batches);
        for (int s = 0; s < pl->n_stages; s++) {
            CHECK_EQ_I64(pl->stages[s].first, p0->stages[s].first);
            CHECK_EQ_I64(pl->stages[s].last, p0->stages[s].last);
            int len = pl->stages[s].last - pl->stages[s].first, len0 = p0->stages[0].last - p0->stages[0].first;
            CHECK(len == len0 || len == len0 - 1, "uniform stage %d holds %d layers, stage 0 %d", s, len, len0);
        }
    }
    for (int d = 0; d < r->eval.n_devices; d++)
        CHECK(r->eval.devices[d].memory_bytes <= smallest, "uniform device %d exceeds the smallest GPU", d);
}

static void check_balanced(const ah_plan_result_t *r) {
    const ah_plan_t *p = &r->plan;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int j = 0; j < p->n_pipelines; j++) {
            const ah_stage_eval_t *bi = &r->eval.pipelines[i].stages[r->eval.pipelines[i].bottleneck_stage];
            const ah_stage_eval_t *bj = &r->eval.pipelines[j].stages[r->eval.pipelines[j].bottleneck_stage];
            if (bi->fwd_s + bi->bwd_s < bj->fwd_s + bj->bwd_s)
                CHECK(p->pipelines[i].micro_batches >= p->pipelines[j].micro_batches,
                      "faster pipeline %d got fewer micro-batches than %d", i, j);
        }
    CHECK(r->eval.feasible, "batch-balanced plan does not fit");
}

static void one_case(const char *model_name, const char *cluster_name, int64_t B, int64_t T) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    CHECK(ah_model_load(model_name, &m, &err) == AH_OK, "%s", err.msg);
    const char *path = ah_test_src_path(cluster_name);
    if (ah_cluster_open(strchr(cluster_name, '/') ? path : cluster_name, &c, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = B;
    o.train.seq_len = T;
    ah_plan_result_t plan, uni, bal;
    CHECK(ah_planner_run(&m, &c, &o, &plan, &err) == AH_OK, "%s on %s: %s", model_name, cluster_name, err.msg);
    CHECK(ah_baseline_run(&m, &c, &o, AH_BASELINE_UNIFORM, &uni, &err) == AH_OK, "uniform: %s", err.msg);
    CHECK(ah_baseline_run(&m, &c, &o, AH_BASELINE_BATCH_BALANCED, &bal, &err) == AH_OK, "balanced: %s", err.msg);
    check_uniform(&uni);
    check_balanced(&bal);
    /* Megatron-like: every device is used when some layout allows it (on cpu-hetero, 6 GPUs and
     * 8 sequences: 2 pipelines x 3 stages at micro-batch 1; it used to keep the first 2 only). */
    if (strcmp(model_name, "tiny-gpt2") == 0)
        CHECK_EQ_I64(uni.eval.n_devices, ah_cluster_gpu_count(&c));
    const double t = plan.eval.pred.iteration_s;
    CHECK(t <= uni.eval.pred.iteration_s * (1 + 1e-12), "%s: planner %.6g slower than uniform %.6g", cluster_name, t,
          uni.eval.pred.iteration_s);
    CHECK(t <= bal.eval.pred.iteration_s * (1 + 1e-12), "%s: planner %.6g slower than batch-balanced %.6g",
          cluster_name, t, bal.eval.pred.iteration_s);
    /* megatron-best searches a superset of uniform's layouts (uniform's fits the smallest GPU, so
     * every device's own), so it is never slower; and the planner carries all three, equal to
     * ah_baseline_run's, none faster than it */
    ah_plan_result_t mb;
    CHECK(ah_baseline_run(&m, &c, &o, AH_BASELINE_MEGATRON_BEST, &mb, &err) == AH_OK, "megatron-best: %s", err.msg);
    CHECK(mb.eval.pred.iteration_s <= uni.eval.pred.iteration_s * (1 + 1e-12),
          "%s: megatron-best %.6g slower than uniform %.6g", cluster_name, mb.eval.pred.iteration_s,
          uni.eval.pred.iteration_s);
    CHECK(t <= mb.eval.pred.iteration_s * (1 + 1e-12), "%s: planner %.6g slower than megatron-best %.6g",
          cluster_name, t, mb.eval.pred.iteration_s);
    const ah_plan_result_t *own[AH_BASELINE_COUNT] = {&uni, &bal, &mb};
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        CHECK(plan.baselines[k].ok, "planner's %s: %s", ah_baseline_name((ah_baseline_t)k), plan.baselines[k].err.msg);
        CHECK(plan.baselines[k].r.eval.pred.iteration_s == own[k]->eval.pred.iteration_s,
              "planner's %s differs from ah_baseline_run's", ah_baseline_name((ah_baseline_t)k));
    }
    ah_plan_result_free(&mb);
    CHECK_NEAR(plan.search_value_s, plan.eval.search_estimate_s, 1e-12);
    CHECK(plan.lower_bound_s <= plan.search_best_s, "bound %.6g above the search's optimum %.6g", plan.lower_bound_s,
          plan.search_best_s);
    CHECK(ah_plan_check(&plan.plan, NULL, &err) == AH_OK, "%s", err.msg);
    printf("%-10s on %-28s planner %.4f s, uniform %.4f s (%.2fx), batch-balanced %.4f s (%.2fx), %s, %.3f s\n",
           model_name, cluster_name, t, uni.eval.pred.iteration_s, uni.eval.pred.iteration_s / t,
           bal.eval.pred.iteration_s, bal.eval.pred.iteration_s / t, plan.exact ? "exact" : "template", plan.seconds);

    /* the cost objective is never dearer per token than the time objective's plan */
    o.objective = AH_OBJECTIVE_COST;
    ah_plan_result_t cheap;
    CHECK(ah_planner_run(&m, &c, &o, &cheap, &err) == AH_OK, "cost: %s", err.msg);
    CHECK(cheap.usd_per_mtoken <= plan.usd_per_mtoken * (1 + 1e-12), "cost objective %.6g dearer than %.6g",
          cheap.usd_per_mtoken, plan.usd_per_mtoken);
    /* a budget below the cheapest plan's price has no plan */
    o.budget_usd_per_hour = cheap.usd_per_hour * 0.5;
    ah_plan_result_t none;
    ah_status_t st = ah_planner_run(&m, &c, &o, &none, &err);
    if (st == AH_OK) {
        CHECK(none.usd_per_hour <= o.budget_usd_per_hour, "over budget: %.3f > %.3f", none.usd_per_hour,
              o.budget_usd_per_hour);
        ah_plan_result_free(&none);
    }
    ah_plan_result_free(&cheap);
    ah_plan_result_free(&plan);
    ah_plan_result_free(&uni);
    ah_plan_result_free(&bal);
    ah_cluster_free(&c);
}

static void bad_inputs(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    ah_model_load("tiny-gpt2", &m, &err);
    ah_cluster_open("mixed-32", &c, &err);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.seq_len = 64;
    o.train.global_batch = 6;
    o.train.micro_batch = 4;
    ah_plan_result_t r;
    CHECK_ERR(ah_planner_run(&m, &c, &o, &r, &err), AH_ERR_INVALID, err, "not divisible");
    o.train.micro_batch = 0;
    o.train.seq_len = 1 << 20;
    CHECK_ERR(ah_planner_run(&m, &c, &o, &r, &err), AH_ERR_INVALID, err, "longer than");
    o.train.seq_len = 64;
    for (int i = 0; i < c.n_nodes; i++) c.nodes[i].count = 0;
    CHECK_ERR(ah_planner_run(&m, &c, &o, &r, &err), AH_ERR_INVALID, err, "no GPUs");
    ah_cluster_free(&c);
    /* nothing fits: the closest candidate names the type, the shortfall and a remedy */
    ah_model_load("gpt3-175b", &m, &err);
    ah_cluster_open("mixed-32", &c, &err);
    o.train.seq_len = 2048;
    o.train.global_batch = 8;
    for (int i = 1; i < c.n_nodes; i++) c.nodes[i].count = 0; /* one A100 node: 640 GB for 2.8 TB of state */
    CHECK_ERR(ah_planner_run(&m, &c, &o, &r, &err), AH_ERR_INFEASIBLE, err, " on a100-0:");
    {   /* the device, its need and capacity, the bytes it lacks: need = capacity + short */
        const char *at = strstr(err.msg, "(A100-80G), needs ");
        long long need = 0, cap = 0, lack = 0;
        CHECK(at && sscanf(at, "(A100-80G), needs %lld bytes of its %lld: short by %lld bytes", &need, &cap, &lack) == 3,
              "no device, need, capacity and shortfall in bytes in: %s", err.msg);
        CHECK(lack > 0 && need == cap + lack && cap == ah_gpu_capacity_bytes(ah_gpu_catalog_find("A100-80G")),
              "need %lld, capacity %lld, short %lld in: %s", need, cap, lack, err.msg);
    }
    CHECK(strstr(err.msg, "To fit") != NULL, "no remedy in: %s", err.msg);
    ah_cluster_free(&c);
}

/* The planner's TP degrees are the ones ah_model_check_tp allows: LLaMA-2-70B's 8 key/value heads
 * stop it at t = 8 even on a 16-GPU node where t = 16 would be fastest. The control, the same
 * shape with 16 key/value heads, is planned at t = 16 there, so the search does reach 16. */
static void tp_follows_kv_heads(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    CHECK(ah_model_load("llama2-70b", &m, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_cluster_open("mixed-32", &c, &err) == AH_OK, "%s", err.msg);
    /* one node of 16 A100s with room for everything and an all but free intra-node link, so
     * splitting a micro-batch 16 ways halves the time of any 8-way plan */
    c.nodes[0].count = 16;
    for (int i = 1; i < c.n_nodes; i++) c.nodes[i].count = 0;
    const int ty = c.nodes[0].type;
    c.types[ty].memory_gib = 4096;
    c.types[ty].intra_node_gb_s = 1e9;
    c.net.intra_latency_us = 1e-6;
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.seq_len = 1024;
    o.train.global_batch = 1; /* one micro-batch: no data parallelism, pipelining only serialises */
    ah_plan_result_t r;
    CHECK_ERR(ah_model_check_tp(&m, 16, &err), AH_ERR_INVALID, err, "its key/value head count 8 is not divisible by 16");
    CHECK(ah_planner_run(&m, &c, &o, &r, &err) == AH_OK, "llama2-70b on 16 GPUs: %s", err.msg);
    CHECK(r.plan.tp <= 8 && ah_model_check_tp(&m, r.plan.tp, &err) == AH_OK,
          "llama2-70b planned at t=%d; its 8 key/value heads allow t <= 8", r.plan.tp);
    ah_plan_result_free(&r);
    m.n_kv_head = 16;
    snprintf(m.name, sizeof m.name, "llama2-70b-kv16");
    CHECK(ah_planner_run(&m, &c, &o, &r, &err) == AH_OK, "control: %s", err.msg);
    CHECK_EQ_I64(r.plan.tp, 16);
    ah_plan_result_free(&r);
    ah_cluster_free(&c);
}

/* megatron-best with context parallelism (planner/baseline_cp.c): LLaMA 3.1-8B at 16k tokens on
 * paper-24. --cp auto: one CP degree for every pipeline, each stage tp x cp devices of a node, the plan
 * checked and feasible, no slower than megatron-best at any forced degree (1, 2, 4, 8: it is the
 * best of them) and, here, splitting (CP 2 or more beats CP 1); --cp 1 never splits; the planner
 * with CP is no slower than it; a degree the sequence cannot balance is refused, named. */
static void megatron_best_cp(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    CHECK(ah_model_load("llama3.1-8b", &m, &err) == AH_OK, "%s", err.msg);
    if (ah_cluster_open(ah_test_src_path("examples/clusters/paper-24.json"), &c, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 16;
    o.train.seq_len = 16384;
    ah_plan_result_t best, forced;
    CHECK(ah_baseline_run(&m, &c, &o, AH_BASELINE_MEGATRON_BEST, &best, &err) == AH_OK, "auto: %s", err.msg);
    const int cp = ah_pipeline_cp(&best.plan.pipelines[0]);
    for (int i = 0; i < best.plan.n_pipelines; i++) {
        const ah_pipeline_t *pl = &best.plan.pipelines[i];
        CHECK(ah_pipeline_cp(pl) == cp, "pipeline %d at CP %d, pipeline 0 at %d", i, ah_pipeline_cp(pl), cp);
        for (int s = 0; s < pl->n_stages; s++) /* a CP group: tp x cp devices of one node */
            for (int k = 0; k < ah_stage_devices(pl, best.plan.tp); k++)
                CHECK(pl->stages[s].devices[k].node == pl->stages[s].devices[0].node &&
                          pl->stages[s].devices[k].index == pl->stages[s].devices[0].index + k,
                      "stage %d of pipeline %d: device %d is not its CP group's", s, i, k);
    }
    CHECK(cp > 1, "megatron-best splits a 16k sequence on paper-24 (CP %d)", cp);
    CHECK(best.eval.feasible && ah_plan_check(&best.plan, NULL, &err) == AH_OK, "its plan: %s", err.msg);
    const double t = ah_planner_time_s(&o, &best.eval);
    static const int degrees[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        o.cp = degrees[k];
        if (ah_baseline_run(&m, &c, &o, AH_BASELINE_MEGATRON_BEST, &forced, &err) != AH_OK) continue;
        CHECK(ah_pipeline_cp(&forced.plan.pipelines[0]) == degrees[k], "--cp %d gives CP %d", degrees[k],
              ah_pipeline_cp(&forced.plan.pipelines[0]));
        CHECK(t <= ah_planner_time_s(&o, &forced.eval), "auto's CP %d (%.4f s) slower than --cp %d's %.4f s", cp, t,
              degrees[k], ah_planner_time_s(&o, &forced.eval));
        if (degrees[k] == 1)
            CHECK(t < ah_planner_time_s(&o, &forced.eval), "CP %d beats CP 1: %.4f s vs %.4f s", cp, t,
                  ah_planner_time_s(&o, &forced.eval));
        ah_plan_result_free(&forced);
    }
    o.cp = 0;
    ah_plan_result_t plan;
    CHECK(ah_planner_run_cp(&m, &c, &o, false, &plan, &err) == AH_OK, "planner: %s", err.msg);
    CHECK(plan.baselines && plan.baselines[AH_BASELINE_MEGATRON_BEST].ok &&
              plan.baselines[AH_BASELINE_MEGATRON_BEST].r.eval.pred.iteration_s == best.eval.pred.iteration_s,
          "the planner reports megatron-best with CP");
    CHECK(ah_planner_time_s(&o, &plan.eval) <= t, "planner %.4f s slower than megatron-best with CP %.4f s",
          ah_planner_time_s(&o, &plan.eval), t);
    printf("llama3.1-8b at 16384 tokens on paper-24: megatron-best CP %d %.4f s, planner %.4f s\n", cp, t,
           ah_planner_time_s(&o, &plan.eval));
    ah_plan_result_free(&plan);
    ah_plan_result_free(&best);
    o.cp = 8;
    o.train.seq_len = 16376;
    CHECK_ERR(ah_baseline_run(&m, &c, &o, AH_BASELINE_MEGATRON_BEST, &forced, &err), AH_ERR_INVALID, err,
              "the megatron-best baseline at --cp 8: --seq-len 16376 is not a multiple of 2 x 8");
    ah_cluster_free(&c);
}

/* --objective cost priced by the GPUs used picks a plan on few of mixed-32's GPUs; a run that pays every
 * node it holds (held_usd_per_hour) gets a plan on more of them, cheaper per token at the held price. */
static void held_pricing(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err;
    CHECK(ah_model_load("llama2-7b", &m, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_cluster_open("mixed-32", &c, &err) == AH_OK, "%s", err.msg);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 64;
    o.train.seq_len = 2048;
    o.objective = AH_OBJECTIVE_COST;
    ah_plan_result_t used, held;
    CHECK(ah_planner_run(&m, &c, &o, &used, &err) == AH_OK, "cost: %s", err.msg);
    ah_planner_opts_t oh = o;
    int all = 0;
    for (int i = 0; i < c.n_nodes; i++) {
        oh.held_usd_per_hour += c.nodes[i].usd_per_gpu_hour * c.nodes[i].count;
        all += c.nodes[i].count;
    }
    CHECK(ah_planner_run(&m, &c, &oh, &held, &err) == AH_OK, "cost, held: %s", err.msg);
    CHECK(used.eval.n_devices < all, "the plan priced by its GPUs uses all %d", all);
    CHECK(held.eval.n_devices > used.eval.n_devices, "held pricing: %d GPUs, not more than the %d priced by use",
          held.eval.n_devices, used.eval.n_devices);
    CHECK(ah_planner_key(&oh, &held.plan, &held.eval) < ah_planner_key(&oh, &used.plan, &used.eval),
          "held pricing's plan not cheaper per token at the held price");
    const double per_m = oh.held_usd_per_hour / 3600 / (double)(o.train.global_batch * o.train.seq_len) * 1e6;
    printf("held pricing on mixed-32: %d of %d GPUs (priced by use: %d), $%.4f vs $%.4f per M tokens at the held "
           "$%.2f/h\n", held.eval.n_devices, all, used.eval.n_devices, held.eval.pred.iteration_s * per_m,
           used.eval.pred.iteration_s * per_m, oh.held_usd_per_hour);
    ah_plan_result_free(&used);
    ah_plan_result_free(&held);
    ah_cluster_free(&c);
}

int main(void) {
    one_case("tiny-gpt2", "examples/clusters/cpu-hetero.json", 8, 64);
    one_case("llama2-7b", "mixed-32", 64, 2048);
    one_case("llama2-13b", "mixed-32", 32, 2048);
    bad_inputs();
    tp_follows_kv_heads();
    megatron_best_cp();
    held_pricing();
    return ah_test_finish();
}
