/* Asynchronous checkpoint writes: one rank's pieces of one step, held in host memory (a snapshot),
 * written to its node's disk by a background thread while training goes on
 * (docs/checkpoints.md "Asynchronous checkpoints").
 *
 * The snapshot (ah_ckpt_snap_t): the shard files ("pieces") one rank writes for step N, as part
 * `part` of ROOT/step-N (ckpt.h's writer): each piece a safetensors tensor table whose data point
 * into memory that nobody changes until the write is over (the session's snapshot buffer for an
 * asynchronous save; the trainer's own buffers for a synchronous one, ah_ckpt_snap_write on the
 * caller's thread). Writing commits nothing: the step counts only once the caller's collective
 * commit (every part of every rank on every node written, then each node's manifest.json) has run,
 * so a kill at any moment of the write leaves the last committed step as it was.
 *
 * The writer (ah_ckpt_async_t) owns one thread and holds at most one snapshot in flight:
 *   ah_ckpt_async_submit  hands a snapshot to the thread and returns at once; from then until
 *                         ah_ckpt_async_wait returns it, the thread owns the snapshot and reads the
 *                         memory its pieces point at: the caller must not change or free them.
 *                         A second submit before the wait is refused (AH_ERR_INVALID): the caller
 *                         waits first (the session then counts that wait).
 *   ah_ckpt_async_done    without blocking: whether the snapshot in flight is written (or failed).
 *   ah_ckpt_async_wait    blocks until it is (and the retention due is done), gives the snapshot
 *                         back with the write's outcome. The
 *                         waiting caller writes the pieces nobody has taken yet itself (and the part
 *                         file, when the last is its own), so the wait is never longer than a
 *                         synchronous write of what is left, whatever the thread's priority.
 *   ah_ckpt_async_drain   blocks until the snapshot in flight is written (or failed), writing what
 *                         nobody has taken yet itself, as wait does, but leaves it in flight for wait
 *                         to collect: the memory its pieces point at is free to change again (an
 *                         AdamW that writes the next snapshot into it: runtime/ckpt_fuse.c).
 *   ah_ckpt_async_retain  hands the thread the retention of a root (ah_ckpt_gc_pinned: --keep) after
 *                         a commit and returns at once: the thread removes the old steps before it
 *                         writes any snapshot submitted after it (so the root never holds more than
 *                         the keep newest steps and the one being written), and wait and stop
 *                         return only once it is done (a waiting caller does it itself if the
 *                         thread has not started it). A second retention before the first started
 *                         replaces it. Unlinking a step's files took the training thread 40-80 ms a
 *                         save (docs/checkpoints.md "Asynchronous checkpoints").
 *   ah_ckpt_async_stop    finishes (or, with cancel, cuts between pieces) the write in flight, runs
 *                         the retention due, and joins the thread; a snapshot not collected is freed
 *                         with its pieces.
 * Priority: the background thread runs at the trainer's priority. Not lower: at SCHED_IDLE (tried)
 * ranks busy computing or polling MPI starved it for a whole interval, and at nice 10 a rank that
 * stopped two steps after a save (a test hook, a hang) could hold that step uncommitted: a save
 * must commit within a step or two, so the writer competes for the CPU as an equal.
 * Threads: the background thread only writes and removes files (ckpt.h's writer, safetensors, fsync,
 * ah_ckpt_gc_pinned), waits
 * for a snapshot's device copies (its wait_copied) and, in tests, stops at AH_TEST_HOOK's points; no
 * MPI, no trainer, no jansson object another thread touches. MPI is initialised without MPI_THREAD_MULTIPLE (comm/comm.c), so every collective (the
 * agreement that every part is written, the commit, the upload hand-off) stays on the caller's
 * thread at step boundaries. Every call here is from one thread (the caller's), except that the
 * background thread runs the write.
 * Errors: a failed write (a full disk, ...) is the snapshot's outcome, returned by wait with its
 * message; its files stay uncommitted for the caller's rollback. Start fails only without memory or
 * threads.
 */
#ifndef AH_CKPT_ASYNC_H
#define AH_CKPT_ASYNC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ckpt/afile.h"
#include "ckpt/ckpt.h"
#include "ckpt/safetensors.h"
#include "core/status.h"

/* One shard file of a snapshot. ts[i].name points into names; ts[i].data into memory the piece does
 * not own. */
typedef struct ah_ckpt_piece {
    char name[AH_CKPT_NAME_MAX];
    ah_st_tensor_t *ts; /* owned */
    char (*names)[64];  /* owned */
    int n;
    json_t *meta;       /* owned (one reference) */
} ah_ckpt_piece_t;

