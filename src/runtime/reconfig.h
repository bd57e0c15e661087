/* In-place reconfiguration of a running trainer (issue 36 "Survivors keep their processes";
 * docs/elastic.md "In-place reconfiguration at a notice"): on a world of separate mpirun jobs
 * (AH_WORLD_JOIN, comm/join.c), some jobs leave at a step boundary while the others go on under a new
 * plan in the same processes: no process start, no MPI_Init, no device context made again.
 *
 * The request: RUN_DIR/reconfigure.json (protocol.h AH_PROTO_RECONFIG_FILE, written whole then renamed
 * by whoever asks: the agent, a test), read by the world's rank 0 at every step boundary:
 *   {"step": S, "leave": [J, ...], "plan": "PATH"}
 *   "step"   the boundary to change at: after S updates (steps 0..S-1 trained under the running plan,
 *            step S the first under the new one); a request read later than S is taken at the first
 *            boundary it is read at; one whose S is not past the step this process started at (or the
 *            last reconfiguration's) is an old one and is ignored;
 *   "leave"  the jobs that leave, by AH_WORLD_JOIN's JOB (the mpirun job's number as launched; may be
 *            empty: the same world under another plan); at least one job stays;
 *   "plan"   the plan the remaining ranks train under: one rank per device of it, numbered as
 *            "ranks" says, else in the order of the world (AH_WORLD_JOIN's, comm/join.c: job by job, or
 *            as AH_WORLD_RANKS numbered them) with the leaving ranks taken out; an absolute path or one
 *            relative to the trainer's working directory;
 *   "ranks"  optional: [n_0, ..., n_(W-1)], one entry per rank of the running world of W ranks: rank r's
 *            rank in the new world (so the new plan's rank n_r), -1 for a rank that leaves or parks: -1
 *            for every leaving job's rank, and for a staying job's rank that the new plan does not use
 *            (it parks: below), the others a permutation of 0..stay-1 (the agent's mapping of
 *            each surviving device to the new plan's rank on it); with "join", the staying ranks' entries
 *            are distinct ranks of the new world, the new jobs' ranks (their AH_WORLD_RANKS) the others;
 *   "join"   optional: K >= 1 new mpirun jobs admitted at the boundary (an in-place join): started with
 *            AH_WORLD_JOIN=DIR:JOB:NJOBS (the running world's DIR, JOB its next job numbers: the world's
 *            NJOBS, then each earlier join's, NJOBS the count after this join) and AH_WORLD_RANKS (their
 *            ranks in the new world, required), they wait for their turn (comm/join.c, at most 60 s
 *            quiet: start them at most that long before the boundary) and learn from the world at the
 *            merge that they are late: no flag; each answers its turn before it connects, and a job that
 *            has not within AH_JOIN_ADMIT_S seconds (default 60) ends the run after the save (comm.h);
 *   "readmit" optional: [{"job": J, "rank": L, "to": R}, ...]: parked ranks taken back into the world (docs/elastic.md
 *            "Parked ranks"): job J's rank L (its rank in its own mpirun, OMPI_COMM_WORLD_RANK), parked at an
 *            earlier change, is the new world's rank R; J in the world and not leaving, L one of its ranks not in
 *            the world; "ranks" is then required, and the staying ranks' entries with the R's a permutation of
 *            0..stay+n-1 (n the entries; with "join", distinct from the staying ranks'). Each is woken by its job's
 *            lowest rank in the new (post-split) world (so J must keep a rank: a request whose J parks all its
 *            ranks there is refused) and merged in after the split (comm.h ah_comm_world_readmit, the request
 *            sent it), before "join"'s admission, which it takes part in; then it takes the state as a joining
 *            rank does (the move to the joiners, or the restore);
 *   "join_first" optional: the first new job's AH_WORLD_JOIN number (>= 0): the turns start at it when it is
 *            past the world's next (a withdrawn or failed join's numbers were taken by the launcher: the agent
 *            counts them; comm.h ah_comm_world_admit);
 *   "join_admit_s" optional: that wait in seconds (> 0, at most 86400), taken instead of the trainers'
 *            AH_JOIN_ADMIT_S: the agent writes its own (the one its deadline for the join counts), so that
 *            the agent and the running world wait by one value whatever the hosts' environments hold.
 *            The plan must then have at least stay + K devices, and as many as the merged world's ranks
 *            (checked after the merge: a mismatch ends the run, after the save, so a relaunch resumes).
 * A request rank 0 cannot read or that is malformed, or that names a job not in the world or leaves
 * none, or whose "ranks" does not fit the world and its leaving jobs as said, or that the caller's check refuses before anything is torn down (cli_train.c: no --local-root
 * to save and resume the step from; a plan that cannot be loaded, is invalid or does not have one
 * device per staying rank), is a warning on stderr (once per version of the file) and is not taken;
 * training goes on. A request whose step is at or past the run's last step is never taken (the run
 * ends first). A request taken is renamed RUN_DIR/reconfigure.done.json by the new world's rank 0,
 * so a later start with the same run directory does not take it again.
 *
 * At the boundary, every rank alive (cli_train.c runs it): (1) the save of step S on every rank, as at
 * a notice (ckpt_notice.c; the leaving jobs' nodes count as the noticed ones), committed before anything
 * else; (2) every rank frees the running plan's runtime: the checkpoint session (its uploads finished)
 * and the trainer (every group split from the world); (3) the world shrinks (comm.h
 * ah_comm_world_shrink: the staying ranks split it, the old one freed); (4) a leaving rank says so and
 * exits 0 after MPI_Finalize; (5) a staying rank loads the new plan, builds the trainer and the
 * checkpoint session on the new world and loads the state moved rank to rank between (1) and (2)
 * (runtime/reconfig_move.h: every rank of the old world, the leaving ones too, in one exchange), or,
 * when the move could not be made, resumes from the newest committed step (the one just saved, read
 * by the usual resume: local, memory, peer, cloud), then trains on. With "join", between (3) and (4):
 * the staying ranks admit the new jobs (comm.h ah_comm_world_admit, the request sent to them), and the new
 * ranks do (5) with them, their pieces of step S sent by the staying ranks that hold them (the move to the
 * joiners), or, when that move cannot be made, read from the tiers as a relaunch would. Rank 0 of the new world
 * writes the "reconfigure" metrics event (protocol.h) with each phase's seconds (the slowest rank's).
 * Jobs leave only a world of joined jobs: in one mpirun job a rank cannot end while the others go on (its
 * MPI_Finalize waits for them all; docs/elastic.md "Can survivors keep their processes?"). A rank whose
 * job stays but which the new plan does not use ("ranks" -1) PARKS instead (in a world of joined jobs, the only one that reads requests): it does (1)-(3)
 * as a leaving rank (the save, its state handed over in the move, its runtime freed, out of the world),
 * then waits asleep until its job ends (comm.h ah_comm_park: the run's end, or its job leaving at a later
 * change) and finalizes with the job's other ranks, unless a later request re-admits it ("readmit"). */
