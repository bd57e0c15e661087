/* Growable arrays (core/vec.h). */
#include "core/vec.h"

#include <stdlib.h>

bool ah_grow(void *arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int grown_cap = *cap > 0 ? *cap : 16;
    while (grown_cap < need) grown_cap *= 2;
    void *grown = realloc(*(void **)arr, elem * (size_t)grown_cap);
    if (!grown) return false;
    *(void **)arr = grown;
    *cap = grown_cap;
    return true;
}

int ah_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
