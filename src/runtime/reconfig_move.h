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
 * At an in-place join the joining jobs' ranks, not in the old world, get theirs in a second exchange over the
 * new world (ah_reconfig_move_join), from the staying ranks only; a piece only a leaving rank held (a change
 * that loses and gains hosts at once) is handed by the leaver to a staying rank in the old world's exchange,
 * which relays it (ckpt/move_plan.h via).
 *
 * Not moved (the caller falls back to the checkpoint restore, said): a sharded optimizer's moments (under
 * either plan), a rank that cannot load the next plan or allocate its buffers.
 *
 * Ownership: ah_reconfig_move allocates *out; ah_reconfig_moved_free frees it (NULL is fine).
 */
#ifndef AH_RUNTIME_RECONFIG_MOVE_H
#define AH_RUNTIME_RECONFIG_MOVE_H

#include <stdbool.h>
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
 * next, -1 when it leaves; held[n] (tr's plan's nodes; NULL: none) the host memory node n holds besides the
 * move (its checkpoint snapshots and replicas): a node whose host_memory_gib cannot hold the move's buffers
 * too fails the move (ckpt/move_plan.h ah_move_plan_host_check, named). *out: this rank's received pieces
 * (NULL on a leaving rank). A failure is agreed (every rank gets it, *out NULL) and leaves tr as it was. On success, when this rank keeps a
 * piece on host memory, *out owns tr's weight and moment arenas (tr's stage then has none: w, g, m
 * and v NULL; tr is only to be freed). */
ah_status_t ah_reconfig_move(ah_trainer_t *tr, const ah_plan_t *next, const int *to_rank, bool join, int64_t step,
                             const int64_t *held, ah_reconfig_moved_t **out, ah_reconfig_move_stats_t *stats,
                             ah_error_t *err);

/* An in-place join (join true above: next's ranks that no old rank runs are joining processes, which held
 * nothing; ckpt/move_plan.h ah_move_plan_build_join): the old world's exchange moves what the staying ranks load,
 * and each staying rank packs the pieces it sends a joining one (senders: staying ranks, a leaver-only piece relayed
 * by one: the leaver hands it over in that exchange). Then, collective
 * over the new world once it admitted the new jobs (ah_comm_world(), its rank n running next's rank n), this sends
 * them: *mv in, a staying rank's ah_reconfig_move result (NULL: it failed, the same on every staying rank; `why`
 * says why), NULL on a joining rank (joining true); out, this rank's pieces for ah_reconfig_move_load, or NULL on
 * every rank when the move is off, agreed before the first message (a staying rank's failure before the join, a
 * joining rank that cannot take its pieces, ...; err says why: the caller restores from the checkpoint). The
 * lowest staying rank tells the joining ones the step, data position and *committed (the step's save committed).
 * stats: the whole move's (the joining ranks' bytes added to the old world's; seconds both phases'). */
ah_status_t ah_reconfig_move_join(ah_reconfig_moved_t **mv, bool joining, const ah_plan_t *next, bool *committed,
                                  const char *why, ah_reconfig_move_stats_t *stats, ah_error_t *err);

/* Not collective: mv's pieces into tr's stage (tr: the new plan's trainer on the new world, the rank
 * ah_reconfig_move gave this process), and its data position at the step. */
ah_status_t ah_reconfig_move_load(const ah_reconfig_moved_t *mv, ah_trainer_t *tr, ah_error_t *err);

void ah_reconfig_moved_free(ah_reconfig_moved_t *mv);

#endif
