/* The change in place at a notice (issue 36 "Survivors keep their processes"; docs/elastic.md "In-place
 * reconfiguration at a notice"). With --in-place the agent launches one mpirun a host, joined into one
 * world (launcher.h joined). At an events-file notice, once the next plan is made (agent_handover.c),
 * it asks the trainers to change in place (runtime/reconfig.h) instead of stopping them, when it can:
 * the next plan uses only devices that running ranks hold and at least one of each staying host's (the
 * ranks it does not use park: idle in their job until it ends; docs/elastic.md "Parked ranks"), and a step
 * of this launch has been trained since its start or the last change (a notice before the trainer has
 * said where it resumed, its recover event, waits for that: the request is written once it has, if
 * before the deadline below). The request (RUN_DIR's
 * reconfigure.json): "step" the step after the newest the metrics show, "leave" the leaving hosts' jobs,
 * "plan" the next plan as the hosts hold it (RUN_DIR/next-plan.json), "ranks" each rank's rank in the new
 * world, by device (-1: leaving or parking). The trainers save that step, the leaving
 * ranks exit 0, the parked ones wait, the others go on under the next plan in the same processes and say
 * so with a "reconfigure" metrics event; the agent then reaps the leaving jobs (leave_hosts), drops the leaving
 * nodes' disks and records the recovery, in place, closed at the next step line. Anything else (no next
 * plan, a device no running rank holds, a request not taken by the grace period less the save estimate:
 * refused by the trainer, no step boundary in time, or the trainer silent on where it resumed until
 * then) is the stop and relaunch of today, said in one
 * line with why; a change the trainers took before that fallback's withdrawal reached them is adopted
 * when its event comes while nothing was killed or noticed since (the stop called off). Part of the
 * elastic agent (agent_state.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/str.h"
#include "core/timing.h"
#include "core/vec.h"
#include "elastic/agent_exposure.h"
#include "elastic/agent_logic.h"
#include "elastic/agent_state.h"
#include "runtime/protocol.h"

static void reap_left(agent_t *a);
static int count_leaving(const agent_t *a);

void ah_agent_inplace_free(agent_t *a) {
    ah_agent_procs_free(a);
    ah_launch_hostjobs_free(a->jobs, a->n_jobs);
    free(a->job_left);
    a->jobs = NULL;
    a->job_left = NULL;
    a->n_jobs = 0;
    a->joined = false;
    a->inplace = 0;
    a->inplace_deferred = false;
}

void ah_agent_inplace_launch(agent_t *a, ah_launch_job_t *job) {
    ah_agent_inplace_free(a);
    a->inplace_after = -1;
    a->ckpt_under_plan = false;
    if (!a->o->in_place) return;
    if (a->o->cloud_only) { /* restarts as on fresh machines (every disk dropped at a stop): no survivor */
        static bool said_cloud;
        if (!said_cloud) say(a, "note: --recovery cloud-only: no change is made in place (every node restarts as a "
                             "fresh machine, its state from the cloud): a notice stops and relaunches");
        said_cloud = true;
        return;
    }
    if (!a->launcher.leave_hosts) {
        static bool said;
        if (!said) say(a, "note: --in-place: the %s launcher cannot start one job a host yet: a notice stops and "
                       "relaunches", a->launcher.name);
        said = true;
        return;
    }
    ah_error_t e;
    if (ah_launch_hostjobs(job->plan, &a->jobs, &a->n_jobs, &e) != AH_OK ||
        !(a->job_left = calloc((size_t)a->n_jobs, sizeof *a->job_left))) {
        say(a, "note: --in-place: this launch is not joined (%s): a notice stops and relaunches",
            a->jobs ? "out of host memory" : e.msg);
        ah_agent_inplace_free(a);
        return;
    }
    a->joined = job->joined = true;
    ah_agent_procs_launch(a, job->plan); /* by device: the parked ones re-admitted (agent_parked.c) */
    if (!a->save_est_measured) { /* no checkpoint seen yet: a save the deadlines leave room for is not free */
        double bytes, gb_s;
        a->save_est_s = ah_agent_plan_save_s(job->plan, &bytes, &gb_s);
        say(a, "in place: the save estimate before the first checkpoint: %.3f s (the plan's largest node's checkpoint, "
            "%.1f MB at 12 bytes a parameter, at AH_AGENT_DISK_GB_S %.1f GB/s)", a->save_est_s, bytes / 1e6, gb_s);
    }
}

static int node_index(const agent_t *a, const char *name) {
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (strcmp(a->cluster.nodes[i].name, name) == 0) return i;
    return -1;
}

