/* The checkpoint session's state and the helpers its save (ckpt_io.c), its resume (ckpt_resume.c)
 * and its cloud side (ckpt_cloud.c) share. Private to those files; the contract is runtime/ckpt_io.h. */
#ifndef AH_RUNTIME_CKPT_SESSION_H
#define AH_RUNTIME_CKPT_SESSION_H

#include <stdlib.h>

#include "ckpt/async.h"
#include "ckpt/cloud.h"
#include "ckpt/handover.h"
#include "ckpt/placement.h"
#include "ckpt/restore.h"
#include "runtime/ckpt_io.h"

/* What a replication did, summed over the job (the same on every rank). */
typedef struct {
    uint64_t bytes;        /* copied into holders' memory */
    uint64_t left_bytes;   /* did not fit a holder's --replica-memory-gb: on the disks only */
    int files, left_files; /* the same in files */
    double seconds;        /* the slowest rank's */
    char error[512];       /* a transfer or write that failed ("" none); the step stays on the disks */
    bool complete;         /* every node the plan uses has every file of its step held by its partner (a
                            * partial one: every leaving node, every file no staying node holds) */
    bool partial;          /* a notice's: only the leaving nodes' pieces no staying node holds were sent */
    int freed_first;       /* holders that freed their older step before the copy (over the budget together) */
} ah_ckpt_replica_stats_t;

/* A rank's figures in the commit's all-gather (ckpt_io.c commit_figures). */
enum { AH_CKPT_SUMS = 6, AH_CKPT_FIGURES = AH_CKPT_SUMS + 3 };

