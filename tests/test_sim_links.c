/* The simulator's transfers on the links they cross (issue 39), by hand on small clusters, GPT-2 124M:
 * - the memory tier's replication to a partner in another zone of one region runs at the inter-zone
 *   rate, not the inter-node one, and pays the inter-zone $/GB; it is priced as the runtime runs it:
 *   its pairs in node order, blocking, one flow each (ah_ckpt_pairs_s: a ring of partners is a chain,
 *   pairs of distinct nodes overlap), and at least a links pair's bytes over its total_gb_s;
 * - a plan's egress while it trains is paid at the rate the overlapped iteration runs (the same
 *   iteration its tokens are counted at): egress $ = iterations trained x egress $ per iteration;
 * - the handover at a notice moves what the next plan's device reads over the link from its holder
 *   in the other zone, bounded by the pair's shared total_gb_s, and pays its $/GB;
 * - the cloud tier in another region: each periodic checkpoint's upload and a restart's download
 *   cross the WAN, at the least of cloud_gb_s and the link's rate, billed at its $/GB; the cloud holds
 *   a checkpoint only once its upload has ended; an upload's egress is paid as it runs (one never
 *   started is not paid, one cut at a restart pays what it sent), and every restart ends the old
 *   job's uploads, so a later rollback to the cloud goes to a checkpoint whose upload ended;
 * - and (not a link) a spot type at index 32 or more replays as any type. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/replica.h"
#include "core/str.h"
#include "harness.h"
#include "plan/ckpt_traffic.h"
#include "plan/plan_out.h"
#include "planner/planner.h"
#include "sim/replay.h"
#include "sim/sim.h"

/* Two nodes of 2 GPUs in two zones of one region: 100 GB/s per GPU inside the zone, 5 GB/s between. */
static const char *ZONES =
    "{\"nodes\": ["
    "{\"name\": \"a-0\", \"gpu\": \"A100-80G\", \"count\": 2, \"zone\": \"a\", \"spot\": true, \"usd_per_gpu_hour\": 2},"
    "{\"name\": \"b-0\", \"gpu\": \"A100-80G\", \"count\": 2, \"zone\": \"b\", \"spot\": true, \"usd_per_gpu_hour\": 2}],"
    " \"network\": {\"inter_node_gb_s\": 100, \"inter_zone_gb_s\": 5, \"cloud_gb_s\": 0.5,"
    " \"egress_usd_per_gb\": {\"inter_zone\": 0.01, \"inter_region\": 0.02}}}";

