/* The step loop and the metrics JSONL writer (train_loop.h). */
#include "runtime/train_loop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/timing.h"
#include "runtime/loss_scale.h"
#include "runtime/protocol.h"

/* wall: the seconds since the loop began at `start` (after a --resume, not 0), saves and validations
 * included, so the ETA holds them too; the step's seconds and tokens/s are its own compute.
 * val_loss: NaN when this step had no validation. Steps are numbered from 0 on the console as in the
 * metrics (README "Step numbers"): "step N/LAST", LAST = --steps - 1. */
static void progress(FILE *f, const ah_step_metrics_t *m, double val_loss, int64_t start, int64_t steps,
                     double wall, double ckpt_wait) {
    const double tps = m->seconds > 0 ? (double)m->tokens / m->seconds : 0;
    const double eta = wall / (double)(m->step + 1 - start) * (double)(steps - m->step - 1);
    char val[40] = "", wait[48] = "";
    if (!isnan(val_loss)) snprintf(val, sizeof val, " | val loss %.6f", val_loss);
    /* the loop's waits so far for asynchronous checkpoints still being written (ckpt_io.h) */
    if (ckpt_wait >= 0.0005) snprintf(wait, sizeof wait, " | ckpt wait %.3f s", ckpt_wait);
    fprintf(f, "step %4lld/%lld | loss %.6f%s | lr %.3e | grad norm %.4f | this step %.3f s, %8.0f tok/s%s | "
            "ETA %.0f s\n", (long long)m->step, (long long)steps - 1, m->loss, val, m->lr, m->grad_norm, m->seconds,
            tps, wait, eta);
    fflush(f);
}

/* A warning line for each failed save among a step's events (an array, or NULL): the root, the
 * error (it names the rank when only some failed) and the checkpoint a resume would take. */
static void warn_failed_saves(const ah_train_loop_opts_t *o, const ah_ckpt_session_t *ck, const json_t *events) {
    for (size_t k = 0; o->warn && k < json_array_size(events); k++) {
        const json_t *e = json_array_get(events, k);
        const char *kind = json_string_value(json_object_get(e, AH_PROTO_EVENT));
        if (!kind || strcmp(kind, AH_PROTO_EV_CHECKPOINT) != 0 || json_is_true(json_object_get(e, "ok"))) continue;
        const int64_t kept = ah_ckpt_session_last_saved(ck);
        char newest[64] = "no checkpoint of this run is saved";
        if (kept >= 0) snprintf(newest, sizeof newest, "the newest checkpoint is still step %lld", (long long)kept);
        fprintf(o->warn, "autohet train: warning: the checkpoint of step %lld was not saved in --local-root %s: %s; "
                "training goes on, %s\n", (long long)json_integer_value(json_object_get(e, AH_PROTO_STEP)),
                o->local_root ? o->local_root : "-", json_string_value(json_object_get(e, "error")), newest);
        fflush(o->warn);
    }
}

/* A warning line for each checkpoint event that says the cloud falls behind: an upload failed
 * since the previous one, or the cloud lacks the step saved before this one. */
static void warn_cloud(const ah_train_loop_opts_t *o, const ah_ckpt_session_t *ck, const json_t *events) {
    for (size_t k = 0; o->warn && o->cloud && k < json_array_size(events); k++) {
        const json_t *e = json_array_get(events, k);
        const char *kind = json_string_value(json_object_get(e, AH_PROTO_EVENT));
        const char *failed = json_string_value(json_object_get(e, "cloud_error"));
        if (!kind || strcmp(kind, AH_PROTO_EV_CHECKPOINT) != 0 || (!failed && !json_is_true(json_object_get(e, "cloud_behind"))))
            continue;
        const int64_t c = json_integer_value(json_object_get(e, "cloud_step"));
        char newest[48] = "none";
        if (c >= 0) snprintf(newest, sizeof newest, "step %lld", (long long)c);
        fprintf(o->warn, "autohet train: warning: the cloud tier %s falls behind at step %lld: %s%s%snewest complete "
                "step there %s, on the disk step %lld; training goes on, the next checkpoint is uploaded again\n",
                o->cloud, (long long)json_integer_value(json_object_get(e, AH_PROTO_STEP)), failed ? "cloud upload failed (" : "",
                failed ? failed : "", failed ? "); " : "uploads are slower than the saves; ", newest,
                (long long)ah_ckpt_session_last_saved(ck));
        fflush(o->warn);
    }
}

/* x as JSON: %.9g, or null when not finite (JSON has no nan or inf). */
static const char *json_num(char buf[32], double x) {
    if (!isfinite(x)) return "null";
    snprintf(buf, 32, "%.9g", x);
    return buf;
}

