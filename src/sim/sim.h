/* The spot simulator: replays availability traces on a cluster file and compares policies.
 *
 * 1. Availability (avail.c). One trace per pool; a pool is the spot nodes of one GPU type, or of
 *    one type in one zone or one region ("H800", "H800@b", "H800@eu-west-1": a zone's name first,
 *    else a region's), in cluster-file order. Mapping of a trace onto
 *    the pool's nodes:
 *     - event traces: at "add nodeN" the id takes the first free node of the pool (cluster order)
 *       and keeps it until "remove nodeN"; an add when every node is taken is ignored (counted as
 *       capped) and so is the matching remove.
 *     - count traces: the count is capped at the pool size; on an increase the first free nodes
 *       join, on a decrease the newest-joined nodes leave (newest-first), or with a seed random
 *       free / alive nodes are picked instead (a fixed xorshift generator, same seed same run).
 *    On-demand nodes and spot nodes of pools without a trace are up all the time. Changes at t = 0
 *    are the initial state. Every assignment is recorded so the caller can print the mapping.
 * 2. Policies (sim.c, plans.c, recovery.c), each replaying the same availability for the same wall time:
 *     - autohet: ah_planner_run on the nodes up; local-first recovery.
 *     - uniform: the Megatron-style baseline (ah_baseline_run uniform) on the nodes up; restarts
 *       from the last cloud checkpoint.
 *     - varuna: the uniform baseline on the largest single-type part of what is up (most GPUs;
 *       ties to the earlier type), cloud-only recovery.
 *     - on-demand: ah_planner_run on the whole cluster at on-demand prices, never preempted.
 *    autohet and on-demand plan under opts.objective and opts.budget_usd_per_hour (autohet plan's
 *    --objective and --budget); the baselines' plans are theirs whatever the objective, as in plan.
 *     - megatron-best: the megatron-best baseline (the best symmetric plan on one GPU type or on
 *       all of them) on the nodes up; restarts from the last cloud checkpoint, like uniform.
 *     - autohet-region: autohet confined to the nodes of one region (opts.region, or the region
 *       whose nodes cost the least per GPU-hour on average: ah_sim_confined_region), every rule of
 *       autohet's its own; on a cluster of one region it is autohet.
 *    The rules (docs/simulator.md says the same, keep them in step):
 *     - A policy trains at its plan's predicted tokens/s; it pays usd_per_gpu_hour for every GPU
 *       of every node it holds: every node up (on-demand: the cluster; autohet-region: its region's),
 *       whether its plan uses it or not, stalled too (ah_sim_held_usd_per_s: the agent releases no
 *       host; until session 22 only the nodes the plan used were paid, idle ones taken as released).
 *       While it trains it pays its plan's egress too (the bytes the plan sends across zones and
 *       regions per iteration at the cluster's $/GB, at its rate: plan/price.c), counted in usd
 *       and shown apart as egress_usd; and with the memory tier, each replication of the
 *       checkpoints to their holders (a periodic checkpoint, a memory-first save at a notice) pays
 *       the bytes that cross a zone or region at that link's $/GB (ckpt_egress_usd, part of it),
 *       and so do a recovery's reads and a handover's moves across zones and regions (transfer_s
 *       below) and every policy's upload of each periodic checkpoint to a cloud tier in another
 *       region (opts.cloud_region; in the background, holding nothing: transfer.c).
 *       The plans are the planner's on the nodes up in every region at once (autohet-region: in
 *       its one region), so a re-plan may move pipelines between regions, priced on the WAN.
 *     - Checkpoints are taken every ckpt_every_s of training time kept (like the runtime's
 *       every K steps: a restart without rollback keeps the schedule, a rollback goes back to a
 *       point of it) and hold training as the runtime's asynchronous save does: a sharded plan's
 *       all-gather, each device's copy into host memory (ckpt_snapshot_gb_s) and, with the memory
 *       tier, the replication to the partners as the runtime runs it (plan/ckpt_traffic.h
 *       ah_ckpt_pairs_s: blocking pairs in rounds of disjoint pairs, one flow a rank of the smaller node each; the commit runs it on the
 *       trainer's thread); the disks and the cloud are written in the background. Every policy is
 *       priced so (the baselines as if their saves were as asynchronous). The cloud holds a
 *       checkpoint once its upload ends (transfer.c; one at a time, the newest next; its egress paid
 *       as it starts; every restart ends the old job's uploads, one cut paying what it sent, as
 *       the runtime's nodes the relaunch reads cancel theirs: docs/simulator.md rule 4). A rollback to
 *       the cloud returns tokens to the newest it holds (or, for autohet, to the newest state on
 *       the disks or in memory).
 *     - A removal that hits a node of the running plan (or of the plan being recovered to, or of
 *       the plan whose devices hold the state) triggers a (re)start; others are ignored (the plan
 *       still runs, and a plan optimal on a larger set stays optimal on the subset).
 *     - Added nodes (autohet and autohet-region, as the agent: elastic/join_rule.h): the policy plans on
 *       the larger set and restarts onto it when it is better under the objective (faster; cheaper per
 *       token under the cost objective) and the gain over the expected stay (o->join_horizon_s, or 1 /
 *       that plan's hit rate at the churn seen so far, ah_sim_hit_rate) exceeds the restart's cost (the
 *       mean notice-to-first-step of the replay's finished (re)starts less their wait, the first start
 *       included: what the agent measures); decided when the nodes come up while training, at a
 *       recovery's end and at each checkpoint, and while better but not paying they wait (joins close
 *       together are taken in one restart). The restart is a notice to every node: the step in
 *       progress finishes and the stop saves (a join always saves), so no work is lost. The baselines
 *       restart at the next checkpoint when the plan is faster. With nothing running (no feasible
 *       plan), added nodes are used at once.
 *     - Churn-aware plans (autohet with opts.churn_aware; replay.h ah_sim_plan_choose): at a (re)start
 *       and a join autohet plans on the nodes up and on them less every subset of the spot types that
 *       have lost a node so far, and takes the plan of the most expected tokens/s (tokens per $ under
 *       the cost objective): its rate x (1 - hit rate x recovery cost), the hit rate from the
 *       removals seen so far (ah_sim_hit_rate), the cost the mean finished recovery less its wait and
 *       first step, plus the training time its rollback undid; its joins follow the join rule above.
 *     - A (re)start is timed as the agent times a recovery (docs/elastic.md): from the notice to
 *       the first finished step after it, recovery = stop_s + replan_s + restart_s + transfer_s
 *       + first_step_s, each term from inputs known before running:
 *        - stop_s (autohet only, when it stops a training job: it reacts to the notice): the step
 *          in progress finishes (wait_s = half the old plan's predicted iteration on average; its
 *          tokens count), then every node saves its devices' checkpoint at the notice
 *          (save_s = max over nodes of their checkpoint bytes / opts.disk_gb_s) when the
 *          runtime's rule says so (ah_ckpt_save_at_notice, ckpt/policy.h: wait_s + 1.5 x save_s
 *          + 0.5 fits the grace period opts.grace_s, and the save takes less than redoing the
 *          training since the newest state on the disks; a join always saves): a checkpoint
 *          of the disks (the cloud keeps the last periodic one). Otherwise nothing is saved
 *          (save_s = 0) and autohet rolls back to the newest state on the disks. uniform and
 *          varuna are killed at the removal (stop_s = 0) and roll back; varuna (the runtime's
 *          --recovery cloud-only) first waits for its uploads, within the grace period
 *          (ah_sim_uploads_drain: the wait is its stop_s).
 *        - replan_s: the measured planner time for that availability set (churn-aware: for every
 *          candidate set it planned), or opts.replan_s >= 0.
 *        - restart_s: opts.restart_s, the machine's fixed relaunch overhead (the old job's exit,
 *          mpirun and start-up, the restore's bookkeeping, the first step's warm-up).
 *        - transfer_s: each device of the new plan needs the checkpoint bytes of its layers
 *          (parameters x AH_SIM_CKPT_BYTES_PER_PARAM: weights + AdamW m, v in fp32; gradients are
 *          not saved). A (layer, TP shard) is "local" when the same device held it (same TP
 *          degree), "peer" when another surviving device of the state plan held it (any shard
 *          set covering it when the TP degree changed), else "cloud" — who held what is the
 *          runtime's shard placement (ckpt/placement.h).
 *          transfer_s = max over nodes (cloud bytes of its devices) / cloud_gb_s
 *                     + max over devices (peer bytes) / inter_node_gb_s; local bytes cost nothing
 *          (they were just written and are read back from the page cache). A peer (and memory)
 *          piece comes from its nearest holder; from another zone or region over that link (its
 *          per-GPU bandwidth, its $/GB as egress), and a node's cloud bytes from a bucket in another
 *          region at the least of cloud_gb_s and the link's rate x its GPUs, billed too; a phase
 *          lasts at least its bytes on a "links" pair over the pair's total_gb_s (transfer.c).
 *        - first_step_s: the new plan's predicted iteration; its tokens count at its end.
 *       The first start has no stop and nothing to transfer.
 *     - autohet rolls back to the newest periodic checkpoint in the cloud when some needed (layer,
 *       shard) is cloud (its latest state is gone); survivors then serve the checkpoint version of what
 *       they hold (assumes a device's local checkpoint holds its current layers). uniform and
 *       varuna always roll back and fetch everything from the cloud.
 *     - An event during a recovery restarts it (the time spent so far is lost) when it hits one
 *       of the nodes involved.
 *     - The memory tier (autohet with opts.replica_memory_gb > 0; memory.c): each node's checkpoint
 *       is also in the host memory of its partner (the runtime's rule, ckpt/replica.h) when it fits
 *       the budget; it holds the last periodic checkpoint, or the notice's state after a save at
 *       the notice: memory first (ah_ckpt_notice_memory_first: snapshot at snapshot_gb_s per
 *       device + the replication's pairs (ah_ckpt_pairs_s) on the links to the partners, sooner
 *       than the disks; the disks follow, the stop capped at the grace period), or
 *       the disks first and then the replication (the runtime's synchronous save; its seconds,
 *       which the rule takes, include it); at a notice leaving some nodes the replication sends
 *       only the leaving nodes' pieces no staying node holds (recovery.c notice_replication_s, as
 *       runtime/ckpt_replica.c), a join's every node's. A (layer, shard) no surviving device holds
 *       but a surviving holder's memory does is "memory", moved at inter_node_gb_s per device
 *       (after the peer phase; from a holder in another zone or region over that link, as a peer
 *       read), and the run goes back to the state the memory holds, not to the
 *       cloud's periodic checkpoint.
 *     - The handover at a notice (with the memory tier and opts.handover, the runtime's default; not
 *       for a join, nor for a removal during a recovery): the save is the snapshot plus, for each
 *       node of the next plan, each piece its devices read and it did not hold, once a node (the
 *       runtime's ckpt/handover.h; recovery.c ah_sim_handover_moved), sent node pair by node
 *       pair as the runtime does (ah_ckpt_pairs_s), billed across zones and regions (recovery.c,
 *       transfer.c);
 *       committed in memory, the disks not written before the relaunch; the relaunch's transfer is
 *       then 0 (every byte on its own host, counted as memory) and nothing rolls back.
 */
