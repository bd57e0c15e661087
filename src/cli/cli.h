/* The command-line layer: verbs, flag parsing, printing errors. Only src/cli/ prints to the
 * user and chooses exit codes; everything below returns ah_status_t + ah_error_t. */
#ifndef AH_CLI_CLI_H
#define AH_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <stdio.h>

#include "core/status.h"
#include "planner/planner.h"

typedef struct ah_cli_verb {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the verb */
} ah_cli_verb_t;

typedef enum { AH_KIND_STR, AH_KIND_INT, AH_KIND_NUM, AH_KIND_BOOL } ah_flag_kind_t;

/* A flag's kind and the values it allows. The parser refuses a value outside the range, before
 * the verb runs, with exit code 2 and
 *     autohet VERB: FLAG: expected RANGE, got VALUE[ (NOTE)]
 * or, with value_first (a verb whose messages all read so),
 *     autohet VERB: FLAG VALUE: expected RANGE[ (NOTE)]
 * where RANGE reads "MIN .. MAX", ">= MIN" or "> MIN" (what the macros below make), and VALUE
 * is the value as parsed (an integer, or %g of a number). A default outside the range
 * (a sentinel such as "0: the planner picks") is allowed: only given values are checked. */
typedef struct ah_flag_type {
    ah_flag_kind_t kind;
    bool has_min, has_max; /* INT and NUM only */
    double min, max;       /* inclusive, except min with min_open */
    bool min_open;         /* "> min": a positive real */
    bool value_first;
    const char *note;      /* why the range, or what leaving the flag out does; NULL for none */
} ah_flag_type_t;

/* The ranges verbs share. A count's bound is what the verb can do in seconds, not minutes: the
 * planner's time and memory grow with the global batch (llama2-7b on mixed-32: 0.6 s at 512
 * sequences, 3 s at 65536, 34 s and 0.8 GB at 2^20), the agent's history holds a loss per step. */
#define AH_CLI_BATCH_MAX 65536          /* --global-batch, --micro-batch: sequences */
#define AH_CLI_SEQ_MAX 1048576          /* --seq-len: tokens (each model's context limits it further) */
#define AH_CLI_STEPS_MAX 10000000       /* --steps, --warmup, --ckpt-every, --step: iterations */
/* The optimizer flags train takes and run passes on to it: one --help line each, in both verbs. */
#define AH_CLI_HELP_LR "peak learning rate (default 1e-3)"
#define AH_CLI_HELP_WARMUP "linear warm-up steps, then cosine to 0.1 lr (default 10)"
#define AH_CLI_HELP_WD "AdamW decoupled decay of 2-D matrices (default 0.1)"
#define AH_CLI_HELP_CLIP "global gradient-norm clip, 0 = off (default 1.0)"
#define AH_CLI_HELP_SEED "initialisation seed (default 1337)"
#define AH_CLI_HELP_CLOUD                                                                                   \
    "also upload checkpoints here (AWS_* env; the bucket's region: AWS_REGION, else AWS_DEFAULT_REGION, else " \
    "us-east-1; docs/checkpoints.md \"Cloud tier\")"
#define AH_CLI_SEED_MAX 4294967295.0    /* --seed */
#define AH_CLI_INT_MAX 1000000000       /* AH_FLAG_INT_MIN's bound: a count whose cost grows with it
                                           gives its own, smaller one with AH_FLAG_INT_IN */

/* The kinds, any value (an INT flag must be ranged: the parser refuses a table without one): */
#define AH_FLAG_STR {.kind = AH_KIND_STR}
#define AH_FLAG_INT {.kind = AH_KIND_INT}
#define AH_FLAG_NUM {.kind = AH_KIND_NUM}
#define AH_FLAG_BOOL {.kind = AH_KIND_BOOL}
/* Ranged kinds; further designators (.note = "...", .value_first = true) may follow the bounds. */
#define AH_FLAG_INT_IN(lo, hi, ...) \
    {.kind = AH_KIND_INT, .has_min = true, .min = (lo), .has_max = true, .max = (hi), __VA_ARGS__}
#define AH_FLAG_INT_MIN(lo, ...) \
    {.kind = AH_KIND_INT, .has_min = true, .min = (lo), .has_max = true, .max = AH_CLI_INT_MAX, __VA_ARGS__}
#define AH_FLAG_NUM_IN(lo, hi, ...) \
    {.kind = AH_KIND_NUM, .has_min = true, .min = (lo), .has_max = true, .max = (hi), __VA_ARGS__}
#define AH_FLAG_NUM_MIN(lo, ...) {.kind = AH_KIND_NUM, .has_min = true, .min = (lo), __VA_ARGS__}
#define AH_FLAG_NUM_ABOVE(lo, ...) {.kind = AH_KIND_NUM, .has_min = true, .min = (lo), .min_open = true, __VA_ARGS__}

typedef struct ah_flag {
    const char *name;    /* "--global-batch" */
    ah_flag_type_t type;
    void *target;        /* const char **, int64_t *, double *, bool * */
    const char *metavar; /* "N", "FILE"; NULL for BOOL */
    const char *help;    /* one line; say the default */
    bool seen;           /* set by the parser */
} ah_flag_t;

