/* Checkpoint directories: names, manifest round trip, multi-rank commit, lookup, verification,
 * garbage collection, files added to a committed step (writer_extend, commit_more), and SIGKILL at
 * random points of a checkpoint write and of such an addition. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "harness.h"

static char root_buf[] = "/tmp/ah_test_ckpt_XXXXXX";
static const char *root;

static void rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", path);
}

static void test_names(void) {
    char b[128];
    ah_shard_kind_t k;
    int layer, tp, idx;
    CHECK(ah_ckpt_shard_name(b, sizeof b, AH_SHARD_BLOCK, 3, 2, 0) > 0 &&
              strcmp(b, "block-003.tp2-0.safetensors") == 0, "block name: %s", b);
    CHECK(ah_ckpt_shard_parse(b, &k, &layer, &tp, &idx) && k == AH_SHARD_BLOCK && layer == 3 &&
              tp == 2 && idx == 0, "block parse");
    CHECK(ah_ckpt_shard_name(b, sizeof b, AH_SHARD_EMBED, -1, 4, 3) > 0 &&
              strcmp(b, "embed.tp4-3.safetensors") == 0, "embed name: %s", b);
    CHECK(ah_ckpt_shard_parse("head.tp1-0.safetensors", &k, &layer, &tp, &idx) && k == AH_SHARD_HEAD &&
              layer == -1 && tp == 1, "head parse");
    CHECK(ah_ckpt_shard_name(b, sizeof b, AH_SHARD_BLOCK, 1, 2, 2) < 0, "tp index >= tp rejected");
    const char *bad[] = {"block-3.tp2-0.safetensors", "block-003.tp2-0.safetensorsx", "block-003.tp2-0",
                         "embed.tp+2-0.safetensors", "manifest.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(!ah_ckpt_shard_parse(bad[i], &k, &layer, &tp, &idx), "%s is not a shard name", bad[i]);
    CHECK(ah_ckpt_name_ok("block-003.tp2-0.safetensors") && !ah_ckpt_name_ok("../x") &&
              !ah_ckpt_name_ok(".hidden") && !ah_ckpt_name_ok("a/b") && !ah_ckpt_name_ok(""),
          "path-safe names");
    CHECK_EQ_I64(ah_ckpt_parse_step_dir("step-00000200"), 200);
    CHECK_EQ_I64(ah_ckpt_parse_step_dir("step-123456789"), 123456789);
    CHECK_EQ_I64(ah_ckpt_parse_step_dir("step-200"), -1);
    CHECK_EQ_I64(ah_ckpt_parse_step_dir("step-0000020x"), -1);
    CHECK_EQ_I64(ah_ckpt_parse_step_dir("step-000000200"), -1);
}

static ah_ckpt_meta_t meta_for(int64_t step) {
    ah_ckpt_meta_t m = {.step = step, .data_position = step * 32, .rng_len = 16};
    for (int i = 0; i < 16; i++) m.rng[i] = (uint8_t)(i * 17 + step);
    snprintf(m.plan_hash, sizeof m.plan_hash, "sha256:abc%lld", (long long)step);
    snprintf(m.node, sizeof m.node, "node-a");
    ah_error_t err;
    m.has_model = ah_model_preset("gpt2-124m", &m.model, &err) == AH_OK;
    return m;
}

/* Weights + AdamW m, v of one block shard, deterministic in (step, layer, idx). */
static ah_status_t write_block(ah_ckpt_writer_t *w, int64_t step, int layer, int tp, int idx, int n,
                               ah_error_t *err) {
    float *buf = malloc(3 * (size_t)n * sizeof *buf);
    for (int i = 0; i < 3 * n; i++) buf[i] = (float)(step * 1000 + layer * 10 + idx) + (float)i * 1e-3f;
    ah_st_tensor_t t[] = {{"w", AH_DTYPE_F32, 2, {n / 4, 4}, buf, false, 0},
                          {"adam.m", AH_DTYPE_F32, 2, {n / 4, 4}, buf + n, false, 0},
                          {"adam.v", AH_DTYPE_F32, 2, {n / 4, 4}, buf + 2 * n, false, 0}};
    char name[128];
    ah_ckpt_shard_name(name, sizeof name, AH_SHARD_BLOCK, layer, tp, idx);
    ah_status_t st = ah_ckpt_write_shard(w, name, t, 3, NULL, err);
    free(buf);
    return st;
}

