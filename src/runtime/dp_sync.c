/* The layer-wise DP gradient sync of a rank, in buckets, overlapped with the backward or not, and a
 * sharded optimizer's all-gather of the updated weights in the same buckets, overlapped with the
 * next step's forward or not: runtime/dp_groups.h (ah_dp_plan_buckets, ah_dp_on_grads, ah_dp_sync,
 * ah_dp_gather_weights, ah_dp_on_weights, ah_dp_gather_wait); docs/runtime.md "Overlapped gradient
 * sync". On the CPU a bucket is a non-blocking MPI collective; on a GPU a device communicator's
 * collective (hierarchical: its three phases in order), with overlap on the backend's
 * communication stream, ordered by events: after the kernels that wrote the bucket, before the
 * optimizer (the gradients) or the bucket's first forward use (the weights); without, in order on
 * the compute stream. */
#include <stdlib.h>

#include "runtime/dp_groups.h"
#include "runtime/dp_hier.h"
#include "core/timing.h"

#define TRY(call)                   \
    do {                            \
        ah_status_t s_ = (call);    \
        if (s_ != AH_OK) return s_; \
    } while (0)

/* MPI counts are ints: a bucket holds at most this many floats. */
#define BUCKET_MAX ((int64_t)1 << 30)

/* Appends bucket [off, off + n) of group id, final at event, split at BUCKET_MAX floats; a sharded
 * group's bucket gets each member's part of it. */
static ah_status_t add_bucket(ah_trainer_t *tr, int id, int event, int64_t off, int64_t n, ah_error_t *err) {
    const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
    const ah_backend_t *be = tr->dev.backend;
    const int members = ah_comm_size(ah_dp_group(tr, id)->c);
    /* One communication stream serves a GPU's groups, so every member must issue the collectives
     * in one order: the tied group, which a last stage finishes at the head and a first stage at
     * the end, goes at the end on both (its weights are still waited for before the head). */
    const int issue_at = be->gpu && id == tr->layout.n_segments + 2 ? AH_GPT_GRADS_END : event;
    for (int64_t at = off; at < off + n; at += BUCKET_MAX) {
        ah_dp_bucket_t *b = &tr->buckets[tr->n_buckets++];
        const int64_t len = off + n - at < BUCKET_MAX ? off + n - at : BUCKET_MAX;
        *b = (ah_dp_bucket_t){.group = id, .event = issue_at, .use_event = event, .off = at, .n = len};
        const bool events = be->gpu && !tr->opts.no_overlap_grad_sync;
        if (events) TRY(be->dcomm_event_create(&b->synced, err));
        if (events && sh->counts) TRY(be->dcomm_event_create(&b->gathered, err));
        /* summed whole, hierarchically (a sharded member keeps its part); a GPU's phases: start() */
        if (tr->hier[id] && !be->gpu) TRY(ah_dp_hier_bucket(tr->hier[id], b, err));
        if (!sh->counts) continue;
        if (!(b->parts = malloc((size_t)members * sizeof *b->parts)))
            return ah_error_set(err, AH_ERR_OOM, "no host memory for the gradient sync's buckets");
        int64_t part = sh->off; /* parts are contiguous, in part order, from the group's start */
        for (int k = 0; k < members; k++) {
            const int64_t lo = part > at ? part : at, hi = part + sh->counts[k] < at + len ? part + sh->counts[k] : at + len;
            b->parts[k] = hi > lo ? hi - lo : 0;
            part += sh->counts[k];
        }
    }
    return AH_OK;
}

/* The buckets of group id (a member, with gradients) in the order its backward finishes them. */
static ah_status_t group_buckets(ah_trainer_t *tr, int id, ah_error_t *err) {
    const int G = tr->layout.n_segments;
    const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
    if (id >= G) { /* first stage's (embedding): at the end; last stage's: after the head; tied: either */
        const bool end = id == G || (id == G + 2 && tr->stage.cfg.has_embed);
        return add_bucket(tr, id, end ? AH_GPT_GRADS_END : AH_GPT_GRADS_HEAD, sh->off, sh->n, err);
    }
    for (int l = tr->layout.segments[id].last - 1; l >= tr->layout.segments[id].first; l--) {
        int64_t off, n;
        ah_gpt_block_range(&tr->stage, l, l + 1, &off, &n);
        TRY(add_bucket(tr, id, l, off, n, err));
    }
    return AH_OK;
}