/* One step line (flushed); val_loss NaN: none. */
static void metrics_write_step(FILE *f, const ah_step_metrics_t *m, double val_loss) {
    char lb[32], gb[32], vb[32];
    fprintf(f, "{\"" AH_PROTO_STEP "\": %lld, \"" AH_PROTO_STEP_LOSS "\": %s, \"" AH_PROTO_STEP_LR "\": %.9g, \""
            AH_PROTO_STEP_GRAD_NORM "\": %s, \"" AH_PROTO_STEP_TOKENS "\": %lld, \"" AH_PROTO_STEP_SECONDS
            "\": %.6f, \"" AH_PROTO_STEP_MEMORY_HIGH "\": [",
            (long long)m->step, json_num(lb, m->loss), m->lr, json_num(gb, m->grad_norm), (long long)m->tokens,
            m->seconds);
    for (int r = 0; r < m->n_ranks; r++) fprintf(f, "%s%lld", r ? ", " : "", (long long)m->memory_high[r]);
    fprintf(f, "]");
    if (m->dp_buckets > 0)
        fprintf(f, ", \"" AH_PROTO_STEP_DP_HIDDEN "\": [%lld, %lld]", (long long)m->dp_buckets_hidden,
                (long long)m->dp_buckets);
    if (!isnan(val_loss)) fprintf(f, ", \"" AH_PROTO_STEP_VAL_LOSS "\": %s", json_num(vb, val_loss));
    fprintf(f, "}\n");
    fflush(f);
}

