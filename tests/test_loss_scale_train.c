/* The trainer's loss-scale hook on the CPU, in fp32 (the fp16 tables are CUDA's): with a
 * power-of-two loss scale the loss gradient, hence every gradient, is scaled exactly and the step
 * divides it out exactly (norm, clip, AdamW), so a run at scale 1024 follows the unscaled run's
 * losses and gradient norms to rounding, and no step of it is an overflow. Then ah_train_loop with
 * loss scaling on writes no "overflow" event for those clean steps. The overflow itself needs fp16
 * matmuls (tests/test_cuda_kernels.c) and its decisions are tests/test_loss_scale.c's.
 * One process: MPI as a singleton. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "harness.h"
#include "plan/plan.h"
#include "runtime/train_loop.h"
#include "runtime/trainer.h"

#define STEPS 4

/* An llm.c uint16 token file of n pseudo-random tokens below V. */
static void write_tokens(const char *path, int n, int V) {
    int32_t hdr[256] = {20240520, 1, n};
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "create %s", path);
    if (!f) return;
    fwrite(hdr, sizeof hdr, 1, f);
    uint32_t x = 12345;
    for (int i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        const uint16_t t = (uint16_t)((x >> 16) % (uint32_t)V);
        fwrite(&t, sizeof t, 1, f);
    }
    fclose(f);
}

/* STEPS steps of a fresh trainer at loss scale `scale` (0: none): losses and norms. */
static void run(const ah_plan_t *plan, const ah_dataset_t *data, double scale, double *loss, double *norm) {
    ah_trainer_t tr;
    ah_train_opts_t o;
    ah_error_t err = {0};
    ah_train_opts_default(&o);
    o.warmup = 0;
    o.grad_clip = 0.05; /* small enough to clip: the unscaled norm decides it */
    if (ah_trainer_setup(&tr, plan, data, &o, &err) != AH_OK) {
        CHECK(false, "setup: %s", err.msg);
        return;
    }
    for (int i = 0; i < STEPS; i++) {
        ah_step_metrics_t m;
        tr.loss_scale = scale;
        CHECK(ah_trainer_step(&tr, i, &m, &err) == AH_OK, "step %d: %s", i, err.msg);
        CHECK(!m.overflow && !m.nonfinite, "scale %g, step %d: a clean step", scale, i);
        loss[i] = m.loss;
        norm[i] = m.grad_norm;
    }
    ah_trainer_free(&tr);
}

int main(int argc, char **argv) {
    ah_error_t err = {0};
    if (ah_comm_init(&argc, &argv, &err) != AH_OK) {
        fprintf(stderr, "MPI: %s\n", err.msg);
        return 1;
    }
    char dir[] = "/tmp/ah-ls-XXXXXX", path[64], metrics[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/tok.bin", dir);
    snprintf(metrics, sizeof metrics, "%s/m.jsonl", dir);
    ah_plan_t plan;
    ah_dataset_t data = {0};
    if (ah_plan_load(ah_test_src_path("examples/plans/train-single.json"), NULL, &plan, &err) != AH_OK) {
        CHECK(false, "plan: %s", err.msg);
        ah_comm_finalize();
        return ah_test_finish();
    }
    write_tokens(path, 8 * 33 * STEPS + 1, (int)plan.model.vocab);
    CHECK(ah_dataset_open(path, "--data", plan.model.vocab, plan.train.seq_len, &data, &err) == AH_OK, "data: %s",
          err.msg);
    double l0[STEPS], n0[STEPS], l1[STEPS], n1[STEPS];
    run(&plan, &data, 0, l0, n0);
    run(&plan, &data, 1024, l1, n1);
    for (int i = 0; i < STEPS; i++) {
        CHECK_NEAR(l1[i], l0[i], 1e-6);
        CHECK_NEAR(n1[i], n0[i], 1e-5);
    }
    CHECK(n0[0] > 0.05, "the clip applies (norm %g)", n0[0]);
    /* the loop with loss scaling on: clean steps, no overflow event, the same losses */
    ah_trainer_t tr;
    ah_train_opts_t o;
    ah_train_opts_default(&o);
    o.warmup = 0;
    o.grad_clip = 0.05;
    FILE *mf = fopen(metrics, "w");
    if (mf && ah_trainer_setup(&tr, &plan, &data, &o, &err) == AH_OK) {
        const ah_train_loop_opts_t lo = {.steps = STEPS, .dump_step = -1, .metrics = mf, .loss_scale = 1024,
                                         .loss_scale_window = 2};
        int64_t pre;
        bool agreed;
        CHECK(ah_train_loop(&tr, &lo, NULL, 0, &pre, &agreed, &err) == AH_OK, "loop: %s", err.msg);
        CHECK(tr.loss_scale == 2048, "after 2 clean steps the scale doubled: %g", tr.loss_scale);
        ah_trainer_free(&tr);
    } else {
        CHECK(false, "loop setup: %s", err.msg);
    }
    if (mf) fclose(mf);
    char line[4096];
    int steps = 0, overflows = 0;
    FILE *r = fopen(metrics, "r");
    while (r && fgets(line, sizeof line, r)) {
        steps += strstr(line, "\"step\"") != NULL && strstr(line, "\"event\"") == NULL;
        overflows += strstr(line, "\"overflow\"") != NULL;
    }
    if (r) fclose(r);
    CHECK(steps == STEPS && overflows == 0, "%d step lines, %d overflow events", steps, overflows);
    unlink(path);
    unlink(metrics);
    rmdir(dir);
    ah_dataset_close(&data);
    ah_plan_free(&plan);
    ah_comm_finalize();
    return ah_test_finish();
}
