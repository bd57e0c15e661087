/* Cluster spec, regions and links (issue 39): nodes' regions, the network's inter-region figures,
 * egress prices and per-pair links: defaults, the example file, round trip, refusals (named), and
 * clusters without them written as before; what a plan sends across regions, its checkpoints' traffic,
 * and the rule for traffic in the open (ah_plan_wan_check); a DP group inside one zone under the
 * hierarchical sync priced on its own ring's links; a pair's total_gb_s shared by the rings that can
 * run at once. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "cost/cost.h"
#include "harness.h"
#include "plan/evaluate.h"
#include "plan/plan_out.h"
#include "spec/cluster.h"

static void expect_error(const char *text, const char *n1, const char *n2) {
    ah_cluster_t c;
    ah_error_t err = {0};
    ah_status_t s = ah_test_parse_cluster(text, &c, &err);
    CHECK_ERR(s, AH_ERR_INVALID, err, n1);
    if (n2) CHECK_ERR(s, AH_ERR_INVALID, err, n2);
    if (s == AH_OK) ah_cluster_free(&c);
}

/* Two nodes, zones za (region ra) and zb (region rb), then NET as the network's members. */
#define TWO(NET)                                                                                    \
    "{\"nodes\": [{\"name\": \"n0\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"za\", \"region\": "  \
    "\"ra\"}, {\"name\": \"n1\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"zb\", \"region\": "       \
    "\"rb\"}], \"network\": {" NET "}}"

static void test_example(void) {
    ah_cluster_t c;
    ah_error_t err = {0};
    CHECK(ah_cluster_load(ah_test_src_path("examples/clusters/two-region.json"), &c, &err) == AH_OK,
          "two-region.json: %s", err.msg);
    CHECK_EQ_I64(ah_cluster_region_count(&c), 2);
    CHECK(strcmp(c.nodes[1].region, "us-east-1") == 0 && strcmp(c.nodes[3].region, "eu-west-1") == 0,
          "regions %s %s", c.nodes[1].region, c.nodes[3].region);
    CHECK(c.net.egress_priced, "egress priced");
    CHECK_NEAR(c.net.egress_inter_region_usd_per_gb, 0.02, 1e-12);
    CHECK_EQ_I64(c.net.n_links, 1);
    CHECK(c.net.links[0].regions && c.net.links[0].private_link, "the link joins regions, private");
    CHECK_NEAR(c.net.links[0].total_gb_s, 5, 1e-12);
    /* round trip, byte for byte */
    json_t *j1 = ah_cluster_to_json(&c);
    char *t1 = json_dumps(j1, JSON_REAL_PRECISION(17));
    ah_cluster_t c2;
    CHECK(ah_test_parse_cluster(t1, &c2, &err) == AH_OK, "reparse: %s", err.msg);
    json_t *j2 = ah_cluster_to_json(&c2);
    char *t2 = json_dumps(j2, JSON_REAL_PRECISION(17));
    CHECK(strcmp(t1, t2) == 0, "round trip:\n%s\n%s", t1, t2);
    free(t1);
    free(t2);
    json_decref(j1);
    json_decref(j2);
    ah_cluster_free(&c2);
    ah_cluster_free(&c);
}

/* A node without "region" takes its zone's; without any, "default"; the public-cloud defaults. */
static void test_defaults(void) {
    ah_cluster_t c;
    ah_error_t err = {0};
    CHECK(ah_test_parse_cluster("{\"nodes\": [{\"name\": \"n0\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"z\"},"
                " {\"name\": \"n1\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"z\", \"region\": \"r\"},"
                " {\"name\": \"n2\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"y\"}]}",
                &c, &err) == AH_OK,
          "%s", err.msg);
    CHECK(strcmp(c.nodes[0].region, "r") == 0 && strcmp(c.nodes[2].region, "default") == 0,
          "inherited %s, default %s", c.nodes[0].region, c.nodes[2].region);
    CHECK(!c.net.egress_priced && c.net.n_links == 0, "egress unpriced, no links");
    CHECK_NEAR(c.net.inter_region_gb_s, 0.6, 1e-12);
    CHECK_NEAR(c.net.inter_region_latency_us, 35000, 1e-12);
    ah_cluster_free(&c);
}

