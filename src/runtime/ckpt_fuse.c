/* AdamW writes the asynchronous checkpoint's snapshot (docs/checkpoints.md "AdamW writes the
 * snapshot"; the CPU backend, an optimizer not sharded). Before a step whose boundary takes an
 * asynchronous save, the train loop arms the session's fuse (ah_ckpt_session_before_step); the
 * trainer's AdamW then runs through its tap (runtime/gpt.h ah_gpt_adamw_tap_t):
 *
 *   training thread:  ready: the buffer's previous snapshot written | AdamW(N): a block of w, m, v
 *                     updated, then copied into the snapshot with its CRC-32C, block by block | ...
 *   step boundary:    ah_ckpt_save_begin: each tensor whose bytes AdamW wrote whole where this
 *                     save's layout puts them takes them and their CRC, no copy; any other is copied
 *                     as before (the background copies of backend/cpu_snapshot.c)
 *
 * The update is elementwise: the kernel runs over AH_FUSE_BLOCK elements at a time (24 KiB an
 * array, three of crc32c.c's lanes), whose results are still in the cache when they are copied
 * around it into the snapshot, so the snapshot costs no read of w, m and v from memory (the
 * background copy read all 12 bytes a parameter back; with its CRC it was 65 % of the writer's CPU).
 * The layout is the last save's (ah_ckpt_fuse_take records it as the save lists its tensors): the
 * first save after the session's open, and any save whose layout changed, copies; so does a step
 * whose AdamW was skipped (a non-finite or overflowed gradient) or whose boundary saved otherwise
 * (a notice's synchronous save: the bytes AdamW wrote are just not used).
 * Device emulation: the copies are the host's work, as the writer thread's copies were (on a GPU host
 * they are DMA, no device time): their CPU seconds, clocked around them, are left out of the phase's
 * compute (core/timing.h ah_cpu_background_add), so an emulated slow device does not stretch them;
 * AdamW's own stays in.
 * One snapshot in flight: the buffer holds the snapshot the writer may still be writing, so ready()
 * first waits for that write to end (ah_ckpt_async_drain, writing what the writer has not taken
 * itself, as the wait before a save does; the wait is the next checkpoint event's "wait_seconds"). */
#include <stdlib.h>
#include <string.h>

#include "ckpt/crc32c.h"
#include "core/timing.h"
#include "runtime/ckpt_session.h"

enum { AH_FUSE_BLOCK = 6144 }; /* floats: 24 KiB, crc32c.c's three lanes of 8 KiB */

/* One tensor of the snapshot: its bytes in the trainer's w, m or v and in the snapshot buffer. */
typedef struct {
    const float *src;
    float *dst;
    size_t bytes;
    size_t done;  /* bytes AdamW wrote into dst from the start, in order (SIZE_MAX: out of order) */
    uint32_t crc; /* theirs, so far */
} fuse_range_t;

struct ah_ckpt_fuse {
    ah_ckpt_session_t *s;
    fuse_range_t *r; /* the last save's layout, in the order it listed them */
    int n, cap;
    bool unrecorded; /* an entry of the save being listed found no memory: that save gives no layout */
    int *at;         /* [3 * param + b]: r's index of tensor param's w (b 0), m (1), v (2); -1 none */
    int n_params;
    int64_t armed;   /* the boundary the armed AdamW writes the snapshot of, -1 none */
    int64_t written; /* the boundary whose snapshot AdamW wrote, -1 none */
    double wait_s;   /* ready()'s waits not yet counted by a checkpoint event */
    ah_gpt_adamw_tap_t tap;
};

/* Appends bytes at `at` of tensor r to the snapshot, its CRC continued; out of order: r not used. */
static void put(fuse_range_t *r, size_t at, const float *src, size_t bytes) {
    if (r->done != at || at + bytes > r->bytes) {
        r->done = SIZE_MAX;
        return;
    }
    r->crc = ah_crc32c_copy_more(r->crc, (char *)r->dst + at, src, bytes);
    r->done += bytes;
}

static void fused_adamw(void *ctx, const ah_gpt_stage_t *st, int param, int64_t lo, int64_t mv, size_t n,
                        const ah_adamw_hparams_t *hp, float grad_scale, int64_t t) {
    ah_ckpt_fuse_t *f = ctx;
    fuse_range_t *to[3] = {NULL, NULL, NULL};
    bool any = false;
    for (int b = 0; b < 3 && param < f->n_params && mv == lo; b++) {
        const int i = f->at[3 * param + b];
        if (i >= 0) any = (to[b] = &f->r[i]) != NULL;
    }
    float *const buf[3] = {st->w + lo, st->m + mv, st->v + mv};
    if (!any) {
        st->k->adamw(buf[0], st->g + lo, buf[1], buf[2], n, hp, grad_scale, t);
        return;
    }
    const size_t at = (size_t)(lo - st->params[param].offset) * sizeof(float);
    double copy_cpu = 0; /* the snapshot's copies: host work, not the emulated device's (below) */
    for (size_t o = 0; o < n; o += AH_FUSE_BLOCK) {
        const size_t k = n - o < AH_FUSE_BLOCK ? n - o : AH_FUSE_BLOCK;
        st->k->adamw(buf[0] + o, st->g + lo + o, buf[1] + o, buf[2] + o, k, hp, grad_scale, t);
        const double c0 = ah_cpu_thread_s();
        for (int b = 0; b < 3; b++)
            if (to[b]) put(to[b], at + o * sizeof(float), buf[b] + o, k * sizeof(float));
        copy_cpu += ah_cpu_thread_s() - c0;
    }
    ah_cpu_background_add(copy_cpu);
}

