/* A checkpoint session's snapshots and its asynchronous saves (ckpt_io.h; the writer's contract is
 * ckpt/async.h). A save at step N: every rank copies the pieces it writes into host memory (the
 * snapshot, s->snap_buf: the bytes plan's host-memory check counts, ckpt/snapshot_mem.h) and hands
 * them to its background writer; training goes on. The copies are the backend's (backend.h
 * snap_*): on a GPU into its page-locked host memory on a side stream, on the CPU memcpys the
 * writer thread makes when it starts (backend/cpu_snapshot.c); either way the writer waits for
 * them before it reads the buffer, the next step's AdamW before it writes the weights and moments
 * (trainer.c, tr->snap_fence), and the next forward and backward overlap them. A sharded
 * optimizer's moments, assembled in host memory here, are memcpy'd on this thread. At each later step boundary the ranks agree
 * (one all-reduce) whether every writer is done; when so, the commit (ckpt_io.c, collective, on
 * this thread) runs as a synchronous save's would. The next save, a notice and the run's last step
 * first wait for the snapshot in flight (the wait is in the event and the progress line). */
#define _DEFAULT_SOURCE /* madvise(MADV_HUGEPAGE) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ckpt/crc32c.h"
#include "core/timing.h"
#include "runtime/ckpt_session.h"
#include "runtime/dp_groups.h"

void ah_ckpt_views_release(ah_ckpt_session_t *s) {
    const bool moments = s->view_moments[0] != NULL;
    for (int b = 0; b < 3; b++)
        if (s->view_host[b] && (b == 0 || !moments))
            ah_gpt_host_done(&s->tr->stage, s->view_dev[b], s->view_host[b], false, NULL);
    free(s->view_moments[0]);
    free(s->view_moments[1]);
    memset(s->view_host, 0, sizeof s->view_host);
    memset(s->view_moments, 0, sizeof s->view_moments);
    memset(s->view_on_device, 0, sizeof s->view_on_device);
}

/* The trainer's w, m, v as host memory into s->view_host. A sharded optimizer's moments are saved
 * whole, as an unsharded plan's: every rank assembles its stage's m and v in host memory (outside
 * the device's arenas, as a GPU's save stages through the host), the sharded groups all-gathering
 * the parts; so a checkpoint resumes on any plan, sharded or not. With on_device (an asynchronous
 * save on a GPU backend's side stream) the device buffers are their own views, read by the copies.
 * Collective, before anything a full disk can stop: the return is a collective failure, *local this
 * rank's own. */
static ah_status_t take_views(ah_ckpt_session_t *s, bool on_device, ah_status_t *local, ah_error_t *lerr,
                              ah_error_t *err) {
    ah_trainer_t *tr = s->tr;
    *local = AH_OK;
    if (tr->plan->n_opt_groups > 0) { /* sharded: the updated weights whole first (dp_groups.h) */
        const size_t n = (size_t)tr->stage.n_elems;
        s->view_moments[0] = malloc(n * sizeof(float));
        s->view_moments[1] = malloc(n * sizeof(float));
        ah_status_t ms = ah_dp_gather_wait(tr, err);
        if (ms == AH_OK && !(s->view_moments[0] && s->view_moments[1]))
            ms = ah_error_set(err, AH_ERR_OOM, "no host memory to assemble %zu AdamW moments for a checkpoint", 2 * n);
        if ((ms = ah_comm_agree(ah_comm_world(), ms, err)) == AH_OK)
            ms = ah_trainer_gather_moments(tr, s->view_moments[0], s->view_moments[1], err);
        if (ms != AH_OK) {
            ah_ckpt_views_release(s);
            return ms;
        }
    }
    const bool moments = s->view_moments[0] != NULL;
    float *dev[3] = {tr->stage.w, tr->stage.m, tr->stage.v};
    for (int b = 0; b < 3; b++) {
        s->view_dev[b] = dev[b];
        s->view_on_device[b] = on_device && (b == 0 || !moments);
    }
    for (int b = 0; b < 3 && *local == AH_OK; b++)
        if (s->view_on_device[b]) s->view_host[b] = dev[b];
        else if (b == 0 || !moments) *local = ah_gpt_host_view(&tr->stage, dev[b], true, &s->view_host[b], lerr);
    if (moments) {
        s->view_host[1] = s->view_moments[0];
        s->view_host[2] = s->view_moments[1];
    }
    return AH_OK;
}

