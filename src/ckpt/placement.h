/* Shard placement: which rank of a plan holds which checkpoint shard, and the lowest holder of
 * each, per node or in the whole job. Pure: the plan and a node numbering in, no MPI, no files,
 * no trainer; the runtime's save and resume and the simulator's shard survival all ask it.
 *
 * Ranks are the plan's devices in plan order (pipeline, device group, CP rank, TP rank), as
 * runtime/layout.h numbers the MPI ranks. A shard group is a set of tensors saved together: the embedding (wte,
 * wpe), one block, or the head (ln_f); saved at TP degree T, group g has T shards named by
 * ah_shard_group_name (ckpt.h's names). A rank holds, at its own TP index, the blocks of its
 * stages (several under an interleaved schedule: device d of P holds stages d, d + P, ...), the
 * embedding when it holds the first stage of its pipeline and the head when it holds the last. To load, a
 * last stage also needs the embedding (its tied head matrix is wte). Data-parallel replicas
 * hold the same shards, and so do the CP ranks of a context-parallel stage (tp x cp devices, each
 * holding the stage's weights whole at its TP index: a holder's tp_index is its device's TP rank);
 * the lowest rank holding a shard is the one that writes (per node) or uploads (per job) it, so CP
 * ranks on one node write one copy (CP rank 0's), as replicas do.
 *
 * Ownership: ah_placement_build allocates; ah_placement_free frees (a zeroed one is fine).
 */
#ifndef AH_CKPT_PLACEMENT_H
#define AH_CKPT_PLACEMENT_H

#include <stdbool.h>

#include "ckpt/ckpt.h"
#include "plan/plan.h"
#include "spec/arch.h"

typedef struct ah_shard_group {
    ah_shard_kind_t kind;
    int layer; /* blocks only; -1 for the embedding and the head */
} ah_shard_group_t;

typedef struct ah_shard_holder {
    int node;          /* node index: the plan's cluster's, or the caller's map of it */
    int index;         /* GPU index on that node */
    int tp_index;
    const bool *block; /* [n_layer]: whether it holds block l (its stages'), in the placement's pool */
    bool embed, head;  /* it holds the first / last stage of its pipeline */
} ah_shard_holder_t;

typedef struct ah_placement {
    int n_ranks, n_nodes, tp;
    ah_shard_holder_t *ranks; /* [n_ranks] */
    int *node_leader;         /* [n_nodes] lowest rank on the node, -1 when the plan uses none */
    int max_groups;           /* n_layer + 2: room for ah_placement_groups */
    bool *blocks;             /* [n_ranks][n_layer]: the holders' block tables */
} ah_placement_t;

/* node_map NULL: nodes are the plan's cluster's (n_nodes = its count); else plan node i is node
 * node_map[i] of n_nodes (a sub-cluster's plan on the full cluster). */
ah_status_t ah_placement_build(const ah_plan_t *p, const int *node_map, int n_nodes, ah_placement_t *out,
                               ah_error_t *err);
void ah_placement_free(ah_placement_t *pl);

/* The group a tensor of the architecture table is saved in: its layer (spec/arch.h). */
ah_shard_group_t ah_shard_group_of(const ah_tensor_t *x);
/* The layer group g holds. */
ah_layer_kind_t ah_shard_group_layer(ah_shard_group_t g);
/* "block-LLL.tpT-K" and the like into buf (AH_CKPT_NAME_MAX). */
void ah_shard_group_name(char *buf, ah_shard_group_t g, int tp, int tp_index);

/* The groups rank holds in full (what it writes), with for_load also the embedding on a last
 * stage. g has room for max_groups; returns the count. */
int ah_placement_groups(const ah_placement_t *pl, int rank, bool for_load, ah_shard_group_t *g);
/* Whether rank holds group g at TP index tp_index (what ah_placement_groups lists, not for_load). */
bool ah_placement_holds(const ah_placement_t *pl, int rank, ah_shard_group_t g, int tp_index);
/* The lowest rank holding (g, tp_index) among the ranks on node (all ranks when node < 0); -1. */
int ah_placement_lowest_holder(const ah_placement_t *pl, ah_shard_group_t g, int tp_index, int node);
/* Whether some rank on a node with alive[node] holds (g, tp_index). */
bool ah_placement_survives(const ah_placement_t *pl, ah_shard_group_t g, int tp_index, const bool *alive);

/* Every shard name of the whole model saved at TP degree T, the ones a restore or an export
 * needs: piece 0 only of a group whose layer no TP rank splits (every TP rank holds it whole: a
 * tied head, which is its final norm only), all T pieces of the others. names has room for
 * (2 + n_layer) x T; returns the count. */
int ah_placement_model_names(const ah_model_t *m, int T, char (*names)[AH_CKPT_NAME_MAX]);

#endif