/* Rank r of plan p: its node's name and device index. */
static const char *rank_node(const ah_plan_t *p, int r, int *index) {
    const ah_device_ref_t *d = ah_plan_rank_device(p, r);
    *index = d ? d->index : -1;
    return d ? p->cluster.nodes[d->node].name : "?";
}

/* ranks[r] for each rank r of the running plan (the world's): its rank under next by device, -1 on a
 * leaving node or when next does not use its device (the rank parks: runtime/reconfig.h, docs/elastic.md
 * "Parked ranks"); a device of next that a parked process holds counts as held (it is re-admitted:
 * ah_agent_readmit); false with why when next uses a device no running or parked rank holds, or none of a staying
 * host's (its job would have no rank left in the world: a host leaves only with a notice).
 * *ordered: the survivors keep their order (the request then needs no "ranks"). */
static bool map_ranks(const agent_t *a, const ah_plan_t *next, int *ranks, bool *ordered, char *why, size_t cap) {
    const ah_plan_t *cur = &a->cur.plan;
    const int w = ah_plan_device_count(cur), n = ah_plan_device_count(next);
    int taken = 0, last = -1, *kept = calloc((size_t)a->cluster.n_nodes + 1, sizeof *kept);
    if (!kept) return snprintf(why, cap, "out of host memory"), false;
    *ordered = true;
    for (int r = 0; r < w; r++) {
        int idx, q;
        const char *node = rank_node(cur, r, &idx);
        const int i = node_index(a, node);
        ranks[r] = -1;
        if (i >= 0 && a->leaving[i]) continue;
        for (q = 0; q < n; q++) {
            int qi;
            const char *qn = rank_node(next, q, &qi);
            if (qi == idx && strcmp(qn, node) == 0) break;
        }
        if (q == n) continue; /* parks */
        ranks[r] = q;
        if (i >= 0) kept[i]++;
        *ordered = *ordered && q > last;
        last = q;
        taken++;
    }
    int back = 0;
    json_decref(ah_agent_readmit(a, next, ranks, &back));
    char note[400] = ""; /* devices on free hosts join with the change when their admission fits (agent_inplace_join.c) */
    const double from = a->planning_notice_t > 0 ? a->planning_notice_t : ah_now_s(); /* the notice's clock, as */
    const double left_s = a->inplace == 1 ? a->inplace_deadline - ah_now_s()           /* join_start's check */
                                          : from + a->o->grace_s - ah_agent_change_save_s(a, true) - ah_now_s();
    const int held = taken + back + ah_agent_inplace_join_devices(a, next, left_s, note, sizeof note);
    bool ok = held == n;
    if (!ok)
        snprintf(why, cap, "the next plan uses %d device%s no running rank holds%s", n - held, n - held == 1 ? "" : "s",
                 note); /* nor a parked one, nor one on a free host that joins */
    for (int r = 0; ok && r < w; r++) {
        int idx;
        const int i = node_index(a, rank_node(cur, r, &idx));
        if (ranks[r] < 0 && i >= 0 && !a->leaving[i] && !kept[i]) {
            snprintf(why, cap, "the next plan uses none of %s's devices, which stays (a staying host's job keeps a "
                     "rank)", a->cluster.nodes[i].name);
            ok = false;
        }
    }
    free(kept);
    return ok;
}

/* The running ranks that the request parks (-1 on a staying node); their devices ("fast-0:2 ...") in out
 * (may be NULL). */
static int count_parked(const agent_t *a, const int *ranks, char *out, size_t cap) {
    int n = 0;
    ah_str_t s = ah_str_fixed(out ? out : (char[1]){0}, out ? cap : 1);
    for (int r = 0; r < ah_plan_device_count(&a->cur.plan); r++) {
        int idx;
        const char *node = rank_node(&a->cur.plan, r, &idx);
        const int i = node_index(a, node);
        if (ranks[r] >= 0 || (i >= 0 && a->leaving[i])) continue;
        if (out) ah_str_appendf(&s, "%s%s:%d", n ? " " : "", node, idx);
        n++;
    }
    return n;
}

bool ah_agent_inplace_fits(const agent_t *a, const ah_plan_t *next, char *why, size_t cap) {
    int *ranks = calloc((size_t)ah_plan_device_count(&a->cur.plan) + 1, sizeof *ranks);
    bool ordered = true;
    const bool ok = ranks && map_ranks(a, next, ranks, &ordered, why, cap);
    if (!ranks) snprintf(why, cap, "out of host memory");
    free(ranks);
    return ok;
}

