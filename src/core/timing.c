#include "core/timing.h"
#include "core/vec.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
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

/* The threads marked as background: their CPU clocks and their CPU seconds when marked; the CPU
 * seconds the ended ones used while marked. */
static pthread_mutex_t g_bg_mu = PTHREAD_MUTEX_INITIALIZER;
static clockid_t g_bg_clock[AH_CPU_BACKGROUND_MAX];
static double g_bg_base[AH_CPU_BACKGROUND_MAX];
static int g_bg_n;
static double g_bg_ended;

double ah_cpu_s(void) {
    pthread_mutex_lock(&g_bg_mu);
    double background = g_bg_ended;
    for (int i = 0; i < g_bg_n; i++) background += clock_s(g_bg_clock[i]) - g_bg_base[i];
    const double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - background; /* read last: never below */
    pthread_mutex_unlock(&g_bg_mu);
    return cpu;
}

double ah_cpu_thread_s(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

void ah_cpu_background_begin(void) {
    clockid_t id;
    if (pthread_getcpuclockid(pthread_self(), &id) != 0) return;
    pthread_mutex_lock(&g_bg_mu);
    if (g_bg_n < AH_CPU_BACKGROUND_MAX) {
        g_bg_clock[g_bg_n] = id;
        g_bg_base[g_bg_n++] = clock_s(id);
    }
    pthread_mutex_unlock(&g_bg_mu);
}

void ah_cpu_background_end(void) {
    clockid_t id;
    if (pthread_getcpuclockid(pthread_self(), &id) != 0) return;
    pthread_mutex_lock(&g_bg_mu);
    for (int i = 0; i < g_bg_n; i++)
        if (g_bg_clock[i] == id) {
            g_bg_ended += clock_s(id) - g_bg_base[i];
            g_bg_n--;
            g_bg_clock[i] = g_bg_clock[g_bg_n];
            g_bg_base[i] = g_bg_base[g_bg_n];
            break;
        }
    pthread_mutex_unlock(&g_bg_mu);
}

void ah_cpu_background_add(double seconds) {
    pthread_mutex_lock(&g_bg_mu);
    g_bg_ended += seconds;
    pthread_mutex_unlock(&g_bg_mu);
}

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
