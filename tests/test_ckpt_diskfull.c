/* A full disk while checkpointing (a 1 MiB tmpfs): shard writes and the manifest commit fail with
 * a clear "no space left" error (naming --keep), leave no temp files and no manifest, and the
 * previous committed step stays the latest and intact; a step rolled back after another node failed
 * is not listed at all; ah_st_size gives a shard's bytes before it is written. Needs root to mount;
 * otherwise it says so and passes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "ckpt/ckpt.h"
#include "harness.h"

static char mnt_buf[] = "/tmp/ah_test_full_XXXXXX";
static const char *mnt;

static ah_status_t write_shards(int64_t step, int n, int floats, ah_error_t *err) {
    ah_ckpt_writer_t *w;
    if (ah_ckpt_writer_begin(mnt, step, &w, err) != AH_OK) return err->code;
    float *v = calloc((size_t)floats, sizeof *v);
    ah_status_t st = AH_OK;
    for (int b = 0; b < n && st == AH_OK; b++) {
        ah_st_tensor_t t[] = {{"w", AH_DTYPE_F32, 1, {floats}, v, false, 0}};
        char name[64];
        ah_ckpt_shard_name(name, sizeof name, AH_SHARD_BLOCK, b, 1, 0);
        st = ah_ckpt_write_shard(w, name, t, 1, NULL, err);
    }
    if (st == AH_OK) st = ah_ckpt_writer_finish_part(w, 0, err);
    free(v);
    ah_ckpt_writer_free(w);
    return st;
}

static int temp_files(int64_t step) {
    char dir[512];
    ah_ckpt_step_dir(dir, sizeof dir, mnt, step);
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (ah_afile_is_temp_name(de->d_name)) n++;
    if (d) closedir(d);
    return n;
}

static bool has_manifest(int64_t step) {
    char p[512];
    snprintf(p, sizeof p, "%s/step-%08lld/manifest.json", mnt, (long long)step);
    return access(p, F_OK) == 0;
}

int main(void) {
    mnt = mkdtemp(mnt_buf);
    if (!mnt) return 1;
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") != 0) {
        printf("SKIP test_ckpt_diskfull: cannot mount a tmpfs at %s (%s); run as root to test a full disk\n", mnt,
               strerror(errno));
        rmdir(mnt);
        return 0;
    }
    ah_error_t err;
    ah_ckpt_meta_t meta = {.step = 1, .data_position = 7};
    CHECK(write_shards(1, 2, 16384, &err) == AH_OK && ah_ckpt_commit(mnt, &meta, 1, &err) == AH_OK,
          "step 1 (128 KiB) fits: %s", err.msg);

    /* Shards that cannot fit: 5 x 256 KiB on what is left of 1 MiB. */
    CHECK_ERR(write_shards(2, 5, 65536, &err), AH_ERR_IO, err, "no space left on the device");
    CHECK(strstr(err.msg, "block-00") != NULL, "names the shard: %s", err.msg);
    CHECK(strstr(err.msg, "--keep N") != NULL, "the advice names the flag: %s", err.msg);
    CHECK(temp_files(2) == 0, "no temp file left behind");
    CHECK(!has_manifest(2), "step 2 not committed");
    int64_t latest;
    CHECK(ah_ckpt_latest(mnt, &latest, &err) == AH_OK && latest == 1, "latest is still 1");
    CHECK(ah_ckpt_verify(mnt, 1, NULL, &err) == AH_OK, "step 1 intact: %s", err.msg);
    CHECK_ERR(ah_ckpt_abandon(mnt, 1, &err), AH_ERR_INVALID, err, "is committed");
    CHECK(ah_ckpt_abandon(mnt, 2, &err) == AH_OK, "abandon the failed step 2: %s", err.msg);

    /* Shards fit, then the disk fills before the manifest: the commit fails, nothing committed. */
    CHECK(write_shards(3, 2, 16384, &err) == AH_OK, "step 3 shards fit: %s", err.msg);
    char filler[512];
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    int fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char page[4096] = {0};
    while (write(fd, page, sizeof page) > 0) {
    }
    close(fd);
    meta.step = 3;
    CHECK_ERR(ah_ckpt_commit(mnt, &meta, 1, &err), AH_ERR_IO, err, "NOT committed");
    CHECK(strstr(err.msg, "no space left") && strstr(err.msg, "manifest.json"), "manifest error is clear: %s", err.msg);
    CHECK(!has_manifest(3) && temp_files(3) == 0, "no manifest and no temp manifest");
    CHECK(ah_ckpt_latest(mnt, &latest, &err) == AH_OK && latest == 1, "latest is still 1");
    /* Space back: the same commit now succeeds. */
    unlink(filler);
    CHECK(ah_ckpt_commit(mnt, &meta, 1, &err) == AH_OK, "commit after freeing space: %s", err.msg);
    CHECK(ah_ckpt_latest(mnt, &latest, &err) == AH_OK && latest == 3, "latest is 3");
    CHECK(ah_ckpt_verify(mnt, 3, NULL, &err) == AH_OK, "step 3 intact: %s", err.msg);

    /* A step committed on this node but failed on another: taken back, it is no longer listed as
     * committed, and the one before is the latest again. A step that is not there is fine. */
    CHECK(write_shards(4, 2, 16384, &err) == AH_OK, "step 4 shards fit: %s", err.msg);
    meta.step = 4;
    CHECK(ah_ckpt_commit(mnt, &meta, 1, &err) == AH_OK, "step 4 commits: %s", err.msg);
    CHECK(ah_ckpt_rollback(mnt, 4, &err) == AH_OK, "roll back step 4: %s", err.msg);
    ah_ckpt_step_info_t *info;
    int n_info;
    CHECK(ah_ckpt_list(mnt, &info, &n_info, &err) == AH_OK, "list: %s", err.msg);
    for (int i = 0; i < n_info; i++) CHECK(info[i].step != 4, "step 4 still listed (committed %d)", info[i].committed);
    free(info);
    CHECK(ah_ckpt_latest(mnt, &latest, &err) == AH_OK && latest == 3, "latest is 3 again, got %lld", (long long)latest);
    CHECK(ah_ckpt_rollback(mnt, 99, &err) == AH_OK, "rolling back a step that is not there: %s", err.msg);

    /* The size a step needs is known before it is written: ah_st_size is the bytes the shard has. */
    ah_ckpt_writer_t *w;
    CHECK(ah_ckpt_writer_begin(mnt, 5, &w, &err) == AH_OK, "begin step 5: %s", err.msg);
    float *v = calloc(3 * 1000, sizeof *v);
    ah_st_tensor_t t[] = {{"h.0.attn.qkv.weight", AH_DTYPE_F32, 2, {30, 100}, v, false, 0},
                          {"h.0.attn.qkv.weight.exp_avg", AH_DTYPE_F32, 1, {1000}, v, false, 0},
                          {"b", AH_DTYPE_F32, 0, {0}, v, false, 0}};
    json_t *md = json_pack("{s:s, s:s}", "format", "autohet-shard", "adam_step", "123456");
    uint64_t want = 0;
    CHECK(ah_st_size(t, 3, md, &want, &err) == AH_OK, "size: %s", err.msg);
    CHECK(ah_ckpt_write_shard(w, "block-000.tp1-0.safetensors", t, 3, md, &err) == AH_OK, "write: %s", err.msg);
    CHECK(ah_ckpt_writer_bytes(w) == want, "ah_st_size %llu, written %llu", (unsigned long long)want,
          (unsigned long long)ah_ckpt_writer_bytes(w));
    json_decref(md);
    free(v);
    ah_ckpt_writer_free(w);

    if (umount2(mnt, MNT_DETACH) != 0) fprintf(stderr, "umount %s: %s\n", mnt, strerror(errno));
    rmdir(mnt);
    return ah_test_finish();
}
