/* The planner: finds the plan with the smallest iteration time (or $ per token) under the cost
 * model (plan/evaluate.h), over the space of DESIGN.md "Planner"; also the three baselines.
 * docs/planner.md describes the algorithm and what it guarantees. It lives a floor above the plan
 * (src/plan/: the plan as data, its file, rules, evaluation, picture, rankfile and price), which
 * never includes it.
 *
 * Search space: one TP degree t (a TP group is t GPUs of one type in one node, t passes
 * ah_model_check_tp); any set of disjoint pipelines, each an ordered sequence of TP groups (stages),
 * each stage holding >= 1 block; any layer split; micro-batches per pipeline (>= 1 each, summing to
 * global_batch / m); the micro-batch size m (given, or "auto": divisors of the global batch up to
 * a cap); recomputation per stage; devices not in a pipeline are idle.
 *
 * Two search modes per (t, m):
 *  - exact: every pipeline set up to the interchangeability of the groups of one node; the layer
 *    split, recomputation, micro-batch split and the DP-sync/optimizer coupling are solved exactly
 *    (see search_pipe.c, search_exact.c). Used when the number of TP groups is at most
 *    ah_planner_opts_t.exact_max_groups.
 *  - template: pipelines are single-class templates (class = GPU type + zone) repeated, chosen by
 *    a capacity sweep (search_template.c); exact for the layer split and micro-batch split of the
 *    chosen pipelines, not proven optimal over groupings. The result carries a lower bound from a
 *    relaxation so the gap is visible.
 *
 * Ownership: ah_plan_result_t owns its plan and evaluation; free with ah_plan_result_free.
 */
#ifndef AH_PLANNER_PLANNER_H
#define AH_PLANNER_PLANNER_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "plan/evaluate.h"
#include "plan/plan.h"
#include "plan/plan_out.h"

/* time: the least iteration time; cost: the least $ per token; price (search_budget.c, for
 * --budget's message): the least $/h of the GPUs used, no verb's flag. $ is the GPUs' and the
 * egress's (the bytes a plan sends across zones and regions each iteration, at its rate;
 * plan/price.c), for --budget too. */
typedef enum { AH_OBJECTIVE_TIME = 0, AH_OBJECTIVE_COST = 1, AH_OBJECTIVE_PRICE = 2 } ah_objective_t;

/* The sharded optimizer (shard_choice.c): none (default), every DP group split evenly, in
 * proportion to each member's free memory, or auto: whichever of unsharded, even and memory is
 * fastest. Applied to the plan the search chose (the search prices plans unsharded), by
 * ah_planner_choose_shards. */
typedef enum { AH_SHARD_NONE = 0, AH_SHARD_EVEN, AH_SHARD_MEMORY, AH_SHARD_AUTO } ah_shard_mode_t;

/* --schedule (schedule_choice.c): auto, the best of the schedules per pipeline; or one schedule
 * for every pipeline that can run it (the others keep 1f1b, said under "why"). */
typedef enum {
    AH_SCHEDULE_AUTO = 0,
    AH_SCHEDULE_ONLY_1F1B,
    AH_SCHEDULE_ONLY_INTERLEAVED,
    AH_SCHEDULE_ONLY_ZERO_BUBBLE
} ah_schedule_mode_t;
/* "auto", "1f1b", "interleaved", "zero-bubble"; false otherwise. */
bool ah_schedule_mode_parse(const char *s, ah_schedule_mode_t *out);

typedef struct ah_planner_opts {
    ah_train_t train;          /* micro_batch 0 = auto (divisors of global_batch up to max_auto_mb) */
    ah_objective_t objective;
    double budget_usd_per_hour; /* > 0 caps the $/h of the GPUs used and the egress */
    double held_usd_per_hour;   /* > 0: the $/h the run pays for GPUs whatever the plan uses (every node it
                                 * holds: the agent, simulate without --release-idle); --objective cost then
                                 * weighs this (+ the plan's egress) per token instead of the used GPUs' price
                                 * (so more of the held GPUs train more tokens for the same $); the budget
                                 * still caps the plan's own GPUs + egress. 0: the GPUs used (plan) */
    double min_tokens_per_s;    /* > 0: plans slower than this are not eligible */
    const ah_profile_t *profile;/* may be NULL: roofline */
    int exact_max_groups;       /* exact mode when the TP groups number at most this; 0 = 8 */
    int64_t max_auto_mb;        /* micro-batch sizes tried by auto; 0 = 8 */
    ah_shard_mode_t shard;      /* the sharded optimizer for the chosen plan */
    bool shard_spread_only;     /* shard only groups whose members span two nodes (checkpoints
                                 * without a cloud tier: docs/checkpoints.md "Sharded optimizer") */
    bool explain_idle;          /* fill the result's idle_why (the search keeps the best candidate
                                 * per GPU type and number of its GPUs; the note builds and
                                 * evaluates one plan per type with idle GPUs) */
    ah_schedule_mode_t schedule; /* --schedule (default auto) */
    bool schedule_trainable_only; /* the verbs that train (run, the agent, simulate): auto takes only the
                                   * schedules the runtime runs (ah_schedule_runtime_runs), and another
                                   * --schedule is refused */
    bool no_overlap_grad_sync;  /* price the whole DP sync (train --no-overlap-grad-sync); else the
                                 * planner compares plans by ah_eval_t.iteration_overlap_s */
    int cp;                     /* --cp (cp_choice.c): 0 auto, else the one context-parallel degree of
                                 * every pipeline (1: never CP; 2, 4, 8) */
    unsigned cp_per_pipeline;   /* set by ah_planner_run_cp (auto) only: bit k lets the exact search give
                                 * any pipeline CP degree 2^k (k = 1..3), each pipeline its own; the
                                 * degrees ah_cp_degrees_allowed drops are not searched. 0: CP 1 */
    bool keep_wan_hops;         /* no second search with the WAN's hops as if hidden (ah_planner_hide_hops;
                                 * that search's own run sets it): no verb's flag */
    bool search_ring_only;      /* the search prices every candidate's DP sync as the flat ring (the
                                 * planner before it weighed the hierarchical sync per candidate; the
                                 * chosen plan still gets ah_planner_choose_dp_sync): no verb's flag,
                                 * for tests/test_planner_regions.c to compare with */
} ah_planner_opts_t;