void ah_metrics_write_events(FILE *f, json_t *ev) {
    if (!f || !ev) {
        json_decref(ev);
        return;
    }
    for (size_t i = 0; i < (json_is_array(ev) ? json_array_size(ev) : 1); i++) {
        char *t = json_dumps(json_is_array(ev) ? json_array_get(ev, i) : ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (t) fprintf(f, "%s\n", t);
        free(t);
    }
    fflush(f);
    json_decref(ev);
}

/* A non-finite step (m->nonfinite): its event; the error that stops the run once `skipped` reached
 * o->skip_nonfinite, else AH_OK (the step is skipped). */
static ah_status_t on_nonfinite(const ah_trainer_t *tr, const ah_train_loop_opts_t *o, const ah_ckpt_session_t *ck,
                                const ah_step_metrics_t *m, int64_t *skipped, ah_error_t *err) {
    const bool skip = *skipped < o->skip_nonfinite;
    const int r = m->nonfinite_rank;
    json_t *ev = json_pack("{s:s, s:I, s:s, s:i, s:o, s:o, s:b, s:I}", AH_PROTO_EVENT, AH_PROTO_EV_NONFINITE,
                           AH_PROTO_STEP, (json_int_t)m->step, "what", m->nonfinite_what, "rank", r,
                           AH_PROTO_STEP_LOSS, isfinite(m->loss) ? json_real(m->loss) : json_null(),
                           AH_PROTO_STEP_GRAD_NORM, isfinite(m->grad_norm) ? json_real(m->grad_norm) : json_null(),
                           "skipped", skip, "skips_left", (json_int_t)(o->skip_nonfinite - *skipped - (skip ? 1 : 0)));
    ah_metrics_write_events(o->metrics, ev);
    char where[96] = "";
    if (r >= 0)
        snprintf(where, sizeof where, " on rank %d (pipeline %d, stage %d)", r, tr->layout.roles[r].pipeline,
                 tr->layout.roles[r].stage);
    if (skip) {
        (*skipped)++;
        if (o->progress)
            fprintf(o->progress, "step %4lld/%lld | skipped: %s is not finite%s (loss %g, grad norm %g); %lld of "
                    "--skip-nonfinite %lld used\n", (long long)m->step, (long long)o->steps - 1, m->nonfinite_what,
                    where, m->loss, m->grad_norm, (long long)*skipped, (long long)o->skip_nonfinite);
        return AH_OK;
    }
    const int64_t saved = ah_ckpt_session_last_saved(ck);
    char kept[96] = "no checkpoint was saved";
    if (saved >= 0)
        snprintf(kept, sizeof kept, "the last good checkpoint, step %lld (where a resume starts), is kept",
                 (long long)saved);
    return ah_error_set(err, AH_ERR_INVALID, "step %lld: the loss or gradient norm is not finite (loss %g, grad "
                        "norm %g): first %s%s; training stopped, this step's update not applied, %s (lower --lr, "
                        "or --skip-nonfinite N to skip up to N such steps; %lld skipped)",
                        (long long)m->step, m->loss, m->grad_norm, m->nonfinite_what, where, kept,
                        (long long)*skipped);
}

/* After an fp16 step: the scale's update, and on an overflow its event and progress line. */
static void on_loss_scale(ah_loss_scale_t *ls, const ah_train_loop_opts_t *o, const ah_step_metrics_t *m) {
    const double before = ah_loss_scale_value(ls);
    ah_loss_scale_update(ls, m->overflow);
    if (!m->overflow) return;
    ah_metrics_write_events(o->metrics, json_pack("{s:s, s:I, s:f, s:I}", AH_PROTO_EVENT, AH_PROTO_EV_OVERFLOW,
                                                  AH_PROTO_STEP, (json_int_t)m->step, "loss_scale",
                                                  ah_loss_scale_value(ls), "overflows", (json_int_t)ls->overflows));
    if (o->progress)
        fprintf(o->progress, "step %4lld/%lld | skipped: fp16 gradient overflow at loss scale %g; now %g (%lld "
                "overflows)\n", (long long)m->step, (long long)o->steps - 1, before, ah_loss_scale_value(ls),
                (long long)ls->overflows);
}

ah_status_t ah_train_loop(ah_trainer_t *tr, const ah_train_loop_opts_t *o, ah_ckpt_session_t *ck, int64_t start,
                          int64_t *preempted_at, bool *agreed, ah_error_t *err) {
    ah_step_metrics_t m;
    const double t0 = ah_now_s();
    ah_status_t s = AH_OK;
    int64_t skipped = 0;
    ah_loss_scale_t ls;
    ah_loss_scale_init(&ls, o->loss_scale, o->loss_scale_window);
    *preempted_at = -1;
    *agreed = false;
    if (o->reconfig_due) *o->reconfig_due = false;
    for (int64_t i = start; i <= o->steps; i++) {
        if (o->dump_dir && i == o->dump_step && (s = ah_trainer_dump(tr, o->dump_dir, false, err)) != AH_OK) return s;
        if (i == o->steps) return AH_OK;
        tr->loss_scale = o->loss_scale_window > 0 ? ah_loss_scale_value(&ls) : 0;
        ah_ckpt_session_before_step(ck, i + 1); /* its AdamW may write the checkpoint snapshot */
        if ((s = ah_trainer_step(tr, i, &m, err)) != AH_OK) return s;
        if (o->loss_scale_window > 0) on_loss_scale(&ls, o, &m);
        if (o->grads_dir && i == o->dump_step && (s = ah_trainer_dump(tr, o->grads_dir, true, err)) != AH_OK)
            return s;
        if (m.nonfinite && skipped >= o->skip_nonfinite) { /* the stop: the snapshot in flight is good */
            json_t *events = NULL;
            if ((s = ah_ckpt_session_commit_pending(ck, &events, err)) != AH_OK) return s;
            warn_failed_saves(o, ck, events);
            ah_metrics_write_events(o->metrics, events);
        }
        if (m.nonfinite && (s = on_nonfinite(tr, o, ck, &m, &skipped, err)) != AH_OK) {
            *agreed = true;
            return s;
        }
        double val_loss = NAN;
        if (o->val && ((o->val_every > 0 && (i + 1) % o->val_every == 0) || i + 1 == o->steps) &&
            (s = ah_trainer_eval(tr, o->val, o->val_batches, &val_loss, err)) != AH_OK)
            return s;
        if (o->progress && !m.nonfinite && !m.overflow)
            progress(o->progress, &m, val_loss, start, o->steps, ah_now_s() - t0, ah_ckpt_session_wait_s(ck));
        if (o->metrics) metrics_write_step(o->metrics, &m, val_loss);
        json_t *events = NULL;
        bool stop = false;
        if (ck && (s = ah_ckpt_session_step_done(ck, i + 1, &events, &stop, err)) != AH_OK) return s;
        warn_failed_saves(o, ck, events);
        warn_cloud(o, ck, events);
        ah_metrics_write_events(o->metrics, events);
        if (stop) {
            *preempted_at = i + 1;
            return AH_OK;
        }
        if (o->reconfig_dir && i + 1 < o->steps &&
            (s = ah_reconfig_poll(o->reconfig_dir, i + 1, o->reconfig_after, o->reconfig_check,
                                   o->reconfig_ctx, o->reconfig, o->reconfig_due, err)) != AH_OK)
            return s;
        if (o->reconfig_dir) ah_metrics_write_events(o->metrics, ah_reconfig_refusal()); /* the agent sees it at once */
        if (o->reconfig_dir && *o->reconfig_due) {
            o->reconfig->step = i + 1; /* the boundary it is taken at (a request read late: later than asked) */
            return AH_OK;
        }
    }
    return AH_OK;
}
