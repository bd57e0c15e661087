/* The join in place (issue 36 "Survivors keep their processes"; docs/elastic.md "The join in place, the agent's
 * part"). With --in-place the agent launches one mpirun a host, joined into one world (launcher.h joined). When
 * hosts join and the join rule says to re-plan onto them (agent_join.c: the plan with them, the next plan, is
 * better, pays and uses every node of the running one), the agent asks the trainers to take the new hosts in
 * place instead of stopping them, when it can: the next plan puts a rank on every device a running rank holds
 * and its other ranks on the joining hosts only (a running host's job cannot gain ranks), and its step is not
 * the run's last. Then: one mpirun each joining host started into the running job (the launcher's join_hosts,
 * through the job's ompi-server: it waits for its turn), and the request (RUN_DIR's reconfigure.json,
 * runtime/reconfig.h) {"step": S, "leave": [], "join": K, "join_first": F, "join_admit_s": A, "plan":
 * "RUN_DIR/next-plan.json", "ranks": [...]}: S the step after the newest the metrics show, K the joining hosts, F
 * the first's job number (every job this agent started in the launch counted, a withdrawn or failed join's too, as
 * the launcher numbers them: the trainers' turns start there), A the admission's wait this
 * agent's deadline counts (comm.h ah_comm_join_admit_s: the trainers wait by it, not by their hosts' environment),
 * "ranks" each running rank's rank under the next plan by device. The trainers save step S, admit the new jobs
 * (comm/join.c: each answers its turn before the world accepts it) and go on under the next plan, the running
 * ranks in the same processes, the new ones given step S by the running ranks (moved rank to rank, or at the
 * move's fallback restored from the tiers); the "reconfigure" event says so. The agent then makes the next plan the
 * running one, counts the new jobs as the launch's, records a preempt event (cause join, "in_place": true,
 * "joined": the hosts) and a recovery in place that the next step line closes (agent_inplace.c's), and goes on
 * watching the same job.
 * Anything else is today's join: the stop of every rank and the relaunch under the next plan, said in one line
 * with why: not a joined launch or a launcher without join_hosts (said once); a device of the next plan on a
 * running host that no running rank holds, or a running rank's device it leaves unused; the run ending first;
 * join_hosts or the request failing; the change not made within two steps (the running launch's measured mean, or
 * the plan's prediction when more) + the save estimate + AH_JOIN_ADMIT_S (the running world's wait for a joining
 * job, default 60 s) + 10 s (refused by the trainer, its warning on stderr; a
 * joining job that never answered: the trainers give up after AH_JOIN_ADMIT_S and end, step S saved); a notice
 * first; the job ending first. The fallback withdraws the request (the same at a step no run reaches) and
 * kills the joining jobs (leave_hosts) before the stop. At a notice (agent_inplace.c), a next plan with ranks on free
 * hosts (up, running no job of the launch) changes in place when their admission fits the notice's deadline: their
 * jobs started as here, the notice's request carrying "join" and "join_admit_s" besides its "leave" (the end of this
 * file; docs/elastic.md "A notice's change onto a free host"). Part of the elastic agent (agent_state.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/str.h"
#include "core/timing.h"
#include "core/vec.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "runtime/protocol.h"

#define JOIN_MARGIN_S 10.0
#define NOTICE_ADMIT_MIN_S 1.0 /* the least admission wait a notice's change asks */
#define JOIN_STEPS 2 /* the steps before the trainers reach the join's: the one under way and step S */

/* A step's seconds: the running launch's measured mean, or the plan's prediction when that is more. */
static double step_estimate(const agent_t *a, const ah_agent_launch_t *L) {
    const int64_t n = L->first_step >= 0 ? L->end_step - L->first_step : 0;
    const double measured = n > 0 ? L->step_s_sum / (double)n : 0, predicted = a->cur.eval.pred.iteration_s;
    return isfinite(predicted) && predicted > measured ? predicted : measured;
}

