/* The elastic agent's loop (agent.h): plan, launch, watch, stop, re-plan, relaunch. The decisions
 * and the accounting are agent_logic.h's, its state agent_state.h's; the hosts are asked (who
 * answers, disks, a hang) in agent_hosts.c, each through the launcher; the events file's
 * preemptions and joins are applied in agent_avail.c. */
#include "elastic/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/names.h"
#include "core/str.h"
#include "core/timing.h"
#include "core/vec.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "elastic/launcher.h"
#include "plan/evaluate.h"
#include "runtime/protocol.h"

void ah_agent_opts_default(ah_agent_opts_t *o) {
    memset(o, 0, sizeof *o);
    ah_planner_opts_default(&o->planner);
    o->planner.train.global_batch = 8;
    o->planner.train.seq_len = 64;
    o->planner.train.precision = AH_PREC_FP32;
    o->mpirun = "mpirun";
    o->steps = 20;
    o->ckpt_every = 5;
    o->grace_s = 30;
    o->max_restarts = 3;
    o->restart_window_s = 3600;
    o->poll_s = 0.01;
}

void ah_agent_result_free(ah_agent_result_t *r) {
    if (!r) return;
    free(r->launches);
    free(r->recoveries);
    memset(r, 0, sizeof *r);
}

static json_t *node_list(const agent_t *a, const bool *set) {
    json_t *arr = json_array();
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (set[i]) json_array_append_new(arr, json_string(a->cluster.nodes[i].name));
    return arr;
}

/* The nodes in set, runs summarised (core/names.h: "h0..h159 x1"). */
static void names_of(const agent_t *a, const bool *set, char *out, size_t cap) {
    ah_str_t s = ah_str_fixed(out, cap);
    const char **names = malloc((size_t)(a->cluster.n_nodes + 1) * sizeof *names);
    int n = 0;
    for (int i = 0; names && i < a->cluster.n_nodes; i++)
        if (set[i]) names[n++] = a->cluster.nodes[i].name;
    if (names) ah_names_append(&s, names, n, " ", 0);
    free(names);
}

/* ---- planning ---- */

/* ---- launching ---- */

static ah_status_t launch(agent_t *a, ah_error_t *err) {
    ah_agent_result_t *res = a->res;
    if (!ah_grow(&res->launches, &a->cap_launches, res->n_launches + 1, sizeof *res->launches))
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    const int k = res->launch_base + res->n_launches; /* never an earlier run's number */
    ah_agent_launch_t *L = &res->launches[res->n_launches];
    memset(L, 0, sizeof *L);
    L->first_step = -1;
    snprintf(L->plan_path, sizeof L->plan_path, "%s/plan-%d.json", a->work, k);
    ah_agent_plan_desc(&a->cur.plan, L->plan_desc, sizeof L->plan_desc);
    L->devices = ah_plan_device_count(&a->cur.plan);
    L->predicted_s = a->cur.eval.pred.iteration_s;
    if (a->o->planner.profile &&
        ah_profile_missing_types(a->o->planner.profile, &a->cur.plan, L->roofline_types, sizeof L->roofline_types) > 0)
        say(a, "note: the profile has no entry for %s at this plan's TP %d, micro-batch %lld, seq-len %lld, %s: the "
            "roofline times %s", L->roofline_types, a->cur.plan.tp, (long long)a->cur.plan.train.micro_batch,
            (long long)a->cur.plan.train.seq_len, ah_precision_name(a->cur.plan.train.precision),
            strchr(L->roofline_types, ',') ? "them" : "it");
    ah_status_t s = ah_plan_wan_check(&a->cur.plan, a->o->allow_unencrypted_wan, err);
    if (s != AH_OK) return ah_error_prefix(err, "launch %d", k);
    if ((s = ah_plan_save(&a->cur.plan, L->plan_path, err)) != AH_OK) return s;

    char run_dir[600];
    snprintf(run_dir, sizeof run_dir, "%s/launch-%d", a->work, k);
    ah_train_argv_t train;
    if ((s = ah_agent_train_argv(a->o, L->plan_path, a->local_root, run_dir, &train, err)) != AH_OK) return s;
    ah_launch_job_t job = {.plan = &a->cur.plan, .plan_path = L->plan_path, .run_dir = run_dir,
                           .train_argv = train.argv};
    ah_agent_inplace_launch(a, &job); /* --in-place: joined, one job a host */
    if ((s = a->launcher.start(a->launcher.ctx, &job, err)) != AH_OK) return s;
    a->running = true;
    a->launch_t = ah_now_s();
    res->n_launches++;
    json_decref(a->trainer_recover);
    a->trainer_recover = NULL;
    a->external_seen_t = -1;
    ah_watchdog_reset(&a->dog, L->predicted_s,
                      a->o->step_timeout_s > 0 ? a->o->step_timeout_s : AH_AGENT_STEP_TIMEOUT_S);
    say(a, "launch %d: %d ranks, plan %s", k, L->devices, L->plan_path);
    return AH_OK;
}