void ah_ckpt_piece_free(ah_ckpt_piece_t *p);

typedef struct ah_ckpt_snap {
    char root[AH_CKPT_PATH_MAX]; /* the node's checkpoint root */
    int64_t step;
    int part;                    /* this rank's part number on its node */
    bool extend;                 /* the step is committed in root already: ckpt.h's writer_extend, not begin */
    char node[AH_CKPT_NAME_MAX]; /* the plan's node name (the test hook's node=) */
    int n_pieces;
    ah_ckpt_piece_t *pieces;     /* owned */
    /* the write's outcome */
    uint64_t bytes;              /* of the pieces written (what the part lists) */
    int files;
    int waiter_files;            /* of them, written by a caller waiting in ah_ckpt_async_wait */
    double write_s;              /* the write's duration on its thread (the copy's wait included) */
    double copy_s;               /* the device copies' own duration, as wait_copied gives it (0: none) */
    double writer_cpu_s;         /* the background thread's CPU seconds on it (the CPU backend's copies it
                                    made, the pieces it wrote, the part file; not a waiting caller's) */
    /* Set when the pieces' bytes are still being copied into the memory they point at (a GPU's
     * copies on a side stream, runtime/ckpt_async.c): the write first calls wait_copied(copied_ctx)
     * on whichever thread starts it, and reads nothing before it returned AH_OK (a failure is the
     * write's). NULL: the bytes are there. */
    ah_status_t (*wait_copied)(void *ctx, double *seconds, ah_error_t *err);
    void *copied_ctx;
} ah_ckpt_snap_t;

/* The snapshot buffer's layout. A piece's tensors lie back to back in it (in the piece's order) from
 * an address congruent to their offset in the piece's file (the safetensors header's length) modulo
 * AH_AFILE_BLOCK, so that the write's direct I/O sends their whole blocks from there, with no copy
 * into afile's buffer (afile.h); reaching that address costs each piece less than AH_CKPT_SNAP_PAD
 * bytes of the buffer, which holds its pieces' tensors plus AH_CKPT_SNAP_PAD a piece (the bytes
 * ckpt/host_memory.h counts). *start gets the address at or after `at` where p's tensors go. */
#define AH_CKPT_SNAP_PAD AH_AFILE_BLOCK
ah_status_t ah_ckpt_piece_start(const ah_ckpt_piece_t *p, uintptr_t at, uintptr_t *start, ah_error_t *err);

/* A zeroed snapshot with room for cap pieces; NULL without memory. */
ah_ckpt_snap_t *ah_ckpt_snap_new(const char *root, int64_t step, int part, const char *node, int cap);
void ah_ckpt_snap_free(ah_ckpt_snap_t *s);
/* Writes the snapshot's pieces and its part file on the calling thread (ckpt.h: writer_begin,
 * write_shard each, finish_part); commits nothing. Test hooks: "ckpt-piece" after the first piece,
 * "ckpt-write" after the part file. *cancel (may be NULL) stops it between pieces. */
ah_status_t ah_ckpt_snap_write(ah_ckpt_snap_t *s, const volatile bool *cancel, ah_error_t *err);

typedef struct ah_ckpt_async ah_ckpt_async_t;

ah_status_t ah_ckpt_async_start(ah_ckpt_async_t **out, ah_error_t *err);
ah_status_t ah_ckpt_async_submit(ah_ckpt_async_t *a, ah_ckpt_snap_t *s, ah_error_t *err);
/* The retention of root (ah_ckpt_gc_pinned(root, keep, pinned), best effort) on the thread; see the
 * contract above. */
void ah_ckpt_async_retain(ah_ckpt_async_t *a, const char *root, int keep, int64_t pinned);
/* A snapshot is submitted and not yet collected by wait. */
bool ah_ckpt_async_in_flight(ah_ckpt_async_t *a);
/* True when nothing is in flight or the snapshot in flight is written (or failed). */
bool ah_ckpt_async_done(ah_ckpt_async_t *a);
/* Blocks until the snapshot in flight is written and the retention due is done; *out gets the
 * snapshot back (the caller's to free), its write's status is returned. Nothing in flight: *out
 * NULL, AH_OK. */
ah_status_t ah_ckpt_async_wait(ah_ckpt_async_t *a, ah_ckpt_snap_t **out, ah_error_t *err);
/* Blocks until the snapshot in flight (if any) is written; see the contract above. */
void ah_ckpt_async_drain(ah_ckpt_async_t *a);
/* Joins the thread and frees the writer (NULL is fine); see the contract above. */
void ah_ckpt_async_stop(ah_ckpt_async_t *a, bool cancel);

#endif
