#include "runtime/emulate.h"

#include <errno.h>
#include <math.h>
#include <time.h>

void ah_emulate_stretch(double slowdown, double dt) {
    if (slowdown <= 1.0 || dt <= 0) return;
    const double extra = (slowdown - 1.0) * dt;
    struct timespec ts = {(time_t)extra, (long)((extra - floor(extra)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}
