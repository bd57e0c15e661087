/* Snapshots and the background writer (async.h). */
#define _GNU_SOURCE /* pthread_setname_np */
#include "ckpt/async.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/test_hook.h"
#include "core/timing.h"

void ah_ckpt_piece_free(ah_ckpt_piece_t *p) {
    if (p) {
        json_decref(p->meta);
        free(p->ts);
        free(p->names);
        *p = (ah_ckpt_piece_t){.n = 0};
    }
}

ah_status_t ah_ckpt_piece_start(const ah_ckpt_piece_t *p, uintptr_t at, uintptr_t *start, ah_error_t *err) {
    uint64_t file = 0, data = 0;
    if (ah_st_size(p->ts, p->n, p->meta, &file, err) != AH_OK) return err->code;
    for (int j = 0; j < p->n; j++) {
        uint64_t e = ah_dtype_size(p->ts[j].dtype);
        for (int d = 0; d < p->ts[j].ndim; d++) e *= (uint64_t)p->ts[j].shape[d];
        data += e;
    }
    const uintptr_t header = (uintptr_t)(file - data); /* the tensors' offset in the file */
    *start = at + (header - at) % AH_CKPT_SNAP_PAD;
    return AH_OK;
}

ah_ckpt_snap_t *ah_ckpt_snap_new(const char *root, int64_t step, int part, const char *node, int cap) {
    ah_ckpt_snap_t *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->pieces = calloc((size_t)(cap > 0 ? cap : 1), sizeof *s->pieces);
    if (!s->pieces) {
        free(s);
        return NULL;
    }
    snprintf(s->root, sizeof s->root, "%s", root);
    snprintf(s->node, sizeof s->node, "%s", node ? node : "");
    s->step = step;
    s->part = part;
    return s;
}

void ah_ckpt_snap_free(ah_ckpt_snap_t *s) {
    if (!s) return;
    for (int i = 0; i < s->n_pieces; i++) ah_ckpt_piece_free(&s->pieces[i]);
    free(s->pieces);
    free(s);
}

/* One piece of s into w's step; the test hook "ckpt-piece" after the first. */
static ah_status_t write_piece(ah_ckpt_snap_t *s, ah_ckpt_writer_t *w, int i, ah_error_t *err) {
    const ah_ckpt_piece_t *p = &s->pieces[i];
    const ah_status_t st = ah_ckpt_write_shard(w, p->name, p->ts, p->n, p->meta, err);
    if (i == 0) ah_test_hook("ckpt-piece", s->step, s->node[0] ? s->node : NULL); /* test-only: one piece on disk */
    return st;
}

static ah_status_t cut_short(const ah_ckpt_snap_t *s, ah_error_t *err) {
    return ah_error_set(err, AH_ERR_IO, "the checkpoint of step %lld was cut short (the run stopped)", (long long)s->step);
}

/* The part file after the pieces (st: theirs), the writer freed, the test hook "ckpt-write". */
static ah_status_t finish_snap(ah_ckpt_snap_t *s, ah_ckpt_writer_t *w, ah_status_t st, double t0, ah_error_t *err) {
    if (st == AH_OK) st = ah_ckpt_writer_finish_part(w, s->part, err);
    if (st == AH_OK) s->bytes = ah_ckpt_writer_bytes(w); /* the sizes the part lists */
    ah_ckpt_writer_free(w);
    ah_test_hook("ckpt-write", s->step, s->node[0] ? s->node : NULL); /* test-only: the part written, nothing committed */
    s->write_s = ah_now_s() - t0;
    return st;
}

/* The write's start: the snapshot's bytes in host memory (its device copies waited for), then the
 * writer begun. */
static ah_status_t begin(ah_ckpt_snap_t *s, ah_ckpt_writer_t **w, ah_error_t *err) {
    *w = NULL;
    s->copy_s = 0;
    const ah_status_t st = s->wait_copied ? s->wait_copied(s->copied_ctx, &s->copy_s, err) : AH_OK;
    if (st != AH_OK) return st;
    return s->extend ? ah_ckpt_writer_extend(s->root, s->step, w, err) : ah_ckpt_writer_begin(s->root, s->step, w, err);
}

ah_status_t ah_ckpt_snap_write(ah_ckpt_snap_t *s, const volatile bool *cancel, ah_error_t *err) {
    const double t0 = ah_now_s();
    s->bytes = 0;
    s->files = 0;
    ah_ckpt_writer_t *w;
    ah_status_t st = begin(s, &w, err);
    if (st != AH_OK) return st;
    for (int i = 0; i < s->n_pieces && st == AH_OK; i++) {
        if (cancel && *cancel) st = cut_short(s, err);
        else if ((st = write_piece(s, w, i, err)) == AH_OK) s->files++;
    }
    return finish_snap(s, w, st, t0, err);
}

