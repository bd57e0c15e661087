/* The agent's decisions (agent_logic.h). */
#include "elastic/agent_logic.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/policy.h"
#include "core/json.h"
#include "core/str.h"
#include "runtime/protocol.h"

/* ---- the history ---- */

ah_status_t ah_history_init(ah_history_t *h, int64_t steps, int64_t batch_tokens, ah_error_t *err) {
    memset(h, 0, sizeof *h);
    h->loss = malloc((size_t)(steps + 1) * sizeof *h->loss);
    if (!h->loss) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    h->steps = steps;
    h->batch_tokens = batch_tokens;
    h->ok = true;
    return AH_OK;
}

void ah_history_free(ah_history_t *h) {
    if (!h) return;
    free(h->loss);
    memset(h, 0, sizeof *h);
}

static void broken(ah_history_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void broken(ah_history_t *h, const char *fmt, ...) {
    if (!h->ok) return; /* the first problem is the one to report */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->msg, sizeof h->msg, fmt, ap);
    va_end(ap);
    h->ok = false;
}

ah_resume_kind_t ah_history_resume(ah_history_t *h, int launch, int64_t first) {
    if (first > h->len && launch == 0 && h->len == 0) {
        /* The work directory held an earlier run's checkpoint (the same command run again
         * resumes): steps before it were trained by that run, not skipped. */
        for (int64_t k = 0; k < first && k < h->steps; k++) h->loss[k] = NAN;
        h->len = first;
        return AH_RESUME_EARLIER_RUN;
    }
    if (first > h->len) {
        broken(h, "launch %d started at step %lld but only steps 0..%lld were trained: samples skipped", launch,
               (long long)first, (long long)h->len - 1);
        return AH_RESUME_SKIPS;
    }
    h->recomputed += h->len - first;
    h->len = first;
    return AH_RESUME_IN_HISTORY;
}

void ah_history_add(ah_history_t *h, int launch, int64_t step, double tokens, double loss) {
    if (step != h->len)
        broken(h, "launch %d reported step %lld after step %lld", launch, (long long)step, (long long)h->len - 1);
    else if (step >= h->steps)
        broken(h, "step %lld is past --steps %lld", (long long)step, (long long)h->steps);
    else if ((int64_t)tokens != h->batch_tokens)
        broken(h, "step %lld trained %lld tokens, not the global batch's %lld", (long long)step, (long long)tokens,
               (long long)h->batch_tokens);
    else
        h->loss[h->len++] = loss;
}

void ah_history_all_earlier(ah_history_t *h) {
    for (int64_t k = 0; k < h->steps; k++) h->loss[k] = NAN;
    h->len = h->steps;
}

void ah_history_check_complete(ah_history_t *h) {
    if (h->len != h->steps) broken(h, "%lld of %lld steps in the history", (long long)h->len, (long long)h->steps);
}

double ah_history_loss(const ah_history_t *h, int64_t k) {
    return k >= 0 && k < h->len && k < h->steps ? h->loss[k] : NAN;
}

/* ---- after the job exited ---- */

ah_exit_action_t ah_agent_exit_action(const ah_exit_facts_t *f) {
    const bool notice = f->preempted || f->agent_stopping;
    if (f->trained >= f->steps && (f->status == 0 || notice))
        return notice ? AH_EXIT_FINISHED_NOTICE : AH_EXIT_FINISHED;
    /* a first launch whose checkpoint is at --steps already (a rerun of a finished run): a notice that
     * reached it (an events file replayed) stops nothing */
    if (f->launches == 1 && isfinite(f->resumed_step) && f->resumed_step >= (double)f->steps &&
        (f->status == 0 || notice))
        return AH_EXIT_NOTHING_TO_TRAIN;
    if (f->interrupted) return AH_EXIT_INTERRUPTED;
    if (!notice) return f->status == 0 ? AH_EXIT_EARLY : AH_EXIT_FAILED;
    return f->agent_stopping ? AH_EXIT_STOPPED : AH_EXIT_NOTICE_OUTSIDE;
}

/* ---- the recovery accounting ---- */

void ah_recovery_open(ah_agent_recovery_t *r, ah_agent_cause_t cause, const ah_exit_facts_t *f, double t_notice_s,
                      double stop_s, bool forced) {
    memset(r, 0, sizeof *r);
    r->cause = cause;
    r->t_notice_s = t_notice_s;
    r->stopped_at = f->preempted && f->preempted_step >= 0 ? f->preempted_step : f->trained;
    r->saved = f->preempted && f->saved;
    r->forced = forced;
    r->stop_s = stop_s;
    r->loss_last_before = r->loss_first_after = NAN;
}