void ah_agent_plan_event(agent_t *a, const char *event, double secs, bool in_place) {
    char desc[512];
    ah_agent_plan_desc(&a->cur.plan, desc, sizeof desc);
    json_t *ev = json_pack("{s:s, s:f, s:f, s:i, s:o, s:s}", "event", event, "seconds", secs, "predicted_iteration_s",
                           a->cur.eval.pred.iteration_s, "devices", ah_plan_device_count(&a->cur.plan), "nodes_up",
                           node_list(a, a->up), "plan", desc);
    if (ev && in_place) json_object_set_new(ev, "in_place", json_true());
    emit(a, ev);
}

/* Plans on what is up and launches; a plan event in the metrics. */
static ah_status_t plan_and_launch(agent_t *a, const char *why, ah_error_t *err) {
    ah_plan_result_t r;
    ah_agent_drop_unreachable(a, false, false, "planned out");
    const double t = ah_now_s();
    /* the plan made at the notice or the join (agent_handover.c), when its nodes are all still up */
    const bool made = ah_agent_take_next_plan(a, &r);
    ah_status_t s = made ? AH_OK : ah_agent_plan_up(a, &r, err);
    const double secs = ah_now_s() - t;
    if (s != AH_OK) return s;
    char desc[512];
    ah_agent_plan_desc(&r.plan, desc, sizeof desc);
    const bool first = !a->have_cur;
    if (a->have_cur) ah_plan_result_free(&a->cur);
    a->cur = r;
    a->have_cur = true;
    say(a, "%s: %d devices, predicted %.4f s/iteration, %s in %.3f s: %s%s%s", why, ah_plan_device_count(&r.plan),
        r.eval.pred.iteration_s, !made                      ? "planned"
        : a->cause == AH_CAUSE_JOIN ? "the plan made at the join, taken"
                                    : "the plan made at the notice, taken", secs, desc,
        !made && a->exposure_note[0] ? "; " : "", !made ? a->exposure_note : "");
    ah_agent_plan_event(a, first ? "plan" : "replan", secs, false);
    if (a->pending >= 0) a->res->recoveries[a->pending].replan_s = secs;
    return launch(a, err);
}

/* ---- the trainer's metrics ---- */

static void finish_recovery(agent_t *a, double step_s) {
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    ah_recovery_close(r, since_start(a), step_s, a->trainer_recover);
    say(a, "recovered from step %lld in %.2f s (stop %.2f + re-plan %.3f + start-up %.2f + transfer %.3f + first "
        "step %.3f); bytes local %llu, memory %llu, peer %llu, cloud %llu",
        (long long)r->resumed_at, r->total_s, r->stop_s, r->replan_s, r->startup_s, r->transfer_s, r->first_step_s,
        (unsigned long long)r->bytes[AH_TIER_LOCAL], (unsigned long long)r->bytes[AH_TIER_MEMORY],
        (unsigned long long)r->bytes[AH_TIER_PEER],
        (unsigned long long)r->bytes[AH_TIER_CLOUD]);
    emit(a, ah_recovery_event(r));
    a->pending = -1;
}

/* A launch's first step line: where it resumed, in the history and for the recovery waiting. */
static void on_first_step(agent_t *a, int64_t step, double loss) {
    const int k = launch_no(a);
    say(a, "launch %d: first step (%lld) finished", k, (long long)step);
    if (ah_history_resume(&a->hist, a->res->n_launches - 1 + a->hist_offset, step) == AH_RESUME_EARLIER_RUN)
        say(a, "launch %d resumed an earlier run's checkpoint: steps 0..%lld were trained before", k,
            (long long)step - 1);
    if (a->pending >= 0) ah_recovery_resumed(&a->res->recoveries[a->pending], &a->hist, step, loss);
    else if (a->first_start_s < 0) a->first_start_s = ah_now_s() - a->launch_t; /* the join rule's first cost */
}

