/* The replay's parts, shared by the files of sim/ only (not for other modules): the state of one
 * policy's replay and the plan of one availability set, and the functions each file gives the others.
 *
 * - sim.c: the replay loop (ah_sim_run), its events (removals, additions, checkpoints, a recovery's
 *   end), the timeline segments and markers, training time and its tokens and egress.
 * - plans.c: the nodes a policy plans on given what is up, and that set's plan (planned once, cached
 *   by the set): speed, price, egress, the devices' checkpoint bytes and placement, the memory tier.
 * - recovery.c: what a (re)start costs, the rules of sim.h: the stop at a notice (the save, the
 *   handover), the transfer by tier (local, peer, memory, cloud) and the rollback.
 * - transfer.c: checkpoint bytes on the links they cross (between nodes, to and from the cloud tier):
 *   their time, their pairs' shared capacity and their egress.
 *
 * Ownership: the replay owns its cache of plans (ah_sim_entry_free each); a plan points into no
 * planner result. Errors: out of host memory sets x->oom (the replay then fails, naming the policy).
 * One thread. */
#ifndef AH_SIM_REPLAY_H
#define AH_SIM_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/placement.h"
#include "sim/sim.h"

/* One availability set's plan under the policy, as the replay prices it. */
typedef struct ah_sim_entry_s {
    char *key;            /* '0'/'1' per cluster node: the set the plan was made on */
    bool ok;
    char why[384];        /* when !ok: the planner's message */
    double tokens_per_s, iteration_s, plan_s, usd_per_s, egress_usd_per_s; /* egress: while training */
    int tp;
    bool *uses;           /* [n_nodes] nodes the plan uses */
    int *gpus;            /* [n_types] GPUs of those nodes */
    ah_placement_t place;  /* the plan's devices (full-cluster nodes) and the shards they hold */
    int64_t *ckpt_bytes;  /* per device: what its checkpoint holds */
    double gather_s;      /* a sharded plan's save: the all-gather of the moments first */
    bool sharded;         /* the plan shards the optimizer (its moments copied on the trainer's thread) */
    double bound_tokens_per_s; /* the planner's lower bound on any plan's iteration as tokens/s; 0: none claimed */
    int *holder;          /* [n_nodes] memory tier (autohet, replicas on): whose memory holds the node's
                             checkpoint, -1 none; NULL: no memory tier (memory.c) */
    double replicate_s, replicate_usd, replicate_wan_bytes; /* one replication to the holders: its
                             seconds, its egress $ and the bytes it sends across a region (memory.c) */
    bool periodic_off;    /* with holder: replicas cannot pay (every piece on two nodes' disks,
                             ckpt/replica.h ah_replica_pays): the periodic checkpoints are not
                             replicated (no hold, no egress); a notice's save still uses the memory
                             tier (its leaving nodes' own pieces, the handover) */
    double upload_s, upload_usd, upload_wan_bytes; /* a periodic checkpoint's upload to the cloud tier:
                             its seconds, its egress $ and the bytes it sends across a region (transfer.c) */
    bool *alone;          /* [n_nodes] the node holds a piece (shard group at a TP index) no other node of the
                             plan holds: losing it loses that piece's state but for the memory tier */
    struct ah_sim_entry_s *alt[3]; /* o->exposure_aware, autohet: the planner's baselines' plans of the same
                             set (its search's candidates, AH_BASELINE_COUNT), owned; NULL where none fits */
} ah_sim_entry_t;

/* Work kept: tokens, and the training seconds they took (the checkpoint schedule counts those,
 * like the runtime's every-K-steps schedule counts steps). */
typedef struct {
    double tokens, train_s;
} ah_sim_progress_t;