typedef enum {
    AH_BASELINE_UNIFORM = 0,
    AH_BASELINE_BATCH_BALANCED = 1,
    AH_BASELINE_MEGATRON_BEST = 2,
    AH_BASELINE_COUNT
} ah_baseline_t;

typedef struct ah_baseline_out ah_baseline_out_t;

typedef struct ah_plan_result {
    ah_plan_t plan;            /* validated, fits, predicted filled from ah_evaluate */
    ah_eval_t eval;            /* ah_evaluate of plan */
    double search_value_s;     /* the search's own iteration time for plan (== eval.search_estimate_s to 1e-12) */
    double search_best_s;      /* the search's optimum of its closed form: search_value_s, unless a
                                * baseline's plan replays faster and was emitted (from_baseline) */
    double lower_bound_s;      /* relaxation bound on the iteration time over the whole space */
    bool exact;                /* every (t, m) was searched in exact mode */
    char left_out[512];        /* the GPU types left out because they cannot run the precision
                                * (no rate for it), with their GPUs and nodes; "" when none */
    char idle_why[4096];       /* opts.explain_idle: the GPU types of which the plan leaves GPUs
                                * idle though they run the precision, each with the best plan
                                * using more of them that the search scored and what it costs
                                * (search_idle.c; a note too long ends "... (cut)"); "" when none, and
                                * when a sharded optimizer replaced the plan (shard_choice.c) */
    char template_why[256];    /* !exact: which (t, m) settings used template mode, and the cap
                                * that applied to the first of them (ah_search_exact's reason) */
    double usd_per_hour;       /* price of the GPUs the plan uses and its egress at the predicted rate */
    double egress_usd_per_hour; /* the part of usd_per_hour that is egress (plan/price.c) */
    double usd_per_mtoken;     /* $ per million tokens at the predicted rate */
    int64_t candidates;        /* pipeline sets / template combinations scored */
    double seconds;            /* planning wall time */
    char precision_why[384];   /* ah_planner_run_auto: the precision chosen and why; "" otherwise */
    ah_baseline_out_t *baselines; /* ah_planner_run: [AH_BASELINE_COUNT], each baseline's own result
                                   * (they are candidates of the search); NULL from ah_baseline_run */
    int from_baseline;         /* the baseline whose own plan is emitted because nothing the search
                                * scored beat it (the plan is then a copy of it); -1 when none */
    char schedule_why[1024];   /* what each pipeline's schedule bought over 1F1B (schedule_choice.c),
                                * or why it kept 1F1B; "" when nothing but 1F1B was weighed */
    char cp_why[512];          /* ah_planner_run_cp: which pipelines split the sequence how many ways, on
                                * which types, how the degrees were found and what they bought (or
                                * that none beat the unsplit plan); "" when CP was not weighed */
    char dp_sync_why[512];     /* ah_planner_choose_dp_sync: the DP sync chosen for DP groups that span
                                * regions or zones (or "hierarchical" on groups each in one zone), with
                                * both syncs' predicted seconds; "" when none does and the plan has "ring" */
    char warmup_why[512];      /* ah_planner_choose_warmup: the pipelines given extra warm-up above a hop
                                * across regions, with their times before and after; "" when none */
    char hops_why[384];        /* ah_planner_hide_hops: that the plan is the search's with the WAN's hops
                                * as if hidden, and the plain search's time it beat; "" otherwise */
    bool untrainable;          /* a pipeline's schedule is one the runtime does not run yet
                                * (ah_schedule_runtime_runs): autohet train refuses the plan */
    bool cheapest;             /* nothing the search scored met --budget, and the cheapest plan a search
                                * for the least $/h found (search_budget.c), which meets it, is the plan */
} ah_plan_result_t;

/* A baseline's result as the planner ran it: its plan, or why it has none. */
struct ah_baseline_out {
    bool ok;
    ah_plan_result_t r;
    ah_error_t err;
};

/* ah_planner_run_cp (the plain search, auto_half: ah_planner_run_auto, with --cp), then, unless o->shard is none, sharded plans
 * (shard_choice.c): the result's plan is sharded when o->shard asks for it (auto: when faster),
 * including plans that fit only sharded; a sharded result's lower_bound_s is 0 (the bound prices
 * the optimizer step unsharded); then each pipeline's schedule (ah_planner_choose_schedules), its
 * extra warm-up above hops across regions (ah_planner_choose_warmup), and last, on clusters of two
 * regions or more, the plan searched with the WAN's hops as if hidden (ah_planner_hide_hops). The
 * entry every verb plans through (plan, run and the agent, simulate). */
