/* The flag parser of every verb (cli/cli.h): "--name value" and "--name=value", --help, and
 * each value checked against its flag's kind and range before the verb sees it. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fs.h"
#include "runtime/device.h"

/* Under mpirun every rank parses the same command line: only rank 0 (or a process outside
 * mpirun) prints what is wrong with it, so a bad flag is said once. */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...) {
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank && strcmp(rank, "0") != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

static void range_text(const ah_flag_type_t *t, char *buf, size_t cap);

static void print_help(FILE *f, const char *verb, const char *synopsis, const char *about,
                       const ah_flag_t *flags, int n) {
    fprintf(f, "usage: autohet %s %s\n\n%s\n\nflags:\n", verb, synopsis, about);
    for (int i = 0; i < n; i++) {
        char left[64], range[96] = "";
        snprintf(left, sizeof left, "%s%s%s", flags[i].name, flags[i].metavar ? " " : "",
                 flags[i].metavar ? flags[i].metavar : "");
        if (flags[i].type.has_min || flags[i].type.has_max) range_text(&flags[i].type, range, sizeof range);
        fprintf(f, "  %-26s %s%s%s%s\n", left, flags[i].help, range[0] ? " [" : "", range, range[0] ? "]" : "");
    }
    fprintf(f, "  %-26s %s\n", "--help", "show this help");
}

/* A count without both bounds could take the verb anywhere (2^40 sequences, a malloc of a
 * terabyte): the flag table must give every INT flag a range. False, said, when one has none. */
static bool table_ok(const char *verb, const ah_flag_t *flags, int n) {
    for (int i = 0; i < n; i++)
        if (flags[i].type.kind == AH_KIND_INT && !(flags[i].type.has_min && flags[i].type.has_max)) {
            complain("autohet %s: internal error: flag %s has no range in the flag table\n", verb, flags[i].name);
            return false;
        }
    return true;
}

/* v as a value of kind: "16", "0.5". */
static const char *number_text(ah_flag_kind_t kind, double v, char *buf, size_t cap) {
    if (kind == AH_KIND_INT) snprintf(buf, cap, "%lld", (long long)v);
    else snprintf(buf, cap, "%g", v);
    return buf;
}

/* "1 .. 100000", ">= 1", "> 0": the values t allows (the forms cli.h's range macros make). */
static void range_text(const ah_flag_type_t *t, char *buf, size_t cap) {
    char lo[40], hi[40];
    number_text(t->kind, t->min, lo, sizeof lo);
    number_text(t->kind, t->max, hi, sizeof hi);
    if (t->has_max) snprintf(buf, cap, "%s .. %s", lo, hi);
    else snprintf(buf, cap, "%s %s", t->min_open ? ">" : ">=", lo);
}

/* Whether x is in f's range; if not, says so (ah_flag_type_t's message) and returns false. */
static bool in_range(const char *verb, const ah_flag_t *f, double x) {
    const ah_flag_type_t *t = &f->type;
    const bool low = t->has_min && (t->min_open ? !(x > t->min) : !(x >= t->min));
    const bool high = t->has_max && !(x <= t->max);
    if (!low && !high) return true;
    char range[96], value[40];
    range_text(t, range, sizeof range);
    number_text(t->kind, x, value, sizeof value);
    char note[300] = "";
    if (t->note) snprintf(note, sizeof note, " (%s)", t->note);
    if (t->value_first) complain("autohet %s: %s %s: expected %s%s\n", verb, f->name, value, range, note);
    else complain("autohet %s: %s: expected %s, got %s%s\n", verb, f->name, range, value, note);
    return false;
}

bool ah_cli_parse(const char *verb, const char *synopsis, const char *about, ah_flag_t *flags,
                  int n_flags, int argc, char **argv, int *rc) {
    if (!table_ok(verb, flags, n_flags)) {
        *rc = 1;
        return false;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(stdout, verb, synopsis, about, flags, n_flags);
            *rc = 0;
            return false;
        }
        ah_flag_t *f = NULL;
        const char *value = NULL;
        size_t alen = strcspn(a, "=");
        for (int k = 0; k < n_flags; k++)
            if (strlen(flags[k].name) == alen && strncmp(flags[k].name, a, alen) == 0) f = &flags[k];
        if (!f) {
            complain("autohet %s: unknown flag \"%s\" (autohet %s --help lists the flags)\n", verb, a, verb);
            *rc = 2;
            return false;
        }
        if (f->seen) { /* the last one would win without a word */
            complain("autohet %s: %s given twice; give it once\n", verb, f->name);
            *rc = 2;
            return false;
        }
        if (a[alen] == '=') value = a + alen + 1;
        if (f->type.kind == AH_KIND_BOOL) {
            if (value) {
                complain("autohet %s: %s takes no value\n", verb, f->name);
                *rc = 2;
                return false;
            }
            *(bool *)f->target = true;
            f->seen = true;
            continue;
        }
        if (!value) {
            if (i + 1 >= argc) {
                complain("autohet %s: %s needs a value (%s)\n", verb, f->name, f->metavar);
                *rc = 2;
                return false;
            }
            value = argv[++i];
        }
        f->seen = true;
        char *end = NULL;
        errno = 0;
        switch (f->type.kind) {
        case AH_KIND_STR: *(const char **)f->target = value; break;
        case AH_KIND_INT: {
            long long x = strtoll(value, &end, 10);
            if (errno || end == value || *end) {
                complain("autohet %s: %s: expected an integer, got \"%s\"\n", verb, f->name, value);
                *rc = 2;
                return false;
            }
            if (!in_range(verb, f, (double)x)) {
                *rc = 2;
                return false;
            }
            *(int64_t *)f->target = x;
            break;
        }
        case AH_KIND_NUM: {
            double x = strtod(value, &end);
            if (errno || end == value || *end || !isfinite(x)) {
                complain("autohet %s: %s: expected a number, got \"%s\"\n", verb, f->name, value);
                *rc = 2;
                return false;
            }
            if (!in_range(verb, f, x)) {
                *rc = 2;
                return false;
            }
            *(double *)f->target = x;
            break;
        }
        case AH_KIND_BOOL: break;
        }
    }
    return true;
}

