/* Growing and fixed strings (core/str.h). */
#include "core/str.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ah_str_t ah_str_fixed(char *buf, size_t cap) {
    buf[0] = '\0';
    return (ah_str_t){.buf = buf, .cap = cap, .fixed = true};
}

/* Room for `need` more bytes and the NUL in a growing string; false on no memory. */
static bool reserve(ah_str_t *s, size_t need) {
    if (s->len + need < s->cap) return true;
    size_t cap = s->cap ? s->cap : 64;
    while (cap <= s->len + need) cap *= 2;
    char *grown = realloc(s->buf, cap);
    if (!grown) return false;
    s->buf = grown;
    s->cap = cap;
    return true;
}

bool ah_str_appendf(ah_str_t *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (!s->fixed && !reserve(s, (size_t)n))) {
        s->failed = true;
        return false;
    }
    const size_t room = s->cap - s->len - 1;
    va_start(ap, fmt);
    vsnprintf(s->buf + s->len, room + 1, fmt, ap);
    va_end(ap);
    const bool fits = (size_t)n <= room;
    s->len += fits ? (size_t)n : room;
    s->failed |= !fits;
    return fits;
}

const char *ah_str_cstr(const ah_str_t *s) { return s->buf ? s->buf : ""; }

int ah_str_index(const char *s, const char *const names[], int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

void ah_str_free(ah_str_t *s) {
    if (s->fixed) return;
    free(s->buf);
    *s = AH_STR_GROWING;
}