/* One policy's replay: its inputs, the plans made so far, and the state at time t. */
typedef struct {
    const ah_model_t *model;
    const ah_cluster_t *c;
    const ah_sim_opts_t *o;
    ah_policy_t pol;
    const char *region;   /* autohet-region: the region it plans in (ah_sim_confined_region); else NULL */
    int bucket;           /* a node in the cloud tier's region (ah_sim_cloud_node); -1: one region */
    ah_sim_result_t *r;
    ah_sim_entry_t **cache;
    int n_cache, cap_cache;
    /* replay state */
    bool *up;             /* [n_nodes] up now */
    bool *holds;          /* [n_nodes] the node still holds its part of the state plan */
    double t, recover_end, ckpt_due;
    ah_sim_progress_t now;
    ah_sim_progress_t at_ckpt; /* the last periodic checkpoint: on the disks, uploaded in the background */
    ah_sim_progress_t at_cloud; /* the newest checkpoint whose upload has ended: what the cloud holds */
    ah_sim_progress_t uploading, upload_next; /* the checkpoint being uploaded (until upload_end), and the
                                  newest one waiting for it */
    const ah_sim_entry_t *uploading_by, *upload_next_by; /* the plans that saved them: their upload's
                                  seconds and egress */
    bool has_uploading, has_upload_next;
    double upload_end;
    ah_sim_progress_t at_disk; /* the newest state on the disks: that, or a save at a notice since */
    ah_sim_progress_t at_mem;  /* the state the memory tier holds: the last periodic checkpoint, or a
                                  memory-first save at a notice since (memory.c) */
    ah_sim_phase_t phase;
    ah_sim_entry_t *run;   /* the plan training, or being recovered to; NULL when stalled */
    const ah_sim_entry_t *launched; /* the last relaunch's plan (recovery.c: parked devices) */
    uint64_t *spent;      /* [n_nodes] launched's devices that cannot come back (bit index; recovery.c spend) */
    ah_sim_entry_t *state; /* the plan whose devices hold the latest state; NULL when none */
    bool fresh;           /* nothing trained yet: a start has nothing to transfer */
    bool started;         /* the first (re)start happened */
    bool pending_join;
    /* the churn the replay has seen so far (plans.c, ah_sim_plan_choose): per GPU type, the removals of its
     * spot nodes, the changes that removed some (several may go at once) and the seconds its spot nodes
     * were up, the seconds since the first change */
    double *spot_removals, *spot_removal_events, *spot_node_s;
    unsigned skip_types;  /* types left out of the set planned on (a candidate of ah_sim_plan_choose) */
    const bool *plan_within; /* [n_nodes] or NULL: the set planned on is also within these nodes (recovery.c:
                             the nodes of the running plan, for a change in place) */
    const uint64_t *plan_devices; /* [n_nodes] or NULL: the set planned on has, of each node, only the GPUs
                             (bit i: GPU index i) set here, and the plan's devices keep those indices (recovery.c:
                             the running ranks' devices on the staying nodes, for a change in place) */
    double choice_plan_s; /* the last ah_sim_plan_choose's planning: every candidate's measured time */
    double stall_until;   /* a periodic checkpoint holds training until then (sim.c, ah_sim_ckpt_hold_s) */
    double hold_after_s;  /* the hold of a change in place's save written behind, from its first step on (recovery.c) */
    int cap_segs, cap_markers, cap_recs;
    bool oom;
} ah_sim_replay_t;

/* autohet and autohet-region: the agent's rules (local-first recovery, the save at a notice, the
 * memory tier, the planner's search), the latter on one region's nodes. */
static inline bool ah_sim_agent_policy(ah_policy_t p) {
    return p == AH_POLICY_AUTOHET || p == AH_POLICY_AUTOHET_REGION;
}

/* Layer l of 0 .. L + 1 (the embedding, blocks 0 .. L - 1, the head) as a shard group. */
static inline ah_shard_group_t ah_sim_layer_group(int layer, int L) {
    return layer == 0 ? (ah_shard_group_t){AH_SHARD_EMBED, -1}
           : layer == L + 1 ? (ah_shard_group_t){AH_SHARD_HEAD, -1} : (ah_shard_group_t){AH_SHARD_BLOCK, layer - 1};
}