/* A cluster without regions, egress or links writes the fields it wrote before, no more. */
static void test_old_unchanged(void) {
    static const char *const FILES[] = {"examples/clusters/mixed-32.json",
                                        "examples/clusters/paper-64.json"};
    static const char *const NEW[] = {"region", "inter_region", "egress", "links"};
    for (size_t i = 0; i < 2; i++) {
        ah_cluster_t c;
        ah_error_t err = {0};
        CHECK(ah_cluster_load(ah_test_src_path(FILES[i]), &c, &err) == AH_OK, "%s", err.msg);
        json_t *j = ah_cluster_to_json(&c);
        char *t = json_dumps(j, JSON_COMPACT);
        for (size_t k = 0; k < 4; k++) CHECK(!strstr(t, NEW[k]), "%s writes \"%s\"", FILES[i], NEW[k]);
        CHECK_EQ_I64(ah_cluster_region_count(&c), 1);
        free(t);
        json_decref(j);
        ah_cluster_free(&c);
    }
}

static void test_refusals(void) {
    expect_error("{\"nodes\": [{\"name\": \"n0\", \"gpu\": \"T4\", \"count\": 1, \"zone\": \"z\", "
                 "\"region\": \"r1\"}, {\"name\": \"n1\", \"gpu\": \"T4\", \"count\": 1, \"zone\": "
                 "\"z\", \"region\": \"r2\"}]}",
                 "c.json: nodes[1].region: zone \"z\" is in region \"r1\" (nodes[0] n0)", "\"r2\"");
    expect_error(TWO("\"links\": [{\"between\": [\"ra\", \"mars\"], \"gb_s\": 1}]"),
                 "c.json: network.links[0].between[1]: \"mars\" is neither a zone nor a region", NULL);
    expect_error(TWO("\"links\": [{\"between\": [\"ra\", \"rb\"], \"bw\": 1}]"),
                 "c.json: network.links[0]: unknown field \"bw\"", "total_gb_s");
    expect_error(TWO("\"links\": [{\"between\": [\"za\", \"rb\"]}]"),
                 "network.links[0].between: \"za\" and \"rb\" are a zone and a region", NULL);
    expect_error(TWO("\"links\": [{\"between\": [\"ra\", \"rb\"]}, {\"between\": [\"rb\", \"ra\"]}]"),
                 "network.links[1].between: rb and ra are joined already by links[0]", NULL);
    expect_error(TWO("\"links\": [{\"between\": [\"ra\", \"ra\"]}]"), "\"ra\" twice", NULL);
    expect_error(TWO("\"links\": [{\"between\": [\"ra\", \"rb\"], \"gb_s\": 0}]"),
                 "network.links[0].gb_s", NULL);
    expect_error(TWO("\"egress_usd_per_gb\": {\"inter_zone\": 0.01}"),
                 "c.json: network.egress_usd_per_gb", "\"inter_region\"");
    expect_error(TWO("\"egress_usd_per_gb\": {\"inter_zone\": 0.01, \"inter_region\": 0.02, "
                     "\"internet\": 0.09}"),
                 "c.json: network.egress_usd_per_gb: unknown field \"internet\"", NULL);
    expect_error(TWO("\"inter_region_gbs\": 1"), "c.json: network: unknown field \"inter_region_gbs\"",
                 NULL);
    expect_error("{\"nodes\": [{\"name\": \"n0\", \"gpu\": \"T4\", \"count\": 1, \"region\": \"\"}]}",
                 "c.json: nodes[0].region: empty region name", NULL);
}

