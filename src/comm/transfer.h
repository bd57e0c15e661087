/* Moving bytes between ranks: variable-length all-gathers (small catalogs, request lists) and
 * whole files streamed from the rank that has one on its disk to the rank that needs it (the
 * checkpoint peer tier). MPI only, like the rest of src/comm/.
 *
 * File transfers are blocking point-to-point pairs: the sender calls ah_comm_send_file, the
 * receiver ah_comm_recv_file with the same tag. Callers that move many files between many pairs
 * must walk one global order of (sender, receiver) pairs on every rank, so no two ranks wait on
 * each other (see src/ckpt/peer.c). A sender that cannot read its file still completes the
 * exchange: it sends a "failed" header with its message, and the receiver gets AH_ERR_IO with
 * that message instead of blocking. Files go in 1 MiB pieces, so any size fits MPI's int counts.
 */
#ifndef AH_COMM_TRANSFER_H
#define AH_COMM_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "comm/comm.h"

/* The piece a file goes in: one blocking send each (the cost model prices a latency a piece:
 * plan/plan_links.c's checkpoint replication). */
#define AH_COMM_FILE_PIECE (1 << 20)

/* Collective: each rank gives len bytes; every rank gets all of them, rank after rank, in a
 * malloc'ed buffer *out (NUL-terminated for convenience) with lens[r] bytes from rank r (lens has
 * ah_comm_size(c) entries, allocated by the caller). */
ah_status_t ah_comm_allgather_bytes(ah_comm_t *c, const void *buf, size_t len, char **out,
                                    size_t *lens, ah_error_t *err);

/* Receives the pieces of a file (a non-OK return aborts the receive; the rest of the stream is
 * still drained so the sender is not left blocked). */
typedef ah_status_t (*ah_comm_sink_fn)(void *ctx, const void *data, size_t n, ah_error_t *err);

/* Sends the file at path to rank dst of c; *bytes (may be NULL) gets its size. A file that cannot
 * be read is reported to the receiver and returned here as AH_ERR_IO. */
ah_status_t ah_comm_send_file(ah_comm_t *c, const char *path, int dst, int tag, uint64_t *bytes,
                              ah_error_t *err);
/* Completes the exchange a receiver waits in without sending a file: it gets AH_ERR_IO with msg
 * (e.g. "my copy is corrupt"), and can try elsewhere. */
ah_status_t ah_comm_send_refusal(ah_comm_t *c, int dst, int tag, const char *msg, ah_error_t *err);
/* Receives one file from rank src of c into sink (NULL: receive and discard). */
ah_status_t ah_comm_recv_file(ah_comm_t *c, int src, int tag, ah_comm_sink_fn sink, void *ctx,
                              uint64_t *bytes, ah_error_t *err);

#endif