void ah_recovery_resumed(ah_agent_recovery_t *r, const ah_history_t *h, int64_t step, double loss) {
    r->resumed_at = step;
    r->loss_last_before = ah_history_loss(h, step - 1);
    r->loss_first_after = loss;
}

void ah_recovery_close(ah_agent_recovery_t *r, double now_s, double first_step_s, const json_t *tr) {
    r->complete = true;
    r->total_s = now_s - r->t_notice_s;
    r->first_step_s = first_step_s;
    if (tr) {
        r->transfer_s = ah_json_num_or_nan(tr, AH_PROTO_RECOVER_SECONDS);
        if (!isfinite(r->transfer_s)) r->transfer_s = 0;
        for (int t = 0; t < AH_TIER_COUNT; t++) {
            const char *name = ah_ckpt_tier_name((ah_ckpt_tier_t)t);
            const double b = ah_json_num_or_nan(json_object_get(tr, AH_PROTO_RECOVER_BYTES), name),
                         n = ah_json_num_or_nan(json_object_get(tr, AH_PROTO_RECOVER_FILES), name),
                         s = ah_json_num_or_nan(json_object_get(tr, AH_PROTO_RECOVER_TIER_SECONDS), name);
            r->bytes[t] = isfinite(b) ? (uint64_t)b : 0;
            r->files[t] = isfinite(n) ? (int)n : 0;
            r->tier_s[t] = isfinite(s) ? s : 0;
        }
    }
    /* start-up: everything between the old job's exit and the new one's first step that is not
     * planning, transfer or the step itself (dropping disks, mpirun, MPI start, loading) */
    r->startup_s = r->total_s - r->stop_s - r->replan_s - r->transfer_s - r->first_step_s;
    if (r->startup_s < 0) r->startup_s = 0;
    if (r->in_place) { /* start-up: the change after its save (teardown, split, set-up); stop: the rest, which
                        * also holds how late the agent read the lines (a launcher may read them late) */
        double change = 0;
        for (int k = 1; k < 4; k++) change += isfinite(r->phases[k]) ? r->phases[k] : 0;
        r->stop_s = r->total_s - r->replan_s - r->transfer_s - r->first_step_s - change;
        if (r->stop_s < 0) change += r->stop_s, r->stop_s = 0;
        r->startup_s = change > 0 ? change : 0;
    }
}

static json_t *tier_obj(const uint64_t *u, const double *d, const int *n) {
    json_t *o = json_object();
    for (int t = 0; t < AH_TIER_COUNT; t++) {
        const char *name = ah_ckpt_tier_name((ah_ckpt_tier_t)t);
        json_object_set_new(o, name, u ? json_integer((json_int_t)u[t]) : d ? json_real(d[t]) : json_integer(n[t]));
    }
    return o;
}

/* list ("a b": r->nodes, the nodes that left, or joined; or r->joined) as a list, ["a", "b"], the preempt event's form. */
static json_t *recovery_nodes(const char *list) {
    json_t *arr = json_array();
    char names[256], *save = NULL; /* r->nodes' size, and r->joined's */
    snprintf(names, sizeof names, "%s", list);
    for (char *n = strtok_r(names, " ", &save); n; n = strtok_r(NULL, " ", &save))
        json_array_append_new(arr, json_string(n));
    return arr;
}

json_t *ah_recovery_event(const ah_agent_recovery_t *r) {
    json_t *bd = json_pack("{s:f, s:f, s:f, s:f, s:f}", "stop_s", r->stop_s, "replan_s", r->replan_s, "startup_s",
                           r->startup_s, "transfer_s", r->transfer_s, "first_step_s", r->first_step_s);
    json_t *ev = json_pack("{s:s, s:I, s:f, s:s, s:o, s:I, s:o, s:o, s:o, s:o}", "event", "recover", "step",
                           (json_int_t)r->resumed_at, "seconds", r->total_s, "cause", ah_agent_cause_name(r->cause),
                           "nodes", recovery_nodes(r->nodes), "stopped_at", (json_int_t)r->stopped_at, "breakdown", bd, "bytes",
                           tier_obj(r->bytes, NULL, NULL), "files", tier_obj(NULL, NULL, r->files), "tier_seconds",
                           tier_obj(NULL, r->tier_s, NULL));
    json_object_set_new(ev, "loss_before", isfinite(r->loss_last_before) ? json_real(r->loss_last_before) : json_null());
    json_object_set_new(ev, "loss_after", json_real(r->loss_first_after));
    json_object_set_new(ev, "in_place", json_boolean(r->in_place));
    if (r->redone) json_object_set_new(ev, "redone", json_integer(r->redone)); /* in place: C restored, steps again */
    if (r->joined[0]) json_object_set_new(ev, "joined", recovery_nodes(r->joined)); /* a notice's change's free hosts */
    if (r->in_place) /* the trainer's phases of the change (its "reconfigure" event) */
        json_object_set_new(ev, "phases", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "save", r->phases[0], "teardown",
                                                    r->phases[1], "split", r->phases[2], "init", r->phases[3], "load",
                                                    r->phases[4], "move", r->phases[5]));
    return ev;
}