/* The link between two nodes: class by node, zone and region; the "links" override's figures. */
static void test_links(void) {
    ah_cluster_t c;
    ah_error_t err = {0};
    CHECK(ah_cluster_load(ah_test_src_path("examples/clusters/two-region.json"), &c, &err) == AH_OK, "%s", err.msg);
    const int t = c.nodes[0].type;
    ah_link_info_t l = ah_link_of(&c, 0, 0, t, t);
    CHECK(l.cls == AH_LINK_INTRA && l.usd_per_gb == 0 && l.private_link, "intra-node");
    l = ah_link_of(&c, 0, 1, t, t); /* us-east-1a - us-east-1b */
    CHECK(l.cls == AH_LINK_INTER_ZONE && l.override == -1, "inter-zone: class %d", l.cls);
    CHECK_NEAR(l.bw, c.net.inter_zone_gb_s * 1e9, 1e-9);
    CHECK_NEAR(l.usd_per_gb, 0.01, 1e-12);
    l = ah_link_of(&c, 1, 3, t, c.nodes[3].type); /* us-east-1 - eu-west-1: the override */
    CHECK(l.cls == AH_LINK_INTER_REGION && l.override == 0 && l.private_link, "inter-region override");
    CHECK_NEAR(l.latency_s, 0.035, 1e-12);
    CHECK_NEAR(ah_link_shared_bw(&l, 1), 0.6e9, 1e-3);
    CHECK_NEAR(ah_link_shared_bw(&l, 16), 5e9 / 16, 1e-3); /* total_gb_s 5 shared by 16 flows */
    l = ah_link_of(&c, 2, 3, c.nodes[2].type, c.nodes[3].type); /* one zone */
    CHECK(l.cls == AH_LINK_INTER_NODE && l.usd_per_gb == 0, "inter-node");
    CHECK(strcmp(ah_link_class_name(AH_LINK_INTER_REGION), "inter-region") == 0, "class name");
    ah_cluster_free(&c);
}

/* train-dp4 (tiny-gpt2, TP 1, four one-stage pipelines) with pipelines 0-1 on n0 in region us and
 * 2-3 on n1 in region eu (zone eu-a). */
static void dp4_across_regions(ah_plan_t *p) {
    ah_error_t err = {0};
    CHECK(ah_plan_load(ah_test_src_path("examples/plans/train-dp4.json"), NULL, p, &err) == AH_OK, "%s", err.msg);
    for (int i = 0; i < p->n_pipelines; i++) p->pipelines[i].stages[0].devices[0] = (ah_device_ref_t){i / 2, i % 2};
    snprintf(p->cluster.nodes[0].region, sizeof p->cluster.nodes[0].region, "us");
    snprintf(p->cluster.nodes[1].region, sizeof p->cluster.nodes[1].region, "eu");
    snprintf(p->cluster.nodes[1].zone, sizeof p->cluster.nodes[1].zone, "eu-a");
}

/* train-dp4 with pipelines 0-1 on n0 (us) and 2-3 on n1 (eu): the DP rings cross the regions
 * twice (1 -> 2, 3 -> 0), both on one link, all of it DP sync; refused in the open, allowed with
 * the flag, and not refused once the link is marked private. */
static void test_wan_rule(void) {
    ah_plan_t p;
    ah_error_t err = {0};
    dp4_across_regions(&p);
    ah_plan_traffic_t t;
    ah_plan_traffic(&p, &t);
    CHECK_EQ_I64(t.n_crossings, 1);
    const ah_plan_crossing_t *x = &t.crossings[0];
    CHECK(t.bytes[AH_LINK_INTER_REGION] > 0 && x->bytes[AH_TRAFFIC_DP_SYNC] == t.bytes[AH_LINK_INTER_REGION] &&
          t.public_bytes == t.bytes[AH_LINK_INTER_REGION] && x->bytes[AH_TRAFFIC_P2P] == 0 && !x->private_link,
          "the crossing: %g DP sync of %g across regions, %g in the open", x->bytes[AH_TRAFFIC_DP_SYNC],
          t.bytes[AH_LINK_INTER_REGION], t.public_bytes);
    CHECK_ERR(ah_plan_wan_check(&p, false, &err), AH_ERR_USAGE, err, "us <-> eu (not marked private): DP sync");
    CHECK(strstr(err.msg, "--allow-unencrypted-wan") != NULL, "the flag named: %s", err.msg);
    CHECK(ah_plan_wan_check(&p, true, &err) == AH_OK, "allowed");
    p.cluster.net.links[0] = (ah_net_link_t){.a = "eu", .b = "us", .regions = true, .gb_s = -1, .latency_us = -1,
                                             .usd_per_gb = -1, .private_link = true};
    p.cluster.net.n_links = 1;
    ah_plan_traffic(&p, &t);
    CHECK(t.public_bytes == 0 && t.n_crossings == 1 && t.crossings[0].private_link && t.crossings[0].override == 0,
          "private: %g in the open", t.public_bytes);
    CHECK(ah_plan_wan_check(&p, false, &err) == AH_OK, "a private link needs no flag: %s", err.msg);
    char buf[512];
    CHECK(strcmp(ah_plan_crossings_str(&p, &t, true, buf, sizeof buf), "") == 0, "nothing in the open: %s", buf);
    ah_plan_free(&p);
}