/* The devices of next that no running rank (taken[q] set: rank q's device is held; NULL: every device on a host the
 * running plan uses is held or the caller's to refuse) nor parked rank holds: each on a host the running plan does
 * not use counted (*n_dev), its host into hosts (borrowed from next; in the order of its first rank); false with why
 * at one on a running host when taken is given (its job cannot gain ranks). */
static bool free_hosts(const agent_t *a, const ah_plan_t *next, const char *taken, const char **hosts, int *n_hosts,
                       int *n_dev, char *why, size_t cap) {
    *n_hosts = *n_dev = 0;
    for (int q = 0; q < ah_plan_device_count(next); q++) {
        const ah_device_ref_t *e = ah_plan_rank_device(next, q);
        const char *node = e ? next->cluster.nodes[e->node].name : "?";
        if ((taken && taken[q]) || (e && ah_agent_parked_on(a, node, e->index) >= 0)) continue; /* a parked rank back */
        if (ah_agent_plan_uses(&a->cur.plan, node)) {
            if (!taken) continue;
            snprintf(why, cap, "the plan with the joined nodes adds device %s:%d to a running host (its job cannot gain "
                     "ranks)", node, e ? e->index : -1);
            return false;
        }
        int h = 0;
        while (h < *n_hosts && strcmp(hosts[h], node) != 0) h++;
        if (h == *n_hosts) hosts[(*n_hosts)++] = node;
        (*n_dev)++;
    }
    return true;
}

/* The running plan's rank r's device: ranks[r], its rank under the next plan on the same device (node name
 * and index); the next plan's other ranks must be on hosts the running plan does not use, each such host into
 * hosts (its name, borrowed from the next plan; in the order of its first rank). False with why when not. */
static bool map_join(const agent_t *a, int *ranks, const char **hosts, int *n_hosts, bool *ordered, char *why,
                     size_t cap) {
    const ah_plan_t *cur = &a->cur.plan, *next = &a->next.plan;
    const int w = ah_plan_device_count(cur), n = ah_plan_device_count(next);
    char *taken = calloc((size_t)n + 1, 1);
    bool ok = taken != NULL;
    if (!ok) snprintf(why, cap, "out of host memory");
    *n_hosts = 0;
    *ordered = true;
    for (int r = 0; ok && r < w; r++) {
        const ah_device_ref_t *d = ah_plan_rank_device(cur, r);
        const char *node = d ? cur->cluster.nodes[d->node].name : "?";
        ranks[r] = -1;
        for (int q = 0; d && q < n && ranks[r] < 0; q++) {
            const ah_device_ref_t *e = ah_plan_rank_device(next, q);
            if (e && e->index == d->index && strcmp(next->cluster.nodes[e->node].name, node) == 0) ranks[r] = q;
        }
        if (ranks[r] < 0)
            snprintf(why, cap, "the plan with the joined nodes leaves rank %d's device %s:%d unused", r, node,
                     d ? d->index : -1);
        else taken[ranks[r]] = 1, *ordered = *ordered && ranks[r] == r;
        ok = ranks[r] >= 0;
    }
    int n_dev;
    ok = ok && free_hosts(a, next, taken, hosts, n_hosts, &n_dev, why, cap);
    free(taken);
    return ok;
}

/* The request a->join_doc (the step S, the joining jobs, the plan on the hosts, each running rank's new rank)
 * written to WORK/reconfigure-N.json and put on every host of the job. */