static size_t tensor_elems(const ah_st_tensor_t *t) {
    size_t e = 1;
    for (int d = 0; d < t->ndim; d++) e *= (size_t)t->shape[d];
    return e;
}

/* Host memory for the snapshot where the backend has none of its own: 2 MiB aligned, in transparent
 * huge pages where the system leaves them to madvise (a hint: failure changes nothing). The
 * writer's direct I/O pins the buffer's pages and hands them to the disk as segments: from 4 KiB
 * pages a request holds at most max_segments (254 on this VM's virtio disk) pages, ~1 MiB, from
 * huge pages 4 MiB, so a save takes a quarter of the requests, the doorbells and the completions,
 * and most of that work ran on the block layer's kworker at nice -20, preempting the ranks
 * (docs/checkpoints.md "Session 23"). Session 19 had left them out for their first touch (~0.75
 * CPU-s a run on this VM, the host backing fresh 2 MiB pages), which is paid once a run. */
static float *snap_host_alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, bytes ? bytes : 1) != 0) return NULL;
    if (bytes >= (4u << 20)) madvise(p, bytes & ~(size_t)4095, MADV_HUGEPAGE);
    return p;
}

static int64_t snap_allocs; /* this process's allocations of a snapshot buffer (the checkpoint event says) */

int64_t ah_ckpt_snapshot_allocs(void) { return snap_allocs; }

/* s->snap_buf grown to `need` floats (on the first save; the same size each time within a session): the
 * backend's page-locked host memory where it has some (its copies into it are asynchronous), else
 * snap_host_alloc's. Nothing in flight reads the old one: one snapshot at a time. A buffer adopted from
 * the session before an in-place change (ah_ckpt_snapshot_adopt) is kept where `need` fits it; where it
 * is larger, the host-memory check counts `need` only (ckpt/host_memory.h): its pages past `need` are
 * returned to the system (madvise; the range stays mapped), a page-locked one is allocated anew. */
static ah_status_t snap_grow(ah_ckpt_session_t *s, size_t need, ah_error_t *err) {
    const ah_backend_t *be = s->tr->dev.backend;
    if (s->snap_adopted && need < s->snap_elems && !be->snap_host_alloc) {
        const uintptr_t from = ((uintptr_t)(s->snap_buf + need) + 4095) & ~(uintptr_t)4095,
                        end = (uintptr_t)(s->snap_buf + s->snap_elems) & ~(uintptr_t)4095;
        if (end > from) madvise((void *)from, end - from, MADV_DONTNEED);
    } else if (s->snap_adopted && need < s->snap_elems) { /* page-locked: not returned in part */
        be->snap_host_free(s->snap_buf);
        s->snap_buf = NULL;
        s->snap_elems = 0;
    }
    s->snap_adopted = false;
    s->snap_used = need;
    if (need <= s->snap_elems) return AH_OK;
    char why[256] = "the host has no memory left";
    float *b;
    if (be->snap_host_alloc) {
        be->snap_host_free(s->snap_buf);
        s->snap_buf = NULL;
        s->snap_elems = 0;
        b = be->snap_host_alloc(need * sizeof(float), why, sizeof why);
    } else if ((b = snap_host_alloc(need * sizeof(float))) != NULL) {
        free(s->snap_buf);
    }
    if (!b)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the checkpoint snapshot (%zu bytes: %s; give "
                            "--ckpt-sync to write from the trainer's memory instead)", need * sizeof(float), why);
    s->snap_buf = b;
    s->snap_elems = need;
    snap_allocs++;
    return AH_OK;
}

/* Whether p points into one of the trainer's buffers that the save reads on the device. */
static bool on_device(const ah_ckpt_session_t *s, const float *p) {
    const uintptr_t a = (uintptr_t)p, n = (uintptr_t)s->tr->stage.n_elems * sizeof(float);
    for (int b = 0; b < 3; b++)
        if (s->view_on_device[b] && a >= (uintptr_t)s->view_host[b] && a < (uintptr_t)s->view_host[b] + n) return true;
    return false;
}

/* The writer's wait for the copies (ah_ckpt_snap_t.wait_copied), on its thread: the session's
 * backend and copy stream stay as they are while a snapshot is in flight. */