ah_status_t ah_planner_run_sharded(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                   bool auto_half, ah_plan_result_t *out, ah_error_t *err);
/* --cp auto: CP degrees 2, 4, 8 are weighed from this many tokens per sequence up, or where
 * nothing fits unsplit (shorter sequences: the ring's transfers and the smaller GEMMs cost more than
 * CP saves; the searches it would add are left out). */
#define AH_CP_AUTO_MIN_SEQ 4096
/* The plain search (auto_half: ah_planner_run_auto) with the context-parallel degrees o->cp asks
 * (cp_choice.c). auto (from AH_CP_AUTO_MIN_SEQ tokens, or where the plain search fits nothing): on a
 * cluster of at most exact_max_groups GPUs, the search with every pipeline's degree 1, 2, 4 or 8 its
 * own (cp_per_pipeline), kept when searched exactly; else one degree c for every pipeline from the
 * search run on one CP rank's view (every node's devices / c, the sequence / c) expanded to CP
 * groups of tp x c devices of a node, evaluated whole (recomputing everywhere where it does not fit
 * otherwise), then a pipeline's degree halved (two pipelines of its CP ranks) while the whole plan's
 * key drops; the plain plan against those by ah_planner_key. --cp N: N alone, by the view,
 * AH_ERR_INVALID naming why N cannot be (the sequence not a multiple of 2N, no node with N devices
 * nor alike nodes of one zone between them: cp_view.c ah_cp_unfit). Fills out->cp_why (which pipelines split the sequence, how many
 * ways, on which types, and the time against the unsplit plan's). A result of a search with CP
 * has lower_bound_s 0 (the plain search's keeps its bound, over non-CP plans); its baselines are the
 * plain search's (run on the real cluster without one). */
ah_status_t ah_planner_run_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                              bool auto_half, ah_plan_result_t *out, ah_error_t *err);
/* "auto" (0), "1", "2", "4", "8"; false otherwise. */
bool ah_cp_mode_parse(const char *s, int *out);
/* The bits of o->cp_per_pipeline whose degree the cluster, sequence and precision of o take (see
 * cp_view.c ah_cp_unfit: 2c divides the sequence; and a node with c devices, the exact search's
 * stages being CP groups of one node; every precision). */
unsigned ah_cp_degrees_allowed(const ah_cluster_t *c, const ah_planner_opts_t *o);
/* Parses "none", "even", "memory", "auto"; false otherwise. */
bool ah_shard_mode_parse(const char *s, ah_shard_mode_t *out);
/* p's optimizer shards redrawn for its pipelines as they are now (the schedule choice rebuilds
 * them into virtual stages, which moves the DP groups' cuts) after those of `like`, the same plan
 * before (the same devices, in the same order): every DP group of two members or more (spread_only:
 * over two nodes at least) in proportion to how large a part like's groups gave each device (even
 * stays even); like's own shards where p's stages are like's. AH_ERR_OOM only. */
ah_status_t ah_planner_reshard_like(ah_plan_t *p, const ah_plan_t *like, bool spread_only, ah_error_t *err);

/* The schedule of each pipeline of out's plan (schedule_choice.c; ah_planner_run_sharded calls it
 * last): the search builds 1F1B pipelines (its closed form); each group of alike pipelines (the
 * same stages, blocks, recomputation, hops and micro-batches) is then priced under every schedule
 * o->schedule allows — 1F1B, zero-bubble (ZB-H1) and interleaved with v = 2 .. min(the fewest
 * blocks of its devices, AH_PLAN_MAX_VIRTUAL) stages per device (each device's blocks cut into v
 * chunks in order; micro-batches a multiple of its devices) — by evaluating the whole plan (each schedule's own replay and in-flight
 * memory), recomputation turned on where an option does not fit without it; the option with the
 * least ah_planner_time_s (ties: the group's own pipeline time) that fits is kept. Fills
 * out->schedule_why and out->untrainable and re-evaluates out. A sharded plan's options are priced
 * with their shards redrawn (ah_planner_reshard_like), and the plan keeps the chosen option's.
 * Then the DP sync (ah_planner_choose_dp_sync). AH_ERR_OOM only. */
ah_status_t ah_planner_choose_schedules(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err);
/* The DP sync of out's plan (dp_sync_choice.c; ah_planner_choose_schedules calls it last): when a DP
 * group of it spans two regions or more (else zones), or the plan has "hierarchical", it is
 * evaluated with the other sync too (docs/cost-model.md "Hierarchical DP sync") and keeps whichever
 * has the lower ah_planner_key; out->dp_sync_why says which and both predicted syncs. The search
 * weighs both per candidate (ah_cand_score). AH_ERR_OOM only. */
ah_status_t ah_planner_choose_dp_sync(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err);

/* Extra warm-up (plan/replay.h "Extra warm-up") on out's plan (warmup_choice.c; ah_planner_run_sharded
 * calls it after the schedules): each pipeline with a hop across regions gets 0 .. 4 more
 * micro-batches in flight on the stages above its last such hop, each one more only where it takes
 * 0.5 % or more off the pipeline's replayed time and the plan still fits; kept when the plan's ah_planner_key drops. Fills out->warmup_why and
 * re-evaluates out. Plans with no pipeline across regions are left as they are. AH_ERR_OOM only. */
