/* How much of the layer-wise DP sync the overlapped gradient sync hides (docs/cost-model.md,
 * "Overlapped DP sync"): each device's collectives are a queue in the runtime's bucket order (the
 * head's, its blocks from the last down, the embedding's), each starting when its gradients are
 * final on every holder, at the earliest when the one before it on the device has ended. A sharded
 * group's all-gather of the updated weights is not in that queue: it is a second queue, started
 * after the optimizer in the forward's order (the embedding's, the blocks from the first up, the
 * head's), each waited for before its part's first forward, so what it delays the next step's
 * forward is its exposed part. Pure: plan/evaluate.c fills one entry per stage and asks for the
 * exposed parts. */
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
    double head_ag_s, blocks_ag_s, end_ag_s; /* a sharded group's all-gather of the updated weights:
                                              * the part of head_s, blocks_s, end_s after the optimizer */
    double blk_fwd_s;    /* one of its blocks' forward */
    double fwd_start_s;  /* when its first forward starts after the step's start: the forwards and
                          * hops of the stages before it (at the least) */
    bool chain;          /* the same device as the entry before, whose queue it continues (an
                          * interleaved device's next chunk down: plan/evaluate.c) */
} ah_sync_stage_t;

/* The part of the DP sync left after the end of the pipelines' backward (t_end, the slowest
 * pipeline's replay), the most over the devices' queues (an entry and the chain after it) of st (n of them, n_layer the model's blocks);
 * work: room for n_layer + 1 doubles. Never more than the largest stage's head_s + blocks_s + end_s. */
double ah_dp_exposed_s(const ah_sync_stage_t *st, int n, int n_layer, double *work);
/* How long the sharded all-gathers (the _ag_s parts) delay the next step's forward: per device (an
 * entry and the chain after it), its queue from the optimizer's end against each part's first
 * forward (the embedding's and a block's at fwd_start_s + the blocks before it, the head's and a
 * last stage's tied copy after its blocks), each delay pushing the device's later forwards; the most
 * over the devices. 0 when nothing is sharded. */
double ah_dp_gather_exposed_s(const ah_sync_stage_t *st, int n);

#endif
