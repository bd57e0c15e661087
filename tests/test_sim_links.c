/* The simulator's transfers on the links they cross (issue 39), by hand on two-node clusters:
 * - the memory tier's replication to a partner in another zone of one region runs at the inter-zone
 *   rate (per GPU x the node's GPUs), not the inter-node one, and pays the inter-zone $/GB;
 * - a plan's egress while it trains is paid at the rate the overlapped iteration runs (the same
 *   iteration its tokens are counted at): egress $ = iterations trained x egress $ per iteration.
 * GPT-2 124M, two nodes in zones a and b of one region. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "plan/plan_out.h"
#include "planner/planner.h"
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

/* Each node's checkpoint replicated to its partner in the other zone: 2 ranks x 1 GB a node over 2
 * GPUs x 5 GB/s is 0.2 s (at the inter-node 100 GB/s per GPU it would be 0.01 s), $0.01/GB on 4 GB. */
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
    CHECK_NEAR(s, 0.2, 1e-12);
    CHECK_NEAR(usd, 0.04, 1e-12);
    CHECK_NEAR(across, 0, 0); /* one region */
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.snapshot_gb_s = 4; /* 1 GB a device: 0.25 s, then the replication */
    CHECK_NEAR(ah_sim_memory_save_s(c, &pl, bytes, holder, &o), 0.45, 1e-12);
    ah_placement_free(&pl);
    ah_plan_result_free(&r);
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

int main(void) {
    ah_cluster_t c;
    ah_model_t m;
    ah_error_t err;
    const bool loaded = ah_test_parse_cluster(ZONES, &c, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return ah_test_finish();
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK, "%s", err.msg);
    const ah_train_t tr = {.global_batch = 64, .seq_len = 1024, .micro_batch = 4, .precision = AH_PREC_BF16};
    test_replication_across_zones(&m, &c, &tr);
    test_egress_rate(&m, &c, &tr);
    ah_cluster_free(&c);
    return ah_test_finish();
}