ah_status_t ah_planner_choose_warmup(const ah_planner_opts_t *o, ah_plan_result_t *out, ah_error_t *err);
/* On a cluster of two regions or more, unless o->keep_wan_hops (warmup_choice.c; ah_planner_run_sharded
 * calls it last): the planner (ah_planner_run_sharded, keep_wan_hops set) on a view of the cluster
 * with every link between regions as fast as a zone link (the inter-zone bandwidth and latency, no
 * shared cap), so that its search weighs pipelines across the WAN as if their hops were hidden; that
 * plan on the real cluster with its DP sync and extra warm-up chosen there
 * (ah_planner_choose_dp_sync, ah_planner_choose_warmup) replaces out's plan when its ah_planner_key
 * is lower (out->hops_why; out's baselines, bound and search figures stay the real cluster's
 * search's). Quiet when the view plans nothing. AH_ERR_OOM only. */
ah_status_t ah_planner_hide_hops(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                 bool auto_half, ah_plan_result_t *out, ah_error_t *err);

/* The figure the planner compares plans by: the iteration with the DP sync overlapped with the
 * backward (ah_eval_t.iteration_overlap_s; train's default), or the whole sync after it
 * (pred.iteration_s) with o->no_overlap_grad_sync (plan/plan_out.h ah_plan_priced_iteration_s: the
 * iteration every $ figure of the plan is at too). */
double ah_planner_time_s(const ah_planner_opts_t *o, const ah_eval_t *e);

/* The objective value of plan p evaluated as e (search_state.c): ah_planner_time_s, or for a $
 * objective the $/h of its GPUs and its egress at that time (x that time for cost); +inf when it
 * breaks --budget or --min-tokens-per-s. */
double ah_planner_key(const ah_planner_opts_t *o, const ah_plan_t *p, const ah_eval_t *e);
/* The $/h --budget compares for plan p evaluated as e: its GPUs' and its egress at
 * ah_planner_time_s, the time the planner compares, which ah_result_price and plan's figures show. */
double ah_planner_usd_per_hour(const ah_planner_opts_t *o, const ah_plan_t *p, const ah_eval_t *e);
/* r's usd_per_hour, egress_usd_per_hour and usd_per_mtoken from its plan and evaluation
 * (plan/price.c's ah_plan_usd_per_hour_at at ah_planner_time_s; search_state.c). */
void ah_result_price(const ah_planner_opts_t *o, ah_plan_result_t *r);
/* r's plan and evaluation freed and replaced by *p and *e (r owns them now), its prediction, search
 * value (e's closed form) and prices theirs (search_state.c). */
void ah_result_take(const ah_planner_opts_t *o, ah_plan_result_t *r, ah_plan_t *p, ah_eval_t *e);

/* Defaults for everything but the training settings. */
void ah_planner_opts_default(ah_planner_opts_t *o);

/* Plans `model` on `cluster`. The baselines (ah_baseline_run) run first and their plans are
 * candidates: each one's pipelines are scored by the search (with its own layer, recompute and
 * micro-batch split), and the baseline's plan itself is kept when still better, so the result is
 * never slower (time objective; never dearer per token for cost) than any baseline that meets the
 * constraints. AH_ERR_INFEASIBLE when nothing fits: the message names the device
 * type that is short, by how many GiB in the closest candidate, and what would make it fit.
 * AH_ERR_INVALID for bad inputs (no devices, batch not divisible, no usable TP degree). */
ah_status_t ah_planner_run(const ah_model_t *model, const ah_cluster_t *cluster,
                           const ah_planner_opts_t *opts, ah_plan_result_t *out, ah_error_t *err);

/* The training settings alone, as ah_planner_run checks them (batch, sequence length and
 * micro-batch against each other and the model): for callers that plan many times over changing
 * clusters (the simulator) and want a bad setting refused once, up front. AH_ERR_INVALID. */
ah_status_t ah_planner_check_train(const ah_model_t *model, const ah_planner_opts_t *opts, ah_error_t *err);
/* Everything ah_planner_run checks before searching: the model, the profile against it, the
 * cluster (GPUs at all, a type that runs the precision) and the training settings. */
ah_status_t ah_planner_check_inputs(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *opts,
                                    ah_error_t *err);
void ah_plan_result_free(ah_plan_result_t *r);

/* --precision auto on a GPU cluster (plan/precision.c; opts->train.precision is ignored): bf16 when
 * every GPU type runs it (or none runs fp16); else the cluster is planned in both bf16 and fp16
 * (each leaving out the types without its rate: V100 and T4 have no bf16) and the plan with the
 * better objective (iteration time, or $ per million tokens) is kept, bf16 on a tie. The plan's
 * train.precision says which; out->precision_why says why, with both figures. Fails with fp16's
 * reason when neither plans. fp32 when no type gives a bf16 or fp16 rate. (An all-CPU cluster
 * trains fp32: the caller decides that.) */
ah_status_t ah_planner_run_auto(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *opts,
                                ah_plan_result_t *out, ah_error_t *err);

/* "H100-fp32only (16 GPUs on h0..h1): no bf16 rate (tflops.bf16), so it cannot run bf16" for
 * every type of c that p leaves out (the result's left_out), into buf; "" when none. */
void ah_planner_left_out(const ah_cluster_t *c, ah_precision_t p, char *buf, size_t cap);

