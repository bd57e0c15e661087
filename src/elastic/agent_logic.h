/* The elastic agent's decisions as pure functions: no I/O, no clock, no processes. agent.c feeds
 * them what it observed (step lines, the job's exit, events, times) and acts on what they return;
 * tests/test_agent_logic.c checks each alone.
 *
 *  - the history of trained steps: each step once, in order, with the full batch's tokens;
 *    rollbacks counted as recomputed work;
 *  - the recovery accounting: a stop opened at the job's exit, closed at the first step after it
 *    (stop, re-plan, start-up, transfer and first-step seconds; bytes, files, seconds per tier);
 *  - what an exit of the job means (finished, nothing to train, failed, preempted, relaunch);
 *  - what an availability event does to the running plan, when a stop escalates to a kill (when a
 *    joined node is worth a restart: join_rule.h);
 *  - the hang watchdog: how long a job may go without a metrics line before its hosts are probed;
 *  - the backoff of a host that stopped answering: when it is asked again;
 *  - the trainer's command line for a launch.
 *
 * Ownership: ah_history_t owns its loss array (ah_history_free); the rest borrows. */
#ifndef AH_ELASTIC_AGENT_LOGIC_H
#define AH_ELASTIC_AGENT_LOGIC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "elastic/agent.h"

/* ---- the history of trained steps ---- */

typedef struct ah_history {
    double *loss;          /* [steps + 1]: loss of step k of the final history (NAN: trained by an earlier run) */
    int64_t len;           /* steps 0 .. len - 1 are in the history */
    int64_t steps;         /* --steps */
    int64_t batch_tokens;  /* tokens of the full batch: global batch x sequence length */
    int64_t recomputed;    /* step lines superseded by a rollback (work lost and redone) */
    bool ok;               /* every step once, in order, each with the full batch's tokens */
    char msg[256];         /* the first problem, when !ok */
} ah_history_t;

ah_status_t ah_history_init(ah_history_t *h, int64_t steps, int64_t batch_tokens, ah_error_t *err);
void ah_history_free(ah_history_t *h);

/* Where a launch's first step line puts it. */
typedef enum {
    AH_RESUME_IN_HISTORY = 0, /* at or before the history's end: the steps after it are redone */
    AH_RESUME_EARLIER_RUN,    /* launch 0 found an earlier run's checkpoint: steps before it count as trained */
    AH_RESUME_SKIPS,          /* past the history's end: samples skipped (the history is broken) */
} ah_resume_kind_t;

/* Launch `launch`'s first step line is step `first`: rolls the history back to it (counting the
 * steps redone), or takes an earlier run's steps before it (launch 0 on an empty history). */
ah_resume_kind_t ah_history_resume(ah_history_t *h, int launch, int64_t first);
/* A step line of launch `launch`: appended when it is the next step, within --steps, with the full
 * batch's tokens; otherwise the history is broken (the first problem is kept). */
void ah_history_add(ah_history_t *h, int launch, int64_t step, double tokens, double loss);
/* The first launch's checkpoint was at --steps already: every step was trained before (losses
 * unknown here). */
void ah_history_all_earlier(ah_history_t *h);
/* At the end of a run that succeeded: broken unless it holds every step. */
void ah_history_check_complete(ah_history_t *h);
/* Loss of step k in the history (NAN outside it or when trained by an earlier run). */
double ah_history_loss(const ah_history_t *h, int64_t k);

/* ---- after the job exited ---- */

typedef struct ah_exit_facts {
    int status;              /* the job's exit status (-signal) */
    bool agent_stopping;     /* the agent had given a notice (event or join) */
    bool preempted;          /* the trainer wrote preempted.json (a notice reached it) */
    int64_t preempted_step;  /* its "step" (-1: not given) */
    bool saved;              /* its "saved" */
    int64_t trained;         /* steps in the history */
    int64_t steps;           /* --steps */
    int launches;            /* launches so far, the one that exited included */
    double resumed_step;     /* "step" of this launch's recover event from the trainer (NAN: none) */
    bool interrupted;        /* the user asked the agent to stop (Ctrl-C): no relaunch */
} ah_exit_facts_t;

