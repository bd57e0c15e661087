/* autohet train: real training of a plan, one MPI rank per device (src/runtime/trainer.h).
 *
 * Every rank parses the flags and loads the plan and the data; start-up failures are agreed on by
 * all ranks (ah_comm_agree), rank 0 prints the first failing rank's message, and every rank exits
 * with the same non-zero code, so a bad input never leaves a rank waiting. A failure inside the
 * step loop aborts the whole job (MPI_Abort) after the failing rank prints its message. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/host_memory.h"
#include "ckpt/test_hook.h"
#include "cli/cli.h"
#include "cli/cli_train.h"
#include "core/timing.h"
#include "kernels/cpu/blas_kernel.h"
#include "comm/comm.h"
#include "ckpt/import_hf.h"
#include "plan/plan.h"
#include "runtime/ckpt_io.h"
#include "runtime/data.h"
#include "runtime/host_check.h"
#include "runtime/init_hf.h"
#include "runtime/loss_scale.h"
#include "runtime/pipe_p2p.h"
#include "runtime/preempt.h"
#include "runtime/protocol.h"
#include "runtime/reconfig.h"
#include "runtime/train_loop.h"
#include "runtime/dp_hier.h"
#include "runtime/trainer.h"


ah_status_t ah_cli_check_optimizer_flags(double lr, int64_t warmup, double wd, double clip, ah_error_t *err) {
    if (!(lr > 0) || warmup < 0 || !(wd >= 0) || !(clip >= 0))
        return ah_error_set(err, AH_ERR_USAGE, "--lr must be > 0 and --warmup, --weight-decay, "
                            "--grad-clip >= 0");
    return AH_OK;
}

ah_status_t ah_cli_check_init_flags(bool seed_given, const char *init_from, ah_error_t *err) {
    if (seed_given && init_from)
        return ah_error_set(err, AH_ERR_USAGE, "--seed draws the initial weights, which --init-from %s gives "
                            "instead (the seed would be ignored): drop one", init_from);
    return AH_OK;
}

/* The checkpoint and preemption flags, each of which needs the tier it acts on: one given without
 * it would do nothing (or fail only after the set-up). */
static ah_status_t check_ckpt_flags(const args_t *a, ah_error_t *err) {
    if ((a->ckpt_every > 0 || a->resume) && !a->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "%s need%s --local-root DIR (node X's checkpoints go to DIR/X/)",
                            a->ckpt_every > 0 && a->resume ? "--ckpt-every and --resume"
                            : a->resume                    ? "--resume"
                                                           : "--ckpt-every",
                            a->ckpt_every > 0 && a->resume ? "" : "s");
    if (a->cloud && !a->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "--cloud needs --local-root DIR: shards are written locally "
                            "first, then uploaded");
    if (a->cloud_only && !a->cloud)
        return ah_error_set(err, AH_ERR_USAGE, "--cloud-only needs --cloud s3://BUCKET/PREFIX");
    if (a->s3_endpoint && !a->cloud)
        return ah_error_set(err, AH_ERR_USAGE, "--s3-endpoint needs --cloud s3://BUCKET/PREFIX");
    if (a->cloud_patience_given && !a->cloud)
        return ah_error_set(err, AH_ERR_USAGE, "--cloud-timeout and --cloud-retries need --cloud s3://BUCKET/PREFIX");
    if (a->start_over && (!a->resume || !a->cloud))
        return ah_error_set(err, AH_ERR_USAGE, "--start-over-if-unreadable needs --resume and --cloud: it says what a "
                            "resume does when the cloud tier cannot be listed");
    if (a->grace_given && !a->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "--grace-s needs --local-root DIR, where a preemption "
                            "notice saves");
    if (a->keep_given && !a->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "--keep %lld needs --local-root DIR, whose checkpoints it keeps",
                            (long long)a->keep);
    if ((a->replica_gb > 0 || a->replica_root) && !a->local_root)
        return ah_error_set(err, AH_ERR_USAGE, "--replica-memory-gb and --replica-root need --local-root DIR: the "
                            "replicas are of its checkpoints");
    if (a->replica_root && !(a->replica_gb > 0))
        return ah_error_set(err, AH_ERR_USAGE, "--replica-root needs --replica-memory-gb G (> 0): without it there "
                            "are no replicas");
    if (a->reschedule && !a->resume)
        return ah_error_set(err, AH_ERR_USAGE, "--reschedule needs --resume: it lets a resume change the schedule");
    return AH_OK;
}

