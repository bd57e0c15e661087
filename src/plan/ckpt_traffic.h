/* What a plan's checkpoints move over the network, per save: the bytes each node writes (its disk's
 * step), each node's share of the cloud tier's upload, and the node that holds each node's
 * in-memory replica. Pure: the plan in, no MPI, no files. The runtime's checkpoint code (ckpt/,
 * runtime/ckpt_*.c) asks the same functions (ckpt/host_memory.c's snapshot bytes, ckpt/replica.c's
 * partners), so the cost model counts what the runtime moves; plan_links.c prices it per iteration
 * under the plan's checkpoint policy (cost.h's ah_ckpt_policy_t; docs/cost-model.md "Checkpoint
 * traffic").
 *
 * A node's step: every rank writes the shards it is the node's lowest holder of (each (group, TP
 * index) its ranks hold, once a node: ckpt/placement.h), weights and AdamW m and v in fp32, the TP
 * piece of each tensor: 12 bytes a parameter (safetensors headers and the manifest not counted).
 * The cloud share: each piece once in the job, uploaded by the node of its lowest holder in plan
 * order (pipeline 0's device of that TP index, CP rank 0: runtime/ckpt_io.c's cloud_share).
 */
#ifndef AH_PLAN_CKPT_TRAFFIC_H
#define AH_PLAN_CKPT_TRAFFIC_H

#include <stdbool.h>
#include <stdint.h>

#include "plan/plan.h"

/* own[n] (the plan's cluster's nodes; 0 for a node without ranks): the bytes of node n's step;
 * cloud[n] (may be NULL): the bytes node n uploads to the cloud tier; files[n] (may be NULL): the
 * shard files of node n's step (one per save group and TP index its devices hold). AH_ERR_OOM only. */
ah_status_t ah_ckpt_node_bytes(const ah_plan_t *p, int64_t *own, int64_t *cloud, int64_t *files, ah_error_t *err);

/* partner[y] for each of n_nodes nodes: the node holding y's in-memory replica, in another failure
 * domain (another zone when the used nodes span several, else another node), the sources spread
 * evenly over the holders. The used nodes (leader[n] >= 0: ckpt/placement.h's node_leader; < 0 for
 * a node the plan does not use) are listed zone by zone (zones in the order of their first used node,
 * each zone's nodes in node order; zones[n]: node n's zone, NULL: one zone), m of them, the largest
 * zone holding s: one zone: each node's holder is the next in that list (cyclically); s <= m - s: the
 * k-th node's is the (k + s)-th (cyclically), a node of another zone since no zone spans more than s
 * places, so every used node holds exactly one source and the pairs form cycles (2-3 rounds of
 * ah_ckpt_pairs_in_rounds); s > m - s (one zone D holds more than half): D's j-th node's holder is the
 * (j mod (m - s))-th of the other nodes, and the o-th of those is held by D's o-th, so no holder holds
 * more than ceil(s / (m - s)), the fewest a rule keeping D's pieces out of D can. -1 for an unused
 * node or when fewer than two are used. Deterministic and from its arguments alone: every rank, the
 * cost model and the simulator compute the same map. false (every partner -1) when out of host memory. */
bool ah_ckpt_partners(int n_nodes, const int *leader, const char *const *zones, int *partner);

/* One pair of a replication or a handover: node `from` sends `bytes` to node `to` (-1: a node of
 * from's zone, over the inter-node link) over `lanes` flows at once (ah_ckpt_lane_count; <= 0: one). */
typedef struct ah_ckpt_pair {
    int from, to;
    double bytes;
    int lanes;
} ah_ckpt_pair_t;

/* The flows a pair sends over (runtime/ckpt_replica.c): one a rank, the k-th rank of the source node
 * (ranks in rank order) sending to the k-th of the holder's, as many as the smaller node has ranks
 * (at least 1). */
int ah_ckpt_lane_count(int ranks_from, int ranks_to);

/* Splits a pair's files over its lanes as the runtime sends them: the files with take[i] (NULL: all),
 * largest first (equal sizes in index order), each to the lane with the fewest bytes so far (the lowest
 * such); lane[i] gets file i's lane (-1 when not taken). A lane then carries at most bytes / lanes plus
 * one file, which the pricing leaves out (ah_ckpt_pairs_s prices bytes / lanes a lane). false when out
 * of host memory. */
bool ah_ckpt_lanes_assign(const uint64_t *sizes, const bool *take, int n, int lanes, int *lane);

/* ranks[n] (the plan's cluster's nodes): the ranks (devices) the plan places on node n. false when out
 * of host memory. */
bool ah_ckpt_node_ranks(const ah_plan_t *p, int *ranks);

/* Puts pairs[0 .. n - 1] in the order the runtime replicates them (runtime/ckpt_replica.c), in rounds
 * of pairs with no node in common: round 0 takes the pairs in their given order whose nodes no
 * earlier pair of the round has (to -1: from's node alone), round 1 the same from the rest, and so
 * on (a greedy edge colouring); pairs with bytes <= 0 move nothing and go last. Stable and from the
 * pairs alone, so every rank computes the same order: each rank is in at most one pair a round and all
 * walk one global order, so the blocking sends cannot deadlock, and the pairs of a round run at once
 * (a ring of n partners: 2 rounds, 3 when n is odd, not a chain of n). Returns the rounds. */
int ah_ckpt_pairs_in_rounds(ah_ckpt_pair_t *pairs, int n);

/* The seconds a replication to the partners' memory, or a handover, blocks the job for, as the runtime
 * runs it (runtime/ckpt_replica.c: every rank walks the pairs in one order, each pair's files split
 * over its lanes, ah_ckpt_lanes_assign, each lane's source rank sending its files to the lane's
 * holder rank with blocking sends, the lanes at once): a pair starts when both its nodes have
 * finished their earlier pairs, so pairs in ah_ckpt_pairs_in_rounds's order overlap within a round
 * (a ring of partners in node order would be a chain, the pairs one after another); each pair is
 * `lanes` flows on the link between its nodes, each bytes / lanes at the per-GPU rate, the flows
 * sharing its total_gb_s when it has one (cost.h ah_link_shared_bw), plus one latency per 1 MiB
 * piece of a lane (comm/transfer.c). pairs[0 .. n - 1] in the runtime's order; bytes <= 0 skipped. -1 when out of
 * host memory. The cost model (plan_links.c) and the simulator (sim/memory.c, sim/recovery.c) both
 * price it so. */
double ah_ckpt_pairs_s(const ah_cluster_t *c, const ah_ckpt_pair_t *pairs, int n);

#endif
