/* The background checkpoint writer (ckpt/async.h): a snapshot written on its thread while the
 * caller goes on, one in flight at a time, the write's failure returned by wait with its message,
 * the part committed by the caller's ah_ckpt_commit, and a snapshot never collected freed by stop. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/async.h"
#include "harness.h"

static float data[2][6] = {{1, 2, 3, 4, 5, 6}, {-1, -2, -3, -4, -5, -6}};

/* A snapshot of two pieces (one tensor each) for step of ROOT, part 0. */
static ah_ckpt_snap_t *snapshot(const char *root, int64_t step) {
    ah_ckpt_snap_t *s = ah_ckpt_snap_new(root, step, 0, "n0", 2);
    for (int i = 0; i < 2; i++) {
        ah_ckpt_piece_t *p = &s->pieces[i];
        snprintf(p->name, sizeof p->name, "block-%03d.tp1-0.safetensors", i);
        p->ts = calloc(1, sizeof *p->ts);
        p->names = calloc(1, sizeof *p->names);
        snprintf(p->names[0], sizeof p->names[0], "w%d", i);
        p->ts[0] = (ah_st_tensor_t){.name = p->names[0], .dtype = AH_DTYPE_F32, .ndim = 2, .shape = {2, 3},
                                    .data = data[i]};
        p->n = 1;
        p->meta = json_pack("{s:s}", "format", "autohet-shard");
        s->n_pieces++;
    }
    return s;
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
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "clean up");
    return ah_test_finish();
}