static bool put_request(agent_t *a, const char *plan_path, const int *ranks, char *why, size_t cap) {
    json_t *rk = json_array();
    for (int r = 0; r < ah_plan_device_count(&a->cur.plan); r++) json_array_append_new(rk, json_integer(ranks[r]));
    json_decref(a->join_doc);
    a->join_doc = json_pack("{s:I, s:[], s:i, s:i, s:f, s:s, s:o}", "step", (json_int_t)a->join_step, "leave",
                            "join", a->join_n, "join_first", a->join_first, "join_admit_s", ah_comm_join_admit_s(),
                            "plan", plan_path, "ranks", rk);
    int back = 0;
    json_t *readmit = ah_agent_readmit(a, &a->next.plan, ranks, &back); /* agent_parked.c */
    if (a->join_doc && back) json_object_set(a->join_doc, "readmit", readmit);
    json_decref(readmit);
    char path[700];
    snprintf(path, sizeof path, "%s/reconfigure-%d.json", a->work, launch_no(a));
    ah_error_t e;
    if (!a->join_doc || json_dump_file(a->join_doc, path, JSON_COMPACT) != 0) {
        snprintf(why, cap, "%s: cannot write the request", path);
        return false;
    }
    if (a->launcher.put_run_file(a->launcher.ctx, AH_PROTO_RECONFIG_FILE, path, &e) == AH_OK) return true;
    snprintf(why, cap, "the request cannot be written to the hosts (%s)", e.msg);
    return false;
}

/* The joining hosts' jobs (join_first.., join_n) ended and forgotten (launcher.h leave_hosts, no wait). */
static void drop_joiners(agent_t *a) {
    const char *hosts[256];
    int n = 0;
    for (int j = a->join_first; j < a->join_first + a->join_n && j < a->n_jobs && n < 256; j++) {
        hosts[n++] = a->jobs[j].host;
        a->job_left[j] = 2;
    }
    if (n) a->launcher.leave_hosts(a->launcher.ctx, hosts, n, 0);
}

/* The joining hosts as jobs of the launch, numbered on from its last (as the launcher numbers them). */
static bool add_jobs(agent_t *a, const char *const *hosts, int n) {
    ah_launch_hostjob_t *jobs = realloc(a->jobs, (size_t)(a->n_jobs + n) * sizeof *jobs);
    if (jobs) a->jobs = jobs;
    char *left = jobs ? realloc(a->job_left, (size_t)(a->n_jobs + n)) : NULL;
    if (left) a->job_left = left;
    if (!jobs || !left) return false;
    for (int h = 0; h < n; h++) {
        memset(&jobs[a->n_jobs + h], 0, sizeof *jobs);
        snprintf(jobs[a->n_jobs + h].host, sizeof jobs->host, "%s", hosts[h]);
        left[a->n_jobs + h] = 0;
    }
    a->join_first = a->n_jobs;
    a->join_n = n;
    a->n_jobs += n;
    return true;
}

/* join_hosts for the joining hosts, the next plan on them (RUN_DIR/next-plan.json, also here for the launcher
 * to copy; its path into plan_path), told to wait wait_s for their turn (the agent's own wait for the join); why
 * set when it fails (none started). */
static bool start_joiners(agent_t *a, const char *const *hosts, int n, double wait_s, char *plan_path, char *why,
                          size_t cap) {
    char run_dir[600];
    snprintf(run_dir, sizeof run_dir, "%s/launch-%d", a->work, launch_no(a));
    snprintf(plan_path, 700, "%s/" AH_PROTO_NEXT_PLAN_FILE, run_dir);
    ah_train_argv_t train;
    ah_error_t e;
    ah_status_t s = ah_fs_mkdirs(run_dir, &e); /* the plan written again: one a failed handover left is stale */
    if (s == AH_OK) s = ah_plan_save(&a->next.plan, plan_path, &e);
    if (s == AH_OK) s = ah_agent_train_argv(a->o, plan_path, a->local_root, run_dir, &train, &e);
    ah_launch_job_t job = {.plan = &a->next.plan, .plan_path = plan_path, .run_dir = run_dir,
                           .train_argv = train.argv, .joined = true, .join_wait_s = wait_s};
    if (s == AH_OK && !add_jobs(a, hosts, n)) s = ah_error_set(&e, AH_ERR_INTERNAL, "out of host memory");
    else if (s == AH_OK && (job.join_first = a->join_first,
                            s = a->launcher.join_hosts(a->launcher.ctx, &job, hosts, n, &e)) != AH_OK)
        for (int j = a->join_first; j < a->n_jobs; j++) a->job_left[j] = 2; /* none left running; the numbers
                                                                                 stay taken (launcher.h join_first) */
    if (s != AH_OK) {
        snprintf(why, cap, "the joining host%s not started (%s)", n == 1 ? "" : "s", e.msg);
        return false;
    }
    return true;
}