struct ah_ckpt_session {
    ah_trainer_t *tr;
    ah_ckpt_opts_t o;
    ah_placement_t place;    /* who holds which shard; nodes are the plan's */
    int n_nodes, my_node;
    char node_root[AH_CKPT_PATH_MAX];
    ah_comm_t *node;         /* this node's ranks, by world rank */
    int node_rank, node_size;
    char plan_hash[32];
    bool cloud;
    ah_s3_config_t s3cfg;
    ah_s3_url_t url;
    ah_ckpt_uploader_t *up;  /* node leaders with a cloud only */
    int cloud_share;         /* shards this node uploads at a save (0: none, its uploader idles) */
    int64_t cloud_disk_step; /* the disk's newest step at the last cloud check (ckpt_cloud.c), -1 none */
    int64_t cloud_base;      /* the cloud's newest complete step at the resume, -1 none (ckpt_cloud.c) */
    int64_t last_saved;      /* newest step committed on every node, -1 when none */
    int failed_saves;        /* saves taken back (a full disk), and the last one's error */
    char save_error[512];
    double last_save_s;      /* duration of the last save (max over ranks), -1 when none */
    int *hit;                /* n_nodes: nodes with a preemption notice */
    double *figures;         /* world size x AH_CKPT_FIGURES: the commit's all-gather (ckpt_io.c), taken
                              * at the open, whose agreement fails every rank when one has no memory */
    bool noticed;            /* a notice stopped the job */
    double step_end, step_s; /* when the last step_done returned; the step before it took step_s */
    /* Asynchronous saves (ckpt_async.c; not with --ckpt-sync): the background writer, the snapshot's
     * host memory (kept from one save to the next), the step in flight and what the loop waited. */
    ah_ckpt_async_t *writer;
    float *snap_buf;         /* the backend's page-locked host memory where it has some (snap_host_alloc) */
    size_t snap_elems;       /* its capacity in floats */
    size_t snap_used;        /* of which this session's layout uses (snap_grow's need): what the event counts */
    bool snap_keep;          /* at the close, snap_buf handed to the next session (an in-place change) */
    bool snap_adopted;       /* snap_buf is the last session's (ah_ckpt_snapshot_adopt), not yet sized */
    ah_snap_copy_t *snap_copy; /* a GPU backend's side stream and events for the copies into it */
    int64_t pending;         /* step whose snapshot is being written, not committed; -1 none */
    int64_t behind_step;     /* the resumed step written behind (ckpt_resume.c), -1 none: a node whose
                              * disk held it committed already keeps it when that write fails */
    bool behind_held;        /* this node's disk holds behind_step committed, its files verified: its
                              * ranks write nothing of it, its leader commits nothing (the event says) */
    bool behind_extend;      /* this node's disk holds behind_step committed without some file this plan
                              * writes there (another plan's files): its ranks add theirs beside them
                              * and its leader lists them in the manifest (ckpt.h writer_extend, commit_more) */
    double pending_snapshot_s; /* its copy into snap_buf */
    uint64_t pending_adamw_bytes; /* of it, written there by AdamW (ckpt_fuse.c): not copied */
    ah_status_t pending_st;  /* this rank's failure to take or hand over its snapshot, for the commit */
    ah_error_t pending_err;
    double wait_s;           /* the loop's waits for snapshots, in total */
    struct ah_ckpt_fuse *fuse; /* AdamW writing the snapshot (ckpt_fuse.c); NULL: the copies alone */
    /* In-memory peer replicas (ckpt_replica.c, ckpt/replica.h): bytes this host may hold (0: off),
     * the replica base and this node's directory under it. */
    uint64_t replica_budget;
    bool replica_said;       /* the note that some files do not fit was printed */
    bool replica_pays_said;  /* the note that the periodic saves are not replicated was printed */
    bool replica_pays;       /* ckpt/replica.h ah_replica_pays of the plan, at the session's open (so
                              * every rank has the one answer: --replica-when-it-pays) */
    char replica_base[AH_CKPT_PATH_MAX], replica_root[AH_CKPT_PATH_MAX];
    /* The save at a notice, memory first (ckpt_notice.c): the step replicated before its disk commit
     * (-1 none; ah_ckpt_commit_step then does not replicate it again) and what that did; the newest
     * step committed in peers' memory at a notice (-1 none); the last snapshot's seconds (the copy
     * into host memory) and replication's, -1 unknown; whether the last replication was complete. */
    int64_t replicated_step, memory_saved;
    int64_t memory_complete_step; /* the newest step whose replication was complete (-1 none) */
    bool drop_upload;         /* at a notice: this leaving node's uploads are not waited for (a staying
                               * disk or memory holds its pieces, ah_ckpt_notice_uploads) */
    ah_ckpt_replica_stats_t notice_rep;
    double last_snapshot_s, last_replicate_s;
    bool last_rep_complete;
    bool notice_memory_first; /* the notice's rule chose memory first (ah_ckpt_notice_rule) */
    bool notice_handover;     /* ...and the handover (ckpt/policy.h ah_ckpt_notice_handover) */
    /* The handover at a notice (ckpt_notice.c, ckpt/handover.h): what each node reads under the next
     * plan the agent wrote into the run directory (n_nodes 0: none known). */
    ah_handover_needs_t handover;
    char next_plan_seen[96]; /* its file when read (ckpt_notice.c next_plan_stamp): read again when it changed */
    /* The trainer's buffers as host memory during a save (ah_ckpt_snapshot_take's views); an
     * asynchronous save on a GPU backend's side stream leaves view_host[b] = view_dev[b], device
     * memory, for its copies (view_on_device[b]). */
    float *view_dev[3], *view_host[3], *view_moments[2];
    bool view_on_device[3];
};

/* ---- saves (ckpt_io.c, ckpt_async.c) -------------------------------------------------------- */

/* What a rank's write of a step did, for the commit. */
typedef struct {
    int64_t step;
    ah_status_t st;       /* the write's outcome on this rank */
    ah_error_t err;       /* its message when st != AH_OK */
    uint64_t bytes;
    int files;
    double save_s;        /* this rank's seconds of the save before the commit */
    bool async;           /* written in the background: snapshot_s, the copy; wait_s, the loop's wait;
                             writer_cpu_s, its writer thread's CPU seconds on it (ckpt/async.h) */
    double snapshot_s, wait_s, writer_cpu_s;
    uint64_t adamw_bytes; /* of the snapshot, written into it by AdamW (ckpt_fuse.c), not copied */
} ah_ckpt_written_t;

/* Collective: the commit of a written step on every node, or its rollback (ckpt_io.c). */
/* The node leader's commit of step in root (its disk, or its own memory at a notice), the parts of
 * every rank of the node written there; *data_kept: whether the data's shard list fit (ckpt_io.c). */
ah_status_t ah_ckpt_commit_node(const ah_ckpt_session_t *s, const char *root, int64_t step, bool *data_kept,
                                ah_error_t *err);