typedef enum {
    AH_EXIT_FINISHED = 0,     /* every step trained */
    AH_EXIT_FINISHED_NOTICE,  /* every step trained; the notice came after the last one */
    AH_EXIT_NOTHING_TO_TRAIN, /* the first launch's checkpoint is at --steps already */
    AH_EXIT_EARLY,            /* exit 0 before the last step without a notice: an internal error */
    AH_EXIT_FAILED,           /* the job failed without a notice */
    AH_EXIT_NOTICE_OUTSIDE,   /* stopped by a notice someone else sent: its nodes leave; relaunch */
    AH_EXIT_STOPPED,          /* stopped by the agent's own notice: relaunch */
    AH_EXIT_INTERRUPTED,      /* stopped (or failed) after the user's Ctrl-C before the last step: the end */
} ah_exit_action_t;

ah_exit_action_t ah_agent_exit_action(const ah_exit_facts_t *f);

/* ---- the recovery accounting ---- */

/* Opens a recovery at the job's exit after a stop: the notice at t_notice_s (from the agent's
 * start), the exit stop_s after it; the step it stopped at is the trainer's (preempted.json) or
 * else the history's end. */
void ah_recovery_open(ah_agent_recovery_t *r, ah_agent_cause_t cause, const ah_exit_facts_t *f, double t_notice_s,
                      double stop_s, bool forced);
/* Launch's first step `step` with loss `loss` after the recovery; the history as it is then. */
void ah_recovery_resumed(ah_agent_recovery_t *r, const ah_history_t *h, int64_t step, double loss);
/* Closes it at its first finished step, now_s from the agent's start, the step took first_step_s:
 * the restore's seconds and per-tier bytes, files and seconds from the trainer's recover event
 * (NULL: none, zeros), and start-up = what of the total is none of the other parts. */
void ah_recovery_close(ah_agent_recovery_t *r, double now_s, double first_step_s, const json_t *trainer_recover);
/* The agent's "recover" metrics event of a closed recovery (docs/elastic.md); the caller's. */
json_t *ah_recovery_event(const ah_agent_recovery_t *r);
/* A change in place's trainer event ev (its "reconfigure"): whether its step was committed at the change, what
 * the trainer's "committed" says (a "sync" save that failed or had no checkpoint root committed nothing);
 * *behind: "save": "async", the step written behind the next one. A trainer without "committed" saved at the
 * change unless "async". */
bool ah_agent_change_saved(const json_t *ev, bool *behind);
/* The steps a change in place trains again (ev its "reconfigure"): its "redone" when "save" is "none" (the step was
 * to be written behind, the move failed: the last committed step C, "resumed_step", restored in place), else 0. */
int64_t ah_agent_change_redone(const json_t *ev);

/* ---- while the job runs ---- */

typedef enum {
    AH_EVENT_NOTHING = 0,      /* an add of a node up, a removal of a node down */
    AH_EVENT_JOIN,             /* the node is up again; the next plan takes it */
    AH_EVENT_JOIN_AT_CHECKPOINT, /* up again while training: taken in at the next checkpoint */
    AH_EVENT_PREEMPT,          /* the running plan uses the node: notice, stop, re-plan */
    AH_EVENT_LEFT_UNUSED,      /* the running plan does not use it (or nothing runs): its disk goes */
} ah_event_action_t;

ah_event_action_t ah_agent_event_action(bool add, bool node_up, bool job_running, bool stopping,
                                        bool plan_uses_node);

typedef enum {
    AH_STOP_WAIT = 0,  /* within the grace period (or the kill is under way) */
    AH_STOP_FORCE,     /* the grace period is over: SIGKILL to the leaving nodes' ranks */
    AH_STOP_KILL_JOB,  /* the job outlived the kill by the margin: kill all of it */
} ah_stop_action_t;

/* After the grace period the leaving node's ranks are killed; Open MPI then ends the others within
 * ~2 s. If mpirun is still there this much later, everything of the job is killed. */