#ifndef AH_SIM_SIM_H
#define AH_SIM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt/placement.h"
#include "ckpt/policy.h"
#include "cost/cost.h"
#include "planner/planner.h"
#include "spec/trace.h"
#include "spec/cluster.h"
#include "spec/model.h"

/* ---- availability ---- */

typedef struct ah_sim_pool {
    char name[2 * AH_NAME_MAX + 2]; /* as given: "H800" or "H800@b" */
    int type;                       /* cluster type index */
    char zone[AH_NAME_MAX];         /* the zone or region after '@'; "" = any */
    int *nodes;                     /* cluster node indices, cluster order */
    int n_nodes;
    ah_trace_t trace;
    /* mapping facts, filled by ah_sim_avail_build */
    int capped;                     /* event adds ignored / count rows above the pool size */
    int max_wanted;                 /* the most instances the trace asks for at once */
} ah_sim_pool_t;

typedef struct ah_sim_change {
    double t_s;
    int node; /* cluster node index */
    bool up;
    int pool;
    int trace_id; /* event traces: ah_trace_t.ids index; -1 for count traces */
} ah_sim_change_t;

typedef struct ah_sim_avail {
    const ah_cluster_t *cluster;
    bool *up0;               /* [n_nodes] up at t = 0 (after the t = 0 changes) */
    ah_sim_change_t *changes;/* t > 0, by time (stable) */
    int n_changes;
    ah_sim_change_t *initial;/* the t = 0 changes, for printing the mapping */
    int n_initial;
    double end_s;            /* the latest trace end */
    uint64_t seed;           /* count traces: 0 newest-first, else random picks with it */
} ah_sim_avail_t;

