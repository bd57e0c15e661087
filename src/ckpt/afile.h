/* Crash-safe file writing for checkpoints: a file appears under its final name complete or not
 * at all.
 *
 * ah_afile_open creates a hidden temp file next to the target (".NAME.tmp.PID.N"), writes go
 * there while a CRC-32C and a byte count run along, and ah_afile_commit fsyncs the data, renames
 * the temp file over the target (atomic on POSIX file systems) and, if asked, fsyncs the
 * directory so that the rename itself survives a power loss. A crash at any point leaves either
 * the old file or the new one, plus at worst a stray temp file that garbage collection removes.
 *
 * Direct I/O (ah_afile_direct, for large files such as checkpoint shards): the bytes go to the disk
 * through an aligned 4 MiB buffer with O_DIRECT (one a thread, kept from one file to the next),
 * not through the page cache, so the kernel neither copies them into cache pages (the bulk of a
 * buffered write's CPU) nor writes them back later; the last partial block is written buffered.
 * Bytes handed to ah_afile_write_kept or ah_afile_write_crc (whose memory the caller keeps
 * unchanged until ah_afile_commit or ah_afile_abort returns) from an address congruent to their
 * offset in the file modulo AH_AFILE_BLOCK skip the buffer: their whole blocks go to the disk from
 * where they are (a snapshot laid out so, ckpt/async.h, is written with no copy), only the partial
 * blocks at either end pass through the buffer. ah_afile_write always copies (its bytes may be
 * freed or reused as soon as it returns). The writes are gathered: one writev for the buffer's 4 MiB, or for up to
 * AH_AFILE_PENDING stretches of buffer and caller's memory, not a write (and a wait for the disk)
 * each. A file system that refuses O_DIRECT
 * or its alignment gets buffered writes instead, silently: the file is the same.
 */
#ifndef AH_CKPT_AFILE_H
#define AH_CKPT_AFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/status.h"

#define AH_CKPT_PATH_MAX 4096
/* Direct I/O's block: the alignment it asks of file offsets, lengths and memory (a multiple of every
 * disk's logical block and DMA alignment seen). */
#define AH_AFILE_BLOCK 4096
#define AH_AFILE_PENDING 64

typedef struct ah_afile {
    int fd;                      /* -1 when closed */
    char path[AH_CKPT_PATH_MAX]; /* final name */
    char tmp[AH_CKPT_PATH_MAX];  /* where the bytes go until commit */
    uint64_t bytes;              /* written so far */
    uint32_t crc;                /* CRC-32C of the bytes written so far */
    char *direct;                /* with direct I/O: the aligned buffer (owned), else NULL */
    size_t direct_fill;          /* bytes of it in use (pending) */
    /* direct I/O: the bytes not yet written, in file order (regions of the buffer, and the caller's
     * memory written in place), written by one writev when the buffer or this list is full, or at
     * the commit */
    struct iovec pending[AH_AFILE_PENDING];
    int n_pending;
} ah_afile_t;

ah_status_t ah_afile_open(ah_afile_t *f, const char *path, ah_error_t *err);
/* Turns direct I/O on for an open file with nothing written yet (see above); false if it stays
 * buffered (no O_DIRECT here, or no memory for the buffer). */
bool ah_afile_direct(ah_afile_t *f);
ah_status_t ah_afile_write(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err);
/* ah_afile_write of bytes the caller keeps unchanged until the commit or abort (see above). */
ah_status_t ah_afile_write_kept(ah_afile_t *f, const void *buf, size_t n, ah_error_t *err);
/* ah_afile_write_kept of bytes whose CRC-32C (from 0) the caller has, crc (ckpt/crc32c.h
 * ah_crc32c_copy took it as it copied them): the file's CRC joins it, the bytes are not read for it. */
ah_status_t ah_afile_write_crc(ah_afile_t *f, const void *buf, size_t n, uint32_t crc, ah_error_t *err);
/* fsync + close + rename (+ fsync of the directory when sync_dir). On failure the temp file is
 * removed and the target is left as it was. */
ah_status_t ah_afile_commit(ah_afile_t *f, bool sync_dir, ah_error_t *err);
/* Closes and removes the temp file; safe to call on a committed or never-opened file. */
void ah_afile_abort(ah_afile_t *f);

/* fsync of a directory, so that renames and unlinks in it are durable. */
ah_status_t ah_ckpt_fsync_dir(const char *dir, ah_error_t *err);
/* Size and CRC-32C of a whole file. */
ah_status_t ah_ckpt_file_crc(const char *path, uint64_t *bytes, uint32_t *crc, ah_error_t *err);
/* "DIR/NAME" into buf; the length, or -1 if it does not fit. */
int ah_ckpt_join(char *buf, size_t cap, const char *dir, const char *name);
/* True for the temp names ah_afile_open makes (so listings and GC can recognise them). */
bool ah_afile_is_temp_name(const char *name);

#endif
