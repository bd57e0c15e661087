/* The in-place move's slice plan (runtime/reconfig_move.h; docs/elastic.md "The move rank to rank"):
 * at an in-place change every rank of the running (old) plan is alive, so the state the next plan's
 * ranks load goes rank to rank instead of through the checkpoint's tiers. Each rank of the new plan
 * needs exactly what a restore of the step would read: for each group it loads (ckpt/placement.h
 * ah_placement_groups, for_load: a last stage's tied embedding too), the pieces at the old TP degree
 * that ckpt/reshard.h ah_reshard_pieces lists for its TP index at the new one (one piece when the
 * degree is kept, all of them to reshard). This module says, for each such piece, which old rank
 * sends it: the receiving process itself when it held the piece under the old plan (kept, nothing
 * moves), else the holder (a data-parallel replica, a CP rank, a leaving rank that alone held it)
 * that has sent the fewest floats so far, the lowest rank on a tie, so the sending spreads over the
 * replicas. Pure: placements in, no MPI, no trainer; every rank computes the same plan.
 *
 * A piece travels as the checkpoint's shard holds it: every tensor of its group (spec/arch.h
 * canonical order), each as weights, AdamW m and v (ckpt_session.h's suffixes), at the old degree's
 * piece size (ah_tensor_shard_elems); ah_move_group_floats is its size.
 *
 * Ownership: ah_move_plan_build allocates; ah_move_plan_free frees (a zeroed one is fine).
 */
#ifndef AH_CKPT_MOVE_PLAN_H
#define AH_CKPT_MOVE_PLAN_H

#include <stdint.h>

#include "ckpt/placement.h"

typedef struct {
    int dst;            /* the old world's rank that receives: it runs new rank to_rank[dst]; -1: a joining
                         * process (ah_move_plan_build_join), not in the old world */
    int src;            /* the old world's rank that sends; src == dst: the piece is kept in place */
    int to;             /* the new plan's rank that loads it (to_rank[dst], or the joining rank) */
    ah_shard_group_t g; /* the group, and its piece (TP index) at the old degree */
    int piece;
    int gi;             /* g's index among the groups dst loads (ah_placement_groups(to, new rank, true)) */
    int64_t floats;     /* ah_move_group_floats(g, old degree) */
    int via;            /* a joining rank's piece only leaving ranks held (dst -1): the leaving rank that hands
                         * it to src, a staying rank, over the old world (src relays it to the joining rank);
                         * -1 otherwise (src held it) */
} ah_move_item_t;

typedef struct {
    int n;
    ah_move_item_t *items;       /* by dst, then as dst loads them: its groups in order, each group's
                                  * pieces in ah_reshard_pieces' order */
    int64_t moved_floats, kept_floats; /* moved: every send between processes, a relayed piece's two */
} ah_move_plan_t;

/* The plan for model m from placement `from` (the old plan's, TP degree from->tp) to `to` (the new
 * plan's); to_rank[r] (from->n_ranks entries): old rank r's rank under the new plan, -1 when it leaves.
 * AH_ERR_INVALID when to_rank does not give every new rank exactly one old rank (naming the rank), or
 * no old rank holds a piece a new rank needs (naming it); AH_ERR_OOM. */
ah_status_t ah_move_plan_build(const ah_model_t *m, const ah_placement_t *from, const ah_placement_t *to,
                               const int *to_rank, ah_move_plan_t *out, ah_error_t *err);
/* The same at an in-place join (runtime/reconfig.h "join"): a new rank no old rank runs is a joining process,
 * which held nothing: each piece it loads (items with dst -1, by new rank as the others) comes from a holder
 * that stays (to_rank >= 0; the leaving ranks are gone once the new world is joined), the one that has sent
 * the fewest floats so far. A piece only leaving ranks hold (a change that loses and gains hosts at once) is
 * relayed: its leaving holder that has sent the fewest (via) hands it over the old world to the staying rank
 * that has sent the fewest (src), which sends it on to the joining rank over the new world, as a leaver
 * hands over what only it holds at a change without a join. */
ah_status_t ah_move_plan_build_join(const ah_model_t *m, const ah_placement_t *from, const ah_placement_t *to,
                                    const int *to_rank, ah_move_plan_t *out, ah_error_t *err);
void ah_move_plan_free(ah_move_plan_t *p);

/* The host memory the move's buffers take at once (runtime/reconfig_move.c maps them all before its first
 * message, and a join's are kept past the admission), by node: a packed copy of every piece a process sends
 * another (a leaver's relayed piece too, and the relay's buffer it receives that into and sends it on from)
 * and a buffer for every piece a process receives; views (the old stage on a device, not in host memory): every
 * old rank's host copy of its stage's weights and AdamW moments too (ah_gpt_host_view: counted as the groups
 * it loads, ah_move_group_floats, at the most). old_bytes[n] (from's nodes): the old world's ranks';
 * new_bytes[n] (to's nodes): the joining ranks'. Both zeroed first. */
void ah_move_plan_host_bytes(const ah_model_t *m, const ah_move_plan_t *mp, const ah_placement_t *from,
                             const ah_placement_t *to, bool views, int64_t *old_bytes, int64_t *new_bytes);
/* AH_ERR_INVALID (AH_ERR_OOM) when a node that gives "host_memory_gib" (spec/cluster.h) cannot hold the move's
 * buffers on it (ah_move_plan_host_bytes; a joining rank's counted with an old node of the same name) with what
 * it holds besides: held[n] (old_plan's nodes; NULL: nothing), the old plan's checkpoint snapshots and in-memory
 * replicas (ckpt/host_memory.h ah_host_memory_node_bytes); views as above; naming the node and each part's bytes. */
ah_status_t ah_move_plan_host_check(const ah_move_plan_t *mp, const ah_plan_t *old_plan, const ah_placement_t *from,
                                    const ah_plan_t *new_plan, const ah_placement_t *to, const int64_t *held,
                                    bool views, ah_error_t *err);

/* The floats one piece of group g at TP degree T travels as: 3 x the piece's elements of each of g's tensors. */
int64_t ah_move_group_floats(const ah_model_t *m, ah_shard_group_t g, int T);

#endif
