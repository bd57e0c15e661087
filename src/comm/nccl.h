/* Collectives and point-to-point transfers on DEVICE buffers (the CUDA backend), built on a
 * group of comm.h. Compiled only with -DAH_CUDA=ON (docs/gpu.md).
 *
 * ah_dcomm_create is collective over its group. When every member has its own GPU (no two
 * members on the same host share a device), it builds an NCCL communicator, bootstrapped over
 * the group: rank 0 makes the ncclUniqueId and broadcasts it with ah_comm_bcast. When members
 * share a GPU (NCCL refuses duplicate devices in a communicator) it falls back to the group's MPI
 * calls with host staging: device -> host buffer -> MPI -> host buffer -> device. Both modes do
 * the same arithmetic contract (in-place sum), so every parallel test also runs on one GPU.
 *
 * Ordering: NCCL work is enqueued on the legacy default stream (the compute stream), after the
 * kernels before it and before the ones after it; the staged mode is synchronous.
 *
 * Overlap: the sum, reduce-scatter, all-gather and point-to-point batch given a `done` event (ah_dcomm_event_create) go
 * on the process's communication stream instead (one non-blocking stream for every communicator,
 * so the collectives run in the order they are issued), after an event recorded on the compute
 * stream (they read what the kernels issued before them wrote), and return at once; `done` is
 * recorded after the collective, and ah_dcomm_event_wait makes the compute stream's later work
 * wait for it (nothing else orders the two streams: the caller waits before it reads or writes the
 * buffer again, or before a blocking call on the same communicator). Because one stream serves
 * every communicator, every member must issue them in the same order (a rank's collectives on two
 * communicators in crossed orders would deadlock, each GPU waiting in the other's first). The
 * staged mode runs them synchronously, after waiting for the communication stream (an earlier
 * collective there may have written the same bytes), and records `done` on the compute stream.
 */
#ifndef AH_COMM_NCCL_H
#define AH_COMM_NCCL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"
#include "core/status.h"

typedef struct ah_dcomm ah_dcomm_t;
typedef struct ah_dcomm_event ah_dcomm_event_t;

/* Collective over `group`; `device` is this rank's CUDA device. force_staged != 0 takes the
 * host-staged path even when NCCL would work (tests). */
ah_status_t ah_dcomm_create(ah_comm_t *group, int device, int force_staged, ah_dcomm_t **out,
                            ah_error_t *err);
void ah_dcomm_free(ah_dcomm_t **dc);
/* "nccl" or "mpi-staged". */
const char *ah_dcomm_kind(const ah_dcomm_t *dc);

/* In-place sum / maximum of n floats of a device buffer over the group; the sum on the
 * communication stream when done is not NULL (above). */
ah_status_t ah_dcomm_allreduce_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, ah_dcomm_event_t *done,
                                   ah_error_t *err);
ah_status_t ah_dcomm_allreduce_max_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, ah_error_t *err);
/* Uneven reduce-scatter and all-gather of a device buffer, in place, as comm.h's
 * ah_comm_reduce_scatter_f32 / ah_comm_allgather_f32 (counts per group rank, parts in rank
 * order): NCCL as one group call of a reduce to (a broadcast from) each part's owner; staged, the
 * whole buffer through the host and the group's MPI call. On the communication stream when done
 * is not NULL. */
ah_status_t ah_dcomm_reduce_scatter_f32(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts,
                                        ah_dcomm_event_t *done, ah_error_t *err);
ah_status_t ah_dcomm_allgather_f32(ah_dcomm_t *dc, float *dev_buf, const int64_t *counts, ah_dcomm_event_t *done,
                                   ah_error_t *err);
/* An event for the overlapped collectives (a CUDA event without timing); free: NULL-safe. */
ah_status_t ah_dcomm_event_create(ah_dcomm_event_t **out, ah_error_t *err);
void ah_dcomm_event_free(ah_dcomm_event_t **ev);
/* The compute stream's later work waits for the collective recorded in ev (no host wait). */
ah_status_t ah_dcomm_event_wait(ah_dcomm_event_t *ev, ah_error_t *err);
/* One transfer of a point-to-point batch: n floats of buf to group rank `peer` (a send) or from it
 * into buf (recv); `done`, when not NULL, is recorded after the batch. */
typedef struct ah_dcomm_p2p {
    float *buf;
    size_t n;
    int peer;
    bool recv;
    ah_dcomm_event_t *done;
} ah_dcomm_p2p_t;
/* A batch of sends and receives on distinct device buffers (context parallelism's ring step: one
 * send and one receive; the pipeline's transfers, runtime/pipe_p2p.h). NCCL: one group call
 * (ncclGroupStart, each ncclSend/ncclRecv, ncclGroupEnd), so its transfers progress together and
 * match the peers' in any order within the group; with an op's `done` given, on the communication
 * stream after the compute issued so far, each given `done` recorded after it, returning at once
 * (the caller waits on `done` before the compute reads a received buffer or writes a sent one
 * again); without any, on the compute stream. Staged: the sends through the host, the group's MPI
 * isend/irecv (tag), the receives back up, synchronously, the events recorded on the compute
 * stream. */
ah_status_t ah_dcomm_p2p_f32(ah_dcomm_t *dc, const ah_dcomm_p2p_t *ops, int n_ops, int tag, ah_error_t *err);
/* A batch of one transfer on the compute stream (tests). */
ah_status_t ah_dcomm_send_f32(ah_dcomm_t *dc, const float *dev_buf, size_t n, int peer, int tag,
                              ah_error_t *err);
ah_status_t ah_dcomm_recv_f32(ah_dcomm_t *dc, float *dev_buf, size_t n, int peer, int tag,
                              ah_error_t *err);

#endif
