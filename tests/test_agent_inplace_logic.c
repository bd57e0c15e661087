/* The agent's in-place decisions (agent_inplace.c, agent_inplace_join.c) on a hand-made agent, without a job: the
 * save the deadline leaves room for (a request that re-admits a parked rank; the first notice after a join in place),
 * a free host's admission against a notice's deadline (the save estimate taken off; the notice's own clock) and which
 * "reconfigure" event is the change asked for. Each case failed before the session 24 fix it names (661540f, e54e0ba,
 * 8bfbf1d, 8e2d8c8, 25cf078); session 25's: a refused request falls back at once, a free host taken in is named in the
 * recovery. The whole runs are tests/test_agent_inplace*.sh. Three nodes n0..n2 of four GPUs; the
 * plans are data-parallel over one-stage pipelines of llama2-7b (every piece on each pipeline's device). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/timing.h"
#include "cost/cost.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "harness.h"
#include "runtime/protocol.h"

enum { N_NODES = 3, MAX_DEV = 8 };

static ah_model_t g_model;
static char g_work[64];
static char g_log[8192]; /* the agent's lines, appended */
static int g_put, g_notices, g_joins, g_join_first[8], g_join_fail; /* join_hosts' job->join_first, each call */

static void log_line(void *ctx, const char *line) {
    (void)ctx;
    const size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s\n", line);
}
static ah_status_t fake_put(void *ctx, const char *name, const char *path, ah_error_t *err) {
    (void)ctx, (void)name, (void)path, (void)err;
    g_put++;
    return AH_OK;
}
static int fake_notice(void *ctx, const char *host) {
    (void)ctx, (void)host;
    return ++g_notices;
}
static ah_status_t fake_drop(void *ctx, const char *host, ah_error_t *err) {
    (void)ctx, (void)host, (void)err;
    return AH_OK;
}
static int fake_leave(void *ctx, const char *const *hosts, int n, double wait_s) {
    (void)ctx, (void)hosts, (void)wait_s;
    return n;
}
static ah_status_t fake_join(void *ctx, const ah_launch_job_t *job, const char *const *hosts, int n, ah_error_t *err) {
    (void)ctx, (void)hosts;
    if (g_joins < 8) g_join_first[g_joins] = job->join_first;
    g_joins++;
    if (g_join_fail) return ah_error_set(err, AH_ERR_IO, "join_hosts failed (the test's)");
    (void)n;
    return AH_OK;
}

/* *r: a data-parallel plan of k one-stage pipelines of the whole model, pipeline i on node dev[i][0]'s GPU dev[i][1],
 * predicted 0.1 s an iteration (owned: ah_plan_result_free). */
static void plan_on(ah_plan_result_t *r, const int (*dev)[2], int k) {
    static ah_node_t nodes[N_NODES] = {{.name = "n0", .count = 4}, {.name = "n1", .count = 4},
                                       {.name = "n2", .count = 4}};
    ah_pipeline_t pl[MAX_DEV];
    ah_stage_t st[MAX_DEV];
    static ah_gpu_type_t type = {.name = "gpu"};
    ah_plan_t p = {.model = g_model, .tp = 1, .n_pipelines = k, .pipelines = pl,
                   .cluster = {.types = &type, .n_types = 1, .nodes = nodes, .n_nodes = N_NODES}};
    p.train = (ah_train_t){.global_batch = 64, .seq_len = 1024, .precision = AH_PREC_BF16};
    for (int i = 0; i < k; i++) {
        memset(&st[i], 0, sizeof st[i]);
        st[i].first = 0, st[i].last = g_model.n_layer, st[i].devices[0] = (ah_device_ref_t){dev[i][0], dev[i][1]};
        pl[i] = (ah_pipeline_t){.micro_batches = 1, .n_stages = 1, .stages = &st[i], .cp = 1};
    }
    memset(r, 0, sizeof *r);
    ah_error_t err;
    CHECK(ah_plan_copy(&p, &r->plan, &err) == AH_OK, "plan: %s", err.msg);
    r->eval.pred.iteration_s = 0.1;
}

/* The agent: joined, running, launched with `launch` (its jobs one a node it uses, each device's process listed), ten
 * steps trained at 0.1 s, a checkpoint committed at step 5 (none under the running plan yet), the save estimate 4 s,
 * a grace period of 60 s; the running plan cur (taken over) and no next plan. */