/* Resolves "TYPE", "TYPE@ZONE" or "TYPE@REGION" to the pool's spot nodes. The message lists the
 * spot types and zones (and regions, where there are several) there are when nothing matches. */
ah_status_t ah_sim_pool_resolve(const ah_cluster_t *c, const char *name, ah_sim_pool_t *pool,
                                ah_error_t *err);
/* seed 0: newest-first for count traces; else random picks with that seed. Pools must not
 * share nodes. */
ah_status_t ah_sim_avail_build(const ah_cluster_t *c, ah_sim_pool_t *pools, int n_pools,
                               uint64_t seed, ah_sim_avail_t *out, ah_error_t *err);
void ah_sim_avail_free(ah_sim_avail_t *a);
void ah_sim_pool_free(ah_sim_pool_t *p);

/* ---- policies and the replay ---- */

typedef enum {
    AH_POLICY_AUTOHET = 0,
    AH_POLICY_UNIFORM = 1,
    AH_POLICY_VARUNA = 2,
    AH_POLICY_ON_DEMAND = 3,
    AH_POLICY_MEGATRON_BEST = 4,
    AH_POLICY_AUTOHET_REGION = 5,
    AH_POLICY_COUNT
} ah_policy_t;

const char *ah_policy_name(ah_policy_t p);
bool ah_policy_parse(const char *s, ah_policy_t *out);