/* The joining jobs started (start_joiners), then the request; why set when either fails (the jobs dropped). */
static bool ask(agent_t *a, const int *ranks, const char *const *hosts, int n, double wait_s, char *why, size_t cap) {
    char plan_path[700];
    if (!start_joiners(a, hosts, n, wait_s, plan_path, why, cap)) return false;
    if (put_request(a, plan_path, ranks, why, cap)) return true;
    drop_joiners(a);
    return false;
}

bool ah_agent_inplace_join_begin(agent_t *a) {
    if (!a->joined || !a->running || a->stopping || !a->have_next) return false;
    if (!a->launcher.join_hosts) {
        static bool said;
        if (!said) say(a, "note: --in-place: the %s launcher cannot start a host's job into the running one: a join "
                       "stops and relaunches", a->launcher.name);
        said = true;
        return false;
    }
    if (a->inplace != 0) { /* a change in place under way: decided again at its first step */
        say(a, "in place: the join waits for the change in place under way");
        ah_agent_next_plan_free(a);
        a->join_pending = true;
        return true;
    }
    const ah_agent_launch_t *L = &a->res->launches[a->res->n_launches - 1];
    const int w = ah_plan_device_count(&a->cur.plan), n = ah_plan_device_count(&a->next.plan);
    int *ranks = calloc((size_t)w + 1, sizeof *ranks), n_hosts = 0;
    const char **hosts = calloc((size_t)n + 1, sizeof *hosts);
    char why[400] = "out of host memory";
    bool ordered = true, ok = ranks && hosts;
    a->join_step = L->end_step;
    if (ok && a->join_step + 1 >= a->o->steps)
        snprintf(why, sizeof why, "the run ends first (step %lld of %lld)", (long long)a->join_step,
                 (long long)a->o->steps), ok = false;
    const double step_s = step_estimate(a, L); /* the wait: the joining jobs' too (AH_JOIN_WAIT_S, comm/join.c) */
    const double save_s = ah_agent_change_save_s(a, true); /* 0: the join's step written behind */
    const double wait_s = JOIN_STEPS * step_s + save_s + ah_comm_join_admit_s() + JOIN_MARGIN_S;
    ok = ok && map_join(a, ranks, hosts, &n_hosts, &ordered, why, sizeof why) &&
         ask(a, ranks, hosts, n_hosts, wait_s, why, sizeof why);
    if (ok) {
        ah_str_t names = ah_str_fixed((char[256]){0}, 256);
        for (int h = 0; h < n_hosts; h++) ah_str_appendf(&names, "%s%s", h ? " " : "", hosts[h]);
        a->join_t = ah_now_s(); /* the recovery's start if it falls back; the stop's grace period runs from its own notice */
        a->join_deadline = a->join_t + wait_s;
        say(a, "in place: the join asked for at step %lld (%d new job%s from job %d, on %s; %d ranks go on as %d under "
            "the next plan%s); waiting for it until %.1f s (%d steps of %.3f s to it, the save %.2f s, the admission "
            "%.0f s, %.0f s more)", (long long)a->join_step, n_hosts, n_hosts == 1 ? "" : "s", a->join_first, names.buf,
            w, n, ordered ? "" : ", renumbered", a->join_deadline - a->t0, JOIN_STEPS, step_s, save_s,
            ah_comm_join_admit_s(), JOIN_MARGIN_S);
        a->join_req = 1;
        a->cause = AH_CAUSE_JOIN;
    } else {
        say(a, "in place: not at this join (%s): the join's stop and relaunch", why);
    }
    free(ranks);
    free(hosts);
    return ok;
}