/* Parses argv[1..] into flags. Returns true when the verb should go on; false when it should
 * exit with *rc (after --help: 0; after an unknown flag, a flag given twice or a value out of its
 * range: 2, with the message printed; an INT flag without both bounds in the table: 1). --help
 * shows each ranged flag's range after its help. Under mpirun (OMPI_COMM_WORLD_RANK set) only
 * rank 0 prints, since every rank parses the same line. */
bool ah_cli_parse(const char *verb, const char *synopsis, const char *about, ah_flag_t *flags,
                  int n_flags, int argc, char **argv, int *rc);

/* Whether flag `name` was on the command line (after ah_cli_parse): a default the user did not
 * choose can then differ from any value they could give. */
bool ah_cli_flag_seen(const ah_flag_t *flags, int n_flags, const char *name);

/* ---- The flags several verbs share (README "Flags shared by verbs") ----
 * One rule: a flag that plan, evaluate, run, simulate (and train, where it applies) share has ONE
 * row in flags.c's table -- its spelling, value names, range, help line and default -- and, when its
 * value is not a plain number, ONE parser below, so every verb that takes it reads it alike and
 * prints the same --help line. A verb takes a shared flag with ah_cli_shared_flag; it may give it
 * another default only with ah_cli_shared_flag_as, whose help line says the default and why. A new
 * shared flag (context parallelism, regions) is a row in the table and, for a value
 * that is a word, a parser here. Shared now: --global-batch, --seq-len, --micro-batch N|auto,
 * --precision fp32|bf16|fp16|auto, --objective time|cost, --budget USD_PER_HOUR,
 * --shard-optimizer none|even|memory|auto, --schedule auto|1f1b|interleaved|zero-bubble, --cp auto|1|2|4|8 (plan, run,
 * simulate), --profile FILE; the checkpoint policy's --ckpt-every K and --cloud URL (train, run; plan and
 * evaluate count their traffic) and --replica-memory-gb G; and the trainer's --ckpt-sync,
 * --no-overlap-grad-sync and --allow-unencrypted-wan (train, run). */
ah_flag_t ah_cli_shared_flag(const char *name, void *target);
/* The same with the verb's own help line: what the flag does in that verb, with the rule's default
 * or, where the verb's differs, its default and why (run's batch, sized for the CPU trainer). */
ah_flag_t ah_cli_shared_flag_as(const char *name, void *target, const char *help);

/* --micro-batch N|auto: 1 .. AH_CLI_BATCH_MAX, or "auto", which sets *out to 0 (the planner
 * picks). False, the message printed, on anything else (0 included: "auto" says it). */
bool ah_cli_micro_batch(const char *verb, const char *arg, int64_t *out);
/* --precision fp32|bf16|fp16|auto: *is_auto for "auto" (resolved per cluster by
 * ah_cli_resolve_precision or the planner's ah_planner_run_auto), else *out. */
bool ah_cli_precision(const char *verb, const char *arg, ah_precision_t *out, bool *is_auto);
/* --objective time|cost. */
bool ah_cli_objective(const char *verb, const char *arg, ah_objective_t *out);
/* --shard-optimizer none|even|memory|auto. */
bool ah_cli_shard_mode(const char *verb, const char *arg, ah_shard_mode_t *out);

/* --schedule auto|1f1b|interleaved|zero-bubble. */
bool ah_cli_schedule_mode(const char *verb, const char *arg, ah_schedule_mode_t *out);

/* --cp auto|1|2|4|8 (0 for auto). */
bool ah_cli_cp_mode(const char *verb, const char *arg, int *out);

/* The shared planning flags' values as given (NULL: left out, the rule's default). */
typedef struct ah_cli_plan_flags {
    const char *micro_batch, *precision, *objective, *shard, *schedule, *cp;
    double budget; /* 0: no cap */
} ah_cli_plan_flags_t;
/* The flag-table entries of the planning flags every planning verb takes, in one order, their
 * values into *pf: the verb's table lists AH_CLI_PLAN_FLAGS(&pf) among its own rows. A new shared
 * planning flag is a field of ah_cli_plan_flags_t, a row of the table, an entry here and a line of
 * ah_cli_plan_flags. */
#define AH_CLI_PLAN_FLAGS(pf)                                                                          \
    ah_cli_shared_flag("--micro-batch", &(pf)->micro_batch), ah_cli_shared_flag("--precision", &(pf)->precision), \
        ah_cli_shared_flag("--objective", &(pf)->objective), ah_cli_shared_flag("--budget", &(pf)->budget), \
        ah_cli_shared_flag("--schedule", &(pf)->schedule), ah_cli_shared_flag("--cp", &(pf)->cp)
/* Parses every shared planning flag into o (train.micro_batch, train.precision, objective,
 * budget_usd_per_hour, shard, schedule, cp) with the parsers above, a flag left out taking the rule's
 * default (micro-batch auto, precision auto, objective time, no budget, shard none, schedule auto, cp auto); *auto_precision for
 * --precision auto. False, the message printed (exit 2), on a bad value. */