static int event_rank(int event) { return event == AH_GPT_GRADS_HEAD ? 1 << 30 : event; }

static int by_event(const void *a, const void *b) {
    const ah_dp_bucket_t *x = a, *y = b;
    const int ex = event_rank(x->event), ey = event_rank(y->event);
    if (ex != ey) return ex > ey ? -1 : 1; /* head first, then blocks downward, then the end */
    if (x->group != y->group) return x->group < y->group ? -1 : 1;
    return x->off > y->off ? -1 : x->off < y->off; /* a split block: its chunks in one order */
}

static ah_status_t start(ah_trainer_t *tr, ah_dp_bucket_t *b, ah_error_t *err);

/* Starts the queued buckets (hooks passed) whose due time has come, or all of them, in the order
 * their hooks came, which is the same on every member of a communicator. */
static ah_status_t start_due(ah_trainer_t *tr, bool all, ah_error_t *err) {
    while (tr->due_head < tr->due_tail) {
        ah_dp_bucket_t *b = &tr->buckets[tr->due_queue[tr->due_head]];
        if (!all && b->due > ah_now_s()) return AH_OK;
        tr->due_head++;
        b->queued = false;
        TRY(start(tr, b, err));
    }
    return AH_OK;
}

/* Starts the buckets now due, then tests the started ones so their collectives move on; a
 * hierarchical one issues its next phase when its collectives are done and no bucket before it
 * lags behind that phase (dp_hier.h). */
static ah_status_t progress(ah_trainer_t *tr, ah_error_t *err) {
    if (tr->dev.backend->gpu) return AH_OK; /* the device moves its stream on its own */
    TRY(start_due(tr, false, err));
    int cap = 4; /* the lowest phase of the hierarchical buckets so far */
    for (int i = 0; i < tr->n_buckets; i++) {
        ah_dp_bucket_t *b = &tr->buckets[i];
        if (!b->hier) {
            if (b->started) TRY(ah_comm_coll_test(&b->coll, NULL, err));
            continue;
        }
        if (b->started) TRY(ah_dp_hier_advance(b, tr->stage.g, cap, false, err));
        if (b->phase < cap) cap = b->phase;
    }
    for (int i = 0; i < tr->n_buckets; i++)
        if (tr->buckets[i].gathering) TRY(ah_comm_coll_test(&tr->buckets[i].gather, NULL, err));
    return AH_OK;
}

void ah_dp_progress(ah_trainer_t *tr) {
    if (tr->dp_err.code == AH_OK) (void)progress(tr, &tr->dp_err); /* ah_dp_sync returns it */
}

ah_status_t ah_dp_plan_buckets(ah_trainer_t *tr, ah_error_t *err) {
    const int n_ids = ah_dp_group_count(tr);
    int64_t cap = 0;
    for (int id = 0; id < n_ids; id++) {
        const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
        if (ah_dp_group(tr, id)->c && sh->n > 0)
            cap += id < tr->layout.n_segments ? sh->n / BUCKET_MAX + tr->layout.segments[id].last - tr->layout.segments[id].first
                                              : sh->n / BUCKET_MAX + 1;
    }
    tr->buckets = calloc((size_t)cap + 1, sizeof *tr->buckets);
    tr->due_queue = calloc((size_t)cap + 1, sizeof *tr->due_queue);
    if (!tr->buckets || !tr->due_queue)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the gradient sync's buckets");
    for (int id = 0; id < n_ids; id++)
        if (ah_dp_group(tr, id)->c && ah_dp_shard(tr, id)->n > 0) TRY(group_buckets(tr, id, err));
    qsort(tr->buckets, (size_t)tr->n_buckets, sizeof *tr->buckets, by_event);
    /* without a bucket (no data parallelism) there is nothing to overlap: no hook, and device
     * emulation sleeps in one piece, not in 100 us slices that progress nothing */
    tr->overlap = !tr->opts.no_overlap_grad_sync && tr->n_buckets > 0;
    if (tr->overlap) {
        tr->stage.on_grads = ah_dp_on_grads;
        tr->stage.on_weights = ah_dp_on_weights;
        tr->stage.on_grads_ctx = tr;
    }
    return AH_OK;
}

