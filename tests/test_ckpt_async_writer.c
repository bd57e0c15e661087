/* The background checkpoint writer (ckpt/async.h): a snapshot written on its thread while the
 * caller goes on, one in flight at a time, the write's failure returned by wait with its message,
 * the part committed by the caller's ah_ckpt_commit, and a snapshot never collected freed by stop.
 * When the writer gets little of a core (one core shared with a busy thread), the caller waiting
 * for the snapshot writes the pieces the writer has not taken itself. The retention (--keep) handed
 * to the thread is done before wait or stop returns, a second one handed over while it runs too. The
 * snapshot layout for direct I/O in place (ah_ckpt_piece_start) writes the same files. */
#define _GNU_SOURCE /* sched_setaffinity */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/async.h"
#include "harness.h"

enum { BIG = 1 << 18 }; /* floats a piece of the starved writer's snapshot */
static float data[2][6] = {{1, 2, 3, 4, 5, 6}, {-1, -2, -3, -4, -5, -6}};
static float *big;

/* A snapshot of n pieces (one tensor each, 2x3 floats, or 1 x BIG of big) for step of ROOT, part 0. */
static ah_ckpt_snap_t *snapshot_of(const char *root, int64_t step, int n) {
    ah_ckpt_snap_t *s = ah_ckpt_snap_new(root, step, 0, "n0", n);
    for (int i = 0; i < n; i++) {
        ah_ckpt_piece_t *p = &s->pieces[i];
        snprintf(p->name, sizeof p->name, "block-%03d.tp1-0.safetensors", i);
        p->ts = calloc(1, sizeof *p->ts);
        p->names = calloc(1, sizeof *p->names);
        snprintf(p->names[0], sizeof p->names[0], "w%d", i);
        p->ts[0] = n == 2 ? (ah_st_tensor_t){.name = p->names[0], .dtype = AH_DTYPE_F32, .ndim = 2, .shape = {2, 3},
                                             .data = data[i]}
                          : (ah_st_tensor_t){.name = p->names[0], .dtype = AH_DTYPE_F32, .ndim = 2, .shape = {1, BIG},
                                             .data = big};
        p->n = 1;
        p->meta = json_pack("{s:s}", "format", "autohet-shard");
        s->n_pieces++;
    }
    return s;
}

static ah_ckpt_snap_t *snapshot(const char *root, int64_t step) { return snapshot_of(root, step, 2); }

static atomic_bool spin_stop;
static void *spin(void *arg) {
    (void)arg;
    while (!atomic_load(&spin_stop)) {
    }
    return NULL;
}

/* One core, a thread spinning on it: the writer gets a share of it, and the caller's wait writes
 * the pieces the writer has not taken itself. */
static void starved_writer(const char *root) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pinned to one core");
    big = calloc(BIG, sizeof(float));
    ah_error_t err;
    ah_ckpt_async_t *a = NULL;
    CHECK(ah_ckpt_async_start(&a, &err) == AH_OK, "start: %s", err.msg);
    pthread_t spinner;
    pthread_create(&spinner, NULL, spin, NULL);
    ah_ckpt_snap_t *s = snapshot_of(root, 16, 8), *back = NULL;
    CHECK(ah_ckpt_async_submit(a, s, &err) == AH_OK, "submit: %s", err.msg);
    CHECK(ah_ckpt_async_wait(a, &back, &err) == AH_OK && back == s, "wait: %s", err.msg);
    atomic_store(&spin_stop, true);
    pthread_join(spinner, NULL);
    CHECK(back->files == 8, "every piece written (%d)", back->files);
    CHECK(back->waiter_files > 0, "the waiting caller wrote pieces itself (%d of 8)", back->waiter_files);
    printf("  starved writer: the waiting caller wrote %d of 8 pieces\n", back->waiter_files);
    ah_ckpt_snap_free(back);
    ah_ckpt_async_stop(a, false);
    free(big);
}

static bool exists(const char *root, const char *what) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, what);
    return access(path, F_OK) == 0;
}

/* A snapshot of step written on a's thread and committed by the caller. */
static void save(ah_ckpt_async_t *a, const char *root, int64_t step) {
    ah_error_t err;
    ah_ckpt_snap_t *back = NULL;
    CHECK(ah_ckpt_async_submit(a, snapshot(root, step), &err) == AH_OK, "submit: %s", err.msg);
    CHECK(ah_ckpt_async_wait(a, &back, &err) == AH_OK, "wait: %s", err.msg);
    ah_ckpt_snap_free(back);
    ah_ckpt_meta_t meta = {.step = step};
    CHECK(ah_ckpt_commit(root, &meta, 1, &err) == AH_OK, "commit: %s", err.msg);
}

/* The retention (--keep) on the writer's thread: done by the time wait returns (with a snapshot
 * submitted after it, or none), the pinned step kept, and run by stop even when it cancels. */
