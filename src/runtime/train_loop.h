/* The step loop of `autohet train` and the writer of its metrics JSONL (the schema is
 * runtime/protocol.h's: one step line per iteration, then the checkpoint session's events).
 *
 * Collective: every rank of the job calls ah_train_loop with the same start and options but for
 * the streams: only rank 0 passes progress, warn and metrics (the others NULL). A save that fails
 * (the session's "checkpoint" event with "ok": false) is a warning line on warn each time, naming
 * the root and the error; training goes on. With a cloud, a checkpoint event whose "cloud_error" or
 * "cloud_behind" says an upload failed or the cloud lacks the step saved before is a warning line
 * too, naming the cloud's newest complete step and the disk's. Ownership: the loop borrows the trainer, the session
 * and the streams; the metrics writers take the events they are given. Errors: a step, a dump or
 * the session that fails on this rank returns its error; the other ranks may then wait in a
 * collective, so the caller aborts the job. A step whose loss or gradient norm is not finite (no update applied; trainer.h) is agreed on by every rank: after
 * skip_nonfinite such steps, each logged as a "nonfinite" event with "skipped": true, the next
 * one is a "nonfinite" event with "skipped": false and every rank returns the same error with
 * *agreed set (the caller exits without aborting; rank 0 prints it). A step line holds null
 * where its loss or gradient norm is not finite, so the file stays JSON.
 *
 * fp16 (loss_scale_window > 0): dynamic loss scaling (runtime/loss_scale.h). A step whose
 * gradients overflow is skipped, the scale halved, and an "overflow" event written (step, the new
 * "loss_scale", "overflows" so far); it is not a non-finite step and uses none of skip_nonfinite. */
#ifndef AH_RUNTIME_TRAIN_LOOP_H
#define AH_RUNTIME_TRAIN_LOOP_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "runtime/ckpt_io.h"
#include "runtime/reconfig.h"
#include "runtime/trainer.h"

typedef struct ah_train_loop_opts {
    int64_t steps;         /* iterations in all: the loop runs start .. steps - 1 */
    const char *dump_dir;  /* NULL, or the full weights after dump_step updates go here */
    const char *grads_dir; /* NULL, or step dump_step's gradients go here */
    int64_t dump_step;
    FILE *progress;        /* rank 0: one progress line a step (NULL: none) */
    FILE *metrics;         /* rank 0: the metrics JSONL (NULL: none) */
    FILE *warn;            /* rank 0: a warning line for each failed save (NULL: none) */
    const char *local_root; /* the checkpoint root the warning names */
    const char *cloud;      /* the cloud tier (--cloud) the warnings name, NULL: none */
    int64_t skip_nonfinite; /* non-finite steps skipped before one stops the run */
    /* Validation: after every val_every-th step (0: none) and the last, the loss over val_batches global
     * batches of val (ah_trainer_eval), in the progress line and as the step line's "val_loss". */
    const ah_dataset_t *val; /* NULL: none */
    int64_t val_every, val_batches;
    /* fp16 loss scaling: the initial scale and the clean steps before it doubles (loss_scale.h);
     * window 0: none (fp32, bf16) */
    double loss_scale;
    int64_t loss_scale_window;
    /* In-place reconfiguration (runtime/reconfig.h): with reconfig_dir set (the run directory; only on a
     * world of joined jobs), its request is polled after every step's checkpoint session; when one is
     * due (its step past reconfig_after), *reconfig gets it, *reconfig_due is set and the loop returns
     * (*preempted_at -1) for the caller to reconfigure at that boundary. */
    const char *reconfig_dir;
    ah_reconfig_check_fn reconfig_check; /* the caller's check before a request is taken (reconfig.h) */
    void *reconfig_ctx;
    int64_t reconfig_after;
    ah_reconfig_req_t *reconfig;
    bool *reconfig_due;
} ah_train_loop_opts_t;

/* Steps tr from iteration `start`, after each step asking the checkpoint session ck (NULL: none)
 * to save or to stop. *preempted_at: -1 when every step is done, else the steps done when a
 * preemption notice stopped the job (preempted.json is written; exit AH_PROTO_EXIT_PREEMPTED). */
ah_status_t ah_train_loop(ah_trainer_t *tr, const ah_train_loop_opts_t *o, ah_ckpt_session_t *ck, int64_t start,
                          int64_t *preempted_at, bool *agreed, ah_error_t *err);

/* One line per event: ev is an event object or an array of them; takes ev (f NULL: dropped). */
void ah_metrics_write_events(FILE *f, json_t *ev);

#endif
