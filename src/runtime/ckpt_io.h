/* A training job's checkpoint session: what each rank saves and loads through src/ckpt/, the
 * node commit, the cloud upload, resume from the cheapest tier, and preemption notices.
 *
 * Save (in ah_ckpt_session_step_done, collective; step N = the state after N updates):
 *   every rank holds, for its blocks, shards named block-LLL.tpT-K (T its TP degree, K its TP
 *   index), plus embed.tpT-K (wte, and GPT-2's wpe) on stage 0 and head.tpT-K (the final norm, and
 *   lm_head.weight when untied) on the last stage
 *   (ckpt/placement.h). A shard holds each tensor three times: NAME (weights), NAME.exp_avg and
 *   NAME.exp_avg_sq (AdamW m and v), in the TP shard's own shape (docs/checkpoints.md "Trainer
 *   integration"); metadata gives the TP degree and index and the AdamW step. Data-parallel
 *   replicas hold identically named shards: on one node the lowest rank holding a shard writes
 *   it; every rank of the node then finishes its part, a node barrier, and the node's lowest rank
 *   commits the node's manifest (step, data position and seq_len, plan hash, model, the data's
 *   shard list: names and token counts, when it fits AH_CKPT_DATA_MAX, else the checkpoint event says
 *   "data_kept": false) into LOCAL_ROOT/NODE/. A
 *   node commits only once every node wrote its parts; a failed write or commit on any node (a
 *   full disk) takes the step back on every node (ckpt_rollback: no node keeps it committed), and
 *   training goes on from the previous step committed everywhere. After a step commits on every
 *   node, each node keeps its o->keep newest committed steps (retention). With a cloud, each node's lowest rank hands the shards whose lowest holder in
 *   the whole job is on its node to a background uploader (one copy of each shard; manifest last).
 * Resume (ah_ckpt_session_resume, collective): the nodes' lowest ranks share their committed
 *   manifests (the peer tier, ckpt/peer.h); every rank picks the newest step for which some TP
 *   degree's full set of shards is listed in a tier, then fetches its own shards local -> peer
 *   (over MPI from the rank whose node dir has it) -> cloud with checksums (ckpt/restore.h),
 *   reshards if the TP degree changed (ckpt/reshard.h), and sets the trainer's weights, moments
 *   and data position. A step with a file no tier holds intact is skipped for the next older one
 *   (said on stderr; the node leaders then remove their steps newer than the one restored), and
 *   when none restores the resume is refused. A step saved for another model, with a shard list
 *   other than the trainer's data or another seq_len, is refused, naming the first difference; so
 *   is a root whose committed steps are all under node names the plan does not have. A cloud
 *   that cannot be listed (down, a wrong endpoint or bucket) is retried (o->cloud_retries, each
 *   said on stderr), then left out with a warning when the other tiers restore a step, and when
 *   they restore none the resume is refused naming the tier and its error (the cloud may hold the
 *   run's steps), unless o->start_over_if_unreadable.
 * Preemption (ah_ckpt_session_step_done, collective, after every step): see preempt.h; whether a
 *   notice saves is ckpt/policy.h's rule.
 *
 * Events for the metrics file are JSON objects returned on rank 0 (NULL elsewhere); the caller
 * writes them. Ownership: the session borrows the trainer; events are the caller's (json_decref).
 */
#ifndef AH_RUNTIME_CKPT_IO_H
#define AH_RUNTIME_CKPT_IO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt/placement.h"
#include "ckpt/reshard.h"
#include "runtime/trainer.h"

/* Retention (--keep N): after a step commits on every node, each node keeps its N newest
 * committed steps and removes the older ones. */
#define AH_CKPT_KEEP_DEFAULT 2
#define AH_CKPT_KEEP_MAX 1000000

