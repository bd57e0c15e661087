/* Ring attention over a context-parallel group (issue 38; docs/runtime.md "Context
 * parallelism"), on the CPU backend: each of the group's c ranks holds T / c tokens of every
 * sequence of the micro-batch, by the causal load balance (kernels/cpu/ring_attention.h
 * ah_cp_positions: rank i has chunks i and 2c - 1 - i), as a qkv (B, T/c, (Hl + 2 KVl) hd).
 *
 * Forward: the rank's key/value heads only (GQA: KVl of them) go around the ring; at each of the
 * c steps the next block's transfer (isend to rank + 1, irecv from rank - 1) is started before
 * the current block's attention is computed, so the exchange overlaps the compute. It keeps for
 * the backward the output and one logsumexp per query row (B, Hl, T/c): the backward recomputes
 * each block's probabilities (no T x T matrix is kept). Backward: the key/value blocks go around
 * again with their gradient accumulators (dk, dv), each rank adding its queries' part before
 * passing them on; after c passes each accumulator is back at its owner, which adds it to its
 * dqkv. Transfers are point-to-point in the group, one step at a time.
 *
 * The kernels are the backend's (kernels/kernels.h's context-parallel entries: the CPU's, or the
 * CUDA backend's on device memory, in every precision: the blocks stay fp32, as the activations
 * they are cut from). The exchange: on the CPU (a group without a device communicator), MPI
 * isend/irecv of the blocks themselves (tags AH_CP_TAG..); on a device backend, the CP group's
 * device communicator (backend.h's dcomm_p2p; CUDA: ncclSend to rank + 1 and ncclRecv from
 * rank - 1 in one NCCL group on the communication stream, after an event on the compute stream
 * that follows the kernels which produced the block, and the next block's kernel waits for its
 * event; where the group's ranks share a GPU, host-staged MPI, synchronous, so not overlapped).
 *
 * Ownership: the ring owns its buffers (4 key/value blocks, the online softmax's accumulator
 * and statistics, the scratch), allocated by ah_cp_ring_init from the rank's device budget (an
 * arena "ring attention" of the given ah_mem_t, so they count in its high-water mark: exactly
 * ah_cp_ring_bytes, cost/cost.h), its two exchange events on a device backend, and the positions
 * table (c x T / c int32) on the host, as the stage's other host tables; not the group (nor its
 * device communicator, whose host staging buffer is outside the budget) nor the kernel table.
 * Collectives: none; fwd and bwd are called by every rank of the group in the same order.
 * Errors: AH_ERR_COMM from a transfer, AH_ERR_OOM at init, a device copy's error. */
#ifndef AH_RUNTIME_CP_RING_H
#define AH_RUNTIME_CP_RING_H

#include "comm/comm.h"
#include "kernels/kernels.h"
#include "core/status.h"
#include "runtime/device.h"
#include "runtime/mem.h"

#define AH_CP_TAG 7300

typedef struct ah_cp_ring {
    ah_group_t *group;      /* the CP group (not owned): rank order = CP rank; dc on a device backend */
    const ah_kernels_t *k;  /* the backend's kernels (not owned) */
    int c, rank;
    int B, Tl, Hl, KVl, hd; /* Tl = T / c tokens per sequence here */
    int *pos;               /* (c, Tl): every CP rank's positions */
    float *kv[2], *dkv[2];  /* (B, Tl, 2 KVl hd) each: blocks in flight and their gradients */
    ah_dcomm_event_t *landed[2]; /* device backend: the key/value and gradient exchanges' events */
    float *acc, *stats, *scratch;
    ah_arena_t arena;       /* kv, dkv, acc, stats and scratch, in the device budget */
    ah_mem_t *mem;
} ah_cp_ring_t;

/* T a multiple of 2 c; the group's size is c. The buffers come from mem (AH_ERR_OOM past its cap,
 * naming the buffer); k is the kernel table of mem's backend, whose device communicator the group
 * has (ah_group_attach) where mem is device memory. */
ah_status_t ah_cp_ring_init(ah_cp_ring_t *r, ah_group_t *group, const ah_kernels_t *k, ah_mem_t *mem, int B, int T,
                            int Hl, int KVl, int hd, ah_error_t *err);
/* This rank's positions (kernels.h's ah_cp_at). */
ah_cp_at_t ah_cp_ring_at(const ah_cp_ring_t *r, int rank);
void ah_cp_ring_free(ah_cp_ring_t *r);
/* How the blocks travel: "mpi" (the CPU), or the device communicator's kind ("nccl", "mpi-staged"). */
const char *ah_cp_ring_exchange(const ah_cp_ring_t *r);
/* out (B, Tl, Hl hd), lse (B, Hl, Tl) from this rank's qkv. */
ah_status_t ah_cp_attention_fwd(ah_cp_ring_t *r, float *out, float *lse, const float *qkv, ah_error_t *err);
/* dqkv += the gradient of this rank's qkv (queries from its own rows, keys and values from every
 * rank's queries). out and lse are the forward's. */
ah_status_t ah_cp_attention_bwd(ah_cp_ring_t *r, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, ah_error_t *err);

#endif
