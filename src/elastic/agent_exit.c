/* What an ended training job left in its run directory (runtime/protocol.h: preempted.json,
 * failed.json), and how the run concludes when the job ended for good: finished, or the error
 * that says why not and what to do. Part of the elastic agent (agent_state.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>

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
