/* The elastic agent's state, shared by its loop (agent.c), its dealings with the hosts
 * (agent_hosts.c) and its reading of an ended job (agent_exit.c); private to src/elastic. Also the
 * log line (say) and the merged metrics line (emit) all write. */
#ifndef AH_ELASTIC_AGENT_STATE_H
#define AH_ELASTIC_AGENT_STATE_H

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/timing.h"
#include "elastic/agent.h"
#include "elastic/agent_logic.h"
#include "elastic/join_rule.h"
#include "elastic/launcher.h"
#include "planner/planner.h"
#include "spec/cluster.h"
#include "spec/model.h"

/* A process of the running launch (agent_parked.c): its device, its job (AH_WORLD_JOIN's J) and rank in the job. */
typedef struct {
    char node[64];
    int index, job, rank;
    bool parked;
    bool spent; /* parked through an admission (a join): its world took in a job it never connected to, so it is
                 * never re-admitted (MPI_Intercomm_create would span processes it does not know) */
} ah_agent_proc_t;

typedef struct agent {
    const ah_agent_opts_t *o;
    ah_agent_result_t *res;
    ah_model_t model;
    ah_cluster_t cluster;  /* the whole cluster; up[] says which nodes are there */
    bool *up, *leaving;    /* leaving: gone during the current stop; their disks are dropped */
    bool *unanswered;      /* down because it did not answer: asked again at a checkpoint... */
    ah_reask_t *reask;     /* ...once its backoff has passed (agent_logic.h) */
    ah_agent_events_t ev;
    off_t ev_size; /* the event file's size when last read: it is read again when it grows */
    int next_ev;
    double t0;
    char work[512], local_root[600];
    int lock_fd; /* WORK/.autohet-run.lock, flock'ed while the agent runs (-1: not held) */
    FILE *metrics;
    ah_launcher_t launcher;
    bool running;          /* a job was started and has not been seen to end */
    ah_plan_result_t cur;  /* the running (or last) plan */
    bool have_cur;
    int cap_launches, cap_recoveries;
    /* the current stop; interrupting: the user's Ctrl-C made it, the run ends with it */
    bool stopping, forced, interrupting, stopped_at_once;
    ah_agent_cause_t cause;
    double notice_t, external_seen_t;
    double recovery_t; /* > 0: the stop's recovery recorded from then, before notice_t (a join in place that fell back) */
    double planning_notice_t; /* > 0: the notice whose next plan is being made, its clock (agent_avail.c): the
                                 in-place check of a free host's admission counts its deadline from it */
    /* the recovery waiting for its first step (-1: none) */
    int pending;
    json_t *trainer_recover; /* the trainer's recover event of the current launch */
    bool join_pending;
    ah_history_t hist;
    int hist_offset;     /* launch k of this run is launch k + this of the history: 1 when the history
                            begins with an earlier run's launch taken over (agent_takeover.c) */
    int64_t diverged_at; /* the step of a "nonfinite" event that stopped the trainer (-1: none) */
    ah_watchdog_t dog; /* the step timeout of the running launch */
    bool hung;         /* the watchdog found hosts of the plan not answering; the job was stopped */
    char hung_why[300]; /* hung with no node at fault (a stopped mpirun, every rank idle): what; "" otherwise */
    double probed_t;   /* a joined launch's quiet spell already probed: the dog's last_t then (agent_hosts.c) */
    ah_restarts_t restarts; /* the failure policy's count (agent_logic.h) */
    /* the next plan made at a notice, before the stop (agent_handover.c), the nodes up it was made
     * for, and the seconds it took (planning and writing it to the hosts) */
    ah_plan_result_t next;
    bool have_next;
    bool next_staying; /* next is the plan over the staying ranks' devices, taken for a change in place */
    bool *next_up;
    double next_plan_s;
    /* the join rule's facts (agent_join.c): per GPU type the spot removals, the removing changes, the
     * spot node-seconds up and the last removal's time ([4 x n_types]), counted up to churn_tick_t;
     * when the running launch started; launch 0's start to its first finished step (-1: not yet) */
    double *churn;
    double churn_tick_t, launch_t, first_start_s;
    /* --exposure-aware (agent_plan.c): the last plan made was a baseline's taken for its exposure, said
     * in the plan line that takes it ("" when the planner's plan stood) */
    char exposure_note[400];
    /* in place (agent_inplace.c): whether the running launch is joined, its jobs as launched (by
     * AH_WORLD_JOIN's J) and those that left; inplace: 0 none, 1 a request written (the change at step
     * inplace_step or the first boundary that reads it, waited for until inplace_deadline; deferred: not
     * written yet, until the trainer says where it resumed), 2 changed, its recovery closing at the next
     * step line, 3 fallen back (the request withdrawn, the notice's stop under way: a change the trainers
     * took before the withdrawal is adopted when nothing was noticed since: inplace_leaving_n, the leaving
     * nodes at the notice); the save time estimate (the longest checkpoint seen); inplace_after: the
     * last change's step; ckpt_under_plan: a checkpoint committed since the running plan started (its
     * launch or its change in place), so in its layout */
    bool joined;
    ah_launch_hostjob_t *jobs;
    char *job_left; /* 1: left in place, 2: reaped (launcher.h leave_hosts) */
    int n_jobs;
    ah_agent_proc_t *procs; /* the launch's processes by device (agent_parked.c), n_procs of them */
    int n_procs;
    int inplace;
    bool inplace_deferred;
    int inplace_leaving_n;
    int64_t inplace_step, inplace_after;
    double inplace_deadline, save_est_s;
    bool save_est_measured; /* save_est_s is a checkpoint's seen (else the plan's at the disk rate, ah_agent_plan_save_s) */
    bool ckpt_under_plan;
    /* a join to weigh once the metrics read is done (agent.c): the first line's reason that asked for it, NULL none.
     * Weighed mid-read, a join saw the newest step of the lines read so far, not of the read: the trainer could
     * have finished meanwhile (a join asked at step 10 of a job that had trained its 60, its joiner waiting 70 s) */
    const char *join_when;
    /* the join in place (agent_inplace_join.c): join_req 1 while its request (join_doc) waits, until
     * join_deadline; asked at join_t for step join_step; the joining hosts' jobs join_first.., join_n of them */
    int join_req, join_first, join_n;
    int64_t join_step;
    double join_t, join_deadline, join_admit_s; /* join_admit_s: a notice's change's (join_req 2) */
    json_t *join_doc;
} agent_t;