static void on_step(agent_t *a, json_t *line) {
    ah_agent_launch_t *L = &a->res->launches[a->res->n_launches - 1];
    const double loss = ah_json_num_or_nan(line, AH_PROTO_STEP_LOSS), tokens = ah_json_num_or_nan(line, AH_PROTO_STEP_TOKENS),
                 secs = ah_json_num_or_nan(line, AH_PROTO_STEP_SECONDS);
    const int64_t step = (int64_t)ah_json_num_or_nan(line, AH_PROTO_STEP);
    const bool first = L->first_step < 0;
    /* the first after one in place (its history rewound to C when the trainers restored it in place) */
    const bool after_change = !first && ah_agent_inplace_on_step(a, step, loss);
    if (first) {
        /* A launch starts where its checkpoint left off: steps from there on are redone. */
        L->first_step = step;
        on_first_step(a, step, loss);
    }
    ah_history_add(&a->hist, a->res->n_launches - 1 + a->hist_offset, step, tokens, loss);
    ah_watchdog_line(&a->dog, ah_now_s());
    L->end_step = step + 1;
    L->step_s_sum += isfinite(secs) ? secs : 0;
    json_object_set_new(line, "launch", json_integer(launch_no(a)));
    json_object_set_new(line, "t_s", json_real(since_start(a))); /* for autohet report's time axis */
    emit(a, json_incref(line));
    if ((first || after_change) && a->pending >= 0) finish_recovery(a, isfinite(secs) ? secs : 0);
    if ((first || after_change) && !a->join_when)
        a->join_when = first ? "first step finished" : "first step after the change in place";
}

static void on_checkpoint(agent_t *a) {
    if (!a->stopping && ah_agent_answer_again(a)) a->join_pending = true;
    if (!a->join_when) a->join_when = "checkpoint taken";
}

static void on_line(void *ctx, json_t *line) {
    agent_t *a = ctx;
    const char *ev = json_string_value(json_object_get(line, AH_PROTO_EVENT));
    if (!ev) {
        if (json_is_number(json_object_get(line, AH_PROTO_STEP))) on_step(a, line);
        return;
    }
    if (strcmp(ev, AH_PROTO_EV_RECOVER) == 0) {
        /* the step a resume now restores: the one this launch started from */
        a->res->newest_ckpt = json_is_true(json_object_get(line, "found"))
                                  ? json_integer_value(json_object_get(line, AH_PROTO_STEP)) : -1;
        /* folded into the agent's recover event (from the preemption to the first step), and kept as
         * "restore" */
        ah_agent_on_restore(a, line, launch_no(a));
        return;
    }
    if (strcmp(ev, AH_PROTO_EV_PREEMPT) == 0) return; /* the agent's preempt event says it with the cause */
    if (strcmp(ev, AH_PROTO_EV_NONFINITE) == 0 && !json_is_true(json_object_get(line, "skipped")))
        a->diverged_at = json_integer_value(json_object_get(line, AH_PROTO_STEP));
    json_object_set_new(line, "launch", json_integer(launch_no(a)));
    const json_t *cloud_step = json_object_get(line, "cloud_step"), *cloud_error = json_object_get(line, "cloud_error");
    if (json_is_integer(cloud_step)) a->res->cloud_step = json_integer_value(cloud_step); /* the newest said */
    if (json_is_string(cloud_error))
        snprintf(a->res->cloud_error, sizeof a->res->cloud_error, "%s", json_string_value(cloud_error));
    emit(a, json_incref(line));
    if (!ah_agent_inplace_join_on_event(a, ev, line)) ah_agent_inplace_on_event(a, ev, line);
    if (strcmp(ev, AH_PROTO_EV_CHECKPOINT) == 0) {
        ah_agent_result_t *r = a->res;
        if (json_is_true(json_object_get(line, "ok"))) {
            r->newest_ckpt = json_integer_value(json_object_get(line, AH_PROTO_STEP));
        } else {
            r->failed_saves++;
            snprintf(r->save_error, sizeof r->save_error, "%s", json_string_value(json_object_get(line, "error")) ?
                     json_string_value(json_object_get(line, "error")) : "?");
        }
        ah_watchdog_line(&a->dog, ah_now_s());
        on_checkpoint(a);
    }
}

/* ---- after the job ended ---- */