static void retention(const char *root) {
    ah_error_t err;
    ah_ckpt_async_t *a = NULL;
    CHECK(ah_ckpt_async_start(&a, &err) == AH_OK, "start: %s", err.msg);
    save(a, root, 4);
    save(a, root, 8);
    ah_ckpt_async_retain(a, root, 1, -1);
    save(a, root, 12); /* its snapshot submitted right after the retention */
    CHECK(!exists(root, "step-00000004") && exists(root, "step-00000008/manifest.json"),
          "keep 1: step 4 removed on the thread, step 8 (the newest then) kept");
    ah_ckpt_async_retain(a, root, 1, 8);
    ah_ckpt_snap_t *none = NULL;
    CHECK(ah_ckpt_async_wait(a, &none, &err) == AH_OK && !none, "wait with nothing in flight");
    CHECK(exists(root, "step-00000008/manifest.json") && exists(root, "step-00000012/manifest.json"),
          "the pinned step 8 kept beside step 12");
    ah_ckpt_async_retain(a, root, 1, -1);
    ah_ckpt_async_stop(a, true);
    CHECK(!exists(root, "step-00000008") && exists(root, "step-00000012/manifest.json"),
          "stop (cancelling) runs the retention due: step 8 removed");
}

/* A retention handed over while the thread runs another, then stop at once: the thread runs the
 * second too and ends (it used to wait for a wake-up that had come while it was busy: a hung exit,
 * seen as test_ckpt_async's resume timing out). SIGALRM fails the test if it hangs. */
static void retention_while_busy(const char *root) {
    ah_error_t err;
    for (int64_t step = 1; step <= 40; step++) {
        ah_ckpt_snap_t *s = snapshot(root, step);
        CHECK(ah_ckpt_snap_write(s, NULL, &err) == AH_OK, "write step %lld: %s", (long long)step, err.msg);
        ah_ckpt_snap_free(s);
        ah_ckpt_meta_t meta = {.step = step};
        CHECK(ah_ckpt_commit(root, &meta, 1, &err) == AH_OK, "commit: %s", err.msg);
    }
    ah_ckpt_async_t *a = NULL;
    CHECK(ah_ckpt_async_start(&a, &err) == AH_OK, "start: %s", err.msg);
    alarm(60);
    ah_ckpt_async_retain(a, root, 20, -1); /* 20 steps to remove: the thread busy a while */
    usleep(2000);                          /* ... once it has started */
    ah_ckpt_async_retain(a, root, 1, -1);
    ah_ckpt_async_stop(a, true);
    alarm(0);
    CHECK(!exists(root, "step-00000039") && exists(root, "step-00000040/manifest.json"),
          "the retention handed over while another ran is done by stop (keep 1: step 40 alone)");
}

/* A file's bytes (malloc'd, *n of them; NULL if it cannot be read). */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *in = fopen(path, "rb");
    unsigned char *b = in ? malloc(1 << 20) : NULL;
    *n = b ? fread(b, 1, 1 << 20, in) : 0;
    if (in) fclose(in);
    return b;
}

/* The snapshot layout (ah_ckpt_piece_start): a piece's tensors placed less than AH_CKPT_SNAP_PAD past
 * the address given, at an address congruent to their offset in the file (8 + the header's length)
 * modulo AH_AFILE_BLOCK; the file written from there is the one written from the tensors back to
 * back elsewhere, byte for byte. */
static void layout(const char *root) {
    enum { A = 3001, B = 5003 }; /* floats: neither a whole block */
    float *src = malloc((A + B) * sizeof(float));
    for (int i = 0; i < A + B; i++) src[i] = (float)i * 0.25f - 7;
    char *buf = aligned_alloc(AH_AFILE_BLOCK, ((A + B) * sizeof(float) / AH_AFILE_BLOCK + 4) * AH_AFILE_BLOCK);
    size_t n[2] = {0, 0};
    unsigned char *file[2] = {NULL, NULL};
    uintptr_t start = 0, at = (uintptr_t)buf + 12;
    for (int k = 0; k < 2; k++) { /* k 0: from src, back to back; 1: laid out in buf */
        ah_ckpt_snap_t *s = ah_ckpt_snap_new(root, 20 + 4 * k, 0, "n0", 1);
        ah_ckpt_piece_t *p = &s->pieces[s->n_pieces++];
        snprintf(p->name, sizeof p->name, "block-000.tp1-0.safetensors");
        p->ts = calloc(2, sizeof *p->ts);
        p->names = calloc(2, sizeof *p->names);
        p->meta = json_pack("{s:s}", "format", "autohet-shard");
        for (int j = 0; j < 2; j++) {
            snprintf(p->names[j], sizeof p->names[j], "t%d", j);
            p->ts[j] = (ah_st_tensor_t){.name = p->names[j], .dtype = AH_DTYPE_F32, .ndim = 2,
                                        .shape = {1, j ? B : A}, .data = src + (j ? A : 0)};
        }
        p->n = 2;
        ah_error_t err;
        if (k == 1) {
            CHECK(ah_ckpt_piece_start(p, at, &start, &err) == AH_OK, "piece start: %s", err.msg);
            memcpy((void *)start, src, (A + B) * sizeof(float));
            p->ts[0].data = (void *)start;
            p->ts[1].data = (float *)start + A;
        }
        CHECK(ah_ckpt_snap_write(s, NULL, &err) == AH_OK, "write: %s", err.msg);
        char path[512];
        snprintf(path, sizeof path, "%s/step-%08d/block-000.tp1-0.safetensors", root, 20 + 4 * k);
        file[k] = slurp(path, &n[k]);
        ah_ckpt_snap_free(s);
    }
    CHECK(start >= at && start - at < AH_CKPT_SNAP_PAD, "placed %lu bytes past the address given",
          (unsigned long)(start - at));
    uint64_t header = 0;
    for (int b = 0; file[1] && n[1] >= 8 && b < 8; b++) header |= (uint64_t)file[1][b] << (8 * b);
    CHECK(n[1] > 8 && (start - (8 + header)) % AH_AFILE_BLOCK == 0, "the tensors' address congruent to their file "
          "offset %llu", (unsigned long long)(8 + header));
    CHECK(n[0] == n[1] && n[0] > (A + B) * sizeof(float) && memcmp(file[0], file[1], n[0]) == 0,
          "the file written from the layout is the one written from the tensors elsewhere (%zu, %zu bytes)", n[0], n[1]);
    free(file[0]);
    free(file[1]);
    free(buf);
    free(src);
}