/* One step written by `ranks` writers (rank r writes blocks r, r+ranks, ...), then committed. */
static ah_status_t write_step(int64_t step, int ranks, int blocks, int n, ah_error_t *err) {
    for (int r = 0; r < ranks; r++) {
        ah_ckpt_writer_t *w;
        if (ah_ckpt_writer_begin(root, step, &w, err) != AH_OK) return err->code;
        for (int b = r; b < blocks; b += ranks)
            if (write_block(w, step, b, 1, 0, n, err) != AH_OK) {
                ah_ckpt_writer_free(w);
                return err->code;
            }
        ah_status_t st = ah_ckpt_writer_finish_part(w, r, err);
        ah_ckpt_writer_free(w);
        if (st != AH_OK) return st;
    }
    ah_ckpt_meta_t m = meta_for(step);
    return ah_ckpt_commit(root, &m, ranks, err);
}

static void test_commit_and_verify(void) {
    ah_error_t err;
    int64_t latest;
    CHECK(ah_ckpt_latest(root, &latest, &err) == AH_OK && latest == -1, "empty root has no step");
    CHECK(write_step(100, 2, 5, 64, &err) == AH_OK, "write step 100: %s", err.msg);
    CHECK(ah_ckpt_latest(root, &latest, &err) == AH_OK && latest == 100, "latest 100, got %lld", (long long)latest);
    ah_ckpt_manifest_t m;
    CHECK(ah_ckpt_load(root, 100, &m, &err) == AH_OK, "load: %s", err.msg);
    ah_ckpt_meta_t want = meta_for(100);
    CHECK_EQ_I64(m.n_files, 5);
    CHECK_EQ_I64(m.meta.data_position, 3200);
    CHECK(m.meta.rng_len == 16 && memcmp(m.meta.rng, want.rng, 16) == 0, "rng round trips");
    CHECK(strcmp(m.meta.plan_hash, want.plan_hash) == 0 && strcmp(m.meta.node, "node-a") == 0, "hash, node");
    CHECK(m.meta.has_model && ah_model_equal(&m.meta.model, &want.model), "model round trips");
    CHECK(ah_ckpt_manifest_find(&m, "block-004.tp1-0.safetensors") != NULL, "find block 4");
    CHECK(ah_ckpt_manifest_find(&m, "block-005.tp1-0.safetensors") == NULL, "no block 5");
    ah_ckpt_manifest_free(&m);
    int bad = -1;
    CHECK(ah_ckpt_verify(root, 100, &bad, &err) == AH_OK && bad == 0, "verify: %s", err.msg);

    /* A committed step is never rewritten in place. */
    ah_ckpt_writer_t *w;
    CHECK_ERR(ah_ckpt_writer_begin(root, 100, &w, &err), AH_ERR_INVALID, err, "already committed");

    /* Commit with a rank's part missing: refused, nothing committed. */
    CHECK(ah_ckpt_writer_begin(root, 200, &w, &err) == AH_OK, "begin 200: %s", err.msg);
    CHECK(write_block(w, 200, 0, 1, 0, 64, &err) == AH_OK, "write: %s", err.msg);
    CHECK(ah_ckpt_writer_finish_part(w, 0, &err) == AH_OK, "part: %s", err.msg);
    ah_ckpt_writer_free(w);
    ah_ckpt_meta_t m200 = meta_for(200);
    CHECK_ERR(ah_ckpt_commit(root, &m200, 2, &err), AH_ERR_INVALID, err, "part 1 of 2 is missing");
    CHECK(ah_ckpt_latest(root, &latest, &err) == AH_OK && latest == 100, "still 100");

    /* Two ranks writing the same shard with different bytes: refused. */
    CHECK(ah_ckpt_writer_begin(root, 200, &w, &err) == AH_OK, "begin: %s", err.msg);
    CHECK(write_block(w, 201, 0, 1, 0, 64, &err) == AH_OK, "write: %s", err.msg);
    /* part-0 now lists the old CRC of a file that was replaced. Same size, different bytes. */
    CHECK(ah_ckpt_writer_finish_part(w, 1, &err) == AH_OK, "part: %s", err.msg);
    ah_ckpt_writer_free(w);
    CHECK_ERR(ah_ckpt_commit(root, &m200, 2, &err), AH_ERR_INVALID, err, "different contents");

    /* Corruption and truncation are caught by verify, naming the file. */
    char path[512];
    snprintf(path, sizeof path, "%s/step-00000100/block-002.tp1-0.safetensors", root);
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (f) {
        fseek(f, 200, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 200, SEEK_SET);
        fputc(c ^ 0x40, f);
        fclose(f);
    }
    CHECK_ERR(ah_ckpt_verify(root, 100, &bad, &err), AH_ERR_INVALID, err, "block-002.tp1-0.safetensors: CRC-32C");
    CHECK_EQ_I64(bad, 1);
    snprintf(path, sizeof path, "%s/step-00000100/block-003.tp1-0.safetensors", root);
    CHECK(truncate(path, 100) == 0, "truncate");
    CHECK_ERR(ah_ckpt_verify(root, 100, &bad, &err), AH_ERR_INVALID, err, "2 of 5 files");
    snprintf(path, sizeof path, "%s/step-00000100/block-000.tp1-0.safetensors", root);
    unlink(path);
    CHECK_ERR(ah_ckpt_verify(root, 100, &bad, &err), AH_ERR_IO, err, "3 of 5 files");
    rm_rf(root);
}

