/* The plan (plan.json, version 1): the data type, reading, writing and validation.
 *
 * A plan is one document, enough to run: the model and training settings, the TP degree, the
 * pipelines with their micro-batch counts, context-parallel degree ("cp", absent = 1) and stages,
 * each stage's layer range [first, last), GPU type, recomputation flag and devices (node + local
 * GPU index): tp x cp of them, cp-major (device k is CP rank k / tp, TP rank k mod tp).
 * It also carries the cluster it was made for (field "cluster"), so evaluate and train need no
 * second file; a --cluster given on the command line replaces it.
 * MPI rank order is the order of devices in the file: pipeline, stage, CP rank, TP rank.
 *
 * Ownership: ah_plan_t owns its pipelines, stages and cluster; free with ah_plan_free.
 */
#ifndef AH_PLAN_PLAN_H
#define AH_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cost/cost.h"
#include "spec/cluster.h"
#include "spec/model.h"

#define AH_PLAN_VERSION 1
#define AH_MAX_TP 16
#define AH_MAX_CP 8 /* context-parallel degree: a power of two, 1 .. AH_MAX_CP */
#define AH_MAX_STAGE_DEVICES (AH_MAX_TP * AH_MAX_CP)

/* The most a stage's warmup_extra may fall below the stage before's: the runtime's p2p deadlocks past it
 * (plan_validate.c [warmup]). */
#define AH_WARMUP_DROP_MOST 3

typedef struct ah_device_ref {
    int node;  /* index into plan->cluster.nodes */
    int index; /* local GPU index in that node */
} ah_device_ref_t;

typedef struct ah_stage {
    int first, last;                   /* blocks [first, last) */
    int type;                          /* index into plan->cluster.types */
    bool recompute;
    int warmup_extra; /* warm-up forwards beyond its schedule's (1F1B, zero-bubble): micro-batches
                       * kept in flight past a slow hop below it (plan.json "warmup_extra", absent 0;
                       * plan/replay.h "Extra warm-up"); at most AH_WARMUP_DROP_MOST below the stage
                       * before's (plan_validate.c [warmup]) */
    ah_device_ref_t devices[AH_MAX_STAGE_DEVICES]; /* plan->tp x the pipeline's cp entries,
                                                     * cp-major: device k is CP rank k / tp,
                                                     * TP rank k mod tp */
} ah_stage_t;

/* A pipeline's schedule ("schedule" in plan.json; absent: 1f1b). 1F1B: one stage per device (TP
 * group), the runtime's order (runtime/schedule.c). Interleaved: Megatron's interleaved 1F1B, each
 * device holding v >= 2 evenly spaced virtual stages (device d of P on stages d, d+P, d+2P, ...;
 * micro_batches a multiple of P). Zero-bubble: ZB-H1 on a plain pipeline (one stage per device),
 * each backward split into B (input gradient) and W (weight gradient). The runtime runs all three,
 * in any mix (runtime/schedule.h), and the cost model prices them (plan/replay.h). */
typedef enum { AH_SCHED_1F1B = 0, AH_SCHED_INTERLEAVED = 1, AH_SCHED_ZERO_BUBBLE = 2 } ah_schedule_t;
#define AH_SCHEDULE_VALUES "1f1b, interleaved or zero-bubble" /* for messages */
const char *ah_schedule_name(ah_schedule_t s);
/* "1f1b" / "interleaved" / "zero-bubble" -> schedule; false if unknown. */
bool ah_schedule_parse(const char *s, ah_schedule_t *out);

typedef struct ah_pipeline {
    int64_t micro_batches;
    int n_stages;
    ah_stage_t *stages;          /* the model's layers in order; under "interleaved" a device (TP
                                  * group) holds several of them (virtual stages) */
    ah_schedule_t schedule;
    int cp;                      /* context-parallel degree ("cp"): each micro-batch's sequence
                                  * split over cp ranks; 0 (a builder that did not set it) reads
                                  * as 1: use ah_pipeline_cp */
} ah_pipeline_t;

/* The pipeline's CP degree: pl->cp, or 1 where it is 0 (unset). */
static inline int ah_pipeline_cp(const ah_pipeline_t *pl) { return pl->cp > 0 ? pl->cp : 1; }
/* Devices per stage of pipeline pl: tp x its CP degree. */
static inline int ah_stage_devices(const ah_pipeline_t *pl, int tp) { return tp * ah_pipeline_cp(pl); }

