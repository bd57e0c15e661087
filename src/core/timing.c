#include "core/timing.h"
#include "core/vec.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double ah_now_s(void) { return clock_s(CLOCK_MONOTONIC); }

double ah_cpu_s(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

void ah_sleep_s(double seconds) {
    static _Thread_local bool slack_set = false;
    if (!slack_set) {
        prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* a hint: no error worth reporting */
        slack_set = true;
    }
    if (!(seconds > 0)) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

void ah_sleep_until(double deadline) {
    ah_sleep_s(deadline - AH_SLEEP_SPIN_S - ah_now_s());
    while (ah_now_s() < deadline) {}
}

double ah_median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, ah_cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}
