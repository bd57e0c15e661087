/* The CUDA backend's asynchronous checkpoint snapshot (backend.h snap_*, src/backend/cuda_snapshot.c):
 * page-locked host memory, the copies on a side stream after an event on the compute stream, the
 * host's wait for them (on another thread, as the background writer waits) and the compute
 * stream's (the next AdamW's, the fence).
 *  1. A kernel adds 1 to the buffer and the snapshot copies it, with no host synchronisation in
 *     between: the snapshot holds what the kernel wrote (the side stream waited for the compute).
 *  2. A second snapshot, then the fence and a kernel adding 1 again on the compute stream, then a
 *     blocking download on the compute stream (which runs it and what it waits for), then the
 *     writer thread's wait: the snapshot holds the values from before that kernel (the compute
 *     waited for the copies).
 * On the CUDA emulation (CI's cuda-emu stage, through scripts/gpu-check.sh) work runs only when a
 * wait depends on it, so either wait left out gives the other values here (docs/gpu.md). On a GPU
 * the missing wait is a race that usually goes unseen. Exits 77 without a CUDA build or a device. */
#include <stdio.h>

#include "harness.h"

#ifndef AH_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend (configure with -DAH_CUDA=ON; docs/gpu.md)\n");
    return 77;
}
#else
#include <pthread.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "kernels/cuda/kernels_cuda.h"

#define N 100003

typedef struct {
    const ah_backend_t *be;
    ah_snap_copy_t *c;
    ah_status_t st;
    ah_error_t err;
    double seconds;
} waiter_t;

static void *writer_wait(void *arg) { /* the background writer's wait, on a thread of its own */
    waiter_t *w = arg;
    w->st = w->be->snap_copy_wait(w->c, &w->seconds, &w->err);
    return NULL;
}

/* How many of the snapshot's n floats are not base + add (base: i % 17). */
static int wrong(const float *snap, float add) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += snap[i] != (float)(i % 17) + add;
    return bad;
}

int main(void) {
    ah_error_t err;
    if (ah_cuda_device_count() == 0 || ah_cuda_init(0, &err) != AH_OK) {
        printf("SKIP: no usable CUDA device\n");
        return 77;
    }
    const ah_backend_t *be = ah_backend_find("cuda");
    const ah_kernels_t *k = ah_kernels_cuda();
    char why[256] = "";
    float *host = malloc(N * sizeof *host), *ones = malloc(N * sizeof *ones);
    float *d = ah_cuda_alloc(N * sizeof *d, why, sizeof why), *d_one = ah_cuda_alloc(N * sizeof *d, why, sizeof why);
    float *snap = be->snap_host_alloc(N * sizeof *snap, why, sizeof why);
    CHECK(host && ones && d && d_one && snap, "allocations: %s", why);
    ah_snap_copy_t *c = NULL;
    CHECK(be->snap_copy_create(0, &c, &err) == AH_OK, "snap_copy_create: %s", err.msg);
    for (int i = 0; i < N; i++) host[i] = (float)(i % 17), ones[i] = 1.0f;
    ah_cuda_upload(d, host, N * sizeof *host, &err);
    ah_cuda_upload(d_one, ones, N * sizeof *ones, &err);
    /* two ranges, as a snapshot's tensors are */
    const ah_snap_range_t r[2] = {{snap, d, (N / 2) * sizeof *d, NULL, NULL},
                                  {snap + N / 2, d + N / 2, (N - N / 2) * sizeof *d, NULL, NULL}};

    /* 1: the copies after the kernel issued before them */
    k->residual_fwd(d, d, d_one, N);
    CHECK(be->snap_copy(c, r, 2, &err) == AH_OK, "snap_copy: %s", err.msg);
    double copy_s = -1;
    CHECK(be->snap_copy_wait(c, &copy_s, &err) == AH_OK, "snap_copy_wait: %s", err.msg);
    CHECK(copy_s >= 0, "the copies' duration: %g s", copy_s);
    int bad = wrong(snap, 1.0f);
    CHECK(bad == 0, "after a kernel on the compute stream: %d of %d snapshot values wrong (%g, want %g: the copies "
          "did not wait for the compute stream)", bad, N, (double)snap[1], (double)(1 % 17) + 1.0);
    printf("1. kernel then snapshot: %d of %d values as the kernel left them\n", N - bad, N);

    /* 2: a kernel after the copies, on the compute stream behind the fence */
    for (int i = 0; i < N; i++) snap[i] = -1.0f;
    CHECK(be->snap_copy(c, r, 2, &err) == AH_OK, "snap_copy: %s", err.msg);
    CHECK(be->snap_copy_fence(c, &err) == AH_OK, "snap_copy_fence: %s", err.msg);
    k->residual_fwd(d, d, d_one, N); /* AdamW's place: writes what the copies read */
    ah_cuda_download(host, d, N * sizeof *host, &err);
    CHECK(host[1] == (float)(1 % 17) + 2.0f, "the second kernel did not run: %g", (double)host[1]);
    waiter_t w = {be, c, AH_OK, {0}, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, writer_wait, &w) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(w.st == AH_OK && w.seconds >= 0, "snap_copy_wait on the writer's thread: %s (%g s)", w.err.msg, w.seconds);
    bad = wrong(snap, 1.0f);
    CHECK(bad == 0, "a kernel after the snapshot: %d of %d snapshot values wrong (%g, want %g: the compute stream "
          "did not wait for the copies)", bad, N, (double)snap[1], (double)(1 % 17) + 1.0);
    printf("2. snapshot, fence, kernel: %d of %d values from before the kernel (waited on another thread)\n", N - bad, N);

    CHECK(ah_cuda_check(&err) == AH_OK, "%s", err.msg);
    be->snap_copy_free(&c);
    be->snap_host_free(snap);
    ah_cuda_free(d);
    ah_cuda_free(d_one);
    free(host);
    free(ones);
    return ah_test_finish();
}
#endif