static void test_gc(void) {
    ah_error_t err;
    for (int64_t s = 100; s <= 300; s += 100)
        CHECK(write_step(s, 1, 2, 16, &err) == AH_OK, "write %lld: %s", (long long)s, err.msg);
    ah_ckpt_writer_t *w; /* half-written: an old leftover and one in progress */
    CHECK(ah_ckpt_writer_begin(root, 50, &w, &err) == AH_OK, "begin 50");
    write_block(w, 50, 0, 1, 0, 16, &err);
    ah_ckpt_writer_free(w);
    CHECK(ah_ckpt_writer_begin(root, 350, &w, &err) == AH_OK, "begin 350");
    write_block(w, 350, 0, 1, 0, 16, &err);
    ah_ckpt_writer_free(w);
    ah_ckpt_step_info_t *info;
    int n;
    CHECK(ah_ckpt_list(root, &info, &n, &err) == AH_OK && n == 5, "5 steps listed");
    CHECK(n == 5 && info[0].step == 50 && !info[0].committed && info[0].n_files == 1 &&
              strstr(info[0].note, "not committed"), "step 50 listed as uncommitted: %s", n ? info[0].note : "");
    CHECK(n == 5 && info[1].committed && info[1].n_files == 2 && info[1].bytes > 0, "step 100 committed");
    free(info);
    int removed = 0;
    CHECK(ah_ckpt_gc(root, 2, &removed, &err) == AH_OK, "gc: %s", err.msg);
    CHECK_EQ_I64(removed, 2);
    CHECK(ah_ckpt_list(root, &info, &n, &err) == AH_OK && n == 3, "3 steps left");
    CHECK(n == 3 && info[0].step == 200 && info[1].step == 300 && info[2].step == 350 && !info[2].committed,
          "gc kept 200, 300 and the in-progress 350");
    free(info);
    CHECK_ERR(ah_ckpt_gc(root, 0, &removed, &err), AH_ERR_USAGE, err, "keep must be >= 1");
    rm_rf(root);
}