/* The request's text: step, the leaving jobs, the plan path on the hosts and each rank's new rank. */
static json_t *request(const agent_t *a, int64_t step, const int *ranks, const char *plan_path) {
    json_t *leave = json_array(), *rk = json_array();
    for (int j = 0; j < a->n_jobs; j++) {
        const int i = node_index(a, a->jobs[j].host);
        if (!a->job_left[j] && i >= 0 && a->leaving[i]) json_array_append_new(leave, json_integer(j));
    }
    const int w = ah_plan_device_count(&a->cur.plan);
    for (int r = 0; r < w; r++) json_array_append_new(rk, json_integer(ranks[r]));
    int back = 0;
    json_t *readmit = ah_agent_readmit(a, &a->next.plan, ranks, &back), *req = json_pack("{s:I, s:o, s:s, s:o}",
        "step", (json_int_t)step, "leave", leave, "plan", plan_path, "ranks", rk);
    if (req && back) json_object_set(req, "readmit", readmit); /* parked ranks back (runtime/reconfig.h) */
    json_decref(readmit);
    ah_agent_inplace_join_request(a, req); /* free hosts' jobs joining (agent_inplace_join.c) */
    return req;
}

/* The newest step the running launch's metrics show; before its first, the one before the step it
 * resumed from (the trainer's recover event), or -2 when it has not said yet. */
static int64_t newest_step(const agent_t *a) {
    const ah_agent_launch_t *L = &a->res->launches[a->res->n_launches - 1];
    if (L->first_step >= 0) return L->end_step - 1;
    const double r = a->trainer_recover ? ah_json_num_or_nan(a->trainer_recover, AH_PROTO_STEP) : NAN;
    return isfinite(r) ? (int64_t)r - 1 : -2;
}

/* Whether the change can be asked now (ASK_NOW); *step the request's: the step after the newest shown
 * (past the step the launch resumed from, which the trainer would take for an old request); ASK_LATER
 * when only the trainer's word on where it resumed is missing (the request waits for it); else why. */
enum { ASK_NO = 0, ASK_NOW, ASK_LATER };
static int can_ask(const agent_t *a, int64_t *step, char *why, size_t cap) {
    const int64_t newest = newest_step(a);
    *step = newest + 1 + (a->res->launches[a->res->n_launches - 1].first_step < 0);
    if (a->interrupting) snprintf(why, cap, "the run is being interrupted");
    else if (newest < -1) return ASK_LATER;
    else if (*step <= a->inplace_after) snprintf(why, cap, "no step trained yet since the last change");
    else if (*step + 1 >= a->o->steps) snprintf(why, cap, "the run ends first (step %lld of %lld)", (long long)*step,
                                                 (long long)a->o->steps);
    else return ASK_NOW;
    return ASK_NO;
}

/* The parked ranks the request for the next plan would re-admit (0 without a next plan or when it cannot be mapped). */
static int readmitted(const agent_t *a) {
    int *ranks = a->have_next ? calloc((size_t)ah_plan_device_count(&a->cur.plan) + 1, sizeof *ranks) : NULL, back = 0;
    bool ordered;
    char why[200];
    if (ranks && map_ranks(a, &a->next.plan, ranks, &ordered, why, sizeof why))
        json_decref(ah_agent_readmit(a, &a->next.plan, ranks, &back));
    free(ranks);
    return back;
}

/* The save the deadline leaves room for (the grace period less it): the change's (ah_agent_change_save_s), incoming
 * when the request re-admits a parked rank or takes a free host's job in (or would, its admission fitting). */
static double save_room(const agent_t *a) {
    const bool incoming = readmitted(a) > 0 ||
                          (a->have_next && ah_agent_inplace_join_devices(a, &a->next.plan, INFINITY, NULL, 0) > 0);
    return ah_agent_change_save_s(a, incoming);
}

/* None when, as far as the agent can tell, the trainers write the change's step behind the next step
 * (runtime/ckpt_change.c; docs/elastic.md "Durability"): without --ckpt-sync, either nothing is committed before the
 * change (no checkpoint yet, the change before the first periodic one; not with incoming ranks: their fallback
 * restores the last committed step, so with none the trainers save before the move, cli_train_inplace.c
 * save_and_move) or no node leaves, or the last committed step is in the running plan's layout and every piece a
 * leaving node holds under it is also on a staying node (agent_exposure.h ah_exposure_leavers_kept); else the
 * longest checkpoint seen. The trainer's own test also counts the memory tier and the cloud: where only they hold a
 * leaver's piece the agent leaves room for the save (the safe side: a save the deadline did not leave room for could
 * outlast the grace period). Until session 25 a change with incoming ranks always saved before the move. A running
 * or next plan with a sharded optimizer (--shard-optimizer) always saves: its state is not moved rank to rank
 * (runtime/reconfig_move.c), so the trainers save the step and restore it (cli_train_inplace.c save_and_move). */