/* The plan the simulator makes on the whole cluster (its planner, as plans.c asks it). */
static bool plan_of(const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr, ah_plan_result_t *r) {
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train = *tr;
    o.schedule_trainable_only = true;
    ah_error_t err;
    const bool ok = ah_planner_run_sharded(m, c, &o, false, r, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    return ok;
}

/* One pair's seconds on link l over `lanes` flows: bytes / lanes a flow, the flows sharing the link's
 * total, a latency a 1 MiB piece of a flow (comm/transfer.c). */
static double pair_s(const ah_link_info_t *l, double bytes, int lanes) {
    return bytes / lanes / ah_link_shared_bw(l, lanes) + ceil(bytes / lanes / 1048576.0) * l->latency_s;
}

/* Each node's checkpoint replicated to its partner in the other zone: 2 ranks x 1 GB a node, over two
 * flows (one a rank: the runtime's lanes, rank k of a node to rank k of its partner) at 5 GB/s each
 * (0.2 s, and a latency a piece; at the inter-node 100 GB/s it would be 0.01 s), a-0 to b-0 then b-0 to
 * a-0, one after the other as the runtime's blocking pairs run (session 18's one flow a pair: 0.4 s
 * each), $0.01/GB on 4 GB. */
static void test_replication_across_zones(const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr) {
    ah_plan_result_t r;
    if (!plan_of(m, c, tr, &r)) return;
    ah_placement_t pl;
    ah_error_t err;
    CHECK(ah_placement_build(&r.plan, NULL, c->n_nodes, &pl, &err) == AH_OK, "%s", err.msg);
    CHECK(pl.n_ranks == 4 && pl.node_leader[0] >= 0 && pl.node_leader[1] >= 0, "the plan uses both nodes' 4 GPUs");
    if (pl.n_ranks != 4) {
        ah_placement_free(&pl);
        ah_plan_result_free(&r);
        return;
    }
    const int64_t bytes[4] = {1000000000, 1000000000, 1000000000, 1000000000};
    int holder[2];
    CHECK(ah_sim_memory_holders(c, &pl, bytes, 100, holder), "holders");
    CHECK(holder[0] == 1 && holder[1] == 0, "each node's partner is in the other zone: %d %d", holder[0], holder[1]);
    double usd, across;
    const double s = ah_sim_memory_replication(c, &pl, bytes, holder, &usd, &across);
    const ah_link_info_t zl = ah_link_of(c, 0, 1, c->nodes[0].type, c->nodes[1].type);
    CHECK(zl.bw == 5e9 && zl.latency_s > 0, "the inter-zone link: %g B/s, %g s", zl.bw, zl.latency_s);
    const double chain = 2 * pair_s(&zl, 2e9, 2);
    CHECK_NEAR(s, chain, 1e-12);
    CHECK_NEAR(usd, 0.04, 1e-12);
    CHECK_NEAR(across, 0, 0); /* one region */
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.snapshot_gb_s = 4; /* 1 GB a device: 0.25 s, then the replication */
    CHECK_NEAR(ah_sim_memory_save_s(c, &pl, bytes, holder, &o), 0.25 + chain, 1e-12);
    /* the zones' pair limited to 4 GB/s in all: two flows at 2 GB/s each, each pair 2 GB (0.5 s), the
     * two one after the other; at least 4 GB over the shared 4 GB/s (1 s) */
    char text[1024];
    snprintf(text, sizeof text, "%s", ZONES);
    char *net = strstr(text, "\"inter_node_gb_s\"");
    const char *links = "\"links\": [{\"between\": [\"a\", \"b\"], \"gb_s\": 5, \"total_gb_s\": 4}], ";
    if (net) {
        memmove(net + strlen(links), net, strlen(net) + 1);
        memcpy(net, links, strlen(links));
    }
    ah_cluster_t shared;
    const bool loaded = ah_test_parse_cluster(text, &shared, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (loaded) {
        const ah_link_info_t sl = ah_link_of(&shared, 0, 1, shared.nodes[0].type, shared.nodes[1].type);
        const double both = fmax(2 * pair_s(&sl, 2e9, 2), 1.0);
        CHECK_NEAR(ah_sim_memory_replication(&shared, &pl, bytes, holder, &usd, &across), both, 1e-12);
        CHECK_NEAR(usd, 0.04, 1e-12);
        CHECK_NEAR(ah_sim_memory_save_s(&shared, &pl, bytes, holder, &o), 0.25 + both, 1e-12);
        ah_cluster_free(&shared);
    }
    ah_placement_free(&pl);
    ah_plan_result_free(&r);
}

/* The runtime's pairs (plan/ckpt_traffic.h ah_ckpt_pairs_s) on four nodes of one zone at 100 GB/s: a
 * ring of partners (0 > 1 > 2 > 3 > 0) is a chain, each pair waiting for the one before it that shares a
 * node (four pairs' seconds); two pairs of distinct nodes (0 > 1, 2 > 3) overlap (one pair's); a pair
 * with no holder (-1) waits only for its own node. The cost model's ckpt_blocked_s prices the same. */
static void test_pairs_rule(void) {
    ah_cluster_t c;
    ah_error_t err;
#define NODE(k) "{\"name\": \"n" #k "\", \"gpu\": \"A100-80G\", \"count\": 1}"
    const bool loaded = ah_test_parse_cluster("{\"nodes\": [" NODE(0) ", " NODE(1) ", " NODE(2) ", " NODE(3) "], "
                                              "\"network\": {\"inter_node_gb_s\": 100}}", &c, &err) == AH_OK;
#undef NODE
    CHECK(loaded && c.n_nodes == 4, "four nodes: %s", loaded ? "" : err.msg);
    if (!loaded) return;
    const ah_link_info_t l = ah_link_of(&c, 0, 1, c.nodes[0].type, c.nodes[1].type);
    const double one = pair_s(&l, 1e9, 1);
    const ah_ckpt_pair_t ring[4] = {{0, 1, 1e9, 1}, {1, 2, 1e9, 1}, {2, 3, 1e9, 1}, {3, 0, 1e9, 1}};
    CHECK_NEAR(ah_ckpt_pairs_s(&c, ring, 4), 4 * one, 1e-12);
    const ah_ckpt_pair_t apart[2] = {{0, 1, 1e9, 1}, {2, 3, 1e9, 1}};
    CHECK_NEAR(ah_ckpt_pairs_s(&c, apart, 2), one, 1e-12);
    const ah_ckpt_pair_t lone[3] = {{0, 1, 1e9, 1}, {2, -1, 1e9, 1}, {1, 2, 0, 1}};
    CHECK_NEAR(ah_ckpt_pairs_s(&c, lone, 3), one, 1e-12);
    /* four lanes (one a rank): a quarter of the bytes each, at the per-GPU rate each (no total) */
    const ah_ckpt_pair_t wide[1] = {{0, 1, 1e9, 4}};
    CHECK_NEAR(ah_ckpt_pairs_s(&c, wide, 1), pair_s(&l, 1e9, 4), 1e-12);
    CHECK(pair_s(&l, 1e9, 4) < one / 3.9, "four lanes take a quarter: %g vs %g", pair_s(&l, 1e9, 4), one);
    CHECK(ah_ckpt_lane_count(8, 3) == 3 && ah_ckpt_lane_count(2, 8) == 2 && ah_ckpt_lane_count(0, 4) == 1,
          "lanes: the smaller node's ranks, at least one");
    /* the runtime's split of a pair's files: largest first to the lightest lane, the files not taken
     * in none: 5, 4, 3, 3, 1 (the 2 not taken) over 2 lanes: 5 > 0, 4 > 1, 3 > 1, 3 > 0, 1 > 1 */
    const uint64_t sizes[6] = {3, 5, 2, 1, 4, 3};
    const bool take[6] = {true, true, false, true, true, true};
    int lane[6];
    CHECK(ah_ckpt_lanes_assign(sizes, take, 6, 2, lane), "lanes assigned");
    CHECK(lane[1] == 0 && lane[4] == 1 && lane[0] == 1 && lane[5] == 0 && lane[2] == -1 && lane[3] == 1,
          "LPT: %d %d %d %d %d %d", lane[0], lane[1], lane[2], lane[3], lane[4], lane[5]);
    ah_cluster_free(&c);
}

/* ah_ckpt_pairs_in_rounds, the runtime's order: every pair once, the pairs of a round disjoint, in
 * their given order within it; a ring of 4 partners in 2 rounds (priced 2 pairs' seconds, not the
 * chain's 4), a ring of 5 in 3; a non-ring map (0 > 1, 1 > 0, 2 > 0, 3 > -1) and pairs with no bytes
 * (last, in no round). */
static int check_rounds(ah_ckpt_pair_t *pairs, int n, const char *what) {
    ah_ckpt_pair_t before[8];
    memcpy(before, pairs, (size_t)n * sizeof *pairs);
    const int rounds = ah_ckpt_pairs_in_rounds(pairs, n);
    int seen = 0, round = 0, round_start = 0;
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++)
            if (before[j].from == pairs[k].from && before[j].to == pairs[k].to) seen |= 1 << j;
    CHECK(seen == (1 << n) - 1, "%s: every pair once", what);
    for (int k = 0; k < n && pairs[k].bytes > 0; k++) { /* a new round where a pair meets one of this round */
        for (int j = round_start; j < k; j++)
            if (pairs[j].from == pairs[k].from || pairs[j].from == pairs[k].to ||
                (pairs[j].to >= 0 && (pairs[j].to == pairs[k].from || pairs[j].to == pairs[k].to))) {
                round++;
                round_start = k;
                break;
            }
    }
    CHECK(round + 1 == rounds || (rounds == 0 && (n == 0 || pairs[0].bytes <= 0)), "%s: %d rounds, %d by the order",
          what, rounds, round + 1);
    return rounds;
}

static void test_pairs_in_rounds(void) {
    ah_cluster_t c;
    ah_error_t err;
#define NODE(k) "{\"name\": \"n" #k "\", \"gpu\": \"A100-80G\", \"count\": 1}"
    const bool loaded = ah_test_parse_cluster("{\"nodes\": [" NODE(0) ", " NODE(1) ", " NODE(2) ", " NODE(3) ", "
                                              NODE(4) "], \"network\": {\"inter_node_gb_s\": 100}}", &c, &err) == AH_OK;
#undef NODE
    CHECK(loaded && c.n_nodes == 5, "five nodes: %s", loaded ? "" : err.msg);
    if (!loaded) return;
    const ah_link_info_t l = ah_link_of(&c, 0, 1, c.nodes[0].type, c.nodes[1].type);
    const double one = pair_s(&l, 1e9, 1);
    ah_ckpt_pair_t ring4[4] = {{0, 1, 1e9, 1}, {1, 2, 1e9, 1}, {2, 3, 1e9, 1}, {3, 0, 1e9, 1}};
    CHECK(check_rounds(ring4, 4, "ring of 4") == 2, "a ring of 4 in 2 rounds");
    CHECK(ring4[0].from == 0 && ring4[1].from == 2 && ring4[2].from == 1 && ring4[3].from == 3,
          "round 0 takes 0 > 1 and 2 > 3, in node order: %d %d %d %d", ring4[0].from, ring4[1].from, ring4[2].from,
          ring4[3].from);
    CHECK_NEAR(ah_ckpt_pairs_s(&c, ring4, 4), 2 * one, 1e-12);
    ah_ckpt_pair_t ring5[5] = {{0, 1, 1e9, 1}, {1, 2, 1e9, 1}, {2, 3, 1e9, 1}, {3, 4, 1e9, 1}, {4, 0, 1e9, 1}};
    CHECK(check_rounds(ring5, 5, "ring of 5") == 3, "a ring of 5 in 3 rounds");
    CHECK_NEAR(ah_ckpt_pairs_s(&c, ring5, 5), 3 * one, 1e-12);
    ah_ckpt_pair_t other[6] = {{0, 1, 1e9, 1}, {1, 0, 1e9, 1}, {2, 0, 0, 1}, {2, 0, 1e9, 1}, {3, -1, 1e9, 1}, {4, 3, 1e9, 1}};
    CHECK(check_rounds(other, 6, "a non-ring map") == 3, "0 > 1, 1 > 0, 2 > 0 meet at node 0: 3 rounds");
    CHECK(other[0].from == 0 && other[1].from == 3 && other[2].from == 1 && other[3].from == 4 &&
              other[4].from == 2 && other[4].bytes > 0 && other[5].bytes <= 0,
          "0 > 1 and 3 > -1, then 1 > 0 and 4 > 3, then 2 > 0, the empty pair last");
    CHECK_NEAR(ah_ckpt_pairs_s(&c, other, 6), 3 * one, 1e-12);
    ah_cluster_free(&c);
}

/* on-demand (never preempted) for 1 h: its egress is the iterations it trained (tokens / tokens per
 * iteration) x the plan's egress $ per iteration; the plan's DP sync crosses the zones, partly
 * hidden behind the backward, so the overlapped iteration is shorter than the one with the sync
 * after it, and egress at that slower rate would be short by their ratio. */
static void test_egress_rate(const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *tr) {
    ah_plan_result_t r;
    if (!plan_of(m, c, tr, &r)) return;
    ah_plan_traffic_t t;
    ah_plan_traffic(&r.plan, &t);
    const double per_iter = t.egress_usd, overlap = r.eval.iteration_overlap_s, after = r.eval.pred.iteration_s;
    CHECK(per_iter > 0 && overlap < after * 0.999, "egress $%g per iteration, iteration %g s overlapped < %g s",
          per_iter, overlap, after);
    const double tokens_per_s = (double)tr->global_batch * tr->seq_len / overlap;
    ah_plan_result_free(&r);
    ah_sim_avail_t a;
    ah_error_t err;
    CHECK(ah_sim_avail_build(c, NULL, 0, 0, &a, &err) == AH_OK, "%s", err.msg);
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.train = *tr;
    o.hours = 1;
    o.replan_s = 5;
    ah_sim_result_t s;
    CHECK(ah_sim_run(m, &a, &o, AH_POLICY_ON_DEMAND, &s, &err) == AH_OK, "%s", err.msg);
    CHECK(s.n_segs >= 2 && s.segs[s.n_segs - 1].phase == AH_PHASE_TRAIN, "trains");
    if (s.n_segs >= 2) CHECK_NEAR(s.segs[s.n_segs - 1].tokens_per_s, tokens_per_s, 1e-9 * tokens_per_s);
    const double iterations = s.tokens / ((double)tr->global_batch * tr->seq_len);
    CHECK(iterations > 1000, "%g iterations in the hour", iterations);
    CHECK_NEAR(s.ckpt_egress_usd, 0, 0);
    CHECK_NEAR(s.egress_usd, iterations * per_iter, 1e-9 * s.egress_usd);
    ah_sim_result_free(&s);
    ah_sim_avail_free(&a);
}

/* A pipeline of two stages over zones a and b (their link 2 GB/s per GPU, as slow as test_sim's partial
 * loss makes the planner cut the model in two); sp-0 (zone b) leaves at 3600 s with a notice. With the
 * memory tier, fast snapshots and slow disks the save is the handover: od-0 receives sp-0's stage from
 * sp-0 over that link (not at the inter-node 100 GB/s; one pair, one flow, a latency a 1 MiB piece)
 * and pays its $0.01/GB. */
static const char *HANDOVER =
    "{\"nodes\": ["
    "{\"name\": \"od-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"a\", \"spot\": false, \"usd_per_gpu_hour\": 2},"
    "{\"name\": \"sp-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"b\", \"spot\": true, \"usd_per_gpu_hour\": 1}],"
    " \"network\": {\"inter_node_gb_s\": 100, \"inter_zone_gb_s\": 2, \"cloud_gb_s\": 0.5,"
    " \"links\": [{\"between\": [\"a\", \"b\"], \"gb_s\": 2, \"usd_per_gb\": 0.01}]}}";

static void test_handover_across_zones(const ah_model_t *m, const ah_train_t *tr) {
    ah_cluster_t c;
    ah_error_t err;
    const bool loaded = ah_test_parse_cluster(HANDOVER, &c, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return;
    ah_sim_pool_t pool = {0};
    CHECK(ah_sim_pool_resolve(&c, "A100-80G", &pool, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_trace_load(ah_test_src_path("tests/data/traces/one-preempt-s.csv"), AH_UNIT_AUTO, &pool.trace, &err) ==
              AH_OK,
          "%s", err.msg);
    ah_sim_avail_t a;
    CHECK(ah_sim_avail_build(&c, &pool, 1, 0, &a, &err) == AH_OK, "%s", err.msg);
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.train = *tr;
    o.hours = 2;
    o.ckpt_every_s = 1000;
    o.restart_s = 30;
    o.replan_s = 5;
    o.disk_gb_s = 0.5;
    o.replica_memory_gb = 1000;
    o.snapshot_gb_s = 1e12; /* the snapshot ~0: the save is the handover's move */
    ah_sim_result_t r;
    CHECK(ah_sim_run(m, &a, &o, AH_POLICY_AUTOHET, &r, &err) == AH_OK, "%s", err.msg);
    CHECK(r.n_recs == 2 && r.recs[1].handover, "the notice's save was the handover (%d recoveries)", r.n_recs);
    if (r.n_recs == 2 && r.recs[1].handover) {
        const ah_sim_recovery_t *v = &r.recs[1];
        const double moved = (double)v->bytes[AH_TIER_MEMORY]; /* what od-0 did not hold: sp-0's stage */
        CHECK(moved > 1e8 && v->bytes[AH_TIER_LOCAL] > 0, "od-0 keeps its stage (%g B) and receives %g B",
              (double)v->bytes[AH_TIER_LOCAL], moved);
        const ah_link_info_t l = ah_link_of(&c, 1, 0, c.nodes[1].type, c.nodes[0].type);
        CHECK_NEAR(v->save_s, pair_s(&l, moved, 1), 1e-9); /* one GPU a node: one lane */
        CHECK_NEAR(v->egress_usd, moved / 1e9 * 0.01, 1e-12);
        CHECK_EQ_I64(v->bytes_across_regions, 0);
    }
    ah_sim_result_free(&r);
    ah_sim_avail_free(&a);
    ah_sim_pool_free(&pool);
    ah_cluster_free(&c);
}

/* The handover moves a piece once to a node (the runtime's ckpt/handover.h: each file a node's ranks
 * read, once a node), not once per device that reads it: train-pp4's four stages with stages 2 and 3
 * moved to n1, handed over to train-dp4 (four whole replicas on n0) moves from n1 to n0 exactly what
 * train-single (one device on n0) does: stages 2 and 3 and the head, and nothing else (before, four
 * times that). */
static bool placement_of(const char *plan, int second_half_on, ah_placement_t *pl) {
    ah_plan_t p;
    ah_error_t err;
    const bool loaded = ah_plan_load(ah_test_src_path(plan), NULL, &p, &err) == AH_OK;
    CHECK(loaded, "%s", loaded ? "" : err.msg);
    if (!loaded) return false;
    for (int s = p.pipelines[0].n_stages / 2; second_half_on >= 0 && s < p.pipelines[0].n_stages; s++)
        p.pipelines[0].stages[s].devices[0].node = second_half_on;
    const bool built = ah_placement_build(&p, NULL, p.cluster.n_nodes, pl, &err) == AH_OK;
    CHECK(built, "%s", built ? "" : err.msg);
    ah_plan_free(&p);
    return built;
}

/* Replicas pay (ckpt/replica.h ah_replica_pays, the simulator's choice) where some node holds a piece
 * no other node does: train-pp4 with its second half on n1 (each node's stages its own) yes; train-dp4's
 * four replicas two on n0 and two on n1 (every piece on both nodes' disks) no. */
static void test_replicas_pay(void) {
    ah_placement_t pp, dp;
    if (placement_of("examples/plans/train-pp4.json", 1, &pp)) {
        bool pays = false;
        CHECK(ah_replica_pays(&pp, &pays) && pays, "a pipeline over two nodes: each node's stages on its disk alone");
        ah_placement_free(&pp);
    }
    ah_plan_t p;
    ah_error_t err;
    if (ah_plan_load(ah_test_src_path("examples/plans/train-dp4.json"), NULL, &p, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    for (int i = 0; i < p.n_pipelines; i++) p.pipelines[i].stages[0].devices[0].node = i / 2;
    const bool built = ah_placement_build(&p, NULL, p.cluster.n_nodes, &dp, &err) == AH_OK;
    CHECK(built, "%s", built ? "" : err.msg);
    if (built) {
        bool pays = true;
        CHECK(ah_replica_pays(&dp, &pays) && !pays, "data-parallel replicas on two nodes: every piece on both disks");
        ah_placement_free(&dp);
    }
    ah_plan_free(&p);
}

static void test_handover_once_a_node(void) {
    ah_plan_t pp4;
    ah_error_t err;
    if (ah_plan_load(ah_test_src_path("examples/plans/train-pp4.json"), NULL, &pp4, &err) != AH_OK) {
        CHECK(false, "%s", err.msg);
        return;
    }
    ah_placement_t was, dp4, one;
    const int nn = pp4.cluster.n_nodes;
    double moved[16], alone[16];
    if (nn == 4 && placement_of("examples/plans/train-pp4.json", 1, &was)) {
        if (placement_of("examples/plans/train-dp4.json", -1, &dp4)) {
            if (placement_of("examples/plans/train-single.json", -1, &one)) {
                CHECK(ah_sim_handover_moved(&pp4.cluster, &pp4.model, &was, &dp4, NULL, moved), "moved");
                CHECK(ah_sim_handover_moved(&pp4.cluster, &pp4.model, &was, &one, NULL, alone), "moved");
                const int L = (int)pp4.model.n_layer;
                const double half = (double)(2 * ah_layer_params(&pp4.model, AH_LAYER_BLOCK, 1) +
                                             ah_layer_params(&pp4.model, AH_LAYER_HEAD, 1)) * AH_SIM_CKPT_BYTES_PER_PARAM;
                CHECK(L == 4, "tiny-gpt2: 4 blocks (%d)", L);
                CHECK_NEAR(alone[1 * nn + 0], half, 1e-12);
                CHECK_NEAR(moved[1 * nn + 0], half, 1e-12);
                for (int q = 0; q < nn * nn; q++)
                    if (q != 1 * nn + 0) CHECK(moved[q] == 0 && alone[q] == 0, "pair %d > %d moves nothing", q / nn, q % nn);
                ah_placement_free(&one);
            }
            ah_placement_free(&dp4);
        }
        ah_placement_free(&was);
    }
    ah_plan_free(&pp4);
}

/* The cloud tier in region ra (the first node's), the training in rb: three A100 nodes in rb and a V100
 * in ra that runs no bf16, so varuna (cloud-only) trains on the A100s alone. The WAN: 0.5 GB/s per GPU,
 * 0.5 GB/s for the pair in all, $0.02/GB; cloud_gb_s 1. rb-2 leaves at 2500 s: varuna restarts on rb-0 and
 * rb-1, both downloading the state at once over the WAN, so the download takes their bytes over the
 * pair's 0.5 GB/s (each alone would take its own over 0.5, and at cloud_gb_s 1 they took half that);
 * each of the two periodic checkpoints before it uploaded one copy of the model across. */
static const char *CLOUD =
    "{\"nodes\": ["
    "{\"name\": \"ra-0\", \"gpu\": \"V100-16G\", \"count\": 1, \"zone\": \"ra-1\", \"region\": \"ra\", \"spot\": false, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"rb-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"rb-1\", \"region\": \"rb\", \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"rb-1\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"rb-1\", \"region\": \"rb\", \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"rb-2\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"rb-1\", \"region\": \"rb\", \"spot\": true, \"usd_per_gpu_hour\": 1}],"
    " \"network\": {\"inter_node_gb_s\": 100, \"cloud_gb_s\": 1,"
    " \"links\": [{\"between\": [\"ra\", \"rb\"], \"gb_s\": 0.5, \"total_gb_s\": 0.5, \"usd_per_gb\": 0.02,"
    " \"private\": true}]}}";

/* pool: the nodes of gpu in c, up as the count trace rows says (a temporary file, removed); a: c's
 * availability under it. */
static bool trace_avail(const ah_cluster_t *c, const char *gpu, const char *rows, ah_sim_pool_t *pool, ah_sim_avail_t *a) {
    ah_error_t err;
    char trace[] = "/tmp/ah_test_sim_links_XXXXXX";
    const int fd = mkstemp(trace);
    bool ok = fd >= 0 && write(fd, rows, strlen(rows)) == (ssize_t)strlen(rows);
    CHECK(ok, "write %s", trace);
    if (fd >= 0) close(fd);
    ok = ok && ah_sim_pool_resolve(c, gpu, pool, &err) == AH_OK && ah_trace_load(trace, AH_UNIT_AUTO, &pool->trace, &err) == AH_OK &&
         ah_sim_avail_build(c, pool, 1, 0, a, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    unlink(trace);
    return ok;
}

/* A checkpoint every 1000 s that holds no training, restarts of 30 s + 5 s of re-planning, over seconds. */
static void cloud_opts(ah_sim_opts_t *o, const ah_train_t *tr, double seconds) {
    ah_sim_opts_default(o);
    o->train = *tr;
    o->hours = seconds / 3600.0;
    o->ckpt_every_s = 1000;
    o->ckpt_snapshot_gb_s = INFINITY;
    o->restart_s = 30;
    o->replan_s = 5;
}

static void test_cloud_across_regions(const ah_model_t *m, const ah_train_t *tr) {
    ah_cluster_t c;
    ah_error_t err;
    const bool loaded = ah_test_parse_cluster(CLOUD, &c, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return;
    ah_sim_pool_t pool = {0};
    ah_sim_avail_t a;
    trace_avail(&c, "A100-80G", "0,3\n2500,2\n", &pool, &a);
    ah_sim_opts_t o;
    cloud_opts(&o, tr, 3000); /* checkpoints at ~1035 and ~2035 s; none after the restart */
    ah_sim_result_t r;
    CHECK(ah_sim_run(m, &a, &o, AH_POLICY_VARUNA, &r, &err) == AH_OK, "%s", err.msg);
    CHECK(r.n_recs == 2, "the start and the restart: %d", r.n_recs);
    if (r.n_recs == 2) {
        const ah_sim_recovery_t *v = &r.recs[1];
        const double down = (double)v->bytes[AH_TIER_CLOUD];
        const double model = (double)(ah_model_params_total(m) + (ah_vocab_padded(m, 1) - m->vocab) * m->d_model) * 12;
        CHECK_NEAR(down, 2 * model, 1e-12); /* two data-parallel replicas, each the whole model */
        CHECK_NEAR(v->tier_s[AH_TIER_CLOUD], down / 0.5e9, 1e-12);
        CHECK_NEAR(v->egress_usd, down / 1e9 * 0.02, 1e-12);
        CHECK_EQ_I64(v->bytes_across_regions, (int64_t)down);
        CHECK_NEAR(r.ckpt_bytes_across_regions, down + 2 * model, 1e-12);
        CHECK_NEAR(r.ckpt_egress_usd, (down + 2 * model) / 1e9 * 0.02, 1e-12);
    }
    ah_sim_result_free(&r);
    /* the bucket in rb (--cloud-region rb): nothing crosses; in a region with no node: refused, named */
    snprintf(o.cloud_region, sizeof o.cloud_region, "rb");
    CHECK(ah_sim_run(m, &a, &o, AH_POLICY_VARUNA, &r, &err) == AH_OK, "%s", err.msg);
    CHECK_NEAR(r.ckpt_egress_usd, 0, 0);
    if (r.n_recs == 2) CHECK_NEAR(r.recs[1].tier_s[AH_TIER_CLOUD], (double)r.recs[1].bytes[AH_TIER_CLOUD] / 2 / 1e9, 1e-12);
    ah_sim_result_free(&r);
    snprintf(o.cloud_region, sizeof o.cloud_region, "nowhere");
    CHECK_ERR(ah_sim_run(m, &a, &o, AH_POLICY_VARUNA, &r, &err), AH_ERR_USAGE, err,
              "--cloud-region \"nowhere\": no node of the cluster is in it; its regions are ra, rb");
    ah_sim_avail_free(&a);
    ah_cluster_free(&c);
    /* the WAN at 0.2 MB/s: the first checkpoint's upload (1.49 GB from the lowest holders, at least a
     * third of it from one node: 2490 s or more) has not ended at the removal (2500 s, 1465 s after
     * it), so the cloud holds no checkpoint yet and varuna rolls back to the start: every token
     * trained since 35 s is lost */
    char slow[2048];
    snprintf(slow, sizeof slow, "%s", CLOUD);
    char *bw = strstr(slow, "\"gb_s\": 0.5, \"total_gb_s\": 0.5");
    const char *to = "\"gb_s\": 0.0002                "; /* as long as what it replaces */
    if (bw) memcpy(bw, to, strlen(to));
    const bool slow_loaded = ah_test_parse_cluster(slow, &c, &err) == AH_OK;
    CHECK(slow_loaded, "%s", err.msg);
    if (slow_loaded) {
        CHECK(ah_sim_avail_build(&c, &pool, 1, 0, &a, &err) == AH_OK, "%s", err.msg);
        o.cloud_region[0] = 0;
        CHECK(ah_sim_run(m, &a, &o, AH_POLICY_VARUNA, &r, &err) == AH_OK, "%s", err.msg);
        if (r.n_recs == 2 && r.n_segs > 2) {
            const double rate = r.segs[1].tokens_per_s; /* the three nodes' */
            CHECK(r.segs[1].phase == AH_PHASE_TRAIN && rate > 0, "trains on three nodes after the start");
            CHECK_NEAR(r.recs[1].tokens_lost, rate * (2500 - 35), 1e-9);
        } else
            CHECK(false, "%d recoveries, %d segments", r.n_recs, r.n_segs);
        ah_sim_result_free(&r);
        ah_sim_avail_free(&a);
        ah_cluster_free(&c);
    }
    ah_sim_pool_free(&pool);
}

/* ra-0 (a V100: no bf16, the bucket's region only) and two A100 spot nodes in rb, the WAN at 0.2 MB/s. */
static const char *SLOW_WAN =
    "{\"nodes\": ["
    "{\"name\": \"ra-0\", \"gpu\": \"V100-16G\", \"count\": 1, \"zone\": \"ra-1\", \"region\": \"ra\", \"spot\": false, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"rb-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"rb-1\", \"region\": \"rb\", \"spot\": true, \"usd_per_gpu_hour\": 1},"
    "{\"name\": \"rb-1\", \"gpu\": \"A100-80G\", \"count\": 1, \"zone\": \"rb-1\", \"region\": \"rb\", \"spot\": true, \"usd_per_gpu_hour\": 1}],"
    " \"network\": {\"inter_node_gb_s\": 100, \"cloud_gb_s\": 1,"
    " \"links\": [{\"between\": [\"ra\", \"rb\"], \"gb_s\": 0.0002, \"usd_per_gb\": 0.02, \"private\": true}]}}";

/* A run of pol on SLOW_WAN's A100s up as the count trace rows says, over seconds (cloud_opts). */
static bool slow_wan_run(const ah_model_t *m, const ah_train_t *tr, const char *rows, double seconds, ah_policy_t pol,
                         ah_sim_result_t *r) {
    ah_cluster_t c;
    ah_error_t err;
    bool ok = ah_test_parse_cluster(SLOW_WAN, &c, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    if (!ok) return false;
    ah_sim_pool_t pool = {0};
    ah_sim_avail_t a = {0};
    ah_sim_opts_t o;
    cloud_opts(&o, tr, seconds);
    ok = trace_avail(&c, "A100-80G", rows, &pool, &a) && ah_sim_run(m, &a, &o, pol, r, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    ah_sim_avail_free(&a);
    ah_sim_pool_free(&pool);
    ah_cluster_free(&c);
    return ok;
}

/* Uploads billed as they run (cloud at 0.2 MB/s per GPU across the regions, bucket in ra): varuna on
 * rb-0 and rb-1 (two data-parallel replicas: rb-0, the lowest holder of every shard, uploads the whole
 * model, 1.494 GB, 7469 s), checkpoints at 1035, 2035 and 3035 s; rb-1 leaves at 3500 s. The first
 * upload is still in flight then: varuna's job (cloud-only: no node drops its upload) waits for it the
 * whole grace period (120 s), then it is cut, having sent (3620 - 1035) s x 0.2 MB/s = 0.517 GB, $0.0103
 * at $0.02/GB; the second, replaced by the third while it waited, never starts, and the third, waiting,
 * ends with the job: neither is billed (before, each checkpoint paid a whole upload, 4.48 GB). */
static void test_uploads_billed_as_sent(const ah_model_t *m, const ah_train_t *tr) {
    ah_sim_result_t r;
    if (!slow_wan_run(m, tr, "0,2\n3500,1\n", 4000, AH_POLICY_VARUNA, &r)) return;
    CHECK(r.n_recs == 2, "the start and the restart: %d", r.n_recs);
    if (r.n_recs == 2) {
        const double down = (double)r.recs[1].bytes_across_regions; /* the restart's, if any */
        CHECK_NEAR(r.recs[1].wait_s, 120, 1e-9);
        CHECK_NEAR(r.ckpt_bytes_across_regions - down, (3620 - 1035) * 0.2e6, 1e-9);
        CHECK_NEAR(r.ckpt_egress_usd - r.recs[1].egress_usd, (3620 - 1035) * 0.2e6 / 1e9 * 0.02, 1e-9);
    }
    ah_sim_result_free(&r);
}

/* varuna (the runtime's --recovery cloud-only drops every disk at a stop, so no node drops its upload:
 * runtime/ckpt_notice.c) waits at a restart for an upload that ends within the grace period: on rb-0 and
 * rb-1 as above, the first checkpoint's upload (1035 s, 7469 s long) ends ~54 s after rb-1 leaves at
 * 8450 s; the job's exit waits for it, then for the newest (waiting since ~8035 s, started then, cut at the
 * grace period's end: the stop lasts 120 s), and the restart rolls back to the first checkpoint (1000 s of
 * training), not to the start (before, the upload was cut at the notice: every token since the start lost). */
static void test_cloud_only_waits_for_uploads(const ah_model_t *m, const ah_train_t *tr) {
    ah_sim_result_t r;
    if (!slow_wan_run(m, tr, "0,2\n8450,1\n", 9000, AH_POLICY_VARUNA, &r)) return;
    CHECK(r.n_recs == 2, "the start and the restart: %d", r.n_recs);
    if (r.n_recs == 2) {
        const ah_sim_recovery_t *v0 = &r.recs[0], *v1 = &r.recs[1];
        CHECK_NEAR(v1->wait_s, 120, 1e-9);
        CHECK_NEAR(v1->rollback_s, 8450 - (v0->seconds - v0->first_step_s) - 1000, 1e-9);
    }
    ah_sim_result_free(&r);
}

/* A restart that is not a rollback to the cloud ends the old job's uploads too (the runtime's staying
 * nodes cancel theirs): autohet on rb-0 and rb-1 (as above, the WAN at 0.2 MB/s, an upload 7469 s);
 * rb-1 leaves at 1500 s, autohet saves at the notice and goes on on rb-0 from its disk; the upload of
 * the checkpoint at 1000 s of training (1035 s) is cut. The new job's first checkpoint, at 2000 s of
 * training (~2070 s), uploads by ~9540 s; every node is gone at 10100 s and the restart at 10110 s
 * reads the cloud: it rolls back to 2000 s of training. Before, the cut upload ran on to ~8500 s, the
 * new job's waited behind it, and the rollback went to 1000 s: 1000 s more. */
static void test_restart_cuts_uploads(const ah_model_t *m, const ah_train_t *tr) {
    ah_sim_result_t r;
    if (!slow_wan_run(m, tr, "0,2\n1500,1\n10100,0\n10110,1\n", 11000, AH_POLICY_AUTOHET, &r)) return;
    CHECK(r.n_recs == 3 && r.recs[1].saved && r.recs[1].tokens_lost == 0 && r.recs[2].bytes[AH_TIER_CLOUD] > 0,
          "the start, rb-1's notice (saved, nothing lost), the restart from the cloud: %d", r.n_recs);
    if (r.n_recs == 3) {
        const ah_sim_recovery_t *v0 = &r.recs[0], *v1 = &r.recs[1];
        /* each recovery's first step trains, and so does the step in flight at the notice (its wait) */
        const double trained = (1500 - (v0->seconds - v0->first_step_s)) + v1->wait_s +
                               (10100 - 1500 - (v1->seconds - v1->first_step_s));
        CHECK_NEAR(r.recs[2].rollback_s, trained - 2000, 1e-9);
    }
    ah_sim_result_free(&r);
}

/* A spot type at index 32 (33 GPU types, the nodes of the last) replays as any type: sim.c and plans.c
 * shifted 32-bit type masks by the type index, undefined from 32 on (the sanitizer build aborted). */
static void test_many_types(const ah_model_t *m, const ah_train_t *tr) {
    char text[4096];
    ah_str_t s = ah_str_fixed(text, sizeof text);
    ah_str_appendf(&s, "{\"gpu_types\": {");
    for (int ty = 0; ty <= 32; ty++) ah_str_appendf(&s, "%s\"t%d\": {\"base\": \"A100-80G\"}", ty ? ", " : "", ty);
    ah_str_appendf(&s, "}, \"nodes\": ["
                       "{\"name\": \"n-0\", \"gpu\": \"t32\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1},"
                       "{\"name\": \"n-1\", \"gpu\": \"t32\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1}],"
                       " \"network\": {\"inter_node_gb_s\": 100, \"cloud_gb_s\": 0.5}}");
    ah_cluster_t c;
    ah_error_t err;
    const bool loaded = ah_test_parse_cluster(text, &c, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return;
    CHECK(c.n_types == 33 && ah_cluster_find_type(&c, "t32") == 32, "t32 is type 32 of %d", c.n_types);
    ah_sim_pool_t pool = {0};
    ah_sim_avail_t a;
    trace_avail(&c, "t32", "0,2\n1000,1\n", &pool, &a);
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.train = *tr;
    o.hours = 2000 / 3600.0;
    o.ckpt_every_s = 300;
    ah_sim_result_t r;
    CHECK(ah_sim_run(m, &a, &o, AH_POLICY_AUTOHET, &r, &err) == AH_OK, "%s", err.msg);
    CHECK(r.preemptions == 1 && r.n_recs == 2, "one removal, one restart: %d %d", r.preemptions, r.n_recs);
    ah_sim_result_free(&r);
    ah_sim_avail_free(&a);
    ah_sim_pool_free(&pool);
    ah_cluster_free(&c);
}

int main(void) {
    ah_cluster_t c;
    ah_model_t m;
    ah_error_t err;
    const bool loaded = ah_test_parse_cluster(ZONES, &c, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return ah_test_finish();
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK, "%s", err.msg);
    const ah_train_t tr = {.global_batch = 64, .seq_len = 1024, .micro_batch = 4, .precision = AH_PREC_BF16};
    test_pairs_rule();
    test_replicas_pay();
    test_pairs_in_rounds();
    test_replication_across_zones(&m, &c, &tr);
    test_egress_rate(&m, &c, &tr);
    test_handover_across_zones(&m, &tr);
    test_handover_once_a_node();
    test_cloud_across_regions(&m, &tr);
    test_uploads_billed_as_sent(&m, &tr);
    test_cloud_only_waits_for_uploads(&m, &tr);
    test_many_types(&m, &tr);
    test_restart_cuts_uploads(&m, &tr);
    ah_cluster_free(&c);
    return ah_test_finish();
}