/* transfer.c: checkpoint bytes on the links they cross (its header has the rules). The flows of one
 * phase: their egress $, the bytes across a region, and the bytes on each "links" pair that has a
 * total_gb_s. */
typedef struct {
    const ah_cluster_t *c;
    double *pair_bytes;   /* [c->net.n_links] */
    double usd, bytes_across_regions;
} ah_sim_flows_t;
bool ah_sim_flows_init(ah_sim_flows_t *f, const ah_cluster_t *c); /* false: out of host memory */
void ah_sim_flows_free(ah_sim_flows_t *f);
/* bytes from node `from` to node `to` on one device's share: seconds (inside a zone at inter_node_gb_s,
 * else the link's per-GPU bandwidth, recorded in f). */
double ah_sim_flow(ah_sim_flows_t *f, int from, int to, double bytes);
/* The least a phase of f's flows lasts: max over "links" pairs with a total_gb_s of their bytes / it. */
double ah_sim_flows_shared_s(const ah_sim_flows_t *f);
/* memory.c: bytes[y] (pl's nodes; <= 0 nothing) from each node to holder[y] (-1, or holder NULL: a node
 * of its zone) as the runtime replicates them: the pairs in rounds of disjoint pairs, each over one
 * flow a rank of the smaller node (plan/ckpt_traffic.h ah_ckpt_lane_count, ah_ckpt_pairs_in_rounds,
 * ah_ckpt_pairs_s), at least a "links" pair's bytes over its total_gb_s; f gets the egress. -1 when out
 * of host memory. */
double ah_sim_memory_send_s(const ah_cluster_t *c, const ah_placement_t *pl, const double *bytes, const int *holder,
                            ah_sim_flows_t *f);
/* Seconds for `node` to move `bytes` to or from the cloud tier whose region holds node `bucket` (-1:
 * one region): cloud_gb_s, or from another region the least of it and the link's per-GPU bandwidth x
 * the node's GPUs, recorded in f. */
double ah_sim_cloud_flow(ah_sim_flows_t *f, int node, int bucket, double bytes);
/* One periodic checkpoint's upload (each (layer, TP shard) once, from its lowest holder, every node its
 * own at once): into e its seconds (the slowest node's at ah_sim_cloud_flow's rate, at least a "links"
 * pair's bytes over its total_gb_s), the egress $ and the bytes of the uploaders in another region than
 * `bucket`'s. false when out of host memory. */
bool ah_sim_upload(const ah_cluster_t *c, const ah_model_t *m, int bucket, ah_sim_entry_t *e);
/* sim.c: the cloud tier's uploads up to x->t (at_cloud the newest ended; the newest waiting one starts
 * when the one in flight ends, those between skipped, as the runtime's uploader does). An upload's
 * egress is paid when it starts. */
void ah_sim_uploads_settle(ah_sim_replay_t *x);
/* sim.c: a periodic checkpoint of x->run handed to the uploader at x->t: it starts, or waits for the one
 * in flight (replacing one waiting before it, never started nor billed). */
void ah_sim_upload_submit(ah_sim_replay_t *x);
/* sim.c: at a restart, the uploads not ended by x->t are dropped (the one in flight cut, its egress
 * paid for what it sent; the one waiting never starts): the rule and the runtime code it follows are
 * in docs/simulator.md "Uploads at a restart". */
void ah_sim_uploads_cut(ah_sim_replay_t *x);
/* sim.c: at a restart of the varuna policy (the runtime's --recovery cloud-only: every disk is dropped,
 * so no node drops its upload), the old job's exit waits for its uploads: those that end within
 * limit_s of x->t complete (the cloud holds them), the rest are cut at limit_s (the agent's kill at the
 * grace period's end). Returns the seconds waited; x->t is unchanged. */
double ah_sim_uploads_drain(ah_sim_replay_t *x, double limit_s);

/* plans.c: the plan of the set the policy plans on given x->up (cached); NULL only when out of
 * host memory (a set with no plan gives an entry with ok false and the planner's message). */
