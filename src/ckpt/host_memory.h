/* The host memory asynchronous checkpoints keep per node: the memory model's side of ckpt/async.h.
 * Pure: the plan in, no MPI, no files, no trainer.
 *
 * A save without --ckpt-sync copies, on every rank, the shards it writes (those it is the lowest
 * holder of on its node, ckpt/placement.h) into a host-memory snapshot that the rank keeps from one
 * save to the next: weights, AdamW m and v in fp32, the TP piece of each tensor of each such group,
 * 12 bytes a parameter, and AH_CKPT_SNAP_PAD (4 KiB) a shard file for the layout that lets the
 * writer send the bytes to the disk from where they are (ckpt/async.h): exactly what the runtime
 * allocates (runtime/ckpt_async.c; its checkpoint events' "snapshot_bytes" says so). A node's snapshot bytes are its ranks' sum. A node whose cluster
 * entry gives "host_memory_gib" must hold them, and with in-memory replicas (--replica-memory-gb) the
 * replicas it keeps in its tmpfs too; a node without it is not checked.
 */
#ifndef AH_CKPT_HOST_MEMORY_H
#define AH_CKPT_HOST_MEMORY_H

#include <stdint.h>

#include "core/status.h"
#include "plan/plan.h"

/* bytes[n] (the plan's cluster's nodes, 0 for a node without ranks) gets each node's snapshot bytes. */
ah_status_t ah_snapshot_node_bytes(const ah_plan_t *p, int64_t *bytes, ah_error_t *err);
/* bytes[n] gets what node n keeps in its tmpfs with in-memory replicas on (ckpt/replica.h): the
 * checkpoint bytes of the nodes whose partner it is, capped by replica_gb (GB), plus its own copy of
 * a notice's step (memory first and the handover keep it there until the disks hold it); all 0 when
 * replica_gb is 0. */
ah_status_t ah_replica_node_bytes(const ah_plan_t *p, double replica_gb, int64_t *bytes, ah_error_t *err);
/* bytes[n] gets what node n keeps in host memory for the checkpoints: its snapshots (snapshots: asynchronous
 * checkpoints) plus its replicas (replica_gb > 0), as ah_host_memory_check counts them. */
ah_status_t ah_host_memory_node_bytes(const ah_plan_t *p, bool snapshots, double replica_gb, int64_t *bytes,
                                      ah_error_t *err);
/* AH_ERR_INVALID when a node's host_memory_gib cannot hold its snapshots (snapshots: asynchronous
 * checkpoints) plus its replicas (replica_gb > 0), naming the node, each part's bytes and its host
 * memory (the first such node). *unchecked (may be NULL): the nodes that keep something and give no
 * host_memory_gib. */
ah_status_t ah_host_memory_check(const ah_plan_t *p, bool snapshots, double replica_gb, int *unchecked,
                                 ah_error_t *err);
/* AH_ERR_INVALID when a node's host_memory_gib cannot hold its snapshots, naming the node, the
 * bytes and its host memory (the first such node). *unchecked (may be NULL): the nodes with ranks
 * and no host_memory_gib. */
ah_status_t ah_snapshot_check_host(const ah_plan_t *p, int *unchecked, ah_error_t *err);

#endif
