/* The in-place change's state moved rank to rank (issue 36 "layers moved between them over the
 * network, the leaving ranks handing over what only they hold"; docs/elastic.md "The move rank to
 * rank"). At the change's boundary, before the old plan's runtime is freed, every rank of the old
 * world (the leaving ones too) takes part in one exchange over the old world's communicator: each
 * rank of the new plan receives, from the old ranks ckpt/move_plan.h names, the pieces a restore of
 * the step would read, in the checkpoint's layout (the shard's tensors, weights and AdamW m and v, at
 * the old TP degree); a piece the process already held is copied, not sent. Once the new world's
 * trainer is set up, ah_reconfig_move_load slices them into its stage with ckpt/reshard.h's slicing,
 * as the restore does (ckpt_io.h ah_ckpt_load_stage: the same code), so the state is bit-identical
 * to a restore of the step; the data position comes along (every rank's, checked equal). A piece the
 * receiving process held under the old plan is neither sent nor packed: the load reads it straight
 * from the old stage's tensors (one copy, old stage to new), which the move keeps past the old
 * trainer's end (on host memory its weight and moment arenas, taken from it; on a device the host
 * copies the move downloaded) until ah_reconfig_moved_free.
 *
 * Not moved (the caller falls back to the checkpoint restore, said): a joining job's ranks (not in the
 * old world), a sharded optimizer's moments (under either plan), a rank that cannot load the next
 * plan or allocate its buffers.
 *
 * Ownership: ah_reconfig_move allocates *out; ah_reconfig_moved_free frees it (NULL is fine).
 */
#ifndef AH_RUNTIME_RECONFIG_MOVE_H
#define AH_RUNTIME_RECONFIG_MOVE_H

#include <stdint.h>

#include "runtime/trainer.h"

typedef struct ah_reconfig_moved ah_reconfig_moved_t;

/* What the move did, the same on every rank: bytes sent between processes and bytes kept (a piece the
 * receiving process held already), summed over the world; seconds of the exchange (the slowest rank's). */
typedef struct {
    int64_t moved_bytes, kept_bytes;
    double seconds;
} ah_reconfig_move_stats_t;

/* Collective over the old world (ah_comm_world() before it shrinks), at the boundary after `step`
 * updates: tr the old plan's trainer, next the new plan (loaded on every rank: NULL on a rank that
 * could not, which fails the move everywhere), to_rank[r] (world size entries) old rank r's rank under
 * next, -1 when it leaves. *out: this rank's received pieces (NULL on a leaving rank). A failure is
 * agreed (every rank gets it, *out NULL) and leaves tr as it was. On success, when this rank keeps a
 * piece on host memory, *out owns tr's weight and moment arenas (tr's stage then has none: w, g, m
 * and v NULL; tr is only to be freed). */
ah_status_t ah_reconfig_move(ah_trainer_t *tr, const ah_plan_t *next, const int *to_rank, int64_t step,
                             ah_reconfig_moved_t **out, ah_reconfig_move_stats_t *stats, ah_error_t *err);

/* Not collective: mv's pieces into tr's stage (tr: the new plan's trainer on the new world, the rank
 * ah_reconfig_move gave this process), and its data position at the step. */
ah_status_t ah_reconfig_move_load(const ah_reconfig_moved_t *mv, ah_trainer_t *tr, ah_error_t *err);

void ah_reconfig_moved_free(ah_reconfig_moved_t *mv);

#endif
