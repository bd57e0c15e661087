#include "runtime/schedule.h"

int64_t ah_sched_slots(int S, int s, int64_t n) {
    int64_t k = (int64_t)S - s;
    return k < n ? k : n;
}

void ah_sched_1f1b(int S, int s, int64_t n, ah_sched_op_t *ops) {
    const int64_t slots = ah_sched_slots(S, s, n);
    int64_t w = (int64_t)S - s - 1;
    if (w > n) w = n;
    int64_t k = 0;
    for (int64_t j = 0; j < w; j++) ops[k++] = (ah_sched_op_t){AH_OP_FWD, j, j % slots};
    for (int64_t i = 0; i < n - w; i++) {
        ops[k++] = (ah_sched_op_t){AH_OP_FWD, w + i, (w + i) % slots};
        ops[k++] = (ah_sched_op_t){AH_OP_BWD, i, i % slots};
    }
    for (int64_t j = n - w; j < n; j++) ops[k++] = (ah_sched_op_t){AH_OP_BWD, j, j % slots};
}
