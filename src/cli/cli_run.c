/* autohet run: the elastic agent (src/elastic/agent.h). Prints the agent's progress lines as they
 * come and, at the end, a summary: plans before and after, each recovery by tier, the loss
 * across each restart, tokens trained and the check that every step was trained exactly once. */
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/import_hf.h"
#include "ckpt/s3.h"
#include "cli/cli.h"
#include "core/str.h"
#include "cost/profile.h"
#include "elastic/agent.h"
#include "elastic/launcher.h"
#include "runtime/data.h"
#include "runtime/ckpt_io.h"
#include "runtime/device.h"
#include "runtime/trainer.h"

static const char *VERB = "run";
static volatile sig_atomic_t interrupted = 0;

/* Ctrl-C or a SIGTERM to the agent: the first stops the run like a preemption notice (the ranks
 * save within --grace-s), a second stops the job at once (ah_agent_opts_t.interrupt). */
static void on_signal(int sig) {
    (void)sig;
    if (interrupted < 2) interrupted++;
}

static void log_line(void *ctx, const char *line) {
    (void)ctx;
    printf("autohet run: %s\n", line);
    fflush(stdout);
}

static void print_bytes(uint64_t b) {
    if (b >= 1000000) printf("%.1f MB", (double)b / 1e6);
    else if (b >= 1000) printf("%.1f kB", (double)b / 1e3);
    else printf("%llu B", (unsigned long long)b);
}

/* The summary's checkpoint line: the step a rerun resumes from and the steps it would redo, and the
 * saves that failed (a full disk). */
static void say_checkpoints(const ah_agent_opts_t *o, const ah_agent_result_t *r) {
    const int64_t redo = r->steps_done - (r->newest_ckpt < 0 ? 0 : r->newest_ckpt);
    if (r->newest_ckpt < 0)
        printf("checkpoints: none restorable: a rerun starts from step 0 (%lld step%s redone)", (long long)redo,
               redo == 1 ? "" : "s");
    else if (redo <= 0)
        printf("checkpoints: the newest restorable is step %lld, the last trained: nothing to redo",
               (long long)r->newest_ckpt);
    else
        printf("checkpoints: the newest restorable is step %lld: a rerun redoes %lld step%s (%lld..%lld)",
               (long long)r->newest_ckpt, (long long)redo, redo == 1 ? "" : "s", (long long)r->newest_ckpt,
               (long long)r->steps_done - 1);
    if (r->failed_saves > 0)
        printf("; %d save%s failed, the last: %s", r->failed_saves, r->failed_saves == 1 ? "" : "s", r->save_error);
    printf(" (--ckpt-every %lld)\n", (long long)o->ckpt_every);
}

/* profile: --profile's path, NULL for the roofline. */
/* What a recovery's stop saved, for its summary line (buf: room for the in-place fallback's numbers). */
static const char *stop_saved(const ah_agent_recovery_t *v, char *buf, size_t cap) {
    if (v->in_place && v->saved) return "checkpoint saved at the change";
    if (v->in_place && v->redone > 0) { /* the step to be written behind, its move failed: C restored in place */
        snprintf(buf, cap, "the change's step not written (its move failed): restored step %lld, %lld step%s trained "
                 "again", (long long)(v->stopped_at - v->redone), (long long)v->redone, v->redone == 1 ? "" : "s");
        return buf;
    }
    if (v->in_place && v->behind) return "the change's step written behind the next step, not saved at the change";
    if (v->in_place) return "no checkpoint committed at the change (its save failed or had no checkpoint root)";
    return v->saved ? "checkpoint saved in the grace period" : "no checkpoint at the notice";
}