static ino_t inode_of(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

/* Files added to committed step 100 (tp1 blocks 0, 1) under another plan (tp2 pieces), as the resumed
 * step's write-behind after a re-plan does (runtime/ckpt_resume.c): a listed file written again with
 * the same bytes is a no-op (not rewritten); other bytes, another state, are refused; a failed addition
 * leaves the committed step as it was. */
static void test_extend(void) {
    ah_error_t err;
    ah_ckpt_writer_t *w;
    char listed[600], added[600];
    CHECK(write_step(100, 1, 2, 64, &err) == AH_OK, "write step 100: %s", err.msg);
    CHECK_ERR(ah_ckpt_writer_extend(root, 200, &w, &err), AH_ERR_IO, err, "not committed");
    snprintf(listed, sizeof listed, "%s/step-00000100/block-000.tp1-0.safetensors", root);
    snprintf(added, sizeof added, "%s/step-00000100/block-000.tp2-1.safetensors", root);
    const ino_t ino = inode_of(listed);
    CHECK(ah_ckpt_writer_extend(root, 100, &w, &err) == AH_OK, "extend 100: %s", err.msg);
    CHECK(write_block(w, 100, 0, 1, 0, 64, &err) == AH_OK, "the listed block 0, same bytes: %s", err.msg);
    CHECK(write_block(w, 100, 0, 2, 0, 32, &err) == AH_OK && write_block(w, 100, 0, 2, 1, 32, &err) == AH_OK,
          "block 0 at tp2: %s", err.msg);
    CHECK_ERR(write_block(w, 101, 1, 1, 0, 64, &err), AH_ERR_INVALID, err, "committed there with other contents");
    CHECK(ah_ckpt_writer_finish_part(w, 0, &err) == AH_OK, "part: %s", err.msg);
    ah_ckpt_writer_free(w);
    ah_ckpt_meta_t m100 = meta_for(100);
    m100.data_position++;
    CHECK_ERR(ah_ckpt_commit_more(root, &m100, 1, &err), AH_ERR_INVALID, err, "not the same state");
    ah_ckpt_manifest_t m;
    CHECK(ah_ckpt_load(root, 100, &m, &err) == AH_OK && m.n_files == 2, "a refused addition lists nothing new");
    ah_ckpt_manifest_free(&m);
    CHECK(ah_ckpt_unlisted_remove(root, 100, &err) == AH_OK && access(added, F_OK) != 0,
          "the unlisted tp2 file removed: %s", err.msg);
    int bad = -1;
    CHECK(ah_ckpt_verify(root, 100, &bad, &err) == AH_OK, "step 100 intact: %s", err.msg);
    /* again, committed this time */
    CHECK(ah_ckpt_writer_extend(root, 100, &w, &err) == AH_OK, "extend 100: %s", err.msg);
    CHECK(write_block(w, 100, 0, 1, 0, 64, &err) == AH_OK && write_block(w, 100, 0, 2, 1, 32, &err) == AH_OK,
          "write: %s", err.msg);
    CHECK(ah_ckpt_writer_finish_part(w, 0, &err) == AH_OK, "part: %s", err.msg);
    ah_ckpt_writer_free(w);
    m100.data_position--;
    snprintf(m100.plan_hash, sizeof m100.plan_hash, "the-new-plan");
    CHECK(ah_ckpt_commit_more(root, &m100, 1, &err) == AH_OK, "commit_more: %s", err.msg);
    CHECK(ah_ckpt_load(root, 100, &m, &err) == AH_OK && m.n_files == 3 &&
              ah_ckpt_manifest_find(&m, "block-000.tp2-1.safetensors") &&
              ah_ckpt_manifest_find(&m, "block-001.tp1-0.safetensors") && strcmp(m.meta.plan_hash, "the-new-plan") == 0,
          "the old files and the added one listed, the new plan's hash");
    ah_ckpt_manifest_free(&m);
    CHECK(inode_of(listed) == ino, "the listed file was not rewritten");
    CHECK(ah_ckpt_verify(root, 100, &bad, &err) == AH_OK, "verify: %s", err.msg);
    CHECK_ERR(ah_ckpt_commit(root, &m100, 1, &err), AH_ERR_INVALID, err, "already committed");
    rm_rf(root);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

enum { CRASH_RANKS = 2, CRASH_BLOCKS = 8, CRASH_FLOATS = 32768 };

/* Committed step 1 (tp1) gains every block at tp2 from CRASH_RANKS writers (tp index r), as a
 * write-behind under another plan does. */
static ah_status_t extend_step1(ah_error_t *err) {
    for (int r = 0; r < CRASH_RANKS; r++) {
        ah_ckpt_writer_t *w;
        if (ah_ckpt_writer_extend(root, 1, &w, err) != AH_OK) return err->code;
        ah_status_t st = AH_OK;
        for (int b = 0; b < CRASH_BLOCKS && st == AH_OK; b++) st = write_block(w, 1, b, CRASH_RANKS, r, CRASH_FLOATS / 2, err);
        if (st == AH_OK) st = ah_ckpt_writer_finish_part(w, r, err);
        ah_ckpt_writer_free(w);
        if (st != AH_OK) return st;
    }
    ah_ckpt_meta_t m = meta_for(1);
    return ah_ckpt_commit_more(root, &m, CRASH_RANKS, err);
}

/* Forks a child that writes step 2 and commits (extend: adds to step 1, extend_step1); kills it after
 * delay_s unless delay_s < 0. */
static int crash_run(double delay_s, bool extend) {
    pid_t pid = fork();
    if (pid == 0) {
        ah_error_t err;
        _exit((extend ? extend_step1(&err) : write_step(2, CRASH_RANKS, CRASH_BLOCKS, CRASH_FLOATS, &err)) == AH_OK ? 0 : 3);
    }
    if (delay_s >= 0) {
        struct timespec ts = {(time_t)delay_s, (long)((delay_s - (double)(time_t)delay_s) * 1e9)};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
    }
    int status;
    waitpid(pid, &status, 0);
    return status;
}

static void test_crash_mid_write(void) {
    ah_error_t err;
    CHECK(write_step(1, CRASH_RANKS, CRASH_BLOCKS, CRASH_FLOATS, &err) == AH_OK, "step 1: %s", err.msg);
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s/step-00000002", root);
    /* How long an undisturbed write takes, so kills land across all of it. */
    double t0 = now_s();
    int status = crash_run(-1, false);
    double full = now_s() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "undisturbed write succeeds");
    rm_rf(dir2);
    int before_commit = 0, after_commit = 0;
    for (unsigned seed = 1; seed <= 16; seed++) {
        srand(seed);
        double delay = full * 0.9 * (double)rand() / RAND_MAX;
        status = crash_run(delay, false);
        int64_t latest = -1;
        CHECK(ah_ckpt_latest(root, &latest, &err) == AH_OK, "latest: %s", err.msg);
        CHECK(latest == 1 || latest == 2, "seed %u: latest is %lld", seed, (long long)latest);
        int bad = -1;
        CHECK(ah_ckpt_verify(root, 1, &bad, &err) == AH_OK, "seed %u: step 1 intact: %s", seed, err.msg);
        if (latest == 2) {
            after_commit++;
            CHECK(ah_ckpt_verify(root, 2, &bad, &err) == AH_OK, "seed %u: committed step 2 complete: %s",
                  seed, err.msg);
        } else {
            before_commit++;
        }
        rm_rf(dir2);
    }
    printf("crash test: undisturbed write %.3f s; 16 kills: %d before the commit, %d after\n", full,
           before_commit, after_commit);
    CHECK(before_commit >= 4, "most kills must land inside the write (got %d of 16)", before_commit);
    rm_rf(root);
}

/* Files added to a committed step, killed at random points: the step keeps verifying, listing its
 * old files or, once the new manifest is in, every file, never a file that is not complete. */
static void test_crash_mid_extend(void) {
    ah_error_t err;
    CHECK(write_step(1, CRASH_RANKS, CRASH_BLOCKS, CRASH_FLOATS, &err) == AH_OK, "step 1: %s", err.msg);
    double t0 = now_s();
    int status = crash_run(-1, true);
    double full = now_s() - t0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "an undisturbed addition succeeds");
    int before = 0, after = 0;
    for (unsigned seed = 1; seed <= 8; seed++) {
        rm_rf(root);
        CHECK(write_step(1, CRASH_RANKS, CRASH_BLOCKS, CRASH_FLOATS, &err) == AH_OK, "step 1: %s", err.msg);
        srand(seed);
        crash_run(full * 0.9 * (double)rand() / RAND_MAX, true);
        ah_ckpt_manifest_t m;
        int bad = -1;
        CHECK(ah_ckpt_verify(root, 1, &bad, &err) == AH_OK, "seed %u: step 1 verifies: %s", seed, err.msg);
        CHECK(ah_ckpt_load(root, 1, &m, &err) == AH_OK && (m.n_files == CRASH_BLOCKS || m.n_files == 3 * CRASH_BLOCKS),
              "seed %u: step 1 lists %d files", seed, m.n_files);
        if (m.n_files == CRASH_BLOCKS) before++;
        else after++;
        ah_ckpt_manifest_free(&m);
        CHECK(ah_ckpt_unlisted_remove(root, 1, &err) == AH_OK && ah_ckpt_verify(root, 1, &bad, &err) == AH_OK,
              "seed %u: the leftovers removed, step 1 verifies: %s", seed, err.msg);
    }
    printf("crash test: undisturbed addition %.3f s; 8 kills: %d before its commit, %d after\n", full, before, after);
    CHECK(before >= 2, "most kills must land inside the addition (got %d of 8)", before);
    rm_rf(root);
}

int main(void) {
    root = mkdtemp(root_buf);
    if (!root) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_commit_and_verify();
    test_gc();
    test_extend();
    test_crash_mid_write();
    test_crash_mid_extend();
    rmdir(root);
    return ah_test_finish();
}