static ah_status_t copies_done(void *ctx, double *seconds, ah_error_t *err) {
    const ah_ckpt_session_t *s = ctx;
    return s->tr->dev.backend->snap_copy_wait(s->snap_copy, seconds, err);
}

/* A tensor's copy into the snapshot taking its CRC-32C on the way (ah_snap_range_t.copy, made by the
 * CPU backend on whichever thread drains the copies): its file's writer reads the bytes no more. */
static void copy_summed(void *dst, const void *src, size_t bytes, void *tensor) {
    ah_st_tensor_t *t = tensor;
    t->crc32c = ah_crc32c_copy(dst, src, bytes);
    t->crc_known = true;
}

/* The snapshot's pieces moved into s->snap_buf, laid out for the writer's direct I/O (ckpt/async.h
 * ah_ckpt_piece_start: AH_CKPT_SNAP_PAD bytes a piece beyond the tensors): assembled host memory by
 * copy_summed here; the trainer's own buffers (the views on_device) by the backend's asynchronous
 * copies (the CPU's with copy_summed too), which the writer waits for before it reads the buffer and
 * the next AdamW before it writes the trainer's (tr->snap_fence). */
static ah_status_t copy_pieces(ah_ckpt_session_t *s, ah_ckpt_snap_t *snap, ah_error_t *err) {
    const ah_backend_t *be = s->tr->dev.backend;
    size_t need = (size_t)snap->n_pieces * (AH_CKPT_SNAP_PAD / sizeof(float));
    int n_tensors = 0;
    for (int i = 0; i < snap->n_pieces; i++)
        for (int j = 0; j < snap->pieces[i].n; j++, n_tensors++) need += tensor_elems(&snap->pieces[i].ts[j]);
    ah_status_t st = snap_grow(s, need, err);
    if (st == AH_OK && be->snap_copy && !s->snap_copy) st = be->snap_copy_create(s->tr->dev.index, &s->snap_copy, err);
    if (st != AH_OK) return st;
    ah_snap_range_t *r = be->snap_copy ? calloc((size_t)n_tensors + 1, sizeof *r) : NULL;
    if (be->snap_copy && !r) return ah_error_set(err, AH_ERR_OOM, "no host memory for a snapshot's copy list");
    uintptr_t at = (uintptr_t)s->snap_buf;
    s->pending_adamw_bytes = 0;
    int n_copies = 0, k = 0; /* k: the trainer's tensors listed, which AdamW may have written (ckpt_fuse.c) */
    for (int i = 0; i < snap->n_pieces && st == AH_OK; i++) {
        if ((st = ah_ckpt_piece_start(&snap->pieces[i], at, &at, err)) != AH_OK) break;
        for (int j = 0; j < snap->pieces[i].n; j++) {
            ah_st_tensor_t *t = &snap->pieces[i].ts[j];
            const size_t bytes = tensor_elems(t) * sizeof(float);
            float *to = (float *)at;
            if (r && on_device(s, t->data)) {
                if ((t->crc_known = ah_ckpt_fuse_take(s->fuse, snap->step, k++, t->data, to, bytes, &t->crc32c)))
                    s->pending_adamw_bytes += bytes;
                else r[n_copies++] = (ah_snap_range_t){to, t->data, bytes, copy_summed, t};
            } else {
                copy_summed(to, t->data, bytes, t);
            }
            t->data = to;
            at += bytes;
        }
    }
    if (st == AH_OK) ah_ckpt_fuse_layout_end(s->fuse, k);
    if (st == AH_OK && n_copies) st = be->snap_copy(s->snap_copy, r, n_copies, err);
    free(r);
    if (st == AH_OK && n_copies) {
        s->tr->snap_fence = s->snap_copy;
        snap->wait_copied = copies_done;
        snap->copied_ctx = s;
    }
    return st;
}

/* The buffer a session closed at an in-place change kept for the next one (ah_ckpt_snapshot_adopt). */
static struct kept {
    float *buf;
    size_t elems;
    const ah_backend_t *be; /* whose snap_host_alloc made it (or none: snap_host_alloc here) */
    int device;             /* the rank's device then: a page-locked buffer is its context's */
} kept;

static void host_free(const ah_backend_t *be, float *p) {
    if (be && be->snap_host_free) be->snap_host_free(p);
    else free(p);
}