/* train-pp4 (tiny-gpt2, one pipeline of four one-layer stages, 8 micro-batches of 1 x 32 tokens)
 * with stages 0-1 on n0 in region us and 2-3 on n1 in eu: the activations and their gradients
 * between stages 1 and 2 cross, 2 x 8 x 32 x 64 x 4 bytes, counted as pipeline p2p, and the
 * refusal names them; allowed with the flag, and over a private link without it. */
static void test_wan_rule_pipeline(void) {
    ah_plan_t p;
    ah_error_t err = {0};
    CHECK(ah_plan_load(ah_test_src_path("examples/plans/train-pp4.json"), NULL, &p, &err) == AH_OK, "%s", err.msg);
    for (int s = 2; s < 4; s++) p.pipelines[0].stages[s].devices[0] = (ah_device_ref_t){1, s - 2};
    snprintf(p.cluster.nodes[0].region, sizeof p.cluster.nodes[0].region, "us");
    snprintf(p.cluster.nodes[1].region, sizeof p.cluster.nodes[1].region, "eu");
    snprintf(p.cluster.nodes[1].zone, sizeof p.cluster.nodes[1].zone, "eu-a");
    ah_plan_traffic_t t;
    ah_plan_traffic(&p, &t);
    CHECK_EQ_I64(t.n_crossings, 1);
    CHECK_NEAR(t.crossings[0].bytes[AH_TRAFFIC_P2P], 2.0 * 8 * 32 * 64 * 4, 1e-6);
    CHECK_ERR(ah_plan_wan_check(&p, false, &err), AH_ERR_USAGE, err, "us <-> eu (not marked private): pipeline p2p");
    CHECK(ah_plan_wan_check(&p, true, &err) == AH_OK, "allowed: %s", err.msg);
    p.cluster.net.links[0] = (ah_net_link_t){.a = "eu", .b = "us", .regions = true, .gb_s = -1, .latency_us = -1,
                                             .usd_per_gb = -1, .private_link = true};
    p.cluster.net.n_links = 1;
    CHECK(ah_plan_wan_check(&p, false, &err) == AH_OK, "a private link needs no flag: %s", err.msg);
    ah_plan_free(&p);
}

/* train-dp4 (tiny-gpt2, TP 1, four one-stage pipelines: 0-1 on n0 in region us, 2-3 on n1 in eu),
 * a save every 10 iterations: each node's step is the whole model, S = 12 bytes a parameter (fp32
 * weights, AdamW m and v; TP 1 pads no vocabulary row when V is a multiple of the padding). With
 * in-memory replicas n0's step goes to n1 and n1's to n0: 2 S / 10 a iteration across regions, at
 * $0.02/GB, blocking S / 2 / bw + ceil(S / 2 / 1 MiB) latencies a pair (two flows: one a rank); the cloud upload (pipeline 0's
 * node, n0, uploads all of it) stays in us when the bucket is there (S / 10 inter-node, $0), and
 * crosses to eu at $0.02/GB when the bucket is there (over HTTPS: not traffic in the open). No
 * interval: nothing counted. */
