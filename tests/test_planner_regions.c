/* The planner across regions and zones (issue 39): the search weighs the hierarchical DP sync per
 * candidate. On examples/clusters/two-region.json and three-region.json (H100 in one region, A100 /
 * L40S in others, 0.3-0.6 GB/s per GPU between them), llama2-7b and 13b, and on one region of four
 * zones (one_region_zones: there too, a better plan than the ring-priced search's):
 *  - the plan is never worse under the objective than the plan of the search that prices every
 *    candidate's sync as the flat ring (opts.search_ring_only: the planner before; its plan still
 *    gets the hierarchical choice at the end), and is better somewhere;
 *  - it is priced consistently: the search's own value is ah_evaluate's, and the plan written to
 *    JSON and read back evaluates to the planner's prediction (iteration, overlapped iteration,
 *    DP sync, "dp_sync");
 *  - two-region.json with its WAN against the same cluster with the WAN as fast as a zone link
 *    (inter_region and the link's figures inter_zone's, no shared cap): llama2-7b at 4096
 *    sequences of 2048 tokens and llama2-13b at 512 are predicted within 10 %; the 13B plan (x1.24
 *    before session 20: its pipelines across the WAN waited for each micro-batch's round trip over
 *    the hop) crosses the WAN with extra warm-up above its hops (docs/multi-host.md "Across
 *    regions"), faster than the zone-speed WAN's plan as it is on the real WAN, which is faster
 *    with its hops scatter/gather than whole.
 * Planning only. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "planner/planner.h"

static bool plan_on(const ah_model_t *m, const ah_cluster_t *c, int64_t B, int64_t T, bool ring_only,
                    ah_planner_opts_t *o, ah_plan_result_t *r) {
    ah_planner_opts_default(o);
    o->train.global_batch = B;
    o->train.seq_len = T;
    o->search_ring_only = ring_only;
    ah_error_t err;
    const ah_status_t st = ah_planner_run_sharded(m, c, o, false, r, &err);
    CHECK(st == AH_OK, "plan %s on %d nodes: %s", m->name, c->n_nodes, err.msg);
    return st == AH_OK;
}

/* The plan through its JSON and back evaluates to what the planner predicted. */
static void check_round_trip(const ah_planner_opts_t *o, const ah_plan_result_t *r) {
    CHECK_NEAR(r->search_value_s, r->eval.search_estimate_s, 1e-12);
    json_t *doc = ah_plan_to_json(&r->plan);
    ah_plan_t back;
    ah_eval_t e;
    ah_error_t err;
    ah_status_t st = ah_plan_from_json(doc, "plan.json", NULL, &back, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "the written plan reads back: %s", err.msg);
    if (st != AH_OK) return;
    st = ah_plan_validate(&back, &err);
    if (st == AH_OK) st = ah_evaluate(&back, NULL, &e, &err);
    CHECK(st == AH_OK, "the written plan evaluates: %s", err.msg);
    if (st == AH_OK) {
        CHECK_EQ_I64(back.dp_sync, r->plan.dp_sync);
        CHECK_NEAR(e.pred.iteration_s, r->plan.predicted.iteration_s, 1e-12);
        CHECK_NEAR(ah_planner_time_s(o, &e), ah_planner_time_s(o, &r->eval), 1e-12);
        CHECK_NEAR(e.pred.breakdown.dp_sync_s, r->plan.predicted.breakdown.dp_sync_s, 1e-12);
        ah_eval_free(&e);
    }
    ah_plan_free(&back);
}

/* Returns 1 when the per-candidate search found a better plan than the ring-priced one on c (its
 * name: cluster); *hier: the plan takes the hierarchical sync. */
static int compare_searches(const char *model, const ah_cluster_t *cl, const char *cluster, int64_t B, int64_t T,
                            bool *hier) {
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_load(model, &m, &err) == AH_OK, "%s", err.msg);
    const ah_cluster_t c = *cl;
    ah_planner_opts_t o_old, o_new;
    ah_plan_result_t old, now;
    int better = 0;
    if (plan_on(&m, &c, B, T, true, &o_old, &old)) {
        if (plan_on(&m, &c, B, T, false, &o_new, &now)) {
            const double k_old = ah_planner_key(&o_old, &old.plan, &old.eval);
            const double k_new = ah_planner_key(&o_new, &now.plan, &now.eval);
            CHECK(k_new <= k_old * (1 + 1e-12), "%s on %s: the plan %.6f s, the ring-priced search's %.6f s", model,
                  cluster, k_new, k_old);
            better = k_new < k_old * (1 - 1e-9);
            printf("%s on %s, B %lld T %lld: %.4f s (%s sync, %d pipelines) vs %.4f s (%s, %d) for the ring-priced "
                   "search%s\n",
                   model, cluster, (long long)B, (long long)T, k_new, now.plan.dp_sync ? "hierarchical" : "ring",
                   now.plan.n_pipelines, k_old, old.plan.dp_sync ? "hierarchical" : "ring", old.plan.n_pipelines,
                   better ? ": better" : "");
            check_round_trip(&o_new, &now);
            if (hier) *hier = now.plan.dp_sync == AH_DP_SYNC_HIERARCHICAL;
            ah_plan_result_free(&now);
        }
        ah_plan_result_free(&old);
    }
    return better;
}

