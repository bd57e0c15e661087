/* The profiler behind `autohet profile`: per-layer forward and backward seconds and activation
 * bytes of the runtime (GPT-2 or LLaMA) on this machine, and its AdamW step per parameter, for the cost
 * model (cost/profile.h).
 *
 * Everything is measured through the runtime's own stage code (runtime/gpt.h) on one shard built
 * like the trainer builds a stage: the embedding, PROFILE_BLOCKS (4) blocks (fewer when the model
 * has fewer, or when an emulated memory cap does not hold them) and the head, with two micro-batch
 * slots. Each timed call runs a forward of one slot and the backward of the other, as in 1F1B's
 * steady state, so a block's weights and activations are not still in cache from its last call.
 * The stage accounts the embedding's, the blocks' and the head's seconds separately
 * (ah_gpt_stage_t.part_s), so each layer kind is timed directly, none is a difference of two
 * timings; "block" is the blocks' time over their count. Figures are the mean of `reps` calls
 * after one untimed warm-up: a training step is a sum of such calls, so its expected length is the
 * sum of their means, the occasional slow call included (a median left those out: in one comparison
 * on this machine's VM it predicted the bench's planner plan 5 % shorter than the mean did). The head's "forward" is the fused head of the
 * runtime (logits, loss and the logits' gradient), as in training. Each backward is split as
 * zero-bubble runs it: B (input gradients, biases, norms), then W (the blocks' weight-gradient
 * GEMMs), each its own call (emulated phase); "bwd_s" is B + W and the block's "wgrad_s" is W, so
 * zero-bubble is priced from measured B and W (1F1B's whole backward costs B + W less the copies of
 * W's inputs, a few N x width copies per block).
 * Activation bytes are what the shard's "activations" arena allocated per micro-batch for each
 * kind, i.e. measured from the allocator, not taken from the memory model.
 *
 * Tensor parallelism: with a TP group (tp_group, one member per TP rank, every member calling with
 * the same request) each member runs its own shard with the group's all-reduces and the group's
 * emulation, as in training, and the times contain that communication ("includes_tp_comm": true).
 * Without one, a TP > 1 shard is TP rank 0's shard run alone: no communication ("includes_tp_comm":
 * false; the cost model adds its own all-reduce term).
 *
 * Emulation: with slowdown k > 1 each call is the trainer's emulated phase (runtime/emulate.h:
 * each segment between TP all-reduces lasts k times the lower quartile of its recent CPU
 * seconds, the rank sleeping for the rest) and is timed at that phase's wall seconds, shared
 * among the parts as their own seconds were (the part clocks leave the sleeps out); mem_cap_bytes caps the shards' allocator like the trainer's (an emulated
 * device too small for a shard fails with the trainer's out-of-memory message).
 *
 * Attention (CPU backend): the attention kernel alone and one CP rank's ring attention kernels
 * (ah_profile_measure_attention), so CP plans are priced from the ring kernels' measured seconds.
 *
 * Host memory: the shards are built and freed per (tp, micro-batch); nothing outlives the call but
 * the entries added to `out`.
 */
#ifndef AH_RUNTIME_PROFILE_H
#define AH_RUNTIME_PROFILE_H

#include <stdint.h>

#include "comm/comm.h"
#include "core/status.h"
#include "cost/profile.h"
#include "kernels/kernels.h"
#include "spec/model.h"

typedef struct ah_profile_req {
    const ah_model_t *model;  /* GPT-2 or LLaMA */
    const char *gpu;          /* GPU type name written into the entries */
    double slowdown;          /* emulate.slowdown; <= 1: none */
    int64_t mem_cap_bytes;    /* emulate.memory_mib in bytes; 0: no cap */
    int64_t seq_len;          /* T, at most the model's context */
    int tp;                   /* TP degree the shard is cut for */
    int64_t micro_batch;
    int reps;                 /* timed repetitions per measurement (>= 1) */
    uint64_t seed;            /* weights and inputs */
    ah_comm_t *tp_group;      /* tp > 1: the TP group to measure with (size tp); NULL: alone */
} ah_profile_req_t;

/* Measures one (gpu, tp, micro_batch, seq_len) entry with kernels k into *out. With a TP group,
 * collective over it. */
ah_status_t ah_profile_measure(const ah_profile_req_t *req, const ah_kernels_t *k,
                               ah_profile_entry_t *out, ah_error_t *err);
/* e's "attention" and "ring_attention" (cost/profile.h) with the CPU kernels k (profile_ring.c):
 * the causal attention kernel alone at T and one CP rank's ring attention kernels at CP 2, 4, 8
 * where 2c divides T, the least CPU seconds of `reps` calls (after an untimed one) x the slowdown.
 * ah_profile_measure calls it on the CPU backend (the ring kernels are the CPU's). Left absent when
 * out of host memory. */
void ah_profile_measure_attention(const ah_profile_req_t *req, const ah_kernels_t *k, ah_profile_entry_t *e);

#endif
