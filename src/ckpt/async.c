/* Snapshots and the background writer (async.h). */
#include "ckpt/async.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

ah_status_t ah_ckpt_snap_write(ah_ckpt_snap_t *s, const volatile bool *cancel, ah_error_t *err) {
    const double t0 = ah_now_s();
    const char *node = s->node[0] ? s->node : NULL;
    s->bytes = 0;
    s->files = 0;
    ah_ckpt_writer_t *w;
    ah_status_t st = ah_ckpt_writer_begin(s->root, s->step, &w, err);
    if (st != AH_OK) return st;
    for (int i = 0; i < s->n_pieces && st == AH_OK; i++) {
        if (cancel && *cancel) {
            st = ah_error_set(err, AH_ERR_IO, "the checkpoint of step %lld was cut short (the run stopped)",
                              (long long)s->step);
            break;
        }
        const ah_ckpt_piece_t *p = &s->pieces[i];
        if ((st = ah_ckpt_write_shard(w, p->name, p->ts, p->n, p->meta, err)) == AH_OK) s->files++;
        if (i == 0) ah_test_hook("ckpt-piece", s->step, node); /* test-only: one piece on disk */
    }
    if (st == AH_OK) st = ah_ckpt_writer_finish_part(w, s->part, err);
    if (st == AH_OK) s->bytes = ah_ckpt_writer_bytes(w); /* the sizes the part lists */
    ah_ckpt_writer_free(w);
    ah_test_hook("ckpt-write", s->step, node); /* test-only: the part written, nothing committed */
    s->write_s = ah_now_s() - t0;
    return st;
}

/* ---- the writer's thread ------------------------------------------------------------------- */

struct ah_ckpt_async {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ah_ckpt_snap_t *job; /* in flight: submitted, not collected */
    bool written;        /* job's write is over; st and err hold its outcome */
    ah_status_t st;
    ah_error_t err;
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

static void *writer_main(void *arg) {
    ah_ckpt_async_t *a = arg;
    pthread_mutex_lock(&a->mu);
    for (;;) {
        while (!a->quit && !(a->job && !a->written)) pthread_cond_wait(&a->cv, &a->mu);
        if (!(a->job && !a->written)) break; /* quit with nothing to write */
        ah_ckpt_snap_t *job = a->job;
        pthread_mutex_unlock(&a->mu);
        ah_error_t e = {0};
        ah_status_t st = ah_ckpt_snap_write(job, &a->cancel, &e);
        pthread_mutex_lock(&a->mu);
        post(a, job, true, st, &e);
    }
    pthread_mutex_unlock(&a->mu);
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
    post(a, s, false, AH_OK, NULL);
    pthread_mutex_unlock(&a->mu);
    return AH_OK;
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
    while (a->job && !a->written) pthread_cond_wait(&a->cv, &a->mu);
    *out = a->job;
    const ah_status_t st = a->job ? a->st : AH_OK;
    if (a->job && st != AH_OK && err) *err = a->err;
    a->job = NULL;
    a->written = false;
    pthread_mutex_unlock(&a->mu);
    return st;
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