/* Phase 1, on every rank alone: the plan, checked against the job and the flags. */
ah_status_t ah_cli_train_load_plan(const args_t *a, int ranks, ah_plan_t *plan, bool *have, ah_error_t *err) {
    ah_cluster_t override;
    bool have_override = false;
    ah_status_t s = AH_OK;
    if (!a->plan || !a->data) {
        return ah_error_set(err, AH_ERR_USAGE, "--plan and --data are required (autohet train "
                            "--help); make a data file with `autohet tokenize TEXT -o FILE`");
    }
    if ((s = ah_cli_check_optimizer_flags(a->lr, a->warmup, a->wd, a->clip, err)) != AH_OK) return s;
    if (a->dump_step_given && !a->dump_dir && !a->grads_dir)
        return ah_error_set(err, AH_ERR_USAGE, "--dump-step needs --dump-params DIR or --dump-grads DIR");
    if (a->dump_dir && (a->dump_step < 0 || a->dump_step > a->steps))
        return ah_error_set(err, AH_ERR_USAGE, "--dump-step: expected 0 .. --steps (%lld), got %lld",
                            (long long)a->steps, (long long)a->dump_step);
    if (a->grads_dir && (a->dump_step < 0 || a->dump_step >= a->steps))
        return ah_error_set(err, AH_ERR_USAGE, "--dump-step with --dump-grads: expected 0 .. --steps - 1 "
                            "(%lld), got %lld", (long long)a->steps - 1, (long long)a->dump_step);
    if ((s = check_ckpt_flags(a, err)) != AH_OK) return s;
    if (a->val_flag_given && !a->val_data)
        return ah_error_set(err, AH_ERR_USAGE, "--val-every and --val-batches need --val-data FILES (held-out shards)");
    if ((s = ah_cli_check_init_flags(a->seed_given, a->init_from, err)) != AH_OK) return s;
    if (a->cluster) {
        if ((s = ah_cluster_open(a->cluster, &override, err)) != AH_OK) return s;
        have_override = true;
    }
    s = ah_plan_load(a->plan, have_override ? &override : NULL, plan, err);
    if (have_override) ah_cluster_free(&override);
    if (s != AH_OK) return s;
    *have = true;
    if ((s = ah_plan_validate(plan, err)) != AH_OK) return ah_error_prefix(err, "%s", a->plan);
    if ((s = ah_plan_wan_check(plan, a->allow_wan, err)) != AH_OK) return ah_error_prefix(err, "%s", a->plan);
    char why[160];
    if (!ah_loss_scale_check(a->loss_scale, a->loss_scale_window, why, sizeof why))
        return ah_error_set(err, AH_ERR_USAGE, "--loss-scale / --loss-scale-window: %s", why);
    if (a->loss_scale_given && plan->train.precision != AH_PREC_FP16)
        return ah_error_set(err, AH_ERR_USAGE, "--loss-scale and --loss-scale-window apply to fp16 plans only; %s "
                            "trains %s, which needs no loss scaling (drop them)", a->plan,
                            ah_precision_name(plan->train.precision));
    if (a->model) {
        ah_model_t m;
        if ((s = ah_model_load(a->model, &m, err)) != AH_OK) return s;
        ah_model_diff_t d;
        if (ah_model_diff(&m, &plan->model, false, &d))
            return ah_error_set(err, AH_ERR_INVALID, "%s is a plan for model %s, but --model is %s, whose %s is %s "
                                "where the plan's is %s; make a plan for this model with autohet plan, or drop "
                                "--model", a->plan, plan->model.name, a->model, d.field, d.a, d.b);
    }
    /* The directory's config first, on every rank alone: a mismatch is said before any set-up. */
    if (a->init_from && (s = ah_hf_import_check_config(a->init_from, &plan->model, err)) != AH_OK)
        return ah_error_prefix(err, "--init-from");
    /* asynchronous checkpoints keep a snapshot in host memory, in-memory replicas their tmpfs copies: a
     * node that gives its host memory must hold them (ckpt/host_memory.h) */
    const bool snapshots = a->local_root && a->ckpt_every > 0 && !a->ckpt_sync;
    const double replicas = a->local_root && a->ckpt_every > 0 ? a->replica_gb : 0;
    if ((snapshots || replicas > 0) && (s = ah_host_memory_check(plan, snapshots, replicas, NULL, err)) != AH_OK)
        return ah_error_prefix(err, "%s", a->plan);
    const int need = ah_plan_device_count(plan);
    if (ranks >= 0 && need != ranks)
        return ah_error_set(err, AH_ERR_USAGE, "%s has %d devices but the job has %d ranks; run one "
                            "rank per device: mpirun -np %d autohet train ...", a->plan, need, ranks, need);
    return AH_OK;
}

/* Phase 1b, on every rank alone: --data and --val-data, for the plan's model and sequence length. */
ah_status_t ah_cli_train_open_data(const args_t *a, const ah_plan_t *plan, ah_dataset_t *data, ah_dataset_t *val,
                             ah_error_t *err) {
    const int64_t V = plan->model.vocab, T = plan->train.seq_len, B = plan->train.global_batch;
    ah_status_t s = ah_dataset_open(a->data, "--data", V, T, data, err);
    if (s == AH_OK && a->val_data) s = ah_dataset_open(a->val_data, "--val-data", V, T, val, err);
    if (s == AH_OK && a->val_data && val->samples < a->val_batches * B && ah_comm_rank(ah_comm_world()) == 0)
        fprintf(stderr, "autohet train: warning: --val-data holds %lld sample%s, fewer than --val-batches %lld x the "
                "global batch %lld: some are counted more than once\n", (long long)val->samples,
                val->samples == 1 ? "" : "s", (long long)a->val_batches, (long long)B);
    return s;
}

