/* An earlier autohet run in the same work directory (agent_state.h): this run's launches numbered on
 * from its last one (WORK/launch-N/ and plan-N.json are never reused, so nothing it wrote is
 * overwritten), and when its agent was killed (its metrics end without a "done" event), the rest of
 * its last launch taken over: the trainer went on to its notice's save after the agent died, and
 * those lines are merged, then a stop is accounted. Part of the elastic agent. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/vec.h"
#include "elastic/agent_state.h"
#include "plan/plan.h"
#include "runtime/protocol.h"

#define MAX_LAUNCH 1000000

/* The number after the highest launch-N/ or plan-N.json in work (0: none). */
static int next_launch(const char *work) {
    DIR *d = opendir(work);
    if (!d) return 0;
    int next = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int n = -1, len = 0;
        if (!(sscanf(e->d_name, "launch-%d%n", &n, &len) == 1 && e->d_name[len] == 0) &&
            !(sscanf(e->d_name, "plan-%d.json%n", &n, &len) == 1 && len > 0 && e->d_name[len] == 0))
            continue;
        if (n >= 0 && n < MAX_LAUNCH && n + 1 > next) next = n + 1;
    }
    closedir(d);
    return next;
}

/* What the merged metrics hold of the earlier run's last launch, and what is merged now. */
typedef struct {
    agent_t *a;
    int launch;
    int64_t last_step;  /* its last step line in the merged metrics (-1: none) */
    json_t *events;     /* its events there, keys "EVENT/STEP" */
    bool ended;         /* the file ends with a done event, or there is none: nothing to take over */
    int merged, steps;  /* lines merged now, step lines among them */
} merged_t;

static void event_key(const json_t *line, const char *ev, char *key, size_t cap) {
    snprintf(key, cap, "%s/%lld", ev, (long long)json_integer_value(json_object_get(line, AH_PROTO_STEP)));
}

static void read_merged(const char *path, merged_t *m) {
    m->last_step = -1;
    m->ended = true;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0) {
        json_t *d = json_loads(line, 0, NULL);
        if (!json_is_object(d)) {
            json_decref(d);
            continue;
        }
        const char *ev = json_string_value(json_object_get(d, AH_PROTO_EVENT));
        m->ended = ev && strcmp(ev, "done") == 0;
        const json_t *k = json_object_get(d, "launch");
        if (json_is_integer(k) && json_integer_value(k) == m->launch) {
            char key[96];
            const int64_t step = json_integer_value(json_object_get(d, AH_PROTO_STEP));
            if (!ev && step > m->last_step) m->last_step = step;
            if (ev) event_key(d, ev, key, sizeof key);
            if (ev) json_object_set_new(m->events, key, json_true());
        }
        json_decref(d);
    }
    free(line);
    fclose(f);
}

/* One line of the taken-over launch's trainer metrics: merged unless the merged metrics have it. */
static void take_line(void *ctx, json_t *line) {
    merged_t *m = ctx;
    agent_t *a = m->a;
    const char *ev = json_string_value(json_object_get(line, AH_PROTO_EVENT));
    if (!ev) {
        if (!json_is_integer(json_object_get(line, AH_PROTO_STEP))) return;
        const int64_t step = json_integer_value(json_object_get(line, AH_PROTO_STEP));
        if (step <= m->last_step) return;
        /* into this run's history, as its launch 0: the rerun's first launch resumes within it */
        if (a->hist.len == 0) ah_history_resume(&a->hist, 0, step);
        ah_history_add(&a->hist, 0, step, ah_json_num_or_nan(line, AH_PROTO_STEP_TOKENS),
                       ah_json_num_or_nan(line, AH_PROTO_STEP_LOSS));
        m->last_step = step;
        m->steps++;
    } else {
        if (strcmp(ev, AH_PROTO_EV_PREEMPT) == 0) return; /* the preempt event below says it */
        const bool restore = strcmp(ev, AH_PROTO_EV_RECOVER) == 0;
        char key[96];
        event_key(line, restore ? "restore" : ev, key, sizeof key);
        if (json_object_get(m->events, key)) return;
        if (restore) json_object_set_new(line, AH_PROTO_EVENT, json_string("restore"));
        if (strcmp(ev, AH_PROTO_EV_CHECKPOINT) == 0 && json_is_true(json_object_get(line, "ok")))
            a->res->newest_ckpt = json_integer_value(json_object_get(line, AH_PROTO_STEP));
    }
    json_object_set_new(line, "launch", json_integer(m->launch));
    emit(a, json_incref(line));
    m->merged++;
}

