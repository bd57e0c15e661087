/* A device's schedule: plan/replay.h's order, with its slots and W sets (schedule.h). */
#include "runtime/schedule.h"

#include <stdlib.h>

/* The lowest free entry of used[0 .. cap), taken; *count grows to cover it. */
static int64_t take(bool *used, int64_t *count) {
    int64_t k = 0;
    while (used[k]) k++;
    used[k] = true;
    if (k + 1 > *count) *count = k + 1;
    return k;
}

bool ah_sched_build(ah_schedule_t sched, int S, int P, int d, int64_t n, const int *extra, ah_sched_op_t *ops,
                    int64_t *slots, int64_t *wsets) {
    const int64_t count = ah_sched_ops_per_device(sched, S, P, n);
    const int v = S / P;
    const size_t cells = (size_t)v * (size_t)n; /* per chunk, per micro-batch */
    const bool split = sched == AH_SCHED_ZERO_BUBBLE;
    ah_op_t *order = malloc((size_t)count * sizeof *order);
    int64_t *slot_of = malloc(cells * sizeof *slot_of), *wset_of = malloc((size_t)n * sizeof *wset_of);
    bool *slot_used = calloc(cells, sizeof *slot_used), *wset_used = calloc((size_t)n, sizeof *wset_used);
    bool *final_seen = calloc((size_t)v, sizeof *final_seen);
    const bool ok = order && slot_of && wset_of && slot_used && wset_used && final_seen;
    *wsets = 0;
    for (int c = 0; c < v; c++) slots[c] = 0;
    if (ok) ah_sched_order_warm(sched, S, P, n, d, extra, order);
    for (int64_t k = 0; ok && k < count; k++) {
        const int64_t j = order[k].mb;
        const int c = order[k].stage / P;
        bool *used = slot_used + (size_t)c * (size_t)n;
        int64_t *slot = slot_of + (size_t)c * (size_t)n;
        ah_sched_op_t *op = &ops[k];
        *op = (ah_sched_op_t){(ah_op_kind_t)order[k].kind, j, 0, -1, c, false};
        if (op->kind == AH_OP_F) slot[j] = take(used, &slots[c]);
        if (op->kind == AH_OP_B && split) wset_of[j] = take(wset_used, wsets);
        op->slot = slot[j];
        if (split && op->kind != AH_OP_F) op->wset = wset_of[j];
        if (op->kind == (split ? AH_OP_W : AH_OP_B)) used[slot[j]] = false;
        if (op->kind == AH_OP_W) wset_used[wset_of[j]] = false;
    }
    for (int64_t k = 0; ok && k < count; k++) /* the stage's slot: its chunk's, after the earlier chunks' */
        for (int c = 0; c < ops[k].chunk; c++) ops[k].slot += slots[c];
    /* each chunk's last op that ends a backward: walking back, the first of its chunk */
    for (int64_t k = count - 1; ok && k >= 0; k--)
        if (ops[k].kind == (split ? AH_OP_W : AH_OP_B) && !final_seen[ops[k].chunk])
            ops[k].grads_final = final_seen[ops[k].chunk] = true;
    free(order);
    free(slot_of);
    free(wset_of);
    free(slot_used);
    free(wset_used);
    free(final_seen);
    return ok;
}