/* ---- the writer's thread ------------------------------------------------------------------- */

struct ah_ckpt_async {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ah_ckpt_snap_t *job; /* in flight: submitted, not collected */
    bool written;        /* job's write is over; st and err hold its outcome */
    ah_status_t st;      /* the job's outcome so far (its first failure) */
    ah_error_t err;
    /* the job's write, shared by the writer's thread and a caller waiting in ah_ckpt_async_wait */
    ah_ckpt_writer_t *w; /* begun (NULL before, and again once finished) */
    bool busy_alone;     /* begin or finish running: nobody else may take a step of this job */
    int next;            /* the next piece nobody has taken */
    int active;          /* pieces being written now */
    double t0;           /* the write's start */
    /* the retention due (ah_ckpt_async_retain): done before any snapshot submitted after it */
    bool retain_due;
    char retain_root[AH_CKPT_PATH_MAX];
    int retain_keep;
    int64_t retain_pinned;
    bool quit;
    volatile bool cancel;
};

/* Under the lock: the job in flight and its state, then every waiter woken. */
static void post(ah_ckpt_async_t *a, ah_ckpt_snap_t *job, bool written, ah_status_t st, const ah_error_t *e) {
    a->job = job;
    a->written = written;
    a->st = st;
    if (e) a->err = *e;
    pthread_cond_broadcast(&a->cv);
}

/* Under the lock: a failure of the job in flight (its first one is kept); nothing more is taken. */
static void fail(ah_ckpt_async_t *a, ah_status_t st, const ah_error_t *e) {
    if (st != AH_OK && a->st == AH_OK) {
        a->st = st;
        a->err = *e;
    }
}

/* Under the lock (released around the I/O): takes and does the job's next steps (begin, a piece,
 * or, once every piece is done, the part file) until it is written or the rest is in another
 * thread's hands. Either thread calls it: the writer's, and a caller that must wait, which so does
 * the work itself at its own priority instead of waiting on a writer the scheduler holds back. */
/* Under the lock (released around the removal): the retention due, run by the thread that calls it. */
static void retain(ah_ckpt_async_t *a) {
    char root[AH_CKPT_PATH_MAX];
    memcpy(root, a->retain_root, sizeof root);
    const int keep = a->retain_keep;
    const int64_t pinned = a->retain_pinned;
    a->retain_due = false;
    a->busy_alone = true;
    pthread_mutex_unlock(&a->mu);
    ah_error_t e;
    (void)ah_ckpt_gc_pinned(root, keep, pinned, NULL, &e); /* best effort, as a synchronous save's */
    pthread_mutex_lock(&a->mu);
    a->busy_alone = false;
    pthread_cond_broadcast(&a->cv);
}

static void work(ah_ckpt_async_t *a, bool waiter) {
    ah_ckpt_snap_t *s;
    for (;;) { /* until nothing is left that this thread may take: a waiting writer misses no wake-up */
        if (a->retain_due && !a->busy_alone && !a->w) { /* before the next snapshot's write */
            retain(a);
            continue; /* another may have come due meanwhile */
        }
        if (!(s = a->job) || a->written || a->busy_alone) return;
        ah_error_t e = {0};
        ah_ckpt_writer_t *w = a->w;
        if (!w) { /* begin */
            a->busy_alone = true;
            a->t0 = ah_now_s();
            const double c0 = ah_cpu_thread_s();
            pthread_mutex_unlock(&a->mu);
            const ah_status_t st = begin(s, &w, &e);
            pthread_mutex_lock(&a->mu);
            if (!waiter) s->writer_cpu_s += ah_cpu_thread_s() - c0;
            a->busy_alone = false;
            a->w = w;
            if (st != AH_OK) post(a, s, true, st, &e);
            pthread_cond_broadcast(&a->cv);
        } else if (a->next < s->n_pieces && a->st == AH_OK && !a->cancel) { /* a piece */
            const int i = a->next++;
            a->active++;
            const double c0 = ah_cpu_thread_s();
            pthread_mutex_unlock(&a->mu);
            const ah_status_t st = write_piece(s, w, i, &e);
            pthread_mutex_lock(&a->mu);
            if (!waiter) s->writer_cpu_s += ah_cpu_thread_s() - c0;
            a->active--;
            if (st == AH_OK) {
                s->files++;
                s->waiter_files += waiter;
            }
            fail(a, st, &e);
            pthread_cond_broadcast(&a->cv);
        } else if (a->active == 0) { /* every piece written (or the write failed or was cut): the part */
            ah_status_t st = a->st;
            if (st == AH_OK && a->next < s->n_pieces) st = cut_short(s, &e);
            else if (st != AH_OK) e = a->err;
            a->busy_alone = true;
            const double c0 = ah_cpu_thread_s();
            pthread_mutex_unlock(&a->mu);
            st = finish_snap(s, w, st, a->t0, &e);
            pthread_mutex_lock(&a->mu);
            if (!waiter) s->writer_cpu_s += ah_cpu_thread_s() - c0;
            a->busy_alone = false;
            a->w = NULL;
            post(a, s, true, st, &e);
        } else {
            return; /* the last pieces are being written by the other thread */
        }
    }
}

