/* What an ended training job left in its run directory (runtime/protocol.h: preempted.json,
 * failed.json), whether a failure is restarted (the failure policy, agent_logic.h), and how the
 * run concludes when the job ended for good: finished, or the error that says why not and what to
 * do. Part of the elastic agent (agent_state.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/json.h"
#include "elastic/agent_state.h"
#include "runtime/protocol.h"

void ah_agent_read_preempted(agent_t *a, ah_exit_facts_t *f, bool *named) {
    json_t *doc = NULL;
    ah_error_t e;
    if (!a->launcher.run_file(a->launcher.ctx, AH_PROTO_PREEMPTED_FILE, &doc, &e)) return;
    if (!doc) {
        say(a, "warning: %s", e.msg);
        return;
    }
    const double step = ah_json_num_or_nan(doc, AH_PROTO_PREEMPTED_STEP);
    f->preempted = true;
    f->preempted_step = isfinite(step) ? (int64_t)step : -1;
    f->saved = json_is_true(json_object_get(doc, AH_PROTO_PREEMPTED_SAVED));
    const json_t *arr = json_object_get(doc, AH_PROTO_PREEMPTED_NODES);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const char *name = json_string_value(json_array_get(arr, i));
        const int n = name ? ah_cluster_find_node(&a->cluster, name) : -1;
        if (n >= 0) named[n] = true;
    }
    json_decref(doc);
}

/* RUN_DIR/failed.json, when a rank wrote one (runtime/protocol.h): the error the job stopped on, the
 * rank that wrote it in *rank. False when there is none or it is not one (the caller then says what
 * it knows). */
static bool read_failure(agent_t *a, ah_error_t *failure, int *rank) {
    json_t *doc = NULL;
    if (!a->launcher.run_file(a->launcher.ctx, AH_PROTO_FAILED_FILE, &doc, NULL) || !doc) return false;
    const char *msg = json_string_value(json_object_get(doc, AH_PROTO_FAILED_MESSAGE));
    const json_t *r = json_object_get(doc, AH_PROTO_FAILED_RANK);
    const ah_status_t code = ah_status_of_key(json_string_value(json_object_get(doc, AH_PROTO_FAILED_CLASS)));
    const bool ok = msg && code != AH_OK && json_is_integer(r) && json_integer_value(r) >= 0 &&
                    json_integer_value(r) <= INT_MAX;
    if (ok) {
        ah_error_set(failure, code, "%s", msg);
        *rank = (int)json_integer_value(r);
    }
    json_decref(doc);
    return ok;
}

bool ah_agent_failure_cause(agent_t *a, const ah_exit_facts_t *f, char *key, size_t key_cap, char *cause,
                            size_t cap) {
    if (a->diverged_at >= 0 || f->status == 127 || f->status == 2) return false; /* conclude says why */
    ah_error_t failure;
    int rank;
    if (read_failure(a, &failure, &rank)) {
        if (failure.code == AH_ERR_INVALID || failure.code == AH_ERR_USAGE) return false; /* the user's input */
        snprintf(key, key_cap, "a rank's %s error", ah_status_key(failure.code));
        snprintf(cause, cap, "rank %d's error (%s: %.400s)", rank, ah_status_key(failure.code), failure.msg);
        return true;
    }
    if (f->status < 0) snprintf(key, key_cap, "a rank killed by signal %d", -f->status);
    else snprintf(key, key_cap, "mpirun exit status %d", f->status);
    snprintf(cause, cap, "%s, no error written", key);
    return true;
}