typedef struct ah_sim_opts {
    ah_train_t train;          /* micro_batch 0 = the planner's auto */
    const ah_profile_t *profile;
    double hours;              /* horizon; <= 0: the latest trace end */
    double ckpt_every_s;       /* checkpoint interval (training time) */
    double restart_s;          /* relaunch overhead per (re)start */
    double replan_s;           /* < 0: charge the measured planner time */
    double on_demand_factor;   /* on-demand price = spot price x this, unless the cluster has an
                                  on-demand node of the same type (then its price: one in the
                                  node's region first) */
    double disk_gb_s;          /* local disk write bandwidth per node (the save at the notice) */
    double grace_s;            /* notice to removal: autohet saves at the notice only if it fits */
    ah_shard_mode_t shard;     /* the sharded optimizer of autohet's plans (planner.h); a save then
                                  first all-gathers each device's moments (docs/checkpoints.md) */
    ah_objective_t objective;  /* autohet's and on-demand's plans: time or $ per token (planner.h) */
    ah_schedule_mode_t schedule; /* --schedule of every policy's plans, restricted as a training run's
                                  are to the schedules the runtime runs (planner.h) */
    int cp;                    /* --cp of every policy's plans (planner.h ah_planner_opts_t.cp) */
    double budget_usd_per_hour;/* > 0: their plans' GPUs and egress cost at most this per hour
                                  (on-demand's GPUs at on-demand prices) */
    double replica_memory_gb;  /* autohet's in-memory peer replicas (the runtime's --replica-memory-gb):
                                  GB each holding host keeps; 0: off (sim/memory.c) */
    double snapshot_gb_s;      /* a device's copy of its checkpoint into its host's memory, GB/s per
                                  device (AH_SIM_SNAPSHOT_GB_S) */
    double ckpt_snapshot_gb_s; /* a periodic checkpoint's copy into host memory (the runtime's asynchronous
                                  snapshot, which holds training for what the next step does not overlap), GB/s
                                  per device (AH_SIM_CKPT_SNAPSHOT_GB_S) */
    double change_snapshot_gb_s; /* the same for the snapshot of a change in place written behind, into a buffer
                                  the reopened checkpoint session allocates (AH_SIM_CHANGE_SNAPSHOT_GB_S) */
    bool handover;             /* with the memory tier: the handover at a notice (memory.c; the runtime's
                                  default, `run --no-handover` and `simulate --no-handover` turn it off) */
    bool replicas_always;      /* with the memory tier: the periodic checkpoints replicated under every plan
                               (`autohet train --replica-memory-gb` alone); default off: not where every
                               piece is on two nodes' disks (`run`'s --replica-when-it-pays; plans.c) */
    bool release_idle;         /* every policy pays only the nodes its plan uses (the one it is recovering to
                                  included), as if the others were given back while unused; default off: every
                                  node up is paid (ah_sim_held_usd_per_s), as the agent releases no host */
    bool exposure_aware;       /* autohet's choice weighs the rollback a hit on a node holding a piece of the
                                  state alone would cost (plans.c ah_sim_plan_choose; the agent with
                                  `run --exposure-aware` since e715fdd) */
    bool churn_aware;          /* autohet leaves out spot types whose preemptions cost more than they train
                                  (replay.h ah_sim_plan_choose) */
    bool in_place;             /* autohet changes plans in place at a notice (runtime/reconfig.h): a recovery
                                  that saved at the notice onto a plan on the old plan's staying devices only
                                  pays restart_s x AH_SIM_IN_PLACE_FRACTION (x AH_SIM_PARK_IN_PLACE_FRACTION when
                                  some of a staying node's ranks park); that plan is the planner's over the
                                  old plan's devices on the staying nodes unless relaunching onto every node up pays (the join
                                  rule), and the save is made whenever it fits (recovery.c in_place_choice);
                                  off in ah_sim_opts_default; `simulate` turns it on unless --no-in-place or
                                  --no-handover, as `run` (docs/simulator.md rule 11) */
    double join_horizon_s;     /* autohet's join rule (elastic/join_rule.h): > 0 a fixed stay, seconds; 0: from
                                  the removals seen (the agent's `run --join-horizon-s`) */
    char region[AH_NAME_MAX];  /* autohet-region's region; "": ah_sim_confined_region's cheapest */
    char cloud_region[AH_NAME_MAX]; /* the cloud tier's bucket's region; "": the first node's (transfer.c) */
} ah_sim_opts_t;

/* The in-place change's share of a relaunch's fixed overhead (opts.in_place), measured by
 * bench/bench_inplace.sh (docs/elastic.md, 2026-12-07, medians of 3 rounds, load 19-20): the change in
 * place's teardown + split + init, 0.0003 + 0.0044 + 0.006 s, against the restart's old job's exit +
 * new job's start-up, 1.114 + 0.815 s. The runtime there makes no device context and no NCCL
 * communicator, which a GPU relaunch's restart_s holds and the change in place still rebuilds (the
 * communicators): at scale this share is a lower bound, the tokens it gains an upper bound. */
#define AH_SIM_IN_PLACE_FRACTION (0.0107 / 1.929)

/* The share of a relaunch's fixed overhead that a change in place pays when some of a staying host's ranks
 * park (devices the next plan leaves out: runtime/reconfig.h, docs/elastic.md "Parked ranks"; the agent's
 * map_ranks since 8a69e6c), measured by `SET=partial bash bench/bench_recovery.sh` (8a69e6c, load 26-28,
 * tiny-gpt2 on examples/clusters/cpu-partial-host.json, fast-0's third rank parked): notice -> first step
 * 0.34 s in place against 8.67 s relaunched (--no-in-place), 25.5x. That ratio holds the save and the first
 * step on both sides, so it overstates the fixed overhead's share (a higher price than
 * AH_SIM_IN_PLACE_FRACTION's phases alone): the tokens it gains are a lower bound on the CPU runtime's; the
 * same no-device-context caveat as AH_SIM_IN_PLACE_FRACTION otherwise. The later runs are lower: f934ee7's
 * (load 18-19) 0.15 / 7.86 s, 44072e6's (load ~5, after 9fc0844, so no save in place) 0.04 / 1.51 s; the
 * first, the highest, is kept. */
