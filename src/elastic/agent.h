/* The elastic agent (autohet run): plans, launches `mpirun ... autohet train --resume`, watches
 * the job and the availability source, and on a change stops, re-plans and relaunches.
 * docs/elastic.md describes the protocol with the trainer and every measured figure.
 *
 * Availability sources:
 *  - an event file in the Oobleck trace format (`time_ms,add|remove,NODE`, times from the agent's
 *    start). NODE is a node name of the cluster, or a trace id "node" then digits ("node3"; any
 *    other name is refused, named, so a typo never lands on a real node): trace ids are
 *    mapped, in natural order of their number, onto the cluster's spot nodes in cluster order
 *    (ah_agent_events_load fills the mapping so the caller can print it);
 *  - a SIGTERM that someone else sends to a node's ranks: the trainer saves if it can, writes
 *    RUN_DIR/preempted.json naming the nodes and exits with status 75.
 *
 * On a removal of node X that the running plan uses: a notice (SIGTERM) to X's ranks through the
 * launcher, wait for exit status 75 until the grace period ends, then SIGKILL what is left; drop
 * X's disk, WORK/local/X/ (the disk goes with the node); re-plan on the nodes still up (nodes
 * that came back meanwhile included); relaunch with --resume. An added node: the agent re-plans with
 * it and restarts (SIGTERM to every rank: they stop at the next step boundary and save) when the new
 * plan is predicted better and the restart pays over the expected stay (elastic/join_rule.h; decided
 * at the join, and while it does not pay at the next join, checkpoint or launch's first step).
 *
 * Metrics (merged JSONL at opts.metrics): every step line and trainer event of every launch but
 * preempt and recover (checkpoint, nonfinite, overflow), with "launch": K added, plus the agent's
 * events: plan, replan, confined (a re-plan kept in one region, agent_plan.c), preempt, recover
 * (recovery seconds = from the preemption notice to the first finished step after it, split into
 * stop, replan, start-up, transfer and first step; bytes,
 * files and seconds per tier from the trainer), join, unreachable, done; and the trainer's own
 * recover event as "restore" (what its restore read, the copies another tier replaced). The file
 * is appended to: a rerun in the same work directory resumes from its checkpoints, and its lines
 * (from its own "plan" event, times counted from 0 again, launches numbered on from the earlier
 * run's) follow the earlier run's. When the earlier agent was killed (no "done" event), the rerun
 * first merges what its last launch's trainer wrote after that (steps, the save at the notice its
 * death sent), then a preempt event, cause "agent killed", whose recovery closes at the rerun's
 * first step.
 *
 * Library code: nothing is printed; progress lines go to opts.log. Ownership: ah_agent_result_t
 * owns its arrays; free with ah_agent_result_free. */
#ifndef AH_ELASTIC_AGENT_H
#define AH_ELASTIC_AGENT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt/policy.h"
#include "core/status.h"
#include "planner/planner.h"

/* ---- availability events (events.c) ---- */

typedef struct ah_agent_event {
    double t_s;  /* from the agent's start */
    int node;    /* index into the cluster's nodes */
    bool add;
} ah_agent_event_t;

typedef struct ah_agent_events {
    ah_agent_event_t *ev; /* in time order */
    int n;
    char mapping[1024];   /* "node1 -> slow-0, node2 -> slow-1" ("" when every id is a name) */
    int ignored;          /* events whose id found no spot node left */
} ah_agent_events_t;

/* Reads an Oobleck event file (spec/trace.h) and resolves its ids on `cluster`. Errors name the
 * file and say what ids are allowed (node names, or nodeN when the cluster has spot nodes). */
ah_status_t ah_agent_events_load(const char *path, const ah_cluster_t *cluster, ah_agent_events_t *out,
                                 ah_error_t *err);
void ah_agent_events_free(ah_agent_events_t *e);

/* ---- the agent (agent.c; its decisions agent_logic.h, its hosts launcher.h) ---- */