int main(void) {
    char root_buf[] = "/tmp/ah-async-XXXXXX", path[512];
    const char *root = mkdtemp(root_buf);
    if (!root) return 1;
    ah_error_t err;
    ah_ckpt_async_t *a = NULL;
    CHECK(ah_ckpt_async_start(&a, &err) == AH_OK, "start: %s", err.msg);

    /* a write, collected; a second submit while one is in flight is refused */
    ah_ckpt_snap_t *s1 = snapshot(root, 4), *s2 = snapshot(root, 8), *back = NULL;
    CHECK(ah_ckpt_async_submit(a, s1, &err) == AH_OK, "submit: %s", err.msg);
    CHECK(ah_ckpt_async_in_flight(a), "in flight after submit");
    CHECK_ERR(ah_ckpt_async_submit(a, s2, &err), AH_ERR_INVALID, err, "still in flight");
    CHECK(ah_ckpt_async_wait(a, &back, &err) == AH_OK, "wait: %s", err.msg);
    CHECK(back == s1 && back->files == 2 && back->bytes > 0, "the snapshot comes back with its figures");
    CHECK(!ah_ckpt_async_in_flight(a) && ah_ckpt_async_done(a), "nothing in flight after wait");
    ah_ckpt_snap_free(back);
    snprintf(path, sizeof path, "%s/step-00000004/part-0.json", root);
    CHECK(access(path, F_OK) == 0, "the part file is written");
    int64_t latest = 0;
    CHECK(ah_ckpt_latest(root, &latest, &err) == AH_OK && latest == -1, "nothing committed by the writer");
    ah_ckpt_meta_t meta = {.step = 4};
    CHECK(ah_ckpt_commit(root, &meta, 1, &err) == AH_OK, "commit: %s", err.msg);
    int bad = -1;
    CHECK(ah_ckpt_verify(root, 4, &bad, &err) == AH_OK && bad == 0, "the committed step verifies: %s", err.msg);

    /* a failed write: the step's directory cannot be made (a file is in the way) */
    snprintf(path, sizeof path, "%s/step-00000008", root);
    FILE *f = fopen(path, "w");
    fclose(f);
    CHECK(ah_ckpt_async_submit(a, s2, &err) == AH_OK, "submit: %s", err.msg);
    back = NULL;
    CHECK(ah_ckpt_async_wait(a, &back, &err) != AH_OK && back == s2, "the failure comes back from wait");
    CHECK(strstr(err.msg, "step-00000008") != NULL, "the message names the step: %s", err.msg);
    ah_ckpt_snap_free(back);
    unlink(path);

    /* stop with a snapshot never collected: written, then freed (ASan's leak check) */
    CHECK(ah_ckpt_async_submit(a, snapshot(root, 12), &err) == AH_OK, "submit: %s", err.msg);
    ah_ckpt_async_stop(a, false);
    layout(root);
    starved_writer(root);
    char kept_buf[] = "/tmp/ah-async-keep-XXXXXX";
    const char *kept = mkdtemp(kept_buf);
    CHECK(kept != NULL, "a temporary root");
    if (kept) retention(kept);
    char busy_buf[] = "/tmp/ah-async-busy-XXXXXX";
    const char *busy = mkdtemp(busy_buf);
    CHECK(busy != NULL, "a temporary root");
    if (busy) retention_while_busy(busy);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s %s", root, kept ? kept : "", busy ? busy : "");
    CHECK(system(cmd) == 0, "clean up");
    return ah_test_finish();
}