static void test_ckpt_traffic(void) {
    ah_plan_t p;
    ah_error_t err = {0};
    dp4_across_regions(&p);
    p.cluster.net.egress_priced = true;
    p.cluster.net.egress_inter_region_usd_per_gb = 0.02;
    CHECK_EQ_I64(ah_vocab_padded(&p.model, 1), p.model.vocab);
    const double S = 12.0 * (double)ah_model_params_total(&p.model), per = S / 10;
    ah_plan_traffic_t none, t;
    ah_plan_traffic(&p, &none);
    CHECK(none.ckpt_every == 0 && none.kind_bytes[AH_TRAFFIC_CKPT][AH_LINK_INTER_REGION] == 0, "no interval: not counted");
    p.train.ckpt = (ah_ckpt_policy_t){.every = 10, .replica_gb = 1000, .cloud_region = "us"};
    ah_plan_traffic(&p, &t);
    CHECK_EQ_I64(t.ckpt_every, 10);
    CHECK_NEAR(t.kind_bytes[AH_TRAFFIC_CKPT][AH_LINK_INTER_REGION], 2 * per, 1e-6);
    CHECK_NEAR(t.kind_bytes[AH_TRAFFIC_CKPT][AH_LINK_INTER_NODE], per, 1e-6); /* the upload, in us */
    CHECK_NEAR(t.bytes[AH_LINK_INTER_REGION] - none.bytes[AH_LINK_INTER_REGION], 2 * per, 1e-6);
    CHECK_NEAR(t.kind_usd[AH_TRAFFIC_CKPT], 2 * per / 1e9 * 0.02, 1e-15);
    CHECK_NEAR(t.egress_usd - none.egress_usd, 2 * per / 1e9 * 0.02, 1e-15);
    CHECK_NEAR(t.crossings[0].bytes[AH_TRAFFIC_CKPT], 2 * per, 1e-6);
    const double bw = p.cluster.net.inter_region_gb_s * 1e9, lat = p.cluster.net.inter_region_latency_us * 1e-6;
    /* two lanes a pair (two ranks a node, rank k to rank k): S / 2 each at the per-GPU rate */
    const double blocked = 2 * (S / 2 / bw + ceil(S / 2 / 1048576.0) * lat) / 10;
    CHECK_NEAR(t.ckpt_blocked_s, blocked, 1e-12);
    ah_eval_t e0, e1;
    ah_train_t keep = p.train;
    p.train.ckpt = (ah_ckpt_policy_t){0};
    CHECK(ah_evaluate(&p, NULL, &e0, &err) == AH_OK, "%s", err.msg);
    p.train = keep;
    CHECK(ah_evaluate(&p, NULL, &e1, &err) == AH_OK, "%s", err.msg);
    CHECK_NEAR(e1.pred.iteration_s - e0.pred.iteration_s, blocked, 1e-12);
    CHECK_NEAR(e1.pred.breakdown.ckpt_s, blocked, 1e-15);
    ah_eval_free(&e0);
    ah_eval_free(&e1);
    snprintf(p.train.ckpt.cloud_region, sizeof p.train.ckpt.cloud_region, "eu");
    p.train.ckpt.replica_gb = 0;
    ah_plan_traffic(&p, &t);
    CHECK_NEAR(t.kind_bytes[AH_TRAFFIC_CKPT][AH_LINK_INTER_REGION], per, 1e-6);
    CHECK_NEAR(t.kind_usd[AH_TRAFFIC_CKPT], per / 1e9 * 0.02, 1e-15);
    CHECK(t.ckpt_blocked_s == 0 && t.public_bytes == none.public_bytes, "the upload blocks nothing, over HTTPS");
    ah_plan_free(&p);
}

/* tiny-llama (untied) in two pipelines of two stages (train-llama-pp2-recompute.json's pipeline
 * twice) under "dp_sync": hierarchical, n0 in region ra and n1 in rb. ON_ONE_NODE: all four stages
 * on n0; PIPES_ACROSS: stage s of pipeline i on node n<s>'s GPU i, so the pipelines cross the
 * regions while each DP group (a stage's blocks, the embedding's holders, the head's) is on one
 * node; GROUPS_ACROSS: pipeline i on node n<i> (stage s on its GPU s), so every DP group crosses. */
enum { ON_ONE_NODE, PIPES_ACROSS, GROUPS_ACROSS };
static bool two_by_two(int layout, ah_plan_t *p) {
    json_error_t je;
    json_t *doc = json_load_file(ah_test_src_path("examples/plans/train-llama-pp2-recompute.json"), 0, &je);
    CHECK(doc != NULL, "train-llama-pp2-recompute.json: %s", je.text);
    if (!doc) return false;
    json_t *pls = json_object_get(doc, "pipelines"), *train = json_object_get(doc, "train");
    json_array_append_new(pls, json_deep_copy(json_array_get(pls, 0)));
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < 2; s++) {
            json_t *st = json_array_get(json_object_get(json_array_get(pls, i), "stages"), s);
            json_t *dev = json_array_get(json_object_get(st, "devices"), 0);
            const int node = layout == PIPES_ACROSS ? s : layout == GROUPS_ACROSS ? i : 0;
            json_object_set_new(dev, "node", json_string(node ? "n1" : "n0"));
            json_object_set_new(dev, "index", json_integer(layout == PIPES_ACROSS ? i : layout == GROUPS_ACROSS ? s : 2 * s + i));
        }
    json_object_set_new(train, "global_batch", json_integer(2 * json_integer_value(json_object_get(train, "global_batch"))));
    json_t *nodes = json_object_get(json_object_get(doc, "cluster"), "nodes");
    for (int k = 0; k < 2; k++) {
        json_object_set_new(json_array_get(nodes, (size_t)k), "zone", json_string(k ? "zb" : "za"));
        json_object_set_new(json_array_get(nodes, (size_t)k), "region", json_string(k ? "rb" : "ra"));
    }
    json_object_set_new(doc, "dp_sync", json_string("hierarchical"));
    ah_error_t err = {0};
    const ah_status_t st = ah_plan_from_json(doc, "two-by-two", NULL, p, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "the two-by-two plan: %s", err.msg);
    return st == AH_OK;
}