#define AH_SIM_PARK_IN_PLACE_FRACTION (0.34 / 8.67)

/* A join in place's share of a relaunch's fixed overhead (opts.in_place, a join whose next plan keeps
 * every running rank's device and puts its other ranks on the joining nodes only: the agent's condition,
 * elastic/agent_inplace_join.c map_join), measured by `ROUNDS=3 bash bench/bench_join_inplace.sh` at main
 * 84452e9.. (session 23: the state moved to the joining ranks since cf4ac18; medians of 3 rounds, load
 * 2.4-2.6, tiny-gpt2): the join in place's start-up (the new job's admission, its connect and merge, the
 * set-up; the move 0.006 s apart), 0.328 s, against the relaunch's old job's end after its save plus
 * its start-up, 1.102 + 0.334 s (in place 0.397 s in all against 1.466 s, 3.69x). Session 22's (202908e, the state
 * restored, load 9-15) was 0.357 / (2.126 + 0.515) = 0.135: the relaunch's end after its save is shorter
 * at this load. The joining job's process start and MPI_Init come before the request, off the path. The
 * same caveat as AH_SIM_IN_PLACE_FRACTION: no device context or NCCL communicator on the CPU runtime, so
 * a lower bound at scale. */
#define AH_SIM_JOIN_IN_PLACE_FRACTION (0.328 / (1.102 + 0.334))

/* 1800 s, 60 s, measured, 2.5, disk 8 GB/s, grace 120 s (AWS's two-minute notice), replicas off,
 * snapshot AH_SIM_SNAPSHOT_GB_S */
void ah_sim_opts_default(ah_sim_opts_t *o);

/* Checkpoint bytes per parameter: weights (or the fp32 master) + AdamW m, v, 4 bytes each. */
#define AH_SIM_CKPT_BYTES_PER_PARAM 12

/* A device's copy of its checkpoint into its host's memory at a notice (the memory tier's snapshot),
 * GB/s per device: the runtime's, measured (docs/simulator.md "The memory tier"):
 * `bash bench/bench_notice_save.sh B 3`, the notice's checkpoint event of a memory-first save,
 * 1.0237 GB per rank (GPT-2 small's shape, two ranks) over its memory_snapshot_seconds 1.80, 2.36,
 * 1.83 s: median 0.56 GB/s (three direct runs before it: 1.32, 1.84, 2.19 s, median 0.56 too);
 * safetensors with CRC-32C into a tmpfs on the shared 2-core machine at load 3-4, so a lower bound
 * for a GPU host, whose copy is a device-to-host transfer and one core per rank. */
#define AH_SIM_SNAPSHOT_GB_S 0.56

/* The asynchronous snapshot's copy into host memory, GB/s per device, as ah_sim_ckpt_hold_s (replay.h) prices
 * it: training waits for what the copy has not done by the end of the next step's forward and backward
 * (max(0, bytes / this - iteration_s)), as the runtime does on both backends since 927efb7 (CUDA: the
 * copies into page-locked memory on a side stream, the compute stream waiting on their event before the
 * next AdamW, backend/cuda_snapshot.c; CPU: the writer thread's copies, the same fence,
 * backend/cpu_snapshot.c, and since 24d6e25 AdamW's own stores into the kept buffer, ckpt_fuse.c). Each
 * constant is the rate at which that formula gives the hold the CPU runtime was measured to take on the
 * bench's own plan (a step of base seconds: rate = bytes / (hold + base)), measured with
 * `KEEP=DIR bash bench/sim_ckpt_hold.sh B 3` (session 24, 2026-12-07, at 074811f's runtime, load 4.6-7.5 on
 * the shared 2-core machine): bench_notice_save.sh's model and plan, 1.024 GB of snapshot a rank, a
 * checkpoint every 8 steps, each step line stamped as written; the hold is the sum of the intervals of
 * steps N-1 .. N+2 less 4 x the median of the period's later ones, the same at the same steps of a run
 * without checkpoints its noise (-3.0 .. +2.6 s at that load; -0.7 .. +0.2 s in the quietest round). A
 * GPU's device-to-host copy is not measured here (no device).
 *
 * A periodic checkpoint (the session's buffer kept, AdamW writing it): the largest hold of one quiet round,
 * 0.334 s (and 0.155 s) at a base of 0.972 (0.728) s, 1.024 / (0.334 + 0.972) = 0.78 GB/s; over all three
 * rounds the median hold was -0.135 s (-5.6 .. +2.5), inside the noise (-3.0 .. +2.6 s). That CPU path is the
 * fused AdamW's, which copies nothing (AdamW stores into the kept buffer; its step +0.21-0.23 s), yet the
 * formula prices it as a device-to-host copy beyond the next step: the rate is an upper bound on the hold,
 * and on a GPU host, whose pinned device-to-host copy runs far faster than 0.78 GB/s on a side stream, the
 * hold it prices is higher still than the runtime's (tokens a lower bound). Before (61a69ca, the copy on the
 * trainer's thread, the whole copy charged): 0.49 GB/s. */
