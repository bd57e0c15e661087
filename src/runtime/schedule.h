/* A device's pipeline schedule as pure data (no compute, no communication): the ops in the order
 * the device runs them, from plan/replay.h's ah_sched_order, the same order the plan's pricing
 * replays, with the buffers each op uses.
 *
 * 1F1B (stage s of S, n micro-batches): min(S - s - 1, n) warm-up forwards, then pairs of one
 * forward and one whole backward (AH_OP_B with wset -1: input and weight gradients together),
 * then the remaining backwards. Zero-bubble (ZB-H1): 1F1B's sequence with each backward split into
 * B, the input gradients (sent up the pipeline at once), and W, the weight-gradient GEMMs; W(j)
 * follows B(j), except for the first min(s, n) micro-batches, whose W passes run after the last
 * B, where 1F1B's stage s idles. Interleaved (Megatron's): device d of P runs v = S / P chunks,
 * stages d + c P (c = 0 .. v-1), in Megatron's order of forwards and whole backwards.
 *
 * Buffers: micro-batch j keeps its activations in a slot of its chunk from its F until the op that
 * ends its backward (1F1B, interleaved: B; zero-bubble: W), and, under zero-bubble, its W's inputs
 * (each linear's output gradient) in a W set from its B until its W. Each op takes its chunk's
 * lowest free slot (set), so a chunk needs as many as it holds at once, the counts the memory
 * model prices (ah_sched_peak_act's live, ah_sched_wgrad_inflight). Under 1F1B that is
 * min(S - s, n) slots and micro-batch j is in slot j mod min(S - s, n). A stage's slots are
 * numbered chunk after chunk (op.slot), so a slot names its chunk (runtime/gpt.h). */
#ifndef AH_RUNTIME_SCHEDULE_H
#define AH_RUNTIME_SCHEDULE_H

#include <stdint.h>

#include "plan/plan.h"
#include "plan/replay.h" /* ah_op_kind_t: AH_OP_F, AH_OP_B, AH_OP_W */

typedef struct ah_sched_op {
    ah_op_kind_t kind;
    int64_t mb;       /* micro-batch index within the pipeline, 0 .. n-1 */
    int64_t slot;     /* activation slot of the stage, 0 .. the chunks' slots - 1 */
    int64_t wset;     /* B and W of a split backward: the W set, 0 .. wsets - 1; -1 otherwise */
    int chunk;        /* the device's chunk, 0 .. S / P - 1 (stage d + chunk P) */
    bool grads_final; /* the chunk's gradients are final after it (its last B, or zero-bubble's W) */
} ah_sched_op_t;

/* Fills ops (ah_sched_ops_per_device entries) with device d's order (P devices, S stages: the
 * validator's sizes; extra: each stage's warmup_extra, NULL for none: plan/replay.h "Extra
 * warm-up"), slots[c] with chunk c's slot count (S / P entries) and *wsets with the W sets it
 * needs. Returns false when out of host memory. */
bool ah_sched_build(ah_schedule_t sched, int S, int P, int d, int64_t n, const int *extra, ah_sched_op_t *ops,
                    int64_t *slots, int64_t *wsets);

#endif
