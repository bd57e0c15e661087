/* Runs of numbered names (contract in names.h). */
#include "core/names.h"

#include <stdint.h>
#include <string.h>

/* The trailing decimal number of name: its offset (== strlen when none) and value. */
static size_t number_at(const char *name, uint64_t *value) {
    size_t len = strlen(name), i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
    if (len - i > 18) i = len - 18; /* the value stays exact in 64 bits */
    *value = 0;
    for (size_t k = i; k < len; k++) *value = *value * 10 + (uint64_t)(name[k] - '0');
    return i;
}

/* Whether b follows a in a run: one prefix, b's number is a's + 1, and a zero-padded number
 * (leading 0 with more digits) keeps its width. */
static bool follows(const char *a, const char *b) {
    uint64_t va, vb;
    const size_t ia = number_at(a, &va), ib = number_at(b, &vb);
    const size_t la = strlen(a) - ia, lb = strlen(b) - ib;
    if (la == 0 || lb == 0 || ia != ib || memcmp(a, b, ia) != 0 || vb != va + 1) return false;
    const bool padded = (la > 1 && a[ia] == '0') || (lb > 1 && b[ib] == '0');
    return !padded || la == lb;
}

int ah_names_append(ah_str_t *s, const char *const *names, int n, const char *sep, int max_items) {
    int items = 0, written_names = 0;
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && follows(names[j - 1], names[j])) j++;
        const int run = j - i >= 3 ? j - i : 1; /* names this item takes */
        if (max_items <= 0 || items < max_items) {
            if (run > 1) ah_str_appendf(s, "%s%s..%s", items ? sep : "", names[i], names[j - 1]);
            else ah_str_appendf(s, "%s%s", items ? sep : "", names[i]);
            written_names += run;
        }
        items++;
        i += run;
    }
    if (written_names < n) ah_str_appendf(s, "%s... and %d more", sep, n - written_names);
    return items;
}

/* ASCII only, whatever the locale. */
static bool alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool ah_name_path_safe(const char *name) {
    if (!alnum(name[0])) return false; /* also "" */
    for (const char *c = name; *c; c++)
        if (!alnum(*c) && *c != '-' && *c != '_' && *c != '.') return false;
    return true;
}
