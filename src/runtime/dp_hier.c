/* The hierarchical gradient sync of a DP group across regions or zones: runtime/dp_hier.h. */
#include "runtime/dp_hier.h"

#include <stdio.h>
#include <stdlib.h>

#include "runtime/dp_groups.h"
#include "runtime/layout.h"

#define TRY(call)                   \
    do {                            \
        ah_status_t s_ = (call);    \
        if (s_ != AH_OK) return s_; \
    } while (0)

enum { PHASE_SCATTER = 1, PHASE_CROSS = 2, PHASE_GATHER = 3, PHASE_DONE = 4 };

/* Each member's domain (group rank order) from the members' nodes: k, the count. */
static ah_status_t member_domains(ah_trainer_t *tr, ah_comm_t *c, int *domain, int *k, ah_error_t *err) {
    const int n = ah_comm_size(c);
    int64_t *nodes64 = malloc((size_t)n * sizeof *nodes64);
    int *nodes = malloc((size_t)n * sizeof *nodes);
    ah_status_t s = nodes64 && nodes ? ah_comm_allgather_i64(c, ah_role_device(tr->plan, &tr->role).node, nodes64, err)
                                     : ah_error_set(err, AH_ERR_OOM, "no host memory for a DP group's %d nodes", n);
    for (int m = 0; s == AH_OK && m < n; m++) nodes[m] = (int)nodes64[m];
    if (s == AH_OK) *k = ah_cluster_domains(&tr->plan->cluster, nodes, n, domain);
    free(nodes64);
    free(nodes);
    return s;
}

