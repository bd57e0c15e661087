/* The elastic agent's decisions alone (src/elastic/agent_logic.h), without a job: the sample
 * history (each step once, in order, the full batch's tokens; rollbacks counted as recomputed),
 * the recovery accounting (the breakdown adds up; tiers from the trainer's recover event), what
 * an exit means, what an event does to the running plan, when a stop escalates, when a join is
 * worth a restart, the hang watchdog, when a host that stopped answering is asked again, and the
 * trainer's command line. The whole runs are tests/test_agent.sh and tests/test_nothing_lost*.sh. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "core/json.h"
#include "elastic/agent_exposure.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "elastic/join_rule.h"
#include "exposure_cluster.h"
#include "harness.h"
#include "planner/planner.h"

enum { STEPS = 6, TOKENS = 8 * 64 };

/* A history of `steps` steps of TOKENS each (a failed init is a failed check). */
static void init(ah_history_t *h, int64_t steps) {
    ah_error_t err;
    CHECK(ah_history_init(h, steps, TOKENS, &err) == AH_OK, "init: %s", err.msg);
}

static void test_history_straight(void) {
    ah_history_t h;
    init(&h, STEPS);
    CHECK(ah_history_resume(&h, 0, 0) == AH_RESUME_IN_HISTORY, "launch 0 from step 0");
    for (int k = 0; k < STEPS; k++) ah_history_add(&h, 0, k, TOKENS, 10.0 - k);
    ah_history_check_complete(&h);
    CHECK(h.ok, "every step once: %s", h.msg);
    CHECK_EQ_I64(h.len, STEPS);
    CHECK_EQ_I64(h.recomputed, 0);
    CHECK_NEAR(ah_history_loss(&h, STEPS - 1), 5.0, 0);
    CHECK(isnan(ah_history_loss(&h, STEPS)) && isnan(ah_history_loss(&h, -1)), "outside the history: NAN");
    ah_history_free(&h);
}

static void test_history_rollback(void) {
    ah_history_t h;
    init(&h, STEPS);
    ah_history_resume(&h, 0, 0);
    for (int k = 0; k < 4; k++) ah_history_add(&h, 0, k, TOKENS, 1.0 + k);
    /* launch 1 resumes from the checkpoint of step 2: steps 2 and 3 are redone */
    CHECK(ah_history_resume(&h, 1, 2) == AH_RESUME_IN_HISTORY, "rollback");
    CHECK_EQ_I64(h.recomputed, 2);
    CHECK_EQ_I64(h.len, 2);
    for (int k = 2; k < STEPS; k++) ah_history_add(&h, 1, k, TOKENS, 20.0 + k);
    ah_history_check_complete(&h);
    CHECK(h.ok, "rolled back and finished: %s", h.msg);
    CHECK_NEAR(ah_history_loss(&h, 1), 2.0, 0);  /* launch 0's */
    CHECK_NEAR(ah_history_loss(&h, 2), 22.0, 0); /* launch 1's */
    ah_history_free(&h);
}

static void test_history_broken(void) {
    ah_history_t h;
    /* a launch past the history skips samples */
    init(&h, STEPS);
    ah_history_resume(&h, 0, 0);
    ah_history_add(&h, 0, 0, TOKENS, 1);
    CHECK(ah_history_resume(&h, 1, 3) == AH_RESUME_SKIPS, "launch 1 at step 3 after 1 step");
    CHECK(!h.ok && strstr(h.msg, "launch 1 started at step 3 but only steps 0..0 were trained"), "%s", h.msg);
    ah_history_free(&h);
    /* a step out of order; the first problem is the one kept */
    init(&h, STEPS);
    ah_history_resume(&h, 0, 0);
    ah_history_add(&h, 0, 1, TOKENS, 1);
    ah_history_add(&h, 0, 0, TOKENS / 2, 1);
    CHECK(!h.ok && strstr(h.msg, "launch 0 reported step 1 after step -1"), "%s", h.msg);
    ah_history_free(&h);
    /* a step with part of the batch */
    init(&h, STEPS);
    ah_history_add(&h, 0, 0, TOKENS / 2, 1);
    CHECK(!h.ok && strstr(h.msg, "step 0 trained 256 tokens, not the global batch's 512"), "%s", h.msg);
    ah_history_free(&h);
    /* a step past --steps */
    init(&h, 1);
    ah_history_add(&h, 0, 0, TOKENS, 1);
    ah_history_add(&h, 0, 1, TOKENS, 1);
    CHECK(!h.ok && strstr(h.msg, "step 1 is past --steps 1"), "%s", h.msg);
    ah_history_free(&h);
    /* a run that ends short */
    init(&h, STEPS);
    ah_history_add(&h, 0, 0, TOKENS, 1);
    ah_history_check_complete(&h);
    CHECK(!h.ok && strstr(h.msg, "1 of 6 steps in the history"), "%s", h.msg);
    ah_history_free(&h);
}

