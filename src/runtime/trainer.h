/* The training loop of one rank: its stage of the plan (under an interleaved schedule its chunks,
 * runtime/gpt.h), its pipeline's schedule (runtime/schedule.h) with non-blocking p2p,
 * the layer-wise data-parallel gradient sync, global-norm clipping, AdamW, and per-step metrics.
 *
 * Collective: every rank of the job calls ah_trainer_setup / ah_trainer_step / ah_trainer_free
 * with the same plan and options. Setup builds the communicators once (TP group; one group per
 * (DP segment, TP rank); first-stage, last-stage and tied-embedding groups) and allocates every
 * buffer through the rank's ah_mem_t (capped by emulate.memory_mib); the step allocates nothing.
 *
 * Learning rate for step i (from 0), documented in docs/runtime.md:
 *   i < warmup:  lr * (i + 1) / warmup
 *   else:        lr_min + (lr - lr_min) * (1 + cos(pi * p)) / 2,  p = (i - warmup) / (steps - warmup),
 *                lr_min = 0.1 * lr.
 * Weight decay applies to 2-D matrices only; gradients are clipped to a global L2 norm of
 * grad_clip (0: off) computed over every unique parameter once.
 *
 * Sharded optimizer (plan.h "optimizer_shards"): a sharded group's gradients are reduce-scattered
 * instead of all-reduced, each member keeps AdamW's state for its own part only, updates it, and
 * the group all-gathers the updated weights; the norm counts each part on its owner. The math is
 * the unsharded one. On a GPU the collectives are the device communicator's (NCCL: a reduce to,
 * and a broadcast from, each part's owner in one group call).
 *
 * Backend: the rank's device type picks CPU or CUDA (runtime/device.h). On a GPU rank every
 * tensor of the stage and the p2p buffers live in device memory; the p2p transfers go over the
 * pipeline's NCCL communicator on the communication stream where every device of the pipeline has
 * its own GPU, else MPI's non-blocking ones on host staging buffers (runtime/pipe_p2p.h); the
 * group sums go through the device communicators, and token ids are uploaded per micro-batch. On
 * the CPU the staging buffers are the buffers themselves and every copy is a no-op.
 */
#ifndef AH_RUNTIME_TRAINER_H
#define AH_RUNTIME_TRAINER_H

#include <stdbool.h>
#include <stdint.h>

#include "comm/comm.h"
#include "plan/plan.h"
#include "runtime/cp_ring.h"
#include "runtime/data.h"
#include "runtime/device.h"
#include "runtime/emulate.h"
#include "runtime/gpt.h"
#include "runtime/layout.h"
#include "runtime/mem.h"
#include "runtime/schedule.h"

typedef struct ah_train_opts {
    int64_t steps;
    double lr, weight_decay, grad_clip;
    int64_t warmup;
    double beta1, beta2, eps;
    uint64_t seed;
    const char *dump_dir; /* write the full, un-sharded weights here ... */
    int64_t dump_step;    /* ... after this many updates (0 = initial; -1 = never) */
    /* Leave the weights uninitialised (zero): the caller restores every one from a checkpoint,
     * or calls ah_trainer_init_params when there is none. A resume so skips a random
     * initialisation it would overwrite (seconds for a stage of 100M parameters). */
    bool defer_init;
    /* --no-overlap-grad-sync: the DP sync's collectives run after the whole backward, one after
     * another in the global group order (for comparison). Default (false): each bucket's starts
     * non-blocking as soon as its gradients are final, and a sharded group's all-gather of the
     * updated weights overlaps the next step's forward (runtime/dp_groups.h). Same bits either way. */
    bool no_overlap_grad_sync;
} ah_train_opts_t;

/* Defaults: steps 20, lr 1e-3, warmup 10, weight decay 0.1, grad clip 1.0, betas (0.9, 0.95),
 * eps 1e-8, seed 1337, no dump. */
void ah_train_opts_default(ah_train_opts_t *o);
double ah_train_lr(const ah_train_opts_t *o, int64_t step);