ah_sim_entry_t *ah_sim_plan_for(ah_sim_replay_t *x);
void ah_sim_entry_free(ah_sim_entry_t *e);
/* sim.c: the join rule's key of plan e (elastic/join_rule.h): what a token costs, seconds (or $ under the
 * cost objective, the agent's ah_planner_key); INFINITY without a plan. ah_sim_weighed_usd_per_s: the $ per
 * second the cost objective weighs for plan e: without o->release_idle the nodes held now
 * (ah_sim_held_usd_per_s, as the planner's held_usd_per_hour), else e's own GPUs; e's egress on top. */
double ah_sim_join_key(const ah_sim_replay_t *x, const ah_sim_entry_t *e);
double ah_sim_weighed_usd_per_s(const ah_sim_replay_t *x, const ah_sim_entry_t *e);
/* plans.c: the join rule's cost of a restart, as the agent measures it (elastic/agent_join.c join_cost_s): the
 * mean notice to first finished step of the replay's finished (re)starts, the first start included, less the
 * step in progress at the notice; o->restart_s before any. */
double ah_sim_join_cost_s(const ah_sim_replay_t *x);
/* plans.c: the plan the policy starts on given x->up. autohet (with o->churn_aware): of the plans on
 * the nodes up and on them less every subset of their spot types that lost a node, the one of the
 * most expected tokens per second (time) or tokens per $ (cost) once the recoveries the churn seen so
 * far predicts are taken off; else ah_sim_plan_for. x->choice_plan_s: the measured planning time of
 * every candidate (a re-plan's, as the agent would plan them one after the other). NULL only when
 * out of host memory. */
ah_sim_entry_t *ah_sim_plan_choose(ah_sim_replay_t *x);
/* The most GPU types ah_sim_plan_choose leaves out subsets of (2^8 - 1 candidate sets at most); on a
 * cluster of more types it plans on every node up, as without churn-awareness. */
#define AH_SIM_CHURN_MAX_TYPES 8
/* Preemptions per second that hit plan e at the churn seen so far: per spot type, its nodes in e
 * times the type's removals per node-second up, at most the type's changes that removed some per
 * second (nodes removed together hit once); one node-hour (hour) of no removal assumed first. */
double ah_sim_hit_rate(const ah_sim_replay_t *x, const ah_sim_entry_t *e);
/* The seconds a preemption takes from training, expected from this replay's finished recoveries
 * (their seconds less the wait and the first step, whose tokens count, plus the training their
 * rollback undid), o->restart_s before any. */
double ah_sim_recovery_cost_s(const ah_sim_replay_t *x);

/* recovery.c: the training a stop and relaunch onto plan e now would undo, in seconds of plan per's work (its
 * tokens / per's tokens per second; the join rule's cost is in those): the running plan's save at the notice
 * (join: a restart for a join, every node notified) by ckpt/policy.h's rule, with the memory tier its snapshot
 * as what commits (a lower bound: the replication left out), and the restore's tiers onto e (transfer_s): back
 * to the cloud's newest upload ended when a piece comes from the cloud, to the memory's state when one comes
 * from memory, to the disks' newest when the save is not made, else nothing (the step in progress counted
 * when it is undone). 0 before anything was trained. Settles the uploads ended by now. */
double ah_sim_restart_rollback_s(ah_sim_replay_t *x, const ah_sim_entry_t *e, bool join, const ah_sim_entry_t *per);

/* recovery.c: the handover at a notice (the runtime's ckpt/handover.h), what moves from the state
 * placement `was` to `next`: moved[source * c->n_nodes + reader] (c->n_nodes^2) gets the bytes each
 * node of next receives from each other node: once a node, each piece its devices read that its own
 * node did not hold (under the same TP degree the (layer, TP index) a device loads, under a new one
 * every old shard of the layer, an old shard's whole file, as the runtime's files), from its nearest
 * holder; f (may be NULL) gets the flows where the cluster has several zones. false: out of host memory. */
