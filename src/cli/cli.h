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

typedef enum { AH_FLAG_STR, AH_FLAG_INT, AH_FLAG_NUM, AH_FLAG_BOOL } ah_flag_kind_t;

typedef struct ah_flag {
    const char *name;    /* "--global-batch" */
    ah_flag_kind_t kind;
    void *target;        /* const char **, int64_t *, double *, bool * */
    const char *metavar; /* "N", "FILE"; NULL for BOOL */
    const char *help;    /* one line; say the default */
    bool seen;           /* set by the parser */
} ah_flag_t;

/* Parses argv[1..] into flags. Returns true when the verb should go on; false when it should
 * exit with *rc (after --help: 0; after a bad flag: 2, with the message printed). */
bool ah_cli_parse(const char *verb, const char *synopsis, const char *about, ah_flag_t *flags,
                  int n_flags, int argc, char **argv, int *rc);

/* Whether flag `name` was on the command line (after ah_cli_parse): a default the user did not
 * choose can then differ from any value they could give. */
bool ah_cli_flag_seen(const ah_flag_t *flags, int n_flags, const char *name);

/* With a --profile (loaded from path), says on stderr which of the plan's GPU types it has no
 * entry for at the plan's TP degree, micro-batch, sequence length and precision: those are timed
 * by the roofline, which a user who gave a profile would not expect. In cli_evaluate.c. */
struct ah_profile;
struct ah_plan;
void ah_cli_profile_note(const char *verb, const char *path, const struct ah_profile *profile,
                         const struct ah_plan *plan);

/* The trainer's rule for --lr, --warmup, --weight-decay, --grad-clip (autohet train and run). In
 * cli_train.c. */
ah_status_t ah_cli_check_optimizer_flags(double lr, int64_t warmup, double wd, double clip, ah_error_t *err);

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

#endif