typedef struct ah_breakdown {
    double compute_s;   /* critical pipeline: n x bottleneck-stage compute */
    double bubble_s;    /* critical pipeline: fill and drain */
    double p2p_s;       /* critical pipeline: activation sends between stages */
    double tp_comm_s;   /* critical pipeline: n x bottleneck-stage TP all-reduces */
    double cp_comm_s;   /* critical pipeline: n x bottleneck-stage ring transfers (context
                           parallelism) not hidden behind attention */
    double dp_sync_s;   /* layer-wise gradient sync across pipelines */
    double optimizer_s; /* AdamW step */
    double ckpt_s;      /* the checkpoints' replication to the partners, which blocks every rank, per
                           iteration (under train.ckpt; plan/plan_out.h's ah_plan_ckpt_blocked_s) */
} ah_breakdown_t;

typedef struct ah_prediction {
    double iteration_s;
    double tokens_per_s;
    int64_t memory_bytes;   /* largest per-device memory */
    ah_breakdown_t breakdown;
} ah_prediction_t;

/* The sharded optimizer (docs/runtime.md "Sharded optimizer"): a data-parallel gradient group
 * whose AdamW state is split over its members instead of held whole by each. The group's element
 * space is its tensors' TP shards (one TP rank's) concatenated in the model's canonical order:
 *   BLOCKS [first, last): the blocks of one DP segment (layout.h), first..last exactly;
 *   EMBED: the embedding's tensors whose gradient the first stages sum (all but a tied matrix);
 *   HEAD:  the head's tensors whose gradient the last stages sum (all but a tied matrix);
 *   TIED:  the tied embedding / LM-head matrix, over every first and last stage.
 * Each member device (one per pipeline and CP rank; for TIED every first and last stage's) owns
 * the elements [begin, end) of that space: it keeps AdamW's state for them, receives their summed
 * gradient (a reduce-scatter in place of the all-reduce), updates them and sends them to the
 * others (an all-gather). A group not listed is not sharded. */
typedef enum { AH_OPT_BLOCKS = 0, AH_OPT_EMBED, AH_OPT_HEAD, AH_OPT_TIED } ah_opt_kind_t;

typedef struct ah_opt_share {
    ah_device_ref_t dev;
    int64_t begin, end; /* elements [begin, end) of the group's space */
} ah_opt_share_t;

typedef struct ah_opt_group {
    ah_opt_kind_t kind;
    int first, last;    /* AH_OPT_BLOCKS: the segment's blocks */
    int tp_rank;
    int n_shares;
    ah_opt_share_t *shares;
} ah_opt_group_t;

/* How the DP groups sum their gradients ("dp_sync" in plan.json; absent: ring). HIERARCHICAL: a
 * group whose members span regions (or, in one region, zones: ah_cluster_domains) reduce-scatters
 * inside each, all-reduces the shards across them and all-gathers inside (runtime/dp_hier.h); a
 * group inside one zone keeps the ring (harmless, not refused). */
typedef enum { AH_DP_SYNC_RING = 0, AH_DP_SYNC_HIERARCHICAL = 1 } ah_dp_sync_t;
#define AH_DP_SYNC_VALUES "ring or hierarchical" /* for messages */

/* How a pipeline hop moves the boundary between two stages of TP degree t > 1 ("p2p" in plan.json;
 * absent: scatter-gather). SCATTER_GATHER (Megatron-LM's default): TP rank i sends part i of the
 * N x C boundary (activation forward, its gradient back) to TP rank i of the other stage, which
 * all-gathers the parts in its TP group in place in its receive buffer (runtime/pipe_p2p.h);
 * WHOLE (Megatron's --no-scatter-gather-tensors-in-pipeline, for comparison): every TP rank sends
 * the whole boundary. At t = 1 both are the one whole send. */
typedef enum { AH_P2P_SCATTER_GATHER = 0, AH_P2P_WHOLE = 1 } ah_p2p_split_t;
#define AH_P2P_VALUES "scatter-gather or whole" /* for messages */