static void test_history_earlier_run(void) {
    ah_history_t h;
    /* the same command run again: launch 0 resumes an earlier run's checkpoint at step 4 */
    init(&h, STEPS);
    CHECK(ah_history_resume(&h, 0, 4) == AH_RESUME_EARLIER_RUN, "earlier run");
    CHECK(h.ok, "not a skip: %s", h.msg);
    CHECK_EQ_I64(h.len, 4);
    CHECK(isnan(ah_history_loss(&h, 3)), "an earlier run's loss is unknown");
    ah_history_add(&h, 0, 4, TOKENS, 1);
    ah_history_add(&h, 0, 5, TOKENS, 1);
    ah_history_check_complete(&h);
    CHECK(h.ok, "%s", h.msg);
    ah_history_free(&h);
    /* its checkpoint was at --steps already */
    init(&h, STEPS);
    ah_history_all_earlier(&h);
    ah_history_check_complete(&h);
    CHECK(h.ok && h.len == STEPS, "complete: %s", h.msg);
    ah_history_free(&h);
}

static ah_exit_facts_t facts(int status, bool stopping, bool preempted, int64_t trained) {
    return (ah_exit_facts_t){.status = status, .agent_stopping = stopping, .preempted = preempted,
                             .preempted_step = preempted ? trained : -1, .trained = trained, .steps = STEPS,
                             .launches = 2, .resumed_step = NAN};
}

static void test_exit_action(void) {
    ah_exit_facts_t f = facts(0, false, false, STEPS);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FINISHED, "done");
    f = facts(75, true, true, STEPS);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FINISHED_NOTICE, "a notice after the last step");
    f = facts(-9, true, false, STEPS);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FINISHED_NOTICE, "killed after the last step");
    f = facts(1, false, false, STEPS);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FAILED, "a failure after the last step without a notice");
    f = facts(0, false, false, 3);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_EARLY, "exit 0 short of --steps");
    f = facts(1, false, false, 3);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FAILED, "crashed");
    f = facts(0, false, false, 0);
    f.launches = 1;
    f.resumed_step = STEPS;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_NOTHING_TO_TRAIN, "checkpoint at --steps");
    f.launches = 2;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_EARLY, "only the first launch may find it");
    /* a rerun of a finished run whose events file sends a notice at once: still nothing to train
     * (it was taken for a preemption, re-planned, relaunched and ended in an internal error) */
    f = facts(75, true, true, 0);
    f.launches = 1;
    f.resumed_step = STEPS;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_NOTHING_TO_TRAIN, "checkpoint at --steps, a notice replayed");
    f = facts(75, false, true, 3);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_NOTICE_OUTSIDE, "someone else's SIGTERM");
    f = facts(75, true, true, 3);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_STOPPED, "the agent's notice, saved");
    f = facts(-9, true, false, 3);
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_STOPPED, "the agent's notice, killed");
    /* after the user's Ctrl-C: the end, however the job stopped, unless every step was trained */
    f = facts(75, true, true, 3);
    f.interrupted = true;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_INTERRUPTED, "Ctrl-C, saved: no relaunch");
    f = facts(-9, true, false, 3);
    f.interrupted = true;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_INTERRUPTED, "Ctrl-C, killed: no relaunch");
    f = facts(75, true, true, STEPS);
    f.interrupted = true;
    CHECK(ah_agent_exit_action(&f) == AH_EXIT_FINISHED_NOTICE, "Ctrl-C after the last step");
}