void ah_ckpt_snapshot_free(ah_ckpt_session_t *s) {
    const ah_backend_t *be = s->tr->dev.backend;
    ah_ckpt_fuse_free(s->fuse);
    s->fuse = NULL;
    if (s->snap_copy) {
        be->snap_copy_free(&s->snap_copy); /* waits for its copies, which write snap_buf */
        s->tr->snap_fence = NULL;
    }
    if (s->snap_keep && s->snap_buf) { /* the next session's (an in-place change): a kept one is not two */
        host_free(kept.be, kept.buf);
        kept = (struct kept){s->snap_buf, s->snap_elems, be, s->tr->dev.index};
    } else {
        host_free(be, s->snap_buf);
    }
    s->snap_buf = NULL;
    s->snap_elems = s->snap_used = 0;
}

/* Kept by default where the backend's buffer is page-locked (a GPU's: its cudaHostAlloc pins and faults in
 * every page on the trainer's thread, and the trainer's arenas are device memory). On the CPU backend the
 * arenas are host memory too: a kept buffer makes the new trainer's arenas fault in fresh pages where the
 * freed buffer's would have been taken again, on the move's path (1.5-3 s more on this VM, measured with
 * bench/ckpt_keep_hold.sh, against 0.5-2.8 s of background copying saved): not kept unless
 * AH_CKPT_SNAPSHOT_KEEP=1 (0 turns it off on a GPU). */
void ah_ckpt_session_keep_snapshot(ah_ckpt_session_t *s) {
    if (!s || !s->writer || s->o.every <= 0) return;
    const char *e = getenv("AH_CKPT_SNAPSHOT_KEEP");
    s->snap_keep = e && *e ? strcmp(e, "0") != 0 : s->tr->dev.backend->snap_host_alloc != NULL;
}

void ah_ckpt_snapshot_adopt(ah_ckpt_session_t *s) {
    if (!kept.buf) return;
    if (s->writer && !s->snap_buf && kept.be == s->tr->dev.backend && kept.device == s->tr->dev.index) {
        s->snap_buf = kept.buf;
        s->snap_elems = kept.elems;
        s->snap_adopted = true;
    } else {
        host_free(kept.be, kept.buf); /* no periodic save to take it, or another device's */
    }
    kept = (struct kept){0};
}

ah_status_t ah_ckpt_snapshot_take(ah_ckpt_session_t *s, int64_t step, bool copy, ah_ckpt_written_t *w,
                                  ah_ckpt_snap_t **out, ah_error_t *err) {
    ah_trainer_t *tr = s->tr;
    *out = NULL;
    ah_status_t cs = take_views(s, copy && tr->dev.backend->snap_copy, &w->st, &w->err, err);
    if (cs != AH_OK) return cs;
    ah_shard_group_t *gs = groups_alloc(s);
    const int n = gs ? ah_placement_groups(&s->place, tr->rank, false, gs) : 0;
    const int k = s->place.ranks[tr->rank].tp_index;
    ah_ckpt_snap_t *snap = ah_ckpt_snap_new(s->node_root, step, s->node_rank, tr->plan->cluster.nodes[s->my_node].name,
                                            n);
    if (w->st == AH_OK && (!gs || !snap)) w->st = ah_error_set(&w->err, AH_ERR_OOM, "no host memory for the shard list");
    if (snap) snap->extend = step == s->behind_step && s->behind_extend; /* added beside another plan's files */
    if (w->st == AH_OK && step == s->behind_step && s->behind_held) { /* on this node's disk already: nothing to write */
        free(gs);
        ah_ckpt_snap_free(snap);
        ah_ckpt_views_release(s);
        return AH_OK;
    }
    for (int i = 0; i < n && w->st == AH_OK; i++) {
        if (ah_placement_lowest_holder(&s->place, gs[i], k, s->my_node) != tr->rank) continue;
        w->st = ah_ckpt_group_piece(s, gs[i], step, s->view_host, &snap->pieces[snap->n_pieces], &w->err);
        if (w->st == AH_OK) snap->n_pieces++;
    }
    free(gs);
    if (copy) {
        if (w->st == AH_OK) w->st = copy_pieces(s, snap, &w->err);
        ah_ckpt_views_release(s);
    }
    if (w->st != AH_OK) {
        ah_ckpt_snap_free(snap);
        if (!copy) ah_ckpt_views_release(s);
        return AH_OK;
    }
    *out = snap;
    return AH_OK;
}

