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

bool ah_cli_micro_batch(const char *verb, const char *arg, int64_t *out) {
    if (strcmp(arg, "auto") == 0) {
        *out = 0;
        return true;
    }
    char *end = NULL;
    errno = 0;
    const long long v = strtoll(arg, &end, 10);
    if (errno || end == arg || *end || v < 1 || v > AH_CLI_BATCH_MAX) {
        complain("autohet %s: --micro-batch: expected 1 .. %d or \"auto\", got \"%s\"\n", verb, AH_CLI_BATCH_MAX, arg);
        return false;
    }
    *out = v;
    return true;
}
