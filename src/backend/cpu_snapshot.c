/* The CPU backend's asynchronous checkpoint snapshots (backend.h snap_*): the copies of the
 * weights and moments into the snapshot buffer are made by the first thread that needs them done,
 * not by the training thread when the snapshot is taken:
 *
 *   training thread:  AdamW(N) | snap_copy (the list only) | forward, backward of N+1 ... | snap_copy_fence | AdamW(N+1)
 *   writer thread:                                  snap_copy_wait: the copies | the files
 *
 * The background writer calls snap_copy_wait before it reads the buffer (runtime/ckpt_async.c), at
 * once, so it makes the copies while the next step computes; the trainer's snap_copy_fence before
 * the next AdamW, the first thing that writes the weights and moments again, makes what is left
 * itself (nothing, unless the writer got no CPU since) and waits for the copies in progress. Both
 * take the ranges one at a time from one list, so a copy is never made twice, nor left waiting on
 * a thread the scheduler holds back. On a GPU host the copies are DMA on a side stream
 * (cuda_snapshot.c); here the training thread's memcpy of the snapshot (0.015-0.035 s a step
 * at bench_ckpt_overhead's SCALE=3, session 18) moves to the writer thread, whose CPU is not
 * the emulated device's (core/timing.h ah_cpu_background_begin). The buffer is ordinary host
 * memory (snap_host_alloc NULL: the session mallocs it), the bytes the host-memory model counts. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/entries.h"
#include "core/timing.h"

struct ah_snap_copy {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ah_snap_range_t *ranges; /* owned, room for cap (kept from one snapshot to the next) */
    int cap, n, next, active; /* ranges, the next nobody took, those being copied */
    double t0, seconds;      /* snap_copy's call; from it to the last copy's end */
};

ah_status_t ah_cpu_snap_create(int device, ah_snap_copy_t **out, ah_error_t *err) {
    (void)device;
    ah_snap_copy_t *c = calloc(1, sizeof *c);
    if (!c) return ah_error_set(err, AH_ERR_OOM, "CPU backend: no host memory for a checkpoint snapshot's copies");
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    *out = c;
    return AH_OK;
}

/* Makes the copies nobody has taken, then waits for those another thread is making. */
static void drain(ah_snap_copy_t *c) {
    pthread_mutex_lock(&c->mu);
    while (c->next < c->n) {
        const ah_snap_range_t r = c->ranges[c->next++];
        c->active++;
        pthread_mutex_unlock(&c->mu);
        if (r.copy) r.copy(r.dst, r.src, r.bytes, r.ctx);
        else memcpy(r.dst, r.src, r.bytes);
        pthread_mutex_lock(&c->mu);
        if (--c->active == 0 && c->next == c->n) {
            c->seconds = ah_now_s() - c->t0;
            pthread_cond_broadcast(&c->cv);
        }
    }
    while (c->active > 0) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

ah_status_t ah_cpu_snap_copy(ah_snap_copy_t *c, const ah_snap_range_t *ranges, int n, ah_error_t *err) {
    drain(c); /* the previous snapshot's, were any left (the caller waited for them already): nobody reads the list */
    if (n > c->cap) {
        ah_snap_range_t *list = realloc(c->ranges, (size_t)n * sizeof *list);
        if (!list) return ah_error_set(err, AH_ERR_OOM, "CPU backend: no host memory for a snapshot's %d copies", n);
        c->ranges = list;
        c->cap = n;
    }
    pthread_mutex_lock(&c->mu);
    if (n > 0) memcpy(c->ranges, ranges, (size_t)n * sizeof *ranges);
    c->n = n;
    c->next = 0;
    c->t0 = ah_now_s();
    c->seconds = 0;
    pthread_mutex_unlock(&c->mu);
    return AH_OK;
}

ah_status_t ah_cpu_snap_wait(ah_snap_copy_t *c, double *seconds, ah_error_t *err) {
    (void)err;
    drain(c);
    pthread_mutex_lock(&c->mu);
    *seconds = c->seconds;
    pthread_mutex_unlock(&c->mu);
    return AH_OK;
}

/* No stream to order: the training thread itself waits (and copies what is left). */
ah_status_t ah_cpu_snap_fence(ah_snap_copy_t *c, ah_error_t *err) {
    (void)err;
    drain(c);
    return AH_OK;
}

void ah_cpu_snap_free(ah_snap_copy_t **pc) {
    ah_snap_copy_t *c = *pc;
    if (!c) return;
    drain(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c->ranges);
    free(c);
    *pc = NULL;
}
