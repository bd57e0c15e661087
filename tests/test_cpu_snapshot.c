/* The CPU backend's asynchronous checkpoint snapshot (backend.h snap_*, src/backend/cpu_snapshot.c):
 * the copies are made by the first thread that needs them, never by snap_copy itself.
 *  1. Nobody but the trainer waits: snap_copy returns with nothing copied, the fence (the next
 *     AdamW's) makes the copies, and the source written after the fence leaves the snapshot as it
 *     was (the trainer's weights read before they change).
 *  2. The writer's wait on a thread of its own, then the fence: every value right once, the
 *     copies' seconds given, the fence returns at once.
 *  3. Both at the same time over many ranges, 20 rounds: every value right (no range skipped or
 *     copied from a later state). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "harness.h"

#define N 100003
#define RANGES 64

static const ah_backend_t *be;
static double writer_seconds;

static void *writer_wait(void *copies) { /* the background writer's wait for the copies */
    ah_error_t err;
    if (be->snap_copy_wait(copies, &writer_seconds, &err) != AH_OK) writer_seconds = -1;
    return NULL;
}

/* The snapshot's values that differ from the source as it was `behind` increments ago. */
static int wrong(const float *snap, const float *src, float behind) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += snap[i] != src[i] - behind;
    return bad;
}

/* src into RANGES ranges of dst. */
static int ranges_of(float *dst, const float *src, ah_snap_range_t *r) {
    const int per = (N + RANGES - 1) / RANGES;
    int n = 0;
    for (int at = 0; at < N; at += per, n++) {
        const int len = at + per <= N ? per : N - at;
        r[n] = (ah_snap_range_t){dst + at, src + at, (size_t)len * sizeof(float), NULL, NULL};
    }
    return n;
}

int main(void) {
    be = ah_backend_find("cpu");
    CHECK(be && be->snap_copy && be->snap_copy_wait && be->snap_copy_fence && !be->snap_host_alloc,
          "the CPU backend copies snapshots off the training thread, into ordinary host memory");
    if (!be || !be->snap_copy) return ah_test_finish();
    float *src = malloc(N * sizeof(float)), *snap = malloc(N * sizeof(float));
    ah_snap_range_t r[RANGES];
    ah_error_t err;
    ah_snap_copy_t *c = NULL;
    CHECK(be->snap_copy_create(-1, &c, &err) == AH_OK, "create: %s", err.msg);
    for (int i = 0; i < N; i++) src[i] = (float)(i % 17);

    /* 1 */
    memset(snap, 0, N * sizeof(float));
    CHECK(be->snap_copy(c, r, ranges_of(snap, src, r), &err) == AH_OK, "copy: %s", err.msg);
    CHECK(wrong(snap, src, 0) > 0, "snap_copy returned with nothing copied (%d of %d values unset)", wrong(snap, src, 0), N);
    CHECK(be->snap_copy_fence(c, &err) == AH_OK, "fence: %s", err.msg);
    for (int i = 0; i < N; i++) src[i] += 1; /* the next AdamW */
    CHECK(wrong(snap, src, 1) == 0, "the fence made the copies before the source changed: %d of %d wrong",
          wrong(snap, src, 1), N);

    /* 2 */
    CHECK(be->snap_copy(c, r, ranges_of(snap, src, r), &err) == AH_OK, "copy: %s", err.msg);
    pthread_t th;
    pthread_create(&th, NULL, writer_wait, c);
    pthread_join(th, NULL);
    CHECK(writer_seconds > 0, "the writer's wait made the copies (%.6f s)", writer_seconds);
    CHECK(be->snap_copy_fence(c, &err) == AH_OK, "fence: %s", err.msg);
    CHECK(wrong(snap, src, 0) == 0, "the writer's copies: %d of %d wrong", wrong(snap, src, 0), N);

    /* 3 */
    int bad = 0;
    for (int round = 0; round < 20; round++) {
        CHECK(be->snap_copy(c, r, ranges_of(snap, src, r), &err) == AH_OK, "copy: %s", err.msg);
        pthread_create(&th, NULL, writer_wait, c);
        CHECK(be->snap_copy_fence(c, &err) == AH_OK, "fence: %s", err.msg);
        for (int i = 0; i < N; i++) src[i] += 1;
        pthread_join(th, NULL);
        bad += wrong(snap, src, 1);
    }
    CHECK(bad == 0, "the writer and the fence sharing the copies, 20 rounds: %d values wrong", bad);

    be->snap_copy_free(&c);
    CHECK(c == NULL, "freed");
    free(src);
    free(snap);
    return ah_test_finish();
}