double ah_agent_change_save_s(const agent_t *a, bool incoming) {
    for (int i = 0; i < a->o->n_train_args; i++)
        if (strcmp(a->o->train_args[i], "--ckpt-sync") == 0) return a->save_est_s;
    if ((a->have_cur && a->cur.plan.n_opt_groups > 0) || (a->have_next && a->next.plan.n_opt_groups > 0))
        return a->save_est_s;
    const bool none = a->res->newest_ckpt < 0;
    if (none && incoming) return a->save_est_s;
    if (none && newest_step(a) + 2 < a->o->ckpt_every) return 0;
    bool ok, kept = count_leaving(a) == 0 || ((none || a->ckpt_under_plan) &&
                                              ah_exposure_leavers_kept(&a->cur.plan, &a->cluster, a->leaving, &ok));
    return kept ? 0 : a->save_est_s;
}

double ah_agent_inplace_save_room(const agent_t *a) { return save_room(a); }

/* What the deadline is, for the agent's lines: the grace period less the save estimate, or the grace period alone. */
static void deadline_why(const agent_t *a, char *out, size_t cap) {
    if (save_room(a) > 0 || a->save_est_s <= 0) snprintf(out, cap, "the grace period less the save estimate, %.2f s",
                                                         save_room(a));
    else snprintf(out, cap, "the grace period: no save before the move, the change's step to be written behind (the "
                  "save estimate, %.2f s, not taken off)", a->save_est_s);
}

bool ah_agent_inplace_askable(const agent_t *a) {
    char why[200];
    int64_t step;
    return a->joined && a->running && a->o->grace_s - save_room(a) > 0 && can_ask(a, &step, why, sizeof why) != ASK_NO;
}

/* The request written to the hosts: the change at step, the ranks mapped (map_ranks), said. */
static bool write_request(agent_t *a, int64_t step, const int *ranks, bool ordered, char *why, size_t cap) {
    char path[700], plan_path[700];
    snprintf(path, sizeof path, "%s/reconfigure-%d.json", a->work, launch_no(a));
    snprintf(plan_path, sizeof plan_path, "%s/launch-%d/" AH_PROTO_NEXT_PLAN_FILE, a->work, launch_no(a));
    json_t *req = request(a, step, ranks, plan_path);
    ah_error_t e;
    bool ok = req && json_dump_file(req, path, JSON_COMPACT) == 0;
    if (!ok) snprintf(why, cap, "%s: cannot write the request", path);
    if (ok && a->launcher.put_run_file(a->launcher.ctx, AH_PROTO_RECONFIG_FILE, path, &e) != AH_OK) {
        snprintf(why, cap, "the request cannot be written to the hosts (%s)", e.msg);
        ok = false;
    }
    if (ok) {
        char *text = json_dumps(json_object_get(req, "leave"), JSON_COMPACT);
        const int parked = count_parked(a, ranks, NULL, 0), back = (int)json_array_size(json_object_get(req, "readmit"));
        char park[160] = "";
        if (parked) snprintf(park, sizeof park, ", %d rank%s park (idle until their host's job ends)", parked,
                             parked == 1 ? "" : "s");
        char room[160];
        deadline_why(a, room, sizeof room);
        if (back) snprintf(park + strlen(park), sizeof park - strlen(park), ", %d parked rank%s re-admitted", back,
                           back == 1 ? "" : "s");
        say(a, "in place: the change asked for at step %lld (jobs %s leave, %d ranks go on under the next plan%s%s); "
            "waiting for it until %.1f s (%s)", (long long)step, text ? text : "?", ah_plan_device_count(&a->next.plan),
            ordered ? "" : ", renumbered", park, a->inplace_deadline - a->t0, room);
        free(text);
    }
    json_decref(req);
    return ok;
}

/* The change asked for when it can be (ASK_NOW: the request written, inplace_step set), ASK_LATER when
 * the trainer has not said yet where it resumed, else ASK_NO with why. */