static void summary(const ah_agent_opts_t *o, const ah_agent_result_t *r, const char *profile) {
    printf("\n== autohet run: summary ==\n");
    for (int k = 0; k < r->n_launches; k++) {
        const ah_agent_launch_t *L = &r->launches[k];
        const int64_t n = L->first_step < 0 ? 0 : L->end_step - L->first_step;
        printf("launch %d: %d devices, predicted %.4f s/iteration", r->launch_base + k, L->devices, L->predicted_s);
        if (n > 0)
            printf(", measured %.4f s/step over steps %lld..%lld", L->step_s_sum / (double)n,
                   (long long)L->first_step, (long long)L->end_step - 1);
        printf("\n  plan %s\n", L->plan_desc);
    }
    char roofline[512] = "";
    ah_str_t rf = ah_str_fixed(roofline, sizeof roofline);
    for (int k = 0; k < r->n_launches; k++)
        if (r->launches[k].roofline_types[0])
            ah_str_appendf(&rf, "%slaunch %d: %s", rf.len ? "; " : "", r->launch_base + k, r->launches[k].roofline_types);
    if (r->n_launches > 0 && profile && roofline[0])
        printf("predicted: the cost model calibrated by the profile %s, except the types it has no entry for at the "
               "plan's settings, timed by the uncalibrated roofline (%s)\n", profile, roofline);
    else if (r->n_launches > 0 && profile)
        printf("predicted: the cost model calibrated by the profile %s\n", profile);
    else if (r->n_launches > 0)
        printf("predicted: the uncalibrated roofline (peak FLOP/s and bandwidth of the cluster file), not this "
               "machine; `autohet profile --model M --cluster C ... -o P` measures each type once and `--profile P` "
               "plans with it\n");
    for (int i = 0; i < r->n_recoveries; i++) {
        const ah_agent_recovery_t *v = &r->recoveries[i];
        const bool join_in_place = v->in_place && v->cause == AH_CAUSE_JOIN;
        char saved[160];
        printf("recovery %d (%s: %s%s%s) at %.2f s: %s at step %lld, %s%s\n", i, ah_agent_cause_name(v->cause),
               v->nodes[0] ? v->nodes : "-", v->joined[0] ? "; taken in: " : "", v->joined, v->t_notice_s,
               join_in_place ? "in place (the running ranks kept their processes, the new hosts' ranks joined them)"
               : v->joined[0] ? "in place (the survivors kept their processes, the free hosts' ranks joined them)"
               : v->in_place ? "in place (the survivors kept their processes)" : "stopped and relaunched",
               (long long)v->stopped_at, stop_saved(v, saved, sizeof saved), v->forced ? ", ranks killed when the grace period ended" : "");
        if (!v->complete) {
            printf("  no step finished after it\n");
            continue;
        }
        printf("  resumed from step %lld; recovery %.2f s = stop %.2f + re-plan %.3f + start-up %.2f + transfer "
               "%.3f + first step %.3f\n",
               (long long)v->resumed_at, v->total_s, v->stop_s, v->replan_s, v->startup_s, v->transfer_s,
               v->first_step_s);
        if (v->in_place)
            printf("  in place: stop = the wait for the step boundary and the save; the change took save %.3f + "
                   "teardown %.3f + split %.3f + init %.3f + load %.3f + move %.3f s (the trainer's slowest rank)\n",
                   v->phases[0], v->phases[1], v->phases[2], v->phases[3], v->phases[4], v->phases[5]);
        printf("  state by tier:");
        for (int i = 0; i < AH_TIER_COUNT; i++) { /* cheapest first: local, memory, peer, cloud */
            const ah_ckpt_tier_t t = AH_TIER_ORDER[i];
            printf(" %s ", ah_ckpt_tier_name(t));
            print_bytes(v->bytes[t]);
            printf(" (%d files, %.3f s)%s", v->files[t], v->tier_s[t], i + 1 < AH_TIER_COUNT ? "," : "\n");
        }
        if (isfinite(v->loss_last_before))
            printf("  loss: step %lld was %.6f before the stop; step %lld after it is %.6f\n",
                   (long long)v->resumed_at - 1, v->loss_last_before, (long long)v->resumed_at,
                   v->loss_first_after);
        else
            printf("  loss: step %lld after it is %.6f (%s)\n", (long long)v->resumed_at, v->loss_first_after,
                   v->resumed_at == 0 ? "started from scratch" : "the step before it is not in this run's metrics");
    }
    if (r->restarts > 0)
        printf("restarts: %d failure%s relaunched (--max-restarts %d within %.0f s; each a \"restart\" event)\n",
               r->restarts, r->restarts == 1 ? "" : "s", o->max_restarts, o->restart_window_s);
    if (r->steps_done == 0)
        printf("trained nothing: no step of %lld finished, %.1f s wall\n", (long long)o->steps, r->wall_s);
    else if (isfinite(r->final_loss))
        printf("trained %lld of %lld steps, %lld tokens, final loss %.6f, %.1f s wall\n", (long long)r->steps_done,
               (long long)o->steps, (long long)r->tokens, r->final_loss, r->wall_s);
    else
        printf("trained %lld of %lld steps, %lld tokens, final loss not known to this run (the last step is an earlier "
               "run's, in the metrics, or its loss was not finite), %.1f s wall\n", (long long)r->steps_done,
               (long long)o->steps, (long long)r->tokens, r->wall_s);
    if (r->steps_done > 0) say_checkpoints(o, r);
    if (r->cloud_step >= -1) { /* the cloud's own line: how far it is, the last upload failure */
        char newest[48] = "no complete step";
        if (r->cloud_step >= 0) snprintf(newest, sizeof newest, "newest complete step %lld", (long long)r->cloud_step);
        printf("cloud: %s%s%s\n", newest, r->cloud_error[0] ? "; an upload failed: " : "", r->cloud_error);
    }
    if (r->history_ok)
        printf("no sample lost: every step 0..%lld trained exactly once on its own samples in the final history "
               "(%lld step%s redone after a rollback)\n",
               (long long)r->steps_done - 1, (long long)r->recomputed, r->recomputed == 1 ? "" : "s");
    else if (r->history_broken)
        printf("SAMPLE HISTORY BROKEN: %s\n", r->history_msg);
    else if (r->steps_done > 0 && r->newest_ckpt >= 0) /* where a resume really starts, not where this run ended */
        printf("the run stopped early: steps 0..%lld were each trained once on their own samples; the same command "
               "resumes at step %lld (the newest checkpoint) and trains steps %lld..%lld\n", (long long)r->steps_done - 1,
               (long long)r->newest_ckpt, (long long)r->newest_ckpt, (long long)o->steps - 1);
    else if (r->steps_done > 0)
        printf("the run stopped early: steps 0..%lld were each trained once on their own samples; no checkpoint of "
               "them was saved: the same command starts over at step 0\n", (long long)r->steps_done - 1);
    printf("metrics: %s\n", r->metrics_path);
    fflush(stdout); /* before the error on stderr, which says why it stopped */
}

