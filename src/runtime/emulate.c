#include "runtime/emulate.h"

#include <math.h>
#include <stdlib.h>

#include "comm/comm.h"
#include "core/timing.h"

#define PROGRESS_S 100e-6 /* the sleep's slices between two calls of e->progress */

static void mark(ah_emulate_mark_t *m) {
    ah_comm_seconds(&m->comm_wall, &m->comm_cpu);
    m->wall = ah_now_s();
    m->cpu = ah_cpu_s();
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

ah_status_t ah_emulator_init(ah_emulator_t *e, double slowdown, ah_comm_t *group, int max_segments,
                             ah_error_t *err) {
    *e = (ah_emulator_t){.slowdown = slowdown, .group = group,
                         .max_segments = max_segments > 1 ? max_segments : 1};
    mark(&e->phase_start); /* so that clocks read before the first phase are sane */
    e->segment_start = e->phase_start;
    if (slowdown <= 1.0) return AH_OK; /* nothing to remember */
    e->history = calloc((size_t)AH_EMULATE_KINDS * (size_t)e->max_segments, sizeof *e->history);
    if (!e->history)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for device emulation's history (%d segments)",
                            e->max_segments);
    return AH_OK;
}

void ah_emulator_free(ah_emulator_t *e) {
    free(e->history);
    e->history = NULL;
}

void ah_emulator_begin(ah_emulator_t *e, ah_emulate_kind_t kind) {
    e->kind = kind;
    e->segment = 0;
    e->compute = 0;
    e->late = 0;
    mark(&e->phase_start);
    e->segment_start = e->phase_start;
}

/* The current segment's compute seconds so far (CPU outside communication, capped by the wall),
 * its wall seconds outside communication in *wall. */
static double segment_so_far(const ah_emulator_t *e, double *wall) {
    ah_emulate_mark_t now;
    mark(&now);
    const ah_emulate_mark_t *s = &e->segment_start;
    *wall = (now.wall - s->wall) - (now.comm_wall - s->comm_wall);
    const double cpu = (now.cpu - s->cpu) - (now.comm_cpu - s->comm_cpu);
    return fmax(0.0, fmin(*wall, cpu));
}

double ah_emulator_device_now(const ah_emulator_t *e) {
    if (e->slowdown <= 1.0) return ah_now_s();
    double wall;
    const double compute = segment_so_far(e, &wall);
    const double comm_wall = ah_now_s() - e->segment_start.wall - wall;
    return e->segment_start.wall - e->late + comm_wall + e->slowdown * compute;
}

/* Ends the current segment: adds its compute seconds to the phase's and, emulated, gives its
 * typical compute seconds and its wall seconds outside communication in typical_wall (left as it
 * is otherwise). */
static void end_segment(ah_emulator_t *e, double typical_wall[2]) {
    double wall;
    const double compute = segment_so_far(e, &wall);
    e->compute += compute;
    if (e->slowdown <= 1.0) return;
    const int seg = e->segment < e->max_segments ? e->segment : e->max_segments - 1;
    typical_wall[0] = history_typical(&e->history[e->kind * e->max_segments + seg], compute);
    typical_wall[1] = wall;
}

/* Sleeps rest seconds, progressing the transfers in flight (e->progress) every PROGRESS_S: a
 * collective's round waits about that for this rank. The slices are slept, off the core (only the
 * last AH_SLEEP_SPIN_S of the whole sleep spins, as ah_sleep_until does): each slice used to be an
 * ah_sleep_until of 100 us, which is all spin, so with transfers in flight (always, in training)
 * an emulated rank held a core for its whole stretch, and ranks outnumbering the cores (a CP 4
 * stage's 4 ranks on 2) waited for each other's spins at every exchange (docs/runtime.md "Device
 * emulation"). Returns the seconds slept. */
static double sleep_progressing(ah_emulator_t *e, double rest) {
    double slept = 0;
    if (rest > 0) {
        const double t = ah_now_s(), spin_from = t + rest - AH_SLEEP_SPIN_S;
        if (e->progress)
            for (double now = t; now < spin_from; now = ah_now_s()) {
                e->progress(e->progress_ctx);
                ah_sleep_s(fmin(PROGRESS_S, spin_from - now));
            }
        ah_sleep_until(t + rest);
        slept = ah_now_s() - t;
        e->slept += slept;
    }
    return slept;
}

/* Sleeps for the rest of slowdown x the typical seconds, less the wall seconds the segment
 * already spent and what the phase is late, then starts the next segment. */
static void stretch(ah_emulator_t *e, const double typical_wall[2]) {
    const double length = e->slowdown * typical_wall[0]; /* 0 when not emulated */
    const double slept = sleep_progressing(e, length - typical_wall[1] - e->late);
    if (e->slowdown > 1.0) e->late = fmax(0.0, e->late + typical_wall[1] + slept - length);
    e->segment++;
    mark(&e->segment_start);
}

void ah_emulator_catch_up(ah_emulator_t *e) {
    if (e->slowdown <= 1.0) return;
    double wall;
    const double compute = segment_so_far(e, &wall);
    sleep_progressing(e, e->slowdown * compute - wall - e->late);
}

void ah_emulator_split(ah_emulator_t *e) {
    double typical_wall[2] = {0, 0}; /* not emulated: no sleep */
    end_segment(e, typical_wall);
    stretch(e, typical_wall);
}

ah_status_t ah_emulator_end(ah_emulator_t *e, double *compute, ah_error_t *err) {
    double agreed[2] = {0, 0};
    end_segment(e, agreed);
    *compute = e->compute;
    /* A group leaves the all-reduce together; with the same typical compute and the same wall
     * seconds (the means) its members also end the phase together. */
    if (e->slowdown > 1.0 && e->group && ah_comm_size(e->group) > 1) {
        ah_status_t s = ah_comm_allreduce_f64(e->group, agreed, 2, err);
        if (s != AH_OK) return s;
        agreed[0] /= ah_comm_size(e->group);
        agreed[1] /= ah_comm_size(e->group);
    }
    stretch(e, agreed);
    return AH_OK;
}