/* The domains' splits of the group c: the two domain communicators, then one per piece. */
static ah_status_t split_domains(ah_comm_t *c, int my_domain, ah_dp_hier_t *h, ah_error_t *err) {
    const int me = ah_comm_rank(c);
    TRY(ah_comm_split(c, my_domain, me, &h->rs.c, err));
    TRY(ah_comm_split(c, my_domain, me, &h->ag.c, err));
    if (!(h->cross = calloc((size_t)(h->piece1 - h->piece0), sizeof *h->cross)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the hierarchical sync's %d pieces", h->pieces);
    for (int q = 0; q < h->pieces; q++) {
        const bool holds = q >= h->piece0 && q < h->piece1;
        ah_comm_t *piece = NULL;
        TRY(ah_comm_split(c, holds ? 0 : -1, my_domain, &piece, err));
        if (holds) h->cross[q - h->piece0].c = piece;
    }
    return AH_OK;
}

ah_status_t ah_dp_hier_open(ah_trainer_t *tr, int id, ah_dp_hier_t **out, ah_error_t *err) {
    ah_comm_t *c = ah_dp_group(tr, id)->c;
    const int n = ah_comm_size(c), me = ah_comm_rank(c);
    *out = NULL;
    int *domain = malloc((size_t)n * sizeof *domain), k = 1;
    ah_status_t s = domain ? member_domains(tr, c, domain, &k, err)
                           : ah_error_set(err, AH_ERR_OOM, "no host memory for a DP group's %d domains", n);
    if (s != AH_OK || k < 2) {
        free(domain);
        return s;
    }
    ah_dp_hier_t *h = calloc(1, sizeof *h);
    if (!h) {
        free(domain);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for a hierarchical sync");
    }
    h->domains = k;
    for (int d = 0; d < k; d++) { /* P: the largest domain */
        int r = 0;
        for (int m = 0; m < n; m++) r += domain[m] == d;
        if (r > h->pieces) h->pieces = r;
    }
    for (int m = 0; m < n; m++) {
        if (domain[m] != domain[me]) continue;
        h->member += m < me;
        h->members++;
    }
    h->piece0 = h->member * h->pieces / h->members;
    h->piece1 = (h->member + 1) * h->pieces / h->members;
    s = split_domains(c, domain[me], h, err);
    free(domain);
    if (s != AH_OK) ah_dp_hier_close(&h);
    *out = h;
    return s;
}

void ah_dp_hier_close(ah_dp_hier_t **hp) {
    ah_dp_hier_t *h = *hp;
    if (!h) return;
    ah_group_free(&h->rs);
    ah_group_free(&h->ag);
    for (int q = 0; h->cross && q < h->piece1 - h->piece0; q++) ah_group_free(&h->cross[q]);
    free(h->cross);
    free(h);
    *hp = NULL;
}

bool ah_dp_hier_describe(const ah_trainer_t *tr, char *buf, size_t cap) {
    int hier = 0, groups = 0, domains = 0;
    for (int id = 0; id < ah_dp_group_count(tr); id++) {
        if (!ah_dp_group((ah_trainer_t *)tr, id)->c) continue;
        groups++;
        if (!tr->hier[id]) continue;
        hier++;
        if (tr->hier[id]->domains > domains) domains = tr->hier[id]->domains;
    }
    snprintf(buf, cap, "hierarchical in %d of this rank's %d DP groups, across up to %d regions or zones (the "
             "others inside one zone: a ring)", hier, groups, domains);
    return hier > 0;
}

/* Piece q's first float in a bucket of n. */
static int64_t piece_at(const ah_dp_hier_t *h, int64_t n, int q) { return n * q / h->pieces; }

/* Per member of this rank's domain, the length of its pieces of a span of n floats (counts: room
 * for h->members), as one part of the domain's reduce-scatter. */
static void member_counts(const ah_dp_hier_t *h, int64_t n, int64_t *counts) {
    for (int j = 0; j < h->members; j++)
        counts[j] = piece_at(h, n, (j + 1) * h->pieces / h->members) - piece_at(h, n, j * h->pieces / h->members);
}

ah_status_t ah_dp_hier_attach(const ah_device_t *d, ah_dp_hier_t *h, ah_error_t *err) {
    TRY(ah_group_attach(d, &h->rs, err));
    TRY(ah_group_attach(d, &h->ag, err));
    for (int q = 0; q < h->piece1 - h->piece0; q++) TRY(ah_group_attach(d, &h->cross[q], err));
    return AH_OK;
}

ah_status_t ah_dp_hier_sum(ah_dp_hier_t *h, float *buf, int64_t n, ah_dcomm_event_t *done, ah_error_t *err) {
    int64_t *counts = malloc((size_t)h->members * sizeof *counts);
    if (!counts) return ah_error_set(err, AH_ERR_OOM, "no host memory for the hierarchical sync's counts");
    member_counts(h, n, counts);
    ah_status_t s = ah_group_reduce_scatter(&h->rs, buf, counts, done, err);
    for (int q = h->piece0; q < h->piece1 && s == AH_OK; q++)
        s = ah_group_sum(&h->cross[q - h->piece0], buf + piece_at(h, n, q),
                         (size_t)(piece_at(h, n, q + 1) - piece_at(h, n, q)), done, err);
    if (s == AH_OK) s = ah_group_allgather(&h->ag, buf, counts, done, err); /* done's last record */
    free(counts);
    return s;
}

ah_status_t ah_dp_hier_bucket(const ah_dp_hier_t *h, ah_dp_bucket_t *b, ah_error_t *err) {
    b->hier = h;
    b->counts = malloc((size_t)h->members * sizeof *b->counts);
    b->cross = calloc((size_t)(h->piece1 - h->piece0), sizeof *b->cross);
    if (!b->counts || !b->cross)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the hierarchical sync's buckets");
    member_counts(h, b->n, b->counts);
    return AH_OK;
}

void ah_dp_hier_bucket_free(ah_dp_bucket_t *b) {
    for (int q = 0; b->cross && q < b->hier->piece1 - b->hier->piece0; q++) ah_comm_coll_free(&b->cross[q]);
    free(b->cross);
    b->cross = NULL;
}

ah_status_t ah_dp_hier_start(ah_dp_bucket_t *b, float *g, ah_error_t *err) {
    b->phase = PHASE_SCATTER;
    return ah_comm_ireduce_scatter_f32(b->hier->rs.c, g + b->off, b->counts, &b->coll, err);
}

/* Whether coll is complete (waited for when wait). */
static ah_status_t complete(ah_comm_coll_t *coll, bool wait, int *done, ah_error_t *err) {
    *done = 1;
    return wait ? ah_comm_coll_wait(coll, err) : ah_comm_coll_test(coll, done, err);
}

ah_status_t ah_dp_hier_advance(ah_dp_bucket_t *b, float *g, int cap, bool wait, ah_error_t *err) {
    const ah_dp_hier_t *h = b->hier;
    float *x = g + b->off;
    int done = 1;
    if (b->phase == PHASE_SCATTER) {
        TRY(complete(&b->coll, wait, &done, err));
        if (!done || cap < PHASE_CROSS) return AH_OK;
        for (int q = h->piece0; q < h->piece1; q++) {
            const int64_t at = piece_at(h, b->n, q);
            TRY(ah_comm_iallreduce_f32(h->cross[q - h->piece0].c, x + at, (size_t)(piece_at(h, b->n, q + 1) - at),
                                       &b->cross[q - h->piece0], err));
        }
        b->phase = PHASE_CROSS;
    }
    if (b->phase == PHASE_CROSS) {
        for (int q = 0; q < h->piece1 - h->piece0 && done; q++) TRY(complete(&b->cross[q], wait, &done, err));
        if (!done || cap < PHASE_GATHER) return AH_OK;
        TRY(ah_comm_iallgather_f32(h->ag.c, x, b->counts, &b->coll, err));
        b->phase = PHASE_GATHER;
    }
    if (b->phase == PHASE_GATHER) {
        TRY(complete(&b->coll, wait, &done, err));
        if (done) b->phase = PHASE_DONE;
    }
    return AH_OK;
}
