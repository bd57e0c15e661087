/* Growable arrays: a pointer, a count and a capacity kept by the caller, grown by doubling (and
 * qsort's comparator for doubles).
 *
 *     item_t *items = NULL; int n = 0, cap = 0;
 *     if (!ah_grow(&items, &cap, n + 1, sizeof *items)) return <no memory>;
 *     items[n++] = x;
 *
 * The caller owns the array (free(items)); on failure it is left as it was. */
#ifndef AH_CORE_VEC_H
#define AH_CORE_VEC_H

#include <stdbool.h>
#include <stddef.h>

/* Makes *arr (the address of a T *, passed as void *) hold at least `need` elements of `elem`
 * bytes, doubling *cap from 16; false, *arr and *cap unchanged, when there is no memory. The new
 * elements are not initialized. */
bool ah_grow(void *arr, int *cap, int need, size_t elem);

/* qsort's comparator for an array of doubles, ascending (-1, 0, 1; NaN compares equal to all). */
int ah_cmp_double(const void *a, const void *b);

#endif