typedef struct ah_step_metrics {
    int64_t step;           /* from 0 */
    double loss;            /* mean over the global batch's tokens, before this step's update */
    double lr, grad_norm;   /* grad_norm before clipping */
    int64_t tokens;         /* B * T */
    double seconds;         /* wall time of the step */
    int n_ranks;
    const int64_t *memory_high; /* per rank, bytes: allocator high-water mark */
    /* The loss or the gradient norm is not finite (the same verdict on every rank): the update
     * was not applied. nonfinite_rank: the lowest rank holding a non-finite loss, else the lowest
     * holding a non-finite gradient (-1 when only the norm's sum overflowed); nonfinite_what:
     * "the loss", or "the gradient of NAME", the first in that rank's stage order. */
    bool nonfinite;
    int nonfinite_rank;
    char nonfinite_what[160];
    /* Loss scaling on (ah_trainer_t.loss_scale > 0): some gradient on some rank is inf or nan
     * while the loss is finite, an fp16 overflow (runtime/loss_scale.h): no update was applied,
     * and nonfinite stays false. */
    bool overflow;
    /* The DP sync's bucket collectives of the CPU ranks, summed over the ranks (each counted once
     * per member), and of them those already complete when the step's sync began to wait for
     * them (overlapped with the backward); 0 and 0 without data parallelism or on GPU ranks. */
    int64_t dp_buckets, dp_buckets_hidden;
} ah_step_metrics_t;

/* A data-parallel group's sharded optimizer on this rank (plan.h "optimizer_shards"). */
typedef struct ah_dp_shard {
    int64_t off, n;     /* the group's element space: the stage's flat buffers [off, off + n) */
    int64_t begin, end; /* this rank's part of the space */
    int64_t *counts;    /* per group rank, the parts' lengths (group ranks in part order); NULL:
                         * the group is not sharded (or this rank is not in it) */
} ah_dp_shard_t;

/* One collective of the DP sync: a block's gradients in its segment's group, or a whole first-stage,
 * last-stage or tied group (runtime/dp_groups.h). The sync is the same list of buckets with or
 * without overlap, so the sums are the same bits. */
typedef struct ah_dp_hier ah_dp_hier_t; /* runtime/dp_hier.h */
typedef struct ah_dp_bucket {
    int group;          /* DP group id */
    int event;          /* final after this ah_gpt_backward event (gpt.h on_grads) of the last micro-batch
                         * (a GPU's tied group: AH_GPT_GRADS_END on every member, dp_sync.c says why) */
    int use_event;      /* its weights' first use in a forward (gpt.h on_weights): the event it is final at */
    int64_t off, n;     /* the stage's flat buffers [off, off + n) */
    int64_t *parts;     /* a sharded group (ring or hierarchical): per group rank (part order) its
                         * part of the bucket; NULL: not sharded */
    int64_t *counts;    /* a hierarchical group: per member of this rank's domain its pieces */
    ah_comm_coll_t coll;
    bool started;
    bool queued;        /* CPU with overlap: its hook passed, it waits in the due queue (dp_sync.c) */
    double due;         /* then: the wall clock at which the emulated device reached the hook */
    /* A sharded bucket's all-gather of the updated weights, with overlap in flight from the
     * optimizer until the bucket's first forward use in the next step (dp_groups.h). */
    ah_comm_coll_t gather;
    bool gathering;
    const ah_dp_hier_t *hier; /* the group's hierarchical sync (dp_hier.h), or NULL: the ring */
    ah_comm_coll_t *cross;    /* hierarchical: the cross-domain all-reduce of each piece this rank holds */
    int phase;                /* hierarchical: the phase issued last (dp_hier.h ah_dp_hier_advance) */
    /* A GPU's overlapped collectives (backend.h dcomm_event_*): the gradient sum's and the weight
     * all-gather's events on the communication stream (NULL on the CPU) */
    ah_dcomm_event_t *synced, *gathered;
} ah_dp_bucket_t;

/* One chunk's pipeline neighbours and p2p buffers (one chunk unless interleaved; runtime/pipe_p2p.h).
 * MPI messages are tagged by the receiving stage and their kind, so the chunks' messages between
 * two devices stay apart. */