void ah_dp_free_buckets(ah_trainer_t *tr) {
    for (int i = 0; tr->buckets && i < tr->n_buckets; i++) {
        if (tr->buckets[i].hier) ah_dp_hier_bucket_free(&tr->buckets[i]);
        free(tr->buckets[i].counts);
        free(tr->buckets[i].parts);
        if (tr->dev.backend->gpu) {
            tr->dev.backend->dcomm_event_free(&tr->buckets[i].synced);
            tr->dev.backend->dcomm_event_free(&tr->buckets[i].gathered);
        }
        ah_comm_coll_free(&tr->buckets[i].coll);
        ah_comm_coll_free(&tr->buckets[i].gather);
    }
    free(tr->buckets);
    free(tr->due_queue);
    tr->buckets = NULL;
    tr->due_queue = NULL;
    tr->n_buckets = 0;
}

static ah_status_t start(ah_trainer_t *tr, ah_dp_bucket_t *b, ah_error_t *err) {
    ah_group_t *grp = ah_dp_group(tr, b->group);
    float *g = tr->stage.g + b->off;
    b->started = true;
    if (tr->dev.backend->gpu) { /* with overlap (b->synced) on the communication stream, after the kernels so far */
        if (tr->hier[b->group]) return ah_dp_hier_sum(tr->hier[b->group], g, b->n, b->synced, err);
        return b->parts ? ah_group_reduce_scatter(grp, g, b->parts, b->synced, err)
                        : ah_group_sum(grp, g, (size_t)b->n, b->synced, err);
    }
    if (b->hier) return ah_dp_hier_start(b, tr->stage.g, err);
    return b->parts ? ah_comm_ireduce_scatter_f32(grp->c, g, b->parts, &b->coll, err)
                     : ah_comm_iallreduce_f32(grp->c, g, (size_t)b->n, &b->coll, err);
}

/* A bucket starts when the emulated device reaches its hook, not when the host does (k x sooner
 * under emulation): queued with that due time, it is started by the first progress after it (in
 * emulation's sleeps, at later hooks, at the latest in ah_dp_sync). The phase goes on in one piece:
 * cut at each hook, with a sleep there, it ran late on a loaded host (docs/runtime.md
 * "Overlapped gradient sync"). A GPU starts it on its stream at once. */
ah_status_t ah_dp_on_grads(void *ctx, int event, ah_error_t *err) {
    ah_trainer_t *tr = ctx;
    if (!tr->last_bwd) return AH_OK;
    const bool gpu = tr->dev.backend->gpu;
    const double due = gpu ? 0 : ah_emulator_device_now(&tr->emu);
    for (int i = 0; i < tr->n_buckets; i++) {
        ah_dp_bucket_t *b = &tr->buckets[i];
        if (b->event != event || b->started || b->queued) continue;
        if (gpu) {
            TRY(start(tr, b, err));
            continue;
        }
        b->queued = true;
        b->due = due;
        tr->due_queue[tr->due_tail++] = i;
    }
    return progress(tr, err);
}

/* Moves every started hierarchical bucket on until all are complete. Not bucket by bucket, blocking:
 * a group's place in the list differs between its members (the tied group's bucket is at the
 * head's event on a last stage, at the end on a first one), so a member waiting in one bucket's
 * phase could hold back a phase the others wait for in another; polled, each phase is issued as
 * soon as the list order allows (ah_dp_hier_advance's cap), and every one completes. */
static ah_status_t finish_hier(ah_trainer_t *tr, ah_error_t *err) {
    for (;;) {
        TRY(progress(tr, err));
        bool pending = false;
        for (int i = 0; i < tr->n_buckets && !pending; i++)
            pending = tr->buckets[i].hier && tr->buckets[i].started && tr->buckets[i].phase < 4;
        if (!pending) return AH_OK;
        ah_sleep_s(20e-6);
    }
}

/* Waits for bucket b to complete (a hierarchical one alone in flight: its remaining phases, each
 * waited for). */
static ah_status_t finish(ah_trainer_t *tr, ah_dp_bucket_t *b, ah_error_t *err) {
    if (tr->dev.backend->gpu) { /* the compute stream waits, not the host; without overlap it ran in order */
        if (b->synced) TRY(tr->dev.backend->dcomm_event_wait(b->synced, err));
    } else if (b->hier) TRY(ah_dp_hier_advance(b, tr->stage.g, 4, true, err));
    else TRY(ah_comm_coll_wait(&b->coll, err));
    b->started = false;
    return AH_OK;
}

