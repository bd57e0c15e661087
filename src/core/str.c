/* Strings built into a caller's buffer (core/str.h). */
#include "core/str.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ah_str_t ah_str_fixed(char *buf, size_t cap) {
    buf[0] = '\0';
    return (ah_str_t){.buf = buf, .cap = cap};
}

bool ah_str_appendf(ah_str_t *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
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

int ah_str_index(const char *s, const char *const names[], int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

int ah_real_digits(double x) {
    char buf[40];
    for (int p = 15; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) return p;
    }
    return 17;
}
