/* Building a string piece by piece: printf-style appends that never overflow.
 *
 * Two kinds, one type. A growing string (AH_STR_GROWING) owns a heap buffer that doubles as
 * needed; free it with ah_str_free. A fixed string (ah_str_fixed) writes into a buffer the caller
 * owns and cuts what does not fit, so the result is always NUL-terminated; it is never freed.
 * Either way s.buf is a C string after the first append (ah_str_cstr is "" before it), s.len its
 * length, and s.failed says that an append was cut (fixed) or found no memory (growing): the
 * text then holds what fitted, and later appends still keep it terminated.
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
    char *buf;   /* NUL-terminated text; NULL in a growing string before its first append */
    size_t len;  /* strlen(buf) */
    size_t cap;  /* bytes at buf */
    bool fixed;  /* buf is the caller's: appends are cut to fit, never grown */
    bool failed; /* an append was cut or found no memory */
} ah_str_t;

#define AH_STR_GROWING ((ah_str_t){0})

/* A string written into buf[cap] (cap >= 1), emptied now. */
ah_str_t ah_str_fixed(char *buf, size_t cap);

/* Appends printf(fmt, ...); false when not all of it fitted (then s->failed is set). */
bool ah_str_appendf(ah_str_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The text so far: "" before the first append of a growing string. */
const char *ah_str_cstr(const ah_str_t *s);

/* Frees a growing string's buffer and empties it; nothing for a fixed one. */
void ah_str_free(ah_str_t *s);

/* The index of s among names[0 .. n), or -1: parsing a name into an enum whose values index
 * its names. */
int ah_str_index(const char *s, const char *const names[], int n);

#endif