/* Collective, the save of step at a notice (ckpt_notice.c): with replicas on, memory first
 * (snapshot into this host's memory, replication to the partners' memory, then the disks and the
 * commit); without, the synchronous save. *event: rank 0's "checkpoint" event. */
ah_status_t ah_ckpt_notice_save(ah_ckpt_session_t *s, int64_t step, json_t **event, ah_error_t *err);
/* Collective, at a notice (of step) after its save (ckpt_notice.c; decided on the next plan's file as it
 * is now, read again when rewritten since the save read it): whether this node's pending cloud uploads are
 * dropped at the exit (s->drop_upload: it stays, or it leaves and a staying node's kept disk or the
 * memory tier holds its pieces of the step the relaunch resumes); rank 0 lists the leaving nodes whose
 * pending upload is dropped in ev (the preempt event, may be NULL) as "uploads_cancelled". */
ah_status_t ah_ckpt_notice_uploads(ah_ckpt_session_t *s, int64_t step, json_t *ev, ah_error_t *err);
/* Collective: whether a notice saves step done (*save) by ckpt/policy.h's rule (ckpt_notice.c). */
ah_status_t ah_ckpt_notice_rule(ah_ckpt_session_t *s, int64_t done, double elapsed, bool *save, ah_error_t *err);
/* A synchronous save of step: this rank's pieces from the trainer's buffers, then the commit (ckpt_io.c). */
ah_status_t ah_ckpt_save_sync(ah_ckpt_session_t *s, int64_t step, json_t **event, ah_error_t *err);
ah_status_t ah_ckpt_commit_step(ah_ckpt_session_t *s, const ah_ckpt_written_t *w, json_t **event, ah_error_t *err);
/* Group g of this rank's stage as a piece of step's snapshot, its data from bufs (ckpt_io.c). */
ah_status_t ah_ckpt_group_piece(const ah_ckpt_session_t *s, ah_shard_group_t g, int64_t step, float *const bufs[3],
                                ah_ckpt_piece_t *out, ah_error_t *err);
/* This rank's snapshot of step (ckpt_async.c): the pieces it writes (it is their lowest holder on
 * its node), their data in the trainer's buffers seen as host memory (copy false: released with
 * ah_ckpt_views_release after the write) or copied into s->snap_buf (copy true). Collective (a
 * sharded optimizer's moments are gathered); a local failure is w->st, *out then NULL. */
ah_status_t ah_ckpt_snapshot_take(ah_ckpt_session_t *s, int64_t step, bool copy, ah_ckpt_written_t *w,
                                  ah_ckpt_snap_t **out, ah_error_t *err);
void ah_ckpt_views_release(ah_ckpt_session_t *s);
/* The snapshot buffer and the backend's copy stream freed (at the session's close, the writer
 * stopped first: ckpt_async.c). */
void ah_ckpt_snapshot_free(ah_ckpt_session_t *s);
/* The snapshot buffer across an in-place change (ckpt_async.c): a staying rank's session with periodic
 * saves keeps it at its close (ah_ckpt_session_keep_snapshot), the next session opened in the same
 * process takes it when it has a writer (adopt; else it is freed), so the first save after the change
 * does not allocate and fault in a new one. ah_ckpt_snapshot_allocs: the process's allocations of it. */
void ah_ckpt_snapshot_adopt(ah_ckpt_session_t *s);
int64_t ah_ckpt_snapshot_allocs(void);
/* Collective: the snapshot of step taken and handed to the writer (ckpt_async.c); a rank that
 * cannot keeps its failure for the commit (ah_ckpt_async_collect), which takes the step back
 * everywhere and writes its failed "checkpoint" event then. */
ah_status_t ah_ckpt_save_begin(ah_ckpt_session_t *s, int64_t step, ah_error_t *err);
/* AdamW writing the snapshot (ckpt_fuse.c, its contract there), the CPU backend without a sharded
 * optimizer: new (NULL where it does not apply, or without memory: the copies alone), free (NULL
 * fine); arm: the next AdamW writes the snapshot of boundary `boundary` into the last save's layout
 * (the trainer's adamw_tap; nothing without a layout yet); take: the save at `step` lists its k-th
 * tensor copied from the trainer's src to dst, bytes long: records it as the layout of the next,
 * and says whether AdamW wrote it whole there for this step (*crc then its CRC-32C: no copy);
 * layout_end: the save listed n; wait_s: the waits for the buffer not yet counted (reset). */
