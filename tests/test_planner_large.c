/* The planner never loses to its baselines at scale (issue 18): on three clusters of 512, 1024 and
 * 4096 GPUs of A100-80G / H800 / H20 (every 8th, every 4th and every node of
 * examples/clusters/big-4096.json), llama2-70b and gpt3-175b at 1024 x 2048 tokens, the planner's
 * plan is never slower than uniform, batch-balanced or megatron-best (before the baselines were
 * candidates, megatron-best beat it by 1.7 % on 4096 GPUs); megatron-best is symmetric (one TP
 * degree, identical pipelines of equal layers and micro-batches) on one GPU type or on all; the
 * lower bound is below the search's closed form, which is not below the plan's replayed time. The
 * gap (closed form over bound) is under 20 % on big-4096 itself and under 30 % on every row of
 * examples/clusters/paper-64.json (llama2-7b/13b/70b, gpt3-175b at 128 x 2048 tokens,
 * docs/planner.md's table); the other sizes print theirs. (Issue 18's 15 % held until issue 40
 * put the hops' pace in the model; docs/planner.md says what the bound leaves out.) */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "planner/planner.h"

static void check_megatron_best(const ah_plan_result_t *r) {
    const ah_plan_t *p = &r->plan;
    const ah_pipeline_t *p0 = &p->pipelines[0];
    const int64_t N = p->train.global_batch / p->train.micro_batch;
    CHECK(N % p->n_pipelines == 0, "megatron-best: %d pipelines do not divide %lld micro-batches", p->n_pipelines,
          (long long)N);
    bool one_type = true;
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        CHECK_EQ_I64(pl->n_stages, p0->n_stages);
        CHECK_EQ_I64(pl->micro_batches, p0->micro_batches);
        for (int s = 0; s < pl->n_stages; s++) {
            CHECK_EQ_I64(pl->stages[s].first, p0->stages[s].first);
            CHECK_EQ_I64(pl->stages[s].last, p0->stages[s].last);
            CHECK_EQ_I64(pl->stages[s].recompute, p0->stages[0].recompute);
            one_type &= pl->stages[s].type == p0->stages[0].type;
        }
    }
    const int used = ah_plan_device_count(p), all = ah_cluster_gpu_count(&p->cluster);
    CHECK(one_type || used > all / 2, "megatron-best mixes types on %d of %d GPUs: not one type, not all", used,
          all);
    CHECK(r->eval.feasible, "megatron-best plan does not fit");
}

/* The plan of model_name on every `every`-th node of full at global_batch x 2048 tokens; its gap
 * to the bound checked under max_gap where max_gap > 0. */
static void one_case(const ah_cluster_t *full, int every, const char *model_name, int64_t global_batch,
                     double max_gap) {
    ah_error_t err;
    ah_cluster_t c;
    CHECK(ah_cluster_copy(full, &c, &err) == AH_OK, "%s", err.msg);
    int n = 0;
    for (int i = 0; i < full->n_nodes; i += every) c.nodes[n++] = full->nodes[i];
    c.n_nodes = n;
    ah_model_t m;
    CHECK(ah_model_load(model_name, &m, &err) == AH_OK, "%s", err.msg);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = global_batch;
    o.train.seq_len = 2048;
    /* the search's own space (1F1B, the whole sync), whose closed form and bound this test checks;
     * the schedules and the overlapped sync: test_planner_schedules.c, test_planner_exact.c */
    o.schedule = AH_SCHEDULE_ONLY_1F1B;
    o.no_overlap_grad_sync = true;
    ah_plan_result_t r;
    if (ah_planner_run(&m, &c, &o, &r, &err) != AH_OK) {
        CHECK(false, "%s on %d GPUs: %s", model_name, ah_cluster_gpu_count(&c), err.msg);
        ah_cluster_free(&c);
        return;
    }
    /* t: the plan's replayed time; v: the search's closed form, which the bound bounds */
    const double t = r.eval.pred.iteration_s, v = r.search_best_s;
    CHECK_NEAR(r.search_value_s, r.eval.search_estimate_s, 1e-12);
    CHECK(t <= r.eval.search_estimate_s * (1 + 1e-12), "replay %.6g above the closed form %.6g", t,
          r.eval.search_estimate_s);
    CHECK(r.lower_bound_s <= v, "bound %.6g above the search's optimum %.6g", r.lower_bound_s, v);
    printf("%-10s %5d GPUs: plan %.4f s (closed form %.4f s), bound %.4f s (gap %.1f%%),", model_name,
           ah_cluster_gpu_count(&c), t, v, r.lower_bound_s, 100 * (v / r.lower_bound_s - 1));
    if (max_gap > 0)
        CHECK(v <= r.lower_bound_s * (1 + max_gap), "%s on %d GPUs: gap %.1f%% to the bound, over %.0f%%", model_name,
              ah_cluster_gpu_count(&c), 100 * (v / r.lower_bound_s - 1), 100 * max_gap);
    for (int k = 0; k < AH_BASELINE_COUNT; k++) {
        const ah_baseline_out_t *b = &r.baselines[k];
        CHECK(b->ok, "%s: %s", ah_baseline_name((ah_baseline_t)k), b->err.msg);
        if (!b->ok) continue;
        const double tb = b->r.eval.pred.iteration_s;
        CHECK(t <= tb * (1 + 1e-12), "%s on %d GPUs: planner %.6g slower than %s %.6g", model_name,
              ah_cluster_gpu_count(&c), t, ah_baseline_name((ah_baseline_t)k), tb);
        printf(" %s %.2fx", ah_baseline_name((ah_baseline_t)k), tb / t);
    }
    printf(", %.2f s\n", r.seconds);
    check_megatron_best(&r.baselines[AH_BASELINE_MEGATRON_BEST].r);
    ah_plan_result_free(&r);
    ah_cluster_free(&c);
}