static int try_ask(agent_t *a, char *why, size_t cap) {
    int *ranks = calloc((size_t)ah_plan_device_count(&a->cur.plan) + 1, sizeof *ranks);
    int64_t step = 0;
    bool ordered = true;
    int r = ASK_NO;
    if (!ranks) snprintf(why, cap, "out of host memory");
    else if (!a->have_next) snprintf(why, cap, "no next plan was made");
    else if (map_ranks(a, &a->next.plan, ranks, &ordered, why, cap)) r = can_ask(a, &step, why, cap);
    if (r != ASK_NO && a->inplace_deadline <= ah_now_s()) {
        snprintf(why, cap, "the grace period (%.1f s) less the save estimate (%.2f s) leaves no time to wait%s",
                 a->o->grace_s, save_room(a), r == ASK_LATER ? " for the trainer to say where it resumed" : "");
        r = ASK_NO;
    }
    if (r == ASK_NOW && !ah_agent_inplace_join_start(a, why, cap)) r = ASK_NO; /* free hosts' jobs */
    if (r == ASK_NOW && !write_request(a, step, ranks, ordered, why, cap)) r = ASK_NO;
    if (r == ASK_NO) ah_agent_inplace_join_drop(a);
    if (r == ASK_NOW) a->inplace_step = step;
    free(ranks);
    return r;
}

bool ah_agent_inplace_begin(agent_t *a, const bool *noticed, double t) {
    (void)noticed; /* leaving[] holds them, and those of the same stop */
    if (!a->joined || !a->running) return false;
    char why[400] = "";
    a->inplace_deadline = t + a->o->grace_s - save_room(a);
    const int r = try_ask(a, why, sizeof why);
    if (r == ASK_NO) {
        say(a, "in place: not at this notice (%s): the notice's stop and relaunch", why);
        return false;
    }
    if (r == ASK_LATER) {
        deadline_why(a, why, sizeof why);
        say(a, "in place: the trainer has not said yet where it resumed: the change is asked for once it has, if "
            "before %.1f s (%s)", a->inplace_deadline - a->t0, why);
    }
    a->inplace = 1;
    a->inplace_deferred = r == ASK_LATER;
    a->inplace_leaving_n = count_leaving(a);
    a->cause = AH_CAUSE_EVENT;
    a->notice_t = t;
    return true;
}

/* The request written to the hosts withdrawn before the fallback's SIGTERM: the same request at a step
 * no run reaches, which the trainer never takes (a trainer that took the request before this lands
 * still changes in place; the SIGTERM then stops it). */
static void withdraw(agent_t *a) {
    char path[700], out[720];
    snprintf(path, sizeof path, "%s/reconfigure-%d.json", a->work, launch_no(a));
    snprintf(out, sizeof out, "%s/reconfigure-%d.withdrawn.json", a->work, launch_no(a));
    json_t *req = json_load_file(path, 0, NULL);
    ah_error_t e = {0};
    bool ok = req && json_object_set_new(req, "step", json_integer(INT64_MAX)) == 0 &&
              json_dump_file(req, out, JSON_COMPACT) == 0;
    if (!ok) snprintf(e.msg, sizeof e.msg, "%s: cannot write it", out);
    else ok = a->launcher.put_run_file(a->launcher.ctx, AH_PROTO_RECONFIG_FILE, out, &e) == AH_OK;
    json_decref(req);
    if (!ok) say(a, "warning: in place: the request on the hosts not withdrawn (%s): a trainer may still take it", e.msg);
}

void ah_agent_inplace_fallback(agent_t *a, const char *why) {
    if (a->inplace != 1) return;
    a->inplace = a->inplace_deferred ? 0 : 3; /* 3: a change the trainers took before the withdrawal is adopted */
    if (a->inplace_deferred)
        say(a, "in place: the change not asked for (%s): the notice's stop and relaunch", why);
    else
        say(a, "in place: the change at step %lld not made (%s): the notice's stop and relaunch",
            (long long)a->inplace_step, why);
    if (!a->inplace_deferred) withdraw(a);
    ah_agent_inplace_join_drop(a);
    a->inplace_deferred = false;
    const double t = a->notice_t; /* the grace period runs from the notice, not from now */
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->leaving[i]) ah_agent_begin_stop(a, AH_CAUSE_EVENT, a->cluster.nodes[i].name);
    a->notice_t = t;
}

/* A change waiting for the trainer to say where it resumed: asked for once it has, the fallback when it
 * cannot be or the deadline comes first. */
static void ask_deferred(agent_t *a) {
    char why[400] = "";
    const int r = try_ask(a, why, sizeof why);
    if (r == ASK_NOW) a->inplace_deferred = false;
    else if (r == ASK_NO) ah_agent_inplace_fallback(a, why);
}