bool ah_agent_inplace_join_withdraw(agent_t *a, const char *why, const char *then) {
    if (a->join_req != 1) return false;
    a->join_req = 0;
    say(a, "in place: the join at step %lld not made (%s): %s", (long long)a->join_step, why, then);
    char path[700];
    snprintf(path, sizeof path, "%s/reconfigure-%d.withdrawn.json", a->work, launch_no(a));
    ah_error_t e = {.msg = "cannot write it"};
    if (json_object_set_new(a->join_doc, "step", json_integer(INT64_MAX)) != 0 ||
        json_dump_file(a->join_doc, path, JSON_COMPACT) != 0 ||
        a->launcher.put_run_file(a->launcher.ctx, AH_PROTO_RECONFIG_FILE, path, &e) != AH_OK)
        say(a, "warning: in place: the join's request on the hosts not withdrawn (%s): the stop ends it", e.msg);
    drop_joiners(a);
    return true;
}

void ah_agent_inplace_join_fallback(agent_t *a, const char *why) {
    if (!ah_agent_inplace_join_withdraw(a, why, "the join's stop and relaunch") || a->stopping)
        return; /* the user's interrupt: its stop goes on */
    ah_agent_begin_stop(a, AH_CAUSE_JOIN, NULL); /* its grace period from now, as any stop's */
    a->recovery_t = a->join_t;                   /* the recovery recorded from the join's decision */
}

void ah_agent_inplace_join_watch(agent_t *a) {
    if (a->join_req != 1) return;
    if (a->stopping) ah_agent_inplace_join_fallback(a, "the job is stopping");
    else if (ah_now_s() > a->join_deadline) {
        char why[200];
        snprintf(why, sizeof why, "not taken within %.0f s: refused by the trainer (its warning says why), or a joining "
                 "job did not answer its turn", a->join_deadline - a->join_t);
        ah_agent_inplace_join_fallback(a, why);
    }
}

/* The change done (ev, the trainer's "reconfigure" with "join"): the next plan the running one, the recovery
 * opened in place (closed at the next step line, agent_inplace.c) and the preempt event. */
static void joined(agent_t *a, const json_t *ev) {
    const double seen_t = ah_now_s();
    const int64_t step = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    a->join_req = 0;
    a->inplace_after = step;
    a->ckpt_under_plan = false; /* the join's save (before the move) and the steps before it: the old plan's layout */
    ah_plan_result_free(&a->cur);
    a->cur = a->next;
    a->have_next = false; /* moved */
    ah_agent_next_plan_free(a);
    ah_agent_procs_changed(a, ev); /* a parked rank re-admitted with the join (agent_parked.c) */
    ah_agent_launch_t *L = &a->res->launches[a->res->n_launches - 1];
    L->devices = ah_plan_device_count(&a->cur.plan);
    L->predicted_s = a->cur.eval.pred.iteration_s;
    ah_agent_plan_desc(&a->cur.plan, L->plan_desc, sizeof L->plan_desc);
    char *pids = json_dumps(json_object_get(ev, "pids"), JSON_COMPACT);
    say(a, "in place: joined at step %lld: %d job%s joined, %d ranks under the next plan, the running ones in the "
        "same processes (pids %s)", (long long)step, a->join_n, a->join_n == 1 ? "" : "s", L->devices, pids ? pids : "?");
    free(pids);
    ah_watchdog_line(&a->dog, seen_t);
    if (!ah_grow(&a->res->recoveries, &a->cap_recoveries, a->res->n_recoveries + 1, sizeof *a->res->recoveries)) {
        say(a, "warning: out of host memory: the join in place is not recorded as a recovery");
        return;
    }
    a->pending = a->res->n_recoveries++;
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    bool behind; /* a join's step is saved before the move: committed unless that save failed */
    const ah_exit_facts_t f = {.preempted = true, .preempted_step = step, .saved = ah_agent_change_saved(ev, &behind),
                               .trained = a->hist.len};
    ah_recovery_open(r, AH_CAUSE_JOIN, &f, a->join_t - a->t0, seen_t - a->join_t, false);
    r->in_place = true;
    r->behind = behind;
    r->redone = ah_agent_change_redone(ev);
    static const char *phase[6] = {"save", "teardown", "split", "init", "load", "move"};
    for (int k = 0; k < 6; k++) r->phases[k] = ah_json_num_or_nan(json_object_get(ev, "seconds"), phase[k]);
    ah_str_t nodes = ah_str_fixed(r->nodes, sizeof r->nodes);
    json_t *list = json_array();
    for (int j = a->join_first; j < a->join_first + a->join_n; j++) {
        ah_str_appendf(&nodes, "%s%s", nodes.len ? " " : "", a->jobs[j].host);
        json_array_append_new(list, json_string(a->jobs[j].host));
    }
    emit(a, json_pack("{s:s, s:I, s:f, s:f, s:s, s:[], s:o, s:b, s:b, s:i, s:b}", "event", "preempt", "step",
                      (json_int_t)step, "seconds", r->stop_s, "t_s", r->t_notice_s, "cause",
                      ah_agent_cause_name(AH_CAUSE_JOIN), "nodes", "joined", list, "saved", f.saved, "forced", 0,
                      "exit_status", 0, "in_place", 1));
    ah_agent_plan_event(a, "replan", a->next_plan_s, true);
    a->inplace = 2; /* agent_inplace.c closes the recovery at the next step line */
}