/* Someone else sent the notice: the nodes the trainer names leave. */
static void take_outside_notice(agent_t *a, const bool *named, double exit_t) {
    a->stopping = true;
    a->cause = AH_CAUSE_SIGNAL;
    a->notice_t = a->external_seen_t > 0 ? a->external_seen_t : exit_t;
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (named[i] && a->up[i]) {
            a->up[i] = false;
            a->leaving[i] = true;
        }
    say(a, "the trainer got a preemption notice from outside (SIGTERM)");
}

/* The job stopped after a notice: the recovery opened, the preempt event, the leaving nodes'
 * disks (every disk with --recovery cloud-only) dropped. */
static ah_status_t account_stop(agent_t *a, const ah_exit_facts_t *f, double exit_t, ah_error_t *err) {
    const int nn = a->cluster.n_nodes;
    const int status = f->status;
    if (!ah_grow(&a->res->recoveries, &a->cap_recoveries, a->res->n_recoveries + 1, sizeof *a->res->recoveries))
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    a->pending = a->res->n_recoveries++;
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    /* from the notice, or a join in place that fell back: from its ask */
    const double from = a->cause == AH_CAUSE_JOIN && a->recovery_t > 0 ? a->recovery_t : a->notice_t;
    a->recovery_t = 0;
    ah_recovery_open(r, a->cause, f, from - a->t0, exit_t - from, a->forced);
    if (a->cause == AH_CAUSE_JOIN) {
        ah_str_t nodes = ah_str_fixed(r->nodes, sizeof r->nodes);
        for (int i = 0; i < nn; i++)
            if (a->up[i] && !ah_agent_plan_uses(&a->cur.plan, a->cluster.nodes[i].name))
                ah_str_appendf(&nodes, "%s%s", nodes.len ? " " : "", a->cluster.nodes[i].name);
    } else {
        names_of(a, a->leaving, r->nodes, sizeof r->nodes);
    }
    json_t *pe = json_pack("{s:s, s:I, s:f, s:f, s:s, s:o, s:b, s:b, s:i}", "event", "preempt", "step",
                           (json_int_t)r->stopped_at, "seconds", r->stop_s, "t_s", r->t_notice_s, "cause",
                           ah_agent_cause_name(r->cause),
                           "nodes", a->cause == AH_CAUSE_JOIN ? json_array() : node_list(a, a->leaving),
                           "saved", r->saved, "forced", r->forced, "exit_status", status);
    say(a, "job stopped %.2f s after the notice at step %lld (%s%s)", r->stop_s, (long long)r->stopped_at,
        r->saved ? "checkpoint saved" : "no checkpoint at the notice", r->forced ? ", killed after the grace period" : "");
    if (r->forced) {
        json_t *cut = json_array();
        const bool intact = ah_agent_check_disks(a, cut);
        if (json_array_size(cut)) say(a, "the kill interrupted %zu checkpoint write%s", json_array_size(cut),
                                      json_array_size(cut) == 1 ? "" : "s");
        json_object_set_new(pe, "interrupted_writes", cut);
        json_object_set_new(pe, "committed_intact", json_boolean(intact));
    }
    emit(a, pe);
    for (int i = 0; i < nn; i++)
        if (a->leaving[i] || a->o->cloud_only) {
            ah_agent_drop_disk(a, i);
            a->leaving[i] = false;
        }
    a->stopping = false;
    a->join_pending = false; /* the relaunch takes every node that is up (or the next plan, setting it again) */
    return AH_OK;
}