void ah_agent_inplace_watch(agent_t *a) {
    if (a->inplace == 0) reap_left(a);
    if (a->inplace != 1) return;
    if (a->stopping) { /* the user's interrupt: every rank got the notice, the job stops */
        a->inplace = 0;
        if (a->inplace_deferred) say(a, "in place: the change dropped before it was asked for: the job is stopping");
        else say(a, "in place: the change at step %lld dropped: the job is stopping", (long long)a->inplace_step);
        ah_agent_inplace_join_drop(a);
        a->inplace_deferred = false;
        return;
    }
    if (a->inplace_deferred) {
        ask_deferred(a);
        return;
    }
    /* A request the trainer refused falls back at its "reconfigure_refused" event (ah_agent_inplace_on_event); one
     * not read by a step boundary in time (or whose refusal the metrics have not shown yet), at the deadline. */
    if (ah_now_s() <= a->inplace_deadline) return;
    char why[200];
    snprintf(why, sizeof why, "not taken within the grace period less the save estimate, %.2f s (refused, or no "
             "step boundary in time)", a->inplace_deadline - a->notice_t);
    ah_agent_inplace_fallback(a, why);
}

bool ah_agent_inplace_on_step(agent_t *a, int64_t step, double loss) {
    if (a->inplace != 2 || a->pending < 0) return false;
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    /* the change's step S was to be written behind and its move failed: the trainers restored the last committed step
     * C in place ("redone" S - C): the history rewinds to C, at step C only (any other step breaks it, as before) */
    if (r->redone > 0 && step == r->stopped_at - r->redone && step < a->hist.len)
        ah_history_resume(&a->hist, a->res->n_launches - 1 + a->hist_offset, step);
    ah_recovery_resumed(r, &a->hist, step, loss);
    a->inplace = 0;
    return true;
}

/* The change is done (ev, the trainer's "reconfigure"): the recovery opened, in place, and the preempt
 * event; the leaving nodes' disks dropped. */
static void account_change(agent_t *a, const json_t *ev, double seen_t, int joined) {
    if (!ah_grow(&a->res->recoveries, &a->cap_recoveries, a->res->n_recoveries + 1, sizeof *a->res->recoveries)) {
        say(a, "warning: out of host memory: the change in place is not recorded as a recovery");
        return;
    }
    a->pending = a->res->n_recoveries++;
    ah_agent_recovery_t *r = &a->res->recoveries[a->pending];
    const json_t *secs = json_object_get(ev, "seconds");
    static const char *phase[6] = {"save", "teardown", "split", "init", "load", "move"};
    double sum = 0;
    const int64_t step = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    /* saved: the step committed at the change; "async" writes it behind the next step, the resume point the last
     * committed one until then */
    bool behind;
    const bool saved = ah_agent_change_saved(ev, &behind);
    const ah_exit_facts_t f = {.status = 0, .preempted = true, .preempted_step = step, .saved = saved,
                               .trained = a->hist.len};
    /* stop: the notice to the change's save done (the relaunch's stop ends with its save too) */
    const double stop_s = seen_t - a->notice_t;
    for (int k = 1; k < 6; k++) sum += isfinite(ah_json_num_or_nan(secs, phase[k])) ? ah_json_num_or_nan(secs, phase[k]) : 0;
    ah_recovery_open(r, AH_CAUSE_EVENT, &f, a->notice_t - a->t0, stop_s - sum > 0 ? stop_s - sum : 0, false);
    r->in_place = true;
    r->behind = behind;
    r->redone = ah_agent_change_redone(ev);
    for (int k = 0; k < 6; k++) r->phases[k] = ah_json_num_or_nan(secs, phase[k]);
    ah_str_t nodes = ah_str_fixed(r->nodes, sizeof r->nodes);
    json_t *list = json_array();
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->leaving[i]) {
            ah_str_appendf(&nodes, "%s%s", nodes.len ? " " : "", a->cluster.nodes[i].name);
            json_array_append_new(list, json_string(a->cluster.nodes[i].name));
        }
    json_t *pre = json_pack("{s:s, s:I, s:f, s:f, s:s, s:o, s:b, s:b, s:i, s:b}", "event", "preempt", "step",
                            (json_int_t)step, "seconds", r->stop_s, "t_s", r->t_notice_s, "cause",
                            ah_agent_cause_name(AH_CAUSE_EVENT), "nodes", list, "saved", saved, "forced", 0,
                            "exit_status", 0, "in_place", 1);
    if (pre && joined > 0) { /* the free hosts taken in, as the join's event names them (and the summary) */
        json_t *in = json_array();
        ah_str_t names = ah_str_fixed(r->joined, sizeof r->joined);
        for (int j = a->join_first; j < a->join_first + joined && j < a->n_jobs; j++) {
            json_array_append_new(in, json_string(a->jobs[j].host));
            ah_str_appendf(&names, "%s%s", names.len ? " " : "", a->jobs[j].host);
        }
        json_object_set_new(pre, "joined", in);
    }
    emit(a, pre);
    for (int i = 0; i < a->cluster.n_nodes; i++)
        if (a->leaving[i]) {
            ah_agent_drop_disk(a, i);
            a->leaving[i] = false;
        }
}