#define AH_SIM_CKPT_SNAPSHOT_GB_S 0.78
/* The snapshot of a change in place written behind the next step (recovery.c): the runtime closes the
 * checkpoint session at the change and the new plan's opens (cli_train_inplace.c), so this snapshot is a
 * session's first: into a buffer it allocates, copied by the writer thread (the fuse needs the last save's
 * layout). Measured on the change itself, `SET=inplace KEEP=DIR bash bench/bench_recovery.sh B` three times
 * (session 24, main 84872bf, load 2.6-7; the in-place run's launch-0/metrics.jsonl): the hold is the first
 * step after the change less the next one, plus the change's checkpoint's wait_seconds: 0.488, 0.329,
 * 0.791 s at next steps of 0.433, 0.397, 0.412 s (snapshot_seconds 0.747, 0.509, 1.030; writer CPU
 * 0.37-0.45 s; 1.0237 GB), 1.0237 / (0.488 + 0.433) = 1.11 GB/s, the median of the measured 0.85 .. 1.41 GB/s
 * (1.0237 / (0.791 + 0.412), 1.0237 / (0.329 + 0.397)). A CPU copy into a new buffer: a GPU's pinned copy is
 * faster, but the page-locked allocation the first save makes (cuda_snapshot.c) is not measured, so no bound
 * is claimed for a GPU host.
 * bench/sim_ckpt_hold.sh's first save of a run is the same path but held 6.3-8.5 s (load 4.6-7.5, a4c08d0
 * priced the change at that, 0.109 GB/s): there both ranks fault in their new 1 GB buffers at once beside
 * both ranks' training on the 2 cores (writer CPU 4.0-7.1 s), where after the change here one rank runs. */
#define AH_SIM_CHANGE_SNAPSHOT_GB_S 1.11

/* The per-tier arrays below are indexed by ah_ckpt_tier_t (ckpt/policy.h), like the agent's. */

typedef enum { AH_PHASE_TRAIN = 0, AH_PHASE_RECOVER = 1, AH_PHASE_STALLED = 2 } ah_sim_phase_t;

typedef struct ah_sim_segment {
    double start_s, end_s;
    ah_sim_phase_t phase;
    double tokens_per_s;       /* 0 unless training */
    int *gpus;                 /* [n_types] GPUs paid for (nodes of the plan) */
    char event[96];            /* what started the segment: "start", "preempt a100-3", ... */
} ah_sim_segment_t;

typedef struct ah_sim_marker {
    double t_s;
    bool replan;               /* false: a preemption that hit the plan */
} ah_sim_marker_t;

/* One (re)start, with the same terms as the agent's `recover` event. */
typedef struct ah_sim_recovery {
    double t_s;                /* the notice (or the first start, or the join) */
    char event[96];            /* "start", "preempt slow-1", "join at checkpoint", "nodes up" */
    double wait_s, save_s;     /* stop_s = wait_s + save_s */
    bool saved;                /* autohet saved at the notice (it fitted the grace period); false for a change
                                  written behind, as the agent records it */
    bool written_behind;       /* a change in place whose step is written behind the next step (rule 11), no
                                  save before the move */
    bool handover;             /* that save was the handover (committed in the next plan's hosts' memory) */
    bool in_place;             /* the change was in place (opts.in_place): restart_s is its overhead */
    int parked;                /* in place: the running ranks on staying nodes that parked (sim.h
                                  AH_SIM_PARK_IN_PLACE_FRACTION) */
    double replan_s, restart_s, transfer_s, first_step_s;
    double seconds;            /* the sum: notice to the first finished step */
    double tier_s[AH_TIER_COUNT];
    int64_t bytes[AH_TIER_COUNT];
    double tokens_lost;        /* rolled back by this restart */
    double rollback_s;         /* the training time those tokens took (undone) */
    bool interrupted;          /* another event restarted it before it finished */
    int64_t bytes_across_regions; /* of the bytes moved (peer, memory and cloud reads; a handover's
                                  moves), those that crossed a region: over that link */
    double egress_usd;         /* the egress of what they moved across zones and regions, at each link's $/GB */
} ah_sim_recovery_t;