ah_status_t ah_ckpt_save_begin(ah_ckpt_session_t *s, int64_t step, ah_error_t *err) {
    const double t0 = ah_now_s();
    ah_ckpt_written_t w = {.step = step, .async = true};
    ah_ckpt_snap_t *snap = NULL;
    ah_status_t st = ah_ckpt_snapshot_take(s, step, true, &w, &snap, err);
    if (st != AH_OK) return st;
    if (snap && (w.st = ah_ckpt_async_submit(s->writer, snap, &w.err)) != AH_OK) ah_ckpt_snap_free(snap);
    /* No agreement here: the step is in flight on every rank, and a rank that could not take or hand
     * over its snapshot (no host memory for it) keeps its failure for the commit, whose agreement
     * takes the step back everywhere (ah_ckpt_commit_step), as a failed write is. An all-reduce
     * here cost every rank a wait of 45-65 ms a save at bench_ckpt_overhead's SCALE 1 (load 14,
     * traced): the writers, woken by the submit, took the cores while it ran. */
    s->pending = step;
    s->pending_snapshot_s = ah_now_s() - t0;
    s->pending_st = w.st;
    s->pending_err = w.err;
    return AH_OK;
}

void ah_ckpt_session_before_step(ah_ckpt_session_t *s, int64_t done) {
    if (!s || !s->fuse || s->o.every <= 0 || done % s->o.every != 0 || done == s->o.steps || done == s->last_saved)
        return; /* no asynchronous save at that boundary (the fuse exists only where they are) */
    ah_ckpt_fuse_arm(s->fuse, done);
}

ah_status_t ah_ckpt_async_collect(ah_ckpt_session_t *s, bool must, json_t *events, ah_error_t *err) {
    if (s->pending < 0) { /* nothing to commit; a save on this thread comes after the disk's retention */
        ah_ckpt_snap_t *none = NULL;
        return must && s->writer ? ah_ckpt_async_wait(s->writer, &none, err) : AH_OK;
    }
    if (!must) { /* every rank's writer done? one all-reduce, the same answer on all */
        int64_t busy = ah_ckpt_async_done(s->writer) ? 0 : 1;
        ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &busy, 1, err);
        if (st != AH_OK || busy) return st;
    }
    const double t0 = ah_now_s();
    ah_ckpt_written_t w = {.step = s->pending, .async = true, .snapshot_s = s->pending_snapshot_s};
    ah_ckpt_snap_t *snap = NULL;
    w.st = ah_ckpt_async_wait(s->writer, &snap, &w.err);
    if (s->pending_st != AH_OK) { /* no snapshot went out (ah_ckpt_save_begin) */
        w.st = s->pending_st;
        w.err = s->pending_err;
    }
    w.wait_s = ah_now_s() - t0 + ah_ckpt_fuse_wait_s(s->fuse); /* and AdamW's wait for the buffer */
    s->wait_s += w.wait_s;
    if (snap) {
        w.bytes = snap->bytes;
        w.files = snap->files;
        w.writer_cpu_s = snap->writer_cpu_s;
        w.adamw_bytes = s->pending_adamw_bytes;
        w.save_s = w.snapshot_s + snap->write_s; /* the write waited for a GPU's copies */
        w.snapshot_s += snap->copy_s;            /* their issue, then their time on the device */
    }
    ah_ckpt_snap_free(snap);
    s->pending = -1;
    json_t *ev = NULL;
    ah_status_t st = ah_ckpt_commit_step(s, &w, &ev, err);
    /* without --ckpt-every only an in-place change's step written behind (ckpt_change.c) took a snapshot: no
     * periodic save needs the buffer again, nor does the host-memory check count it (docs/checkpoints.md) */
    if (s->o.every <= 0 && s->snap_buf) ah_ckpt_snapshot_free(s);
    if (ev) json_object_set_new(ev, "snapshot_kept", json_boolean(s->snap_buf != NULL)); /* rank 0's, held on */
    if (ev) json_object_set_new(ev, "snapshot_allocs", json_integer(snap_allocs)); /* rank 0's, in its process */
    if (ev && events) json_array_append_new(events, ev);
    else json_decref(ev);
    return st;
}