int ah_cli_fail(const char *verb, const ah_error_t *err) {
    fprintf(stderr, "autohet %s: %s: %s\n", verb, ah_status_name(err->code), err->msg);
    return ah_status_exit_code(err->code);
}

bool ah_cli_check_out_path(const char *verb, const char *flag, const char *path) {
    const char *why = NULL;
    char dir[4096];
    if (!path[0]) why = "an empty path";
    else if (ah_fs_is_dir(path)) why = "is a directory";
    else if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) why = "path too long";
    else {
        char *slash = strrchr(dir, '/');
        if (!slash) snprintf(dir, sizeof dir, ".");
        else if (slash == dir) dir[1] = 0;
        else *slash = 0;
        if (access(dir, W_OK) != 0) {
            fprintf(stderr, "autohet %s: %s %s: cannot write in %s: %s\n", verb, flag, path, dir, strerror(errno));
            return false;
        }
    }
    if (why) fprintf(stderr, "autohet %s: %s %s: %s\n", verb, flag, path, why);
    return !why;
}

bool ah_cli_flag_seen(const ah_flag_t *flags, int n_flags, const char *name) {
    for (int k = 0; k < n_flags; k++)
        if (strcmp(flags[k].name, name) == 0) return flags[k].seen;
    return false;
}

/* ---- the flags several verbs share (cli.h): one row each ---- */

