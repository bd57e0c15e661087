/* How much of the layer-wise DP sync the overlapped gradient sync hides (docs/cost-model.md,
 * "Overlapped DP sync"): each device's collectives are a queue in the runtime's bucket order (the
 * head's, its blocks from the last down, the embedding's), each starting when its gradients are
 * final on every holder, at the earliest when the one before it on the device has ended. Pure:
 * plan/evaluate.c fills one entry per stage and asks for the exposed part. */
#ifndef AH_PLAN_DP_OVERLAP_H
#define AH_PLAN_DP_OVERLAP_H

#include <stdbool.h>

#include "plan/plan.h"

/* One stage's DP sync, split as the runtime's buckets go (seconds). */
typedef struct ah_sync_stage {
    int first, last;     /* its blocks */
    bool head;           /* a last stage */
    double blk_bwd_s;    /* one of its blocks' backward (recomputation and TP comm included) */
    double head_s;       /* the final norm's (and an untied head's) collectives: final after the head */
    double blocks_s;     /* its blocks' collectives (one share per block) */
    double end_s;        /* the embedding's and the tied matrix's: final at the end of the backward */
    bool chain;          /* the same device as the entry before, whose queue it continues (an
                          * interleaved device's next chunk down: plan/evaluate.c) */
} ah_sync_stage_t;

/* The part of the DP sync left after the end of the pipelines' backward (t_end, the slowest
 * pipeline's replay), the most over the devices' queues (an entry and the chain after it) of st (n of them, n_layer the model's blocks);
 * work: room for n_layer + 1 doubles. Never more than the largest stage's head_s + blocks_s + end_s. */
double ah_dp_exposed_s(const ah_sync_stage_t *st, int n, int n_layer, double *work);

#endif