typedef struct ah_sim_result {
    ah_policy_t policy;
    double tokens;             /* trained and kept (after rollbacks) */
    double tokens_lost;        /* rolled back */
    double wall_s;
    double gpu_hours;
    double usd;                /* GPUs and egress */
    double egress_usd;         /* the part of usd that is egress (the plans' bytes across zones and
                                * regions while they train, plan/price.c; and ckpt_egress_usd) */
    double ckpt_egress_usd;    /* the part of egress_usd that is the checkpoints' (the memory tier's
                                  replication to a holder in another zone or region, memory.c; a
                                  recovery's reads and a handover's moves across zones and regions,
                                  recovery.c; uploads to a cloud tier in another region, transfer.c) */
    double ckpt_bytes_across_regions; /* the checkpoint bytes those sent across a region */
    double ckpt_stall_s;       /* training time the periodic checkpoints held (snapshot, replication) */
    double recovery_s;         /* time in (re)starts (notice to first finished step), the first
                                  start included */
    int replans;               /* (re)starts after the first */
    int preemptions;           /* removals that hit the running plan */
    int64_t bytes_local, bytes_peer, bytes_cloud, bytes_memory;
    double planner_s;          /* measured planner time, distinct availability sets only */
    int plans_computed;        /* distinct availability sets planned */
    int replica_plans_off;     /* of those, plans without the memory tier (replica_memory_gb > 0): every
                                  piece on two nodes' disks, replicas cannot pay (ckpt/replica.h
                                  ah_replica_pays; sim/plans.c) */
    double first_plan_s;       /* measured time of the first plan (set seen first) */
    double sim_wall_s;         /* wall time of this policy's replay */
    char note[256];            /* e.g. why nothing ran ("no plan fits on ...") */
    char region[AH_NAME_MAX];  /* autohet-region: the region it is confined to; "" for the others */
    ah_sim_segment_t *segs;
    int n_segs;
    ah_sim_marker_t *markers;
    int n_markers;
    ah_sim_recovery_t *recs;   /* every (re)start, in time order */
    int n_recs;
} ah_sim_result_t;

ah_status_t ah_sim_run(const ah_model_t *model, const ah_sim_avail_t *avail, const ah_sim_opts_t *opts,
                       ah_policy_t policy, ah_sim_result_t *out, ah_error_t *err);
void ah_sim_result_free(ah_sim_result_t *r);

/* The region autohet-region is confined to: opts->region (refused, naming the regions there are,
 * when no node is in it), else the region whose nodes' mean $ per GPU-hour is the least (ties: the
 * first in cluster order). */
ah_status_t ah_sim_confined_region(const ah_cluster_t *c, const ah_sim_opts_t *opts, char *region,
                                   ah_error_t *err);

/* The cloud tier's bucket (transfer.c): the first node in opts->cloud_region (else the first node's
 * region) in *bucket, -1 on a cluster of one region (nothing crosses); refused, naming the regions,
 * when no node is in it. */
ah_status_t ah_sim_cloud_node(const ah_cluster_t *c, const ah_sim_opts_t *o, int *bucket, ah_error_t *err);

/* On-demand $/GPU-hour of a node under opts (see ah_sim_opts_t.on_demand_factor). */
double ah_sim_on_demand_price(const ah_cluster_t *c, int node, const ah_sim_opts_t *opts);

/* ---- the availability bound (bound.c) ---- */

/* What the nodes up could train with no recovery at all (simulate --bound; docs/simulator.md "What
 * bounds autohet's share"): every availability set trained, the whole time it lasts, at autohet's
 * plan of that set (the planner on the nodes up, opts' objective), as if every change were known at
 * once and every restart, join and checkpoint cost nothing. An accounting, not a policy. */
typedef struct ah_sim_bound {
    double tokens;             /* at each set's plan */
    double usd;                /* every node up, at its prices (as the policies pay), and the plans' egress */
    double gpu_hours_used;     /* of the nodes those plans use */
    double *gpu_hours_up;      /* [n_types] of every node up (on-demand nodes and untraced pools included) */
    double any_plan_tokens;    /* at the planner's lower bound on any plan's iteration on each set
                                  (ah_plan_result_t.lower_bound_s): no plan of the cost model's space trains more */
    double any_plan_unknown_s; /* seconds of sets whose result claims no lower bound (0: a sharded or CP
                                  result), left out of any_plan_tokens */
    double no_plan_s;          /* seconds of sets with no plan that fits */
    int sets;                  /* distinct availability sets planned */
    double all_up_tokens, all_up_any_plan_tokens; /* every node up the whole time (on-demand's set): at its
                                  plan, at the planner's bound on any plan (0: none claimed) */
    /* the timeline: step i from t_s[i] to t_s[i + 1] (the last to the horizon) trains at tokens_per_s[i]
     * (one allocation: tokens_per_s points into t_s's) */
    double *t_s, *tokens_per_s;
    int n_steps;
} ah_sim_bound_t;

ah_status_t ah_sim_bound(const ah_model_t *model, const ah_sim_avail_t *avail, const ah_sim_opts_t *opts,
                         ah_sim_bound_t *out, ah_error_t *err);
void ah_sim_bound_free(ah_sim_bound_t *b);

/* ---- the memory tier (memory.c) ---- */

/* holder[y] for each of pl's nodes (n_nodes): the node whose host memory holds y's checkpoint (its
 * partner, when y's bytes fit its budget), -1 none. false only without host memory. */
bool ah_sim_memory_holders(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                           double budget_gb, int *holder);
/* After a committed handover the relaunch reads every byte on its own host: what the restore would have
 * moved (peer, cloud; memory) was handed over into memory before the exit: all memory, no time. */