typedef struct ah_p2p_chunk {
    int stage;                   /* the chunk's stage of the pipeline */
    int prev, next;              /* world ranks holding the stages before and after it, -1 if none */
    float *recv_act, *send_grad; /* (N, C) each, with the previous stage */
    float *send_act, *recv_grad; /* (N, C) each, with the next stage */
    /* What MPI sends from and receives into: the four buffers above on the CPU, host copies of
     * them on a GPU (NULL where the buffer is). */
    float *h_recv_act, *h_send_grad, *h_send_act, *h_recv_grad;
    ah_comm_req_t r_act, r_grad, s_act, s_grad; /* the MPI path's requests in flight */
    /* The NCCL path: per buffer (the order above), the event of its last transfer and the
     * transfers issued this step */
    ah_dcomm_event_t *ev[4];
    int64_t issued[4];
} ah_p2p_chunk_t;

/* A transfer of the NCCL path's order (runtime/pipe_p2p.h): chunk's buffer `buf` (ah_p2p_chunk_t's
 * order), issued once the schedule's ops [0, after) are. */
typedef struct ah_p2p_xfer {
    int64_t after;
    int chunk, buf;
} ah_p2p_xfer_t;

typedef struct ah_trainer {
    const ah_plan_t *plan;
    const ah_dataset_t *data;
    ah_train_opts_t opts;
    ah_layout_t layout;
    int rank, n_ranks;
    ah_role_t role;
    int S;                  /* stages of this rank's pipeline (virtual stages under interleaved) */
    int64_t n_mb;           /* its micro-batches */
    int64_t sample_base;    /* m * (micro-batches of the pipelines before it) */
    int64_t sample_shift;   /* iteration i starts at global sample sample_shift + i * B: 0, or
                             * set on resume from a checkpoint's data position
                             * (ah_trainer_set_data_position) */
    ah_device_t dev;        /* the rank's backend */
    ah_mem_t mem;
    ah_gpt_stage_t stage;
    ah_sched_op_t *ops;     /* the stage's schedule (runtime/schedule.h), n_ops of them */
    int64_t n_ops;
    int n_chunks;           /* stages this rank holds (role.chunks) */
    ah_p2p_chunk_t *chunks; /* per chunk */
    ah_arena_t a_p2p;
    ah_group_t pipe;        /* the pipeline's devices with this rank's TP and CP ranks (pipe_p2p.h) */
    bool p2p_nccl;          /* the transfers go over pipe's NCCL communicator, else MPI */
    int64_t *p2p_parts;     /* plan "p2p" scatter-gather at TP > 1: the boundary's part per TP rank
                             * (elements; pipe_p2p.h), else NULL: every hop sends the whole */
    ah_p2p_xfer_t *p2p_order; /* the NCCL path: this rank's transfers in the pipeline's order */
    int64_t n_p2p_order, p2p_next;
    int32_t *h_tokens;      /* GPU: host staging of one micro-batch's ids or targets (N); CPU: NULL */
    int32_t *cp_tokens;     /* context parallelism: one micro-batch's whole sequences (B x T), from
                             * which the rank takes its positions' ids or targets; else NULL */
    ah_group_t cp;          /* the rank's CP group (the stage's CP ranks of its TP rank); c NULL at cp 1 */
    ah_cp_ring_t cp_ring;   /* ring attention over cp (runtime/cp_ring.h) */
    ah_group_t tp;
    ah_group_t *seg;        /* per DP segment; .c NULL where this rank does not hold it */
    ah_group_t first_group, last_group, wte_group;
    ah_dp_shard_t *seg_shard; /* per DP segment, beside seg */
    ah_dp_shard_t first_shard, last_shard, wte_shard;
    ah_dp_hier_t **hier;    /* per DP group id (ah_dp_group_count): its hierarchical sync, or NULL
                             * (the ring; plan "dp_sync", runtime/dp_hier.h) */
    ah_dp_bucket_t *buckets; /* the DP sync's collectives in start order (dp_sync.c) */
    int n_buckets;
    bool overlap;            /* buckets start inside the last backward (not --no-overlap-grad-sync) */
    int *due_queue;          /* with overlap on the CPU: the buckets whose hooks passed, in hook order */
    int due_head, due_tail;  /* started up to due_head, queued up to due_tail */
    int dp_hidden;           /* this step's buckets complete when ah_dp_sync began to wait (CPU) */
    ah_error_t dp_err;       /* the first failure of a start or test made in device emulation's sleeps
                              * (ah_dp_progress), returned by the next ah_dp_sync; code AH_OK: none */
    bool last_bwd;           /* the schedule is running an op after which a chunk's gradients are
                              * final (ah_sched_op_t.grads_final): the overlapped sync starts its
                              * buckets in it */
    int64_t *memory_high;   /* n_ranks */
    double compute_s;       /* measured compute of the last step (before emulation's stretch) */
    ah_emulator_t emu;      /* device emulation (emulate.slowdown) of the rank's phases */
    double loss_scale;      /* fp16: the loss scale of the next step, set by the train loop
                             * (runtime/loss_scale.h); 0 (setup's value): no loss scaling */
    ah_snap_copy_t *snap_fence; /* a checkpoint snapshot's copies still reading w, m, v on a GPU
                             * backend's side stream (runtime/ckpt_async.c): the next step's compute
                             * waits for them before its AdamW writes them; NULL: none */
    const ah_gpt_adamw_tap_t *adamw_tap; /* the next step's AdamW writes the checkpoint snapshot too (runtime/
                             * ckpt_fuse.c, armed by the train loop before a step whose boundary takes an
                             * asynchronous save): its ready() before the optimizer phase, then AdamW
                             * through it; cleared by the step. NULL: none */
} ah_trainer_t;

