/* The 1F1B pipeline schedule of one stage, as pure data (no compute, no communication).
 *
 * Stage s (from 0) of a pipeline of S stages with n micro-batches runs
 *   warm-up:   w = min(S - s - 1, n) forwards F(0) .. F(w-1),
 *   steady:    n - w pairs F(w + i), B(i),
 *   cool-down: w backwards B(n - w) .. B(n - 1),
 * so at most min(S - s, n) micro-batches have activations held at once (ah_inflight in the cost
 * model). Micro-batch j keeps its activations in slot j mod min(S - s, n): a slot is free again
 * when B of the micro-batch that held it has run, which 1F1B guarantees before F reuses it.
 */
#ifndef AH_RUNTIME_SCHEDULE_H
#define AH_RUNTIME_SCHEDULE_H

#include <stdint.h>

typedef enum { AH_OP_FWD = 0, AH_OP_BWD = 1 } ah_op_kind_t;

typedef struct ah_sched_op {
    ah_op_kind_t kind;
    int64_t mb;   /* micro-batch index within the pipeline, 0 .. n-1 */
    int64_t slot; /* activation slot, 0 .. ah_sched_slots(S, s, n) - 1 */
} ah_sched_op_t;

/* Activation slots a stage needs: min(S - s, n). */
int64_t ah_sched_slots(int S, int s, int64_t n);
/* Fills ops (2n entries) with the stage's order of operations. */
void ah_sched_1f1b(int S, int s, int64_t n, ah_sched_op_t *ops);

#endif
