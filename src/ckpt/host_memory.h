/* The host memory asynchronous checkpoints keep per node: the memory model's side of ckpt/async.h.
 * Pure: the plan in, no MPI, no files, no trainer.
 *
 * A save without --ckpt-sync copies, on every rank, the shards it writes (those it is the lowest
 * holder of on its node, ckpt/placement.h) into a host-memory snapshot that the rank keeps from one
 * save to the next: weights, AdamW m and v in fp32, the TP piece of each tensor of each such group,
 * 12 bytes a parameter, exactly what the runtime allocates (runtime/ckpt_async.c; its checkpoint
 * events' "snapshot_bytes" says so). A node's snapshot bytes are its ranks' sum. A node whose cluster
 * entry gives "host_memory_gib" must hold them; a node without it is not checked.
 */
#ifndef AH_CKPT_HOST_MEMORY_H
#define AH_CKPT_HOST_MEMORY_H

#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

/* bytes[n] (the plan's cluster's nodes, 0 for a node without ranks) gets each node's snapshot bytes. */
ah_status_t ah_snapshot_node_bytes(const ah_plan_t *p, int64_t *bytes, ah_error_t *err);
/* AH_ERR_INVALID when a node's host_memory_gib cannot hold its snapshots, naming the node, the
 * bytes and its host memory (the first such node). *unchecked (may be NULL): the nodes with ranks
 * and no host_memory_gib. */
ah_status_t ah_snapshot_check_host(const ah_plan_t *p, int *unchecked, ah_error_t *err);

#endif