#ifndef AH_RUNTIME_RECONFIG_H
#define AH_RUNTIME_RECONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

#define AH_RECONFIG_LEAVE_MAX 64
#define AH_RECONFIG_RANKS_MAX 8192 /* "ranks": the largest world it renumbers */

typedef struct ah_reconfig_req {
    int64_t step;                     /* S */
    int n_leave;
    int leave[AH_RECONFIG_LEAVE_MAX]; /* the leaving jobs */
    char plan[PATH_MAX];
    int n_ranks;                      /* "ranks"' entries, 0: none given (the world's order kept) */
    int ranks[AH_RECONFIG_RANKS_MAX]; /* the old world's rank r -> its rank in the new one, -1: leaves */
    int join;                         /* "join": the new jobs admitted, 0: none */
    int join_first;                   /* "join_first": the first new job's number, 0: absent (comm.h) */
    double join_admit_s;              /* "join_admit_s": the admission's wait for a job's answer, 0: absent */
    int n_readmit;                    /* "readmit": the parked ranks taken back, 0: none */
    struct {
        int job, rank, to;            /* AH_WORLD_JOIN's job, its rank in that job's mpirun, its new rank */
    } readmit[AH_RECONFIG_LEAVE_MAX];
} ah_reconfig_req_t;

/* The ranks req brings into the world: its joining jobs (one rank each at least) and its re-admitted ranks. */
static inline int ah_reconfig_incoming(const ah_reconfig_req_t *req) { return req->join + req->n_readmit; }

/* The caller's check of a request before it is taken, on the world's rank 0 only (so it must not be
 * collective): true when the request can be carried out with `stay` ranks staying; false with why set
 * (a sentence without a final period) refuses it. */
typedef bool (*ah_reconfig_check_fn)(const ah_reconfig_req_t *req, int stay, void *ctx, char *why, size_t why_size);

/* Collective over the world, at the boundary after `done` updates: rank 0 reads RUN_DIR's request;
 * *due (the same on every rank) when one is to be taken now (its step in (after, done]) and check (may
 * be NULL) accepts it on rank 0, then *req holds it on every rank (the step loop then sets req->step to
 * done, the boundary it is taken at). after: the step this process started at, or the last
 * reconfiguration's. */
/* Rank 0: the last request refused since the previous call (the warning said on stderr), as a metrics event
 * {"event": "reconfigure_refused", "step": S (-1: the request could not be read), "why"} (owned; NULL: none), so the
 * agent sees the refusal at once instead of waiting for its deadline. The step loop writes it after each poll. */
