/* simulate --exposure-aware (plans.c ah_sim_plan_choose, docs/simulator.md rule 12): autohet's choice of
 * plan weighs the rollback a hit on a node that holds a piece of the state alone costs. The set-up:
 * llama2-7b on three A100 and three H800 spot nodes of one GPU each; the planner's plan is one pipeline
 * of six stages over all of them (every piece on one node), its batch-balanced baseline two pipelines,
 * one a type (every piece on an A100 node and an H800 node), about 1.3x slower. An A100 node is lost at
 * 1000 s (both replays start on the pipeline: no removal seen yet, so no exposure) and another at 5000 s.
 * Plain: the pipeline again after the first loss, so the second rolls back to the cloud. Exposure-aware:
 * with a removal seen, the rollback a hit on one of the pipeline's A100 nodes would cost (half the hour
 * between checkpoints and the upload) outweighs its speed, so it takes a slower plan of the baselines',
 * and the second loss rolls nothing back. Fails with the flag ignored (the two replays then match). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "harness.h"
#include "sim/sim.h"

#include "exposure_cluster.h" /* CLUSTER */
#include "sim_invariants.h"

/* The recovery of r that began at t_s; NULL when none. */
static const ah_sim_recovery_t *rec_at(const ah_sim_result_t *r, double t_s) {
    for (int i = 0; i < r->n_recs; i++)
        if (r->recs[i].t_s == t_s) return &r->recs[i];
    return NULL;
}

/* The move at a change in place (recovery.c leavers_hold; a5590be, runtime/reconfig_move.c): at the first
 * loss the leaving A100 node is alive at the boundary and sends its stage, which no other node holds, to
 * the ranks of the plan on the five staying devices; so with in_place the first loss rolls nothing back
 * and is in place, where the relaunch (no in_place) reads that stage from the cloud. Fails with the
 * leaving nodes not counted as holders (the change then is a relaunch that rolls back). */
static void test_move(const ah_model_t *m, const ah_sim_avail_t *a, ah_sim_opts_t o) {
    ah_sim_result_t relaunch, in_place;
    ah_error_t err;
    o.exposure_aware = false;
    CHECK(ah_sim_run(m, a, &o, AH_POLICY_AUTOHET, &relaunch, &err) == AH_OK, "%s", err.msg);
    o.in_place = true;
    CHECK(ah_sim_run(m, a, &o, AH_POLICY_AUTOHET, &in_place, &err) == AH_OK, "%s", err.msg);
    sim_invariants("relaunch", a, ah_sim_horizon_s(a, &o), &relaunch);
    sim_invariants("in place", a, ah_sim_horizon_s(a, &o), &in_place);
    const ah_sim_recovery_t *r1 = rec_at(&relaunch, 1000), *i1 = rec_at(&in_place, 1000);
    CHECK(r1 && i1, "recoveries at 1000 s (%d, %d)", relaunch.n_recs, in_place.n_recs);
    if (r1 && i1) {
        CHECK(r1->tokens_lost > 0 && !r1->in_place, "relaunch: the stage from the cloud (%g tokens lost)", r1->tokens_lost);
        CHECK(i1->in_place && i1->tokens_lost == 0 && i1->bytes[AH_TIER_CLOUD] == 0,
              "in place: the stage moved from the leaving node (in place %d, %g tokens lost, %lld B from the cloud)",
              i1->in_place, i1->tokens_lost, (long long)i1->bytes[AH_TIER_CLOUD]);
        /* nothing committed yet (the first checkpoint due at 3600 s): nothing the leaver alone holds is lost, so
         * the step is written behind (ckpt_change.c survives(); saved before session 24's fix) */
        CHECK(i1->written_behind && !i1->saved && i1->save_s == 0, "nothing committed: written behind (%d, %g s)",
              i1->written_behind, i1->save_s);
    }
    ah_sim_result_free(&in_place);
    /* a checkpoint committed shortly before the loss (950 s of training), its upload not ended by then: the
     * leaver alone holds its stage of the committed step (no memory tier here), so the step is saved before the
     * move (at 900 s the cloud holds it by the loss: written behind, as the runtime does) */
    o.ckpt_every_s = 950;
    CHECK(ah_sim_run(m, a, &o, AH_POLICY_AUTOHET, &in_place, &err) == AH_OK, "%s", err.msg);
    i1 = rec_at(&in_place, 1000);
    CHECK(i1 && i1->in_place && i1->saved && !i1->written_behind && i1->save_s > 0 &&
              i1->wait_s + i1->save_s + i1->transfer_s <= o.grace_s,
          "committed on the leaver's disk alone: saved within the grace period (%d %d %d %g s)", i1 && i1->in_place,
          i1 && i1->saved, i1 && i1->written_behind, i1 ? i1->save_s : -1);
    ah_sim_result_free(&relaunch);
    ah_sim_result_free(&in_place);
}

