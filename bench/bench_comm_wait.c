/* What the comm module's sleeping wait (AH_COMM_WAIT_SLEEP, src/comm/comm.c) costs and gives
 * against MPI's polling wait (AH_COMM_WAIT_POLL), side by side in one run, modes alternating:
 *  - latency of a quiet exchange (both peers present, back to back): a ping-pong of one float
 *    and of one micro-batch's activation, and an all-reduce of that activation (the TP
 *    all-reduce);
 *  - a late peer: rank 1 joins an all-reduce `late` ms after rank 0; the overshoot is how long
 *    after rank 1's arrival rank 0 gets out (CLOCK_MONOTONIC is one clock for all ranks of a
 *    node), and rank 0's CPU seconds during the wait (what polling takes from other ranks).
 * Run with 2 ranks: mpirun -np 2 bench_comm_wait [floats (default 32768 = 128 x 256)] [reps]
 * Never run by CTest; never fails on a timing. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "comm/comm.h"
#include "core/timing.h"

static void check(ah_status_t s, const ah_error_t *err) {
    if (s == AH_OK) return;
    fprintf(stderr, "bench_comm_wait: %s\n", err->msg);
    ah_comm_abort(1);
}

/* Mean round trip of n floats between ranks 0 and 1, back to back after one barrier (both
 * ranks present: what a quick exchange costs). */
static double pingpong(ah_comm_t *w, float *buf, size_t n, int reps, ah_error_t *err) {
    const int me = ah_comm_rank(w);
    check(ah_comm_barrier(w, err), err);
    const double t0 = ah_now_s();
    for (int i = 0; i < reps; i++) {
        ah_comm_req_t r = {0};
        if (me == 0) {
            check(ah_comm_isend_f32(w, buf, n, 1, 1, &r, err), err);
            check(ah_comm_wait(&r, err), err);
            check(ah_comm_irecv_f32(w, buf, n, 1, 2, &r, err), err);
            check(ah_comm_wait(&r, err), err);
        } else {
            check(ah_comm_irecv_f32(w, buf, n, 0, 1, &r, err), err);
            check(ah_comm_wait(&r, err), err);
            check(ah_comm_isend_f32(w, buf, n, 0, 2, &r, err), err);
            check(ah_comm_wait(&r, err), err);
        }
    }
    return (ah_now_s() - t0) / reps;
}

/* Mean all-reduce of n floats, back to back after one barrier. */
static double allreduce(ah_comm_t *w, float *buf, size_t n, int reps, ah_error_t *err) {
    check(ah_comm_barrier(w, err), err);
    const double t0 = ah_now_s();
    for (int i = 0; i < reps; i++) check(ah_comm_allreduce_f32(w, buf, n, err), err);
    return (ah_now_s() - t0) / reps;
}

/* Rank 1 joins `late_s` after the barrier. Rank 0 gets the median overshoot (its exit minus
 * rank 1's arrival) and its CPU seconds per wait. */
static void late_peer(ah_comm_t *w, float *buf, size_t n, double late_s, int reps, double *t,
                      double *overshoot, double *cpu, ah_error_t *err) {
    const int me = ah_comm_rank(w);
    double cpu_sum = 0;
    for (int i = 0; i < reps; i++) {
        check(ah_comm_barrier(w, err), err);
        double arrive = 0;
        const double c0 = ah_cpu_s();
        if (me == 1) {
            struct timespec ts = {0, (long)(late_s * 1e9)};
            nanosleep(&ts, NULL);
            arrive = ah_now_s();
        }
        check(ah_comm_allreduce_f32(w, buf, n, err), err);
        const double out = ah_now_s();
        cpu_sum += ah_cpu_s() - c0;
        check(ah_comm_bcast(w, &arrive, sizeof arrive, 1, err), err);
        t[i] = out - arrive;
    }
    *overshoot = ah_median(t, reps);
    *cpu = cpu_sum / reps;
}

int main(int argc, char **argv) {
    ah_error_t err = {0};
    check(ah_comm_init(&argc, &argv, &err), &err);
    ah_comm_t *w = ah_comm_world();
    const size_t n = argc > 1 ? (size_t)atol(argv[1]) : 32768;
    const int reps = argc > 2 ? atoi(argv[2]) : 200;
    if (ah_comm_size(w) != 2 || n < 1 || reps < 1) {
        if (ah_comm_rank(w) == 0) fprintf(stderr, "usage: mpirun -np 2 bench_comm_wait [floats >= 1] [reps >= 1]\n");
        ah_comm_finalize();
        return 2;
    }
    float *buf = calloc(n, sizeof *buf);
    double *t = malloc((size_t)reps * sizeof *t);
    if (!buf || !t) {
        fprintf(stderr, "bench_comm_wait: out of memory\n");
        ah_comm_abort(1);
    }
    const ah_comm_wait_t modes[2] = {AH_COMM_WAIT_POLL, AH_COMM_WAIT_SLEEP};
    double pp1[2], ppn[2], ar[2], over[3][2], cpu[3][2];
    const double lates[3] = {0.0005, 0.002, 0.02};
    /* Alternate the modes so both see the same machine load. */
    for (int round = 0; round < 2; round++)
        for (int m = 0; m < 2; m++) {
            ah_comm_set_wait(modes[m]);
            pp1[m] = pingpong(w, buf, 1, reps, &err);
            ppn[m] = pingpong(w, buf, n, reps, &err);
            ar[m] = allreduce(w, buf, n, reps, &err);
            for (int l = 0; l < 3; l++)
                late_peer(w, buf, n, lates[l], reps / 10 + 1, t, &over[l][m], &cpu[l][m], &err);
        }
    if (ah_comm_rank(w) == 0) {
        printf("%-44s %12s %12s %8s\n", "seconds (2 ranks)", "poll", "sleep", "ratio");
        printf("%-44s %12.2e %12.2e %8.2f\n", "mean ping-pong, 1 float", pp1[0], pp1[1], pp1[1] / pp1[0]);
        printf("mean ping-pong, %-28zu %12.2e %12.2e %8.2f\n", n, ppn[0], ppn[1], ppn[1] / ppn[0]);
        printf("mean all-reduce, %-27zu %12.2e %12.2e %8.2f\n", n, ar[0], ar[1], ar[1] / ar[0]);
        for (int l = 0; l < 3; l++) {
            printf("peer %4.1f ms late: median overshoot %-10s %12.2e %12.2e %8.2f\n", lates[l] * 1e3, "",
                   over[l][0], over[l][1], over[l][1] / over[l][0]);
            printf("peer %4.1f ms late: waiter's CPU seconds %-8s %12.2e %12.2e %8.2f\n", lates[l] * 1e3,
                   "", cpu[l][0], cpu[l][1], cpu[l][1] / cpu[l][0]);
        }
    }
    free(buf);
    free(t);
    ah_comm_finalize();
    return 0;
}