/* Lower bound on the iteration time of any plan with TP degree t and micro-batch m (docs/planner.md
 * "What the search guarantees" proves each term; search_bound.h names what binds). Plans are
 * bounded by class — their scope (one node, one zone, the cluster: the groups they may use and the
 * link their DP sync runs on), pipeline count P and X, the most blocks of any stage — as
 *   T >= max(N W / R_U, C + (N - P) / Q) + sync(P, X) + optimizer(X)
 * with W = L + kappa a micro-batch's blocks (the head counted in blocks of its group), R_U the
 * U = min(G, P L) fastest groups' summed block rate, C the least fill (every block at the fastest
 * rate, the head, ceil(L / X) - 1 p2p hops), Q an upper bound on sum_p 1 / (pipeline p's largest
 * stage time): the rate, P / (a block and the head), P / the best one pipeline in whole blocks and
 * memory, the pooled capacity of the first j pipelines and, for P = 2, the best split of the
 * groups between two pipelines; minimised over the classes. The
 * compute bound alone when nothing fits; +inf when no group exists.
 *
 * The space it holds for (ah_bound_space_t). Default (all false): 1F1B plans priced with the whole
 * DP sync (ah_planner_lower_bound, the search's own space). any_schedule: every pipeline may also
 * run interleaved (any virtual-stage count) or zero-bubble; the pipeline part is then
 * max(N W / R_U, N / Q, R) — a device runs its pipeline's n_p micro-batches of its own work whatever
 * the order, so n_p M_p <= T, M_p now the busiest device's work per micro-batch (its blocks over
 * all its stages, X the most blocks of a device), which every limit on Q still bounds (memory with
 * one micro-batch of its blocks in flight, whole blocks, the head); R a micro-batch's round trip:
 * every block's forward and input-gradient pass at the fastest rate and ceil(L / X) - 1 hops each
 * way; the 1F1B fill, the hops' pace and the group fill are dropped. overlap: the DP sync as the
 * overlapped sync leaves it (ah_eval_t.iteration_overlap_s): at least the embedding rows'
 * all-reduce, final only at the backward's end, and the X blocks' all-reduce less X slowest block
 * backwards (a device's queue starts at most that long before the end). */
typedef struct ah_bound_space {
    bool any_schedule, overlap;
} ah_bound_space_t;
/* The lower bound (above) over a space. */
double ah_planner_lower_bound_in(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                                 const ah_profile_t *profile, ah_bound_space_t space);
/* The bound over space, returned, and over the search's own space (below), into *own, on one set-up
 * (each what the two calls would find). */
double ah_planner_lower_bounds(const ah_model_t *model, const ah_cluster_t *cluster, const ah_train_t *train, int t,
                               const ah_profile_t *profile, ah_bound_space_t space, double *own);
/* Over the search's own space: 1F1B plans, the whole sync. */
static inline double ah_planner_lower_bound(const ah_model_t *model, const ah_cluster_t *cluster,
                                            const ah_train_t *train, int t, const ah_profile_t *profile) {
    return ah_planner_lower_bound_in(model, cluster, train, t, profile, (ah_bound_space_t){0});
}
/* The space o's plans are compared in: any_schedule unless --schedule 1f1b (or the runtime runs
 * no other schedule and o plans to train), overlap unless --no-overlap-grad-sync. */
ah_bound_space_t ah_planner_space(const ah_planner_opts_t *o);

/* ---- baselines (baselines.c), scored with ah_evaluate ---- */


const char *ah_baseline_name(ah_baseline_t b);
bool ah_baseline_parse(const char *s, ah_baseline_t *out);

/* uniform (Megatron-LM): identical pipelines of S stages, equal layers per stage (the remainder
 * to the first stages), equal micro-batches per pipeline, types ignored, everything must fit the
 * smallest GPU; best (t, m, S, pipeline count) by iteration time.
 * batch-balanced (Whale-like): the same symmetric structure, micro-batches split in proportion to
 * each pipeline's speed.
 * megatron-best: the best symmetric plan (as uniform, but memory per device, any pipeline count
 * dividing the micro-batch count) on the TP groups of any one GPU type or of all of them; best
 * by iteration time. Fills out->plan and out->eval (search_value_s = eval, lower_bound_s 0). */
ah_status_t ah_baseline_run(const ah_model_t *model, const ah_cluster_t *cluster,
                            const ah_planner_opts_t *opts, ah_baseline_t kind,
                            ah_plan_result_t *out, ah_error_t *err);

/* The price rule (spec/cluster.h "Prices") for a planner run: AH_ERR_INVALID naming the unpriced
 * nodes when o asks for --objective cost or a --budget and a node of c has no usd_per_gpu_hour;
 * where names the cluster (its file). Every verb that plans with those flags calls it first
 * (ah_planner_check_inputs does too, with "the cluster"). */
ah_status_t ah_planner_require_prices(const ah_cluster_t *c, const ah_planner_opts_t *o, const char *where,
                                      ah_error_t *err);

/* ---- search internals (search*.c and baselines.c only) ---- */
#ifdef AH_PLANNER_INTERNAL

#define AH_KINDS 4 /* stage kind = (holds embedding ? 1 : 0) | (holds head ? 2 : 0) */

typedef struct ah_pentry ah_pentry_t; /* a memoised pipeline shape (search_pipe.c) */

/* Everything the search needs for one (t, m): the stage table (all blocks are alike, so a stage's
 * cost depends only on its type, kind, block count and recompute flag), memory capacities, the
 * DP-sync constants, and the memo of pipeline shapes. */
