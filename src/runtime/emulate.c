#include "runtime/emulate.h"

#include <math.h>

#include "comm/comm.h"
#include "core/timing.h"

void ah_emulate_begin(ah_emulate_phase_t *ph) {
    ah_comm_seconds(&ph->comm_wall, &ph->comm_cpu);
    ph->wall = ah_now_s();
    ph->cpu = ah_cpu_s();
}

/* Adds x to h and returns the lower quartile of what h holds: the smallest of up to 4 values,
 * the second smallest of 5 to 7 (runtime/emulate.h says why not the median). */
static double history_typical(ah_emulate_history_t *h, double x) {
    h->seconds[h->next] = x;
    h->next = (h->next + 1) % AH_EMULATE_HISTORY;
    if (h->n < AH_EMULATE_HISTORY) h->n++;
    double v[AH_EMULATE_HISTORY];
    for (int i = 0; i < h->n; i++) { /* insertion sort of at most 7 values */
        int j = i;
        for (; j > 0 && v[j - 1] > h->seconds[i]; j--) v[j] = v[j - 1];
        v[j] = h->seconds[i];
    }
    return v[(h->n - 1) / 4];
}

ah_status_t ah_emulate_end(const ah_emulate_phase_t *ph, double slowdown, ah_comm_t *group,
                           ah_emulate_history_t *kind, double *compute, ah_error_t *err) {
    ah_emulate_phase_t now;
    ah_emulate_begin(&now);
    const double wall = (now.wall - ph->wall) - (now.comm_wall - ph->comm_wall);
    const double cpu = (now.cpu - ph->cpu) - (now.comm_cpu - ph->comm_cpu);
    *compute = fmax(0.0, fmin(wall, cpu));
    if (slowdown <= 1.0) return AH_OK;
    /* A group leaves the all-reduce together; with the same typical compute and the same wall
     * seconds (the means) its members also end the phase together. */
    double agreed[2] = {history_typical(kind, *compute), wall};
    if (group && ah_comm_size(group) > 1) {
        ah_status_t s = ah_comm_allreduce_f64(group, agreed, 2, err);
        if (s != AH_OK) return s;
        agreed[0] /= ah_comm_size(group);
        agreed[1] /= ah_comm_size(group);
    }
    const double rest = slowdown * agreed[0] - agreed[1];
    if (rest > 0) ah_sleep_until(ah_now_s() + rest);
    return AH_OK;
}