typedef struct ah_ckpt_fuse ah_ckpt_fuse_t;
ah_ckpt_fuse_t *ah_ckpt_fuse_new(ah_ckpt_session_t *s);
void ah_ckpt_fuse_free(ah_ckpt_fuse_t *f);
void ah_ckpt_fuse_arm(ah_ckpt_fuse_t *f, int64_t boundary);
bool ah_ckpt_fuse_take(ah_ckpt_fuse_t *f, int64_t step, int k, const float *src, float *dst, size_t bytes,
                       uint32_t *crc);
void ah_ckpt_fuse_layout_end(ah_ckpt_fuse_t *f, int n);
double ah_ckpt_fuse_wait_s(ah_ckpt_fuse_t *f);
/* Collective: with a snapshot in flight, commits it when every rank wrote it, or, with must, waits for
 * it first (the wait counted); its "checkpoint" event is appended to events (rank 0, may be NULL).
 * With must, the disk's retention on the writer's thread is done too when it returns. */
ah_status_t ah_ckpt_async_collect(ah_ckpt_session_t *s, bool must, json_t *events, ah_error_t *err);

/* ---- in-memory peer replicas (ckpt_replica.c) --------------------------------------------- */

/* Collective, replicas on: each node sends the files of step, as committed in its node's checkpoint
 * root src_root (its disk after a commit; its own memory at a notice, ckpt_notice.c), to its partner
 * (replica.h), which holds them in its replica root: over one flow a rank of the smaller node, the
 * node's k-th rank to the partner's k-th (plan/ckpt_traffic.h ah_ckpt_lane_count, ah_ckpt_lanes_assign),
 * the partner's leader writing the manifest last. During a notice that leaves some of the plan's
 * nodes (s->hit), only the leaving nodes' files that no staying node's step holds go (rs->partial): a
 * staying node keeps its own in its memory and disk. Older steps there are
 * removed once the new one is complete on every holder, or first when they and it do not fit the
 * budget together (rs->freed_first); with keep_old not at all (the caller prunes once the new one is
 * complete: ah_ckpt_replica_prune_older). Errors are communication failures; a failed write is in rs. */
ah_status_t ah_ckpt_replicate(ah_ckpt_session_t *s, const char *src_root, int64_t step, bool keep_old,
                              ah_ckpt_replica_stats_t *rs, ah_error_t *err);
/* Collective, the handover at a notice (s->handover known): each file of step (as committed in every
 * node's src_root) that a node of the next plan reads and its own step lacks goes from the lowest node
 * holding it into that node's memory (its replica root, from-SOURCE), within --replica-memory-gb;
 * rs->complete when every node of the next plan that runs a rank now then has every file it reads. */
ah_status_t ah_ckpt_hand_over(ah_ckpt_session_t *s, const char *src_root, int64_t step, ah_ckpt_replica_stats_t *rs,
                              ah_error_t *err);
/* The node leader removes the replicas it holds of steps older than step (replicas on; best effort). */
void ah_ckpt_replica_prune_older(const ah_ckpt_session_t *s, int64_t step);
/* Whether a preemption notice that leaves some of the plan's nodes, not all, is being answered (a
 * join's restart notices every node, to stay: none leaves). */
bool ah_ckpt_notice_leaves_some(const ah_ckpt_session_t *s);
/* Opens the replica side of a session (not collective): base and root from the options; a run
 * that does not resume clears this node's replicas of an earlier run. */
ah_status_t ah_ckpt_replica_open(ah_ckpt_session_t *s, ah_error_t *err);
/* Rank 0: "memory" figures of a checkpoint event into ev (bytes.memory, "memory_left_bytes", ...). */
void ah_ckpt_replica_event(const ah_ckpt_replica_stats_t *rs, json_t *ev);
/* At the end of a run that finished its steps: the node leader frees its replicas (nothing to
 * restore any more). */
void ah_ckpt_replica_release(const ah_ckpt_session_t *s);

/* ---- the cloud's side (ckpt_cloud.c) ------------------------------------------------------- */