/* Collective. plan must be valid with ah_plan_device_count(plan) == ranks of the world. */
ah_status_t ah_trainer_setup(ah_trainer_t *tr, const ah_plan_t *plan, const ah_dataset_t *data,
                             const ah_train_opts_t *opts, ah_error_t *err);
/* The random initialisation (seed from the options): for a trainer set up with defer_init whose
 * resume found no checkpoint. */
ah_status_t ah_trainer_init_params(ah_trainer_t *tr, ah_error_t *err);
/* The global sample iteration `step` starts at (what a checkpoint saves), and the resume's
 * setter: iteration `step` starts at data_position, so no sample is skipped or repeated even when
 * the global batch changed. */
int64_t ah_trainer_data_position(const ah_trainer_t *tr, int64_t step);
void ah_trainer_set_data_position(ah_trainer_t *tr, int64_t step, int64_t data_position);
/* Collective: one iteration (step counts from 0); fills *out on every rank. A step whose loss or
 * gradient norm is not finite changes no weight or optimizer state (out->nonfinite). */
ah_status_t ah_trainer_step(ah_trainer_t *tr, int64_t step, ah_step_metrics_t *out, ah_error_t *err);
/* Collective: the mean token loss of the current weights over global batches [0, batches) of
 * val (forward only, the plan's batch split; nothing updated), the same on every plan up to
 * rounding. */
ah_status_t ah_trainer_eval(ah_trainer_t *tr, const ah_dataset_t *val, int64_t batches, double *loss,
                            ah_error_t *err);
/* Collective: writes DIR/params.bin (fp32, canonical order, full tensors) and DIR/params.json
 * (name, shape, offset in floats) from rank 0. With grads, DIR/grads.bin and DIR/grads.json in the
 * same layout from the gradients of the last step: summed over the plan (after the DP sync),
 * before clipping, i.e. d(mean loss of the global batch)/d(weights before that step's update). */
ah_status_t ah_trainer_dump(ah_trainer_t *tr, const char *dir, bool grads, ah_error_t *err);
/* Collective over the sharded groups (every rank calls it, in the same order): the stage's full
 * AdamW m and v into host arrays of n_elems floats each, its own parts from its state and every
 * sharded group's other parts all-gathered from their owners (a checkpoint saves whole moments). */
ah_status_t ah_trainer_gather_moments(ah_trainer_t *tr, float *m_full, float *v_full, ah_error_t *err);
void ah_trainer_free(ah_trainer_t *tr);

#endif