typedef struct ah_plan {
    ah_model_t model;
    ah_train_t train;
    int tp;
    ah_dp_sync_t dp_sync;
    ah_p2p_split_t p2p;
    int n_pipelines;
    ah_pipeline_t *pipelines;
    ah_cluster_t cluster;
    int n_opt_groups;          /* "optimizer_shards": the sharded groups (none: unsharded) */
    ah_opt_group_t *opt_groups;
    bool has_predicted;        /* "predicted" was present in the file / filled by the planner */
    ah_prediction_t predicted;
    char predicted_profile[256]; /* "predicted.profile": the autohet profile file the prediction
                                  * timed layers with, as given; "" the roofline */
} ah_plan_t;

/* Reading: structure and types only; `cluster_override` (may be NULL) replaces the plan's own.
 * Then call ah_plan_validate. A "model" naming a config.json is read relative to the plan file's
 * directory (ah_plan_load); ah_plan_from_json, which has no file, refuses it. */
ah_status_t ah_plan_load(const char *path, const ah_cluster_t *cluster_override, ah_plan_t *p,
                         ah_error_t *err);
struct json_t;
ah_status_t ah_plan_from_json(const struct json_t *doc, const char *where,
                              const ah_cluster_t *cluster_override, ah_plan_t *p, ah_error_t *err);
struct json_t *ah_plan_to_json(const ah_plan_t *p);
ah_status_t ah_plan_save(const ah_plan_t *p, const char *path, ah_error_t *err);

/* Every structural validity rule of DESIGN.md "The plan"; the message names the rule and the
 * place (pipeline, stage, device). Memory fit is checked by ah_plan_check (evaluate.h). The
 * schedules' rules ([schedule], plan_validate.c's header) are among them. */
ah_status_t ah_plan_validate(const ah_plan_t *p, ah_error_t *err);
/* The [train] rule alone: sizes >= 1, seq_len within the model's context, sizes the cost model
 * can count exactly, a known precision (the planner checks its settings with it too). */
ah_status_t ah_plan_check_train(const ah_model_t *model, const ah_train_t *train, ah_error_t *err);

/* Allocation helpers for builders (planner, tests): stages zeroed. */
ah_status_t ah_plan_init(ah_plan_t *p, const ah_model_t *m, const ah_train_t *train, int tp,
                         const ah_cluster_t *cluster, int n_pipelines, ah_error_t *err);
ah_status_t ah_pipeline_alloc(ah_pipeline_t *pl, int n_stages, ah_error_t *err);
void ah_plan_free(ah_plan_t *p);
/* A deep copy of p into out (whose old contents are not freed); out is left empty on failure. */
ah_status_t ah_plan_copy(const ah_plan_t *p, ah_plan_t *out, ah_error_t *err);

/* Sharded-optimizer groups (plan_shards.c). A group's members, in the order of their MPI ranks
 * (devs: room for ah_opt_group_room(p)): per pipeline, every CP rank of the stage(s) holding the
 * group (the data-parallel group is every replica's CP ranks); and the size of its element space;
 * -1 when the group does not exist in this plan (a BLOCKS range that is not one DP segment, a
 * tp_rank >= tp, TIED in an untied model). */
int ah_opt_group_members(const ah_plan_t *p, const ah_opt_group_t *g, ah_device_ref_t *devs);
/* The most members a group of p can have: two stages' CP ranks per pipeline, and one more. */
int ah_opt_group_room(const ah_plan_t *p);
int64_t ah_opt_group_elems(const ah_plan_t *p, const ah_opt_group_t *g);
/* The node all of the group's members are on, or -1 when they span two nodes or more (or there
 * are none). */
int ah_opt_group_one_node(const ah_plan_t *p, const ah_opt_group_t *g);
/* The nodes of a DP group's members (room for 2 x n_pipelines), pipeline by pipeline: which >= 0,
 * the stage holding block `which`; AH_DP_HEAD, the last stages; AH_DP_EMBED, the embedding
 * matrix's holders (stage 0, and with a tied head a separate last stage too). Returns how many. */
enum { AH_DP_EMBED = -1, AH_DP_HEAD = -2 };
int ah_dp_group_nodes(const ah_plan_t *p, int which, int *nodes);
/* The same for pipeline i alone (room for 2): its members' nodes in group `which`. */
int ah_dp_group_nodes_of(const ah_plan_t *p, int which, int i, int *nodes);
/* The most domains (regions, else zones: ah_cluster_domains) any DP group of p spans, counted up to
 * `enough` (the first group that spans that many ends the count); 1 when every group is in one
 * zone (or out of host memory). */