typedef struct ah_sctx {
    const ah_model_t *model;
    const ah_cluster_t *cluster;
    ah_train_t train;
    int t;
    const ah_profile_t *profile;
    int L, n_types;
    int64_t N;                /* micro-batches per iteration: global_batch / micro_batch */
    ah_stage_cost_t *sc;      /* [type][kind][nb 0..L][r] */
    double *fb;               /* f + b of the same entry */
    int64_t *capacity;        /* [type] bytes */
    int64_t p_block, head_norm;
    double grad_elt, vc_grad;
    ah_pentry_t **memo;       /* open addressing */
    size_t memo_cap, memo_len;
    /* Template mode: price every micro-batch count's memory as if n >= S (S - s in flight on
     * stage s), so one class serves every n. Splits stay feasible (the real in-flight count is
     * never more) and exactly scored, but for n < S they may be worse than the exact optimum. */
    bool coarse_memory;
    int cp;                   /* this table's CP degree: a stage is a CP group of cp TP groups of
                               * one node, its costs per CP rank (the ring on the node's link) */
    struct ah_sctx *by_cp[4]; /* the CP-1 table's own tables of CP degree 2^k (k >= 1; NULL: not
                               * searched), owned; the exact search's pipelines may take any */
    bool ring_only; /* ah_planner_opts_t.search_ring_only */
    ah_pipeline_t *view_pipes; /* room for the scored candidates' plan views (search_cand.c view_of), */
    ah_stage_t *view_stages;   /* reused from candidate to candidate; owned */
    int view_cap_pipes, view_cap_stages;
    ah_dp_links_memo_t *links_memo; /* the scored candidates' DP groups' links (search_cand.c
                                     * view_syncs; NULL: not made yet, or no memory); owned */
} ah_sctx_t;
#define AH_CP_LEVELS 4 /* CP degrees 1, 2, 4, 8 */

/* A split of one pipeline: blocks and recompute per stage. */
#define AH_MAX_STAGES 128
typedef struct ah_split {
    int nb[AH_MAX_STAGES];
    bool rc[AH_MAX_STAGES];
} ah_split_t;

ah_status_t ah_sctx_init(ah_sctx_t *x, const ah_model_t *m, const ah_cluster_t *c,
                         const ah_train_t *train, int t, const ah_profile_t *profile,
                         ah_error_t *err);
/* The same with a table for every CP degree 2^k whose bit k cp_mask sets (k = 1..3). */
ah_status_t ah_sctx_init_cp(ah_sctx_t *x, const ah_model_t *m, const ah_cluster_t *c, const ah_train_t *train, int t,
                            const ah_profile_t *profile, unsigned cp_mask, ah_error_t *err);
/* x's table of CP degree cp (x itself for 1); NULL when x has none. */
ah_sctx_t *ah_sctx_of_cp(ah_sctx_t *x, int cp);
void ah_sctx_free(ah_sctx_t *x);
/* The cost context for ah_* cost functions (points into x). */
ah_cost_ctx_t ah_sctx_cost(const ah_sctx_t *x);
static inline size_t ah_sctx_index(const ah_sctx_t *x, int type, int kind, int nb, int r) {
    return (((size_t)type * AH_KINDS + (size_t)kind) * (size_t)(x->L + 1) + (size_t)nb) * 2 + (size_t)r;
}
static inline int ah_stage_kind(int s, int S) { return (s == 0 ? 1 : 0) | (s == S - 1 ? 2 : 0); }

/* The pipeline of stage types ty[0..S-1]; caps[type * AH_KINDS + kind] bounds a stage's block
 * count (NULL: no bound). Memoised in x. NULL when out of host memory. */
ah_pentry_t *ah_pipe_get(ah_sctx_t *x, int S, const int *ty, const int *caps);
/* min over splits of sum_s(f_s+b_s) + (n-1) max_s(f_s+b_s), memory-feasible and within caps;
 * +inf when none. Exact (see search_pipe.c). */
double ah_pipe_time(ah_sctx_t *x, ah_pentry_t *e, int64_t n);
/* The split achieving ah_pipe_time(x, e, n); false when that is not finite or out of memory. */
bool ah_pipe_split(ah_sctx_t *x, ah_pentry_t *e, int64_t n, ah_split_t *out);

/* Micro-batch distribution minimising max_p (time_p(n_p) + extra_p + (n_p - 1) pace_p) with
 * n_p >= 1 and sum n_p = N: greedy (each next micro-batch to the pipeline that is fastest after
 * taking it), which is optimal because every time_p is nondecreasing in n and pace_p >= 0.
 * Returns the max, +inf if infeasible (then n is undefined). */
double ah_greedy_split(int P, ah_pentry_t *const *e, const double *extra, const double *pace,
                       int64_t N, int64_t *n);

/* DP-sync and optimizer seconds of a stage, exactly as ah_evaluate computes them, given the
 * plan-wide DP link (bw, lat), pipeline count P and holders of the embedding matrix. */
double ah_stage_sync_s(const ah_sctx_t *x, int nb, int kind, int P, int holders, double bw,
                       double lat);
double ah_stage_opt_s(const ah_sctx_t *x, int type, int kind, int nb);

/* A candidate plan as the search holds it: pipelines as sequences of nodes (one TP group of that
 * node per stage, or with CP c one CP group of c TP groups of that node; which groups of the node
 * does not matter to the cost model), micro-batches per pipeline, and the block caps its splits
 * were made under. */
