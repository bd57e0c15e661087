/* What the lower bound's groups hold (bound_holds.c; the bound itself is search_bound.c): each
 * GPU type's per-block costs and the most whole blocks a stage of it holds within memory, and,
 * over one scope's groups (bound_in_t), the most blocks one pipeline, j pooled pipelines or two
 * split pipelines hold with every stage no slower than a stage time M. From those come the
 * figures the bound's bubble term caps Q = sum_p 1 / M_p with (m_one, pooled_q, pair_q).
 * docs/planner.md ("What the search guarantees") proves each. Pure functions over the caller's
 * buffers; no allocation, no errors (a type or scope that holds nothing gives 0 or +inf). Private
 * to src/planner (AH_PLANNER_INTERNAL). */
#ifndef AH_PLANNER_BOUND_HOLDS_H
#define AH_PLANNER_BOUND_HOLDS_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/planner.h"
#include "planner/bound_scope.h"

/* What one group of a type costs at the bound's (t, m). */
typedef struct {
    double b;    /* f + b of one block (its TP all-reduces included) */
    double b_rc; /* the same with recomputation */
    double bwd_slow; /* a block's backward with recomputation: the most a block's backward covers of
                      * the overlapped sync */
    double path; /* a block's forward and input-gradient pass: what a micro-batch's round trip
                  * waits for under any schedule (zero-bubble defers the weight gradient) */
    double h;    /* what the head adds to a last stage (alone, or with the embedding when S = 1) */
    double opt;  /* optimizer seconds of one block */
    int u[2];      /* most blocks of a stage without the head (a middle or first stage) with one
                    * micro-batch in flight (the fewest any stage has), without / with recomputation */
    int u_head[2]; /* the same for a last stage (the head beside its blocks; alone when S = 1) */
    int u_any;     /* most blocks of a stage of any kind, either recompute choice */
} type_cost_t;

/* A type of the scope: its costs and its groups. */
typedef struct {
    const type_cost_t *c;
    int count;
} tgroups_t;

/* What every plan of the scope is made of (docs/planner.md names each figure). */
typedef struct {
    int L, S0, n;
    int64_t N, G;
    tgroups_t *ty;    /* [n] the scope's types, by decreasing rate (increasing b) */
    double m_one;     /* the least largest-stage time of one pipeline (memory, whole blocks, head) */
    double b_min;     /* the fastest block */
    double path_min;  /* the fastest block's forward and input-gradient pass (type_cost_t.path) */
    double bwd_max;   /* the slowest block backward (type_cost_t.bwd_slow) */
    double h_min;     /* the least time the head adds */
    double kappa;     /* the least head time in blocks of its own group: min h / b */
    double h1;        /* the least time of a last stage: one block and the head */
    double p2p_min;
    double p2p_between; /* the least p2p between nodes */
    double hop_min;   /* the least p2p hop between two stages of the scope: p2p_min, or
                       * p2p_between when no node of the scope holds two groups */
    int per_node;     /* the most groups one node of the scope holds: a pipeline of S stages
                       * leaves a node at least ceil(S / per_node) - 1 times */
    int per_zone;     /* the most groups one zone of the scope holds: past it, a pipeline leaves a zone */
    double p2p_zones; /* the least p2p between zones */
    const double *zone_rate; /* a scope across zones: ah_zone_rates (per S, one zone's best); else NULL */
    const ah_hier_bound_t *hier; /* a scope across zones: the hierarchical sync's least (NULL: none) */
    double grad_block, grad_vc;  /* bytes one block's gradient and the embedding rows' sync */
    double opt_block;   /* the least optimizer seconds of one block */
    double embed_blocks; /* the embedding's parameters, in blocks */
    const double *cand; /* the scope's stage_times, n_cand of them */
    int n_cand;
    double *rate_at;    /* [L + 1]: pipe_rate per stage count, NAN until asked (a scope's figure) */
    ah_bound_space_t space; /* which plans it bounds (planner.h) */
} bound_in_t;

/* Every type's costs at ctx's (t, m) into tc[n_types] (a type that cannot run the precision is
 * left as the caller zeroed it). */
void ah_bound_type_costs(const ah_cost_ctx_t *ctx, type_cost_t *tc);

/* Fills in's per-type figures from the scope's counts (groups per type; the rest the caller
 * set), m_one included. cand: room for 4 L n_types values. */
void ah_bound_scope_inputs(const type_cost_t *tc, const int *count, int nt, bound_in_t *in, double *cand);

/* Every M at which some stage's time can end, sorted, into cand (room for 4 L n values).
 * Returns how many. */
int ah_bound_stage_times(const bound_in_t *in, double *cand);

/* Whether P pipelines of L blocks fit in the scope's groups' memory at all. */
bool ah_bound_memory_allows(const bound_in_t *in, int64_t P);

/* Q_P >= sum_p 1 / M_p for P = 1 .. P_max pipelines whose stages hold at most X blocks, into q
 * (room for P_max + 1), from the pooled holdings at the candidate stage times cand[0 .. n).
 * Returns the last P with a finite bound. */
int64_t ah_bound_pooled_q(const bound_in_t *in, int64_t P_max, int X, const double *cand, int n, double *q);

/* An upper bound on 1 / M_1 + 1 / M_2 over plans of two pipelines whose stages hold at most X
 * blocks (in->cand must be set). */
double ah_bound_pair_q(const bound_in_t *in, int X);

#endif
