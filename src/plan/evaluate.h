/* Scoring a whole plan under the cost model: the one code path that `autohet evaluate`, the
 * planner's reported prediction and the baselines all use. It lives with the plan, above cost/:
 * the plan's headers include cost/'s, never the other way round. */
#ifndef AH_PLAN_EVALUATE_H
#define AH_PLAN_EVALUATE_H

#include <stddef.h>

#include "cost/cost.h"
#include "plan/plan.h"

typedef struct ah_device_eval {
    int pipeline, stage, tp_rank, cp_rank;
    int node, index;          /* as in the plan */
    int64_t memory_bytes;     /* predicted peak */
    int64_t capacity_bytes;
} ah_device_eval_t;

typedef struct ah_stage_eval {
    double fwd_s, bwd_s, p2p_s; /* p2p_s: send to the next stage, per micro-batch (0 when the
                                 * next stage is on the same device) */
    double wgrad_s;             /* the weight-gradient part of bwd_s (zero-bubble's W) */
    double p2p_wire_s;          /* the part of p2p_s the link is busy (bytes / bandwidth): the
                                 * hop's next send in the same direction waits for it (0: never) */
    int64_t memory_bytes;       /* its device's peak (every stage of a device gives the same) */
    int64_t inflight;           /* its micro-batches in flight at its device's peak */
    int warmup_extra;           /* the plan stage's warmup_extra (the replays run it; 0: none) */
} ah_stage_eval_t;

typedef struct ah_pipeline_eval {
    double time_s;            /* T_pipe: its schedule replayed (plan/replay.h) */
    double estimate_s;        /* the search's closed form of T_pipe (ah_1f1b_estimate) */
    int bottleneck_stage;     /* argmax_s (f_s + b_s) */
    ah_stage_eval_t *stages;  /* n_stages entries */
} ah_pipeline_eval_t;

typedef struct ah_eval {
    ah_prediction_t pred;     /* iteration_s, tokens_per_s, memory_bytes, breakdown */
    double search_estimate_s; /* iteration_s with each pipeline's closed form instead of its
                               * replay: what the planner's search minimises (plan/replay.h) */
    /* The overlapped DP sync (docs/cost-model.md "Overlapped DP sync"): the part of the sync left
     * after the pipelines' backward, and the iteration with it (every schedule: an interleaved
     * device's chunks queue one after another, a zero-bubble stage's blocks come final in its last
     * W). pred.iteration_s and its breakdown keep
     * the whole sync (train --no-overlap-grad-sync's figure): the planner's search minimises that
     * closed form; the planner compares finished plans by iteration_overlap_s unless told
     * --no-overlap-grad-sync (planner.h ah_planner_time_s). A sharded plan's all-gather of the
     * updated weights overlaps the next step's forward instead: dp_gather_exposed_s, what it
     * delays that forward (plan/dp_overlap.h), is part of dp_sync_exposed_s. */
    double dp_sync_exposed_s, iteration_overlap_s, dp_gather_exposed_s;
    bool feasible;            /* every device fits */
    int n_devices;
    ah_device_eval_t *devices;   /* rank order */
    int n_pipelines;
    ah_pipeline_eval_t *pipelines;
    int critical_pipeline;    /* the slowest pipeline */
    int bottleneck_stage;     /* its bottleneck stage */
    int worst_device;         /* largest memory_bytes - capacity_bytes (rank) */
} ah_eval_t;

/* Scores p (which must have passed ah_plan_validate). profile may be NULL (roofline). */
ah_status_t ah_evaluate(const ah_plan_t *p, const ah_profile_t *profile, ah_eval_t *out,
                        ah_error_t *err);
void ah_eval_free(ah_eval_t *e);
/* The whole DP sync of p (ah_eval_t pred.breakdown.dp_sync_s: each device's stages' syncs summed,
 * the most of any device), priced as ah_evaluate prices it under p's "dp_sync", without the rest
 * of the evaluation: the planner's search weighs the hierarchical sync with it (planner.h). p
 * need not be validated beyond its stages' nodes, blocks and types. */
double ah_plan_dp_sync_s(const ah_plan_t *p);
/* The same under the flat ring (*ring) and, where hier is not NULL, the hierarchical sync (*hier),
 * whatever p's "dp_sync": both on one set-up of p's figures; each DP group's links through memo
 * (cost/cost.h; NULL: found afresh), which a search keeps for its plans on p's cluster. */
void ah_plan_dp_syncs(const ah_plan_t *p, ah_dp_links_memo_t *memo, double *ring, double *hier);

/* The GPU types of p's stages that profile has no entry for at p's TP degree, micro-batch,
 * sequence length and precision, so that their times come from the roofline: their names, comma
 * separated, in out; returns how many. */
int ah_profile_missing_types(const ah_profile_t *profile, const ah_plan_t *p, char *out, size_t cap);

/* ah_plan_validate + the memory rule: fails naming the device, its need and its capacity. */
ah_status_t ah_plan_check(const ah_plan_t *p, const ah_profile_t *profile, ah_error_t *err);

#endif
