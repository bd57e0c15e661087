/* The peer tier of a restore: the committed steps on other nodes' disks, moved over MPI.
 *
 * Beside the local tier (this node's disk) and the cloud tier (ckpt/cloud.h), with the restore
 * catalog's hooks (ckpt/restore.h's ah_ckpt_peer_t):
 *   ah_ckpt_peer_open   (collective) every node's leader (its lowest rank) reads its committed
 *                       manifests and all ranks all-gather them;
 *   manifests           the other nodes' manifests, for the catalog's choice of a step;
 *   exchange            (collective, inside ah_ckpt_catalog_fetch) each rank names the files
 *                       the local tier could not give it (missing, or failing their check); all
 *                       ranks walk the requests in one global order (requester rank, then name);
 *                       the leader of the first other node whose manifest lists a file verifies
 *                       its copy and sends it (or refuses, when the copy fails), and the
 *                       requester stores it atomically in the catalog's staging directory. No
 *                       deadlock: one total order of blocking pairs (comm/transfer.h);
 *   fetch               says how the exchange went for one file (the catalog verifies the copy
 *                       against the manifest that listed it).
 * Nodes and leaders come from the shard placement (ckpt/placement.h), ranks are world ranks.
 * Errors: communication failures (AH_ERR_COMM) and host memory; a file no peer could give is a
 * fetch failure the catalog falls back from. Ownership: the tier borrows the placement.
 */
#ifndef AH_CKPT_PEER_H
#define AH_CKPT_PEER_H

#include <stdbool.h>

#include "ckpt/placement.h"
#include "ckpt/restore.h"

typedef struct ah_ckpt_peer_tier ah_ckpt_peer_tier_t;

/* Collective over the world. node_root: this node's checkpoint root, read when share is set
 * (this rank is its node's leader). */
ah_status_t ah_ckpt_peer_open(const ah_placement_t *pl, int rank, const char *node_root, bool share,
                              ah_ckpt_peer_tier_t **out, ah_error_t *err);
/* The memory tier (ckpt/replica.h) through the same hooks: replica_root is this node's directory
 * of replicas (BASE/NODE), read by its leader when share is set. Unlike the peer tier, a copy this
 * rank's own host holds is used too: read in place, not moved over MPI; another host's is moved
 * as a peer's (its holder's leader verifies it first). Collective over the world. */
ah_status_t ah_ckpt_peer_open_memory(const ah_placement_t *pl, int rank, const char *replica_root, bool share,
                                     ah_ckpt_peer_tier_t **out, ah_error_t *err);
/* The catalog's hooks; valid until ah_ckpt_peer_close. */
ah_ckpt_peer_t ah_ckpt_peer_hooks(ah_ckpt_peer_tier_t *p);
void ah_ckpt_peer_close(ah_ckpt_peer_tier_t *p);

#endif
