/* Retention in the cloud tier (ckpt_session.h, ah_ckpt_cloud_retain): --keep N keeps the N newest
 * steps complete in the cloud, as each node's disk keeps its N newest committed steps.
 *
 * A step is complete in the cloud when every uploading node finished it (a node's uploader may skip
 * a step another finished: a newer job replaces a waiting one). Every rank gives the steps its
 * node's uploader finished (node leaders that upload; the others give none), the complete ones are
 * those every uploading node finished, and when there are N of them, each uploading node's uploader
 * removes its own objects of the steps before the N-th newest (manifest first, then its files;
 * ckpt/cloud.h ah_ckpt_cloud_prune), on its thread, after the uploads queued. Only steps this run's
 * uploaders finished count (the last AH_CKPT_UPLOAD_HISTORY of them): an earlier run's steps, older,
 * go once this run has N complete ones; a --keep above AH_CKPT_UPLOAD_HISTORY removes nothing. The
 * node's disk is collected again here too: a save's retention keeps the step an upload still reads,
 * which the next check (at the next save, or at the end once the uploads are done) removes. */
#include <stdlib.h>
#include <string.h>

#include "comm/transfer.h"
#include "runtime/ckpt_session.h"

typedef struct {
    int32_t uploads, n;
    int64_t steps[AH_CKPT_UPLOAD_HISTORY];
} done_rec_t;

static int cmp_desc(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static bool holds(const done_rec_t *r, int64_t step) {
    for (int i = 0; i < r->n; i++)
        if (r->steps[i] == step) return true;
    return false;
}

/* The N-th newest step every uploading rank of recs finished, -1 when fewer than N are. */
static int64_t nth_complete(const done_rec_t *recs, int n_ranks, int keep) {
    int first = -1;
    for (int i = 0; i < n_ranks && first < 0; i++)
        if (recs[i].uploads) first = i;
    if (first < 0) return -1;
    int64_t cand[AH_CKPT_UPLOAD_HISTORY];
    int nc = 0;
    for (int k = 0; k < recs[first].n; k++) {
        bool all = true;
        for (int i = first + 1; i < n_ranks && all; i++) all = !recs[i].uploads || holds(&recs[i], recs[first].steps[k]);
        if (all) cand[nc++] = recs[first].steps[k];
    }
    if (nc < keep) return -1;
    qsort(cand, (size_t)nc, sizeof *cand, cmp_desc);
    return cand[keep - 1];
}

ah_status_t ah_ckpt_cloud_retain(ah_ckpt_session_t *s, ah_error_t *err) {
    ah_comm_t *world = ah_comm_world();
    done_rec_t me;
    memset(&me, 0, sizeof me);
    me.uploads = s->up && s->cloud_share > 0;
    if (me.uploads) me.n = ah_ckpt_uploader_done(s->up, me.steps, AH_CKPT_UPLOAD_HISTORY);
    const int n = ah_comm_size(world);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    char *all = NULL;
    ah_status_t st = lens ? ah_comm_allgather_bytes(world, &me, sizeof me, &all, lens, err)
                          : ah_error_set(err, AH_ERR_OOM, "no host memory for the cloud's retention");
    if (st == AH_OK && me.uploads) {
        const int64_t below = nth_complete((const done_rec_t *)all, n, s->o.keep);
        if (below > 0) ah_ckpt_uploader_prune(s->up, s->tr->plan->cluster.nodes[s->my_node].name, below);
    }
    /* the disk's too, for a step the save's retention kept while it was being uploaded (best effort) */
    if (st == AH_OK && s->o.local_root) ah_ckpt_retain_disk(s);
    free(all);
    free(lens);
    return st;
}

void ah_ckpt_retain_disk(ah_ckpt_session_t *s) {
    if (s->node_rank != 0) return;
    const int64_t pinned = s->up ? ah_ckpt_uploader_busy_step(s->up) : -1;
    ah_error_t ge;
    if (s->writer) ah_ckpt_async_retain(s->writer, s->node_root, s->o.keep, pinned);
    else (void)ah_ckpt_gc_pinned(s->node_root, s->o.keep, pinned, NULL, &ge);
}
