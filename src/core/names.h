/* Long lists of names, summarised for people: every verb that prints a list that can be long
 * (node names in simulate's pools, idle devices in plan pictures, a cluster's nodes in a
 * message) writes it through here, so 512 nodes read "h0..h511", not 512 words.
 *
 * A run is three or more consecutive names that are one prefix followed by consecutive decimal
 * numbers ("h0", "h1", "h2" -> "h0..h2"; "node-007", "node-008", "node-009" -> "node-007..node-009";
 * zero-padded numbers run only at one width). Two such names, and names without a trailing
 * number, are written out. Order is kept: a list is summarised as given, never sorted.
 *
 *     ah_str_t s = ah_str_fixed(buf, sizeof buf);
 *     ah_names_append(&s, names, n, ", ", 12);    // "h0..h159, x, y1..y3"
 */
#ifndef AH_CORE_NAMES_H
#define AH_CORE_NAMES_H

#include <stdbool.h>

#include "core/str.h"

/* The rule for a name that becomes a path component, a host name and a command-line word (a
 * cluster's node names: hostfiles, rankfiles, checkpoint directories, launch files), in words for
 * messages. */
#define AH_NAME_SAFE_RULE                                                                          \
    "letters, digits, '-', '_' and '.', starting with a letter or a digit (so never \".\", \"..\", a " \
    "hidden name or an option)"

/* Whether name follows AH_NAME_SAFE_RULE: 1 or more of [A-Za-z0-9._-], the first [A-Za-z0-9]. The
 * length limit is the caller's. */
bool ah_name_path_safe(const char *name);

/* Appends names[0 .. n) to s as runs and single names separated by sep. After max_items items
 * (runs or single names; 0: no limit) the rest is "sep... and N more" (N names). Returns the
 * number of items the whole list makes (written or not). */
int ah_names_append(ah_str_t *s, const char *const *names, int n, const char *sep, int max_items);

#endif
