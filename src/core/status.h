/* Status codes and error messages.
 *
 * Library code never prints and never exits: a function that can fail returns an ah_status_t
 * and, on failure, fills an ah_error_t with one message a user can act on — what went wrong,
 * where (file, line and column for JSON; the field, its value and what is allowed otherwise),
 * and what to do. Only src/cli/ prints the message and chooses the exit code.
 */
#ifndef AH_CORE_STATUS_H
#define AH_CORE_STATUS_H

typedef enum {
    AH_OK = 0,
    AH_ERR_USAGE,      /* bad flag or flag value */
    AH_ERR_IO,         /* file missing, unreadable, unwritable */
    AH_ERR_PARSE,      /* malformed file (JSON syntax, bad magic) */
    AH_ERR_INVALID,    /* well-formed but inconsistent (unknown GPU, bad plan) */
    AH_ERR_INFEASIBLE, /* nothing fits / no plan exists */
    AH_ERR_OOM,        /* an allocation past a device's (emulated) capacity */
    AH_ERR_COMM,       /* MPI or network failure */
    AH_ERR_INTERNAL,   /* a bug in autohet */
    AH_ERR_INTERRUPTED /* stopped on the user's request (Ctrl-C, SIGTERM) before the end */
} ah_status_t;

#define AH_ERROR_MSG_MAX 2048

typedef struct ah_error {
    ah_status_t code;
    char msg[AH_ERROR_MSG_MAX];
} ah_error_t;

/* Sets err (if not NULL) to code and a printf-formatted message; returns code. */
ah_status_t ah_error_set(ah_error_t *err, ah_status_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to the message already in err (for adding context on the way up). */
ah_status_t ah_error_prefix(ah_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A short name for a status ("invalid input", "out of memory", ...). */
const char *ah_status_name(ah_status_t code);

/* A status as one lower-case word for files other programs read ("invalid", "io", "comm", ...), and
 * back (AH_ERR_INTERNAL for a word that names none). */
const char *ah_status_key(ah_status_t code);
ah_status_t ah_status_of_key(const char *key);

/* Exit code the CLI uses for a status: 0 ok, 2 usage, 130 interrupted (the shell's 128 + SIGINT),
 * 1 everything else. */
int ah_status_exit_code(ah_status_t code);

#endif
