/* Inside `autohet train` only (cli_train.c, cli_train_inplace.c): the run's flags and the phases the in-place
 * reconfiguration (runtime/reconfig.h) runs again on a new world. */
#ifndef AH_CLI_CLI_TRAIN_H
#define AH_CLI_CLI_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "plan/plan.h"
#include "runtime/data.h"
#include "runtime/reconfig.h"
#include "runtime/trainer.h"
#include "runtime/ckpt_io.h"

typedef struct {
    const char *plan, *data, *val_data, *model, *cluster, *metrics, *dump_dir, *grads_dir;
    int64_t steps, warmup, seed, dump_step, skip_nonfinite, val_every, val_batches;
    double lr, wd, clip;
    double loss_scale;         /* fp16: initial dynamic loss scale (runtime/loss_scale.h) */
    int64_t loss_scale_window; /* fp16: clean steps before it doubles */
    bool loss_scale_given;     /* --loss-scale or --loss-scale-window was on the command line */
    bool quiet, check_host;
    /* checkpoints and preemption (src/runtime/ckpt_io.h) */
    const char *local_root, *cloud, *s3_endpoint, *run_dir;
    const char *init_from; /* a Hugging Face directory to start from (runtime/init_hf.h) */
    int64_t ckpt_every, keep;
    double grace_s;
    bool grace_given, dump_step_given; /* --grace-s, --dump-step were on the command line */
    bool keep_given;                   /* --keep was */
    bool val_flag_given;               /* --val-every or --val-batches was */
    bool seed_given;                   /* --seed was */
    bool resume, cloud_only;
    /* the cloud's patience (--cloud-timeout, --cloud-retries) and --start-over-if-unreadable */
    int64_t cloud_timeout, cloud_retries;
    bool cloud_patience_given, start_over;
    bool reschedule; /* --reschedule: a resume may change the learning-rate schedule */
    bool ckpt_sync;  /* --ckpt-sync: saves block the step (ckpt_io.h) */
    bool no_overlap; /* --no-overlap-grad-sync (trainer.h) */
    bool allow_wan;  /* --allow-unencrypted-wan (plan_out.h ah_plan_wan_check) */
    double replica_gb; /* --replica-memory-gb, --replica-root: in-memory peer replicas (ckpt_io.h) */
    bool replica_if_pays; /* --replica-when-it-pays (ckpt_io.h) */
    const char *replica_root;
    bool moved_in; /* an in-place change whose state moved rank to rank (cli_train_inplace.c): the session
                    * opens as for --resume, no resume is made (the caller loads the moved state) */
} args_t;

/* Phase 1, on every rank alone: the plan, checked against the job and the flags (ranks < 0: any device count). */
ah_status_t ah_cli_train_load_plan(const args_t *a, int ranks, ah_plan_t *plan, bool *have, ah_error_t *err);
/* Phase 1b, on every rank alone: --data and --val-data, for the plan's model and sequence length. */
ah_status_t ah_cli_train_open_data(const args_t *a, const ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val,
                                   ah_error_t *err);
/* Phase 2, collective: the trainer, the checkpoint session and, with --resume, the state restored. */
ah_status_t ah_cli_train_set_up(const args_t *a, const ah_plan_t *plan, const ah_dataset_t *data, FILE *metrics,
                                ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start,
                                double *resume_s, ah_error_t *err);
/* A failure's message (rank 0) and the exit code. */
int ah_cli_train_fail(const args_t *a, int rank, const ah_error_t *err);
/* The start-up lines (rank 0). */
void ah_cli_train_say_start(const args_t *a, const ah_plan_t *plan, int ranks);
/* Phase 3: the steps from `start` until the end, a notice or a reconfiguration due (*due, req). */
int ah_cli_train_run_steps(ah_trainer_t *tr, const args_t *a, const ah_dataset_t *val, FILE *metrics,
                           ah_ckpt_session_t *ck, int64_t start, int64_t after, ah_reconfig_req_t *req, bool *due);

/* ah_cli_train_reconfig_check's ctx: the run's flags and its trainer (the plan and data it trains). */
typedef struct {
    const args_t *a;
    const ah_trainer_t *tr;
} ah_cli_reconfig_ctx_t;
/* cli_train_inplace.c: rank 0's check of a request (reconfig.h ah_reconfig_check_fn, ctx an ah_cli_reconfig_ctx_t):
 * the next plan loads, and the state can go on under it (ckpt_io.h ah_ckpt_check_continues). */
bool ah_cli_train_reconfig_check(const ah_reconfig_req_t *req, int stay, void *ctx, char *why, size_t why_size);
/* The steps, and at each in-place reconfiguration the change of world and plan: the exit code; 0 for a rank
 * that left. */
int ah_cli_train_in_place(args_t *a, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                          ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t start);
/* A job admitted into a running world at an in-place join (comm.h ah_comm_world_late): sets up the request's
 * plan with the world, resumes from its step and trains on; the exit code. */
int ah_cli_train_late(args_t *a, ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val, FILE **metrics,
                      ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck);

#endif
