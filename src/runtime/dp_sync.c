/* The layer-wise DP gradient sync of a rank, in buckets, overlapped with the backward or not:
 * runtime/dp_groups.h (ah_dp_plan_buckets, ah_dp_on_grads, ah_dp_sync); docs/runtime.md
 * "Overlapped gradient sync". */
#include <stdlib.h>

#include "runtime/dp_groups.h"

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
    const int members = ah_comm_size(ah_dp_group(tr, id)->c);
    for (int64_t at = off; at < off + n; at += BUCKET_MAX) {
        ah_dp_bucket_t *b = &tr->buckets[tr->n_buckets++];
        const int64_t len = off + n - at < BUCKET_MAX ? off + n - at : BUCKET_MAX;
        *b = (ah_dp_bucket_t){.group = id, .event = event, .off = at, .n = len};
        if (!sh->counts) continue;
        if (!(b->counts = malloc((size_t)members * sizeof *b->counts)))
            return ah_error_set(err, AH_ERR_OOM, "no host memory for the gradient sync's buckets");
        int64_t part = sh->off; /* parts are contiguous, in part order, from the group's start */
        for (int k = 0; k < members; k++) {
            const int64_t lo = part > at ? part : at, hi = part + sh->counts[k] < at + len ? part + sh->counts[k] : at + len;
            b->counts[k] = hi > lo ? hi - lo : 0;
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

void ah_dp_progress(ah_trainer_t *tr) {
    for (int i = 0; i < tr->n_buckets; i++)
        if (tr->buckets[i].started) ah_comm_coll_test(&tr->buckets[i].coll, NULL, NULL);
}

ah_status_t ah_dp_plan_buckets(ah_trainer_t *tr, ah_error_t *err) {
    if (tr->dev.backend->gpu) return AH_OK; /* the device communicators: group by group, blocking */
    const int n_ids = ah_dp_group_count(tr);
    int64_t cap = 0;
    for (int id = 0; id < n_ids; id++) {
        const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
        if (ah_dp_group(tr, id)->c && sh->n > 0)
            cap += id < tr->layout.n_segments ? sh->n / BUCKET_MAX + tr->layout.segments[id].last - tr->layout.segments[id].first
                                              : sh->n / BUCKET_MAX + 1;
    }
    if (!(tr->buckets = calloc((size_t)cap + 1, sizeof *tr->buckets)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the gradient sync's buckets");
    for (int id = 0; id < n_ids; id++)
        if (ah_dp_group(tr, id)->c && ah_dp_shard(tr, id)->n > 0) TRY(group_buckets(tr, id, err));
    qsort(tr->buckets, (size_t)tr->n_buckets, sizeof *tr->buckets, by_event);
    /* without a bucket (no data parallelism) there is nothing to overlap: no hook, and device
     * emulation sleeps in one piece, not in 100 us slices that progress nothing */
    tr->overlap = !tr->opts.no_overlap_grad_sync && tr->n_buckets > 0;
    if (tr->overlap) {
        tr->stage.on_grads = ah_dp_on_grads;
        tr->stage.on_grads_ctx = tr;
    }
    return AH_OK;
}

void ah_dp_free_buckets(ah_trainer_t *tr) {
    for (int i = 0; tr->buckets && i < tr->n_buckets; i++) {
        free(tr->buckets[i].counts);
        ah_comm_coll_free(&tr->buckets[i].coll);
    }
    free(tr->buckets);
    tr->buckets = NULL;
    tr->n_buckets = 0;
}

static ah_status_t start(ah_trainer_t *tr, ah_dp_bucket_t *b, ah_error_t *err) {
    ah_comm_t *c = ah_dp_group(tr, b->group)->c;
    float *g = tr->stage.g + b->off;
    b->started = true;
    return b->counts ? ah_comm_ireduce_scatter_f32(c, g, b->counts, &b->coll, err)
                     : ah_comm_iallreduce_f32(c, g, (size_t)b->n, &b->coll, err);
}

ah_status_t ah_dp_on_grads(void *ctx, int event, ah_error_t *err) {
    ah_trainer_t *tr = ctx;
    if (tr->emu.slowdown > 1.0) ah_emulator_split(&tr->emu);
    if (!tr->last_bwd) return AH_OK;
    for (int i = 0; i < tr->n_buckets; i++) {
        ah_dp_bucket_t *b = &tr->buckets[i];
        if (b->event == event && !b->started) TRY(start(tr, b, err));
        else if (b->started) TRY(ah_comm_coll_test(&b->coll, NULL, err));
    }
    return AH_OK;
}

/* Without buckets (a GPU rank): each group at once through its device communicator, in the global
 * group order (segments by layer, then the first-stage, last-stage and tied groups). */
static ah_status_t sync_groups(ah_trainer_t *tr, ah_error_t *err) {
    float *g = tr->stage.g;
    for (int id = 0; id < ah_dp_group_count(tr); id++) {
        ah_group_t *grp = ah_dp_group(tr, id);
        const ah_dp_shard_t *sh = ah_dp_shard(tr, id);
        if (!grp->c || sh->n == 0) continue;
        if (sh->counts) TRY(ah_group_reduce_scatter(grp, g + sh->off, sh->counts, err));
        else TRY(ah_group_sum(grp, g + sh->off, (size_t)sh->n, err));
    }
    return AH_OK;
}

ah_status_t ah_dp_sync(ah_trainer_t *tr, ah_error_t *err) {
    if (!tr->buckets) return sync_groups(tr, err);
    if (tr->overlap) { /* what the backward did not start (none, in 1F1B), then the waits */
        for (int i = 0; i < tr->n_buckets; i++)
            if (!tr->buckets[i].started) TRY(start(tr, &tr->buckets[i], err));
    } else { /* one group at a time, in the global order, so no two ranks wait in different ones */
        for (int id = 0; id < ah_dp_group_count(tr); id++)
            for (int i = 0; i < tr->n_buckets; i++)
                if (tr->buckets[i].group == id) {
                    TRY(start(tr, &tr->buckets[i], err));
                    TRY(ah_comm_coll_wait(&tr->buckets[i].coll, err));
                }
    }
    for (int i = 0; i < tr->n_buckets; i++) {
        TRY(ah_comm_coll_wait(&tr->buckets[i].coll, err));
        tr->buckets[i].started = false;
    }
    return AH_OK;
}