static void test_recovery(void) {
    ah_history_t h;
    init(&h, STEPS);
    for (int k = 0; k < 4; k++) ah_history_add(&h, 0, k, TOKENS, 1.0 + k);
    /* stopped after 4 steps (the trainer says 4 and saved), notice at 10 s, exit 1.5 s later */
    ah_exit_facts_t f = facts(75, true, true, 4);
    f.saved = true;
    ah_agent_recovery_t r;
    ah_recovery_open(&r, AH_CAUSE_EVENT, &f, 10.0, 1.5, false);
    CHECK(r.stopped_at == 4 && r.saved && !r.forced && !r.complete, "opened");
    CHECK(isnan(r.loss_last_before) && isnan(r.loss_first_after), "losses unknown yet");
    f = facts(-9, true, false, 4);
    ah_agent_recovery_t k;
    ah_recovery_open(&k, AH_CAUSE_EVENT, &f, 10.0, 1.5, true);
    CHECK(k.stopped_at == 4 && !k.saved && k.forced, "killed: the history's end, nothing saved");
    r.replan_s = 0.25;
    ah_history_resume(&h, 1, 4);
    ah_recovery_resumed(&r, &h, 4, 7.5);
    CHECK_EQ_I64(r.resumed_at, 4);
    CHECK_NEAR(r.loss_last_before, 4.0, 0);
    CHECK_NEAR(r.loss_first_after, 7.5, 0);
    json_t *tr = json_pack("{s:s, s:I, s:f, s:{s:I, s:I, s:I}, s:{s:i, s:i, s:i}, s:{s:f, s:f, s:f}}", "event",
                           "recover", "step", (json_int_t)4, "seconds", 0.75, "bytes", "local", (json_int_t)1000,
                           "peer", (json_int_t)200, "cloud", (json_int_t)0, "files", "local", 3, "peer", 1, "cloud",
                           0, "tier_seconds", "local", 0.5, "peer", 0.25, "cloud", 0.0);
    ah_recovery_close(&r, 15.0, 0.5, tr);
    CHECK(r.complete, "closed");
    CHECK_NEAR(r.total_s, 5.0, 1e-12);
    CHECK_NEAR(r.transfer_s, 0.75, 0);
    CHECK_NEAR(r.startup_s, 5.0 - 1.5 - 0.25 - 0.75 - 0.5, 1e-12);
    CHECK_NEAR(r.stop_s + r.replan_s + r.startup_s + r.transfer_s + r.first_step_s, r.total_s, 1e-12);
    CHECK(r.bytes[AH_TIER_LOCAL] == 1000 && r.bytes[AH_TIER_PEER] == 200 && r.bytes[AH_TIER_CLOUD] == 0, "bytes");
    CHECK(r.files[AH_TIER_LOCAL] == 3 && r.files[AH_TIER_PEER] == 1, "files");
    CHECK_NEAR(r.tier_s[AH_TIER_PEER], 0.25, 0);
    snprintf(r.nodes, sizeof r.nodes, "slow-1 slow-2");
    json_t *ev = ah_recovery_event(&r);
    CHECK(strcmp(json_string_value(json_object_get(ev, "event")), "recover") == 0, "the recover event");
    const json_t *nodes = json_object_get(ev, "nodes"); /* a list, as the preempt event's */
    CHECK(json_array_size(nodes) == 2 && strcmp(json_string_value(json_array_get(nodes, 1)), "slow-2") == 0,
          "its nodes as a list");
    CHECK_NEAR(json_real_value(json_object_get(ev, "seconds")), 5.0, 1e-12);
    CHECK(json_integer_value(json_object_get(json_object_get(ev, "bytes"), "peer")) == 200, "its peer bytes");
    CHECK_NEAR(json_real_value(json_object_get(ev, "loss_before")), 4.0, 0);
    json_decref(ev);
    json_decref(tr);
    /* no recover event from the trainer: nothing transferred; start-up never negative */
    ah_recovery_open(&k, AH_CAUSE_SIGNAL, &f, 10.0, 3.0, true);
    ah_recovery_close(&k, 12.0, 0.5, NULL);
    CHECK(k.transfer_s == 0 && k.bytes[AH_TIER_LOCAL] == 0 && k.startup_s == 0, "clamped: %g", k.startup_s);
    ah_history_free(&h);
}

/* A change in place's save, from the trainer's "reconfigure" event: recorded saved only when its step was
 * committed at the change. A "sync" save that failed (or a trainer without --local-root) committed nothing: it
 * used to be recorded saved from "save": "sync" alone. */
static void test_change_saved(void) {
    static const struct { const char *ev; bool saved, behind; } cases[] = {
        {"{\"save\": \"sync\", \"committed\": true}", true, false},
        {"{\"save\": \"sync\", \"committed\": false}", false, false}, /* the save failed */
        {"{\"save\": \"async\", \"committed\": false}", false, true},
        {"{\"save\": \"sync\"}", true, false}, /* a trainer before "committed" */
        {"{\"save\": \"async\"}", false, true},
        {"{}", true, false},                     /* before "save" */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        json_t *ev = json_loads(cases[i].ev, 0, NULL);
        bool behind = !cases[i].behind;
        const bool saved = ah_agent_change_saved(ev, &behind);
        CHECK(saved == cases[i].saved && behind == cases[i].behind, "%s: saved %d behind %d", cases[i].ev, saved, behind);
        json_decref(ev);
    }
}

