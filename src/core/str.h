/* Building a string piece by piece into a caller's buffer: printf-style appends that never
 * overflow. A string (ah_str_fixed) writes into buf[cap], cuts what does not fit, and is always
 * NUL-terminated; s.len is its length and s.failed says that an append was cut (the text then
 * holds what fitted, and later appends still keep it terminated). Nothing to free.
 *
 * A list joined by a separator, the common case:
 *     ah_str_t s = ah_str_fixed(buf, cap);
 *     for (int i = 0; i < n; i++) ah_str_appendf(&s, "%s%s", i ? ", " : "", names[i]);
 */
#ifndef AH_CORE_STR_H
#define AH_CORE_STR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ah_str {
    char *buf;   /* the caller's buffer: NUL-terminated text */
    size_t len;  /* strlen(buf) */
    size_t cap;  /* bytes at buf */
    bool failed; /* an append was cut */
} ah_str_t;

/* A string written into buf[cap] (cap >= 1), emptied now. */
ah_str_t ah_str_fixed(char *buf, size_t cap);

/* Appends printf(fmt, ...); false when not all of it fitted (then s->failed is set). */
bool ah_str_appendf(ah_str_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The index of s among names[0 .. n), or -1: parsing a name into an enum whose values index
 * its names. */
int ah_str_index(const char *s, const char *const names[], int n);

/* The fewest significant digits, 15, 16 or 17, at which printf's "%.*g" writes x so that it reads
 * back as the same double (17 always does). */
int ah_real_digits(double x);

#endif
