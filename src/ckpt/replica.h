/* In-memory peer replicas: each committed step's pieces also held in the host memory of another
 * host (the memory tier of a restore, policy.h's AH_TIER_MEMORY).
 *
 * Where: Open MPI 4.1 has no ULFM, so a host lost without notice aborts the whole job and every
 * process with it: a replica must outlive the job's processes. It lives in a tmpfs directory of
 * the holding host (default base /dev/shm/autohet/<key>, key from the --local-root path so that
 * the relaunches of one run find it and two runs do not meet), one directory per holding node
 * (BASE/HOLDER/, as node X's disk is LOCAL_ROOT/X/), and under it one checkpoint root per node
 * whose pieces it holds:
 *
 *     BASE/HOLDER/from-SOURCE/step-00000008/<shard files>, manifest.json
 *
 * in the same format as a node's disk (ckpt.h), the manifest written last and listing only the
 * files held (what fitted the holder's budget). A replica is trusted only as every tier is: each
 * file checked against its manifest (size, CRC-32C, safetensors structure) before it is used; a
 * directory wiped or absent is an empty tier.
 *
 * Who holds whom (ah_replica_partners, pure): each node's pieces go to a node in another zone when
 * the plan's nodes span several, else to another node, the sources spread evenly over the holders
 * (plan/ckpt_traffic.h ah_ckpt_partners has the rule: the nodes listed zone by zone, each to the one
 * a largest zone's size further on); a plan on one node has no replica.
 * Budget (ah_replica_fit, pure): each holder keeps at most `budget` bytes; the sources' files are
 * taken in source order, each source's in its manifest's order, a file that does not fit is left
 * to the disks (said by the caller), a later smaller one may still fit.
 * Retention (the caller's, runtime/ckpt_replica.c): a holder keeps its older steps while a new one
 * is written when they and the new step's files that fit (ah_replica_fit) are within its budget
 * together (ah_replica_held_bytes), and removes them (ah_replica_prune) once the new step is complete
 * on every holder; when they do not fit together it removes them first, so the budget is never
 * exceeded (while the new step is written that host then holds none complete: the window).
 *
 * Ownership: out-arrays are malloc'ed, the caller frees them (manifests: ah_ckpt_manifests_free).
 */
#ifndef AH_CKPT_REPLICA_H
#define AH_CKPT_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/ckpt.h"
#include "ckpt/placement.h"

#define AH_REPLICA_SOURCE_PREFIX "from-"

/* "/dev/shm/autohet/<16 hex digits of FNV-1a 64 of local_root made absolute>". -1 when too long. */
int ah_replica_default_base(char *buf, size_t cap, const char *local_root);
/* "BASE/NODE": the directory node NODE keeps its replicas in. */
int ah_replica_holder_root(char *buf, size_t cap, const char *base, const char *node);
/* "HOLDER_ROOT/from-SOURCE": the checkpoint root of SOURCE's replicas on that holder. */
int ah_replica_source_root(char *buf, size_t cap, const char *holder_root, const char *source);

/* partner[n] for each of pl's nodes: the node holding its replica, -1 (unused node, or no other
 * node). zones[n] (may be NULL: one zone) names each node's zone. false when out of host memory. */
bool ah_replica_partners(const ah_placement_t *pl, const char *const *zones, int *partner);

/* Whether replicas can pay for the plan pl: some node holds a piece (a shard group at a TP index) that
 * no other node holds, so that losing that node without notice loses it from every disk but its own
 * (a restore then needs the memory tier or the cloud). false when every piece is on two nodes (the
 * plan's data-parallel replicas on other nodes): the peers' disks then cover the loss of any one
 * node, and a replication would only hold training (the simulator's choice: sim/plans.c). The answer
 * in *pays; false (and *pays false) when out of host memory. */
bool ah_replica_pays(const ah_placement_t *pl, bool *pays);
/* alone[y] for each node y < n_nodes: node y holds a piece (a shard group at a TP index) that no other
 * node of pl holds, so that losing it without notice loses that piece from every disk but its own (the
 * test above, node by node; the simulator's and the agent's exposure, elastic/join_rule.h
 * ah_exposure_kept). false when out of host memory. */
bool ah_replica_alone_nodes(const ah_placement_t *pl, int n_nodes, bool *alone);

/* Which files fit: sizes[s][i] (n_files[s] files of source node s, n_sources sources), held by
 * partner[s] (-1: none). fits[s][i] gets whether file i of s is replicated; held[h] (n_nodes) the
 * bytes each holder then keeps. budget: bytes per holder. */
void ah_replica_fit(int n_sources, const int *partner, const int *n_files, uint64_t *const *sizes, uint64_t budget,
                    int n_nodes, bool *const *fits, uint64_t *held);

/* Every committed manifest under holder_root's from-* roots (none when it does not exist). */
ah_status_t ah_replica_load_committed(const char *holder_root, ah_ckpt_manifest_t **out, int *n, ah_error_t *err);
/* Removes every step older than `step` (committed or not) under holder_root's from-* roots, and
 * `step` itself of `source` (a replica of it being rewritten). Best effort. */
void ah_replica_prune(const char *holder_root, int64_t step, const char *source);
/* Bytes of every step but `step` under holder_root's from-* roots, committed or not (what a holder
 * keeps besides the step it is about to write). */
uint64_t ah_replica_held_bytes(const char *holder_root, int64_t step);

#endif