static inline double since_start(const agent_t *a) { return ah_now_s() - a->t0; }
/* The running (or last) launch's number: counted on from an earlier run's in the work directory. */
static inline int launch_no(const agent_t *a) { return a->res->launch_base + a->res->n_launches - 1; }

static inline void say(agent_t *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void say(agent_t *a, const char *fmt, ...) {
    if (!a->o->log) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    char stamped[1100];
    snprintf(stamped, sizeof stamped, "[%7.2f s] %s", since_start(a), line);
    a->o->log(a->o->log_ctx, stamped);
}

/* One JSON object a line in the merged metrics; takes the reference. */
static inline void emit(agent_t *a, json_t *obj) {
    if (a->metrics && obj) {
        json_dumpf(obj, a->metrics, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
        fputc('\n', a->metrics);
        fflush(a->metrics);
    }
    json_decref(obj);
}

/* ---- an ended job (agent_exit.c) ---- */

/* RUN_DIR/preempted.json {"step", "saved", "nodes"}, when the trainer wrote one: into the exit's
 * facts, and the nodes it names marked in `named`. */
void ah_agent_read_preempted(agent_t *a, ah_exit_facts_t *f, bool *named);
/* A failed job (AH_EXIT_FAILED, every host answering): false when the failure is final — the user's
 * input (failed.json of class invalid or usage, a usage exit, a program that would not start, a
 * divergence) — else true with what failed: key, the failure's kind (the exit status or signal, or
 * the error class of failed.json), which the failure policy compares, and cause, for people. */
bool ah_agent_failure_cause(agent_t *a, const ah_exit_facts_t *f, char *key, size_t key_cap, char *cause,
                            size_t cap);
/* The failure policy said GO for a failure at step (steps trained): said, a "restart" metrics
 * event, then its backoff slept (cut short by an interrupt, which the relaunch then finds). */
void ah_agent_restart_begin(agent_t *a, const char *cause, int64_t step, double backoff_s);
/* Why a failure the policy could have restarted ends the run (verdict v), appended to the
 * trainer's error in err. */
void ah_agent_restart_refused(const agent_t *a, ah_restart_verdict_t v, int64_t step, ah_error_t *err);
/* The job ended for good (act): AH_OK when every step is trained, else why not (a failed job is
 * named by the trainer's failed.json when it wrote one). */
ah_status_t ah_agent_conclude(agent_t *a, ah_exit_action_t act, const ah_exit_facts_t *f, ah_error_t *err);

/* ---- an earlier run in the work directory (agent_takeover.c) ---- */

/* Before the first launch: the launches are numbered on from the last WORK/launch-N/ or plan-N.json.
 * When the earlier agent ended without its done event (killed), its last launch is taken over
 * (launcher.h adopt): its trainer's lines the merged metrics lack are merged, then a preempt event
 * (cause "agent killed": the step it stopped at, whether it saved) opens a recovery that the first
 * step closes. */
ah_status_t ah_agent_take_over(agent_t *a, ah_error_t *err);
/* The trainer's recover event of the running launch: kept for the agent's recover event, into the
 * merged metrics as a "restore" event, and the copies the restore replaced said. */
void ah_agent_on_restore(agent_t *a, json_t *line, int launch);

/* ---- the hosts (agent_hosts.c), each through the launcher ---- */

/* Hosts up (in_plan: those the running plan uses) that do not answer the launcher (a failure, a
 * prompt in BatchMode; no answer within AH_AGENT_ANSWER_S twice, unless keep_unknown: then said as
 * unknown and kept), asked at once where the launcher can (reachable_many): marked down and unanswered
 * (in_plan: leaving too), each said as `what` with the launcher's error and an "unreachable" event.
 * True when there was one. */
bool ah_agent_drop_unreachable(agent_t *a, bool in_plan, bool keep_unknown, const char *what);
/* Hosts down for not answering whose backoff has passed, asked again: those that answer are up
 * again, a join event each (true when any); the others are said with their next ask's time. */
bool ah_agent_answer_again(agent_t *a);
/* Drops node's disk on its host; a failure is a warning. */
void ah_agent_drop_disk(agent_t *a, int node);
/* After a forced stop: each host's uncommitted steps newer than its latest committed one into
 * `interrupted`; false when a host's latest committed step does not verify. */
bool ah_agent_check_disks(agent_t *a, json_t *interrupted);
/* The step timeout expired (see the watchdog, agent_logic.h). */
void ah_agent_on_hang(agent_t *a);
/* A joined launch over ssh or slurm (one mpirun a host): a host's end need not end the job here (srun -w
 * HOST outlives a host whose processes died, the other hosts' ranks wait on the dead ones), so a quiet
 * spell of max(AH_AGENT_PROBE_FLOOR_S, 3 x the longest gap or the predicted iteration) is probed once,
 * long before the step timeout, every host at once: hosts that fail to answer leave as lost (one whose
 * ssh only timed out, twice, is said as unknown and kept: the step timeout decides), a host's job that is
 * gone ends the job as failed (launcher.h dead_jobs). Nothing found: nothing said, the step timeout still
 * runs. */
void ah_agent_probe_quiet(agent_t *a);

/* agent_plan.c: plans on the nodes that are up (no host asked); a re-plan whose traffic would cross a
 * region in the open without --allow-unencrypted-wan is made over one region's nodes alone, said. */
ah_status_t ah_agent_plan_up(agent_t *a, ah_plan_result_t *r, ah_error_t *err);
/* agent_plan.c: the run's planner options as the agent plans and weighs plans: under --objective cost with
 * held_usd_per_hour the $/h of every node up (the agent gives no host back, so the plan is priced by what
 * the run pays: more of the held GPUs train more tokens for the same $; docs/planner.md). */
void ah_agent_planner_opts(const agent_t *a, ah_planner_opts_t *po);
/* agent_plan.c: the save estimate before the run's first checkpoint event: the checkpoint bytes of p's node that holds
 * the most (*bytes; 12 a parameter: fp32 weights, AdamW's m and v; each shard once a node, plan/ckpt_traffic.h) at the node's disk rate (*gb_s: AH_AGENT_DISK_GB_S,
 * default 8 GB/s, simulate's --disk-gb-s default), in seconds. */
double ah_agent_plan_save_s(const ah_plan_t *p, double *bytes, double *gb_s);
/* agent_join.c: with nodes joined, r the plan over the nodes up, `when` said first ("checkpoint
 * taken"): restart onto it now when it is better under the run's objective, pays by the join rule
 * (join_rule.h, the facts this run measured) and the step saved at the stop is restorable on its
 * nodes: it uses every node of the running plan (a restore reads only the disks and memory of the
 * job's own nodes; the handover is a notice's). WAIT: better and restorable but it does not pay yet
 * (the joins stay pending); DROP: not better, or it leaves a node out. Said in the log either way. */
typedef enum { AH_JOIN_RESTART = 0, AH_JOIN_WAIT, AH_JOIN_DROP } ah_join_verdict_t;
/* agent_join.c: the join rule between `from`, the plan the job goes on with, and `to`, one a restart
 * would move it onto, with this run's facts: true when the restart pays; *w what it weighed (the gain
 * over the stay; the cost: this run's mean recovery + to's expected preemptions beyond from's). The
 * join's verdict above and the next plan at a notice (agent_handover.c) both weigh by it. */
typedef struct {
    double gain_s, stay_s, restart_s, exposure_s, cost_s;
} ah_join_weighed_t;
bool ah_agent_join_weigh(agent_t *a, const ah_plan_result_t *from, const ah_plan_result_t *to, ah_join_weighed_t *w);
ah_join_verdict_t ah_agent_join_restarts_now(agent_t *a, const ah_plan_result_t *r, const char *when);
/* agent_join.c: joins pending while the job trains (its launch past its first step): true when the
 * restart onto the plan with them pays (that plan made the next plan, ah_agent_next_plan_join; the
 * caller sends the notice); while it does not pay they stay pending, and a plan that is not better
 * (or none) drops them until the next join. */
bool ah_agent_consider_join(agent_t *a, const char *when);
/* agent_join.c: the removals seen so far (counted to now) as join_rule.h's churn; the mean recovery
 * after a preemption with the steps it redid (the join's cost before any): the exposure's recovery. */
ah_churn_t ah_agent_churn(agent_t *a);
double ah_agent_preempt_cost_s(const agent_t *a);
/* agent_join.c: the churn arrays (false: out of host memory), freed; the spot node-seconds up counted
 * to now; a removal of `node` by a change at t_s (from the agent's start) counted. */
bool ah_agent_join_init(agent_t *a);
void ah_agent_join_free(agent_t *a);
void ah_agent_churn_tick(agent_t *a);
void ah_agent_churn_removed(agent_t *a, int node, double t_s);
/* agent_avail.c: the notice to node's ranks (NULL: every rank), a stop begun with cause when none
 * is under way (its clock started), said; the events file's events now due applied (re-read when it
 * grew); joins pending taken in by a stop when the restart pays (ah_agent_consider_join). */
void ah_agent_begin_stop(agent_t *a, ah_agent_cause_t cause, const char *node);
void ah_agent_apply_events(agent_t *a);
void ah_agent_join_if_pays(agent_t *a, const char *when);
/* agent_handover.c: the next plan at a notice, made over the nodes up and written into the run
 * directory of every host of the job; said and skipped when that fails. */
void ah_agent_next_plan(agent_t *a);
/* agent_handover.c: at a join, r (the plan with the joined nodes the restart is for; taken over) as the
 * next plan, written to the hosts; t0: when its planning began. */
void ah_agent_next_plan_join(agent_t *a, ah_plan_result_t *r, double t0);
/* agent_handover.c: during a join's stop, a node of its next plan preempted (ah_agent_replan_in_stop):
 * the next plan made again over the nodes up and written to the hosts (kept, said, when none fits). */
void ah_agent_next_plan_again(agent_t *a);
/* The next plan into *out when every node it uses is still up (then true; with a node up beyond the
 * ones it was made for, a plan over every node up instead when it uses each node of the next plan,
 * else the next plan and join_pending set); dropped either way. */
bool ah_agent_take_next_plan(agent_t *a, ah_plan_result_t *out);
void ah_agent_next_plan_free(agent_t *a);

/* agent.c: the "plan" or "replan" metrics event of the running plan (a->cur): `secs` its planning,
 * the nodes up; in_place: the plan the trainers changed onto in place (a replan with "in_place": true,
 * no launch; docs/elastic.md "Metrics"). */
void ah_agent_plan_event(agent_t *a, const char *event, double secs, bool in_place);

/* ---- in place (agent_inplace.c; issue 36 "Survivors keep their processes") ---- */

/* ---- parked ranks (agent_parked.c; docs/elastic.md "Parked ranks", re-admission) ----
 * The launch's processes, one a device of the plan it was started with (a process keeps its device through
 * every change in place): job j's k-th rank (launch_common.c ah_launch_hostjobs: its AH_WORLD_RANKS in order),
 * parked while its job runs and the running plan does not use its device. The joined jobs' processes are not
 * listed (not re-admitted: a plan that wants their device relaunches, as before). */
void ah_agent_procs_launch(agent_t *a, const ah_plan_t *plan);
void ah_agent_procs_free(agent_t *a);
/* After a change in place (a->cur the plan taken; ev its "reconfigure" event): which processes are parked now; with
 * "join" > 0 (a job admitted), those still parked are spent (ah_agent_proc_t). */
void ah_agent_procs_changed(agent_t *a, const json_t *ev);
/* The parked process on device node:index of a host that does not leave (a->leaving), not spent, or -1. */
int ah_agent_parked_on(const agent_t *a, const char *node, int index);
/* The request's "readmit" for next: {"job", "rank", "to"} for each rank of next whose device a parked process holds
 * and no running rank takes (ranks[r]: the running plan's rank r's rank under next, -1 none); *n their count.
 * An empty array when none. */
json_t *ah_agent_readmit(const agent_t *a, const ah_plan_t *next, const int *ranks, int *n);


/* At a launch (job the launcher is about to start): whether it is joined (--in-place and a launcher with
 * leave_hosts; said once when the launcher has not), its jobs recorded for the requests. */
void ah_agent_inplace_launch(agent_t *a, ah_launch_job_t *job);
/* At an events-file notice of the nodes in `noticed` (leaving[] set), t its clock's start, the next
 * plan made: the request written instead of the SIGTERM when the change can be made in place (true;
 * before the trainer has said where it resumed, written once it has: ah_agent_inplace_watch); else why
 * not said (false: the caller sends the notices). */
bool ah_agent_inplace_begin(agent_t *a, const bool *noticed, double t);
/* While a request waits: written once the trainer has said where it resumed when it waited for that;
 * not taken (or not written) by its deadline (the grace period less the save estimate): the notice's
 * stop instead (SIGTERM to the leaving nodes' ranks, the clock kept), said with why. */
void ah_agent_inplace_watch(agent_t *a);
/* A request waiting when another notice comes or the job ends: the same fallback (why said). */
void ah_agent_inplace_fallback(agent_t *a, const char *why);
/* Whether a change in place could be asked at a notice now, whatever the next plan (a joined launch
 * running, time left in the grace period less the save estimate, a step to change at); whether the
 * change onto next can be made in place by its devices (next uses exactly the staying ranks' devices;
 * false with why). */
bool ah_agent_inplace_askable(const agent_t *a);
bool ah_agent_inplace_fits(const agent_t *a, const ah_plan_t *next, char *why, size_t cap);
/* The save the in-place deadline leaves room for at a notice now (the grace period less it): 0 when the change's step
 * is written behind, else the save estimate (agent_inplace.c save_room says when). */
double ah_agent_inplace_save_room(const agent_t *a);
/* The save a change's step takes before its move as far as the agent can tell (agent_inplace.c): 0 when the trainers
 * write it behind, else the save estimate; incoming: the change takes ranks in (a join, a re-admission, a free host). */
double ah_agent_change_save_s(const agent_t *a, bool incoming);
/* A trainer event line of the running launch (checkpoint: the save estimate; reconfigure: the change
 * done: the leaving jobs reaped, their disks dropped, the next plan the running one, a preempt event and
 * a recovery opened; after a fallback too, the notice's stop then called off, when the survivors got no
 * notice and were not killed; else ignored, said). */
void ah_agent_inplace_on_event(agent_t *a, const char *ev, const json_t *line);
/* A step line after the launch's first: true when it is the first after a change in place (the
 * recovery then resumed at it: the caller closes it). When the change's step S was to be written behind and its move
 * failed (the trainer's "save": "none", "redone" S - C) and this line is step C, the history is rewound to C first
 * (the steps C..S-1 recomputed); any other step is left to ah_history_add (an earlier one breaks the history). */
bool ah_agent_inplace_on_step(agent_t *a, int64_t step, double loss);
void ah_agent_inplace_free(agent_t *a);

/* ---- the join in place (agent_inplace_join.c) ---- */

/* The join rule said to re-plan onto joined hosts (the next plan made, ah_agent_consider_join): true when the
 * trainers were asked to take them in place (or, a change in place under way, the join left pending), else
 * false with why said (the caller stops and relaunches). */
bool ah_agent_inplace_join_begin(agent_t *a);
/* While its request waits: not taken by its deadline, or the job stopping: the fallback. */
void ah_agent_inplace_join_watch(agent_t *a);
/* A join's request waiting: withdrawn and the joining jobs dropped, said with why and what follows (then);
 * false when none waited. A notice's own path follows it (agent_avail.c). */
bool ah_agent_inplace_join_withdraw(agent_t *a, const char *why, const char *then);
/* A join's request waiting when its deadline passes or the job ends: withdrawn, the joining jobs dropped and
 * the join's stop begun (the relaunch under the next plan; its grace period from now, its recovery from the
 * join's ask), said with why. */
void ah_agent_inplace_join_fallback(agent_t *a, const char *why);
/* A trainer event line: true when it is the join's "reconfigure" (the change done: the next plan the running one,
 * a recovery in place opened, closed at the next step line by ah_agent_inplace_on_step). */
bool ah_agent_inplace_join_on_event(agent_t *a, const char *ev, const json_t *line);
void ah_agent_inplace_join_free(agent_t *a);
/* A notice's change that also takes in free hosts (hosts up that the running plan does not use; join_req 2):
 * the devices of next on them (0 when the launch is not joined, its launcher has no join_hosts, or their admission
 * does not fit a deadline left_s away, INFINITY: not checked; note, may be NULL, then says why, "; ..."); their
 * jobs started into the
 * running one (false with why: the admission does not fit the change's deadline, or join_hosts failed), their
 * "join" and "join_admit_s" put in the change's request, ended at its fallback, and taken as the launch's at its
 * "reconfigure" (the count started; warned when the event's differs). */
int ah_agent_inplace_join_devices(const agent_t *a, const ah_plan_t *next, double left_s, char *note, size_t cap);
bool ah_agent_inplace_join_start(agent_t *a, char *why, size_t cap);
void ah_agent_inplace_join_request(const agent_t *a, json_t *req);
void ah_agent_inplace_join_drop(agent_t *a);
int ah_agent_inplace_join_taken(agent_t *a, const json_t *ev);

#endif