bool ah_agent_change_saved(const json_t *ev, bool *behind) {
    const char *save = json_string_value(json_object_get(ev, "save"));
    const json_t *committed = json_object_get(ev, "committed");
    *behind = save && strcmp(save, "async") == 0;
    return committed ? json_is_true(committed) : !*behind;
}

int64_t ah_agent_change_redone(const json_t *ev) {
    const char *save = json_string_value(json_object_get(ev, "save"));
    const json_int_t n = json_integer_value(json_object_get(ev, "redone"));
    return save && strcmp(save, "none") == 0 && n > 0 ? (int64_t)n : 0;
}

/* ---- while the job runs ---- */

ah_event_action_t ah_agent_event_action(bool add, bool node_up, bool job_running, bool stopping,
                                        bool plan_uses_node) {
    if (add) {
        if (node_up) return AH_EVENT_NOTHING;
        return job_running && !stopping ? AH_EVENT_JOIN_AT_CHECKPOINT : AH_EVENT_JOIN;
    }
    if (!node_up) return AH_EVENT_NOTHING;
    return job_running && plan_uses_node ? AH_EVENT_PREEMPT : AH_EVENT_LEFT_UNUSED;
}

ah_stop_action_t ah_agent_stop_action(double since_notice_s, double grace_s, bool forced) {
    const double late = since_notice_s - grace_s;
    if (late > 0 && !forced) return AH_STOP_FORCE;
    if (late > AH_AGENT_KILL_MARGIN_S) return AH_STOP_KILL_JOB;
    return AH_STOP_WAIT;
}

bool ah_agent_replan_in_stop(ah_agent_cause_t cause, bool next_uses_noticed) {
    return cause == AH_CAUSE_JOIN && next_uses_noticed;
}

const char *ah_agent_plan_leaves_out(const ah_plan_t *from, const ah_plan_t *to) {
    for (int i = 0; i < from->n_pipelines; i++)
        for (int s = 0; s < from->pipelines[i].n_stages; s++)
            for (int k = 0; k < ah_stage_devices(&from->pipelines[i], from->tp); k++) {
                const char *node = from->cluster.nodes[from->pipelines[i].stages[s].devices[k].node].name;
                if (!ah_agent_plan_uses(to, node)) return node;
            }
    return NULL;
}

bool ah_agent_next_plan_holds(const ah_plan_t *next, const ah_cluster_t *c, const bool *up) {
    for (int i = 0; i < c->n_nodes; i++)
        if (!up[i] && ah_agent_plan_uses(next, c->nodes[i].name)) return false;
    return true;
}

bool ah_agent_plan_uses(const ah_plan_t *p, const char *node) {
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++)
            for (int k = 0; k < ah_stage_devices(&p->pipelines[i], p->tp); k++)
                if (strcmp(p->cluster.nodes[p->pipelines[i].stages[s].devices[k].node].name, node) == 0) return true;
    return false;
}

/* ---- the trainer's command line ---- */