bool ah_agent_inplace_join_on_event(agent_t *a, const char *ev, const json_t *line) {
    if (a->join_req != 1 || strcmp(ev, AH_PROTO_EV_RECONFIGURE) != 0) return false;
    const json_int_t k = json_integer_value(json_object_get(line, "join"));
    const json_int_t to = json_integer_value(json_object_get(line, "ranks_to"));
    const json_int_t step = json_integer_value(json_object_get(line, AH_PROTO_STEP));
    const int n = ah_plan_device_count(&a->next.plan);
    /* the trainers change at the first boundary at or after the request's step */
    if (k != a->join_n || step < a->join_step || to != n) { /* not the change asked for: the plan unknown */
        char why[300];
        snprintf(why, sizeof why, "the trainer's change in place is not the join's: %lld joining jobs at step %lld to %lld "
                 "ranks, not %d at step %lld or later to %d", (long long)k, (long long)step, (long long)to, a->join_n,
                 (long long)a->join_step, n);
        say(a, "warning: in place: %s", why);
        ah_agent_inplace_join_fallback(a, why);
        return true;
    }
    joined(a, line);
    return true;
}

void ah_agent_inplace_join_free(agent_t *a) {
    json_decref(a->join_doc);
    a->join_doc = NULL;
    a->join_req = 0;
}

/* ---- the notice's change that also takes in free hosts (docs/elastic.md "A notice's change onto a free host") ----
 * join_req 2 while such a change's joining jobs (join_first.., join_n) wait in the change in place (agent_inplace.c,
 * inplace 1). */

/* The admission's wait for a change whose deadline leaves left_s (its save taken off: ah_agent_change_save_s with
 * incoming ranks, 0 when the step is written behind): half of what is left once the trainers reach the change's step, the other
 * half for the move and the first step after; at most AH_JOIN_ADMIT_S. Under NOTICE_ADMIT_MIN_S it does not fit:
 * false, why (may be NULL) saying so. */
static bool admission(const agent_t *a, double left_s, double *admit_s, char *why, size_t cap) {
    const double step_s = step_estimate(a, &a->res->launches[a->res->n_launches - 1]);
    /* the deadline's event comes after the step, the save before the move, the admission and the move */
    const double save_s = ah_agent_change_save_s(a, true);
    const double half = (left_s - JOIN_STEPS * step_s - save_s) / 2;
    *admit_s = half < ah_comm_join_admit_s() ? half : ah_comm_join_admit_s();
    if (*admit_s >= NOTICE_ADMIT_MIN_S) return true;
    if (why)
        snprintf(why, cap, "the admission does not fit the deadline: %.2f s for it, at most AH_JOIN_ADMIT_S %.2f s and "
                 "half of the %.1f s left less %d steps of %.3f s and the save before the move %.2f s, under %.0f s", *admit_s,
                 ah_comm_join_admit_s(), left_s, JOIN_STEPS, step_s, save_s, NOTICE_ADMIT_MIN_S);
    return false;
}

