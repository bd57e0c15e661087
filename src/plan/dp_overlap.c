/* The overlapped DP sync's exposed part: plan/dp_overlap.h. */
#include "plan/dp_overlap.h"

#include <math.h>

/* Runs the collective of d seconds ready `ready` before the backward's end on a device whose
 * previous collective ends at *t (relative to the end; -inf: none yet). */
static void queue(double *t, double ready, double d) {
    if (d <= 0) return;
    const double start = fmax(-ready, *t);
    *t = start + d;
}

double ah_dp_exposed_s(const ah_sync_stage_t *st, int n, int n_layer, double *work) {
    /* work[l]: how long before the end every holder of block l has its gradient final — the least,
     * over the holders, backward still to run below l in the holder's stage (its blocks under l;
     * the embedding's backward is not counted); work[n_layer]: the same for the last stages' head. */
    for (int l = 0; l <= n_layer; l++) work[l] = INFINITY;
    for (int i = 0; i < n; i++) {
        for (int l = st[i].first; l < st[i].last; l++) work[l] = fmin(work[l], (l - st[i].first) * st[i].blk_bwd_s);
        if (st[i].head) work[n_layer] = fmin(work[n_layer], (st[i].last - st[i].first) * st[i].blk_bwd_s);
    }
    double exposed = 0;
    double t = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (!st[i].chain) t = -INFINITY;
        const int nb = st[i].last - st[i].first;
        if (st[i].head) queue(&t, work[n_layer], st[i].head_s - st[i].head_ag_s);
        for (int l = st[i].last - 1; l >= st[i].first; l--) queue(&t, work[l], (st[i].blocks_s - st[i].blocks_ag_s) / nb);
        queue(&t, 0, st[i].end_s - st[i].end_ag_s);
        exposed = fmax(exposed, t);
    }
    return exposed;
}

/* The forward part nominally at `at` (on the device's unstalled timeline) waits for its all-gather,
 * queued behind *t (the device's gathers so far, from the optimizer's end) for d seconds; *delay:
 * how far the device's forward is behind its nominal timeline so far. */
static void gather_wait(double *t, double *delay, double at, double d) {
    *t += d;
    *delay = fmax(*delay, *t - at);
}

double ah_dp_gather_exposed_s(const ah_sync_stage_t *st, int n) {
    double exposed = 0;
    for (int j = 0; j < n; j++) {
        if (j + 1 < n && st[j + 1].chain) continue; /* a device's chain: entries i .. j, chunk 0 at j */
        int i = j;
        while (i > 0 && st[i].chain) i--;
        double t = 0, delay = 0;
        for (int e = j; e >= i; e--) { /* the forward's order: chunk 0 first */
            const ah_sync_stage_t *x = &st[e];
            const int nb = x->last - x->first;
            const bool embed = x->first == 0; /* the stage with block 0 holds the embedding */
            if (embed) gather_wait(&t, &delay, x->fwd_start_s, x->end_ag_s);
            for (int l = 0; l < nb; l++) gather_wait(&t, &delay, x->fwd_start_s + l * x->blk_fwd_s, x->blocks_ag_s / nb);
            if (x->head) gather_wait(&t, &delay, x->fwd_start_s + nb * x->blk_fwd_s, x->head_ag_s + (embed ? 0 : x->end_ag_s));
        }
        exposed = fmax(exposed, delay);
    }
    return exposed;
}
