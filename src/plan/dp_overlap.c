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
        if (st[i].head) queue(&t, work[n_layer], st[i].head_s);
        for (int l = st[i].last - 1; l >= st[i].first; l--) queue(&t, work[l], st[i].blocks_s / nb);
        queue(&t, 0, st[i].end_s);
        exposed = fmax(exposed, t);
    }
    return exposed;
}