#define AH_AGENT_KILL_MARGIN_S 10.0

ah_stop_action_t ah_agent_stop_action(double since_notice_s, double grace_s, bool forced);

/* At a notice during a stop already under way (its first notice made the next plan): whether the next
 * plan is made again over the nodes up now. At a join's stop, when it uses a node now preempted: every
 * trainer had the join's notice, so they tell that node apart only by the next plan, on which they
 * decide which uploads to drop (runtime/ckpt_notice.c read_by_relaunch, read again when rewritten).
 * Outside a join the trainers tell a noticed node apart themselves, and the handover reads the plan:
 * it is not rewritten under them. */
bool ah_agent_replan_in_stop(ah_agent_cause_t cause, bool next_uses_noticed);
/* Whether a device of plan p is on the node named `node`. */
bool ah_agent_plan_uses(const ah_plan_t *p, const char *node);
/* The first node that plan `from` uses and plan `to` does not (its name, borrowed from `from`), or
 * NULL. A restart onto `to` reads the step saved at the stop from `to`'s nodes only (their disks,
 * their memory, the cloud): what only that node holds is not restorable there. */
const char *ah_agent_plan_leaves_out(const ah_plan_t *from, const ah_plan_t *to);
/* Whether the next plan made at a stop (a notice's or a join's, agent_handover.c) is the relaunch's:
 * every node it uses is still up (up[] over the nodes of c, which next's cluster names). The trainer
 * dropped the cloud uploads whose pieces that plan's nodes hold (runtime/ckpt_notice.c
 * read_by_relaunch), so a re-plan that leaves one of them out would lose them; nodes up beyond it
 * (joined during the stop) come in at the next checkpoint, where a plan that leaves out a node of the
 * running one is refused (ah_agent_plan_leaves_out). */
bool ah_agent_next_plan_holds(const ah_plan_t *next, const ah_cluster_t *c, const bool *up);

/* ---- the hang watchdog ---- */

/* A job that stops writing metrics lines (a host hung: its processes stopped, its link down, no
 * connection closed) is caught by a step timeout: armed at a launch's first step (start-up and
 * restore are not timed), fed every metrics line after it. The timeout is
 * max(floor_s, AH_WATCHDOG_FACTOR x max(the plan's predicted iteration, the longest gap between
 * two lines seen in this launch: a step, a checkpoint, a validation)). */
#define AH_WATCHDOG_FACTOR 10.0

typedef struct ah_watchdog {
    double floor_s, predicted_s;
    double last_t;    /* the last line's time; < 0: not armed (no step yet) */
    double max_gap_s; /* the longest gap between two lines of this launch */
} ah_watchdog_t;

/* A new launch: disarmed until its first line. */
void ah_watchdog_reset(ah_watchdog_t *w, double predicted_s, double floor_s);
/* A metrics line at time now. */
void ah_watchdog_line(ah_watchdog_t *w, double now);
double ah_watchdog_timeout(const ah_watchdog_t *w);
/* Whether the job has been quiet for longer than the timeout at time now. */
bool ah_watchdog_expired(const ah_watchdog_t *w, double now);

/* ---- asking again a host that stopped answering ---- */

/* A host down because it did not answer is asked again (the launcher's `reachable`) at a
 * checkpoint, not at every one: an ask of a host still gone waits for the remote command's timeout
 * (ssh's ConnectTimeout, 10 s for plain ssh; under Slurm about MessageTimeout, 11 s at its default,
 * twice that for a frozen host), during which the agent reads nothing and sends no notice; with a
 * checkpoint every few steps it fell behind by one wait per checkpoint.
 *  - The ask that found it silent does not count: a launch comes between it and the next
 *    checkpoint (a re-plan and relaunch after a loss, or the launch it was planned out of), which
 *    takes seconds, and that first checkpoint asks, so a host only briefly away (a hang that ended)
 *    is taken in as soon as before (a first interval counted from the loss would skip it whenever
 *    the relaunch is quicker: 2-5 s on the test cluster).
 *  - After the n-th re-ask in a row without an answer, the next is due AH_REASK_FIRST_S x 2^(n-1)
 *    later, at most AH_REASK_MAX_S. 10 s first, about one wait: the agent spends at most half its
 *    time on the host at first, a third after the next, and so on; a host gone for good costs 6
 *    waits in its first 10 minutes (at the first checkpoint, then 10, 20, 40, 80, 160 s after each
 *    failure), then one per 300 s: with a 10 s wait, about 3 % of the agent's time.
 *  - 300 s at most: Slurm's default SlurmdTimeout, after which a host lost under --no-kill has left
 *    the allocation anyway; a host back is taken in at most that long (and a checkpoint) after, one
 *    announced by an `add` event at the next checkpoint, with no ask. */