static void test_events_and_stops(void) {
    /* add: of a node up, nothing; while training, at the next checkpoint; else at once */
    CHECK(ah_agent_event_action(true, true, true, false, false) == AH_EVENT_NOTHING, "add of a node up");
    CHECK(ah_agent_event_action(true, false, true, false, false) == AH_EVENT_JOIN_AT_CHECKPOINT, "join");
    CHECK(ah_agent_event_action(true, false, true, true, false) == AH_EVENT_JOIN, "join while stopping");
    CHECK(ah_agent_event_action(true, false, false, false, false) == AH_EVENT_JOIN, "join with no job");
    /* remove: of a node down, nothing; one the running plan uses is a preemption; else its disk goes */
    CHECK(ah_agent_event_action(false, false, true, false, true) == AH_EVENT_NOTHING, "removal of a node down");
    CHECK(ah_agent_event_action(false, true, true, false, true) == AH_EVENT_PREEMPT, "preemption");
    CHECK(ah_agent_event_action(false, true, true, true, true) == AH_EVENT_PREEMPT, "a second node while stopping");
    CHECK(ah_agent_event_action(false, true, true, false, false) == AH_EVENT_LEFT_UNUSED, "unused node");
    CHECK(ah_agent_event_action(false, true, false, false, true) == AH_EVENT_LEFT_UNUSED, "no job running");
    /* the stop: wait out the grace period, then kill the leaving ranks, then the job */
    CHECK(ah_agent_stop_action(4.9, 5.0, false) == AH_STOP_WAIT, "within the grace period");
    CHECK(ah_agent_stop_action(5.1, 5.0, false) == AH_STOP_FORCE, "grace period over");
    CHECK(ah_agent_stop_action(5.1 + AH_AGENT_KILL_MARGIN_S - 0.2, 5.0, true) == AH_STOP_WAIT, "killed: waiting");
    CHECK(ah_agent_stop_action(5.1 + AH_AGENT_KILL_MARGIN_S, 5.0, true) == AH_STOP_KILL_JOB, "outlived the kill");
    CHECK(ah_agent_stop_action(0.01, 0.0, false) == AH_STOP_FORCE, "grace 0: killed at once");
    /* a preemption during a stop re-makes the next plan only at a join's, when that plan uses the node */
    CHECK(ah_agent_replan_in_stop(AH_CAUSE_JOIN, true), "a node of the join's plan preempted in its stop");
    CHECK(!ah_agent_replan_in_stop(AH_CAUSE_JOIN, false), "a node the join's plan leaves out");
    CHECK(!ah_agent_replan_in_stop(AH_CAUSE_EVENT, true), "a second notice outside a join");
    /* a join restarts only for a faster plan; with no removal seen (an infinite stay), whatever it costs */
    CHECK(ah_join_pays(1.0, 0.8, INFINITY, 1e9, NULL), "faster");
    CHECK(!ah_join_pays(1.0, 1.0, INFINITY, 0, NULL) && !ah_join_pays(1.0, 1.0 - 1e-12, INFINITY, 0, NULL), "not faster");
    CHECK(!ah_join_pays(1.0, 1.2, INFINITY, 0, NULL), "slower");
    CHECK(!ah_join_pays(INFINITY, INFINITY, 100, 0, NULL) && ah_join_pays(INFINITY, 2.0, 100, 50, NULL),
          "a running plan out of bounds (over --budget) gives way to one within");
    /* over a stay: the gain in seconds of the running plan's work, stay x (1 - joined / now), against the cost.
     * 0.8 s/iteration against 1.0 over 600 s: 120 s gained; a 100 s restart pays, a 130 s one waits */
    double gain = 0;
    CHECK(ah_join_pays(1.0, 0.8, 600, 100, &gain) && fabs(gain - 120) < 1e-9, "pays: gain %g", gain);
    CHECK(!ah_join_pays(1.0, 0.8, 600, 130, &gain), "does not pay");
    /* a second join batched with it (0.6 s/iteration with both) pays the same restart once */
    CHECK(ah_join_pays(1.0, 0.6, 600, 130, &gain) && fabs(gain - 240) < 1e-9, "two joins together: gain %g", gain);
    /* the exposure: the joined plan hit at 1/600 s against the running plan's 1/1200 s, over its stay of 600 s,
     * half a recovery more (of 100 s): 50 s, which makes the 100 s restart above (gain 120 s) wait */
    const double exposure = ah_join_exposure_s(1 / 1200.0, 1 / 600.0, 600, 100);
    CHECK(fabs(exposure - 50) < 1e-9 && !ah_join_pays(1.0, 0.8, 600, 100 + exposure, NULL), "exposure %g", exposure);
    CHECK(ah_join_exposure_s(1 / 600.0, 1 / 1200.0, 600, 100) == 0 && ah_join_exposure_s(0, 0, INFINITY, 100) == 0,
          "no exposure when the joined plan is hit no more often");
    /* the stay: a fixed horizon, else 1 / the hit rate */
    CHECK(ah_join_stay_s(0.01, 0) == 100 && ah_join_stay_s(0.01, 30) == 30 && isinf(ah_join_stay_s(0, 0)), "stay");
    /* the hit rate: 2 removals of type 0 over 3600 node-seconds up (+ the prior hour): 2 / 7200 per node-second,
     * a plan with 3 nodes of it: 3 x that, unless capped by the removing changes (1 in 400 s + the hour) */
    const double removals[2] = {2, 0}, events[2] = {2, 0}, node_s[2] = {3600, 9000};
    ah_churn_t ch = {.n_types = 2, .removals = removals, .removal_events = events, .node_s = node_s, .elapsed_s = 400};
    const int nodes[2] = {3, 5};
    CHECK(fabs(ah_churn_hit_rate(&ch, nodes) - fmin(3 * 2 / 7200.0, 2 / 4000.0)) < 1e-12, "hit rate %g",
          ah_churn_hit_rate(&ch, nodes));
    const double one_event[2] = {1, 0};
    ch.removal_events = one_event; /* both removed by one change: hit once */
    CHECK(fabs(ah_churn_hit_rate(&ch, nodes) - 1 / 4000.0) < 1e-12, "nodes removed together hit once");
}