ah_status_t ah_agent_conclude(agent_t *a, ah_exit_action_t act, const ah_exit_facts_t *f, ah_error_t *err) {
    switch (act) {
    case AH_EXIT_FINISHED: return AH_OK;
    case AH_EXIT_FINISHED_NOTICE:
        /* every step was trained (a notice that came after the last step changes nothing) */
        say(a, "the notice came after the last step: nothing to recover");
        return AH_OK;
    case AH_EXIT_NOTHING_TO_TRAIN:
        say(a, "the checkpoint in %s is already at step %.0f of --steps %lld: nothing to train", a->local_root,
            f->resumed_step, (long long)a->o->steps);
        /* an earlier run trained every step: the history is complete, its losses unknown here */
        ah_history_all_earlier(&a->hist);
        return AH_OK;
    case AH_EXIT_INTERRUPTED: {
        const int64_t at = f->preempted && f->preempted_step >= 0 ? f->preempted_step : a->hist.len;
        const char *how = f->preempted && f->saved ? "the trainer saved a checkpoint in the grace period"
                          : a->stopped_at_once     ? "stopped at once on the second interrupt, no checkpoint at the notice"
                          : a->o->grace_s == 0     ? "no checkpoint at the notice (--grace-s 0)"
                          : a->forced ? "the grace period ended before a save could finish, no checkpoint at the notice"
                                      : "no checkpoint at the notice (a save would not have fit in --grace-s)";
        return ah_error_set(err, AH_ERR_INTERRUPTED, "stopped at step %lld on the interrupt: %s; run the same "
                            "autohet run command again to resume from the last checkpoint in %s", (long long)at, how,
                            a->local_root);
    }
    case AH_EXIT_EARLY:
        return ah_error_set(err, AH_ERR_INTERNAL, "the trainer exited normally after %lld of %lld steps",
                            (long long)a->hist.len, (long long)a->o->steps);
    default:
        if (a->diverged_at >= 0)
            return ah_error_set(err, AH_ERR_INVALID, "training diverged at step %lld (a non-finite loss or gradient "
                                "norm, its \"nonfinite\" event above): a rerun resumes from the last good checkpoint "
                                "in %s and would diverge again; lower --lr, lengthen --warmup or allow skips with "
                                "--skip-nonfinite N", (long long)a->diverged_at, a->local_root);
        if (f->status == 127) /* ah_launch_spawn: the exec failed, the child said why */
            return ah_error_set(err, AH_ERR_IO, "could not start the training job (exit status 127: the program "
                                "was not found or not executable; its message is above)");
        if (f->status == 2) /* autohet train's exit status for a usage error (ah_status_exit_code) */
            return ah_error_set(err, AH_ERR_USAGE, "the trainer refused its flags (exit status 2; its message is "
                                "above): the same command would fail the same way; fix the flags of autohet run "
                                "(with autohet run, the trainer's --local-root is %s)", a->local_root);
        ah_error_t failure;
        int rank;
        if (read_failure(a, &failure, &rank)) { /* labelled by the trainer's own error */
            /* rank 0 writes an error all ranks agreed on, and its message names the rank it came from */
            char whose[32] = "this";
            if (rank > 0) snprintf(whose, sizeof whose, "rank %d's", rank);
            return ah_error_set(err, failure.code, "the training job stopped on %s error (%.1500s); fix the cause "
                                "and rerun the same autohet run command: it resumes from the last checkpoint in %s",
                                whose, failure.msg, a->local_root);
        }
        return ah_error_set(err, AH_ERR_COMM, "the training job failed (mpirun exit status %d; its messages are "
                            "above); fix the cause and rerun the same autohet run command: it resumes from the last "
                            "checkpoint in %s", f->status, a->local_root);
    }
}

void ah_agent_restart_begin(agent_t *a, const char *cause, int64_t step, double backoff_s) {
    a->res->restarts = a->restarts.total;
    say(a, "the job failed at step %lld: %s; restart %d (--max-restarts %d within %.0f s) from the newest "
        "checkpoint in %.0f s", (long long)step, cause, a->restarts.n, a->o->max_restarts, a->o->restart_window_s,
        backoff_s);
    emit(a, json_pack("{s:s, s:I, s:s, s:i, s:f, s:f}", "event", "restart", "step", (json_int_t)step, "cause", cause,
                      "restart", a->restarts.total, "backoff_s", backoff_s, "t_s", since_start(a)));
    for (const double until = ah_now_s() + backoff_s; ah_now_s() < until;) {
        if (a->o->interrupt && *a->o->interrupt) break;
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void ah_agent_restart_refused(const agent_t *a, ah_restart_verdict_t v, int64_t step, ah_error_t *err) {
    char why[700];
    if (a->o->max_restarts == 0)
        snprintf(why, sizeof why, "; not restarted (--max-restarts 0)");
    else if (v == AH_RESTART_SAME)
        snprintf(why, sizeof why, "; not restarted again: it came back at step %lld right after restart %d, which "
                 "was for the same failure (%.300s) at the same step", (long long)step, a->restarts.total,
                 a->restarts.last_cause);
    else
        snprintf(why, sizeof why, "; not restarted: the %d restarts --max-restarts allows within --restart-window "
                 "%.0f s are spent (the last at step %lld: %.300s)", a->o->max_restarts, a->o->restart_window_s,
                 (long long)a->restarts.last_step, a->restarts.last_cause);
    const size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len, "%s", why);
}