/* The leaving jobs of the change (job_left set, not reaped yet): reaped once the survivors' first step is in
 * (their wait is not on the recovery's path), killed when they have not exited 0 by then. */
static void reap_left(agent_t *a) {
    const char *hosts[256];
    int n = 0;
    for (int j = 0; j < a->n_jobs && n < 256; j++)
        if (a->job_left[j] == 1) {
            hosts[n++] = a->jobs[j].host;
            a->job_left[j] = 2;
        }
    if (!n) return;
    const int ok = a->launcher.leave_hosts(a->launcher.ctx, hosts, n, AH_AGENT_KILL_MARGIN_S);
    if (ok < n)
        say(a, "warning: in place: %d of the %d leaving job%s did not exit 0 within %.0f s (killed); the others go on "
            "in place", n - ok, n, n == 1 ? "" : "s", AH_AGENT_KILL_MARGIN_S);
    else
        say(a, "in place: the leaving job%s exited 0", n == 1 ? "" : "s");
}

/* The "reconfigure" event: the next plan the running one, the recovery opened, the leaving jobs marked. */
static void on_changed(agent_t *a, const json_t *ev) {
    const double seen_t = ah_now_s();
    /* the staying ranks' plan (agent_handover.c), or a change adopted: a node up it leaves out is weighed */
    const bool weigh = a->next_staying || a->inplace == 3;
    int n = 0;
    for (int j = 0; j < a->n_jobs; j++) {
        const int i = node_index(a, a->jobs[j].host);
        if (!a->job_left[j] && i >= 0 && a->leaving[i]) {
            a->job_left[j] = 1;
            n++;
        }
    }
    a->inplace_after = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    a->ckpt_under_plan = false; /* the steps committed so far are in the old plan's layout */
    char parked[300] = "";
    int *ranks = calloc((size_t)ah_plan_device_count(&a->cur.plan) + 1, sizeof *ranks), n_parked = 0;
    bool ordered, mapped = ranks && a->have_next && map_ranks(a, &a->next.plan, ranks, &ordered, parked, sizeof parked);
    char devs[240] = "";
    if (mapped) n_parked = count_parked(a, ranks, devs, sizeof devs);
    free(ranks);
    const int joined = ah_agent_inplace_join_taken(a, ev); /* free hosts' jobs now the launch's */
    parked[0] = 0;
    if (n_parked) snprintf(parked, sizeof parked, "; %d rank%s parked, idle until their host's job ends: %s", n_parked,
                           n_parked == 1 ? "" : "s", devs);
    ah_plan_result_free(&a->cur);
    a->cur = a->next;
    a->have_next = false; /* moved */
    ah_agent_next_plan_free(a);
    ah_agent_procs_changed(a, ev); /* the ones parked now, the re-admitted ones not */
    ah_agent_launch_t *L = &a->res->launches[a->res->n_launches - 1]; /* the summary's: the running plan */
    L->devices = ah_plan_device_count(&a->cur.plan);
    L->predicted_s = a->cur.eval.pred.iteration_s;
    ah_agent_plan_desc(&a->cur.plan, L->plan_desc, sizeof L->plan_desc);
    char *pids = json_dumps(json_object_get(ev, "pids"), JSON_COMPACT);
    say(a, "in place: changed at step %lld: %d job%s left, %d ranks go on under the next plan in the same processes "
        "(pids %s%s)%s", (long long)a->inplace_after, n, n == 1 ? "" : "s", ah_plan_device_count(&a->cur.plan),
        pids ? pids : "?", joined ? ", the joined jobs' ranks new" : "", parked);
    free(pids);
    account_change(a, ev, seen_t, joined);
    ah_agent_plan_event(a, "replan", a->next_plan_s, true); /* after the preempt event, as a relaunch's */
    ah_watchdog_line(&a->dog, ah_now_s());
    a->inplace = 2;
    for (int i = 0; weigh && i < a->cluster.n_nodes; i++)
        if (a->up[i] && !ah_agent_plan_uses(&a->cur.plan, a->cluster.nodes[i].name)) {
            a->join_pending = true;
            say(a, "%s is up and the plan the trainers took does not use it: weighed at the next checkpoint (the join "
                "rule)", a->cluster.nodes[i].name);
        }
}

static int count_leaving(const agent_t *a) {
    int n = 0;
    for (int i = 0; i < a->cluster.n_nodes; i++) n += a->leaving[i];
    return n;
}