void ah_sim_handed_over(ah_sim_recovery_t *v);
/* The snapshot alone: max over devices of bytes / o->snapshot_gb_s. */
double ah_sim_memory_snapshot_s(const ah_placement_t *pl, const int64_t *ckpt_bytes, const ah_sim_opts_t *o);
/* One replication of every node's checkpoint to its holder (holder[] from ah_sim_memory_holders): its
 * seconds (the runtime's blocking pairs in rounds of disjoint pairs, plan/ckpt_traffic.h
 * ah_ckpt_pairs_in_rounds and ah_ckpt_pairs_s: a ring of partners takes 2 pairs' time, 3 when odd;
 * at least a "links" pair's bytes over its total_gb_s; -1 when out of host
 * memory), in *usd the egress $ of the bytes that cross a zone or region (at the link's
 * $/GB), and in *bytes_across_regions the bytes that cross a region. */
double ah_sim_memory_replication(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                                 const int *holder, double *usd, double *bytes_across_regions);
/* The save at a notice up to its commit in memory: max over devices of bytes / o->snapshot_gb_s, plus
 * each node's bytes to holder[y] (-1, or holder NULL: a node of its zone) as the runtime's blocking
 * pairs run (ah_sim_memory_replication's rule, every node's bytes). -1 without host memory. */
double ah_sim_memory_save_s(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                            const int *holder, const ah_sim_opts_t *o);

/* ---- output (report.c) ---- */

/* Where a policy's wall time went (docs/simulator.md "Where the time goes"): hours by state, the
 * recoveries' hours by term, its mean speed while training, the GPU-hours it used of those up. */
typedef struct ah_sim_breakdown {
    double train_h;            /* training, the periodic checkpoints' holds included */
    double ckpt_hold_h;        /* of it, held by the periodic checkpoints */
    double recover_h;          /* in (re)starts, the first start included */
    /* of recover_h, by term over the (re)starts that finished: the step in progress, the save at the
     * notice, re-plan, restart, transfer, the first step; and the time of (re)starts another event
     * interrupted */
    double wait_h, save_h, replan_h, restart_h, transfer_h, first_step_h, interrupted_h;
    double stalled_h;          /* no plan fitted what was up */
    double train_tokens_per_s; /* mean while training (the timeline's training segments) */
    double gpu_hours_up;       /* GPU-hours of the nodes up (the policy's to use; on-demand: the cluster) */
} ah_sim_breakdown_t;

void ah_sim_breakdown(const ah_sim_avail_t *avail, double horizon_s, const ah_sim_result_t *r, ah_sim_breakdown_t *b);
/* r's $ per million tokens kept; false when it kept none (no ratio: printed "-", null in JSON, never 0,
 * which would read as the cheapest). */
bool ah_sim_usd_per_mtoken(const ah_sim_result_t *r, double *usd);

struct json_t;
/* {"horizon_s", "options", "pools": [{pool, trace, format, unit, unit_how, nodes, mapping}],
 *  "availability": [{"start_s","end_s","gpus":{TYPE:n}}], "policies": [{totals...,
 *  "timeline": [{"start_s","end_s","phase","gpus":{TYPE:n},"tokens_per_s","event"}],
 *  "recoveries": [{"t_s","event","seconds","breakdown":{"stop_s","wait_s","save_s","replan_s",
 *  "startup_s","transfer_s","first_step_s"},"bytes":{tier:n},"tier_seconds":{tier:s},
 *  "tokens_lost","interrupted"}], "breakdown": {ah_sim_breakdown_t's fields}}]} */
struct json_t *ah_sim_to_json(const ah_sim_avail_t *avail, const ah_sim_pool_t *pools, int n_pools,
                              const ah_sim_opts_t *opts, double horizon_s,
                              const ah_sim_result_t *results, int n_results);
/* Available GPUs by type (stacked) over time, then per policy its throughput, recovery spans,
 * preemption and re-plan markers. */
ah_status_t ah_sim_svg_write(const ah_sim_avail_t *avail, double horizon_s,
                             const ah_sim_result_t *results, int n_results, const char *path,
                             ah_error_t *err);

/* The horizon a run uses: opts->hours, or the latest trace end (at least one second). */
double ah_sim_horizon_s(const ah_sim_avail_t *avail, const ah_sim_opts_t *opts);
/* What a replay can run, refused naming the flag (ah_sim_run checks it too): a horizon (--hours or
 * the latest trace end) of 0 s (no --trace, or one whose rows are all at time 0), one past
 * AH_SIM_MAX_HOURS (a trace in ms read as s), and more than AH_SIM_MAX_CHECKPOINTS checkpoints in
 * it (each one is a step of the replay: a --ckpt-every-s of 1e-300 never ended). */
#define AH_SIM_MAX_HOURS 1e5
#define AH_SIM_MAX_CHECKPOINTS 10000000
ah_status_t ah_sim_check_horizon(const ah_sim_avail_t *avail, const ah_sim_opts_t *opts, ah_error_t *err);

#endif