/* Phase 2, collective: the trainer, the checkpoint session and, with --resume, the state restored;
 * *start gets the iteration to run first, *resume_s the restore's seconds. */
ah_status_t ah_cli_train_set_up(const args_t *a, const ah_plan_t *plan, const ah_dataset_t *data, FILE *metrics,
                          ah_trainer_t *tr, bool *have_tr, ah_ckpt_session_t **ck, int64_t *start, double *resume_s,
                          ah_error_t *err) {
    ah_comm_t *world = ah_comm_world();
    const int rank = ah_comm_rank(world);
    ah_train_opts_t o;
    ah_train_opts_default(&o);
    o.steps = a->steps;
    o.lr = a->lr;
    o.warmup = a->warmup;
    o.weight_decay = a->wd;
    o.grad_clip = a->clip;
    o.seed = (uint64_t)a->seed;
    o.dump_dir = a->dump_dir;
    o.dump_step = a->dump_dir ? a->dump_step : -1;
    /* initialised below: from --init-from, or randomly, and with --resume only when no checkpoint
     * is found (a relaunch resumes, never re-initialises) */
    o.defer_init = a->resume || a->init_from;
    o.no_overlap_grad_sync = a->no_overlap;
    bool init_hf = a->init_from != NULL; /* cleared when --resume finds a checkpoint */
    ah_status_t s = ah_comm_agree(world, ah_trainer_setup(tr, plan, data, &o, err), err);
    *have_tr = s == AH_OK;
    char hier[256];
    if (s == AH_OK && tr->rank == 0 && !a->quiet && ah_dp_hier_describe(tr, hier, sizeof hier))
        printf("autohet train: DP sync: %s\n", hier);
    if (s == AH_OK && !a->quiet && tr->cp.c && ah_comm_rank(tr->cp.c) == 0) /* each CP group's first rank */
        printf("autohet train: CP ring of rank %d's group (%d ranks): key/value blocks over %s\n", tr->rank,
               ah_comm_size(tr->cp.c), ah_cp_ring_exchange(&tr->cp_ring));
    if (s == AH_OK && !a->quiet && tr->pipe.c && ah_comm_rank(tr->pipe.c) == 0 && tr->role.tp_rank == 0 &&
        tr->role.cp_rank == 0) /* each pipeline's first device */
        printf("autohet train: pipeline %d's transfers (%d devices): over %s\n", tr->role.pipeline,
               ah_comm_size(tr->pipe.c), ah_p2p_kind(tr));
    if (s == AH_OK && (a->local_root || a->run_dir)) { /* --cloud and --resume need --local-root */
        ah_ckpt_opts_t co = {.local_root = a->local_root, .cloud = a->cloud, .s3_endpoint = a->s3_endpoint,
                             .every = a->ckpt_every, .steps = a->steps, .run_dir = a->run_dir, .grace_s = a->grace_s,
                             .cloud_only = a->cloud_only, .resume = a->resume, .keep = (int)a->keep,
                             .reschedule = a->reschedule,
                             .cloud_timeout_s = (int)a->cloud_timeout, .cloud_retries = (int)a->cloud_retries,
                             .start_over_if_unreadable = a->start_over, .sync = a->ckpt_sync,
                             .replica_memory_gb = a->replica_gb, .replica_root = a->replica_root,
                             .replica_if_pays = a->replica_if_pays};
        s = ah_ckpt_session_open(tr, &co, ck, err);
    }
    if (s == AH_OK && a->resume && !a->moved_in) {
        json_t *ev = NULL;
        bool found = false;
        const double t0 = ah_now_s();
        s = ah_ckpt_session_resume(*ck, start, &found, &ev, err);
        *resume_s = ah_now_s() - t0;
        if (s == AH_OK && !found && !a->init_from) s = ah_trainer_init_params(tr, err);
        if (s == AH_OK && rank == 0 && found) {
            printf("autohet train: resumed from step %lld%s\n", (long long)*start,
                   a->init_from ? " (--init-from not used: the checkpoint wins)" : "");
            const json_t *fixed = json_object_get(ev, AH_PROTO_RECOVER_REPAIRED);
            for (size_t i = 0; i < json_array_size(fixed); i++) /* copies rejected, another tier's taken */
                printf("autohet train: step %lld repaired at the restore: %s\n", (long long)*start,
                       json_string_value(json_array_get(fixed, i)));
        }
        else if (s == AH_OK && rank == 0) { /* the note says why: no committed step anywhere, ... */
            const char *why = json_string_value(json_object_get(ev, AH_PROTO_RECOVER_NOTE));
            printf("autohet train: %s: starting from %s\n", why ? why : "no complete checkpoint in any tier",
                   a->init_from ? a->init_from : "scratch");
        }
        init_hf = !found; /* the checkpoint wins */
        ah_metrics_write_events(metrics, ev);
        if (s == AH_OK && *start > a->steps)
            s = ah_error_set(err, AH_ERR_USAGE, "the checkpoint is at step %lld, past --steps %lld",
                             (long long)*start, (long long)a->steps);
    }
    if (a->init_from) {
        /* Every rank reaches this agreement (the flag is the same on all), failed before or not;
         * each reads its own stage's tensors only. */
        int loaded = 0, skipped = 0;
        ah_status_t l = s;
        if (l == AH_OK && init_hf) l = ah_gpt_init_from_hf(&tr->stage, a->init_from, &loaded, &skipped, err);
        s = ah_comm_agree(world, l, err);
        if (s == AH_OK && init_hf && rank == 0)
            printf("autohet train: initialised from %s (Hugging Face; rank 0 read %d tensors, %d buffers "
                   "skipped); optimizer state zero, step 0\n", a->init_from, loaded, skipped);
    }
    return s;
}