bool ah_sim_handover_moved(const ah_cluster_t *c, const ah_model_t *m, const ah_placement_t *was,
                           const ah_placement_t *next, ah_sim_flows_t *f, double *moved);
/* recovery.c: a (re)start onto plan e at x->t, timed and recorded (sim.h's rules); the replay is then
 * recovering to e. join: every node got the notice (a restart to take in joined nodes). */
/* What a checkpoint of plan e holds training for (sim.c: the runtime's asynchronous save's copy into host
 * memory beyond the next step, at gb_s per device, a sharded plan's gather, the memory tier's
 * replication): a periodic one's (o->ckpt_snapshot_gb_s), and since 9fc0844 the save of a change in place
 * written behind the next step (recovery.c; o->change_snapshot_gb_s: into a buffer the reopened checkpoint
 * session allocates). */
double ah_sim_ckpt_hold_s(const ah_sim_entry_t *e, double gb_s);
/* Whether plan e can follow plan run in place at a notice, the nodes up[]: e on run's staying devices only (or
 * devices parked since the relaunch onto launched, NULL none, and not spent: spent[node] bit index, NULL none; or
 * on free nodes: up, run uses none of their devices, their jobs join with the change since session 24), at least
 * one of each staying node's; *parked: run's staying ranks e leaves out (recovery_devices.c; at a notice
 * recovery.c counts a free node only when the agent's admission fits, free_node_admits). ah_sim_gains_node: whether
 * e has a rank on a node run does not use (such a change saves before its move and is priced as the join in place,
 * AH_SIM_JOIN_IN_PLACE_FRACTION: its admission and move). */
bool ah_sim_gains_node(const ah_sim_entry_t *run, const ah_sim_entry_t *e);
bool ah_sim_devices_kept(const bool *up, const ah_sim_entry_t *run, const ah_sim_entry_t *launched,
                         const uint64_t *spent, const ah_sim_entry_t *e, int *parked);
/* Whether plan e re-admits a parked rank (the same arguments): such a change saves before its move (recovery.c).
 * ah_sim_join_kept: whether a join onto e can be in place (x->launched, x->spent; recovery_devices.c). */
bool ah_sim_readmits(const ah_sim_entry_t *run, const ah_sim_entry_t *launched, const uint64_t *spent,
                     const ah_sim_entry_t *e);
bool ah_sim_join_kept(const ah_sim_replay_t *x, const ah_sim_entry_t *run, const ah_sim_entry_t *e);
/* The parked ranks that can come back after a change onto e (x->launched, x->spent; recovery_devices.c). */
void ah_sim_spend(ah_sim_replay_t *x, const ah_sim_entry_t *e, bool afresh, bool join);
void ah_sim_begin_recovery(ah_sim_replay_t *x, ah_sim_entry_t *e, bool join, const char *label, const char *arg);

/* sim.c: a new timeline segment from x->t (closing the one before); a marker at x->t; dt seconds
 * of training on the running plan. */
void ah_sim_seg_open(ah_sim_replay_t *x, ah_sim_phase_t phase, const char *fmt, const char *arg);
void ah_sim_mark(ah_sim_replay_t *x, bool replan);
void ah_sim_train(ah_sim_replay_t *x, double dt);
/* sim.c: the $ per second of the nodes the policy holds now, and their GPUs in *gpus (rule 2): every node
 * up (on-demand: the whole cluster, at its prices; autohet-region: its region's), used by the plan or
 * not, training, recovering or stalled: the agent releases no host it was given. */
double ah_sim_held_usd_per_s(const ah_sim_replay_t *x, double *gpus);
/* The memory tier replicates the running plan's checkpoint to its holders (a commit): its egress paid. */
void ah_sim_replicated(ah_sim_replay_t *x);
/* Checkpoint bytes that crossed zones or regions: usd paid (in egress and $), bytes_across_regions counted. */
void ah_sim_pay_ckpt_egress(ah_sim_replay_t *x, double usd, double bytes_across_regions);

#endif