static const ah_flag_t SHARED[] = {
    {"--global-batch", AH_FLAG_INT_IN(1, AH_CLI_BATCH_MAX), NULL, "B", "sequences per iteration (default 512)", false},
    {"--seq-len", AH_FLAG_INT_IN(1, AH_CLI_SEQ_MAX), NULL, "T",
     "tokens per sequence, at most the model's context (default: 2048, or the context if shorter)", false},
    {"--micro-batch", AH_FLAG_STR, NULL, "N|auto",
     "sequences per micro-batch, 1 .. 65536, or auto: the planner tries the divisors of the global batch up to 8 "
     "(default auto)", false},
    {"--precision", AH_FLAG_STR, NULL, "fp32|bf16|fp16|auto",
     "training precision (default auto: fp32 when every type of the cluster runs on the CPU backend, which trains "
     "fp32 only, or when no type gives a 16-bit rate; bf16 when every type runs it; else the faster of the bf16 "
     "and fp16 plans of the whole cluster; the choice is said under \"why\", the types it leaves out under "
     "\"left out\")", false},
    {"--objective", AH_FLAG_STR, NULL, "time|cost", "minimise iteration time or $ per token (default time)", false},
    {"--budget", AH_FLAG_NUM_ABOVE(0), NULL, "USD_PER_HOUR",
     "only plans whose GPUs and egress (bytes across zones and regions, at the plan's rate) cost at most this per hour, under either objective (default: no cap)", false},
    {"--shard-optimizer", AH_FLAG_STR, NULL, "none|even|memory|auto",
     "split AdamW's state over each data-parallel group of the plan: evenly, by each device's free memory, or "
     "auto: whichever of unsharded, even and memory is fastest (default none; docs/runtime.md)", false},
    {"--schedule", AH_FLAG_STR, NULL, "auto|1f1b|interleaved|zero-bubble", "each pipeline's schedule: auto, the "
     "fastest per pipeline of 1F1B, zero-bubble (ZB-H1) and interleaved 1F1B with its best count of stages per device, "
     "each priced by its own replay and memory; or one for every pipeline that can run it (default auto; run and "
     "simulate take only what the runtime runs; docs/planner.md \"Schedules\")", false},
    {"--cp", AH_FLAG_STR, NULL, "auto|1|2|4|8", "context parallelism: every pipeline's sequence split over this "
     "many devices on every pipeline, or auto: the unsplit plan against CP 2, 4 and 8 where the sequence has at "
     "least 4096 tokens or fits no device unsplit, by whole-plan evaluation, the degree then halved pipeline by "
     "pipeline where that is faster; 1: never (default auto; "
     "docs/planner.md \"Context parallelism\")", false},
    {"--profile", AH_FLAG_STR, NULL, "FILE",
     "measured per-layer times from autohet profile (default: the roofline, uncalibrated)", false},
    {"--ckpt-every", AH_FLAG_INT_IN(0, AH_CLI_STEPS_MAX), NULL, "K",
     "save a checkpoint every K steps and after the last (default 0: on preemption only)", false},
    {"--cloud", AH_FLAG_STR, NULL, "s3://BUCKET/PREFIX", AH_CLI_HELP_CLOUD, false},
    {"--cloud-region", AH_FLAG_STR, NULL, "R",
     "the cloud tier's bucket is in region R: uploads of nodes in other regions cross that link (its $/GB; default: "
     "the region train signs its requests for: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1)", false},
    {"--ckpt-sync", AH_FLAG_BOOL, NULL, NULL,
     "write each checkpoint before the next step starts (default: asynchronous: each rank copies its state into "
     "host memory and a background thread writes it while training goes on; a checkpoint due before the last "
     "one is written waits for it; docs/checkpoints.md)", false},
    {"--no-overlap-grad-sync", AH_FLAG_BOOL, NULL, NULL,
     "run the data-parallel gradient sync after the whole backward, one collective after another (default: each "
     "layer's all-reduce, or reduce-scatter with a sharded optimizer, starts non-blocking as soon as the last "
     "micro-batch's backward has passed that layer, and runs while the rest of the backward computes; same losses "
     "bit for bit; on the CUDA backend the buckets go on a communication stream (NCCL), waited for by events; docs/runtime.md)", false},
    {"--replica-memory-gb", AH_FLAG_NUM_IN(0, 1e6), NULL, "G",
     "in-memory peer replicas: each committed step's pieces also held in the host memory (a tmpfs) of another "
     "node, another zone's when there is one, at most G GB (1e9 bytes) per host; what does not fit stays on the "
     "disks, said in the checkpoint event; a host lost without notice is restored from them before the disks "
     "(default 0: off; docs/checkpoints.md)", false},
    {"--allow-unencrypted-wan", AH_FLAG_BOOL, NULL, NULL,
     "train a plan whose traffic crosses a region boundary on a link the cluster file does not mark \"private\" "
     "(MPI's TCP and the peer tier are not encrypted: such traffic is in the open on the internet; default: "
     "refused before any rank starts, naming the link and what crosses it; docs/multi-host.md \"Across regions\")",
     false},
    {"--replica-root", AH_FLAG_STR, NULL, "DIR",
     "where each host keeps the replicas: DIR/NODE/ (default /dev/shm/autohet/<key of --local-root>; a tmpfs, so "
     "that they outlive the job's processes)", false},
};

ah_flag_t ah_cli_shared_flag_as(const char *name, void *target, const char *help) {
    for (size_t k = 0; k < sizeof SHARED / sizeof SHARED[0]; k++)
        if (strcmp(SHARED[k].name, name) == 0) {
            ah_flag_t f = SHARED[k];
            f.target = target;
            if (help) f.help = help;
            return f;
        }
    /* a verb naming a flag the table lacks is a bug: its INT kind without a range is refused by
     * table_ok, so the verb never runs on it */
    return (ah_flag_t){name, AH_FLAG_INT, target, "?", "internal error: not a shared flag", false};
}

ah_flag_t ah_cli_shared_flag(const char *name, void *target) { return ah_cli_shared_flag_as(name, target, NULL); }

bool ah_cli_micro_batch(const char *verb, const char *arg, int64_t *out) {
    if (strcmp(arg, "auto") == 0) {
        *out = 0;
        return true;
    }
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < 1 || v > AH_CLI_BATCH_MAX) {
        complain("autohet %s: --micro-batch: expected 1 .. %d or \"auto\", got \"%s\"%s\n", verb, AH_CLI_BATCH_MAX,
                 arg, strcmp(arg, "0") == 0 ? " (auto lets the planner pick)" : "");
        return false;
    }
    *out = v;
    return true;
}