/* A count trace mapped with --seed (avail.c map_counts, random picks): every pick a free node of the pool, so each
 * node goes up and down in turn. The trace: 1, 3, 0, 2, 3 of the three A100 nodes. Fails before under ASan (a
 * heap overflow) and, without it, with a node out of the pool or up twice: a taken slot added 1 to the pick. */
static void test_seeded_counts(const ah_cluster_t *c) {
    ah_error_t err;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        ah_sim_pool_t pool = {0};
        CHECK(ah_sim_pool_resolve(c, "A100-80G", &pool, &err) == AH_OK && pool.n_nodes == 3, "%s", err.msg);
        const int counts[5] = {1, 3, 0, 2, 3};
        pool.trace.kind = AH_TRACE_COUNTS;
        pool.trace.steps = calloc(5, sizeof *pool.trace.steps);
        for (int k = 0; pool.trace.steps && k < 5; k++) pool.trace.steps[k] = (ah_trace_step_t){100.0 * k, counts[k]};
        pool.trace.n_steps = pool.trace.steps ? 5 : 0;
        pool.trace.end_s = 400;
        ah_sim_avail_t a;
        CHECK(ah_sim_avail_build(c, &pool, 1, seed, &a, &err) == AH_OK, "%s", err.msg);
        /* the first row (t = 0) is the initial state: one node up; then 2 up, 3 down, 2 up, 1 up */
        bool up[3] = {a.up0[0], a.up0[1], a.up0[2]}, ok = a.n_changes == 2 + 3 + 2 + 1 && up[0] + up[1] + up[2] == 1;
        for (int i = 0; ok && i < a.n_changes; i++) {
            const int n = a.changes[i].node;
            ok = n >= 0 && n < 3 && up[n] != a.changes[i].up; /* s0..s2 are nodes 0..2; a change flips its node */
            if (ok) up[n] = a.changes[i].up;
        }
        CHECK(ok, "seed %llu: %d changes, each a node of the pool going up or down in turn", (unsigned long long)seed,
              a.n_changes);
        ah_sim_avail_free(&a);
        ah_sim_pool_free(&pool);
    }
}

