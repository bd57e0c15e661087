/* A stage's pipeline schedule as pure data (no compute, no communication): the ops in the order
 * the stage runs them, from plan/replay.h's ah_sched_order, the same order the plan's pricing
 * replays, with the buffers each op uses.
 *
 * 1F1B (stage s of S, n micro-batches): min(S - s - 1, n) warm-up forwards, then pairs of one
 * forward and one whole backward (AH_OP_B with wset -1: input and weight gradients together),
 * then the remaining backwards. Zero-bubble (ZB-H1): 1F1B's sequence with each backward split into
 * B, the input gradients (sent up the pipeline at once), and W, the weight-gradient GEMMs; W(j)
 * follows B(j), except for the first min(s, n) micro-batches, whose W passes run after the last
 * B, where 1F1B's stage s idles.
 *
 * Buffers: micro-batch j keeps its activations in a slot from its F until the op that ends its
 * backward (1F1B: B; zero-bubble: W), and, under zero-bubble, its W's inputs (each linear's output
 * gradient) in a W set from its B until its W. Each op takes the lowest free slot (set), so a stage
 * needs as many as it holds at once, the counts the memory model prices (ah_sched_peak_act,
 * ah_sched_wgrad_inflight). Under 1F1B that is min(S - s, n) slots and micro-batch j is in slot
 * j mod min(S - s, n). */
#ifndef AH_RUNTIME_SCHEDULE_H
#define AH_RUNTIME_SCHEDULE_H

#include <stdint.h>

#include "plan/plan.h"
#include "plan/replay.h" /* ah_op_kind_t: AH_OP_F, AH_OP_B, AH_OP_W */

typedef struct ah_sched_op {
    ah_op_kind_t kind;
    int64_t mb;   /* micro-batch index within the pipeline, 0 .. n-1 */
    int64_t slot; /* activation slot, 0 .. slots - 1 */
    int64_t wset; /* B and W of a split backward: the W set, 0 .. wsets - 1; -1 otherwise */
} ah_sched_op_t;

/* Ops per stage: 2n (1F1B), 3n (zero-bubble). */
int64_t ah_sched_op_count(ah_schedule_t sched, int S, int64_t n);
/* Fills ops (ah_sched_op_count entries) with stage s's order and *slots, *wsets with the buffers it
 * needs. Returns false when out of host memory. */
bool ah_sched_build(ah_schedule_t sched, int S, int s, int64_t n, ah_sched_op_t *ops, int64_t *slots,
                    int64_t *wsets);

#endif