bool ah_cli_precision(const char *verb, const char *arg, ah_precision_t *out, bool *is_auto) {
    *is_auto = strcmp(arg, "auto") == 0;
    if (*is_auto || ah_precision_parse(arg, out)) return true;
    complain("autohet %s: --precision: expected fp32, bf16, fp16 or auto, got \"%s\"\n", verb, arg);
    return false;
}

bool ah_cli_objective(const char *verb, const char *arg, ah_objective_t *out) {
    if (strcmp(arg, "time") == 0) *out = AH_OBJECTIVE_TIME;
    else if (strcmp(arg, "cost") == 0) *out = AH_OBJECTIVE_COST;
    else {
        complain("autohet %s: --objective: expected time or cost, got \"%s\"\n", verb, arg);
        return false;
    }
    return true;
}

bool ah_cli_shard_mode(const char *verb, const char *arg, ah_shard_mode_t *out) {
    if (ah_shard_mode_parse(arg, out)) return true;
    complain("autohet %s: --shard-optimizer: expected none, even, memory or auto, got \"%s\"\n", verb, arg);
    return false;
}

bool ah_cli_schedule_mode(const char *verb, const char *arg, ah_schedule_mode_t *out) {
    if (ah_schedule_mode_parse(arg, out)) return true;
    complain("autohet %s: --schedule: expected auto, 1f1b, interleaved or zero-bubble, got \"%s\"\n", verb, arg);
    return false;
}

bool ah_cli_cp_mode(const char *verb, const char *arg, int *out) {
    if (ah_cp_mode_parse(arg, out)) return true;
    complain("autohet %s: --cp: expected auto, 1, 2, 4 or 8, got \"%s\"\n", verb, arg);
    return false;
}

bool ah_cli_plan_flags(const char *verb, const ah_cli_plan_flags_t *f, ah_planner_opts_t *o, bool *auto_precision) {
    /* the rule's defaults, for what was left out */
    *auto_precision = !f->precision;
    o->train.micro_batch = 0;
    o->objective = AH_OBJECTIVE_TIME;
    o->shard = AH_SHARD_NONE;
    o->schedule = AH_SCHEDULE_AUTO;
    o->cp = 0;
    o->budget_usd_per_hour = f->budget;
    return (!f->micro_batch || ah_cli_micro_batch(verb, f->micro_batch, &o->train.micro_batch)) &&
           (!f->precision || ah_cli_precision(verb, f->precision, &o->train.precision, auto_precision)) &&
           (!f->objective || ah_cli_objective(verb, f->objective, &o->objective)) &&
           (!f->shard || ah_cli_shard_mode(verb, f->shard, &o->shard)) &&
           (!f->schedule || ah_cli_schedule_mode(verb, f->schedule, &o->schedule)) &&
           (!f->cp || ah_cli_cp_mode(verb, f->cp, &o->cp));
}

bool ah_cli_all_cpu(const ah_cluster_t *c) {
    bool cpu = true;
    for (int i = 0; i < c->n_types; i++) cpu = cpu && ah_device_type_is_cpu(&c->types[i]);
    return cpu;
}

ah_status_t ah_cli_resolve_precision(const ah_model_t *model, const ah_cluster_t *c, ah_planner_opts_t *o,
                                     bool auto_precision, char *why, size_t cap, ah_error_t *err) {
    if (cap) why[0] = 0;
    if (!auto_precision) return AH_OK;
    if (ah_cli_all_cpu(c)) { /* said by no "why", as plan says it */
        o->train.precision = AH_PREC_FP32;
        return AH_OK;
    }
    ah_planner_opts_t po = *o; /* the precision only: no sharding, no idle note */
    po.shard = AH_SHARD_NONE;
    po.explain_idle = false;
    ah_plan_result_t r;
    ah_status_t s = ah_planner_run_auto(model, c, &po, &r, err);
    if (s != AH_OK) return s;
    o->train.precision = r.plan.train.precision;
    snprintf(why, cap, "%s", r.precision_why);
    ah_plan_result_free(&r);
    return AH_OK;
}

bool ah_cli_print_left_out(FILE *f, const char *prefix, const ah_cluster_t *c, ah_precision_t p) {
    char buf[512];
    ah_planner_left_out(c, p, buf, sizeof buf);
    if (buf[0]) fprintf(f, "%sleft out: %s\n", prefix, buf);
    return buf[0] != 0;
}