int ah_dp_most_domains(const ah_plan_t *p, int enough);
/* The group's name for messages: "blocks [0, 2) tp 0", "embedding tp 1". */
const char *ah_opt_group_name(const ah_opt_group_t *g, char *buf, size_t cap);
/* Sets p's sharded groups to every DP group of the plan with more than one member, shares in
 * proportion to weight(p, rank, ctx) of each member (rank: its place in the plan's device order;
 * NULL, or no positive weight in a group: even), in member order. Replaces any earlier ones. */
ah_status_t ah_plan_shard_all(ah_plan_t *p, double (*weight)(const ah_plan_t *, int, void *), void *ctx,
                              ah_error_t *err);
/* The rules of "optimizer_shards" (part of ah_plan_validate): each listed group exists in the plan
 * and is listed once; each share names a member, once, with 0 <= begin <= end; the shares cover
 * the group's elements exactly once. The message names the rule, the group and the share. */
ah_status_t ah_plan_check_shards(const ah_plan_t *p, ah_error_t *err);
/* out's sharded groups: a deep copy of p's (out's own are freed first). */
ah_status_t ah_plan_copy_shards(const ah_plan_t *p, ah_plan_t *out, ah_error_t *err);
/* How much longer a sharded group's reduce-scatter + all-gather takes than an all-reduce of the
 * same elements: a ring moves the largest part at each step, so largest part x members / elements
 * (1 for even parts and for a group not sharded); the worst over the group's TP ranks. first,
 * last: the segment, for AH_OPT_BLOCKS. */
double ah_opt_sync_factor(const ah_plan_t *p, ah_opt_kind_t kind, int first, int last);
/* Per device (the plan's device order, ah_plan_device_count entries each): held, the elements of
 * the sharded groups it is a member of; unowned, those of them whose AdamW state other members
 * keep (both 0 when unsharded). One pass over the groups. */
ah_status_t ah_opt_elems_all(const ah_plan_t *p, int64_t *held, int64_t *unowned, ah_error_t *err);

/* Total devices in the plan (= MPI ranks): distinct devices, not stage entries (an interleaved
 * pipeline's device holds several stages); a stage of a CP pipeline counts tp x cp. Rank order is
 * (pipeline, device group, cp rank, tp rank), a
 * device group numbered by its first stage: for a valid plan the groups of pipeline i are its stages
 * 0 .. ah_pipeline_groups - 1. */
int ah_plan_device_count(const ah_plan_t *p);
/* The device groups (TP groups) of a pipeline: its stage count unless it is interleaved, else the
 * number of distinct groups among its stages (by each stage's first device). */
int ah_pipeline_groups(const ah_pipeline_t *pl);
/* Its stages' warmup_extra (n_stages entries, malloc'd: the caller frees), or NULL when out of host
 * memory. */
int *ah_pipeline_warmup(const ah_pipeline_t *pl);
/* The group (0 .. ah_pipeline_groups - 1) that holds stage s: s mod the group count (for a valid
 * interleaved pipeline, device d holds stages d, d + P, ...; otherwise s). */
int ah_pipeline_group_of(const ah_pipeline_t *pl, int s);
/* The rank of device k (CP rank k / tp, TP rank k mod tp; k < tp x cp) of the device group
 * holding stage s of pipeline i. */
int ah_plan_rank_of(const ah_plan_t *p, int i, int s, int r);
/* Rank r's device (the inverse of ah_plan_rank_of, in the order above: a device group's devices
 * are those of its first stage); NULL when r is not below ah_plan_device_count. Whoever maps
 * ranks to hosts or GPUs (rankfile, host check, launchers) goes through this, so an interleaved
 * pipeline's device is counted once. */
const ah_device_ref_t *ah_plan_rank_device(const ah_plan_t *p, int r);
/* Whether the runtime (autohet train) runs a pipeline of this schedule: the one predicate the
 * planner restricts --schedule to for the verbs that train (run, the agent's re-plans, simulate),
 * so a plan they make is never refused by train. Every schedule of ah_schedule_t runs now (issue
 * 35); a schedule added to the enum before the runtime runs it is false here. */
bool ah_schedule_runtime_runs(ah_schedule_t s);
/* The most stages per device of an interleaved pipeline the runtime runs (its AH_GPT_MAX_CHUNKS,
 * runtime/gpt.h; tests/test_planner_schedules.c checks they agree): the planner offers no more. */
#define AH_PLAN_MAX_VIRTUAL 16

#endif