typedef struct ah_cand {
    int P;
    int *S;       /* [P] stages */
    int *cp;      /* [P] CP degree (1: none) */
    int *off;     /* [P] offset of pipeline p's stages in node[] */
    int *node;    /* stage nodes */
    int64_t *n;   /* [P] micro-batches */
    int *caps;    /* [n_types * AH_KINDS] block caps, or NULL */
    int n_stages, cap_P, cap_stages;
    /* set by ah_cand_score: the pipeline part (max_p T_p) and the DP link it priced the ring on, the
     * embedding's holders and a layer's DP group (every pipeline's CP ranks); hier: the
     * hierarchical sync priced lower than the ring, so the value and the plan take it */
    double pipe_s, dp_bw, dp_lat;
    int holders, dp_ranks;
    bool hier;
} ah_cand_t;

void ah_cand_free(ah_cand_t *c);
/* Appends a pipeline of S stages on nodes[] (CP degree cp); false when out of host memory. */
bool ah_cand_push_cp(ah_cand_t *c, int S, const int *nodes, int cp);
static inline bool ah_cand_push(ah_cand_t *c, int S, const int *nodes) { return ah_cand_push_cp(c, S, nodes, 1); }
bool ah_cand_copy(ah_cand_t *dst, const ah_cand_t *src, int caps_len);

/* The search's iteration time of c (filling c->n): greedy micro-batch split over the exact
 * per-pipeline optimum, then the DP sync and optimizer of the resulting splits exactly as
 * ah_evaluate prices them: the flat ring, or, when c's stages span two zones or more and
 * x->ring_only is not set, the lower of the ring and the hierarchical sync (c->hier; the plan
 * ah_cand_plan builds has that "dp_sync"). The hierarchical sync is weighed only where c without
 * any DP sync is at most `beat` (ah_search_bound: above it c cannot be the best, and it is
 * priced, correctly, as the ring plan). +inf when no split fits; NAN when out of host memory. */
double ah_cand_score_below(ah_sctx_t *x, ah_cand_t *c, double beat);
/* The same with the hierarchical sync always weighed. */
static inline double ah_cand_score(ah_sctx_t *x, ah_cand_t *c) { return ah_cand_score_below(x, c, INFINITY); }
/* The plan of candidate c, searched at TP degree t and micro-batch m (devices: the next free TP
 * group of each node), with its search value in *value: a stage table of its own, c scored again
 * (filling c->n) and split. AH_ERR_INTERNAL when a pipeline has no split. */
ah_status_t ah_cand_plan(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o, int t,
                         int64_t m, ah_cand_t *c, double *value, ah_plan_t *out, ah_error_t *err);

/* The egress $ per iteration of candidate c, scored (c->n set), as plan/plan_links.c prices the plan
 * it builds into (its checkpoints' too, under train.ckpt); 0 when its nodes share a zone and no
 * checkpoint goes to the cloud. NAN when out of host memory. */
double ah_cand_egress_usd(ah_sctx_t *x, const ah_cand_t *c);
/* Whether the search weighs egress (search_state.c): o asks for a $ objective or --budget, and c
 * prices some crossing of a zone or region boundary above $0. */
bool ah_planner_weighs_egress(const ah_planner_opts_t *o, const ah_cluster_t *c);

/* The searches (search_exact.c, search_template.c) report candidates through this callback,
 * which keeps the best under the objective. */
typedef struct ah_search ah_search_t;
void ah_search_offer(ah_search_t *s, ah_sctx_t *x, ah_cand_t *c, double value);
/* The iteration time candidates on c's devices must beat to matter (given the best so far, the
 * objective and the constraints), for pruning; -inf when c's devices are over the budget. It
 * weighs c's GPUs' $/h alone: egress, unknown before a split, is >= 0, so leaving it out (adding
 * 0) keeps the figure a bound under --objective cost and --budget. */
double ah_search_bound(const ah_search_t *s, const ah_sctx_t *x, const ah_cand_t *c);
ah_objective_t ah_search_objective(const ah_search_t *s);
/* The objective value of a scored candidate (iteration_s, or $/h x iteration_s with $/h the GPUs'
 * and the egress's, ah_cand_egress_usd); +inf when it is infeasible or breaks --budget /
 * --min-tokens-per-s. */
double ah_search_key(const ah_search_t *s, ah_sctx_t *x, const ah_cand_t *c, double value);
/* When the search scored no plan that meets --budget / --min-tokens-per-s although plans fit
 * (search_budget.c). With --budget, the planner runs for the least $/h (AH_OBJECTIVE_PRICE,
 * --min-tokens-per-s kept): when that plan meets --budget it replaces *out (freed first;
 * out->cheapest set) and AH_OK. Else AH_ERR_INFEASIBLE (or a rerun's error), saying the true
 * fastest plan (the planner run without those flags) with its tokens/s, time and $/h, and for
 * --budget the least $/h of a plan that meets --min-tokens-per-s, which --budget admits by the
 * above, and whether the search proved it the least. */
ah_status_t ah_search_unmet(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                            ah_plan_result_t *out, ah_error_t *err);
/* Whether a plan of price usd (per hour) breaks --budget (a relative 1e-9 allowance, so the
 * budget a message prints, rounded up to the cent, admits the plan it names). */
bool ah_search_over_budget(const ah_planner_opts_t *o, double usd);

/* The best eligible candidate (finite objective key) the search scored that uses a given number
 * of GPUs of a type (search.c keeps one per type and number). */
typedef struct ah_type_best {
    bool have;
    double key;
    int t;
    int64_t m;
    ah_cand_t cand;
} ah_type_best_t;

/* Fills out->idle_why for every GPU type that can run the precision and of which out->plan
 * leaves GPUs idle: the best plan using more of them that the search scored (by_type[type_base[k]
 * + g] holds the best using g of type k's GPUs), built and evaluated, against the chosen one —
 * how much slower (or dearer, for the cost objective) and which terms of the breakdown grow
 * (search_idle.c). Best effort: a type whose plan cannot be built is named without a comparison. */