/* Says on stderr when the steps from `start` will read samples past the end of a pass. */
static void warn_repeat(const ah_dataset_t *d, const ah_trainer_t *tr, const ah_plan_t *plan, int64_t start,
                        int64_t steps) {
    const int64_t B = plan->train.global_batch;
    const int64_t i = ah_dataset_repeat_step(d, ah_trainer_data_position(tr, start), start, B, steps);
    if (i >= 0)
        fprintf(stderr, "autohet train: warning: the run will see its data more than once: --data holds %lld "
                "sample%s of %lld + 1 tokens (%lld tokens in %d shard%s), %lld a step; step %lld (of 0..%lld) starts "
                "reading it again\n", (long long)d->samples, d->samples == 1 ? "" : "s", (long long)d->T,
                (long long)d->tokens, d->n, d->n == 1 ? "" : "s", (long long)B, (long long)i, (long long)steps - 1);
}

/* The line a preemption notice ends the run with: whether the state after `at` steps (steps 0..at-1:
 * numbered from 0, as everywhere on the console) was saved, and where; if not, the newest checkpoint
 * (`saved`, -1: none) a relaunch resumes from. A checkpoint's step is where a resume starts. */
static void say_preempted(const args_t *a, int64_t saved, int64_t at) {
    if (at > 0) fprintf(stderr, "autohet train: preemption notice: stopped after step %lld; ", (long long)at - 1);
    else fprintf(stderr, "autohet train: preemption notice: stopped before step 0; ");
    if (saved == at)
        fprintf(stderr, "its state is saved as checkpoint step %lld in --local-root %s (a resume starts at step "
                "%lld)\n", (long long)at, a->local_root, (long long)at);
    else if (!a->local_root)
        fprintf(stderr, "its state is not saved (no --local-root)\n");
    else if (saved >= 0)
        fprintf(stderr, "its state is not saved: the newest checkpoint is step %lld, a --resume from --local-root %s "
                "starts there and redoes steps %lld..%lld\n", (long long)saved, a->local_root, (long long)saved,
                (long long)at - 1);
    else
        fprintf(stderr, "its state is not saved and --local-root %s holds no checkpoint of this run\n", a->local_root);
}

/* This rank stops the job on err: its message, and with --run-dir the agent's RUN_DIR/failed.json
 * (best effort: the message is out already). Returns the exit code. */
int ah_cli_train_fail(const args_t *a, int rank, const ah_error_t *err) {
    const int rc = ah_cli_fail("train", err);
    ah_error_t e;
    if (a->run_dir && ah_preempt_write_failure(a->run_dir, rank, err, &e) != AH_OK)
        fprintf(stderr, "autohet train: warning: %s\n", e.msg);
    return rc;
}

/* After the last step, with a cloud (collective): waits for the last uploads and says how far the
 * cloud is, on stderr and as the metrics' "cloud" event. */
static void say_cloud(int rank, const args_t *a, ah_ckpt_session_t *ck, FILE *metrics) {
    json_t *ev = NULL;
    ah_error_t err;
    if (!a->cloud) return;
    if (ah_ckpt_session_finish(ck, &ev, &err) != AH_OK) {
        if (rank == 0) fprintf(stderr, "autohet train: warning: the cloud's state is not known: %s\n", err.msg);
        return;
    }
    if (rank != 0 || !ev || json_integer_value(json_object_get(ev, AH_PROTO_STEP)) < 0) { /* nothing saved */
        ah_metrics_write_events(metrics, ev);
        return;
    }
    const int64_t c = json_integer_value(json_object_get(ev, "cloud_step"));
    const int64_t d = json_integer_value(json_object_get(ev, AH_PROTO_STEP));
    const char *failed = json_string_value(json_object_get(ev, "cloud_error"));
    if (failed) fprintf(stderr, "autohet train: warning: cloud upload failed: %s\n", failed);
    char newest[48] = "none";
    if (c >= 0) snprintf(newest, sizeof newest, "step %lld", (long long)c);
    if (c >= d)
        fprintf(stderr, "autohet train: cloud tier %s: newest complete step %lld, the disk's too (the last uploads "
                "took %.1f s after the last step)\n", a->cloud, (long long)c,
                json_number_value(json_object_get(ev, "seconds")));
    else
        fprintf(stderr, "autohet train: warning: cloud tier %s is behind: newest complete step %s, the disk's step "
                "%lld\n", a->cloud, newest, (long long)d);
    ah_metrics_write_events(metrics, ev);
}