static void *writer_main(void *arg) {
    ah_ckpt_async_t *a = arg;
    (void)pthread_setname_np(pthread_self(), "ah-ckpt-writer");
    ah_cpu_background_begin(); /* not the rank's computation (core/timing.h) */
    pthread_mutex_lock(&a->mu);
    for (;;) {
        work(a, false);
        if (a->quit && !(a->job && !a->written) && !a->retain_due && !a->busy_alone) break; /* nothing (more) to do */
        pthread_cond_wait(&a->cv, &a->mu);
    }
    pthread_mutex_unlock(&a->mu);
    ah_cpu_background_end();
    return NULL;
}

ah_status_t ah_ckpt_async_start(ah_ckpt_async_t **out, ah_error_t *err) {
    *out = NULL;
    ah_ckpt_async_t *a = calloc(1, sizeof *a);
    if (!a) return ah_error_set(err, AH_ERR_OOM, "no host memory for the checkpoint writer");
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    if (pthread_create(&a->thread, NULL, writer_main, a) != 0) {
        pthread_cond_destroy(&a->cv);
        pthread_mutex_destroy(&a->mu);
        free(a);
        return ah_error_set(err, AH_ERR_IO, "cannot start the background checkpoint writer's thread");
    }
    *out = a;
    return AH_OK;
}

ah_status_t ah_ckpt_async_submit(ah_ckpt_async_t *a, ah_ckpt_snap_t *s, ah_error_t *err) {
    pthread_mutex_lock(&a->mu);
    if (a->job) {
        const long long busy = (long long)a->job->step;
        pthread_mutex_unlock(&a->mu);
        return ah_error_set(err, AH_ERR_INVALID, "the checkpoint of step %lld is still in flight: wait for it before "
                            "submitting step %lld (one snapshot at a time)", busy, (long long)s->step);
    }
    s->bytes = 0;
    s->files = s->waiter_files = 0;
    s->writer_cpu_s = 0;
    a->next = 0;
    post(a, s, false, AH_OK, NULL);
    pthread_mutex_unlock(&a->mu);
    return AH_OK;
}

void ah_ckpt_async_retain(ah_ckpt_async_t *a, const char *root, int keep, int64_t pinned) {
    pthread_mutex_lock(&a->mu);
    snprintf(a->retain_root, sizeof a->retain_root, "%s", root);
    a->retain_keep = keep;
    a->retain_pinned = pinned;
    a->retain_due = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

bool ah_ckpt_async_in_flight(ah_ckpt_async_t *a) {
    pthread_mutex_lock(&a->mu);
    const bool busy = a->job != NULL;
    pthread_mutex_unlock(&a->mu);
    return busy;
}

bool ah_ckpt_async_done(ah_ckpt_async_t *a) {
    pthread_mutex_lock(&a->mu);
    const bool done = !a->job || a->written;
    pthread_mutex_unlock(&a->mu);
    return done;
}

ah_status_t ah_ckpt_async_wait(ah_ckpt_async_t *a, ah_ckpt_snap_t **out, ah_error_t *err) {
    pthread_mutex_lock(&a->mu);
    for (work(a, true); (a->job && !a->written) || a->retain_due || a->busy_alone; work(a, true))
        pthread_cond_wait(&a->cv, &a->mu);
    *out = a->job;
    const ah_status_t st = a->job ? a->st : AH_OK;
    if (a->job && st != AH_OK && err) *err = a->err;
    a->job = NULL;
    a->written = false;
    pthread_mutex_unlock(&a->mu);
    return st;
}

void ah_ckpt_async_drain(ah_ckpt_async_t *a) {
    pthread_mutex_lock(&a->mu);
    for (work(a, true); a->job && !a->written; work(a, true)) pthread_cond_wait(&a->cv, &a->mu);
    pthread_mutex_unlock(&a->mu);
}

void ah_ckpt_async_stop(ah_ckpt_async_t *a, bool cancel) {
    if (!a) return;
    a->cancel = cancel; /* read between pieces (volatile): a cut needs no lock */
    pthread_mutex_lock(&a->mu);
    a->quit = true;
    post(a, a->job, a->written, a->st, NULL);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    ah_ckpt_snap_t *left = a->job; /* not collected: freed here */
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    ah_ckpt_snap_free(left);
    free(a);
}
