/* Who does what in a plan, as pure data: each MPI rank's pipeline, stage and TP rank, and the
 * layer-wise data-parallel segments. Rank order is the plan's device order (pipeline, stage,
 * TP rank).
 *
 * Segments: cut the layer axis at every stage boundary of every pipeline; each segment
 * [first, last) lies inside exactly one stage of each pipeline, so its gradients are summed
 * over one group per (segment, TP rank) with one member per pipeline.
 */
#ifndef AH_RUNTIME_LAYOUT_H
#define AH_RUNTIME_LAYOUT_H

#include "plan/plan.h"

typedef struct ah_role {
    int pipeline, stage, tp_rank;
} ah_role_t;

typedef struct ah_segment {
    int first, last;   /* blocks [first, last) */
    int *stage_of;     /* per pipeline: the stage holding the segment */
} ah_segment_t;

typedef struct ah_layout {
    int n_ranks;
    ah_role_t *roles;       /* by rank */
    int *stage_rank0;       /* rank of (p, s, tp 0) = stage_rank0[stage_base[p] + s] */
    int *stage_base;        /* per pipeline */
    int n_segments;
    ah_segment_t *segments;
} ah_layout_t;

ah_status_t ah_layout_build(const ah_plan_t *p, ah_layout_t *l, ah_error_t *err);
void ah_layout_free(ah_layout_t *l);
int ah_layout_rank(const ah_layout_t *l, int pipeline, int stage, int tp_rank);

#endif
