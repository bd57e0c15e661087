/* Who does what in a plan, as pure data: each MPI rank's pipeline, stages, CP rank and TP rank,
 * and the layer-wise data-parallel segments. Rank order is the plan's device order (pipeline,
 * device group, CP rank, TP rank: plan.h ah_plan_rank_of); a CP pipeline's stage has tp x cp
 * ranks. A rank of an interleaved pipeline of P device groups
 * holds v = S / P stages (chunks): stage, stage + P, ..., stage + (v - 1) P; elsewhere one.
 *
 * Segments: cut the layer axis at every stage boundary of every pipeline; each segment
 * [first, last) lies inside exactly one stage of each pipeline, so its gradients are summed
 * over one group per (segment, TP rank) with one member per pipeline.
 */
#ifndef AH_RUNTIME_LAYOUT_H
#define AH_RUNTIME_LAYOUT_H

#include "plan/plan.h"

typedef struct ah_role {
    int pipeline, stage, tp_rank; /* stage: the rank's first stage (its device group's index) */
    int chunks, stride;           /* its stages: stage + c stride, c = 0 .. chunks - 1 */
    int cp_rank;                  /* its place in the stage's CP group (0 when cp is 1) */
} ah_role_t;

typedef struct ah_segment {
    int first, last;   /* blocks [first, last) */
    int *stage_of;     /* per pipeline: the stage holding the segment */
} ah_segment_t;

typedef struct ah_layout {
    int n_ranks;
    ah_role_t *roles;       /* by rank */
    int *stage_rank0;       /* rank holding (p, s, tp 0) = stage_rank0[stage_base[p] + s] */
    int *stage_base;        /* per pipeline */
    int n_segments;
    ah_segment_t *segments;
} ah_layout_t;

ah_status_t ah_layout_build(const ah_plan_t *p, ah_layout_t *l, ah_error_t *err);
void ah_layout_free(ah_layout_t *l);
/* The rank of device k of (pipeline, stage): k = cp_rank x tp + tp_rank (the TP rank when cp is 1). */
int ah_layout_rank(const ah_layout_t *l, int pipeline, int stage, int device);
/* The device of role r in plan p: its stage's device cp_rank x tp + tp_rank. */
ah_device_ref_t ah_role_device(const ah_plan_t *p, const ah_role_t *r);
/* Whether role r holds stage s of its pipeline, and which of its chunks it is (-1: none). */
int ah_role_chunk(const ah_role_t *r, int s);

#endif
