/* Context parallelism's CPU pieces (issue 38; docs/runtime.md "Context parallelism"): the CPU
 * backend's entries of kernels/kernels.h's context-parallel section (the kernels by position:
 * rotary angles, position rows; ring attention's block forward and backward, its merge, the
 * key/value packing), declared with the table's types by cpu.h, and the positions of a CP rank's
 * tokens as a host table (the trainer gathers a rank's token ids by it).
 *
 * Ring attention here: one query head at a time, a block's scores by sgemm, the mask by position,
 * the online softmax's update; the backward recomputes the probabilities from the logsumexp.
 * scratch: ring_attn_scratch_floats = 2 Tq Tk floats (the scores and probabilities of one
 * (sequence, head) pair). Deterministic: a fixed order on one thread. The math differs from
 * ah_cpu_attention_fwd's (an online merge of per-block maxima), so results agree to rounding,
 * not bit for bit. The kernels by position with the identity are the one-process kernels, bit for
 * bit (the same code). */
#ifndef AH_KERNELS_CPU_RING_ATTENTION_H
#define AH_KERNELS_CPU_RING_ATTENTION_H

#include "kernels/cpu/cpu.h"

/* The causal load balance as a table: pos (T / c) = the global positions of CP rank i of c's
 * tokens of a sequence of T (a multiple of 2c), in its local order (ah_cp_at's, kernels.h). */
void ah_cp_positions(int *pos, int T, int c, int i);

#endif