/* Phase 3: the steps (runtime/train_loop.h). Returns the exit code: 0, or AH_PROTO_EXIT_PREEMPTED
 * after a preemption notice, or a non-finite step's code, or an I/O error's when the last step's
 * save failed (agreed on by every rank); any other failure aborts the job. */
int ah_cli_train_run_steps(ah_trainer_t *tr, const args_t *a, const ah_dataset_t *val, FILE *metrics, ah_ckpt_session_t *ck,
                     int64_t start, int64_t after, ah_reconfig_req_t *req, bool *due) {
    ah_cli_reconfig_ctx_t rc = {a, tr};
    const ah_train_loop_opts_t o = {.steps = a->steps, .dump_dir = a->dump_dir, .grads_dir = a->grads_dir,
                                    .dump_step = a->dump_step, .progress = tr->rank == 0 && !a->quiet ? stdout : NULL,
                                    .warn = tr->rank == 0 ? stderr : NULL, .local_root = a->local_root, .cloud = a->cloud,
                                    .metrics = metrics, .skip_nonfinite = a->skip_nonfinite,
                                    .val = val->n ? val : NULL, .val_every = a->val_every, .val_batches = a->val_batches,
                                    .loss_scale = a->loss_scale,
                                    .loss_scale_window = tr->plan->train.precision == AH_PREC_FP16
                                                             ? a->loss_scale_window : 0,
                                    /* in-place reconfiguration: on a world of joined jobs (reconfig.h) */
                                    .reconfig_dir = ah_comm_world_job() >= 0 ? a->run_dir : NULL,
                                    .reconfig_check = ah_cli_train_reconfig_check, .reconfig_ctx = &rc,
                                    .reconfig_after = after, .reconfig = req, .reconfig_due = due};
    int64_t preempted_at;
    bool agreed;
    ah_error_t err;
    if (ah_train_loop(tr, &o, ck, start, &preempted_at, &agreed, &err) != AH_OK) {
        if (agreed) return tr->rank == 0 ? ah_cli_train_fail(a, tr->rank, &err) : ah_status_exit_code(err.code);
        ah_comm_abort(ah_cli_train_fail(a, tr->rank, &err));
    }
    if (*due) return 0; /* the caller reconfigures at req->step */
    if (preempted_at < 0) say_cloud(tr->rank, a, ck, metrics);
    if (preempted_at < 0) { /* the last step's save, when one was due, failing ends the run non-zero */
        if (ah_ckpt_session_final(ck, a->steps, &err) != AH_OK)
            return tr->rank == 0 ? ah_cli_train_fail(a, tr->rank, &err) : ah_status_exit_code(err.code);
        char line[700];
        ah_ckpt_session_describe(ck, a->steps, line, sizeof line);
        if (tr->rank == 0 && a->local_root) fprintf(stderr, "autohet train: %s\n", line);
        return 0;
    }
    if (tr->rank == 0) say_preempted(a, ah_ckpt_session_last_saved(ck), preempted_at);
    return AH_PROTO_EXIT_PREEMPTED;
}

/* The start-up lines: the job, and the OpenBLAS kernel the CPU matmuls run, with a warning when it
 * is far below what this CPU allows (kernels/cpu/blas_kernel.h). */
void ah_cli_train_say_start(const args_t *a, const ah_plan_t *plan, int ranks) {
    char blas[160], advice[512];
    ah_cpu_blas_describe(blas, sizeof blas);
    printf("autohet train: %s, %d rank%s, %d pipeline%s, tp %d, %lld steps of %lld tokens\n"
           "autohet train: CPU matmuls: %s\n",
           plan->model.name, ranks, ranks == 1 ? "" : "s", plan->n_pipelines, plan->n_pipelines == 1 ? "" : "s",
           plan->tp, (long long)a->steps, (long long)(plan->train.global_batch * plan->train.seq_len), blas);
    if (ah_cpu_blas_advice(advice, sizeof advice)) fprintf(stderr, "autohet train: warning: %s\n", advice);
}

/* The flags of `autohet train`, pointing into *a: fills flags (room for AH_TRAIN_FLAGS_MAX) and
 * returns how many. */