/* A DP group inside one zone is priced as the runtime runs it, its flat ring on the links it
 * crosses, under either sync: the plan whose pipelines cross the regions, every group on one node,
 * syncs as the same plan on one node (it was priced on the plan's slowest link, the WAN: 0.6 GB/s
 * and 35 ms, under the hierarchical sync until 0fc386f and under "ring" until the per-group ring);
 * the plan on the same two nodes whose groups cross the WAN pays it. */
static void test_hier_groups_in_one_zone(void) {
    ah_plan_t across, one, groups;
    if (!two_by_two(PIPES_ACROSS, &across)) return;
    if (!two_by_two(ON_ONE_NODE, &one)) {
        ah_plan_free(&across);
        return;
    }
    if (!two_by_two(GROUPS_ACROSS, &groups)) {
        ah_plan_free(&across);
        ah_plan_free(&one);
        return;
    }
    ah_eval_t ea, eo, er, eg;
    ah_error_t err = {0};
    CHECK(ah_evaluate(&across, NULL, &ea, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_evaluate(&one, NULL, &eo, &err) == AH_OK, "%s", err.msg);
    across.dp_sync = groups.dp_sync = AH_DP_SYNC_RING;
    CHECK(ah_evaluate(&across, NULL, &er, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_evaluate(&groups, NULL, &eg, &err) == AH_OK, "%s", err.msg);
    CHECK(eo.pred.breakdown.dp_sync_s > 0, "a sync to price: %g s", eo.pred.breakdown.dp_sync_s);
    CHECK_NEAR(ea.pred.breakdown.dp_sync_s, eo.pred.breakdown.dp_sync_s, 1e-12);
    /* the flat ring: groups in one region as on one node, groups across the WAN on it */
    one.dp_sync = AH_DP_SYNC_RING;
    CHECK_NEAR(er.pred.breakdown.dp_sync_s, ah_plan_dp_sync_s(&one), 1e-12);
    CHECK(eg.pred.breakdown.dp_sync_s > 100 * er.pred.breakdown.dp_sync_s, "groups on the WAN %g s vs in one region %g s",
          eg.pred.breakdown.dp_sync_s, er.pred.breakdown.dp_sync_s);
    CHECK_NEAR(ah_plan_dp_sync_s(&groups), eg.pred.breakdown.dp_sync_s, 1e-12);
    CHECK_NEAR(ah_plan_dp_sync_s(&across), er.pred.breakdown.dp_sync_s, 1e-12); /* the planner's, per candidate */
    across.dp_sync = AH_DP_SYNC_HIERARCHICAL;
    CHECK_NEAR(ah_plan_dp_sync_s(&across), ea.pred.breakdown.dp_sync_s, 1e-12); /* the planner's, per candidate */
    ah_eval_free(&ea);
    ah_eval_free(&eo);
    ah_eval_free(&er);
    ah_eval_free(&eg);
    ah_plan_free(&across);
    ah_plan_free(&one);
    ah_plan_free(&groups);
}

/* bench_hier_sync.sh PLAN=pp's plan: tiny-gpt2 (tied) in two pipelines of two stages, stage 0 on
 * east host h<i>, stage 1 on west host h<i + 2>, one GPU a host, "dp_sync": hierarchical, the
 * east-west pair's total_gb_s two flows' worth (with_total) or none, a flow 0.000625 GB/s. Its dp_sync_s. */
static double pp_across_sync_s(bool with_total) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"version\": 1, \"model\": \"tiny-gpt2\", \"tp\": 1, \"dp_sync\": \"hierarchical\", \"train\": "
             "{\"global_batch\": 16, \"seq_len\": 64, \"micro_batch\": 2, \"precision\": \"fp32\"}, \"pipelines\": ["
             "{\"micro_batches\": 4, \"stages\": [{\"layers\": [0, 2], \"gpu\": \"cpu\", \"devices\": [{\"node\": "
             "\"h0\", \"index\": 0}]}, {\"layers\": [2, 4], \"gpu\": \"cpu\", \"devices\": [{\"node\": \"h2\", "
             "\"index\": 0}]}]}, {\"micro_batches\": 4, \"stages\": [{\"layers\": [0, 2], \"gpu\": \"cpu\", "
             "\"devices\": [{\"node\": \"h1\", \"index\": 0}]}, {\"layers\": [2, 4], \"gpu\": \"cpu\", \"devices\": "
             "[{\"node\": \"h3\", \"index\": 0}]}]}], \"cluster\": {\"gpu_types\": {\"cpu\": {\"memory_gib\": 1, "
             "\"tflops\": {\"fp32\": 0.05}, \"mem_bw_gb_s\": 10, \"intra_node_gb_s\": 5, \"reserved_gib\": 0}}, \"nodes\": ["
             "{\"name\": \"h0\", \"gpu\": \"cpu\", \"count\": 1, \"zone\": \"east-a\", \"region\": \"east\"}, "
             "{\"name\": \"h1\", \"gpu\": \"cpu\", \"count\": 1, \"zone\": \"east-a\", \"region\": \"east\"}, "
             "{\"name\": \"h2\", \"gpu\": \"cpu\", \"count\": 1, \"zone\": \"west-a\", \"region\": \"west\"}, "
             "{\"name\": \"h3\", \"gpu\": \"cpu\", \"count\": 1, \"zone\": \"west-a\", \"region\": \"west\"}], "
             "\"network\": {\"inter_node_gb_s\": 0.05, \"inter_zone_gb_s\": 0.05, \"latency_us\": 50, "
             "\"inter_region_gb_s\": 0.000625, \"inter_region_latency_us\": 50, \"links\": [{\"between\": "
             "[\"east\", \"west\"], \"private\": true%s}]}}}",
             with_total ? ", \"total_gb_s\": 0.00125" : "");
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    CHECK(doc != NULL, "the pp-across plan: %s", je.text);
    if (!doc) return NAN;
    ah_plan_t p;
    ah_error_t err = {0};
    const ah_status_t st = ah_plan_from_json(doc, "pp-across", NULL, &p, &err);
    json_decref(doc);
    CHECK(st == AH_OK, "the pp-across plan: %s", err.msg);
    if (st != AH_OK) return NAN;
    ah_eval_t e;
    double s = NAN;
    if (ah_evaluate(&p, NULL, &e, &err) == AH_OK) {
        s = e.pred.breakdown.dp_sync_s;
        CHECK_NEAR(ah_plan_dp_sync_s(&p), s, 1e-12); /* the planner's, per candidate */
        ah_eval_free(&e);
    } else
        CHECK(false, "evaluating the pp-across plan: %s", err.msg);
    ah_plan_free(&p);
    return s;
}

/* The pair's total_gb_s shared by the rings that can run at once: each device sums in one ring at
 * a time, so the tied embedding's group (both stages of every pipeline, the only group crossing
 * the WAN here) runs alone; its hierarchical sum sends from the two east hosts at once, two flows
 * that a total of two flows' worth carries at the full rate: the sync as without the total (it
 * counted the pipeline's two stage rings, four flows at half the rate: bench_hier_sync PLAN=pp
 * predicted the WAN's cost 0.3062 s against 0.2613 s measured). */
static void test_hier_total_rings_at_once(void) {
    const double free_flows = pp_across_sync_s(false), shared = pp_across_sync_s(true);
    CHECK(free_flows > 0.01, "the WAN's sync to price: %g s", free_flows);
    CHECK_NEAR(shared, free_flows, 1e-12);
}

int main(void) {
    test_hier_total_rings_at_once();
    test_hier_groups_in_one_zone();
    test_ckpt_traffic();
    test_example();
    test_links();
    test_wan_rule();
    test_wan_rule_pipeline();
    test_defaults();
    test_old_unchanged();
    test_refusals();
    return ah_test_finish();
}