static void cluster_cases(const char *path, const int *every, int n_every, const char *const *models, int n_models,
                          int64_t global_batch, int gap_checked_every, double max_gap) {
    ah_cluster_t full;
    ah_error_t err;
    if (ah_cluster_open(ah_test_src_path(path), &full, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    for (int i = 0; i < n_every; i++)
        for (int k = 0; k < n_models; k++)
            one_case(&full, every[i], models[k], global_batch, every[i] == gap_checked_every ? max_gap : 0);
    ah_cluster_free(&full);
}

/* More GPU types than a mixed template draws on (search_template.c's MIX_TYPES, 8): 12 catalog
 * types, 4 nodes of 8 each over two zones. The template search once read a per-type array of 8
 * past its end here (a stack overflow under ASan, and plans that changed from run to run): the
 * same input must give the same plan, and one that fits. */
static void many_types(void) {
    CHECK(ah_gpu_catalog_count() >= 12, "the catalog has %d types, the case needs 12", ah_gpu_catalog_count());
    json_t *nodes = json_array();
    for (int k = 0; k < 12 && k < ah_gpu_catalog_count(); k++)
        for (int i = 0; i < 4; i++) {
            char name[64];
            snprintf(name, sizeof name, "t%d-%d", k, i);
            json_array_append_new(nodes, json_pack("{s:s, s:s, s:i, s:s}", "name", name, "gpu",
                                                   ah_gpu_catalog_get(k)->name, "count", 8, "zone", i % 2 ? "z1" : "z0"));
        }
    json_t *doc = json_pack("{s:o, s:{s:f, s:f}}", "nodes", nodes, "network", "inter_node_gb_s", 25.0, "inter_zone_gb_s",
                            3.0);
    ah_error_t err;
    ah_cluster_t c;
    ah_model_t m;
    CHECK(ah_cluster_from_json(doc, "12 types", &c, &err) == AH_OK, "%s", err.msg);
    json_decref(doc);
    CHECK(ah_model_load("llama2-13b", &m, &err) == AH_OK, "%s", err.msg);
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 256;
    o.train.seq_len = 2048;
    double first = 0;
    int first_gpus = 0;
    for (int run = 0; run < 2; run++) {
        ah_plan_result_t r;
        if (ah_planner_run(&m, &c, &o, &r, &err) != AH_OK) {
            CHECK(false, "12 types: %s", err.msg);
            break;
        }
        CHECK(r.eval.feasible, "12 types: the plan does not fit");
        const double t = r.eval.pred.iteration_s;
        const int gpus = ah_plan_device_count(&r.plan);
        if (run == 0) {
            first = t;
            first_gpus = gpus;
            printf("12 types, %d GPUs: plan %.4f s on %d GPUs, %.2f s\n", ah_cluster_gpu_count(&c), t, gpus, r.seconds);
        } else {
            CHECK(t == first && gpus == first_gpus, "12 types: run 2 planned %.6g s on %d GPUs, run 1 %.6g s on %d", t,
                  gpus, first, first_gpus);
        }
        ah_plan_result_free(&r);
    }
    ah_cluster_free(&c);
}

/* Leaving a node out never makes the plan faster (the search space lets devices idle): fuzz-4-17
 * of bench/sim_chaos.py (FUZZ_SEED=4), 4 A100-80G + 8 H20 + 2 H800 + 1 H800 on 3 GB/s between
 * nodes, gpt2-350m at 64 x 1024 in bf16. Its 15 TP groups fall to the template search, which
 * planned 2 single-stage H800 pipelines (374 252 tokens/s) where the cluster without the H20 node
 * (7 groups, searched exactly) has A100, H800, A100 pipelines at 457 040: the templates order a
 * pipeline's types memory first, never one type at both ends, so tied embeddings' holders sat 3 GB/s
 * apart. Since then a template-mode setting also runs the exact search without each node (and each
 * type) where that leaves at most --exact-max-groups groups. */
static void leaving_a_node_out(void) {
    json_t *nodes = json_array();
    const char *const gpu[] = {"A100-80G", "H20", "H800", "H800"};
    const int count[] = {4, 8, 2, 1};
    const double usd[] = {2.21, 1.26, 1.4, 3.53};
    double key[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        json_array_clear(nodes);
        for (int i = 0; i < 4; i++)
            if (k == 0 || i != 1)
                json_array_append_new(nodes, json_pack("{s:s, s:s, s:i, s:s, s:b, s:f}", "name", (const char *[]){"n0", "n1", "n2", "n3"}[i],
                                                       "gpu", gpu[i], "count", count[i], "zone", "a", "spot", i > 0,
                                                       "usd_per_gpu_hour", usd[i]));
        json_t *doc = json_pack("{s:O, s:{s:f, s:f, s:f}}", "nodes", nodes, "network", "inter_node_gb_s", 3.0,
                                "inter_zone_gb_s", 3.0, "cloud_gb_s", 0.2);
        ah_error_t err;
        ah_cluster_t c;
        ah_model_t m;
        const ah_status_t st = ah_cluster_from_json(doc, k == 0 ? "fuzz-4-17" : "fuzz-4-17 without n1", &c, &err);
        json_decref(doc);
        CHECK(st == AH_OK, "%s", err.msg);
        CHECK(ah_model_load("gpt2-350m", &m, &err) == AH_OK, "%s", err.msg);
        if (st != AH_OK) break;
        ah_planner_opts_t o;
        ah_planner_opts_default(&o);
        o.train.global_batch = 64;
        o.train.seq_len = 1024;
        o.train.precision = AH_PREC_BF16;
        ah_plan_result_t r;
        if (ah_planner_run(&m, &c, &o, &r, &err) == AH_OK) {
            CHECK(k == 1 || !r.exact, "fuzz-4-17: searched exactly, not by templates");
            key[k] = ah_planner_key(&o, &r.plan, &r.eval);
            printf("fuzz-4-17%s: %.6f s per iteration, %.0f tokens/s, %.2f s\n", k ? " without n1" : "", key[k],
                   r.eval.pred.tokens_per_s, r.seconds);
            ah_plan_result_free(&r);
        } else {
            CHECK(false, "fuzz-4-17: %s", err.msg);
        }
        ah_cluster_free(&c);
    }
    json_decref(nodes);
    CHECK(key[0] <= key[1] * (1 + 1e-9), "fuzz-4-17: %.6f s on every node, %.6f s without n1", key[0], key[1]);
}

int main(void) {
    leaving_a_node_out();
    many_types();
    const int every[] = {8, 4, 1}, all[] = {1};
    const char *const big[] = {"llama2-70b", "gpt3-175b"};
    const char *const paper[] = {"llama2-7b", "llama2-13b", "llama2-70b", "gpt3-175b"};
    cluster_cases("examples/clusters/big-4096.json", every, 3, big, 2, 1024, 1, 0.20);
    /* 40 %: since 0fc386f a DP group inside one zone under the hierarchical sync is priced on its own
     * ring's links, so the bound lets any layer's group be such a ring (k = 1, intra-node when it fits a
     * node): llama2-7b 37.2 % and 13b 35.6 % to that bound (22.7 and 20.3 % before), the plans unchanged */
    cluster_cases("examples/clusters/paper-64.json", all, 1, paper, 4, 128, 1, 0.40);
    return ah_test_finish();
}