/* The stop the earlier agent's death made: a recovery opened, its preempt event. */
static ah_status_t account(agent_t *a, const merged_t *m, double waited, ah_error_t *err) {
    ah_exit_facts_t f = {.status = -1, .preempted_step = -1, .trained = m->last_step + 1, .steps = a->o->steps};
    bool *named = calloc((size_t)a->cluster.n_nodes + 1, sizeof *named);
    if (!named || !ah_grow(&a->res->recoveries, &a->cap_recoveries, a->res->n_recoveries + 1,
                           sizeof *a->res->recoveries)) {
        free(named);
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory");
    }
    ah_agent_read_preempted(a, &f, named);
    free(named);
    if (!f.preempted && m->merged == 0) { /* it died between launches: its stop, if any, is in the metrics */
        say(a, "launch %d (the earlier run's): nothing its agent had not merged, no notice reached it", m->launch);
        return AH_OK;
    }
    a->pending = a->res->n_recoveries++;
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    ah_recovery_open(r, AH_CAUSE_AGENT, &f, 0, waited, false);
    emit(a, json_pack("{s:s, s:I, s:f, s:s, s:[], s:b, s:b, s:i, s:i}", "event", "preempt", "step",
                      (json_int_t)r->stopped_at, "seconds", waited, "cause", ah_agent_cause_name(r->cause), "nodes",
                      "saved", r->saved, "forced", false, "launch", m->launch, "merged_lines", m->merged));
    say(a, "launch %d (the earlier run's): %d line%s its agent had not merged now merged (%d step line%s); it "
        "stopped at step %lld, %s", m->launch, m->merged, m->merged == 1 ? "" : "s", m->steps, m->steps == 1 ? "" : "s",
        (long long)r->stopped_at, r->saved ? "its state saved at the notice the agent's death sent"
                                            : f.preempted ? "not saved at the notice" : "no notice reached it");
    return AH_OK;
}

ah_status_t ah_agent_take_over(agent_t *a, ah_error_t *err) {
    const int next = next_launch(a->work);
    a->res->launch_base = next;
    if (next == 0 || !a->launcher.adopt) return AH_OK;
    merged_t m = {.a = a, .launch = next - 1, .events = json_object()};
    read_merged(a->res->metrics_path, &m);
    if (m.ended) {
        json_decref(m.events);
        return AH_OK;
    }
    char plan_path[600], run_dir[600];
    snprintf(plan_path, sizeof plan_path, "%s/plan-%d.json", a->work, m.launch);
    snprintf(run_dir, sizeof run_dir, "%s/launch-%d", a->work, m.launch);
    ah_plan_t plan;
    ah_error_t e;
    if (ah_plan_load(plan_path, NULL, &plan, &e) != AH_OK) {
        say(a, "warning: the earlier autohet run in %s ended without its summary (its agent killed?), and its launch "
            "%d cannot be taken over: %s; its last lines are not merged", a->work, m.launch, e.msg);
        json_decref(m.events);
        return AH_OK;
    }
    say(a, "the earlier autohet run in %s ended without its summary (its agent was killed): taking over its launch %d "
        "(%s)", a->work, m.launch, run_dir);
    const ah_launch_job_t job = {.plan = &plan, .plan_path = plan_path, .run_dir = run_dir};
    double waited = 0;
    ah_status_t s = a->launcher.adopt(a->launcher.ctx, &job, a->o->grace_s + AH_AGENT_KILL_MARGIN_S, &waited, err);
    ah_plan_free(&plan);
    if (s == AH_OK) {
        if (waited > 0.5) say(a, "waited %.1f s for launch %d's ranks to end", waited, m.launch);
        a->launcher.read_metrics(a->launcher.ctx, take_line, &m);
        s = account(a, &m, waited, err);
    }
    json_decref(m.events);
    return s;
}

void ah_agent_on_restore(agent_t *a, json_t *line, int launch) {
    json_decref(a->trainer_recover);
    a->trainer_recover = json_incref(line);
    json_t *copy = json_deep_copy(line);
    json_object_set_new(copy, AH_PROTO_EVENT, json_string("restore"));
    json_object_set_new(copy, "launch", json_integer(launch));
    emit(a, copy);
    const json_t *fixed = json_object_get(line, AH_PROTO_RECOVER_REPAIRED);
    for (size_t i = 0; i < json_array_size(fixed); i++)
        say(a, "launch %d: the restore of step %lld replaced a copy: %s", launch,
            (long long)json_integer_value(json_object_get(line, AH_PROTO_STEP)),
            json_string_value(json_array_get(fixed, i)));
}
