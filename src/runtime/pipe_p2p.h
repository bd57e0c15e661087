/* A rank's pipeline transfers (docs/runtime.md "Pipeline point-to-point"): each chunk's activation
 * from the previous stage and gradient from the next one in, its activation and input gradient
 * out, for every schedule (1F1B, interleaved with its chunks, zero-bubble), each TP and CP rank
 * with the same TP and CP rank of the neighbouring stage.
 *
 * Two paths, one per job (every rank of a pipeline agrees):
 * - MPI (the CPU backend; a GPU pipeline whose devices share a GPU, or AH_P2P=staged): non-blocking
 *   isend/irecv, host-staged on a GPU (download before a send, upload after a receive). Receives
 *   are posted one micro-batch ahead and waited for at the op that uses them; a send is waited
 *   for before its buffer is written again.
 * - NCCL (the CUDA backend where every device of the pipeline has its own GPU): the pipeline's
 *   group ("pipe": its devices with this rank's TP and CP ranks, group rank = the device's place
 *   d of P; one NCCL communicator per pipeline column, built at start-up) moves the device buffers
 *   themselves with comm/nccl.h's point-to-point batches on the communication stream: each batch
 *   after an event on the compute stream (the data a send reads is written; the buffer a receive
 *   writes has been read), each transfer's buffer event recorded after it. The compute stream waits
 *   for a receive's event before the op reads its buffer, and for a send's before the op that
 *   writes its buffer again; the host never waits.
 *   NCCL does not promise that two of its operations progress concurrently, so a rank's transfers
 *   must complete when run one at a time in the order it issues them. They are issued in one order
 *   shared by the whole pipeline, from a replay of the schedule at setup (every device's ops in
 *   order, an op running once its input has landed and its output buffer is free, a transfer
 *   completing once its data is produced and the receiving buffer is free): each rank issues its
 *   transfers in that order, each as soon as its data is produced (a send) or its buffer has been
 *   read (a receive), so receives are posted before the op that needs them, as early as the one
 *   buffer per direction allows, and the op waits late. Run one at a time in that order, every
 *   transfer meets its peer (the replay is such a run).
 *
 * Scatter-gather (plan "p2p", the default; tr->p2p_parts): at TP t > 1 each transfer moves only
 * this rank's TP part of the (N, C) boundary (part i of t, runtime/trainer.h p2p_parts) between
 * the same TP rank of the two stages, and the receiver all-gathers the parts in its TP group in
 * place in the receive buffer (ah_p2p_input, before the op reads it; on a GPU in order on the
 * compute stream after the receive's event). "whole": every rank sends the whole boundary.
 *
 * Memory: the four (N, C) buffers per chunk are the same device buffers on both paths (the cost
 * model's p2p buffers; scatter-gather adds none); the MPI path's host copies are host memory,
 * outside the device budget.
 * Ownership: the group, the order and the events live in the trainer (ah_p2p_free).
 * Collectives: ah_p2p_split over the world, with ah_dp_open_groups' splits; ah_p2p_attach over the
 * pipeline group, after the backend is open; ah_p2p_input's all-gather over the stage's TP group
 * under scatter-gather (every TP rank of a stage runs the same ops); the rest is point-to-point.
 * Errors: AH_ERR_COMM from a transfer or the all-gather, AH_ERR_OOM, AH_ERR_INTERNAL when a receive
 * is needed before the order issued it. */
#ifndef AH_RUNTIME_PIPE_P2P_H
#define AH_RUNTIME_PIPE_P2P_H

#include "runtime/trainer.h"

/* A message's tag on the MPI path: 2 x the stage receiving it + 1 for a gradient. */
static inline int ah_p2p_tag(int stage, bool grad) { return 2 * stage + (grad ? 1 : 0); }

/* dst = src through the kernel table (zero, then +=), so a device backend copies on device. */
static inline void ah_p2p_copy(const ah_kernels_t *k, float *dst, const float *src, size_t n) {
    k->zero(dst, n);
    k->residual_bwd(dst, NULL, src, n);
}

/* A chunk's four buffers (ah_p2p_xfer_t.buf), in ah_p2p_chunk_t's order: the activation from the
 * previous stage, the input gradient to it, the activation to the next stage, the gradient from it. */
enum { AH_P2P_RECV_ACT, AH_P2P_SEND_GRAD, AH_P2P_SEND_ACT, AH_P2P_RECV_GRAD };

/* The NCCL path's order (above) for device d of a pipeline of S stages on P devices (stage q on
 * device q mod P, chunk q / P), n micro-batches under sched (extra: each stage's warmup_extra, NULL
 * for none): *out (malloc'd; the caller frees) gets its transfers, *n_out of them.
 * AH_ERR_INTERNAL when the replay cannot finish, AH_ERR_OOM. */
ah_status_t ah_p2p_order(ah_schedule_t sched, int S, int P, int64_t n, int d, const int *extra, ah_p2p_xfer_t **out,
                         int64_t *n_out, ah_error_t *err);
ah_status_t ah_p2p_split(ah_trainer_t *tr, ah_error_t *err);
/* The device communicator of the group (a GPU rank), the NCCL path's order and events; the
 * chunks' prev/next must be set. */
ah_status_t ah_p2p_attach(ah_trainer_t *tr, ah_error_t *err);
/* "nccl", or "mpi" (host-staged on a GPU). */
const char *ah_p2p_kind(const ah_trainer_t *tr);

/* One step's schedule: ah_p2p_begin, then for op i: ah_p2p_input (F: the received activation into
 * the op's input slot; B: its gradient landed), ah_p2p_output_free, the op's compute, ah_p2p_read
 * (the MPI path posts the next gradient receive once B has read the buffer), the emulated stretch,
 * ah_p2p_after(i) (its output sent, the transfers it made issuable); then ah_p2p_end (every send
 * done). */
ah_status_t ah_p2p_begin(ah_trainer_t *tr, ah_error_t *err);
ah_status_t ah_p2p_input(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err);
ah_status_t ah_p2p_output_free(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err);
ah_status_t ah_p2p_read(ah_trainer_t *tr, const ah_sched_op_t *op, ah_error_t *err);
ah_status_t ah_p2p_after(ah_trainer_t *tr, int64_t i, ah_error_t *err);
ah_status_t ah_p2p_end(ah_trainer_t *tr, ah_error_t *err);
/* Moves the MPI path's requests on (device emulation's sleeps). */
void ah_p2p_progress(ah_trainer_t *tr);
void ah_p2p_free(ah_trainer_t *tr);

#endif
