/* The trainer's communicators and data-parallel groups (runtime/trainer.c's setup and its DP
 * walks): the TP group; one DP group per (DP segment, TP rank), the first stages' (embedding),
 * the last stages' (head) and the tied matrix's, numbered 0 .. ah_dp_group_count - 1 in one
 * global order; each group's span of the stage's flat buffers, and for a sharded optimizer
 * (plan.h "optimizer_shards") this rank's part and every part's length, in part order.
 *
 * Ownership: the groups and shards live in the ah_trainer_t (ah_trainer_free releases them).
 * Errors: ah_error_t, as everywhere. Collectives: ah_dp_open_groups is collective over the world
 * (every split, then the device communicators of each group); ah_dp_sync and
 * ah_dp_gather_shards are collective over every group this rank is in, in the global order, so
 * no two ranks wait on each other in different collectives. The rest is local. */
#ifndef AH_RUNTIME_DP_GROUPS_H
#define AH_RUNTIME_DP_GROUPS_H

#include "runtime/trainer.h"

/* How many DP groups there are: the segments, then the first-stage, last-stage and tied groups. */
static inline int ah_dp_group_count(const ah_trainer_t *tr) { return tr->layout.n_segments + 3; }

/* The DP group that sums tensor x's gradient (spec/arch.h's gradient group and layer). */
int ah_dp_group_id(const ah_trainer_t *tr, const ah_tensor_t *x);
/* DP group id's communicators (.c NULL where this rank is not in it) and its shard. */
ah_group_t *ah_dp_group(ah_trainer_t *tr, int id);
ah_dp_shard_t *ah_dp_shard(const ah_trainer_t *tr, int id);

/* From the plan alone (no communication): every DP group's span in the stage's flat buffers (one
 * contiguous range each), this rank's part of each sharded group it is in and its place in that
 * group (keys: per group id, room for ah_dp_group_count; -1 keeps the default order), and the
 * runs whose AdamW state the stage keeps (*runs, malloc'd, the caller frees; NULL when nothing is
 * sharded). */
ah_status_t ah_dp_plan_shards(ah_trainer_t *tr, const ah_gpt_config_t *cfg, int *keys, ah_gpt_run_t **runs,
                              int *n_runs, ah_error_t *err);

/* Collective over the world: the TP group, every DP group (sharded ones with their ranks in part
 * order, from keys), each one's hierarchical sync (plan "dp_sync": hierarchical), then the backend on device dev_index and the device communicators of each
 * group; each chunk's pipeline neighbours (tr->chunks[c].prev, .next). */
ah_status_t ah_dp_open_groups(ah_trainer_t *tr, const ah_backend_t *backend, int dev_index, const int *keys,
                              ah_error_t *err);

/* The DP sync's buckets (tr->buckets, after ah_dp_open_groups): per segment group one
 * per block (split at 2^30 floats), per first-stage, last-stage and tied group one, in the order
 * the backward finishes them: the head's part, the blocks from the last down, then the embedding's
 * (on a GPU the tied group's at the end on every member: one communication stream, one order).
 * A sharded group's bucket reduce-scatters each member's part of the bucket. With overlap, installs
 * ah_dp_on_grads as the stage's on_grads hook (and on a GPU makes each bucket's events). */
ah_status_t ah_dp_plan_buckets(ah_trainer_t *tr, ah_error_t *err);
void ah_dp_free_buckets(ah_trainer_t *tr);
/* Starts the queued buckets now due and tests the started ones, so their collectives move on
 * (device emulation's sleeps call it, as a device's copy engine would move them: trainer.c). A
 * failure is kept and returned by the next ah_dp_sync. */
void ah_dp_progress(ah_trainer_t *tr);
/* gpt.h's on_grads hook with overlap: in the last backward, the buckets final at `event` start
 * (non-blocking) when the device reaches this point: on a GPU at once; on the CPU under device
 * emulation at ah_emulator_device_now (queued, started by a later progress, the phase not cut),
 * otherwise now; then progresses the started ones. */
ah_status_t ah_dp_on_grads(void *ctx, int event, ah_error_t *err);

/* Layer-wise DP sync of the stage's gradients: the buckets, each an all-reduce or (sharded) a
 * reduce-scatter; with overlap it waits for those started in the backward, otherwise it runs each
 * group's buckets in the global group order. On a GPU rank the buckets are the device
 * communicators' collectives: with overlap on the communication stream, the compute stream
 * waiting for their events here; without, in order on the compute stream (docs/gpu.md). */
ah_status_t ah_dp_sync(ah_trainer_t *tr, ah_error_t *err);
/* The sharded groups' all-gather of buf (laid out like the weights): a buffer of the backend (the
 * updated weights), or a host array (host: a checkpoint's moments). Blocking, group by group, after
 * waiting for the overlapped weight all-gathers in flight. */
ah_status_t ah_dp_gather_shards(ah_trainer_t *tr, float *buf, bool host, ah_error_t *err);
/* After the optimizer: the sharded groups' all-gather of the updated weights. With overlap, one
 * non-blocking all-gather per sharded bucket (each member's part of it), started in the forward's
 * order and waited for by ah_dp_on_weights just before the bucket's first forward use in the next
 * step, so it runs while the forwards before that use compute; without (or on a GPU),
 * ah_dp_gather_shards at once. Same bits either way (a copy). Until the wait, st->w's other parts
 * are not to be read: whatever reads the weights outside a forward (dump, checkpoint, the next
 * sync) calls ah_dp_gather_wait first. */
ah_status_t ah_dp_gather_weights(ah_trainer_t *tr, ah_error_t *err);
/* gpt.h's on_weights hook with overlap: waits for the weight all-gathers of the buckets used at
 * `event` (device emulation catching up to this point first) and progresses the rest. */
ah_status_t ah_dp_on_weights(void *ctx, int event, ah_error_t *err);
/* Waits for every weight all-gather still in flight (none: returns at once). */
ah_status_t ah_dp_gather_wait(ah_trainer_t *tr, ah_error_t *err);
/* Elements [*lo, *hi) of the stage's parameter i whose summed gradient this rank holds after
 * ah_dp_sync: all of it, or its part of a sharded group. */
void ah_dp_valid_range(const ah_trainer_t *tr, int i, int64_t *lo, int64_t *hi);

#endif
