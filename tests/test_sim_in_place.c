/* The simulator's in-place change at a notice (simulate --in-place, sim.h AH_SIM_IN_PLACE_FRACTION): on
 * test_sim's one-preemption trace (od-0 on demand and sp-0 spot, sp-0 gone after the first hour with a
 * notice), autohet's recovery onto od-0 alone, a node that ran the old plan, saved at the notice, pays
 * the restart's overhead x the measured share instead of the whole of it, and nothing else changes:
 * the first start pays the whole restart; a notice whose save does not fit the grace period (the state
 * rolled back, as a relaunch) is not in place. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/json.h"
#include "harness.h"
#include "sim/sim.h"

static const char *CLUSTER =
    "{\"nodes\": ["
    "{\"name\": \"od-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"spot\": false, \"usd_per_gpu_hour\": 2},"
    "{\"name\": \"sp-0\", \"gpu\": \"A100-80G\", \"count\": 1, \"spot\": true, \"usd_per_gpu_hour\": 1}],"
    " \"network\": {\"inter_node_gb_s\": 100, \"cloud_gb_s\": 0.5}}";

/* autohet's replay with in_place on or off (grace: the grace period); r is the caller's to free. */
static bool replay(const ah_model_t *m, const ah_sim_avail_t *a, bool in_place, double grace, ah_sim_result_t *r) {
    ah_sim_opts_t o;
    ah_error_t err;
    ah_sim_opts_default(&o);
    o.train = (ah_train_t){.global_batch = 64, .seq_len = 1024, .micro_batch = 4, .precision = AH_PREC_BF16};
    o.hours = 2;
    o.ckpt_every_s = 1000;
    o.restart_s = 30;
    o.replan_s = 5;
    o.disk_gb_s = 2;
    o.grace_s = grace;
    o.in_place = in_place;
    const bool ok = ah_sim_run(m, a, &o, AH_POLICY_AUTOHET, r, &err) == AH_OK;
    CHECK(ok, "%s", err.msg);
    CHECK_EQ_I64(ok ? r->n_recs : 2, 2);
    return ok && r->n_recs == 2;
}

int main(void) {
    json_t *doc = NULL;
    ah_cluster_t c;
    ah_model_t m;
    ah_sim_pool_t pool = {0};
    ah_sim_avail_t a;
    ah_error_t err;
    CHECK(ah_json_load_string(CLUSTER, strlen(CLUSTER), "test cluster", &doc, &err) == AH_OK &&
              ah_cluster_from_json(doc, "test cluster", &c, &err) == AH_OK,
          "%s", err.msg);
    json_decref(doc);
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_sim_pool_resolve(&c, "A100-80G", &pool, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_trace_load(ah_test_src_path("tests/data/traces/one-preempt-s.csv"), AH_UNIT_AUTO, &pool.trace, &err) ==
              AH_OK, "%s", err.msg);
    CHECK(ah_sim_avail_build(&c, &pool, 1, 0, &a, &err) == AH_OK, "%s", err.msg);
    const double F = AH_SIM_IN_PLACE_FRACTION;
    CHECK(F > 0.004 && F < 0.007, "the measured share: %g", F);
    ah_sim_result_t off, on;
    if (replay(&m, &a, false, 120, &off) && replay(&m, &a, true, 120, &on)) {
        const ah_sim_recovery_t *v0 = &off.recs[1], *v1 = &on.recs[1];
        CHECK(!off.recs[0].in_place && !on.recs[0].in_place && on.recs[0].restart_s == 30, "the first start: 30 s");
        CHECK(v0->saved && !v0->in_place && v0->restart_s == 30, "without --in-place: the relaunch's 30 s");
        CHECK(v1->saved && v1->in_place, "with it, in place: saved, onto od-0, which ran the old plan");
        CHECK_NEAR(v1->restart_s, 30 * F, 1e-12);
        CHECK_NEAR(v0->seconds - v1->seconds, 30 * (1 - F), 1e-9);
        CHECK(v1->save_s == v0->save_s && v1->transfer_s == v0->transfer_s && v1->tokens_lost == 0, "the rest the same");
        /* the recovery's shorter by 30 (1 - F) s of od-0's training, the only plan after it */
        CHECK(on.tokens > off.tokens, "more tokens in place: %g vs %g", on.tokens, off.tokens);
        CHECK_NEAR(on.recovery_s, off.recovery_s - 30 * (1 - F), 1e-9);
    }
    ah_sim_result_free(&off);
    ah_sim_result_free(&on);
    /* a grace period of 1 s: no save at the notice, the disks' older state: a relaunch */
    if (replay(&m, &a, true, 1, &on)) CHECK(!on.recs[1].saved && !on.recs[1].in_place && on.recs[1].restart_s == 30,
                                            "unsaved: not in place (%d, %g s)", on.recs[1].in_place, on.recs[1].restart_s);
    ah_sim_result_free(&on);
    ah_sim_avail_free(&a);
    ah_sim_pool_free(&pool);
    ah_cluster_free(&c);
    return ah_test_finish();
}
