/* MPI backend of transfer.h. */
#include "comm/transfer.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm_mpi.h"

static ah_status_t mpi_fail(ah_error_t *err, int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return ah_error_set(err, AH_ERR_COMM, "%s failed: %s (a peer rank may have died)", what, text);
}
#define MPI_TRY(call, what)                                      \
    do {                                                         \
        int rc_ = (call);                                        \
        if (rc_ != MPI_SUCCESS) return mpi_fail(err, rc_, what); \
    } while (0)

ah_status_t ah_comm_allgather_bytes(ah_comm_t *c, const void *buf, size_t len, char **out,
                                    size_t *lens, ah_error_t *err) {
    MPI_Comm mc = ah_comm_mpi(c);
    const int n = ah_comm_size(c);
    *out = NULL;
    if (len > (size_t)1 << 30)
        return ah_error_set(err, AH_ERR_INTERNAL, "all-gather of %zu bytes from one rank exceeds 1 GiB", len);
    int mine = (int)len, *counts = malloc((size_t)n * sizeof *counts), *displs = malloc((size_t)n * sizeof *displs);
    if (!counts || !displs) {
        free(counts);
        free(displs);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for an all-gather");
    }
    int rc = MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, mc);
    size_t total = 0;
    for (int r = 0; rc == MPI_SUCCESS && r < n; r++) {
        displs[r] = (int)total;
        lens[r] = (size_t)counts[r];
        total += (size_t)counts[r];
    }
    if (rc == MPI_SUCCESS && total > (size_t)1 << 30) {
        free(counts);
        free(displs);
        return ah_error_set(err, AH_ERR_INTERNAL, "all-gather of %zu bytes exceeds 1 GiB", total);
    }
    char *all = rc == MPI_SUCCESS ? malloc(total + 1) : NULL;
    if (rc == MPI_SUCCESS && !all) {
        free(counts);
        free(displs);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for %zu gathered bytes", total);
    }
    if (rc == MPI_SUCCESS) rc = MPI_Allgatherv(buf, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, mc);
    free(counts);
    free(displs);
    if (rc != MPI_SUCCESS) {
        free(all);
        return mpi_fail(err, rc, "MPI_Allgatherv");
    }
    all[total] = '\0';
    *out = all;
    return AH_OK;
}

/* Header of a file transfer: size >= 0, or -1 followed by a message of AH_ERROR_MSG_MAX bytes.
 * Pieces go through one static buffer: transfers happen on the main thread only, and a static
 * buffer cannot fail to allocate half way through a stream the other side is waiting on. */
#define PIECE ((size_t)AH_COMM_FILE_PIECE)
static char g_piece[PIECE];

ah_status_t ah_comm_send_refusal(ah_comm_t *c, int dst, int tag, const char *msg, ah_error_t *err) {
    MPI_Comm mc = ah_comm_mpi(c);
    const int64_t size = -1;
    char text[AH_ERROR_MSG_MAX];
    snprintf(text, sizeof text, "%s", msg);
    MPI_TRY(MPI_Send(&size, 1, MPI_INT64_T, dst, tag, mc), "MPI_Send");
    MPI_TRY(MPI_Send(text, (int)sizeof text, MPI_CHAR, dst, tag, mc), "MPI_Send");
    return AH_OK;
}

ah_status_t ah_comm_send_file(ah_comm_t *c, const char *path, int dst, int tag, uint64_t *bytes,
                              ah_error_t *err) {
    MPI_Comm mc = ah_comm_mpi(c);
    if (bytes) *bytes = 0;
    FILE *f = fopen(path, "rb");
    int64_t size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f && size >= 0 && fseek(f, 0, SEEK_SET) != 0) size = -1;
    if (size < 0) {
        char msg[AH_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s: cannot read on the sending rank: %s", path, strerror(errno));
        if (f) fclose(f);
        if (ah_comm_send_refusal(c, dst, tag, msg, err) != AH_OK) return err->code;
        return ah_error_set(err, AH_ERR_IO, "%s", msg);
    }
    MPI_TRY(MPI_Send(&size, 1, MPI_INT64_T, dst, tag, mc), "MPI_Send");
    ah_status_t s = AH_OK;
    for (int64_t off = 0; off < size;) {
        size_t k = (size_t)(size - off) < PIECE ? (size_t)(size - off) : PIECE;
        /* A short read (the file shrank under us) still sends k bytes: the receiver's checksum
         * catches the damage, and the stream stays in step. */
        size_t got = fread(g_piece, 1, k, f);
        if (got < k) {
            memset(g_piece + got, 0, k - got);
            s = ah_error_set(err, AH_ERR_IO, "%s: short read while sending", path);
        }
        int rc = MPI_Send(g_piece, (int)k, MPI_BYTE, dst, tag, mc);
        if (rc != MPI_SUCCESS) {
            fclose(f);
            return mpi_fail(err, rc, "MPI_Send");
        }
        off += (int64_t)k;
    }
    fclose(f);
    if (bytes) *bytes = (uint64_t)size;
    return s;
}

ah_status_t ah_comm_recv_file(ah_comm_t *c, int src, int tag, ah_comm_sink_fn sink, void *ctx,
                              uint64_t *bytes, ah_error_t *err) {
    MPI_Comm mc = ah_comm_mpi(c);
    int64_t size = 0;
    if (bytes) *bytes = 0;
    MPI_TRY(MPI_Recv(&size, 1, MPI_INT64_T, src, tag, mc, MPI_STATUS_IGNORE), "MPI_Recv");
    if (size < 0) {
        char msg[AH_ERROR_MSG_MAX];
        MPI_TRY(MPI_Recv(msg, (int)sizeof msg, MPI_CHAR, src, tag, mc, MPI_STATUS_IGNORE), "MPI_Recv");
        msg[sizeof msg - 1] = '\0';
        return ah_error_set(err, AH_ERR_IO, "rank %d: %s", src, msg);
    }
    ah_status_t s = AH_OK;
    for (int64_t off = 0; off < size;) {
        size_t k = (size_t)(size - off) < PIECE ? (size_t)(size - off) : PIECE;
        MPI_TRY(MPI_Recv(g_piece, (int)k, MPI_BYTE, src, tag, mc, MPI_STATUS_IGNORE), "MPI_Recv");
        /* No sink, or after a failure: drain, so the sender finishes. */
        if (s == AH_OK && sink) s = sink(ctx, g_piece, k, err);
        off += (int64_t)k;
    }
    if (s == AH_OK && bytes) *bytes = (uint64_t)size;
    return s;
}