int main(void) {
    json_t *doc = NULL;
    ah_cluster_t c;
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_json_load_string(CLUSTER, strlen(CLUSTER), "six nodes", &doc, &err) == AH_OK &&
              ah_cluster_from_json(doc, "six nodes", &c, &err) == AH_OK,
          "%s", err.msg);
    json_decref(doc);
    CHECK(ah_model_preset("llama2-7b", &m, &err) == AH_OK, "%s", err.msg);
    bool up0[6] = {true, true, true, true, true, true};
    ah_sim_change_t ch[2] = {{.t_s = 1000, .node = 0, .up = false, .trace_id = -1},
                             {.t_s = 5000, .node = 1, .up = false, .trace_id = -1}};
    const ah_sim_avail_t a = {.cluster = &c, .up0 = up0, .changes = ch, .n_changes = 2, .end_s = 3 * 3600.0};
    ah_sim_opts_t o;
    ah_sim_opts_default(&o);
    o.train = (ah_train_t){.global_batch = 64, .seq_len = 1024, .precision = AH_PREC_BF16};
    o.hours = 3, o.ckpt_every_s = 3600, o.restart_s = 30, o.replan_s = 5;
    ah_sim_result_t plain, aware;
    CHECK(ah_sim_run(&m, &a, &o, AH_POLICY_AUTOHET, &plain, &err) == AH_OK, "%s", err.msg);
    o.exposure_aware = true;
    CHECK(ah_sim_run(&m, &a, &o, AH_POLICY_AUTOHET, &aware, &err) == AH_OK, "%s", err.msg);
    const ah_sim_recovery_t *p1 = rec_at(&plain, 1000), *p2 = rec_at(&plain, 5000), *a1 = rec_at(&aware, 1000);
    CHECK(p1 && p2 && a1, "plain: recoveries at 1000 and 5000 s (%d); exposure-aware at 1000 s (%d)", plain.n_recs,
          aware.n_recs);
    if (p1 && p2 && a1) {
        /* the first loss: the same plan before it (no removal seen), its lost node's pieces from the cloud */
        CHECK(p1->tokens_lost > 0 && a1->tokens_lost == p1->tokens_lost, "the first loss rolls back in both: %g, %g",
              p1->tokens_lost, a1->tokens_lost);
        CHECK(p2->tokens_lost > 0, "plain: the second loss rolls back (%g tokens)", p2->tokens_lost);
        /* exposure-aware: the plan it takes then keeps every piece on two nodes, or leaves the A100s (whose
         * type lost a node) out of it; either way the second loss costs no rollback */
        CHECK(aware.tokens_lost == a1->tokens_lost, "exposure-aware: nothing lost after the first loss (%g of %g)",
              aware.tokens_lost - a1->tokens_lost, aware.tokens_lost);
        const ah_sim_recovery_t *a2 = rec_at(&aware, 5000);
        CHECK(!a2 || a2->tokens_lost == 0, "the second loss, if it hits, rolls nothing back");
    }
    /* between the losses the exposure-aware replay trains slower (the two pipelines) */
    double rate_plain = 0, rate_aware = 0;
    for (int i = 0; i < plain.n_segs; i++)
        if (plain.segs[i].phase == AH_PHASE_TRAIN && plain.segs[i].start_s < 4000 && plain.segs[i].end_s > 4000)
            rate_plain = plain.segs[i].tokens_per_s;
    for (int i = 0; i < aware.n_segs; i++)
        if (aware.segs[i].phase == AH_PHASE_TRAIN && aware.segs[i].start_s < 4000 && aware.segs[i].end_s > 4000)
            rate_aware = aware.segs[i].tokens_per_s;
    CHECK(rate_aware > 0 && rate_aware < rate_plain, "at 4000 s: %g tokens/s exposure-aware, %g plain", rate_aware,
          rate_plain);
    sim_invariants("plain", &a, ah_sim_horizon_s(&a, &o), &plain);
    sim_invariants("exposure-aware", &a, ah_sim_horizon_s(&a, &o), &aware);
    ah_sim_result_free(&plain);
    /* a horizon of 20 s cuts the first start (re-plan 5 s + restart 30 s + the first step): its terms are not
     * finished ones (until session 25 the breakdown counted them whole, past the horizon) */
    ah_sim_opts_t short_o = o;
    short_o.hours = 20 / 3600.0;
    CHECK(ah_sim_run(&m, &a, &short_o, AH_POLICY_AUTOHET, &plain, &err) == AH_OK, "%s", err.msg);
    sim_invariants("a 20 s horizon", &a, ah_sim_horizon_s(&a, &short_o), &plain);
    ah_sim_result_free(&plain);
    /* every node lost 20 s into the first start (re-plan 5 s + restart 30 s + the first step), back at 1000 s: the
     * start is cut short by the stall (no plan fits nothing), and then a start of its own. Fails before (the first
     * start's record stayed finished, its terms more than the 20 s it had) */
    ah_sim_change_t all_go[12];
    for (int i = 0; i < 6; i++) {
        all_go[i] = (ah_sim_change_t){.t_s = 20, .node = i, .up = false, .trace_id = -1};
        all_go[6 + i] = (ah_sim_change_t){.t_s = 1000, .node = i, .up = true, .trace_id = -1};
    }
    const ah_sim_avail_t gone = {.cluster = &c, .up0 = up0, .changes = all_go, .n_changes = 12, .end_s = 3 * 3600.0};
    CHECK(ah_sim_run(&m, &gone, &o, AH_POLICY_AUTOHET, &plain, &err) == AH_OK, "%s", err.msg);
    CHECK(plain.n_recs == 2 && plain.recs[0].interrupted, "the start cut short by the stall (%d records)", plain.n_recs);
    sim_invariants("every node lost during the start", &gone, ah_sim_horizon_s(&gone, &o), &plain);
    ah_sim_result_free(&plain);
    ah_sim_result_free(&aware);
    test_move(&m, &a, o);
    test_seeded_counts(&c);
    ah_cluster_free(&c);
    return ah_test_finish();
}