/* *finished: the trainer completed; otherwise a stop was accounted and a relaunch is due. */
static ah_status_t after_exit(agent_t *a, int status, bool *finished, ah_error_t *err) {
    *finished = false;
    ah_agent_inplace_fallback(a, "the job ended first");
    ah_agent_inplace_join_fallback(a, "the job ended first");
    a->running = false;
    const double exit_t = ah_now_s();
    a->launcher.read_metrics(a->launcher.ctx, on_line, a);
    bool *named = calloc((size_t)a->cluster.n_nodes, sizeof *named);
    if (!named) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    ah_exit_facts_t f = {.status = status, .agent_stopping = a->stopping, .preempted_step = -1,
                         .trained = a->hist.len, .steps = a->o->steps, .launches = a->res->n_launches,
                         .resumed_step = a->trainer_recover ? ah_json_num_or_nan(a->trainer_recover, AH_PROTO_STEP) : NAN,
                         .interrupted = a->interrupting};
    ah_agent_read_preempted(a, &f, named);
    ah_exit_action_t act = ah_agent_exit_action(&f);
    /* stopped by the step timeout with no node at fault: a retry of the failure policy on the same nodes,
     * so a hang that recurs ends the run after --max-restarts (or at once at the same step), named */
    const bool hung_no_node = a->hung && a->hung_why[0] && (act == AH_EXIT_EARLY || act == AH_EXIT_FAILED);
    if (act == AH_EXIT_NOTICE_OUTSIDE) take_outside_notice(a, named, exit_t);
    /* failed with no notice, or stopped by the step timeout (its exit status is the stop's): the
     * plan's hosts that no longer answer vanished or hung, and leave */
    else if (hung_no_node)
        act = AH_EXIT_FAILED;
    else if ((a->hung && (act == AH_EXIT_EARLY || act == AH_EXIT_FAILED)) ||
             (act == AH_EXIT_FAILED && ah_agent_drop_unreachable(a, true, false, "host lost without notice"))) {
        a->stopping = true;
        a->cause = AH_CAUSE_LOST;
        a->notice_t = exit_t;
        act = AH_EXIT_STOPPED;
    }
    /* failed, every host answering: unless it is the user's error, the failure policy relaunches */
    char key[128], cause[600];
    ah_restart_verdict_t verdict = AH_RESTART_SPENT;
    bool restartable = act == AH_EXIT_FAILED && ah_agent_failure_cause(a, &f, key, sizeof key, cause, sizeof cause);
    if (hung_no_node) {
        snprintf(key, sizeof key, "a hang with no node at fault");
        snprintf(cause, sizeof cause, "stopped by the step timeout, no node at fault: %s", a->hung_why);
        restartable = true;
    }
    double backoff_s = 0;
    if (restartable && a->o->max_restarts > 0)
        verdict = ah_restart_decide(&a->restarts, since_start(a), key, f.trained, &backoff_s);
    if (restartable && verdict == AH_RESTART_GO) {
        ah_agent_restart_begin(a, cause, f.trained, backoff_s);
        a->stopping = true;
        a->cause = AH_CAUSE_RESTART;
        a->notice_t = exit_t;
        act = AH_EXIT_STOPPED;
    }
    free(named);
    a->hung = false;
    if (act != AH_EXIT_STOPPED && act != AH_EXIT_NOTICE_OUTSIDE) {
        const ah_status_t s =
            hung_no_node ? ah_error_set(err, AH_ERR_COMM, "the training job hung at step %lld, stopped by the step "
                                        "timeout with no node at fault (%.300s); fix the cause and rerun the same "
                                        "autohet run command: it resumes from the last checkpoint in %s",
                                        (long long)f.trained, a->hung_why, a->local_root)
                         : ah_agent_conclude(a, act, &f, err);
        a->hung_why[0] = '\0';
        if (s != AH_OK && restartable) ah_agent_restart_refused(a, verdict, f.trained, err);
        *finished = s == AH_OK;
        return s;
    }
    a->hung_why[0] = '\0';
    return account_stop(a, &f, exit_t, err);
}