bool ah_cli_plan_flags(const char *verb, const ah_cli_plan_flags_t *f, ah_planner_opts_t *o, bool *auto_precision);

/* --precision auto's first rule: every type of the cluster runs on the CPU backend (fp32 only). */
bool ah_cli_all_cpu(const ah_cluster_t *c);
/* --precision auto for a verb that plans many times (run, simulate): resolved ONCE on the whole
 * cluster, as autohet plan resolves it (fp32 on an all-CPU cluster, else ah_planner_run_auto), and
 * kept for every re-plan; o->train.precision is set and why (cap bytes) says the choice as plan's
 * "why" line does ("" for an all-CPU cluster, as plan). Not auto: o is left alone and why is "".
 * Fails as plan would (nothing fits). */
ah_status_t ah_cli_resolve_precision(const ah_model_t *model, const ah_cluster_t *c, ah_planner_opts_t *o,
                                     bool auto_precision, char *why, size_t cap, ah_error_t *err);
/* The "left out: ..." line every planning verb prints when types of the cluster cannot run the
 * precision (the planner's own text, ah_planner_left_out), on f with prefix before it ("" or
 * "autohet run: "); nothing when none is left out. Returns whether one was. */
bool ah_cli_print_left_out(FILE *f, const char *prefix, const ah_cluster_t *c, ah_precision_t p);

/* With a --profile (loaded from path), says on stderr which of the plan's GPU types it has no
 * entry for at the plan's TP degree, micro-batch, sequence length and precision: those are timed
 * by the roofline, which a user who gave a profile would not expect. In cli_evaluate.c. */
struct ah_profile;
struct ah_plan;
void ah_cli_profile_note(const char *verb, const char *path, const struct ah_profile *profile,
                         const struct ah_plan *plan);

/* A plan at bf16 or fp16 with a stage on a device type that runs on the CPU backend (fp32 only):
 * says on stderr that autohet train will refuse it, naming the type. In cli_evaluate.c. */
void ah_cli_precision_note(const char *verb, const struct ah_plan *plan);
/* The host-memory rule of asynchronous checkpoints and in-memory replicas of replica_gb GB a host
 * (--replica-memory-gb; 0: none), train's (ckpt/host_memory.h: ah_host_memory_check), for a plan
 * trained the default way (asynchronous saves): 0, or 1 with the message naming the node and the
 * bytes said. With note, nodes that give no host_memory_gib are said once, in one line (not
 * checked). */
int ah_cli_host_memory(const char *verb, const struct ah_plan *plan, double replica_gb, bool note);
/* The checkpoint policy whose traffic plan and evaluate count (cost.h's ah_ckpt_policy_t; docs/cost-model.md
 * "Checkpoint traffic"): train's --ckpt-every K, --replica-memory-gb G and --cloud URL into *out. The bucket's
 * region is cloud_region (--cloud-region R, simulate's flag; NULL: not given), else the one train signs its
 * requests for (ckpt/s3.h: AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1), taken as the cluster's own on a
 * cluster of one region. Exit 2, said, when URL is not s3://BUCKET/PREFIX, --cloud-region comes without --cloud
 * or names none of the cluster's regions, or a cluster of several regions has none of the signing region's
 * name; else 0. In cli_evaluate.c. */
int ah_cli_ckpt_policy(const char *verb, const ah_cluster_t *c, int64_t every, double replica_gb, const char *cloud,
                       const char *cloud_region, ah_ckpt_policy_t *out);

/* The trainer's rule for --lr, --warmup, --weight-decay, --grad-clip (autohet train and run). In
 * cli_train.c. */
ah_status_t ah_cli_check_optimizer_flags(double lr, int64_t warmup, double wd, double clip, ah_error_t *err);
/* The trainer's rule for --seed beside --init-from DIR (init_from NULL: none): refused, since the
 * directory gives the weights the seed would draw (autohet train and run). In cli_train.c. */
ah_status_t ah_cli_check_init_flags(bool seed_given, const char *init_from, ah_error_t *err);

/* An output file FLAG names, checked before the work that fills it: false, the message printed
 * (naming the flag), when path is empty, a directory, or in a directory that is missing or not
 * writable. The file itself is not created. */
bool ah_cli_check_out_path(const char *verb, const char *flag, const char *path);

/* Prints "autohet VERB: <status name>: <message>" and returns the exit code for it. */
int ah_cli_fail(const char *verb, const ah_error_t *err);

int ah_cli_model(int argc, char **argv);
int ah_cli_plan(int argc, char **argv);
int ah_cli_ckpt(int argc, char **argv);
int ah_cli_evaluate(int argc, char **argv);
int ah_cli_profile(int argc, char **argv);
int ah_cli_train(int argc, char **argv);
int ah_cli_run(int argc, char **argv);
int ah_cli_tokenize(int argc, char **argv);
int ah_cli_simulate(int argc, char **argv);
int ah_cli_report(int argc, char **argv);

#endif