typedef struct ah_ckpt_opts {
    const char *local_root;  /* DIR: node X's disk is DIR/X/ (NULL: no checkpoints) */
    const char *cloud;       /* s3://BUCKET/PREFIX or NULL */
    const char *s3_endpoint; /* NULL or "" for AWS */
    int64_t every;           /* save after every K steps (0: only on a preemption notice) */
    int64_t steps;           /* the run's last step (--steps): with every > 0 it is saved too */
    int keep;                /* --keep: committed steps kept per node (0: AH_CKPT_KEEP_DEFAULT) */
    const char *run_dir;     /* rank-R.json and preempted.json go here (NULL: none) */
    double grace_s;          /* preemption grace period, s: a notice saves if that fits (0: never) */
    /* The Varuna-like policy (`autohet run --recovery cloud-only`): every node's disk is dropped at
     * a stop, so a notice brings no save (it would go to a disk that is dropped); the relaunch
     * takes the cloud's newest complete step. */
    bool cloud_only;
    /* The caller resumes (ah_ckpt_session_resume). Without it, a node root that holds committed
     * steps is refused at open: a run from step 0 would save beside an earlier run's steps. */
    bool resume;
    /* A resume keeps the learning-rate schedule its step was trained under (the manifest's
     * "schedule": --steps, --warmup, --lr): one that gives a step left to train another learning
     * rate is refused, naming both, unless this is set (--reschedule); then the change is said on
     * stderr. A manifest without one (an older autohet) is taken unchecked. */
    bool reschedule;
    /* The cloud's patience: an S3 request with no progress for cloud_timeout_s fails (0:
     * AH_CKPT_CLOUD_TIMEOUT_DEFAULT); a resume lists the cloud cloud_retries more times (waiting
     * 1 s, 2 s, ... between) before the tier counts as unreadable. */
    int cloud_timeout_s;
    int cloud_retries;
    /* A resume that cannot list the cloud and finds no step in the other tiers is refused (the
     * cloud may hold the run's steps: a run from step 0 would save beside them), unless this is
     * set (--start-over-if-unreadable): then it starts from step 0, saying so. */
    bool start_over_if_unreadable;
    /* --ckpt-sync: every save writes before the next step starts. Without it (the default), a
     * periodic save copies each rank's pieces into host memory (a snapshot) and a background thread
     * writes them while training goes on; the step commits at a later step boundary once every rank
     * wrote its part (docs/checkpoints.md "Asynchronous checkpoints"). */
    bool sync;
    /* --replica-memory-gb G: each committed step's pieces are also held in the host memory of
     * another node (ckpt/replica.h), at most G x 1e9 bytes per host; what does not fit stays on
     * the disks (the checkpoint event says so). 0: off. A resume reads the memory tier only when
     * on. replica_root (--replica-root; NULL: /dev/shm/autohet/<key of local_root>) is the base:
     * node X keeps its replicas in BASE/X/, a tmpfs on its own host. */
    double replica_memory_gb;
    const char *replica_root;
    /* --replica-when-it-pays (autohet run passes it with --replica-memory-gb): the periodic saves are
     * not replicated under a plan whose every piece is on two nodes' disks (ckpt/replica.h
     * ah_replica_pays: the peers' disks cover the loss of any one node), said once; a notice's save
     * still uses the memory tier (the leaving nodes' own pieces, the handover). */
    bool replica_if_pays;
} ah_ckpt_opts_t;

#define AH_CKPT_CLOUD_TIMEOUT_DEFAULT 30
#define AH_CKPT_CLOUD_RETRIES_DEFAULT 3

typedef struct ah_ckpt_session ah_ckpt_session_t;

/* Collective: node communicator, rank-R.json, SIGTERM handler, cloud uploader. With a local root,
 * each rank makes its node's directory LOCAL_ROOT/NODE/ and checks it can write there, so a root
 * that cannot hold a checkpoint stops the job before its first step; without o->resume the
 * directory must hold no committed step (the error names the root, the node and the newest step).
 * Failures are agreed on by every rank. */
ah_status_t ah_ckpt_session_open(ah_trainer_t *tr, const ah_ckpt_opts_t *o, ah_ckpt_session_t **out,
                                 ah_error_t *err);
/* Collective. *start gets the iteration to run next: the restored step, or 0 when no tier has a
 * complete checkpoint (then *found is false and the trainer keeps its initial weights). *event
 * (rank 0) is the "recover" event. */