#define AH_REASK_FIRST_S 10.0
#define AH_REASK_MAX_S 300.0

typedef struct ah_reask {
    int failed;   /* re-asks in a row without an answer (0: due at the next checkpoint) */
    double due_t; /* the next ask no sooner than this */
} ah_reask_t;

/* A re-ask that ended at time now got no answer: counted, and the next one due an interval later;
 * returns the interval. Each time a host stops answering it starts from (ah_reask_t){0}. */
double ah_reask_failed(ah_reask_t *r, double now);
/* Whether the host may be asked again at time now. */
bool ah_reask_due(const ah_reask_t *r, double now);

/* ---- the failure policy ---- */

/* A job that failed with nothing the agent can explain (no notice, every host answering, not the
 * user's error) is relaunched from the newest checkpoint: at most max within any window_s seconds,
 * after a backoff of 1, 2, 4, ... s (at most 60) by the restarts already in the window; the run ends
 * at once when the same cause comes back at the same step right after a restart. */
#define AH_AGENT_RESTART_BACKOFF_MAX_S 60.0

typedef struct ah_restarts {
    int max;                           /* --max-restarts */
    double window_s;                   /* --restart-window */
    double t[AH_AGENT_MAX_RESTARTS];   /* when each restart in the window was decided (oldest first) */
    int n;                             /* of them */
    int total;                         /* restarts of the run */
    char last_cause[512];              /* the cause and step of the last restart ("" none) */
    int64_t last_step;
} ah_restarts_t;

typedef enum {
    AH_RESTART_GO = 0,   /* relaunch after *backoff_s */
    AH_RESTART_SPENT,    /* max restarts within the window already */
    AH_RESTART_SAME,     /* the same cause at the same step as the last restart */
} ah_restart_verdict_t;

/* A failure with `cause` at `step` (steps trained) at time now_s: whether it is restarted, and
 * after how long; a GO is counted. */
ah_restart_verdict_t ah_restart_decide(ah_restarts_t *r, double now_s, const char *cause, int64_t step,
                                       double *backoff_s);

/* ---- words ---- */

/* A plan in one line: "tp 1, micro-batch 2: [h0:0 L0-4] x3 [h1:0 L0-2 > h2:0 L2-4] x1" (cut with
 * "..." when it does not fit cap). */
void ah_agent_plan_desc(const ah_plan_t *p, char *out, size_t cap);

/* ---- the trainer's command line ---- */

#define AH_AGENT_MAX_TRAIN_ARGV 120

typedef struct ah_train_argv {
    char *argv[AH_AGENT_MAX_TRAIN_ARGV]; /* NULL-terminated; entries point into o and the buffers below */
    char steps[32], every[32], grace[32], metrics[700];
} ah_train_argv_t;

/* autohet train --plan PLAN --data ... --resume --local-root LOCAL_ROOT --run-dir RUN_DIR --metrics
 * RUN_DIR/metrics.jsonl ...: what every rank of a launch runs. Borrows o, plan_path, local_root,
 * run_dir for the argv's life. */
ah_status_t ah_agent_train_argv(const ah_agent_opts_t *o, const char *plan_path, const char *local_root,
                                const char *run_dir, ah_train_argv_t *out, ah_error_t *err);

#endif