#define AH_TRAIN_FLAGS_MAX 64
static int train_flags(args_t *a, ah_flag_t *flags) {
    const ah_flag_t table[] = {
        {"--plan", AH_FLAG_STR, &a->plan, "FILE", "plan.json to run (required)", false},
        {"--data", AH_FLAG_STR, &a->data, "FILES", "llm.c token files, uint16 or uint32 (required; autohet tokenize): "
         "a path, a quoted glob ('train_*.bin') or a comma-separated list of them, taken in name order", false},
        {"--val-data", AH_FLAG_STR, &a->val_data, "FILES", "held-out token files (as --data) for a validation loss: "
         "in the progress line and the step line's \"val_loss\"", false},
        {"--val-every", AH_FLAG_INT_IN(1, AH_CLI_STEPS_MAX,
                                       .note = "leave it out to validate after the last step only"),
         &a->val_every, "K", "validate after every K-th step (default: after the last only)",
         false},
        {"--val-batches", AH_FLAG_INT_IN(1, AH_CLI_BATCH_MAX, .note = "global batches a validation reads"),
         &a->val_batches, "N", "global batches of --val-data each validation reads, "
         "from its first sample (default 4)", false},
        {"--model", AH_FLAG_STR, &a->model, "M", "check that the plan is for this model", false},
        {"--cluster", AH_FLAG_STR, &a->cluster, "C", "replace the plan's cluster (built-in or file)", false},
        {"--steps", AH_FLAG_INT_IN(1, AH_CLI_STEPS_MAX), &a->steps, "N", "iterations (default 20)", false},
        {"--lr", AH_FLAG_NUM, &a->lr, "X", AH_CLI_HELP_LR, false},
        {"--warmup", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX), &a->warmup, "N", AH_CLI_HELP_WARMUP, false},
        {"--weight-decay", AH_FLAG_NUM, &a->wd, "X", AH_CLI_HELP_WD, false},
        {"--grad-clip", AH_FLAG_NUM, &a->clip, "X", AH_CLI_HELP_CLIP, false},
        {"--seed", AH_FLAG_INT_IN(0, AH_CLI_SEED_MAX), &a->seed, "N", AH_CLI_HELP_SEED, false},
        {"--skip-nonfinite", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX, .note = "0 stops at the first non-finite step"),
         &a->skip_nonfinite, "N", "skip up to N steps whose loss or gradient "
         "norm is not finite (no update; each a \"nonfinite\" event), then stop (default 0: stop at the first)", false},
        {"--loss-scale", AH_FLAG_NUM_IN(AH_LOSS_SCALE_MIN, AH_LOSS_SCALE_MAX), &a->loss_scale, "S", "fp16 plans: the initial dynamic loss scale, a power of two "
         "from 1 to 2^24 (default 65536); an overflowing step is skipped and halves it (an \"overflow\" event)", false},
        {"--loss-scale-window", AH_FLAG_INT_IN(1, AH_CLI_STEPS_MAX), &a->loss_scale_window, "N", "fp16 plans: clean steps before the loss "
         "scale doubles (default 1000)", false},
        {"--metrics", AH_FLAG_STR, &a->metrics, "FILE", "write one JSON object per step (JSONL)", false},
        {"--dump-params", AH_FLAG_STR, &a->dump_dir, "DIR", "write the full weights (params.bin/.json)", false},
        {"--dump-grads", AH_FLAG_STR, &a->grads_dir, "DIR", "write step N's full gradients, before clipping (grads.bin/.json)", false},
        {"--dump-step", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX), &a->dump_step, "N", "... params after N updates (default 0: initial); grads of step N", false},
        {"--quiet", AH_FLAG_BOOL, &a->quiet, NULL, "no per-step progress line", false},
        {"--check-host", AH_FLAG_BOOL, &a->check_host, NULL, "refuse to start unless this host's name is the node the "
         "plan gives this rank (without it, only a rank on another node of the plan is refused)", false},
        ah_cli_shared_flag("--ckpt-every", &a->ckpt_every),
        {"--local-root", AH_FLAG_STR, &a->local_root, "DIR", "checkpoints: node X's disk is DIR/X/", false},
        ah_cli_shared_flag("--ckpt-sync", &a->ckpt_sync),
        ah_cli_shared_flag("--no-overlap-grad-sync", &a->no_overlap),
        ah_cli_shared_flag("--allow-unencrypted-wan", &a->allow_wan),
        ah_cli_shared_flag("--replica-memory-gb", &a->replica_gb),
        ah_cli_shared_flag("--replica-root", &a->replica_root),
        {"--replica-when-it-pays", AH_FLAG_BOOL, &a->replica_if_pays, NULL, "with --replica-memory-gb: the periodic "
         "saves are not replicated under a plan whose every piece is on two nodes' disks (a notice's save still is; "
         "autohet run passes it)", false},
        {"--keep", AH_FLAG_INT_IN(1, AH_CKPT_KEEP_MAX), &a->keep, "N", "committed checkpoint steps kept on each node's "
         "disk and in the cloud; older ones are deleted after a new step commits everywhere (default 2)", false},
        ah_cli_shared_flag("--cloud", &a->cloud),
        {"--s3-endpoint", AH_FLAG_STR, &a->s3_endpoint, "URL", "S3-compatible endpoint (default: AWS)", false},
        {"--cloud-timeout", AH_FLAG_INT_IN(1, 3600), &a->cloud_timeout, "S", "an S3 request with no progress for S "
         "seconds fails (default 30)", false},
        {"--cloud-retries", AH_FLAG_INT_IN(0, 100), &a->cloud_retries, "N", "--resume lists the cloud N more times "
         "(1 s, 2 s, ... apart) before it counts as unreadable (default 3)", false},
        {"--resume", AH_FLAG_BOOL, &a->resume, NULL, "start from the newest complete checkpoint in any tier; a cloud "
         "that cannot be listed stops it when no other tier has a step", false},
        {"--reschedule", AH_FLAG_BOOL, &a->reschedule, NULL, "with --resume: let --steps, --warmup or --lr differ from "
         "the checkpoint's (the cosine learning-rate schedule changes from the resumed step on; without it, refused)",
         false},
        {"--start-over-if-unreadable", AH_FLAG_BOOL, &a->start_over, NULL, "with --resume: when the cloud cannot be "
         "listed and no other tier has a step, train from step 0 instead of stopping", false},
        {"--init-from", AH_FLAG_STR, &a->init_from, "DIR", "start from a Hugging Face model directory (config.json + "
         "model.safetensors or sharded files; F32/BF16/F16); with --resume only when no checkpoint exists", false},
        {"--run-dir", AH_FLAG_STR, &a->run_dir, "DIR", "write rank-R.json and, on SIGTERM, preempted.json here (made if missing)", false},
        {"--grace-s", AH_FLAG_NUM_IN(0, 86400), &a->grace_s, "S", "preemption grace period: save on SIGTERM if it fits (default 30; 0: no save)", false},
        {"--cloud-only", AH_FLAG_BOOL, &a->cloud_only, NULL, "every disk is dropped at a stop (autohet run --recovery "
         "cloud-only): no save on SIGTERM", false},
    };
    const int n = (int)(sizeof table / sizeof table[0]);
    _Static_assert(sizeof table / sizeof table[0] <= AH_TRAIN_FLAGS_MAX, "AH_TRAIN_FLAGS_MAX is too small");
    memcpy(flags, table, sizeof table);
    return n;
}

