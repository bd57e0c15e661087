/* What the runtime and the simulator decide alike about checkpoints: the recovery tiers, and
 * whether a preemption notice is worth a save. Pure: no MPI, no files, no trainer.
 *
 * Tiers, cheapest first: a copy on this node's disk (local), in the host memory of a node that
 * holds another node's replica (memory: ckpt/replica.h; read in place on its own host, moved over
 * the network to another), on another surviving node's disk (peer, moved over the network), in
 * object storage (cloud). The restore catalog (ckpt/restore.h), the agent's metrics (elastic/)
 * and the simulator's per-tier figures (sim/) index their arrays with this enum and print these
 * names; AH_TIER_MEMORY came last in the enum (the older indices kept), AH_TIER_ORDER gives the
 * order a restore tries them in.
 *
 * The save at a notice (the runtime's ckpt_io.c / ckpt_notice.c at a step boundary; the simulator
 * at a removal): save when what must finish before the removal, with margin, fits what is left of
 * the grace period,
 *     elapsed_s + 1.5 x d + 0.5 <= grace_s   (d unknown, i.e. no save yet: 1 s)
 * and it pays, i.e. it takes less than redoing the training since the newest committed state
 * (a resume from there redoes it): d < redo_s. A notice to every node (a restart to take in
 * joined nodes) and an unknown redo_s skip the second test: the save promises no lost work.
 * d is what commits the step: without the memory tier the whole save to the disks (save_s); with
 * it (memory: in-memory replicas on, every leaving node's pieces held by a host that stays) and
 * memory first (ah_ckpt_notice_memory_first: it is expected to commit sooner than the disks, or
 * either duration is unknown) the snapshot into host memory and the replication to the peers'
 * memory at the network's rate (memory_s; the disk write follows, and a removal during it loses
 * nothing committed), or save_s while memory_s is unknown (no replication measured yet).
 */
#ifndef AH_CKPT_POLICY_H
#define AH_CKPT_POLICY_H

#include <stdbool.h>

typedef enum { AH_TIER_LOCAL = 0, AH_TIER_PEER, AH_TIER_CLOUD, AH_TIER_MEMORY, AH_TIER_COUNT } ah_ckpt_tier_t;

/* The tiers cheapest first: local, memory, peer, cloud. */
extern const ah_ckpt_tier_t AH_TIER_ORDER[AH_TIER_COUNT];

const char *ah_ckpt_tier_name(ah_ckpt_tier_t t); /* "local", "peer", "cloud", "memory"; "?" out of range */

typedef struct ah_ckpt_notice {
    double elapsed_s;  /* since the notice, when the save would start */
    double grace_s;    /* notice to removal */
    double save_s;     /* the save's expected duration (the last save's); < 0: unknown */
    double redo_s;     /* training since the newest committed state; < 0: unknown */
    bool every_node;   /* every node got the notice (a restart for a join) */
    bool memory;       /* the memory tier commits the step: snapshot + replication (memory_s) */
    double memory_s;   /* their expected duration; < 0: unknown (save_s is used) */
    bool handover;     /* the next plan is known: the replication is the handover (memory_s its duration) */
    double fetch_s;    /* what the relaunch would move without it (the restore's transfer); < 0: unknown */
} ah_ckpt_notice_t;

/* Whether the save at this notice is the handover (docs/checkpoints.md "The handover at a notice"):
 * the memory tier is there, the next plan known, and the handover commits sooner than the disks plus
 * what the relaunch would then fetch (memory_s < save_s + fetch_s, an unknown fetch counting 0) and
 * does not miss the grace period where the disks' save would fit it, or memory_s or save_s is not
 * known yet. */
bool ah_ckpt_notice_handover(const ah_ckpt_notice_t *n);

/* Whether the save at this notice goes to the peers' memory first: the memory tier is there and
 * commits sooner than the disks (memory_s < save_s), or one of the two is not known yet. */
bool ah_ckpt_notice_memory_first(const ah_ckpt_notice_t *n);
bool ah_ckpt_save_at_notice(const ah_ckpt_notice_t *n);

#endif