typedef struct ah_agent_opts {
    const char *model;        /* preset or HF config.json */
    const char *cluster;      /* built-in name or cluster JSON */
    const char *data;         /* token file for the trainer */
    const char *events;       /* NULL: only signals to the ranks */
    const char *work_dir;     /* plans, run dirs, WORK/local/NODE/ checkpoints; created */
    const char *metrics;      /* merged JSONL; NULL: WORK/metrics.jsonl */
    const char *autohet;      /* the program the ranks run (this one's path) */
    const char *launcher;     /* "local" (NULL too): one machine; "ssh": node names are host names */
    const char *rsh_agent;    /* ssh: the remote command (NULL: ssh), also Open MPI's plm_rsh_agent */
    const char *local_root;   /* ssh: host X's disk is LOCAL_ROOT/X/ on host X (required); local:
                                 NULL (WORK/local) */
    const char *mpirun;       /* the launcher's mpirun: "mpirun" or a path */
    const char *mpirun_args;  /* its flags before -np; NULL: local: the single-machine set
                                 (launcher.h); ssh: none beyond the launcher's own */
    ah_planner_opts_t planner;/* train settings (precision fp32 for the CPU trainer) */
    int64_t steps;
    int64_t ckpt_every;
    double grace_s;           /* notice -> forced stop; also given to the trainer */
    const char *const *train_args; /* more flags for autohet train, verbatim */
    int n_train_args;
    bool quiet;               /* pass --quiet to the trainer */
    bool cloud_only;          /* Varuna-like recovery: every node's disk is dropped at a stop, so the
                                 state comes from the cloud tier only (needs --cloud in train_args) */
    bool no_handover;         /* at an events-file notice, no next plan before the stop (agent_handover.c) */
    bool in_place;            /* launches joined (one mpirun a host; launcher.h leave_hosts), and at an events-file
                                 notice the survivors change to the next plan in their own processes when they can
                                 (agent_inplace.c; runtime/reconfig.h), else the stop and relaunch, said */
    bool exposure_aware;      /* the plan choice weighs the rollback of pieces held on one spot node only
                                 (agent_exposure.h; simulate --exposure-aware): a baseline's plan taken
                                 when it earns more, said in the plan line */
    bool allow_unencrypted_wan; /* launch plans whose traffic crosses a region boundary on a link not
                                 marked private (else each launch is refused before its ranks start:
                                 plan_out.h ah_plan_wan_check; pass the flag to train in train_args too) */
    double poll_s;            /* watch period; 0: 0.01 s */
    int max_restarts;         /* a failure the agent cannot explain is relaunched at most this often within
                                 restart_window_s (agent_logic.h "the failure policy"); 0: never */
    double restart_window_s;
    double join_horizon_s;    /* the join rule's stay (join_rule.h): > 0 a fixed horizon, seconds; 0: from the
                                 removals seen */
    double step_timeout_s;    /* the step timeout's floor (0: AH_AGENT_STEP_TIMEOUT_S): a job with no
                                 metrics line for max(this, 10 x max(predicted iteration, longest gap
                                 seen)) has its hosts probed; those that do not answer are lost
                                 (agent_logic.h). The local launcher has no host to ask: the ranks that
                                 stopped progressing (launcher.h stalled) are named, their nodes lost */
    volatile sig_atomic_t *interrupt; /* counted by the caller's signal handler: at 1, a notice to every
                                 rank (the trainer saves within grace_s), the job stops and the run
                                 returns AH_ERR_INTERRUPTED; at 2, the job is stopped at once */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
} ah_agent_opts_t;

#define AH_AGENT_MAX_RESTARTS 100   /* --max-restarts' range: 0 .. this */
#define AH_AGENT_STEP_TIMEOUT_S 30.0 /* the step timeout's floor when none is given */
#define AH_AGENT_PROBE_FLOOR_S 5.0   /* a joined launch's quiet spell probed after max(this, ... */
#define AH_AGENT_ANSWER_S 15.0      /* a test command's deadline, each of its two tries (ssh's ConnectTimeout: 10 s) */
#define AH_AGENT_PROBE_FACTOR 3.0    /* ... this x the longest gap or predicted iteration) (agent_state.h) */

void ah_agent_opts_default(ah_agent_opts_t *o);

/* One mpirun of the run. */
typedef struct ah_agent_launch {
    char plan_path[512];
    char plan_desc[512];     /* "4 pipelines on fast-0:0 fast-0:1 ...: tp 1, mb 1 ..."; after a change in
                                place, this and the next two are the running plan's */
    int devices;
    double predicted_s;      /* plan's predicted iteration time */
    char roofline_types[256]; /* with --profile: the plan's GPU types it has no entry for at the plan's
                                 settings, timed by the roofline ("" when it covers them all) */
    int64_t first_step;      /* first step index trained (-1: none finished) */
    int64_t end_step;        /* one past the last step finished */
    double step_s_sum;       /* measured step seconds, summed */
} ah_agent_launch_t;