struct json_t;
struct json_t *ah_reconfig_refusal(void);
ah_status_t ah_reconfig_poll(const char *run_dir, int64_t done, int64_t after, ah_reconfig_check_fn check, void *ctx,
                             ah_reconfig_req_t *req, bool *due, ah_error_t *err);

/* Rank 0 of the new world, once the change is done: renames RUN_DIR's request to
 * reconfigure.done.json (a warning when it cannot). */
void ah_reconfig_retire(const char *run_dir);

/* Whether req's leaving jobs include this process's (comm.h ah_comm_world_job). */
bool ah_reconfig_leaving(const ah_reconfig_req_t *req);

/* This rank's rank in the new world by req's "ranks" (before the world shrinks), -1 when req has none (or
 * it leaves): comm.h ah_comm_world_shrink's key. */
int ah_reconfig_new_rank(const ah_reconfig_req_t *req);
/* Whether this rank parks (req's "ranks" gives it -1 while its job stays: comm.h ah_comm_park). */
bool ah_reconfig_parking(const ah_reconfig_req_t *req);

/* The survivors' phases of an in-place reconfiguration, the slowest rank's (s): the save, the teardown of
 * the old plan's runtime, the world's split, the new plan's set-up (without the restore), the restore (0
 * when the state moved rank to rank) and the move (runtime/reconfig_move.h: the exchange over the old
 * world and the pieces sliced into the new stage; 0 when the state came through the checkpoint). */
enum { AH_RECONFIG_PH_SAVE, AH_RECONFIG_PH_TEARDOWN, AH_RECONFIG_PH_SPLIT, AH_RECONFIG_PH_INIT, AH_RECONFIG_PH_LOAD,
       AH_RECONFIG_PH_MOVE, AH_RECONFIG_N_PH };

/* What the state's arrival was, for the event: moved rank to rank (the bytes sent between processes and
 * those a process kept), or restored from the checkpoint (moved false; why_not: why not moved, "" none). */
typedef struct {
    bool moved;
    bool committed;  /* the change's save committed step S (the new session counts it as its newest) */
    int64_t moved_bytes, kept_bytes;
    char why_not[256];
    /* the change's save: written behind the next step from the moved state ("save": "async"), or before the
     * move ("sync"; why_sync: why not behind, "" when not asked) */
    bool save_async;
    int64_t kept_step; /* with save_async: the last step committed before the change (-1 none), the resume
                        * point until step S commits */
    int64_t redone;    /* with save_async, the move failed after the old world's teardown: S never written, C
                        * (kept_step) restored in place, S - C steps trained again ("save": "none"); 0 otherwise */
    char why_sync[256];
} ah_reconfig_state_t;

/* Rank 0 of the new world: the "reconfigure" event (protocol.h) in metrics (may be NULL) and its line on stdout,
 * with every survivor's pid (the same processes as before: none was started); removes RUN_DIR's (may be NULL)
 * rank files of the old world past the new one's. Collective over the new world; ph: AH_RECONFIG_N_PH
 * phases, this rank's; start the step resumed from; state (rank 0's is said): "state": "moved" or
 * "restored", "moved_bytes", "kept_bytes", "not_moved" (why, when restored for a reason). */
void ah_reconfig_say(const char *run_dir, const ah_reconfig_req_t *req, int from, const double *ph, int64_t start,
                     const ah_reconfig_state_t *state, FILE *metrics);

/* Rank 0's check of req's "ranks" against the world (jobs[r]: rank r's AH_WORLD_JOIN job, n ranks, stay of them
 * not in a leaving job; exposed for the unit test): false when it fits (or req has none): -1 exactly for the
 * leaving jobs' ranks, the others a permutation of 0..stay-1; true with why set (no final period) when not. */
bool ah_reconfig_bad_ranks(const ah_reconfig_req_t *req, const int64_t *jobs, int n, int stay, char *why, size_t cap);
/* Whether req's "readmit" does not name parked ranks that can be woken (why set): each entry's job in the world
 * (jobs[r]: rank r's job) and not leaving, keeping a rank in the new world ("ranks"[r] >= 0 for one of its ranks:
 * the rank that wakes it), the entry's rank below the job's size and not in the world (at[r]: rank r's job size
 * << 20 | its rank in the job), no entry twice. */
bool ah_reconfig_bad_readmit(const ah_reconfig_req_t *req, const int64_t *jobs, const int64_t *at, int n, char *why,
                             size_t cap);

/* Parses a request's text (rank 0's reading; exposed for the unit test): AH_OK, or AH_ERR_INVALID naming
 * what is wrong. */
ah_status_t ah_reconfig_parse(const char *text, ah_reconfig_req_t *req, ah_error_t *err);

#endif