ah_status_t ah_ckpt_session_resume(ah_ckpt_session_t *s, int64_t *start, bool *found, json_t **event,
                                   ah_error_t *err);
/* Collective, after `done` updates (iteration done - 1 finished): polls for preemption notices,
 * saves when done is a multiple of --ckpt-every or the last step (o->steps; with --ckpt-every only),
 * or a notice came and the grace period allows.
 * *events (rank 0, may stay NULL) gets an array of "checkpoint" / "preempt" events. *stop is set
 * when the job must exit with AH_PROTO_EXIT_PREEMPTED (preempted.json is written by then). A failed save
 * is an event, not an error; errors are communication failures. */
/* With a cloud, a "checkpoint" event has "cloud_step": the newest step complete in the cloud then
 * (every uploading node finished it; the step just saved is still uploading), "cloud_behind": true
 * when the cloud lacks the step saved before this one too, and "cloud_error" when an upload failed
 * since the previous event (ckpt_cloud.c). */
ah_status_t ah_ckpt_session_step_done(ah_ckpt_session_t *s, int64_t done, json_t **events, bool *stop,
                                      ah_error_t *err);
/* Before the step whose boundary is `done` (iteration done - 1): when that boundary takes an
 * asynchronous save, the step's AdamW writes the snapshot too (ckpt_fuse.c; the CPU backend). Local;
 * NULL is fine. */
void ah_ckpt_session_before_step(ah_ckpt_session_t *s, int64_t done);
/* Commits the asynchronous snapshot still in flight, if any, when the loop stops for a reason of
 * its own that every rank agreed on (a non-finite step): the state it holds is good, and dropping
 * it would lose it. Collective; its "checkpoint" event, if any, in *events on rank 0 (NULL
 * elsewhere); NULL s is fine. */
ah_status_t ah_ckpt_session_commit_pending(ah_ckpt_session_t *s, json_t **events, ah_error_t *err);
/* Collective, at an in-place reconfiguration's boundary after `done` updates (runtime/reconfig.h): the
 * save of step done as at a notice (ckpt_notice.c; the nodes of the ranks that pass leaving count as
 * the noticed ones), always made (no grace period to fit), a periodic snapshot in flight committed
 * first; its "checkpoint" events in *events on rank 0 (NULL elsewhere). A save that fails is its
 * event, as elsewhere: the resume that follows then takes the newest step committed. NULL s: nothing. */
ah_status_t ah_ckpt_session_save_leaving(ah_ckpt_session_t *s, int64_t done, bool leaving, json_t **events,
                                         ah_error_t *err);
/* Collective, at an in-place change's boundary after `done` updates, before the state moves (docs/elastic.md
 * "Durability"): the nodes of the ranks that pass leaving count as the noticed ones, a periodic snapshot in
 * flight is committed (its "checkpoint" event in *events on rank 0), and *defer (the same on every rank) says
 * whether the save of step done may be taken off the path, written behind from the moved state
 * (ah_ckpt_session_save_behind): with a local root, without --ckpt-sync, step done not committed already, and
 * every file of the last committed step C (none: nothing to keep) listed by a staying node's disk or by its
 * host's memory tier, so that a kill before step done commits resumes from C. Else why (on every rank) says why
 * not, and the caller saves as before (ah_ckpt_session_save_leaving). NULL s: nothing. */
ah_status_t ah_ckpt_session_change_begin(ah_ckpt_session_t *s, int64_t done, bool leaving, json_t **events,
                                         bool *defer, char *why, size_t cap, ah_error_t *err);
/* Collective over the new world, its state of step moved in (not saved at the change): the snapshot of step
 * handed to the background writer (one started when the session has none: a run without --ckpt-every), to
 * be committed at a later step boundary as every asynchronous save is (ckpt/async.h), at the latest at the
 * run's last step, a notice or the next change. NULL s or no local root: nothing. */
ah_status_t ah_ckpt_session_save_behind(ah_ckpt_session_t *s, int64_t step, ah_error_t *err);
/* Where a stage's pieces come from, group by group (the resume's fetched files; the in-place move's
 * buffers, runtime/reconfig_move.h): open readies the nf pieces (TP indices idx at degree T, as
 * ah_reshard_pieces lists them) of the gi-th group, read reads from them (ckpt/reshard.h), close
 * follows every open, failed or not. */
