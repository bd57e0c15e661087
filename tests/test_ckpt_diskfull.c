/* A full disk while checkpointing (a 1 MiB tmpfs): shard writes and the manifest commit fail with
 * a clear "no space left" error, leave no temp files and no manifest, and the previous committed
 * step stays the latest and intact. Needs root to mount; otherwise it says so and passes. */
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
        ah_st_tensor_t t[] = {{"w", AH_DTYPE_F32, 1, {floats}, v}};
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

    if (umount2(mnt, MNT_DETACH) != 0) fprintf(stderr, "umount %s: %s\n", mnt, strerror(errno));
    rmdir(mnt);
    return ah_test_finish();
}