/* Which flags were given where the default alone cannot tell. */
static void note_given(args_t *a, const ah_flag_t *flags, int n_flags) {
    a->grace_given = ah_cli_flag_seen(flags, n_flags, "--grace-s");
    a->loss_scale_given = ah_cli_flag_seen(flags, n_flags, "--loss-scale") ||
                          ah_cli_flag_seen(flags, n_flags, "--loss-scale-window");
    a->dump_step_given = ah_cli_flag_seen(flags, n_flags, "--dump-step");
    a->val_flag_given = ah_cli_flag_seen(flags, n_flags, "--val-every") || ah_cli_flag_seen(flags, n_flags, "--val-batches");
    a->seed_given = ah_cli_flag_seen(flags, n_flags, "--seed");
    a->keep_given = ah_cli_flag_seen(flags, n_flags, "--keep");
    a->cloud_patience_given = ah_cli_flag_seen(flags, n_flags, "--cloud-timeout") ||
                              ah_cli_flag_seen(flags, n_flags, "--cloud-retries");
}

/* The end of a run on every rank: the memory report when it trained (rank 0 of the world trained last:
 * every rank's high-water mark; not after a set-up refused, whose one message is rank 0's error), the
 * checkpoint session's uploads, everything freed, MPI finalized; returns rc. */
static int finish(int rc, bool trained, ah_plan_t *plan, bool have_plan, ah_dataset_t *data, ah_dataset_t *val,
                  FILE *metrics, ah_trainer_t *tr, bool have_tr, ah_ckpt_session_t *ck) {
    ah_comm_t *world = ah_comm_world();
    ah_error_t err;
    if (trained && have_tr && ah_comm_rank(world) == 0) {
        fprintf(stderr, "autohet train: memory high-water mark per rank (bytes):");
        for (int r = 0; r < ah_comm_size(world); r++) fprintf(stderr, " %lld", (long long)tr->memory_high[r]);
        fprintf(stderr, "\n");
    }
    if (ah_ckpt_session_close(ck, &err) != AH_OK)
        fprintf(stderr, "autohet train: warning: rank %d: cloud upload failed: %s\n", ah_comm_rank(world), err.msg);
    if (metrics) fclose(metrics);
    if (have_tr) ah_trainer_free(tr);
    ah_dataset_close(data);
    ah_dataset_close(val);
    if (have_plan) ah_plan_free(plan);
    ah_comm_finalize();
    return rc;
}