static ah_agent_opts_t g_o;
static ah_agent_result_t g_res;
static ah_agent_launch_t g_launch;
static bool g_up[N_NODES], g_leaving[N_NODES];
static void agent_init(agent_t *a, const int (*dev)[2], int k) {
    memset(a, 0, sizeof *a);
    ah_agent_opts_default(&g_o);
    g_o.steps = 1000, g_o.ckpt_every = 5, g_o.grace_s = 60, g_o.in_place = true, g_o.log = log_line;
    g_launch = (ah_agent_launch_t){.first_step = 0, .end_step = 10, .step_s_sum = 1.0};
    memset(&g_res, 0, sizeof g_res);
    g_res.launches = &g_launch, g_res.n_launches = 1, g_res.newest_ckpt = 5;
    a->o = &g_o, a->res = &g_res, a->t0 = ah_now_s(), a->pending = -1, a->inplace_after = -1;
    g_log[0] = 0;
    for (int i = 0; i < N_NODES; i++) g_up[i] = true, g_leaving[i] = false;
    a->up = g_up, a->leaving = g_leaving;
    snprintf(a->work, sizeof a->work, "%s", g_work);
    a->launcher = (ah_launcher_t){.name = "fake", .put_run_file = fake_put, .notice = fake_notice,
                                  .drop_disk = fake_drop, .leave_hosts = fake_leave, .join_hosts = fake_join};
    plan_on(&a->cur, dev, k);
    a->have_cur = true;
    ah_error_t err;
    CHECK(ah_cluster_copy(&a->cur.plan.cluster, &a->cluster, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_launch_hostjobs(&a->cur.plan, &a->jobs, &a->n_jobs, &err) == AH_OK &&
              (a->job_left = calloc((size_t)a->n_jobs + 4, 1)), "%s", err.msg);
    ah_agent_procs_launch(a, &a->cur.plan);
    a->joined = a->running = true;
    a->save_est_s = 4;
}

static void agent_free(agent_t *a) {
    ah_agent_inplace_free(a);
    ah_agent_inplace_join_free(a);
    ah_agent_next_plan_free(a);
    ah_plan_result_free(&a->cur);
    ah_cluster_free(&a->cluster);
    free(g_res.recoveries);
    ah_history_free(&a->hist);
}

static void set_next(agent_t *a, const int (*dev)[2], int k) {
    ah_agent_next_plan_free(a);
    plan_on(&a->next, dev, k);
    a->have_next = true;
}

/* A job of `host` started into the launch (join_begin's or join_start's state): job join_first, join_n 1, join_req. */
static void add_job(agent_t *a, const char *host, int req) {
    a->jobs = realloc(a->jobs, (size_t)(a->n_jobs + 1) * sizeof *a->jobs);
    memset(&a->jobs[a->n_jobs], 0, sizeof *a->jobs);
    snprintf(a->jobs[a->n_jobs].host, sizeof a->jobs->host, "%s", host);
    a->join_first = a->n_jobs++, a->join_n = 1, a->join_req = req;
}

/* Running on n0:0 n1:0, n1 noticed, the next plan n0:0 n2:0 (n2 free). */
static void notice_onto_n2(agent_t *a) {
    agent_init(a, (const int[][2]){{0, 0}, {1, 0}}, 2);
    g_leaving[1] = true;
    set_next(a, (const int[][2]){{0, 0}, {2, 0}}, 2);
}

/* a "reconfigure" event at step to `to` ranks with `join` joining jobs */
static json_t *reconfigure(int64_t step, int to, int join) {
    return json_pack("{s:s, s:I, s:i, s:i, s:b}", "event", AH_PROTO_EV_RECONFIGURE, "step", (json_int_t)step,
                     "ranks_to", to, "join", join, "committed", 1);
}

static void checkpoint(agent_t *a, double secs) {
    json_t *ev = json_pack("{s:s, s:b, s:f}", "event", AH_PROTO_EV_CHECKPOINT, "ok", 1, "seconds", secs);
    ah_agent_inplace_on_event(a, AH_PROTO_EV_CHECKPOINT, ev);
    json_decref(ev);
}

/* 661540f: a notice whose next plan re-admits a parked rank leaves room for the save (the trainers save before such a
 * move), even where the change would otherwise be written behind (the last committed step in the running plan's
 * layout, every piece of the leaver kept on a staying node). Launched on n0:0 n0:1 n1:0; n0:1 parks at a change
 * (n0:0 n1:0 go on; a checkpoint committed since); n1 noticed, the next plan n0:0 n0:1 takes n0:1 back. Before the
 * fix the room was 0 (the deadline the whole grace period). Against it: the next plan n0:0 alone, written behind. */
static void test_room_readmit(void) {
    static agent_t a;
    agent_init(&a, (const int[][2]){{0, 0}, {0, 1}, {1, 0}}, 3);
    ah_plan_result_free(&a.cur);
    plan_on(&a.cur, (const int[][2]){{0, 0}, {1, 0}}, 2);
    json_t *change = reconfigure(3, 2, 0);
    ah_agent_procs_changed(&a, change);
    json_decref(change);
    CHECK(ah_agent_parked_on(&a, "n0", 1) >= 0, "n0:1 parked");
    checkpoint(&a, 4); /* committed under the running plan */
    g_leaving[1] = true;
    set_next(&a, (const int[][2]){{0, 0}}, 1);
    CHECK(ah_agent_inplace_save_room(&a) == 0, "n0:0 alone: written behind, no room (%.2f s)",
          ah_agent_inplace_save_room(&a));
    set_next(&a, (const int[][2]){{0, 0}, {0, 1}}, 2);
    char why[300] = "";
    CHECK(ah_agent_inplace_fits(&a, &a.next.plan, why, sizeof why), "n0:0 n0:1 in place: %s", why);
    /* since session 25 (joinbehind) written behind as a leave-only change: the last committed step survives */
    CHECK(ah_agent_inplace_save_room(&a) == 0, "n0:1 re-admitted, step 5 kept: written behind (%.2f s, want 0)",
          ah_agent_inplace_save_room(&a));
    g_res.newest_ckpt = -1; /* no step committed: a re-admitted rank's fallback has none, the step is saved first */
    CHECK(ah_agent_inplace_save_room(&a) == 4, "n0:1 re-admitted, nothing committed: the save's room (%.2f s, want 4)",
          ah_agent_inplace_save_room(&a));
    set_next(&a, (const int[][2]){{0, 0}}, 1);
    CHECK(ah_agent_inplace_save_room(&a) == 0, "n0:0 alone, nothing committed: written behind (%.2f s)",
          ah_agent_inplace_save_room(&a));
    agent_free(&a);
}

/* e54e0ba: after a join in place the checkpoints committed so far (the join's own save before the move included)
 * are in the old plan's layout: at the next notice the leavers are not checked against the new plan, the save's room
 * is kept. Running on n0:0; n1 joins (n0:0 n1:0), the join's save's checkpoint event comes before its reconfigure;
 * then n1 is noticed. Before the fix the room was 0 (n1's pieces are on n0 under the new plan, but the committed step
 * is the old plan's). Once a checkpoint is committed under the new plan: written behind, 0. */
static void test_room_after_join(void) {
    static agent_t a;
    agent_init(&a, (const int[][2]){{0, 0}}, 1);
    set_next(&a, (const int[][2]){{0, 0}, {1, 0}}, 2);
    /* the join asked for (ah_agent_inplace_join_begin's state: n1's job started as job 1, the request at step 10) */
    add_job(&a, "n1", 1);
    a.join_step = 10, a.join_t = ah_now_s();
    checkpoint(&a, 4); /* the join's save before the move, in the old layout */
    json_t *ev = reconfigure(a.join_step, 2, 1);
    CHECK(ah_agent_inplace_join_on_event(&a, AH_PROTO_EV_RECONFIGURE, ev) && a.join_req == 0 &&
              ah_plan_device_count(&a.cur.plan) == 2, "joined: %s", g_log);
    json_decref(ev);
    g_res.newest_ckpt = a.inplace_after;
    g_leaving[1] = true;
    set_next(&a, (const int[][2]){{0, 0}}, 1);
    CHECK(ah_agent_inplace_save_room(&a) == 4, "the first notice after the join: the save's room (%.2f s, want 4)",
          ah_agent_inplace_save_room(&a));
    checkpoint(&a, 4);
    CHECK(ah_agent_inplace_save_room(&a) == 0, "a checkpoint under the new plan: written behind (%.2f s)",
          ah_agent_inplace_save_room(&a));
    agent_free(&a);
}

/* 8bfbf1d and 8e2d8c8: a notice's change onto a free host. Running on n0:0 n1:0, n1 noticed, the next plan n0:0
 * n2:0 (n2 free). The admission's wait is half of the deadline's time left less two steps and the save estimate:
 * 10 s left with an 8 s save leaves 0.9 s, under 1 s: n2 is not counted (before 8bfbf1d: 4.9 s, counted); 30 s left
 * fits. ah_agent_inplace_fits counts the time left from the notice whose next plan is being made: 58.5 s after it,
 * 1.5 s of the 60 s grace period are left, no admission fits (before 8e2d8c8 the whole grace period was counted). */
static void test_free_host_admission(void) {
    static agent_t a;
    notice_onto_n2(&a);
    char note[400] = "";
    a.save_est_s = 8;
    const int n10 = ah_agent_inplace_join_devices(&a, &a.next.plan, 10, note, sizeof note);
    CHECK(n10 == 0 && strstr(note, "the admission does not fit the deadline: 0.90 s") &&
              strstr(note, "the save before the move 8.00 s"), "10 s left, an 8 s save: n2 not counted (%d): %s", n10, note);
    CHECK(ah_agent_inplace_join_devices(&a, &a.next.plan, 30, NULL, 0) == 1, "30 s left: n2 counted");
    /* joinbehind: step 5 committed under the running plan, n1's pieces on n0 too: the change's step is written
     * behind, no save taken off, so 10 s left fit (until session 25 the save was always taken off: not counted) */
    checkpoint(&a, 8);
    CHECK(ah_agent_change_save_s(&a, true) == 0, "written behind: no save (%.2f s)", ah_agent_change_save_s(&a, true));
    CHECK(ah_agent_inplace_join_devices(&a, &a.next.plan, 10, note, sizeof note) == 1,
          "10 s left, the step written behind: n2 counted (%s)", note);
    /* a sharded optimizer (--shard-optimizer): its state is not moved, the trainers save before the change, so the
     * save is taken off again (session 25's fix1; acdd7e3 took it off) and 10 s left do not fit. No opt_groups
     * array: only the count is read (reset before the plans are freed). */
    a.next.plan.n_opt_groups = 1;
    CHECK(ah_agent_change_save_s(&a, true) == 8 && ah_agent_inplace_join_devices(&a, &a.next.plan, 10, NULL, 0) == 0,
          "the next plan sharded: the save taken off (%.2f s), n2 not counted", ah_agent_change_save_s(&a, true));
    a.next.plan.n_opt_groups = 0, a.cur.plan.n_opt_groups = 1;
    CHECK(ah_agent_change_save_s(&a, false) == 8, "the running plan sharded, leave-only: the save (%.2f s, want 8)",
          ah_agent_change_save_s(&a, false));
    a.cur.plan.n_opt_groups = 0;
    a.ckpt_under_plan = false;
    a.save_est_s = 0;
    char why[400] = "";
    a.planning_notice_t = ah_now_s() - 1;
    CHECK(ah_agent_inplace_fits(&a, &a.next.plan, why, sizeof why), "1 s after the notice: fits (%s)", why);
    a.planning_notice_t = ah_now_s() - 58.5;
    CHECK(!ah_agent_inplace_fits(&a, &a.next.plan, why, sizeof why) && strstr(why, "the admission does not fit"),
          "58.5 s after the notice: the admission does not fit (%s)", why[0] ? why : "it fit");
    agent_free(&a);
}

/* 25cf078: while a notice's change is asked for (step 12, to the next plan's 1 rank, no join), a "reconfigure" that
 * is not it (to 2 ranks; or before step 12) is said and falls back: the notice's stop (SIGTERM to n1), the running
 * plan kept (before the fix it was taken as the change: the plan the agent knows replaced by one the trainers do not
 * run). The change asked for is taken. */
static void test_asked_change(void) {
    static const int run[][2] = {{0, 0}, {1, 0}};
    const struct {
        int64_t step;
        int to;
        bool taken;
    } cases[] = {{12, 2, false}, {11, 1, false}, {12, 1, true}, {13, 1, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        static agent_t a;
        agent_init(&a, run, 2);
        g_leaving[1] = true;
        set_next(&a, (const int[][2]){{0, 0}}, 1);
        a.inplace = 1, a.inplace_step = 12, a.notice_t = ah_now_s();
        g_notices = 0;
        json_t *ev = reconfigure(cases[c].step, cases[c].to, 0);
        ah_agent_inplace_on_event(&a, AH_PROTO_EV_RECONFIGURE, ev);
        json_decref(ev);
        if (cases[c].taken)
            CHECK(a.inplace == 2 && ah_plan_device_count(&a.cur.plan) == 1 && g_notices == 0, "step %lld to %d: taken "
                  "(inplace %d): %s", (long long)cases[c].step, cases[c].to, a.inplace, g_log);
        else
            CHECK(a.inplace == 3 && ah_plan_device_count(&a.cur.plan) == 2 && a.stopping && g_notices == 1 &&
                      strstr(g_log, "not the one asked for"), "step %lld to %d: fallen back (inplace %d, %d ranks): %s",
                  (long long)cases[c].step, cases[c].to, a.inplace, ah_plan_device_count(&a.cur.plan), g_log);
        agent_free(&a);
    }
}

/* A notice's change (step 12, n1 leaving and n2 joining) the trainer refuses: its "reconfigure_refused" event falls
 * back at once, the trainer's reason said (before: the agent waited for the deadline, the grace period less the save,
 * and its notice's stop had only the rest of the grace period). A refusal of another step (an older request's) is not
 * this one's. */
static void test_refused(void) {
    static agent_t a;
    notice_onto_n2(&a);
    a.inplace = 1, a.inplace_step = 12, a.notice_t = ah_now_s(), a.inplace_deadline = a.notice_t + 56;
    g_notices = 0;
    json_t *old = json_pack("{s:s, s:i, s:s}", "event", AH_PROTO_EV_RECONFIGURE_REFUSED, "step", 11, "why", "x"),
           *now = json_pack("{s:s, s:i, s:s}", "event", AH_PROTO_EV_RECONFIGURE_REFUSED, "step", 12, "why",
                            "the move's buffers do not fit host memory");
    ah_agent_inplace_on_event(&a, AH_PROTO_EV_RECONFIGURE_REFUSED, old);
    CHECK(a.inplace == 1 && g_notices == 0, "step 11's refusal: still waiting (inplace %d)", a.inplace);
    ah_agent_inplace_on_event(&a, AH_PROTO_EV_RECONFIGURE_REFUSED, now);
    CHECK(a.inplace == 3 && a.stopping && g_notices == 1 && strstr(g_log, "in place: the change at step 12 not made "
          "(refused by the trainer: the move's buffers do not fit host memory): the notice's stop and relaunch"),
          "step 12's refusal: fallen back at once (inplace %d): %s", a.inplace, g_log);
    json_decref(old);
    json_decref(now);
    agent_free(&a);
}

/* A notice's change that takes a free host in (n1 noticed, n2 free, the next plan n0:0 n2:0): the recovery names n2
 * taken in, as the preempt event does: the summary line (cli_run.c) and the recover event say it (before: only the
 * preempt event's "joined"). */
static void test_free_host_named(void) {
    static agent_t a;
    notice_onto_n2(&a);
    add_job(&a, "n2", 2);
    a.inplace = 1, a.inplace_step = 12, a.notice_t = ah_now_s();
    json_t *ev = reconfigure(12, 2, 1);
    ah_agent_inplace_on_event(&a, AH_PROTO_EV_RECONFIGURE, ev);
    json_decref(ev);
    CHECK(a.inplace == 2 && g_res.n_recoveries == 1, "changed in place (inplace %d): %s", a.inplace, g_log);
    if (g_res.n_recoveries == 1) {
        const ah_agent_recovery_t *r = &g_res.recoveries[0];
        json_t *rec = ah_recovery_event(r);
        char *text = json_dumps(rec, JSON_COMPACT);
        CHECK(strcmp(r->nodes, "n1") == 0 && strcmp(r->joined, "n2") == 0 && text &&
                  strstr(text, "\"nodes\":[\"n1\"]") && strstr(text, "\"joined\":[\"n2\"]"),
              "n1 left, n2 taken in: \"%s\" \"%s\" %s", r->nodes, r->joined, text ? text : "?");
        free(text);
        json_decref(rec);
    }
    agent_free(&a);
}

/* The save estimate before the run's first checkpoint event (session 25; before: 0, so a deadline left no room for a
 * save until one was seen): launched on n0:0 n0:1 n1:0, n0 holds two replicas of llama2-7b and writes each shard once (as
 * the runtime does, plan/ckpt_traffic.h; the first estimate counted it twice), 12 bytes a parameter, at
 * AH_AGENT_DISK_GB_S (8 GB/s when unset; 2 given). The first checkpoint seen replaces it (even when shorter), the
 * longest seen after that stands. */
static void test_save_estimate(void) {
    static agent_t a;
    static const int run[][2] = {{0, 0}, {0, 1}, {1, 0}};
    agent_init(&a, run, 3);
    a.save_est_s = 0;
    ah_launch_job_t job = {.plan = &a.cur.plan};
    unsetenv("AH_AGENT_DISK_GB_S");
    ah_agent_inplace_launch(&a, &job);
    const double want = (double)ah_model_params_total(&g_model) * 12 / 8e9; /* one copy on n0 */
    CHECK(a.joined && fabs(a.save_est_s - want) < 0.01 * want && strstr(g_log, "the save estimate before the first "
          "checkpoint: ") && strstr(g_log, "at AH_AGENT_DISK_GB_S 8.0 GB/s"), "%.3f s, want %.3f: %s", a.save_est_s,
          want, g_log);
    setenv("AH_AGENT_DISK_GB_S", "2", 1);
    ah_agent_inplace_launch(&a, &job);
    CHECK(fabs(a.save_est_s - 4 * want) < 0.04 * want, "at 2 GB/s: %.3f s, want %.3f", a.save_est_s, 4 * want);
    unsetenv("AH_AGENT_DISK_GB_S");
    checkpoint(&a, 3);
    checkpoint(&a, 2);
    CHECK(a.save_est_s == 3, "the checkpoints seen: the longest, 3 s (%.3f)", a.save_est_s);
    ah_agent_inplace_launch(&a, &job);
    CHECK(a.save_est_s == 3, "a later launch keeps the measured estimate (%.3f)", a.save_est_s);
    agent_free(&a);
}

/* fix2 (session 25): a change in place whose step S (12) was to be written behind and whose move failed: the trainers
 * restore the last committed step C in place ("save": "none", "redone" S - C, "resumed_step" C). The agent's history
 * (steps 0..11 in) rewinds to C at the first step line after the change when that line is step C (the steps C..11
 * recomputed), and only then: an earlier step than C, or a step before S after a change that did not restore C
 * ("async": S written behind), breaks the history as at any relaunch that skips or repeats. Before, the hook in
 * agent.c's on_step (52cef07) rewound at any earlier step after any change in place. The change is a notice's (n1
 * leaving, n2 taken in), as test_free_host_named's. */
static void test_redo_rewind(void) {
    const struct {
        const char *save;
        int redone;
        int64_t first; /* the first step line after the change */
        bool ok;
    } cases[] = {{"none", 2, 10, true}, {"none", 2, 9, false}, {"async", 0, 10, false}, {"sync", 0, 12, true},
                 {"none", 12, 0, true}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        static agent_t a;
        ah_error_t err;
        notice_onto_n2(&a);
        add_job(&a, "n2", 2);
        a.inplace = 1, a.inplace_step = 12, a.notice_t = ah_now_s();
        CHECK(ah_history_init(&a.hist, 100, 64, &err) == AH_OK, "%s", err.msg);
        for (int64_t k = 0; k < 12; k++) ah_history_add(&a.hist, 0, k, 64, 1.0);
        json_t *ev = json_pack("{s:s, s:i, s:i, s:i, s:b, s:s, s:i, s:i}", "event", AH_PROTO_EV_RECONFIGURE, "step", 12,
                               "ranks_to", 2, "join", 1, "committed", 0, "save", cases[c].save, "redone",
                               cases[c].redone, "resumed_step", 12 - cases[c].redone);
        ah_agent_inplace_on_event(&a, AH_PROTO_EV_RECONFIGURE, ev);
        json_decref(ev);
        CHECK(a.inplace == 2 && g_res.n_recoveries == 1, "changed in place (inplace %d): %s", a.inplace, g_log);
        const bool after = ah_agent_inplace_on_step(&a, cases[c].first, 0.5);
        ah_history_add(&a.hist, 0, cases[c].first, 64, 0.5);
        const int64_t want = cases[c].ok ? 12 - cases[c].first : 0;
        CHECK(after && a.hist.ok == cases[c].ok && a.hist.recomputed == want &&
                  (!cases[c].ok || a.hist.len == cases[c].first + 1),
              "\"save\": \"%s\", redone %d, step %lld after the change: history %s (want %s), %lld recomputed (want "
              "%lld), %lld in%s%s", cases[c].save, cases[c].redone, (long long)cases[c].first, a.hist.ok ? "ok" : "broken",
              cases[c].ok ? "ok" : "broken", (long long)a.hist.recomputed, (long long)want, (long long)a.hist.len,
              a.hist.ok ? "" : ": ", a.hist.ok ? "" : a.hist.msg);
        if (g_res.n_recoveries == 1)
            CHECK(g_res.recoveries[0].redone == cases[c].redone && g_res.recoveries[0].resumed_at == cases[c].first,
                  "the recovery: redone %lld, resumed at %lld", (long long)g_res.recoveries[0].redone,
                  (long long)g_res.recoveries[0].resumed_at);
        agent_free(&a);
    }
}

/* The request on the hosts (WORK/reconfigure-0.json)'s "join_first" (-1: none, -2: no request). */
static int request_join_first(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/reconfigure-0.json", g_work);
    json_t *req = json_load_file(path, 0, NULL), *f = json_object_get(req, "join_first");
    const int v = !req ? -2 : f ? (int)json_integer_value(f) : -1;
    json_decref(req);
    return v;
}

/* 162c517's agent side: a join withdrawn (a notice came first) and then a join retried in the same launch. Running on
 * n0:0 n1:0 (jobs 0 and 1), n2 joins: job 2 started, the request's "join_first" 2; withdrawn. n2 asked again: job 3,
 * "join_first" 3 in the request and to the launcher (the trainers start their turns there: job 2 never answers);
 * join_hosts failing keeps the numbers taken: the next is job 5 after a failed 4. Then a notice's change that takes n2
 * in as a free host (n1 leaving): "join_first" 6 in the notice's request. Before: the request had no "join_first" (the
 * trainers counted admitted jobs only, waiting for job 2's turn) and a failed join_hosts gave its numbers back. */
static void test_rejoin(void) {
    static agent_t a;
    static const int run[][2] = {{0, 0}, {1, 0}}, all[][2] = {{0, 0}, {1, 0}, {2, 0}};
    agent_init(&a, run, 2);
    g_joins = 0, g_join_fail = 0;
    const int want[] = {2, 3, 4, 5};
    for (int k = 0; k < 4; k++) {
        set_next(&a, all, 3);
        g_join_fail = k == 2; /* the third ask's join_hosts fails: its number stays taken */
        const bool asked = ah_agent_inplace_join_begin(&a);
        CHECK(asked == !g_join_fail && g_joins == k + 1 && g_join_first[k] == want[k] && a.n_jobs == want[k] + 1,
              "ask %d: job %d to the launcher (want %d), %d jobs, asked %d: %s", k, g_join_first[k], want[k], a.n_jobs,
              asked, g_log);
        if (asked)
            CHECK(request_join_first() == want[k], "ask %d: the request's join_first %d, want %d", k,
                  request_join_first(), want[k]);
        if (asked) ah_agent_inplace_join_withdraw(&a, "a notice came before it", "the notice goes first");
        ah_agent_next_plan_free(&a);
    }
    g_join_fail = 0;
    g_leaving[1] = true;
    set_next(&a, (const int[][2]){{0, 0}, {2, 0}}, 2);
    a.running = true;
    CHECK(ah_agent_inplace_begin(&a, g_leaving, ah_now_s()) && a.inplace == 1 && a.join_req == 2 && g_joins == 5 &&
              g_join_first[4] == 6 && request_join_first() == 6, "the notice's change takes n2 in as job 6 (%d, "
          "request %d): %s", g_join_first[4], request_join_first(), g_log);
    agent_free(&a);
}

int main(void) {
    ah_error_t err;
    CHECK(ah_model_preset("llama2-7b", &g_model, &err) == AH_OK, "%s", err.msg);
    snprintf(g_work, sizeof g_work, "/tmp/ah-inplace-logic-XXXXXX");
    CHECK(mkdtemp(g_work) != NULL, "mkdtemp");
    test_room_readmit();
    test_room_after_join();
    test_free_host_admission();
    test_asked_change();
    test_free_host_named();
    test_refused();
    test_save_estimate();
    test_rejoin();
    test_redo_rewind();
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_work);
    CHECK(system(cmd) == 0, "%s", cmd);
    return ah_test_finish();
}