/* AH_CAUSE_LOST: a host of the plan stopped answering the launcher after the job failed with no
 * notice (it vanished: detected by mpirun's exit, then the launcher's reachable test). */
/* AH_CAUSE_AGENT: the agent of an earlier run in the work directory ended without its "done" event
 * (killed outright): its job got SIGTERM from its death (launcher.h); this run takes its launch
 * over (agent_takeover.c). */
/* AH_CAUSE_RESTART: the job failed with no notice while every host of the plan answered, and not on
 * the user's error (a rank killed, a crash): relaunched under the failure policy (max_restarts). */
typedef enum {
    AH_CAUSE_EVENT = 0,
    AH_CAUSE_SIGNAL,
    AH_CAUSE_JOIN,
    AH_CAUSE_LOST,
    AH_CAUSE_AGENT,
    AH_CAUSE_RESTART
} ah_agent_cause_t;
/* "events file", "SIGTERM", "node joined", "host lost", "agent killed", "job failed" */
const char *ah_agent_cause_name(ah_agent_cause_t c);

/* One stop and relaunch. */
typedef struct ah_agent_recovery {
    ah_agent_cause_t cause;
    char nodes[256];          /* nodes that left (or joined), space separated */
    char joined[256];         /* in place at a notice: the free hosts taken in with the change ("" none) */
    double t_notice_s;        /* from the agent's start */
    int64_t stopped_at;       /* steps finished when the job stopped */
    bool saved;               /* the trainer saved at the notice (in place: the step committed at the change) */
    bool behind;              /* in place: the change's step written behind the next step ("save": "async") */
    int64_t redone;           /* in place: the step was to be written behind and the move failed ("save": "none"):
                                 step stopped_at - redone restored in place, redone steps trained again (0 none) */
    bool forced;              /* the grace period ran out: SIGKILL */
    int64_t resumed_at;       /* step the new launch started from */
    double stop_s, replan_s, startup_s, transfer_s, first_step_s, total_s;
    uint64_t bytes[AH_TIER_COUNT];
    double tier_s[AH_TIER_COUNT];
    int files[AH_TIER_COUNT];
    double loss_last_before;  /* loss of step resumed_at - 1 before the stop (NAN if none) */
    double loss_first_after;  /* loss of step resumed_at after (NAN if none) */
    bool complete;            /* a step finished after it */
    bool in_place;            /* the survivors kept their processes (agent_inplace.c): stop_s is the wait for the
                                 step boundary and the save, startup_s the rest of the change (teardown, split,
                                 set-up) */
    double phases[6];         /* in place: the trainer's "reconfigure" seconds: save, teardown, split, init, load, move */
} ah_agent_recovery_t;

typedef struct ah_agent_result {
    ah_agent_launch_t *launches;
    int n_launches;
    int launch_base;          /* launches[k] is launch launch_base + k: numbered on from an earlier run's
                                 in the same work directory (WORK/launch-N/ and plan-N.json are never
                                 reused) */
    ah_agent_recovery_t *recoveries;
    int n_recoveries;
    int64_t steps_done;       /* steps in the final history (0 .. steps_done-1, each once) */
    int64_t tokens;           /* tokens of the final history */
    int64_t recomputed;       /* step lines superseded by a rollback (work lost and redone) */
    bool history_ok;          /* every step 0 .. --steps - 1 once, in order, each with the full batch's
                                 tokens (false for a run that stopped early) */
    bool history_broken;      /* what was trained is itself out of order (skipped, repeated, short) */
    char history_msg[256];    /* why not, when !history_ok */
    double final_loss;
    double wall_s;
    char metrics_path[512];
    int64_t newest_ckpt;      /* the step a rerun would resume from: the last saved (ok checkpoint event) or
                                 restored one; -1 when none */
    int failed_saves;         /* checkpoint events with "ok": false */
    char save_error[512];     /* the last one's error */
    int64_t cloud_step;       /* with --cloud: the newest step complete in the cloud (the last checkpoint
                                 or end-of-run "cloud" event's "cloud_step"), -1 none; -2 no event said */
    char cloud_error[512];    /* the last upload failure an event said, "" none */
    int restarts;             /* failures relaunched under the failure policy */
} ah_agent_result_t;

/* Runs the job to its last step. AH_OK when the trainer finished every step; on an error the
 * result still holds what happened so far (free it either way). */
ah_status_t ah_agent_run(const ah_agent_opts_t *o, ah_agent_result_t *res, ah_error_t *err);
void ah_agent_result_free(ah_agent_result_t *r);

#endif