static bool events_left_add(const agent_t *a) {
    for (int i = a->next_ev; i < a->ev.n; i++)
        if (a->ev.ev[i].add) return true;
    return false;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static ah_status_t interrupted_between_jobs(const agent_t *a, ah_error_t *err) {
    if (!a->have_cur)
        return ah_error_set(err, AH_ERR_INTERRUPTED, "interrupted while waiting for a node to join, before the first "
                            "launch");
    return ah_error_set(err, AH_ERR_INTERRUPTED, "interrupted between two launches (no job was running); run the "
                        "same autohet run command again to resume from the last checkpoint in %s", a->local_root);
}

/* Plans and launches (why: "plan", the first; "re-plan", after a stop); with no feasible plan and
 * a node the events file adds later, waits for it and plans again. A failure is prefixed with
 * fail_prefix (NULL: none). */
static ah_status_t launch_when_feasible(agent_t *a, const char *why, const char *fail_prefix, ah_error_t *err) {
    for (;;) {
        if (a->o->interrupt && *a->o->interrupt) return interrupted_between_jobs(a, err);
        ah_agent_apply_events(a);
        ah_error_t e;
        const ah_status_t s = plan_and_launch(a, why, &e);
        if (s == AH_OK) return AH_OK;
        if (s != AH_ERR_INFEASIBLE || !events_left_add(a)) {
            *err = e;
            return fail_prefix ? ah_error_prefix(err, "%s", fail_prefix) : s;
        }
        say(a, "no plan fits the nodes that are up (%s); waiting for a node to join", e.msg);
        while (a->next_ev < a->ev.n && a->ev.ev[a->next_ev].t_s > since_start(a)) {
            if (a->o->interrupt && *a->o->interrupt) return interrupted_between_jobs(a, err);
            sleep_s(a->o->poll_s);
        }
    }
}

/* ---- the loop ---- */
/* The metrics read while the job runs, then a join its lines asked to weigh (join_when), against the newest step
 * of the whole read. */
static void read_lines(agent_t *a) {
    a->join_when = NULL;
    a->launcher.read_metrics(a->launcher.ctx, on_line, a);
    const char *when = a->join_when;
    a->join_when = NULL;
    if (when) ah_agent_join_if_pays(a, when);
}


/* While stopping: the notice to ranks that started since, and the kill once the grace period is
 * over. */
static void press_stop(agent_t *a) {
    /* ranks whose files appeared after the notice get it now */
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->leaving[i]) a->launcher.notice(a->launcher.ctx, a->cluster.nodes[i].name);
    if (a->cause == AH_CAUSE_JOIN || a->interrupting) a->launcher.notice(a->launcher.ctx, NULL);
    switch (ah_agent_stop_action(ah_now_s() - a->notice_t, a->o->grace_s, a->forced)) {
    case AH_STOP_FORCE: {
        a->forced = true;
        int sent = 0;
        for (int i = 0; i < a->cluster.n_nodes; i++)
            if (a->leaving[i]) sent += a->launcher.kill_host(a->launcher.ctx, a->cluster.nodes[i].name);
        say(a, "grace period over: SIGKILL to %d rank%s", sent, sent == 1 ? "" : "s");
        if (sent == 0) a->launcher.stop(a->launcher.ctx);
        break;
    }
    case AH_STOP_KILL_JOB:
        say(a, "the job did not end %.0f s after the grace period: killing it", AH_AGENT_KILL_MARGIN_S);
        a->launcher.stop(a->launcher.ctx);
        break;
    case AH_STOP_WAIT: break;
    }
}

/* The user's interrupt (opts.interrupt): the first is a notice to every rank, so the trainer saves
 * within the grace period as at a preemption, and the run ends when the job has stopped; a second
 * stops the job at once. */
static void on_interrupt(agent_t *a) {
    if (!a->interrupting) {
        a->interrupting = true;
        say(a, "interrupted: every rank gets a notice and saves if that fits in the grace period (%.1f s), then the "
            "job stops and the run ends (interrupt again to stop at once)", a->o->grace_s);
        ah_agent_begin_stop(a, a->stopping ? a->cause : AH_CAUSE_SIGNAL, NULL);
    } else if (*a->o->interrupt >= 2 && !a->stopped_at_once) {
        a->stopped_at_once = true;
        say(a, "interrupted again: stopping the job at once");
        a->launcher.stop(a->launcher.ctx);
    }
}

static ah_status_t watch(agent_t *a, ah_error_t *err) {
    for (;;) {
        sleep_s(a->o->poll_s);
        if (a->o->interrupt && *a->o->interrupt) on_interrupt(a);
        read_lines(a);
        ah_agent_apply_events(a);
        ah_agent_inplace_watch(a);
        ah_agent_inplace_join_watch(a);
        if (a->stopping)
            press_stop(a);
        else if ((a->launcher.reachable || a->launcher.stalled) && ah_watchdog_expired(&a->dog, ah_now_s()))
            ah_agent_on_hang(a);
        else if (a->external_seen_t < 0 && a->launcher.run_file(a->launcher.ctx, AH_PROTO_PREEMPTED_FILE, NULL, NULL))
            a->external_seen_t = ah_now_s();
        if (!a->stopping) ah_agent_probe_quiet(a); /* a joined launch: long before the step timeout */
        int status = 0;
        if (!a->launcher.poll(a->launcher.ctx, &status)) continue;
        bool finished;
        ah_status_t s = after_exit(a, status, &finished, err);
        if (s != AH_OK || finished) return s;
        if ((s = launch_when_feasible(a, "re-plan", "re-planning after the preemption", err)) != AH_OK) return s;
    }
}

/* The result's history fields and the done event, after the watch ended with s. A run that
 * stopped early (a failure, an interrupt) has no complete history: history_ok is false, and
 * history_broken says whether what it trained was also out of order. */