static int one_case(const char *model, const char *cluster, int64_t B, int64_t T) {
    ah_cluster_t c;
    ah_error_t err;
    if (ah_cluster_open(ah_test_src_path(cluster), &c, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return 0;
    }
    const int better = compare_searches(model, &c, cluster, B, T, NULL);
    ah_cluster_free(&c);
    return better;
}

/* One region, four zones of two 8-GPU A100 nodes (the network's defaults: 3 GB/s per GPU between
 * zones): the search weighs the hierarchical sync per candidate here too, and llama2-7b at 256
 * sequences of 2048 tokens finds a plan the ring-priced search does not, with the hierarchical
 * sync, which evaluates as predicted. */
static void one_region_zones(void) {
    json_t *nodes = json_array();
    for (int i = 0; i < 8; i++) {
        char name[16], zone[16];
        snprintf(name, sizeof name, "a100-%d", i);
        snprintf(zone, sizeof zone, "us-east-1%c", 'a' + i / 2);
        json_array_append_new(nodes, json_pack("{s:s, s:s, s:i, s:s}", "name", name, "gpu", "A100-80G", "count", 8,
                                               "zone", zone));
    }
    json_t *doc = json_pack("{s:o}", "nodes", nodes);
    ah_cluster_t c;
    ah_error_t err;
    const ah_status_t st = ah_cluster_from_json(doc, "four-zones", &c, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "the four-zone cluster: %s", err.msg);
    if (st != AH_OK) return;
    CHECK_EQ_I64(ah_cluster_region_count(&c), 1);
    bool hier = false;
    CHECK(compare_searches("llama2-7b", &c, "four zones of one region", 256, 2048, &hier) == 1,
          "one region of four zones: the per-candidate search found no better plan than the ring-priced one");
    CHECK(hier, "one region of four zones: the plan does not take the hierarchical sync");
    ah_cluster_free(&c);
}

/* The zone-speed WAN's plan b evaluated on the real cluster: its planner time (+inf when it fails). */
static double on_real_wan(const ah_planner_opts_t *o, const ah_plan_t *b, const ah_cluster_t *real, ah_p2p_split_t p2p) {
    json_t *doc = ah_plan_to_json(b);
    if (p2p == AH_P2P_WHOLE) json_object_set_new(doc, "p2p", json_string("whole"));
    ah_plan_t q;
    ah_eval_t e;
    ah_error_t err;
    double t = INFINITY;
    if (ah_plan_from_json(doc, "plan.json", real, &q, &err) == AH_OK) {
        if (ah_plan_validate(&q, &err) == AH_OK && ah_evaluate(&q, NULL, &e, &err) == AH_OK) {
            t = ah_planner_time_s(o, &e);
            ah_eval_free(&e);
        }
        ah_plan_free(&q);
    }
    json_decref(doc);
    return t;
}

/* two-region.json's predicted iteration with its WAN, and with the WAN as fast as a zone link:
 * within 10 %. across: the planner's plan crosses the WAN with extra warm-up above its hops (the
 * search with the WAN's hops as if hidden, ah_planner_hide_hops, said), faster than the fast WAN's
 * plan on the real one as it is (no warm-up), and that plan (TP 2, its pipelines across the WAN)
 * faster with its hops scatter/gather than whole. */
static void check_wan_cost(const char *model, int64_t B, int64_t T, bool across) {
    ah_model_t m;
    ah_cluster_t real, fast;
    ah_error_t err;
    CHECK(ah_model_load(model, &m, &err) == AH_OK, "%s", err.msg);
    const char *path = ah_test_src_path("examples/clusters/two-region.json");
    if (ah_cluster_open(path, &real, &err) != AH_OK || ah_cluster_open(path, &fast, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    fast.net.inter_region_gb_s = fast.net.inter_zone_gb_s;
    fast.net.inter_region_latency_us = fast.net.inter_zone_latency_us;
    for (int k = 0; k < fast.net.n_links; k++) {
        fast.net.links[k].gb_s = fast.net.inter_zone_gb_s;
        fast.net.links[k].latency_us = fast.net.inter_zone_latency_us;
        fast.net.links[k].total_gb_s = 0;
    }
    ah_planner_opts_t o;
    ah_plan_result_t a, b;
    if (plan_on(&m, &real, B, T, false, &o, &a)) {
        if (plan_on(&m, &fast, B, T, false, &o, &b)) {
            const double t_real = ah_planner_time_s(&o, &a.eval), t_fast = ah_planner_time_s(&o, &b.eval);
            printf("%s on two-region.json, B %lld T %lld: %.4f s with its WAN, %.4f s with the WAN a zone link's "
                   "(x%.3f)\n",
                   model, (long long)B, (long long)T, t_real, t_fast, t_real / t_fast);
            CHECK(t_real <= 1.10 * t_fast, "%s: %.4f s with the WAN vs %.4f s with a zone-speed WAN: over 10 %%",
                  model, t_real, t_fast);
            if (across) {
                int warm = 0;
                for (int i = 0; i < a.plan.n_pipelines; i++)
                    for (int s = 0; s < a.plan.pipelines[i].n_stages; s++) warm += a.plan.pipelines[i].stages[s].warmup_extra;
                CHECK(warm > 0 && a.hops_why[0] && a.warmup_why[0],
                      "%s: the plan has no extra warm-up (%d) or does not say why (\"%s\", \"%s\")", model, warm,
                      a.hops_why, a.warmup_why);
                printf("  %s\n  %s\n", a.hops_why, a.warmup_why);
                const double moved = on_real_wan(&o, &b.plan, &real, AH_P2P_SCATTER_GATHER),
                             whole = on_real_wan(&o, &b.plan, &real, AH_P2P_WHOLE);
                printf("  the zone-speed WAN's plan (TP %d) on the real WAN: %.4f s (its hops whole: %.4f s)\n", b.plan.tp,
                       moved, whole);
                CHECK(b.plan.tp == 1 || moved < whole, "%s: scatter/gather %.4f s, whole %.4f s", model, moved, whole);
                CHECK(t_real < moved, "%s: the plan %.4f s, the zone-speed WAN's plan on the WAN %.4f s", model, t_real,
                      moved);
            }
            ah_plan_result_free(&b);
        }
        ah_plan_result_free(&a);
    }
    ah_cluster_free(&real);
    ah_cluster_free(&fast);
}

/* two-region.json with its nodes of one region alone (the links between regions dropped). */
static bool one_region_of(const char *path, const char *region, ah_cluster_t *out) {
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je), *kept = json_array();
    CHECK(doc != NULL, "%s: %s", path, je.text);
    if (!doc) {
        json_decref(kept);
        return false;
    }
    size_t i;
    json_t *node;
    json_array_foreach(json_object_get(doc, "nodes"), i, node)
        if (strcmp(json_string_value(json_object_get(node, "region")), region) == 0)
            json_array_append(kept, node);
    json_object_set_new(doc, "nodes", kept);
    json_object_del(json_object_get(doc, "network"), "links");
    ah_error_t err;
    const ah_status_t st = ah_cluster_from_json(doc, region, out, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "%s alone: %s", region, err.msg);
    return st == AH_OK;
}

/* The template search runs once per region of two zones or more too: on two-region.json,
 * llama2-13b at 512 x 4096 (where every way of using eu-west-1 moves >= 21 GB over the WAN), the
 * plan is no slower than the planner's on us-east-1's nodes alone (the H100s over its two zones,
 * the hierarchical sync; before, the search over all zones missed it: 21.5176 s vs 20.9896 s). */
static void region_run(void) {
    ah_model_t m;
    ah_cluster_t all, east;
    ah_error_t err;
    CHECK(ah_model_load("llama2-13b", &m, &err) == AH_OK, "%s", err.msg);
    const char *path = ah_test_src_path("examples/clusters/two-region.json");
    if (ah_cluster_open(path, &all, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    ah_planner_opts_t o;
    ah_plan_result_t a, b;
    if (one_region_of(path, "us-east-1", &east)) {
        if (plan_on(&m, &all, 512, 4096, false, &o, &a)) {
            if (plan_on(&m, &east, 512, 4096, false, &o, &b)) {
                const double t_all = ah_planner_key(&o, &a.plan, &a.eval), t_east = ah_planner_key(&o, &b.plan, &b.eval);
                printf("llama2-13b at 512 x 4096: two-region.json %.4f s, us-east-1 alone %.4f s\n", t_all, t_east);
                CHECK(t_all <= t_east * (1 + 1e-12), "two-region.json %.6f s, slower than us-east-1 alone %.6f s", t_all,
                      t_east);
                check_round_trip(&o, &a);
                ah_plan_result_free(&b);
            }
            ah_plan_result_free(&a);
        }
        ah_cluster_free(&east);
    }
    ah_cluster_free(&all);
}

/* Whether a pipeline of p has stages in two regions. */
static bool pipeline_crosses(const ah_plan_t *p) {
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 1; s < p->pipelines[i].n_stages; s++)
            if (strcmp(p->cluster.nodes[p->pipelines[i].stages[s].devices[0].node].region,
                       p->cluster.nodes[p->pipelines[i].stages[0].devices[0].node].region) != 0)
                return true;
    return false;
}

/* Template mode builds pipelines across regions where nothing else fits: two H100 in us-east-1
 * and two A100 in eu-west-1 (0.6 GB/s, 35 ms between), llama2-13b at 64 x 2048 fits only on all
 * four. The exact search's plan (--exact-max-groups 8) and template mode's (1) both cut a pipeline
 * across the WAN; the template's is within 10 % (measured 7.7 %: 12.16 vs 11.29 s; its mixed
 * template orders the types memory first, the H100s first on this tie, where the exact optimum
 * puts the A100s first and the head on the H100s). */
static void template_across(void) {
    json_t *doc = json_pack(
        "{s:[{s:s, s:s, s:i, s:s, s:s}, {s:s, s:s, s:i, s:s, s:s}], s:{s:f, s:f}}", "nodes", "name", "h100-0", "gpu",
        "H100", "count", 2, "zone", "us-east-1a", "region", "us-east-1", "name", "a100-0", "gpu", "A100-80G", "count", 2,
        "zone", "eu-west-1a", "region", "eu-west-1", "network", "inter_region_gb_s", 0.6, "inter_region_latency_us",
        35000.0);
    ah_cluster_t c;
    ah_model_t m;
    ah_error_t err;
    const ah_status_t st = ah_cluster_from_json(doc, "two-by-two", &c, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "the two-region cluster: %s", err.msg);
    CHECK(ah_model_load("llama2-13b", &m, &err) == AH_OK, "%s", err.msg);
    if (st != AH_OK) return;
    double key[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        ah_planner_opts_t o;
        ah_plan_result_t r;
        ah_planner_opts_default(&o);
        o.train.global_batch = 64;
        o.train.seq_len = 2048;
        o.exact_max_groups = k == 0 ? 8 : 1;
        if (ah_planner_run(&m, &c, &o, &r, &err) != AH_OK) {
            CHECK(false, "plan (exact-max-groups %d): %s", o.exact_max_groups, err.msg);
            continue;
        }
        CHECK(k == 0 ? r.exact : !r.exact, "exact-max-groups %d: searched %s", o.exact_max_groups,
              r.exact ? "exactly" : "by templates");
        CHECK(pipeline_crosses(&r.plan), "exact-max-groups %d: no pipeline crosses the regions", o.exact_max_groups);
        key[k] = ah_planner_key(&o, &r.plan, &r.eval);
        check_round_trip(&o, &r);
        ah_plan_result_free(&r);
    }
    printf("llama2-13b at 64 x 2048 on 2 H100 + 2 A100 in two regions: exact %.4f s, template %.4f s (x%.3f)\n", key[0],
           key[1], key[1] / key[0]);
    CHECK(key[1] <= 1.10 * key[0], "template %.4f s vs exact %.4f s: more than 10 %% over", key[1], key[0]);
    ah_cluster_free(&c);
}

int main(void) {
    int better = 0;
    const char *clusters[] = {"examples/clusters/two-region.json", "examples/clusters/three-region.json"};
    for (int k = 0; k < 2; k++) {
        better += one_case("llama2-7b", clusters[k], 1024, 2048);
        better += one_case("llama2-13b", clusters[k], 512, 2048);
    }
    CHECK(better > 0, "the per-candidate search found no better plan than the ring-priced one in any case");
    one_region_zones();
    region_run();
    template_across();
    check_wan_cost("llama2-7b", 4096, 2048, false);
    check_wan_cost("llama2-13b", 512, 2048, true);
    return ah_test_finish();
}