/* The trainer's, before the optimizer phase: the snapshot buffer free (its last snapshot written),
 * the tensors' progress reset. */
static ah_status_t fuse_ready(void *ctx, ah_error_t *err) {
    (void)err;
    ah_ckpt_fuse_t *f = ctx;
    const double t0 = ah_now_s();
    if (f->s->writer) ah_ckpt_async_drain(f->s->writer);
    f->wait_s += ah_now_s() - t0;
    for (int i = 0; i < f->n; i++) {
        f->r[i].done = 0;
        f->r[i].crc = 0;
    }
    f->written = f->armed;
    f->armed = -1;
    return AH_OK;
}

ah_ckpt_fuse_t *ah_ckpt_fuse_new(ah_ckpt_session_t *s) {
    const ah_trainer_t *tr = s->tr;
    if (tr->dev.backend->gpu || tr->plan->n_opt_groups > 0) return NULL; /* DMA on a side stream; moments assembled */
    ah_ckpt_fuse_t *f = calloc(1, sizeof *f);
    if (!f) return NULL; /* the copies as before */
    f->s = s;
    f->armed = f->written = -1;
    f->tap = (ah_gpt_adamw_tap_t){fused_adamw, fuse_ready, f};
    return f;
}

void ah_ckpt_fuse_free(ah_ckpt_fuse_t *f) {
    if (!f) return;
    if (f->s->tr->adamw_tap == &f->tap) f->s->tr->adamw_tap = NULL;
    free(f->r);
    free(f->at);
    free(f);
}

void ah_ckpt_fuse_arm(ah_ckpt_fuse_t *f, int64_t boundary) {
    if (!f || f->n == 0 || !f->at) return; /* no layout yet: the first save copies */
    f->armed = boundary;
    f->s->tr->adamw_tap = &f->tap;
}

bool ah_ckpt_fuse_take(ah_ckpt_fuse_t *f, int64_t step, int k, const float *src, float *dst, size_t bytes,
                       uint32_t *crc) {
    if (!f) return false;
    bool fused = false;
    if (k < f->n) {
        const fuse_range_t *r = &f->r[k];
        fused = f->written == step && r->src == src && r->dst == dst && r->bytes == bytes && r->done == bytes;
        if (fused) *crc = r->crc;
    } else if (k >= f->cap) {
        const int cap = f->cap ? 2 * f->cap : 64;
        fuse_range_t *r = realloc(f->r, (size_t)cap * sizeof *r);
        if (!r) { /* this entry not recorded: ah_ckpt_fuse_layout_end takes no layout */
            f->unrecorded = true;
            return false;
        }
        f->r = r;
        f->cap = cap;
    }
    f->r[k] = (fuse_range_t){src, dst, bytes, 0, 0};
    return fused;
}

/* The tensor of the stage's params that r is the whole of (its index), with its buffer b; -1: none. */
static int tensor_of(const ah_gpt_stage_t *st, const fuse_range_t *r, int *b) {
    const float *bufs[3] = {st->w, st->m, st->v};
    for (*b = 0; *b < 3; (*b)++) {
        if (r->src < bufs[*b] || r->src >= bufs[*b] + st->n_elems) continue;
        const int64_t off = r->src - bufs[*b];
        for (int i = 0; i < st->n_params; i++)
            if (st->params[i].offset == off && (size_t)st->params[i].n * sizeof(float) == r->bytes) return i;
        return -1;
    }
    return -1;
}

void ah_ckpt_fuse_layout_end(ah_ckpt_fuse_t *f, int n) {
    if (!f) return;
    const ah_gpt_stage_t *st = &f->s->tr->stage;
    f->written = -1;
    /* an entry not recorded (no memory), even one before a later realloc succeeded: no layout */
    f->n = n <= f->cap && !f->unrecorded ? n : 0;
    f->unrecorded = false;
    if (!f->at) f->at = malloc((size_t)(3 * st->n_params) * sizeof *f->at);
    f->n_params = f->at ? st->n_params : 0;
    for (int i = 0; i < 3 * f->n_params; i++) f->at[i] = -1;
    for (int k = 0; k < f->n && f->at; k++) {
        int b;
        const int i = tensor_of(st, &f->r[k], &b);
        if (i >= 0) f->at[3 * i + b] = k;
    }
}

double ah_ckpt_fuse_wait_s(ah_ckpt_fuse_t *f) {
    if (!f) return 0;
    const double w = f->wait_s;
    f->wait_s = 0;
    return w;
}