static void test_watchdog(void) {
    ah_watchdog_t w;
    ah_watchdog_reset(&w, 0.2, 3.0);
    CHECK(!ah_watchdog_expired(&w, 1e6), "not armed before the launch's first line");
    ah_watchdog_line(&w, 100.0);
    CHECK(fabs(ah_watchdog_timeout(&w) - 3.0) < 1e-12, "floor: 10 x 0.2 s predicted is under 3 s");
    CHECK(!ah_watchdog_expired(&w, 102.9) && ah_watchdog_expired(&w, 103.1), "quiet past the floor");
    ah_watchdog_line(&w, 100.5);
    ah_watchdog_line(&w, 101.0);
    CHECK(fabs(ah_watchdog_timeout(&w) - 5.0) < 1e-9, "10 x the longest gap seen (0.5 s)");
    ah_watchdog_line(&w, 101.1);
    CHECK(fabs(ah_watchdog_timeout(&w) - 5.0) < 1e-9, "a shorter gap does not lower it");
    CHECK(!ah_watchdog_expired(&w, 106.0) && ah_watchdog_expired(&w, 106.2), "quiet past 5 s after the last line");
    ah_watchdog_reset(&w, 0.8, 3.0);
    ah_watchdog_line(&w, 0);
    CHECK(fabs(ah_watchdog_timeout(&w) - 8.0) < 1e-9, "10 x the predicted iteration, over the floor");
}

static void test_reask(void) {
    ah_reask_t r = {0};
    CHECK(ah_reask_due(&r, 0) && ah_reask_due(&r, 1e6), "just lost: asked at the next checkpoint");
    /* the first re-ask without an answer ended at t = 100: 10, 20, 40 ... s, up to 300 s */
    CHECK(fabs(ah_reask_failed(&r, 100.0) - AH_REASK_FIRST_S) < 1e-12, "first interval");
    CHECK(!ah_reask_due(&r, 109.9) && ah_reask_due(&r, 110.0), "due 10 s after the first failure");
    const double want[] = {20, 40, 80, 160, 300, 300, 300};
    double t = 110.0;
    for (int k = 0; k < (int)(sizeof want / sizeof want[0]); k++) {
        t += 13.0; /* each ask waits for the remote command's timeout before it fails */
        const double wait = ah_reask_failed(&r, t);
        CHECK(fabs(wait - want[k]) < 1e-12, "failure %d: next ask in %g s, want %g", k + 2, wait, want[k]);
        CHECK(!ah_reask_due(&r, t + wait - 0.01) && ah_reask_due(&r, t + wait), "failure %d: due %g s after it",
              k + 2, want[k]);
    }
    CHECK_EQ_I64(r.failed, 8);
    /* a host silent for a day is asked once per 300 s, not at every checkpoint */
    for (int k = 0; k < 1000; k++) ah_reask_failed(&r, t);
    CHECK(fabs(ah_reask_failed(&r, t) - AH_REASK_MAX_S) < 1e-12, "capped after many failures");
    /* lost again later: the backoff starts over */
    r = (ah_reask_t){0};
    CHECK(ah_reask_due(&r, t) && fabs(ah_reask_failed(&r, t) - AH_REASK_FIRST_S) < 1e-12, "a new loss");
}

static void test_plan_uses(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_plan_result_t r;
    ah_planner_opts_t po;
    ah_error_t err;
    ah_planner_opts_default(&po);
    po.train.global_batch = 8;
    po.train.seq_len = 64;
    po.train.precision = AH_PREC_FP32;
    if (ah_model_load("tiny-gpt2", &m, &err) != AH_OK || ah_cluster_open("cpu-hetero", &c, &err) != AH_OK ||
        ah_planner_run(&m, &c, &po, &r, &err) != AH_OK) {
        CHECK(false, "plan: %s", err.msg);
        return;
    }
    const ah_stage_t *st = &r.plan.pipelines[0].stages[0];
    CHECK(ah_agent_plan_uses(&r.plan, r.plan.cluster.nodes[st->devices[0].node].name), "its first stage's node");
    CHECK(!ah_agent_plan_uses(&r.plan, "no-such-node"), "a node it does not have");
    /* a plan over the cluster without that node leaves it out (or another node of the first plan) */
    const char *first = r.plan.cluster.nodes[st->devices[0].node].name;
    CHECK(ah_agent_plan_leaves_out(&r.plan, &r.plan) == NULL, "a plan leaves out none of its own nodes");
    /* the next plan made at a stop is the relaunch's while every node it uses is up: a node that joined
     * during the stop, or one it does not use that left, changes nothing (before, the relaunch planned
     * again whenever the nodes up were not exactly those it was made for, and could leave out a node
     * holding pieces whose upload the trainer had dropped); a node it uses that is down does */
    bool up[16];
    int unused = -1;
    for (int i = 0; i < c.n_nodes && i < 16; i++) {
        up[i] = true;
        if (!ah_agent_plan_uses(&r.plan, c.nodes[i].name)) unused = i;
    }
    CHECK(c.n_nodes <= 16 && ah_agent_next_plan_holds(&r.plan, &c, up), "every node up: the next plan holds");
    if (unused >= 0) {
        up[unused] = false;
        CHECK(ah_agent_next_plan_holds(&r.plan, &c, up), "a node it does not use (%s) down: it holds", c.nodes[unused].name);
        up[unused] = true;
    }
    up[st->devices[0].node] = false;
    CHECK(!ah_agent_next_plan_holds(&r.plan, &c, up), "its first stage's node down: re-planned");
    ah_cluster_t c2;
    ah_plan_result_t r2;
    if (ah_cluster_copy(&c, &c2, &err) == AH_OK) {
        int n = 0;
        for (int i = 0; i < c.n_nodes; i++)
            if (strcmp(c.nodes[i].name, first) != 0) c2.nodes[n++] = c.nodes[i];
        c2.n_nodes = n;
        if (ah_planner_run(&m, &c2, &po, &r2, &err) == AH_OK) {
            const char *left = ah_agent_plan_leaves_out(&r.plan, &r2.plan);
            CHECK(left && ah_agent_plan_uses(&r.plan, left) && !ah_agent_plan_uses(&r2.plan, left),
                  "the plan without %s leaves out a node of the first: %s", first, left ? left : "none");
            ah_plan_result_free(&r2);
        } else CHECK(false, "plan without %s: %s", first, err.msg);
        ah_cluster_free(&c2);
    }
    ah_plan_result_free(&r);
    ah_cluster_free(&c);
}