typedef struct {
    ah_status_t (*open)(void *ctx, int gi, const int *idx, int nf, ah_error_t *err);
    ah_reshard_read_fn read;
    void (*close)(void *ctx);
    void *ctx;
} ah_ckpt_piece_source_t;
/* Sets tr's weights and AdamW moments of the groups gs (ng of them, saved at TP degree T) from src,
 * resharded to tr's TP degree (ckpt/reshard.h); tensors no group covers keep their values. Not
 * collective. */
ah_status_t ah_ckpt_load_stage(ah_trainer_t *tr, const ah_shard_group_t *gs, int ng, int T,
                               const ah_ckpt_piece_source_t *src, ah_error_t *err);
/* Whether tr's state of step may go on under plan next, as a resume of step under next would check it
 * (ckpt_resume.c): the same model (every field ah_model_diff compares) and the same seq_len, since the data
 * position counts samples of seq_len + 1 tokens; false with err naming the field (an in-place change's
 * request, cli_train_inplace.c, is refused so). The shards and the learning-rate schedule are the run's
 * flags, which a change keeps. Not collective. */
ah_status_t ah_ckpt_check_continues(const ah_trainer_t *tr, int64_t step, const ah_plan_t *next, ah_error_t *err);
/* After the in-place move (runtime/reconfig_move.h) set tr's state of step `step` without a resume: the
 * session counts step as its newest committed one when `committed` (the change's save committed it), as
 * a resume of it would. NULL s: nothing. */
void ah_ckpt_session_adopt(ah_ckpt_session_t *s, int64_t step, bool committed);
/* The newest step committed on every node by this session (or restored by its resume), -1 when
 * none; NULL is fine. */
int64_t ah_ckpt_session_last_saved(const ah_ckpt_session_t *s);
/* Seconds the loop waited, in total, for asynchronous snapshots still being written when the next
 * save, a notice or the last step came (0 with --ckpt-sync; NULL is fine). */
double ah_ckpt_session_wait_s(const ah_ckpt_session_t *s);
/* One line (no newline) for the end of a run that trained `done` steps: the newest step a resume
 * restores (committed on every node, or restored) and how many steps it would redo. */
void ah_ckpt_session_describe(const ah_ckpt_session_t *s, int64_t done, char *buf, size_t cap);
/* After the loop ended at `done` steps without a notice (with in-memory replicas, a run whose last
 * step is committed frees them here: nothing is left to restore): AH_ERR_IO when a save of that step was due
 * (--ckpt-every saves the last step) and did not commit on every node, naming the save's error, the
 * newest restorable step and the steps a resume redoes; else AH_OK. The same on every rank (the
 * save's outcome is agreed). NULL is fine. */
ah_status_t ah_ckpt_session_final(const ah_ckpt_session_t *s, int64_t done, ah_error_t *err);
/* Collective, at the end of a run whose loop finished (no notice, no failure): waits for this
 * node's uploads, then *event (rank 0; NULL without a cloud) is the "cloud" event: "step" (the
 * disk's newest), "cloud_step" (the newest step complete in the cloud, -1 none), "seconds" (the
 * wait) and "cloud_error" (the first upload failure not yet in an event). NULL s is fine. */
ah_status_t ah_ckpt_session_finish(ah_ckpt_session_t *s, json_t **event, ah_error_t *err);
/* Waits for queued uploads, then frees everything (not collective; NULL is fine). Returns the
 * first upload failure of this rank's uploader, if any, for the caller to report. */
ah_status_t ah_ckpt_session_close(ah_ckpt_session_t *s, ah_error_t *err);
/* Before the close at an in-place change, on a rank that stays: with periodic asynchronous saves
 * (--ckpt-every), the snapshot buffer outlives the session for the next one opened in this process,
 * which takes it (no allocation, no fault-in at its first save; ckpt_async.c). NULL is fine. */
void ah_ckpt_session_keep_snapshot(ah_ckpt_session_t *s);

#endif
