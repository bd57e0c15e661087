#include "runtime/emulate.h"

#include <errno.h>
#include <math.h>
#include <time.h>

#include "comm/comm.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ah_emulate_begin(ah_emulate_phase_t *ph) {
    ah_comm_seconds(&ph->comm_wall, &ph->comm_cpu);
    ph->wall = clock_s(CLOCK_MONOTONIC);
    ph->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

double ah_emulate_end(const ah_emulate_phase_t *ph, double slowdown) {
    ah_emulate_phase_t now;
    ah_emulate_begin(&now);
    const double wall = (now.wall - ph->wall) - (now.comm_wall - ph->comm_wall);
    const double cpu = (now.cpu - ph->cpu) - (now.comm_cpu - ph->comm_cpu);
    const double compute = fmax(0.0, fmin(wall, cpu));
    const double rest = slowdown * compute - wall;
    if (slowdown > 1.0 && rest > 0) {
        struct timespec ts = {(time_t)rest, (long)((rest - floor(rest)) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    }
    return compute;
}