/* Whether a change the trainers took after the agent fell back (ev; inplace 3) can be adopted: the job
 * alive and not killed, nothing noticed since the request (leaving[] only grows within a stop, so the
 * same count is the same nodes: the survivors got no SIGTERM), the next plan the one it named; else why. */
static bool adoptable(const agent_t *a, const json_t *ev, char *why, size_t cap) {
    const int64_t step = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    if (a->inplace != 3) snprintf(why, cap, a->stopping ? "the notice's stop was under way" : "no request pending");
    else if (!a->running) snprintf(why, cap, "the job had ended");
    else if (a->forced) snprintf(why, cap, "the grace period was over: the leaving ranks were killed");
    else if (a->interrupting) snprintf(why, cap, "the run is being interrupted");
    else if (count_leaving(a) != a->inplace_leaving_n) snprintf(why, cap, "another node was noticed since: it stops");
    else if (!a->have_next || json_integer_value(json_object_get(ev, "ranks_to")) != ah_plan_device_count(&a->next.plan))
        snprintf(why, cap, "the next plan was made again since");
    else if (step < a->inplace_step) snprintf(why, cap, "an older request's (step %lld)", (long long)a->inplace_step);
    else if (json_integer_value(json_object_get(ev, "join")) > 0) snprintf(why, cap, "its joining jobs were ended");
    else return true;
    return false;
}

/* The change adopted (ev, the trainers' "reconfigure" after the fallback): the notice's stop called off,
 * the change as if waited for; a node up that the plan does not use (the preempted one back) weighed by
 * the join rule at the next checkpoint. */
static void adopt(agent_t *a, const json_t *ev) {
    say(a, "in place: the trainers took the change at step %lld before the fallback withdrew it: adopted (the "
        "notice's stop called off; the survivors go on, no relaunch)",
        (long long)json_integer_value(json_object_get(ev, AH_PROTO_STEP)));
    a->stopping = false;
    a->forced = false;
    on_changed(a, ev);
}

/* Whether the trainers' change (ev) is the one asked for: at or after the request's step, to the next plan's ranks,
 * with the free hosts' jobs started for it (none when none); else why (as the join's own check, agent_inplace_join.c). */
static bool asked_change(const agent_t *a, const json_t *ev, char *why, size_t cap) {
    const json_int_t step = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    const json_int_t to = json_integer_value(json_object_get(ev, "ranks_to"));
    const json_int_t k = json_integer_value(json_object_get(ev, "join"));
    const int n = a->have_next ? ah_plan_device_count(&a->next.plan) : -1, join = a->join_req == 2 ? a->join_n : 0;
    if (step >= a->inplace_step && to == n && k == join) return true;
    snprintf(why, cap, "the trainer's change in place is not the one asked for: at step %lld to %lld ranks with %lld "
             "joining jobs, not at step %lld or later to %d with %d", (long long)step, (long long)to, (long long)k,
             (long long)a->inplace_step, n, join);
    return false;
}

void ah_agent_inplace_on_event(agent_t *a, const char *ev, const json_t *line) {
    if (strcmp(ev, AH_PROTO_EV_CHECKPOINT) == 0) {
        const double s = ah_json_num_or_nan(line, "seconds");
        if (isfinite(s) && (s > a->save_est_s || !a->save_est_measured)) a->save_est_s = s; /* the longest seen */
        a->save_est_measured = a->save_est_measured || isfinite(s);
        if (json_is_true(json_object_get(line, "ok"))) a->ckpt_under_plan = true;
    } else if (strcmp(ev, AH_PROTO_EV_RECONFIGURE_REFUSED) == 0) { /* the trainer refused the request: at once */
        const json_int_t step = json_integer_value(json_object_get(line, AH_PROTO_STEP));
        char why[300];
        snprintf(why, sizeof why, "refused by the trainer: %s", json_string_value(json_object_get(line, "why")) ?
                 json_string_value(json_object_get(line, "why")) : "?");
        if (a->inplace == 1 && !a->inplace_deferred && step == a->inplace_step) ah_agent_inplace_fallback(a, why);
    } else if (strcmp(ev, AH_PROTO_EV_RECONFIGURE) == 0) {
        char why[300];
        if (a->inplace == 1 && !a->inplace_deferred && !asked_change(a, line, why, sizeof why)) {
            say(a, "warning: in place: %s", why);
            ah_agent_inplace_fallback(a, why);
        } else if (a->inplace == 1 && !a->inplace_deferred) on_changed(a, line);
        else if (adoptable(a, line, why, sizeof why)) adopt(a, line);
        else say(a, "warning: a change in place at step %lld that this agent did not wait for (%s): ignored",
                 (long long)json_integer_value(json_object_get(line, AH_PROTO_STEP)), why);
    }
}