static void test_train_argv(void) {
    ah_agent_opts_t o;
    ah_agent_opts_default(&o);
    o.autohet = "/bin/autohet";
    o.data = "t.bin";
    o.quiet = true;
    const char *extra[] = {"--lr", "0.5"};
    o.train_args = extra;
    o.n_train_args = 2;
    ah_train_argv_t a;
    ah_error_t err;
    CHECK(ah_agent_train_argv(&o, "W/plan-1.json", "W/local", "W/launch-1", &a, &err) == AH_OK, "%s", err.msg);
    char line[1024] = "";
    for (int i = 0; a.argv[i]; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", i ? " " : "", a.argv[i]);
    CHECK(strcmp(line, "/bin/autohet train --plan W/plan-1.json --data t.bin --steps 20 --resume --local-root W/local "
                       "--run-dir W/launch-1 --metrics W/launch-1/metrics.jsonl --ckpt-every 5 --grace-s 30 --quiet "
                       "--lr 0.5") == 0,
          "argv: %s", line);
    const char *many[AH_AGENT_MAX_TRAIN_ARGV];
    for (int i = 0; i < AH_AGENT_MAX_TRAIN_ARGV; i++) many[i] = "--x";
    o.train_args = many;
    o.n_train_args = AH_AGENT_MAX_TRAIN_ARGV;
    CHECK_ERR(ah_agent_train_argv(&o, "p", "l", "r", &a, &err), AH_ERR_USAGE, err, "too many trainer flags");
}

/* The failure policy: 1, 2, 4 s of backoff by the restarts in the window, spent at --max-restarts,
 * free again once the window has passed; the same cause at the same step right after a restart
 * ends it, another step or another cause does not. */
static void test_restarts(void) {
    ah_restarts_t r = {.max = 3, .window_s = 100};
    double b = -1;
    /* (b is read after each call: arguments of one call are unsequenced) */
    ah_restart_verdict_t v = ah_restart_decide(&r, 10, "signal 9", 4, &b);
    CHECK(v == AH_RESTART_GO && b == 1, "first restart after 1 s: %d %g", v, b);
    v = ah_restart_decide(&r, 20, "signal 9", 4, &b);
    CHECK(v == AH_RESTART_SAME, "the same failure at the same step: %d", v);
    v = ah_restart_decide(&r, 20, "signal 9", 7, &b);
    CHECK(v == AH_RESTART_GO && b == 2, "another step: 2 s: %d %g", v, b);
    v = ah_restart_decide(&r, 30, "exit 1", 7, &b);
    CHECK(v == AH_RESTART_GO && b == 4, "another cause: 4 s: %d %g", v, b);
    v = ah_restart_decide(&r, 40, "signal 9", 9, &b);
    CHECK(v == AH_RESTART_SPENT, "3 within 100 s: spent: %d", v);
    CHECK_EQ_I64(r.total, 3);
    /* at 115 the first (at 10) has left the window: one more, after 4 s (2 still inside) */
    v = ah_restart_decide(&r, 115, "signal 9", 12, &b);
    CHECK(v == AH_RESTART_GO && b == 4, "window passed: %d %g", v, b);
    v = ah_restart_decide(&r, 116, "signal 9", 13, &b);
    CHECK(v == AH_RESTART_SPENT, "spent again: %d", v);
    ah_restarts_t none = {.max = 0, .window_s = 100};
    v = ah_restart_decide(&none, 1, "x", 0, &b);
    CHECK(v == AH_RESTART_SPENT && none.total == 0, "--max-restarts 0: %d", v);
    ah_restarts_t many = {.max = 100, .window_s = 1e9};
    for (int i = 0; i < 20; i++) ah_restart_decide(&many, i, "x", i, &b);
    CHECK(b == AH_AGENT_RESTART_BACKOFF_MAX_S, "backoff capped: %g", b);
}

/* The agent's exposure-aware choice (agent_exposure.h), on simulate --exposure-aware's set-up
 * (tests/test_sim_exposure.c): llama2-7b on three A100 and three H800 spot nodes of one GPU each; the
 * planner's plan one pipeline over all six (every piece on one node), its batch-balanced baseline two
 * pipelines, one a type (every piece on two nodes), slower. Before any removal the planner's plan stands;
 * with an A100 removal seen (one in 2000 s) and checkpoints an hour apart, the rollback a loss of a node
 * holding a piece alone would cost outweighs the speed: a baseline's plan whose spot nodes hold nothing
 * alone is taken. With the memory tier nothing rolls back: the planner's again. */
static void test_exposure(void) {
    const char *cl = CLUSTER;
    json_t *doc = NULL;
    ah_cluster_t c;
    ah_model_t m;
    ah_error_t err;
    ah_plan_result_t r;
    CHECK(ah_json_load_string(cl, strlen(cl), "six nodes", &doc, &err) == AH_OK &&
              ah_cluster_from_json(doc, "six nodes", &c, &err) == AH_OK && ah_model_preset("llama2-7b", &m, &err) == AH_OK,
          "%s", err.msg);
    json_decref(doc);
    ah_planner_opts_t po;
    ah_planner_opts_default(&po);
    po.train = (ah_train_t){.global_batch = 64, .seq_len = 1024, .precision = AH_PREC_BF16};
    CHECK(ah_planner_run_sharded(&m, &c, &po, false, &r, &err) == AH_OK && r.baselines, "%s", err.msg);
    double removals[2] = {0}, events[2] = {0}, node_s[2] = {0};
    const int a100 = c.nodes[0].type;
    for (int i = 0; i < c.n_nodes; i++) node_s[c.nodes[i].type] += 2000;
    ah_exposure_facts_t f = {.cluster = &c, .churn = {.n_types = c.n_types, .removals = removals, .removal_events = events,
                                                      .node_s = node_s, .elapsed_s = 2000},
                             .recovery_s = 30, .ckpt_every = (int64_t)(3600 / r.eval.pred.iteration_s)};
    ah_exposure_weighed_t w[1 + AH_BASELINE_COUNT];
    bool ok;
    CHECK(ah_exposure_pick(&r, &po, &f, w, &ok) == -1 && ok && w[0].alone_spot == 6, "no removal: the planner's plan "
          "(%d nodes alone)", w[0].alone_spot);
    removals[a100] = events[a100] = 1;
    node_s[a100] -= 1000;
    const int k = ah_exposure_pick(&r, &po, &f, w, &ok);
    CHECK(ok && k >= 0, "an A100 removal seen: a baseline's plan (%d; kept %.3f, rollback %.0f s)", k, w[0].kept,
          w[0].rollback_s);
    if (k >= 0)
        CHECK(w[1 + k].alone_spot < w[0].alone_spot && w[1 + k].kept > w[0].kept && w[1 + k].score > w[0].score &&
                  r.baselines[k].r.eval.pred.iteration_s > r.eval.pred.iteration_s,
              "%s: %d nodes alone, kept %.3f, slower %.3f vs %.3f s", ah_baseline_name((ah_baseline_t)k),
              w[1 + k].alone_spot, w[1 + k].kept, r.baselines[k].r.eval.pred.iteration_s, r.eval.pred.iteration_s);
    if (k >= 0)
        printf("exposure: %s's plan taken (%.4f vs %.4f s/iteration; kept %.3f vs %.3f, rollback %.0f s)\n",
               ah_baseline_name((ah_baseline_t)k), r.baselines[k].r.eval.pred.iteration_s, r.eval.pred.iteration_s,
               w[1 + k].kept, w[0].kept, w[0].rollback_s);
    f.memory_tier = true;
    CHECK(ah_exposure_pick(&r, &po, &f, w, &ok) == -1 && w[0].rollback_s == 0, "the memory tier: the planner's plan");
    /* a change's step written behind (the agent's in-place deadline): every piece of the leaving nodes kept on a
     * staying one. The planner's plan holds each piece on one node: s0 leaving takes some along; none leaving
     * keeps all; a baseline's plan that holds every piece on two nodes keeps them when any one node leaves. */
    bool leaving[6] = {false};
    CHECK(ah_exposure_leavers_kept(&r.plan, &c, leaving, &ok) && ok, "no node leaving: every piece kept");
    leaving[0] = true;
    CHECK(!ah_exposure_leavers_kept(&r.plan, &c, leaving, &ok) && ok, "s0 leaves the planner's plan: a piece goes");
    for (int b = 0; b < AH_BASELINE_COUNT; b++) {
        if (!r.baselines[b].ok || w[1 + b].alone_spot != 0) continue;
        for (int y = 0; y < c.n_nodes; y++) {
            for (int x = 0; x < c.n_nodes; x++) leaving[x] = x == y;
            CHECK(ah_exposure_leavers_kept(&r.baselines[b].r.plan, &c, leaving, &ok) && ok, "%s: node %d leaves, kept",
                  ah_baseline_name((ah_baseline_t)b), y);
        }
    }
    ah_plan_result_free(&r);
    ah_cluster_free(&c);
}

/* A data-parallel plan of k one-stage pipelines, pipeline i on node dev[i][0]'s GPU dev[i][1] (the caller's storage). */
static void dp_plan(ah_plan_t *p, ah_node_t *nodes, int n_nodes, ah_pipeline_t *pl, ah_stage_t *st, const int (*dev)[2],
                    int k) {
    memset(p, 0, sizeof *p);
    p->tp = 1, p->n_pipelines = k, p->pipelines = pl, p->cluster.nodes = nodes, p->cluster.n_nodes = n_nodes;
    for (int i = 0; i < k; i++) {
        memset(&st[i], 0, sizeof st[i]);
        st[i].last = 1, st[i].devices[0] = (ah_device_ref_t){dev[i][0], dev[i][1]};
        pl[i] = (ah_pipeline_t){.micro_batches = 1, .n_stages = 1, .stages = &st[i], .cp = 1};
    }
}

/* The parked ranks the agent can take back (agent_parked.c): launched on n0:0-2 and n1:0 (jobs 0 and 1), n0:2 parks at a
 * change (n1 leaves): re-admittable; but once parked through an in-place join (a "reconfigure" with "join": n2's job
 * admitted while it was out of the world) it is spent, never re-admitted, while a rank parked after that join is
 * re-admittable again. Before: still re-admitted after the join (its re-admission spans a job it never connected to). */
static void test_parked_through_join(void) {
    static agent_t a;
    ah_node_t nodes[3] = {{.name = "n0"}, {.name = "n1"}, {.name = "n2"}};
    ah_pipeline_t pl[4];
    ah_stage_t st[4];
    ah_launch_hostjob_t jobs[3] = {{.host = "n0"}, {.host = "n1"}, {.host = "n2"}};
    char left[3] = {0, 0, 0};
    ah_plan_t launch;
    dp_plan(&launch, nodes, 3, pl, st, (const int[][2]){{0, 0}, {0, 1}, {0, 2}, {1, 0}}, 4);
    a.jobs = jobs, a.job_left = left, a.n_jobs = 2;
    ah_agent_procs_launch(&a, &launch);
    CHECK(a.n_procs == 4, "%d processes", a.n_procs);
    json_t *change = json_pack("{s:i}", "join", 0), *join = json_pack("{s:i}", "join", 1);
    left[1] = 1; /* n1's job left: n0:0+1 go on, n0:2 parks */
    dp_plan(&a.cur.plan, nodes, 3, pl, st, (const int[][2]){{0, 0}, {0, 1}}, 2);
    ah_agent_procs_changed(&a, change);
    CHECK(ah_agent_parked_on(&a, "n0", 2) == 2, "n0:2 parked: re-admittable (%d)", ah_agent_parked_on(&a, "n0", 2));
    a.n_jobs = 3; /* n2's job joins; n0:2 stays parked */
    dp_plan(&a.cur.plan, nodes, 3, pl, st, (const int[][2]){{0, 0}, {0, 1}, {2, 0}}, 3);
    ah_agent_procs_changed(&a, join);
    CHECK(ah_agent_parked_on(&a, "n0", 2) == -1, "n0:2 parked through the join: spent (%d)", ah_agent_parked_on(&a, "n0", 2));
    dp_plan(&a.cur.plan, nodes, 3, pl, st, (const int[][2]){{0, 0}, {2, 0}}, 2); /* n0:1 parks after the join */
    ah_agent_procs_changed(&a, change);
    CHECK(ah_agent_parked_on(&a, "n0", 1) == 1 && ah_agent_parked_on(&a, "n0", 2) == -1, "n0:1 re-admittable (%d), n0:2 "
          "not (%d)", ah_agent_parked_on(&a, "n0", 1), ah_agent_parked_on(&a, "n0", 2));
    json_decref(change);
    json_decref(join);
    ah_agent_procs_free(&a);
}

int main(void) {
    test_history_straight();
    test_history_rollback();
    test_history_broken();
    test_history_earlier_run();
    test_exit_action();
    test_recovery();
    test_change_saved();
    test_events_and_stops();
    test_watchdog();
    test_reask();
    test_plan_uses();
    test_train_argv();
    test_restarts();
    test_exposure();
    test_parked_through_join();
    return ah_test_finish();
}