ah_status_t ah_agent_train_argv(const ah_agent_opts_t *o, const char *plan_path, const char *local_root,
                                const char *run_dir, ah_train_argv_t *out, ah_error_t *err) {
    snprintf(out->steps, sizeof out->steps, "%lld", (long long)o->steps);
    snprintf(out->every, sizeof out->every, "%lld", (long long)o->ckpt_every);
    snprintf(out->grace, sizeof out->grace, "%g", o->grace_s);
    snprintf(out->metrics, sizeof out->metrics, "%s/" AH_PROTO_METRICS_FILE, run_dir);
    const char *fixed[] = {o->autohet, "train", "--plan", plan_path, "--data", o->data, "--steps", out->steps,
                           "--resume", "--local-root", local_root, "--run-dir", run_dir, "--metrics", out->metrics,
                           "--ckpt-every", out->every, "--grace-s", out->grace};
    int n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) out->argv[n++] = (char *)fixed[i];
    if (o->quiet) out->argv[n++] = "--quiet";
    if (o->cloud_only) out->argv[n++] = "--cloud-only";
    for (int i = 0; i < o->n_train_args; i++) {
        if (n >= AH_AGENT_MAX_TRAIN_ARGV - 1) return ah_error_set(err, AH_ERR_USAGE, "too many trainer flags");
        out->argv[n++] = (char *)o->train_args[i];
    }
    out->argv[n] = NULL;
    return AH_OK;
}

/* ---- the hang watchdog ---- */

void ah_watchdog_reset(ah_watchdog_t *w, double predicted_s, double floor_s) {
    *w = (ah_watchdog_t){.floor_s = floor_s, .predicted_s = predicted_s, .last_t = -1, .max_gap_s = 0};
}

void ah_watchdog_line(ah_watchdog_t *w, double now) {
    if (w->last_t >= 0 && now - w->last_t > w->max_gap_s) w->max_gap_s = now - w->last_t;
    w->last_t = now;
}

double ah_watchdog_timeout(const ah_watchdog_t *w) {
    const double seen = fmax(w->predicted_s, w->max_gap_s);
    return fmax(w->floor_s, AH_WATCHDOG_FACTOR * seen);
}

bool ah_watchdog_expired(const ah_watchdog_t *w, double now) {
    return w->last_t >= 0 && now - w->last_t > ah_watchdog_timeout(w);
}

/* ---- asking again a host that stopped answering ---- */

double ah_reask_failed(ah_reask_t *r, double now) {
    r->failed++;
    double wait = AH_REASK_FIRST_S;
    for (int k = 1; k < r->failed && wait < AH_REASK_MAX_S; k++) wait *= 2;
    wait = fmin(wait, AH_REASK_MAX_S);
    r->due_t = now + wait;
    return wait;
}

bool ah_reask_due(const ah_reask_t *r, double now) { return now >= r->due_t; }

/* ---- words ---- */

const char *ah_agent_cause_name(ah_agent_cause_t c) {
    switch (c) {
    case AH_CAUSE_EVENT: return "events file";
    case AH_CAUSE_SIGNAL: return "SIGTERM";
    case AH_CAUSE_LOST: return "host lost";
    case AH_CAUSE_AGENT: return "agent killed";
    case AH_CAUSE_RESTART: return "job failed";
    default: return "node joined";
    }
}

void ah_agent_plan_desc(const ah_plan_t *p, char *out, size_t cap) {
    ah_str_t s = ah_str_fixed(out, cap);
    ah_str_appendf(&s, "tp %d, micro-batch %lld:", p->tp, (long long)p->train.micro_batch);
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        ah_str_appendf(&s, " [");
        for (int k = 0; k < pl->n_stages; k++) {
            const ah_stage_t *st = &pl->stages[k];
            ah_str_appendf(&s, "%s%s:%d L%d-%d", k ? " > " : "", p->cluster.nodes[st->devices[0].node].name,
                           st->devices[0].index, st->first, st->last);
        }
        ah_str_appendf(&s, "] x%lld", (long long)pl->micro_batches);
    }
    if (s.failed && cap >= 4) snprintf(out + cap - 4, 4, "...");
}

/* ---- the failure policy ---- */

ah_restart_verdict_t ah_restart_decide(ah_restarts_t *r, double now_s, const char *cause, int64_t step,
                                       double *backoff_s) {
    *backoff_s = 0;
    if (r->total > 0 && r->last_step == step && strcmp(r->last_cause, cause) == 0) return AH_RESTART_SAME;
    int keep = 0; /* the restarts still inside the window */
    for (int i = 0; i < r->n; i++)
        if (r->t[i] > now_s - r->window_s) r->t[keep++] = r->t[i];
    r->n = keep;
    if (r->n >= r->max || r->n >= AH_AGENT_MAX_RESTARTS) return AH_RESTART_SPENT;
    *backoff_s = fmin(ldexp(1.0, r->n), AH_AGENT_RESTART_BACKOFF_MAX_S);
    r->t[r->n++] = now_s;
    r->total++;
    snprintf(r->last_cause, sizeof r->last_cause, "%s", cause);
    r->last_step = step;
    return AH_RESTART_GO;
}
