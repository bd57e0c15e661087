/* The command-line layer: verbs, flag parsing, printing errors. Only src/cli/ prints to the
 * user and chooses exit codes; everything below returns ah_status_t + ah_error_t. */
#ifndef AH_CLI_CLI_H
#define AH_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

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

/* --micro-batch m|auto (plan, run): 1 .. AH_CLI_BATCH_MAX, or "auto", which sets *out to 0 (the
 * planner picks). False, the message printed, on anything else. */
bool ah_cli_micro_batch(const char *verb, const char *arg, int64_t *out);

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