ah_status_t ah_dp_sync(ah_trainer_t *tr, ah_error_t *err) {
    if (tr->dp_err.code != AH_OK) /* a start or test in emulation's sleeps failed */
        return ah_error_set(err, tr->dp_err.code, "%s", tr->dp_err.msg);
    TRY(ah_dp_gather_wait(tr, err)); /* none left after a step's forwards, unless a stage had none */
    tr->dp_hidden = 0;
    if (tr->overlap) { /* the queued ones not yet due, what the backward did not start (none, in 1F1B), then the waits */
        TRY(progress(tr, err));
        for (int i = 0; i < tr->n_buckets && !tr->dev.backend->gpu; i++) {
            const ah_dp_bucket_t *b = &tr->buckets[i];
            tr->dp_hidden += b->started && (b->hier ? b->phase >= 4 : !b->coll.req.active);
        }
        TRY(start_due(tr, true, err));
        tr->due_head = tr->due_tail = 0;
        for (int i = 0; i < tr->n_buckets; i++)
            if (!tr->buckets[i].started) TRY(start(tr, &tr->buckets[i], err));
        TRY(finish_hier(tr, err));
    } else { /* one group at a time, in the global order, so no two ranks wait in different ones */
        for (int id = 0; id < ah_dp_group_count(tr); id++)
            for (int i = 0; i < tr->n_buckets; i++)
                if (tr->buckets[i].group == id) {
                    TRY(start(tr, &tr->buckets[i], err));
                    TRY(finish(tr, &tr->buckets[i], err));
                }
    }
    for (int i = 0; i < tr->n_buckets; i++) {
        if (tr->buckets[i].started) TRY(finish(tr, &tr->buckets[i], err));
        tr->buckets[i].phase = 0; /* not started: it holds back the phases of the buckets after it */
    }
    return AH_OK;
}

/* Waits for bucket b's weight all-gather. In a forward (in_phase) the device reaches the wait only
 * when its compute before it is done: device emulation catches up first. */
static ah_status_t gather_done(ah_trainer_t *tr, ah_dp_bucket_t *b, bool in_phase, ah_error_t *err) {
    b->gathering = false;
    if (b->gathered) return tr->dev.backend->dcomm_event_wait(b->gathered, err); /* a GPU: the compute waits */
    int done;
    TRY(ah_comm_coll_test(&b->gather, &done, err));
    if (!done) {
        if (in_phase) ah_emulator_catch_up(&tr->emu);
        TRY(ah_comm_coll_wait(&b->gather, err));
    }
    return AH_OK;
}

ah_status_t ah_dp_gather_weights(ah_trainer_t *tr, ah_error_t *err) {
    if (!tr->overlap) return ah_dp_gather_shards(tr, tr->stage.w, false, err);
    for (int i = tr->n_buckets - 1; i >= 0; i--) { /* in the forward's order: the embedding first */
        ah_dp_bucket_t *b = &tr->buckets[i];
        if (!b->parts) continue;
        ah_group_t *grp = ah_dp_group(tr, b->group);
        float *w = tr->stage.w + b->off;
        TRY(b->gathered ? ah_group_allgather(grp, w, b->parts, b->gathered, err)
                        : ah_comm_iallgather_f32(grp->c, w, b->parts, &b->gather, err));
        b->gathering = true;
    }
    return AH_OK;
}

ah_status_t ah_dp_on_weights(void *ctx, int event, ah_error_t *err) {
    ah_trainer_t *tr = ctx;
    for (int i = 0; i < tr->n_buckets; i++) {
        ah_dp_bucket_t *b = &tr->buckets[i];
        if (b->gathering && b->use_event == event) TRY(gather_done(tr, b, true, err));
    }
    return progress(tr, err);
}

ah_status_t ah_dp_gather_wait(ah_trainer_t *tr, ah_error_t *err) {
    for (int i = 0; i < tr->n_buckets; i++)
        if (tr->buckets[i].gathering) TRY(gather_done(tr, &tr->buckets[i], false, err));
    return AH_OK;
}