static void finish_run(agent_t *a, ah_status_t s) {
    ah_agent_result_t *res = a->res;
    res->history_broken = !a->hist.ok;
    ah_history_check_complete(&a->hist);
    res->steps_done = a->hist.len;
    res->tokens = a->hist.len * a->hist.batch_tokens;
    res->final_loss = ah_history_loss(&a->hist, a->hist.len - 1);
    res->recomputed = a->hist.recomputed;
    res->history_ok = a->hist.ok;
    snprintf(res->history_msg, sizeof res->history_msg, "%s", a->hist.msg);
    res->wall_s = since_start(a);
    emit(a, json_pack("{s:s, s:b, s:I, s:I, s:I, s:b, s:f}", "event", "done", "ok", s == AH_OK, "steps",
                      (json_int_t)res->steps_done, "tokens", (json_int_t)res->tokens, "recomputed",
                      (json_int_t)res->recomputed, "history_ok", res->history_ok, "wall_s", res->wall_s));
}

/* The launcher --launcher names: local (one machine, disks WORK/local/NODE/), ssh or slurm. */
static ah_status_t open_launcher(agent_t *a, ah_error_t *err) {
    const ah_agent_opts_t *o = a->o;
    const bool local = !o->launcher || strcmp(o->launcher, "local") == 0;
    if (local && (o->local_root || o->rsh_agent))
        return ah_error_set(err, AH_ERR_USAGE, "%s is for --launcher ssh or slurm; the local launcher keeps every disk in "
                            "--work-dir's DIR/local/NODE/", o->local_root ? "--local-root" : "--rsh-agent");
    const ah_launch_local_opts_t lo = {.mpirun = o->mpirun, .mpirun_args = o->mpirun_args, .local_root = a->local_root};
    const ah_launch_ssh_opts_t so = {.mpirun = o->mpirun, .mpirun_args = o->mpirun_args, .rsh = o->rsh_agent,
                                     .local_root = o->local_root, .autohet = o->autohet};
    return ah_launcher_by_name(o->launcher, &lo, &so, &a->launcher, err);
}

/* One agent per work directory: an exclusive flock on WORK/.autohet-run.lock, held until the agent
 * returns (two agents on one directory would train into the same checkpoints and metrics; the
 * kernel drops the lock when the holder dies, however it dies). The file holds the holder's pid,
 * named when a second agent is refused. */
static ah_status_t lock_work(agent_t *a, ah_error_t *err) {
    char path[600], pid[32] = "";
    snprintf(path, sizeof path, "%s/.autohet-run.lock", a->work);
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot create the work directory's lock: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        const ssize_t n = e == EWOULDBLOCK ? pread(fd, pid, sizeof pid - 1, 0) : 0;
        pid[n > 0 ? strcspn(pid, "\n") : 0] = 0;
        close(fd);
        if (e != EWOULDBLOCK) return ah_error_set(err, AH_ERR_IO, "%s: cannot lock: %s", path, strerror(e));
        return ah_error_set(err, AH_ERR_USAGE, "--work-dir %s is in use by another autohet run%s%s%s: wait for it to "
                            "end, or give another --work-dir", a->work, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
    }
    const int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) /* the pid only helps that message */
        say(a, "warning: %s: cannot write this agent's pid (%s): a second autohet run on --work-dir %s is refused "
            "without naming it", path, strerror(errno), a->work);
    a->lock_fd = fd;
    return AH_OK;
}