/* How far the cloud is, agreed by every rank. */
typedef struct {
    int64_t step;        /* newest step every uploading node finished (complete in the cloud), -1 none */
    bool behind;         /* it lacks a step the disk had at the previous check (not only the upload in
                          * flight) */
    bool failed;         /* some upload failed since the previous check: error says the first */
    char error[AH_ERROR_MSG_MAX];
} ah_ckpt_cloud_state_t;

/* Collective (cloud sessions only): the cloud's state now; takes each uploader's failure. */
ah_status_t ah_ckpt_cloud_check(ah_ckpt_session_t *s, ah_ckpt_cloud_state_t *c, ah_error_t *err);
/* Collective (cloud sessions): whether step (the last committed, at an in-place change: ckpt_change.c) is
 * complete in the cloud (*held), every uploading node's upload of it finished; a node leader whose upload of it
 * is in flight waits for it up to wait_s (the save it spares would take about that long). Takes no failure. */
ah_status_t ah_ckpt_cloud_holds(ah_ckpt_session_t *s, int64_t step, double wait_s, bool *held, ah_error_t *err);
/* Rank 0: "cloud_step", and "cloud_behind" / "cloud_error" when so, into ev. */
void ah_ckpt_cloud_event(const ah_ckpt_cloud_state_t *c, json_t *ev);
/* The resume's retries of the cloud's listing (tries, wait, rank 0's console line). */
void ah_ckpt_cloud_sources(ah_ckpt_session_t *s, ah_ckpt_sources_t *src);
/* Collective, after the catalog opened: when some rank could not list the cloud, every rank forgets
 * the tier (all choose from the same tiers) and unread (cap) gets that rank's error, naming the tier;
 * "" when every rank listed it. */
void ah_ckpt_cloud_agree_listed(ah_ckpt_session_t *s, ah_ckpt_catalog_t *cat, char *unread, size_t cap);
/* Nothing restorable in the tiers read, the cloud unread: refused (the cloud may hold the run's
 * steps), unless --start-over-if-unreadable: then AH_OK, why gets the note, rank 0 warns. */
ah_status_t ah_ckpt_cloud_unread(const ah_ckpt_session_t *s, const char *unread, char *why, size_t cap,
                                 ah_error_t *err);

/* ---- the model's tensors in shard groups (spec/arch.h) ------------------------------------- */

static inline bool in_group(const ah_tensor_t *d, ah_shard_group_t g) {
    const ah_shard_group_t h = ah_shard_group_of(d);
    return h.kind == g.kind && h.layer == g.layer;
}

/* A shard holds each tensor as weights, AdamW m and v, under these suffixes. */
static const char *const SUFFIX[3] = {"", ".exp_avg", ".exp_avg_sq"};

/* Room for ah_placement_groups. */
static inline ah_shard_group_t *groups_alloc(const ah_ckpt_session_t *s) {
    return malloc((size_t)s->place.max_groups * sizeof(ah_shard_group_t));
}

/* ckpt_io.c: the bytes of the shard files this rank writes for one step (exactly, from the plan's
 * layout: ah_st_size of each), each rounded up to `block` (the filesystem's allocation unit), and
 * how many. */
ah_status_t ah_ckpt_rank_step_bytes(const ah_ckpt_session_t *s, uint64_t block, uint64_t *bytes, int *files,
                                     ah_error_t *err);
/* ckpt_space.c (collective, agreed): refuses a --local-root whose filesystem cannot hold what the
 * run will keep there (ckpt_io.h, ah_ckpt_session_open). */
ah_status_t ah_ckpt_check_space(ah_ckpt_session_t *s, ah_error_t *err);
/* ckpt_retain.c (collective; after a cloud check): --keep N in the cloud tier: each uploading
 * node's uploader removes its steps older than the N-th newest step complete in the cloud. */
ah_status_t ah_ckpt_cloud_retain(ah_ckpt_session_t *s, ah_error_t *err);
/* ckpt_retain.c (node leaders; best effort; others: nothing): --keep N on this node's disk
 * (ah_ckpt_gc_pinned, the step an upload reads kept). With asynchronous saves on the writer's
 * thread (ah_ckpt_async_retain: off the training thread, before the next snapshot's write; a save
 * on this thread first waits for it, ah_ckpt_async_collect), else here. */
void ah_ckpt_retain_disk(ah_ckpt_session_t *s);

#endif