void ah_idle_explain(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                     ah_type_best_t *by_type, const int *type_base, ah_plan_result_t *out);

/* TP groups per node for degree t (count / t, 0 when the node is smaller than t or its GPU type
 * cannot run precision p: ah_gpu_runs). */
int ah_node_groups(const ah_cluster_t *c, int node, int t, ah_precision_t p);

/* Exhaustive search over pipeline sets. Not attempted (*searched false, the reason in why[why_cap]:
 * which cap applied, with the count) when there are more than max_groups TP groups or too many
 * pipelines or sets to score quickly. */
ah_status_t ah_search_exact(ah_search_t *s, ah_sctx_t *x, int max_groups, bool *searched, char *why, size_t why_cap,
                            ah_error_t *err);
ah_status_t ah_search_exact_subsets(ah_search_t *s, ah_sctx_t *x, int max_groups, ah_error_t *err);
ah_status_t ah_search_template(ah_search_t *s, ah_sctx_t *x, ah_error_t *err);

/* Context parallelism's view (cp_view.c), shared by the CP search and megatron-best with CP
 * (baseline_cp.c). ah_cp_unfit: why degree cp cannot be planned at all on cluster c ("" when it
 * can: the sequence a multiple of 2 cp, a node of cp devices or alike nodes of one zone holding a
 * CP group between them), into why. ah_cp_max_span: the most nodes a CP group of cp can span on c
 * (a power of two <= cp: that many alike nodes next to each other in one zone, each with cp / span
 * devices; 1: none). ah_cp_view: one CP rank's view of the problem, a CP group node-local (span 1)
 * or across span alike nodes (the view's nodes, spans and members allocated: ah_cp_view_free; the
 * rest shared with cluster), its options with seq_len, the budget and the rate / cp and cp 1;
 * AH_ERR_OOM only. ah_cp_expand: v, a plan of that view, on the real cluster at train's sequence:
 * each stage's TP group g becomes g's CP group of tp x cp devices (cp-major: device k is CP rank
 * k / tp, TP rank k mod tp; CP ranks in node order across a spanning view node), every
 * pipeline's cp = cp, every stage recomputing when recompute_all; *out allocated (freed on
 * error). ah_cp_expand_fit: v expanded, checked and evaluated into *plan and *eval (both freed
 * first: zero them before the first call), again with every stage recomputing where it does not
 * fit; *fits whether it then fits; errors: the check's or evaluation's. */
typedef struct ah_cp_view {
    ah_cluster_t cluster;    /* the view: node table owned, types and network the real cluster's */
    ah_planner_opts_t opts;  /* the view's options */
    int cp;
    int *span;               /* [cluster.n_nodes] real nodes view node v spans (1: node-local) */
    int *members;            /* [cluster.n_nodes x cp]: view node v's real nodes, v cp + i for i < span[v] */
} ah_cp_view_t;
void ah_cp_unfit(const ah_cluster_t *c, const ah_planner_opts_t *o, int cp, char *why, size_t cap);
int ah_cp_max_span(const ah_cluster_t *c, int cp);
ah_status_t ah_cp_view(const ah_cluster_t *cluster, const ah_planner_opts_t *o, int cp, int span, ah_cp_view_t *v,
                       ah_error_t *err);
void ah_cp_view_free(ah_cp_view_t *v);
ah_status_t ah_cp_expand(const ah_cp_view_t *view, const ah_plan_t *v, const ah_cluster_t *cluster,
                         const ah_train_t *train, bool recompute_all, ah_plan_t *out, ah_error_t *err);
ah_status_t ah_cp_expand_fit(const ah_cp_view_t *view, const ah_plan_t *v, const ah_cluster_t *cluster,
                             const ah_planner_opts_t *o, ah_plan_t *plan, ah_eval_t *eval, bool *fits,
                             ah_error_t *err);
/* megatron-best with context parallelism (baseline_cp.c), for ah_baseline_run when opts->cp is
 * not 1: one CP degree for every pipeline, as Megatron-Core's --context-parallel-size. */
ah_status_t ah_megatron_best_cp(const ah_model_t *model, const ah_cluster_t *cluster, const ah_planner_opts_t *o,
                                ah_plan_result_t *out, ah_error_t *err);

/* Lower bounds on a plan's time (baseline_lb.c). ah_1f1b_lb: on 1F1B's replay of n micro-batches
 * over S stages of forward f[s] and backward b[s] (hops free). ah_baseline_lb: on
 * ah_planner_time_s(o, e) for e = ah_evaluate(p), p a plan of 1F1B pipelines without CP, extra
 * warm-up or a sharded optimizer (else 0), the stage costs of type, kind (ah_stage_kind), blocks and
 * recomputation from cost(arg, ...) (ah_stage_cost's); once its pipeline and optimizer terms reach
 * cutoff, without the DP sync's (still a bound). */
typedef const ah_stage_cost_t *(*ah_lb_cost_fn)(void *arg, int type, int kind, int nb, bool rc);
double ah_1f1b_lb(const double *f, const double *b, int S, int64_t n);
double ah_baseline_lb(const ah_planner_opts_t *o, const ah_plan_t *p, ah_lb_cost_fn cost, void *arg, double cutoff);

#endif /* AH_PLANNER_INTERNAL */

#endif