ah_status_t ah_agent_run(const ah_agent_opts_t *o, ah_agent_result_t *res, ah_error_t *err) {
    memset(res, 0, sizeof *res);
    res->history_ok = true;
    res->newest_ckpt = -1;
    res->cloud_step = -2;
    agent_t a = {.o = o, .res = res, .pending = -1, .external_seen_t = -1, .diverged_at = -1, .lock_fd = -1};
    a.t0 = ah_now_s();
    a.restarts.max = o->max_restarts;
    a.restarts.window_s = o->restart_window_s;
    ah_status_t s = AH_OK;
    if (!o->model || !o->cluster || !o->data || !o->work_dir || !o->autohet)
        return ah_error_set(err, AH_ERR_USAGE, "--model, --cluster and --data are required (autohet run --help)");
    if (o->steps < 1 || o->ckpt_every < 1 || !(o->grace_s >= 0))
        return ah_error_set(err, AH_ERR_USAGE, "--steps and --ckpt-every must be >= 1 and --grace-s >= 0");
    if (o->max_restarts < 0 || o->max_restarts > AH_AGENT_MAX_RESTARTS || !(o->restart_window_s > 0))
        return ah_error_set(err, AH_ERR_USAGE, "--max-restarts must be in 0 .. %d and --restart-window > 0",
                            AH_AGENT_MAX_RESTARTS);
    if (!o->work_dir[0] || (o->metrics && !o->metrics[0]) || (o->events && !o->events[0]))
        return ah_error_set(err, AH_ERR_USAGE, "%s: an empty path",
                            !o->work_dir[0] ? "--work-dir" : o->metrics && !o->metrics[0] ? "--metrics" : "--events");
    snprintf(a.work, sizeof a.work, "%s", o->work_dir);
    if (o->local_root) snprintf(a.local_root, sizeof a.local_root, "%s", o->local_root);
    else snprintf(a.local_root, sizeof a.local_root, "%s/local", o->work_dir);
    snprintf(res->metrics_path, sizeof res->metrics_path, "%s", o->metrics ? o->metrics : "");
    if (!o->metrics) snprintf(res->metrics_path, sizeof res->metrics_path, "%s/" AH_PROTO_METRICS_FILE, a.work);
    if ((s = ah_model_load(o->model, &a.model, err)) != AH_OK) return s;
    if ((s = ah_cluster_open(o->cluster, &a.cluster, err)) != AH_OK) return s;
    a.up = calloc((size_t)a.cluster.n_nodes, sizeof *a.up);
    a.leaving = calloc((size_t)a.cluster.n_nodes, sizeof *a.leaving);
    a.unanswered = calloc((size_t)a.cluster.n_nodes, sizeof *a.unanswered);
    a.reask = calloc((size_t)a.cluster.n_nodes, sizeof *a.reask);
    if (!a.up || !a.leaving || !a.unanswered || !a.reask || !ah_agent_join_init(&a)) {
        s = ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
        goto done;
    }
    const int64_t batch_tokens = o->planner.train.global_batch * o->planner.train.seq_len;
    if ((s = ah_history_init(&a.hist, o->steps, batch_tokens, err)) != AH_OK) goto done;
    if ((s = open_launcher(&a, err)) != AH_OK) goto done;
    for (int i = 0; i < a.cluster.n_nodes; i++) a.up[i] = true;
    struct stat esb;
    if (o->events && stat(o->events, &esb) == 0) a.ev_size = esb.st_size;
    if (o->events && (s = ah_agent_events_load(o->events, &a.cluster, &a.ev, err)) != AH_OK) goto done;
    if (o->events) {
        say(&a, "events: %d from %s%s%s%s", a.ev.n, o->events, a.ev.mapping[0] ? "; ids mapped onto spot nodes: " : "",
            a.ev.mapping, a.ev.ignored ? " (events of unmapped ids ignored)" : "");
    }
    /* with per-host disks (ssh), the disks are the hosts'; here only the work directory */
    if ((s = ah_fs_mkdirs(o->local_root ? a.work : a.local_root, err)) != AH_OK) goto done;
    if ((s = lock_work(&a, err)) != AH_OK) goto done;
    /* appended: a rerun of the same command resumes, and the earlier run's record stays before it */
    if (!(a.metrics = fopen(res->metrics_path, "a"))) {
        s = ah_error_set(err, AH_ERR_IO, "%s: cannot create the metrics file: %s", res->metrics_path, strerror(errno));
        goto done;
    }
    /* an earlier run's launches are numbered on from, and its last one taken over when its agent was
     * killed; then changes at time 0 are the starting state, and with no node up yet, the first plan
     * waits for one */
    if ((s = ah_agent_take_over(&a, err)) == AH_OK) a.hist_offset = a.hist.len > 0;
    if (s == AH_OK && (s = launch_when_feasible(&a, "plan", NULL, err)) == AH_OK) s = watch(&a, err);
    finish_run(&a, s);
done:
    ah_launcher_free(&a.launcher);
    if (a.metrics) fclose(a.metrics);
    if (a.lock_fd >= 0) close(a.lock_fd);
    json_decref(a.trainer_recover);
    if (a.have_cur) ah_plan_result_free(&a.cur);
    ah_agent_next_plan_free(&a);
    ah_agent_inplace_free(&a);
    ah_agent_inplace_join_free(&a);
    ah_agent_events_free(&a.ev);
    ah_cluster_free(&a.cluster);
    ah_history_free(&a.hist);
    free(a.up);
    free(a.leaving);
    free(a.unanswered);
    free(a.reask);
    ah_agent_join_free(&a);
    return s;
}
