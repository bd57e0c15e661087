/* A stage's schedule: plan/replay.h's order, with its slots and W sets (schedule.h). */
#include "runtime/schedule.h"

#include <stdlib.h>

int64_t ah_sched_op_count(ah_schedule_t sched, int S, int64_t n) { return ah_sched_ops_per_device(sched, S, S, n); }

/* The lowest free entry of used[0 .. cap), taken; *count grows to cover it. */
static int64_t take(bool *used, int64_t *count) {
    int64_t k = 0;
    while (used[k]) k++;
    used[k] = true;
    if (k + 1 > *count) *count = k + 1;
    return k;
}

bool ah_sched_build(ah_schedule_t sched, int S, int s, int64_t n, ah_sched_op_t *ops, int64_t *slots,
                    int64_t *wsets) {
    const int64_t count = ah_sched_op_count(sched, S, n);
    const bool split = sched == AH_SCHED_ZERO_BUBBLE;
    ah_op_t *order = malloc((size_t)count * sizeof *order);
    int64_t *slot_of = malloc((size_t)n * sizeof *slot_of), *wset_of = malloc((size_t)n * sizeof *wset_of);
    bool *slot_used = calloc((size_t)n, sizeof *slot_used), *wset_used = calloc((size_t)n, sizeof *wset_used);
    const bool ok = order && slot_of && wset_of && slot_used && wset_used;
    *slots = *wsets = 0;
    if (ok) ah_sched_order(sched, S, S, n, s, order);
    for (int64_t k = 0; ok && k < count; k++) {
        const int64_t j = order[k].mb;
        ah_sched_op_t *op = &ops[k];
        *op = (ah_sched_op_t){(ah_op_kind_t)order[k].kind, j, 0, -1};
        if (op->kind == AH_OP_F) slot_of[j] = take(slot_used, slots);
        if (op->kind == AH_OP_B && split) wset_of[j] = take(wset_used, wsets);
        op->slot = slot_of[j];
        if (split && op->kind != AH_OP_F) op->wset = wset_of[j];
        if (op->kind == (split ? AH_OP_W : AH_OP_B)) slot_used[slot_of[j]] = false;
        if (op->kind == AH_OP_W) wset_used[wset_of[j]] = false;
    }
    free(order);
    free(slot_of);
    free(wset_of);
    free(slot_used);
    free(wset_used);
    return ok;
}