int ah_agent_inplace_join_devices(const agent_t *a, const ah_plan_t *next, double left_s, char *note, size_t cap) {
    if (!a->joined || !a->launcher.join_hosts) return 0;
    const char **hosts = calloc((size_t)ah_plan_device_count(next) + 1, sizeof *hosts);
    int n_hosts = 0, n_dev = 0;
    if (hosts) free_hosts(a, next, NULL, hosts, &n_hosts, &n_dev, NULL, 0);
    free(hosts);
    double admit_s;
    char why[300];
    if (n_dev && a->join_req != 2 && isfinite(left_s) && !admission(a, left_s, &admit_s, why, sizeof why)) {
        if (note) snprintf(note, cap, "; %d of them on %d free host%s, but %s", n_dev, n_hosts, n_hosts == 1 ? "" : "s",
                           why);
        return 0;
    }
    return n_dev;
}

bool ah_agent_inplace_join_start(agent_t *a, char *why, size_t cap) {
    const ah_plan_t *next = &a->next.plan;
    const char **hosts = calloc((size_t)ah_plan_device_count(next) + 1, sizeof *hosts);
    int n_hosts = 0, n_dev = 0;
    if (!hosts) return snprintf(why, cap, "out of host memory"), false;
    free_hosts(a, next, NULL, hosts, &n_hosts, &n_dev, NULL, 0);
    const double left_s = a->inplace_deadline - ah_now_s();
    double admit_s = 0;
    char plan_path[700];
    bool ok = !n_dev || admission(a, left_s, &admit_s, why, cap);
    if (n_dev && ok && (ok = start_joiners(a, hosts, n_hosts, left_s, plan_path, why, cap))) {
        ah_str_t names = ah_str_fixed((char[256]){0}, 256);
        for (int h = 0; h < n_hosts; h++) ah_str_appendf(&names, "%s%s", h ? " " : "", hosts[h]);
        a->join_req = 2;
        a->join_admit_s = admit_s;
        say(a, "in place: the next plan takes in %d free host%s (%s) with the notice's change: %d new job%s from job %d "
            "started into the running one, told to wait %.1f s for their turn (the deadline), the admission's wait "
            "%.1f s (half the deadline's time after the change's step and its save, at most AH_JOIN_ADMIT_S %.0f s)",
            n_hosts, n_hosts == 1 ? "" : "s", names.buf, n_hosts, n_hosts == 1 ? "" : "s", a->join_first, left_s,
            admit_s, ah_comm_join_admit_s());
    }
    free(hosts);
    return ok;
}

void ah_agent_inplace_join_request(const agent_t *a, json_t *req) {
    if (a->join_req != 2 || !req) return;
    json_object_set_new(req, "join", json_integer(a->join_n));
    json_object_set_new(req, "join_first", json_integer(a->join_first));
    json_object_set_new(req, "join_admit_s", json_real(a->join_admit_s));
}

void ah_agent_inplace_join_drop(agent_t *a) {
    if (a->join_req != 2) return;
    a->join_req = 0;
    say(a, "in place: the %d joining job%s of the notice's change ended", a->join_n, a->join_n == 1 ? "" : "s");
    drop_joiners(a);
}

int ah_agent_inplace_join_taken(agent_t *a, const json_t *ev) {
    if (a->join_req != 2) return 0;
    a->join_req = 0;
    const json_int_t k = json_integer_value(json_object_get(ev, "join"));
    if (k != a->join_n)
        say(a, "warning: in place: the trainers' change took %lld joining jobs, not the %d started", (long long)k,
            a->join_n);
    return a->join_n;
}