int ah_cli_train(int argc, char **argv) {
    args_t a = {.steps = 20, .val_batches = 4, .warmup = 10, .seed = 1337, .dump_step = 0, .lr = 1e-3, .wd = 0.1, .clip = 1.0,
                .grace_s = 30, .keep = AH_CKPT_KEEP_DEFAULT, .cloud_timeout = AH_CKPT_CLOUD_TIMEOUT_DEFAULT,
                .cloud_retries = AH_CKPT_CLOUD_RETRIES_DEFAULT, .loss_scale = AH_LOSS_SCALE_INITIAL, .loss_scale_window = AH_LOSS_SCALE_WINDOW};
    ah_flag_t flags[AH_TRAIN_FLAGS_MAX];
    const int n_flags = train_flags(&a, flags);
    ah_error_t err;
    signal(SIGPIPE, SIG_IGN); /* before MPI opens a socket, whatever follows (runtime/preempt.c says why) */
    ah_preempt_die_with_launcher(); /* no rank outlives its mpirun (runtime/preempt.h) */
    if (ah_comm_init(&argc, &argv, &err) != AH_OK) return ah_cli_fail("train", &err);
    ah_comm_t *world = ah_comm_world();
    const int rank = ah_comm_rank(world), ranks = ah_comm_size(world);
    int rc = 0;
    if (!ah_cli_parse("train", "--plan FILE --data FILES [flags]   (under mpirun, one rank per device)",
                      "Trains the plan's model on the token shards: 1F1B and zero-bubble pipelines, Megatron tensor "
                      "parallelism, layer-wise data-parallel gradient sync, AdamW.",
                      flags, n_flags, argc, argv, &rc)) {
        ah_comm_finalize();
        return rc;
    }
    note_given(&a, flags, n_flags);
    if (ah_comm_world_late(&(size_t){0})) { /* admitted into a running world at an in-place join */
        ah_plan_t plan = {0};
        ah_dataset_t data = {0}, val = {0};
        ah_trainer_t tr;
        bool have_tr = false;
        FILE *metrics = NULL;
        ah_ckpt_session_t *ck = NULL;
        rc = ah_cli_train_late(&a, &plan, &data, &val, &metrics, &tr, &have_tr, &ck);
        return finish(rc, true, &plan, true, &data, &val, metrics, &tr, have_tr, ck);
    }
    ah_plan_t plan;
    ah_dataset_t data = {0}, val = {0};
    ah_trainer_t tr;
    bool have_plan = false, have_tr = false;
    FILE *metrics = NULL;
    memset(&plan, 0, sizeof plan);
    ah_status_t s = ah_comm_agree(world, ah_cli_train_load_plan(&a, ranks, &plan, &have_plan, &err), &err);
    if (s == AH_OK) s = ah_comm_agree(world, ah_host_check(&plan, rank, a.check_host, &err), &err);
    if (s == AH_OK) s = ah_comm_agree(world, ah_cli_train_open_data(&a, &plan, &data, &val, &err), &err);
    /* Opened for appending, and emptied for a run from step 0 only once set-up has passed: a run
     * refused at start-up (a root holding another run, a bad --init-from) leaves the file as it was. */
    const bool metrics_existed = rank == 0 && a.metrics && access(a.metrics, F_OK) == 0;
    if (s == AH_OK && rank == 0 && a.metrics && !(metrics = fopen(a.metrics, "a")))
        ah_error_set(&err, AH_ERR_IO, "%s: cannot create the metrics file: %s", a.metrics, strerror(errno));
    if (s == AH_OK) s = ah_comm_agree(world, a.metrics && rank == 0 && !metrics ? AH_ERR_IO : AH_OK, &err);
    ah_ckpt_session_t *ck = NULL;
    int64_t start = 0;
    double resume_s = 0;
    if (s == AH_OK) s = ah_cli_train_set_up(&a, &plan, &data, metrics, &tr, &have_tr, &ck, &start, &resume_s, &err);
    if (s == AH_OK && metrics && !a.resume && ftruncate(fileno(metrics), 0) != 0)
        fprintf(stderr, "autohet train: warning: %s: cannot empty the metrics file (%s); this run's lines follow "
                "the old ones\n", a.metrics, strerror(errno));
    if (s != AH_OK && metrics && !metrics_existed && ftell(metrics) == 0) { /* nothing left behind */
        fclose(metrics);
        metrics = NULL;
        unlink(a.metrics);
    }
    if (s != AH_OK) {
        rc = rank == 0 ? ah_cli_train_fail(&a, rank, &err) : ah_status_exit_code(s);
    } else {
        if (rank == 0 && !a.quiet) ah_cli_train_say_start(&a, &plan, ranks);
        if (rank == 0) warn_repeat(&data, &tr, &plan, start, a.steps);
        rc = ah_cli_train_in_place(&a, &plan, &data, &val, &metrics, &tr, &have_tr, &ck, start);
    }
    return finish(rc, s == AH_OK, &plan, have_plan, &data, &val, metrics, &tr, have_tr, ck);
}