/* bf16 or fp16 asked of a cluster with CPU-emulated types: their ranks train fp32 only, which the trainer
 * would say only after the plan and the launch. Returns an exit code, 0 when fine. */
static int check_precision(const ah_agent_opts_t *o) {
    ah_cluster_t c;
    ah_error_t err;
    if (ah_cluster_open(o->cluster, &c, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    const char *cpu = NULL;
    for (int i = 0; i < c.n_types && !cpu; i++)
        if (ah_device_type_is_cpu(&c.types[i])) cpu = c.types[i].name;
    if (cpu)
        fprintf(stderr, "autohet run: --precision %s: cluster %s's type %s runs on the CPU backend, which "
                "trains fp32 only; use --precision fp32\n", ah_precision_name(o->planner.train.precision),
                o->cluster, cpu);
    ah_cluster_free(&c);
    return cpu ? 2 : 0;
}

/* The flags that take a word (the shared planning flags, --recovery), --ckpt-every's least (1) and the cloud flags' needs.
 * Returns an exit code, 0 when fine. */
static int check_choices(ah_agent_opts_t *o, const ah_cli_plan_flags_t *pf, bool *auto_precision,
                         const char *recovery, const char *cloud, const char *endpoint) {
    int rc;
    if (!ah_cli_plan_flags(VERB, pf, &o->planner, auto_precision)) return 2;
    if (o->ckpt_every < 1) { /* the shared row takes train's 0 (no periodic save) */
        fprintf(stderr, "autohet run: --ckpt-every 0: expected 1 .. %d (the agent recovers from checkpoints)\n",
                AH_CLI_STEPS_MAX);
        return 2;
    }
    o->planner.schedule_trainable_only = true; /* a plan run makes is never refused by train */
    /* the trainer's checkpoint rule: without a cloud, a sharded group spans two nodes */
    o->planner.shard_spread_only = !cloud;
    if (!*auto_precision && o->planner.train.precision != AH_PREC_FP32 && o->cluster && (rc = check_precision(o)) != 0)
        return rc;
    if (strcmp(recovery, "cloud-only") == 0) {
        o->cloud_only = true;
    } else if (strcmp(recovery, "local-first") != 0) {
        fprintf(stderr, "autohet run: --recovery: expected local-first or cloud-only, got \"%s\"\n", recovery);
        return 2;
    }
    if (endpoint && !cloud) {
        fprintf(stderr, "autohet run: --s3-endpoint needs --cloud s3://BUCKET/PREFIX\n");
        return 2;
    }
    if (o->cloud_only && !cloud) {
        fprintf(stderr, "autohet run: --recovery cloud-only needs a cloud tier: add --cloud s3://BUCKET/PREFIX "
                        "(and --s3-endpoint URL for a non-AWS store)\n");
        return 2;
    }
    ah_s3_url_t url;
    ah_error_t err = {0};
    if (cloud && ah_s3_url_parse(cloud, &url, &err) != AH_OK) {
        fprintf(stderr, "autohet run: --cloud: %s\n", err.msg);
        return 2;
    }
    return 0;
}

/* In place at a notice is the default (docs/elastic.md "In-place reconfiguration at a notice"):
 * --no-in-place keeps the stop and relaunch, and so does --no-handover, said once (no next plan is
 * made before a notice, so every notice would fall back); --in-place given with either is refused.
 * Sets o->in_place; returns an exit code, 0 when fine. */
static int resolve_in_place(ah_agent_opts_t *o, bool given, bool no_in_place) {
    if (given && no_in_place) {
        fprintf(stderr, "autohet run: --in-place and --no-in-place: give one\n");
        return 2;
    }
    if (given && o->no_handover) {
        fprintf(stderr, "autohet run: --in-place needs the next plan made before a notice, which --no-handover "
                        "turns off: give one of --in-place, --no-handover\n");
        return 2;
    }
    o->in_place = !no_in_place && !o->no_handover;
    if (o->no_handover && !no_in_place)
        printf("autohet run: note: --no-handover: no change in place at a notice either (it needs the next plan "
               "made before the notice): the stop and relaunch, as with --no-in-place\n");
    return 0;
}

/* The planning rule plan follows, once, on the whole cluster (README "Flags shared by verbs"):
 * --profile loaded into *profile (o->planner.profile; NULL without one), the prices --objective cost
 * and --budget use, --precision auto resolved (kept for every re-plan) and said with its why, the
 * types the precision leaves out said, and the checkpoint policy the trainer will follow (--ckpt-every,
 * --replica-memory-gb, --cloud: ah_cli_ckpt_policy into o->planner.train.ckpt), so that every plan and
 * re-plan prices its replication and upload egress as `plan` does. Returns an exit code, 0 when fine
 * (*profile is then the caller's to free). */
static int resolve_planning(ah_agent_opts_t *o, bool auto_precision, const char *profile_path, const char *cloud,
                            double replica_gb, ah_profile_t **profile) {
    ah_error_t err = {0};
    if (profile_path && ah_profile_load(profile_path, profile, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    o->planner.profile = *profile;
    if (!o->model || !o->cluster) return 0; /* required: ah_agent_run says so */
    ah_model_t m;
    ah_cluster_t c;
    char why[384];
    if (ah_model_load(o->model, &m, &err) != AH_OK || ah_cluster_open(o->cluster, &c, &err) != AH_OK) {
        ah_profile_free(*profile);
        return ah_cli_fail(VERB, &err);
    }
    if (ah_cli_ckpt_policy(VERB, &c, o->ckpt_every, replica_gb, cloud, NULL, &o->planner.train.ckpt) != 0) {
        ah_cluster_free(&c);
        ah_profile_free(*profile);
        return 2;
    }
    ah_status_t s = AH_OK;
    if (o->planner.objective == AH_OBJECTIVE_COST) s = ah_cluster_require_prices(&c, "--objective cost", o->cluster, &err);
    if (s == AH_OK && o->planner.budget_usd_per_hour > 0) s = ah_cluster_require_prices(&c, "--budget", o->cluster, &err);
    if (s == AH_OK) s = ah_cli_resolve_precision(&m, &c, &o->planner, auto_precision, why, sizeof why, &err);
    if (s == AH_OK && why[0]) printf("autohet run: why %s: %s\n", ah_precision_name(o->planner.train.precision), why);
    if (s == AH_OK) ah_cli_print_left_out(stdout, "autohet run: ", &c, o->planner.train.precision);
    fflush(stdout);
    ah_cluster_free(&c);
    const int rc = s != AH_OK ? ah_cli_fail(VERB, &err)
                   : auto_precision && o->planner.train.precision != AH_PREC_FP32 ? check_precision(o) : 0;
    if (rc != 0) ah_profile_free(*profile);
    return rc;
}

/* Whether `prog` (a path, or a name looked up in PATH as execvp does) names a program this process
 * may run. */
static bool can_run(const char *prog) {
    if (!prog[0]) return false;
    if (strchr(prog, '/')) return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    char dir[PATH_MAX];
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        const size_t n = strcspn(p, ":");
        if (snprintf(dir, sizeof dir, "%.*s/%s", (int)n, n ? p : ".", prog) < (int)sizeof dir &&
            access(dir, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* What the trainer would refuse at each launch's start, and what the agent itself runs: refused
 * here, before any plan or launch (a failed launch reads as a failed job, and a rerun of the same
 * command would fail the same way). Returns an exit code, 0 when fine. */
static int check_launch(const ah_agent_opts_t *o, const ah_flag_t *flags, int n_flags, const char *val_data,
                        const char *init_from) {
    if (!val_data && (ah_cli_flag_seen(flags, n_flags, "--val-every") || ah_cli_flag_seen(flags, n_flags, "--val-batches"))) {
        fprintf(stderr, "autohet run: --val-every and --val-batches need --val-data FILES (held-out shards)\n");
        return 2;
    }
    ah_error_t err;
    if (ah_cli_check_init_flags(ah_cli_flag_seen(flags, n_flags, "--seed"), init_from, &err) != AH_OK) {
        fprintf(stderr, "autohet run: %s\n", err.msg);
        return 2;
    }
    /* every launcher starts mpirun from this process (slurm's inside the allocation it runs in) */
    if (!can_run(o->mpirun)) {
        fprintf(stderr, "autohet run: cannot run mpirun \"%s\": %s\n", o->mpirun,
                ah_cli_flag_seen(flags, n_flags, "--mpirun")
                    ? "no such executable file (--mpirun takes a path, or a name found in PATH)"
                    : "not found in PATH: install Open MPI (scripts/setup.sh) or give --mpirun PATH");
        return 2;
    }
    return 0;
}

/* The files every launch's trainer opens, checked as autohet train checks them and with its
 * messages, before any plan or launch (a failed launch reads as a failed job): --init-from's
 * config against --model; --data and --val-data with the local launcher, whose ranks run here
 * (ssh and slurm hosts have the data at their own paths, docs/multi-host.md). */
static ah_status_t check_trainer_files(const ah_agent_opts_t *o, const char *init_from, const char *val_data,
                                       ah_error_t *err) {
    if (!o->model) return AH_OK; /* required: ah_agent_run says so */
    ah_model_t m;
    ah_status_t s = ah_model_load(o->model, &m, err);
    if (s == AH_OK && init_from) s = ah_hf_import_check_config(init_from, &m, err);
    if (s != AH_OK || (o->launcher && strcmp(o->launcher, "local") != 0)) return s;
    const char *specs[] = {o->data, val_data}, *names[] = {"--data", "--val-data"};
    for (int i = 0; i < 2 && s == AH_OK; i++) {
        ah_dataset_t d;
        if (specs[i] && (s = ah_dataset_open(specs[i], names[i], m.vocab, o->planner.train.seq_len, &d, err)) == AH_OK)
            ah_dataset_close(&d);
    }
    return s;
}

/* The trainer's own flags given to run (t: their values), passed on to it. The strings are static:
 * o keeps pointing at them. */
static void pass_trainer_flags(ah_agent_opts_t *o, const ah_flag_t *flags, int n_flags, const ah_train_opts_t *t,
                               const char *cloud, const char *endpoint, const char *init_from, const char *val_data,
                               const int64_t counts[4], double replica_gb, const char *replica_root) {
    static char num[10][32];
    snprintf(num[0], sizeof num[0], "%.17g", t->lr);
    snprintf(num[1], sizeof num[1], "%lld", (long long)t->warmup);
    snprintf(num[2], sizeof num[2], "%.17g", t->weight_decay);
    snprintf(num[3], sizeof num[3], "%.17g", t->grad_clip);
    snprintf(num[4], sizeof num[4], "%lld", (long long)(int64_t)t->seed);
    for (int i = 0; i < 4; i++) snprintf(num[5 + i], sizeof num[5 + i], "%lld", (long long)counts[i]);
    snprintf(num[9], sizeof num[9], "%.17g", replica_gb);
    static const char *pass[40];
    int np = 0;
    /* --init-from goes to every launch: with the agent's --resume, a relaunch that finds a
     * checkpoint takes it, and only a launch before the first one starts from the directory. */
    const char *names[] = {"--lr", "--warmup", "--weight-decay", "--grad-clip", "--seed", "--cloud", "--s3-endpoint",
                           "--init-from", "--val-data", "--val-every", "--val-batches", "--skip-nonfinite", "--keep",
                           "--replica-memory-gb", "--replica-root"};
    const char *vals[] = {num[0], num[1], num[2], num[3], num[4], cloud, endpoint, init_from, val_data, num[5], num[6],
                          num[7], num[8], num[9], replica_root};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (ah_cli_flag_seen(flags, n_flags, names[i])) {
            pass[np++] = names[i];
            pass[np++] = vals[i];
        }
    if (ah_cli_flag_seen(flags, n_flags, "--reschedule")) pass[np++] = "--reschedule";
    if (ah_cli_flag_seen(flags, n_flags, "--ckpt-sync")) pass[np++] = "--ckpt-sync";
    /* the agent's choice: no periodic replication where it cannot pay (docs/checkpoints.md) */
    if (ah_cli_flag_seen(flags, n_flags, "--replica-memory-gb")) pass[np++] = "--replica-when-it-pays";
    if (ah_cli_flag_seen(flags, n_flags, "--no-overlap-grad-sync")) pass[np++] = "--no-overlap-grad-sync";
    if (ah_cli_flag_seen(flags, n_flags, "--allow-unencrypted-wan")) pass[np++] = "--allow-unencrypted-wan";
    o->train_args = pass;
    o->n_train_args = np;
}

/* The cloud's patience (--cloud-timeout, --cloud-retries) and --start-over-if-unreadable, when given,
 * after the flags pass_trainer_flags passed; each needs --cloud. Returns an exit code, 0 when fine. */
static int pass_cloud_flags(ah_agent_opts_t *o, const ah_flag_t *flags, int n_flags, const char *cloud,
                            const int64_t patience[2]) {
    static char num[2][32];
    static const char *pass[64];
    const char *names[] = {"--cloud-timeout", "--cloud-retries", "--start-over-if-unreadable"};
    int np = 0;
    for (int i = 0; i < o->n_train_args && np < 64 - 5; i++) pass[np++] = o->train_args[i];
    for (int i = 0; i < 3; i++) {
        if (!ah_cli_flag_seen(flags, n_flags, names[i])) continue;
        if (!cloud) {
            fprintf(stderr, "autohet run: %s needs --cloud s3://BUCKET/PREFIX\n", names[i]);
            return 2;
        }
        pass[np++] = names[i];
        if (i == 2) break;
        snprintf(num[i], sizeof num[i], "%lld", (long long)patience[i]);
        pass[np++] = num[i];
    }
    o->train_args = pass;
    o->n_train_args = np;
    return 0;
}

/* What `autohet run`'s flags set: the agent's options and the trainer's flags it checks and passes
 * on (the booleans and the replica flags only as given: pass_trainer_flags reads the table). */
typedef struct run_args {
    ah_agent_opts_t o;
    const char *work, *recovery, *cloud, *endpoint, *init_from, *val_data, *profile_path, *replica_root;
    ah_cli_plan_flags_t pf; /* the shared flags (cli.h): NULL, 0 for the rule's default */
    int64_t counts[4];      /* --val-every, --val-batches, --skip-nonfinite, --keep */
    int64_t patience[2];    /* --cloud-timeout, --cloud-retries */
    bool start_over, reschedule, ckpt_sync, no_overlap, in_place, no_in_place; /* in_place: --in-place given */
    double replica_gb;
    double lr, wd, clip; /* the trainer's own flags, checked here as the trainer would */
    int64_t warmup, seed, gb, seq, max_restarts;
} run_args_t;

static void run_args_init(run_args_t *a) {
    memset(a, 0, sizeof *a);
    ah_agent_opts_default(&a->o);
    a->work = "autohet-run";
    a->recovery = "local-first";
    const int64_t counts[4] = {1, 4, 0, AH_CKPT_KEEP_DEFAULT};
    memcpy(a->counts, counts, sizeof counts);
    a->patience[0] = AH_CKPT_CLOUD_TIMEOUT_DEFAULT;
    a->patience[1] = AH_CKPT_CLOUD_RETRIES_DEFAULT;
    ah_train_opts_t t;
    ah_train_opts_default(&t);
    a->lr = t.lr, a->wd = t.weight_decay, a->clip = t.grad_clip;
    a->warmup = t.warmup, a->seed = (int64_t)t.seed;
    a->gb = a->o.planner.train.global_batch, a->seq = a->o.planner.train.seq_len;
    a->max_restarts = a->o.max_restarts;
}

#define RUN_HELP_IN_PLACE                                                                                           \
    "launch one mpirun a host, joined into one world, and at a notice from --events let the survivors change to "  \
    "the next plan in their own processes when it uses only their devices, else the stop and relaunch, said (the " \
    "default; docs/elastic.md)"
#define RUN_HELP_NO_IN_PLACE                                                                                        \
    "one mpirun for the whole plan, and at every notice the stop and relaunch (--no-handover implies it; default: " \
    "in place where it can)"

/* The flags of `autohet run`, pointing into *a: fills flags (room for RUN_FLAGS_MAX), returns how many. */
#define RUN_FLAGS_MAX 80
static int run_flags(run_args_t *a, ah_flag_t *flags) {
    const ah_flag_t table[] = {
        {"--model", AH_FLAG_STR, &a->o.model, "M", "preset name or HF config.json (required)", false},
        {"--cluster", AH_FLAG_STR, &a->o.cluster, "C", "cluster JSON or built-in name, e.g. cpu-hetero (required)", false},
        {"--data", AH_FLAG_STR, &a->o.data, "FILES", "llm.c token files: a path, a quoted glob or a comma list (required; "
         "as autohet train --data)", false},
        {"--events", AH_FLAG_STR, &a->o.events, "FILE", "availability events, `time_ms,add|remove,NODE` a line, times from the start", false},
        {"--work-dir", AH_FLAG_STR, &a->work, "DIR", "plans, launch dirs, DIR/local/NODE/ checkpoints with the local "
         "launcher (default autohet-run; ssh: the same path on every host)", false},
        {"--metrics", AH_FLAG_STR, &a->o.metrics, "FILE", "merged JSONL of steps and events (default DIR/metrics.jsonl)", false},
        {"--steps", AH_FLAG_INT_IN(1, AH_CLI_STEPS_MAX), &a->o.steps, "N", "iterations (default 20)", false},
        ah_cli_shared_flag_as("--ckpt-every", &a->o.ckpt_every, "checkpoint every K steps and after the last (default 5, "
                              "where train saves only when given one: the agent recovers from checkpoints; 0 refused)"),
        {"--grace-s", AH_FLAG_NUM_IN(0, 86400), &a->o.grace_s, "S", "notice to forced stop, seconds (default 30)", false},
        {"--no-handover", AH_FLAG_BOOL, &a->o.no_handover, NULL, "at a notice from --events, relaunch and plan after "
         "the stop, never in place (default: the next plan first, written to the hosts, so that with --replica-memory-gb the save "
         "hands each file to the host that reads it next; docs/checkpoints.md)", false},
        {"--in-place", AH_FLAG_BOOL, &a->in_place, NULL, RUN_HELP_IN_PLACE, false},
        {"--no-in-place", AH_FLAG_BOOL, &a->no_in_place, NULL, RUN_HELP_NO_IN_PLACE, false},
        {"--exposure-aware", AH_FLAG_BOOL, &a->o.exposure_aware, NULL, "the plan choice (each re-plan, the next plan "
         "at a notice) weighs the rollback a loss without notice of a spot node holding a piece of the state alone "
         "would cost, as simulate --exposure-aware: a baseline's plan on the same nodes is taken when it is expected "
         "to train more (docs/elastic.md \"Exposure\"; default off, as simulate's)", false},
        {"--max-restarts", AH_FLAG_INT_IN(0, AH_AGENT_MAX_RESTARTS), &a->max_restarts, "N", "a job that fails with "
         "nothing to explain it (no notice, every host answering, not the input's fault: a rank killed, a crash) is "
         "relaunched from the newest checkpoint at most N times within --restart-window, after 1, 2, 4 ... s; the "
         "same failure at the same step right after a restart ends the run (default 3; 0: never)", false},
        {"--restart-window", AH_FLAG_NUM_IN(1, 1e7), &a->o.restart_window_s, "S", "the window --max-restarts counts in, "
         "seconds (default 3600)", false},
        {"--join-horizon-s", AH_FLAG_NUM_IN(1e-3, 1e9), &a->o.join_horizon_s, "S", "a node that joins is taken in (a "
         "restart) when the plan with it gains more over S seconds than a restart costs (this run's mean recovery); "
         "default: S is the expected time until that plan is preempted, from the removals seen so far", false},
        {"--step-timeout", AH_FLAG_NUM_IN(1, 86400), &a->o.step_timeout_s, "S", "a hang: no metrics line for max(S, 10 x "
         "the plan's iteration or the longest gap between lines seen) and the plan's hosts are asked; those that do "
         "not answer are lost (local launcher: the ranks stopped by a signal or using no CPU are named, their nodes "
         "lost; default 30)", false},
        ah_cli_shared_flag_as("--global-batch", &a->gb, "sequences per iteration (default 8, not plan's 512: a batch "
                              "the CPU trainer runs in seconds)"),
        ah_cli_shared_flag_as("--seq-len", &a->seq, "tokens per sequence (default 64, not plan's 2048: a sequence the CPU "
                              "trainer runs in seconds)"),
        AH_CLI_PLAN_FLAGS(&a->pf),
        {"--lr", AH_FLAG_NUM, &a->lr, "X", "trainer: " AH_CLI_HELP_LR, false},
        {"--warmup", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX), &a->warmup, "N", "trainer: " AH_CLI_HELP_WARMUP, false},
        {"--weight-decay", AH_FLAG_NUM, &a->wd, "X", "trainer: " AH_CLI_HELP_WD, false},
        {"--grad-clip", AH_FLAG_NUM, &a->clip, "X", "trainer: " AH_CLI_HELP_CLIP, false},
        {"--seed", AH_FLAG_INT_IN(0, AH_CLI_SEED_MAX), &a->seed, "N", "trainer: " AH_CLI_HELP_SEED, false},
        ah_cli_shared_flag_as("--cloud", &a->cloud, "trainer: " AH_CLI_HELP_CLOUD),
        {"--s3-endpoint", AH_FLAG_STR, &a->endpoint, "URL", "trainer: S3 endpoint of --cloud", false},
        {"--cloud-timeout", AH_FLAG_INT_IN(1, 3600), &a->patience[0], "S", "trainer: an S3 request with no progress for S "
         "seconds fails (default 30)", false},
        {"--cloud-retries", AH_FLAG_INT_IN(0, 100), &a->patience[1], "N", "trainer: a resume lists the cloud N more times "
         "before it counts as unreadable (default 3)", false},
        {"--start-over-if-unreadable", AH_FLAG_BOOL, &a->start_over, NULL, "trainer: when the cloud cannot be listed and "
         "no other tier has a step, train from step 0 instead of stopping", false},
        {"--reschedule", AH_FLAG_BOOL, &a->reschedule, NULL, "trainer: resume a checkpoint saved under other --steps, "
         "--warmup or --lr, changing its cosine learning-rate schedule from there (without it, refused)", false},
        ah_cli_shared_flag_as("--ckpt-sync", &a->ckpt_sync, "trainer: write each checkpoint before the next step starts "
                              "(default: asynchronous, a host-memory snapshot written in the background)"),
        ah_cli_shared_flag_as("--no-overlap-grad-sync", &a->no_overlap, "trainer: run the data-parallel gradient sync "
                              "after the whole backward (default: overlapped with it; docs/runtime.md)"),
        ah_cli_shared_flag("--allow-unencrypted-wan", &a->o.allow_unencrypted_wan),
        ah_cli_shared_flag_as("--replica-memory-gb", &a->replica_gb, "trainer: in-memory peer replicas of each committed "
                              "step, at most G GB per host (default 0: off; docs/checkpoints.md)"),
        ah_cli_shared_flag_as("--replica-root", &a->replica_root, "trainer: each host keeps its replicas in DIR/NODE/ "
                              "(default /dev/shm/autohet/<key of the checkpoint root>)"),
        {"--init-from", AH_FLAG_STR, &a->init_from, "DIR", "trainer: start from this Hugging Face model directory "
         "(relaunches resume from checkpoints instead)", false},
        {"--val-data", AH_FLAG_STR, &a->val_data, "FILES", "trainer: held-out token files for a validation loss", false},
        {"--val-every", AH_FLAG_INT_IN(1, AH_CLI_STEPS_MAX,
                                       .note = "leave it out to validate after the last step only"),
         &a->counts[0], "K", "trainer: validate every K steps (default: at the end)", false},
        {"--val-batches", AH_FLAG_INT_IN(1, AH_CLI_BATCH_MAX, .note = "global batches a validation reads"),
         &a->counts[1], "N", "trainer: global batches a validation reads (default 4)", false},
        {"--skip-nonfinite", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX, .note = "0 stops at the first non-finite step"),
         &a->counts[2], "N", "trainer: non-finite steps skipped before one stops "
         "the run (default 0)", false},
        {"--keep", AH_FLAG_INT_IN(1, AH_CKPT_KEEP_MAX), &a->counts[3], "N", "trainer: committed checkpoint steps kept on each "
         "node's disk and in the cloud; older ones are deleted after a new step commits (default 2)", false},
        {"--recovery", AH_FLAG_STR, &a->recovery, "local-first|cloud-only", "where state comes from after a stop: "
         "disks, peers, then cloud; or (Varuna-like, for comparison) every disk dropped, cloud only (default local-first)", false},
        {"--launcher", AH_FLAG_STR, &a->o.launcher, "local|ssh|slurm", "local: every node on this machine (default); ssh: "
         "node names are host names, reached through --rsh-agent; slurm: inside salloc/sbatch, the allocation's "
         "hosts, reached with srun, mpirun under Slurm (docs/multi-host.md)", false},
        {"--rsh-agent", AH_FLAG_STR, &a->o.rsh_agent, "\"CMD\"", "ssh: the remote command, run as CMD HOST COMMAND "
         "(default ssh, in BatchMode); also Open MPI's plm_rsh_agent", false},
        {"--local-root", AH_FLAG_STR, &a->o.local_root, "PATH", "ssh, slurm: node X's checkpoints in PATH/X/ on host X "
         "(required; every host sees only its own)", false},
        {"--mpirun", AH_FLAG_STR, &a->o.mpirun, "PATH", "the mpirun to use (default mpirun)", false},
        {"--mpirun-args", AH_FLAG_STR, &a->o.mpirun_args, "\"ARGS\"", "flags before -np (default: local: one machine, "
         AH_MPIRUN_LOCAL_DEFAULT_ARGS "; ssh: none beyond its own --mca plm_rsh_agent, --hostfile, --map-by seq, "
         "the ring all-reduce)", false},
        ah_cli_shared_flag("--profile", &a->profile_path),
        {"--quiet", AH_FLAG_BOOL, &a->o.quiet, NULL, "no per-step progress lines from the trainer", false},
        ah_cli_shared_flag_as("--shard-optimizer", &a->pf.shard, "split AdamW's state over each data-parallel group of "
                              "every plan (autohet plan's flag; without --cloud only groups over two nodes or more; "
                              "default none)"),
    };
    _Static_assert(sizeof table / sizeof table[0] <= RUN_FLAGS_MAX, "RUN_FLAGS_MAX is too small");
    memcpy(flags, table, sizeof table);
    return (int)(sizeof table / sizeof table[0]);
}

int ah_cli_run(int argc, char **argv) {
    run_args_t a;
    run_args_init(&a);
    ah_flag_t flags[RUN_FLAGS_MAX];
    const int n_flags = run_flags(&a, flags);
    int rc = 0;
    if (!ah_cli_parse(VERB, "--model M --cluster C --data FILES [--events FILE] [flags]",
                      "The elastic agent: plans (calibrated with --profile), launches mpirun ... autohet train\n"
                      "--resume, watches for preemptions (--events, or SIGTERM to a node's ranks), and at a notice\n"
                      "changes the survivors to the next plan in their own processes where it can (--no-in-place:\n"
                      "never), else re-plans on the nodes left and relaunches from the newest checkpoint (local\n"
                      "disk, then peers, then cloud). Ctrl-C (or SIGTERM to autohet run) stops it like a notice:\n"
                      "the ranks save within --grace-s, the job stops, exit 130; a second Ctrl-C stops the job at\n"
                      "once. Ends with a summary: plans, in place or relaunched, recovery time by tier, loss across\n"
                      "restarts, samples trained.",
                      flags, n_flags, argc, argv, &rc))
        return rc;
    ah_error_t err = {0};
    if (ah_cli_check_optimizer_flags(a.lr, a.warmup, a.wd, a.clip, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    a.o.planner.train.global_batch = a.gb;
    a.o.planner.train.seq_len = a.seq;
    a.o.max_restarts = (int)a.max_restarts;
    bool auto_precision = false;
    if ((rc = resolve_in_place(&a.o, a.in_place, a.no_in_place)) != 0) return rc;
    if ((rc = check_choices(&a.o, &a.pf, &auto_precision, a.recovery, a.cloud, a.endpoint)) != 0) return rc;
    a.o.planner.no_overlap_grad_sync = a.no_overlap; /* its plans priced as the trainer will sync */
    /* the ranks run this very program */
    static char self[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "autohet run: cannot find this program's path (/proc/self/exe)\n");
        return 1;
    }
    self[n] = 0;
    a.o.autohet = self;
    a.o.work_dir = a.work;
    const ah_train_opts_t given = {.lr = a.lr, .warmup = a.warmup, .weight_decay = a.wd, .grad_clip = a.clip,
                                   .seed = (uint64_t)a.seed};
    if ((rc = check_launch(&a.o, flags, n_flags, a.val_data, a.init_from)) != 0) return rc;
    if (check_trainer_files(&a.o, a.init_from, a.val_data, &err) != AH_OK) return ah_cli_fail(VERB, &err);
    pass_trainer_flags(&a.o, flags, n_flags, &given, a.cloud, a.endpoint, a.init_from, a.val_data, a.counts, a.replica_gb, a.replica_root);
    if ((rc = pass_cloud_flags(&a.o, flags, n_flags, a.cloud, a.patience)) != 0) return rc;
    ah_profile_t *profile = NULL;
    if ((rc = resolve_planning(&a.o, auto_precision, a.profile_path, a.cloud, a.replica_gb, &profile)) != 0) return rc;
    a.o.interrupt = &interrupted;
    a.o.log = log_line;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    ah_agent_result_t r;
    const ah_status_t s = ah_agent_run(&a.o, &r, &err);
    if (r.n_launches > 0) summary(&a.o, &r, a.profile_path);
    rc = s != AH_OK ? ah_cli_fail(VERB, &err) : r.history_ok ? 0 : 1;
    ah_agent_result_free(&r);
    ah_profile_free(profile);
    return rc;
}
