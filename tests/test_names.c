/* core/names.h: runs of numbered names ("h0..h159"), zero-padded widths, short runs written out,
 * order kept, the max_items cut and its count. */
#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "harness.h"

static void expect(const char *const *names, int n, int max_items, const char *want, int want_items) {
    char buf[512];
    ah_str_t s = ah_str_fixed(buf, sizeof buf);
    const int items = ah_names_append(&s, names, n, ", ", max_items);
    CHECK(strcmp(buf, want) == 0, "got \"%s\", want \"%s\"", buf, want);
    CHECK_EQ_I64(items, want_items);
}

int main(void) {
    char store[200][8];
    const char *h[200];
    for (int i = 0; i < 200; i++) {
        snprintf(store[i], sizeof store[i], "h%d", i < 160 ? i : i + 40); /* h0..h159, then h200..h239 */
        h[i] = store[i];
    }
    expect(h, 160, 0, "h0..h159", 1);
    expect(h, 200, 0, "h0..h159, h200..h239", 2);
    expect(h, 2, 0, "h0, h1", 2); /* two names are not a run */
    expect(h, 3, 0, "h0..h2", 1);
    const char *padded[] = {"node-008", "node-009", "node-010", "node-11", "x", "y"};
    expect(padded, 6, 0, "node-008..node-010, node-11, x, y", 4);
    const char *mixed[] = {"fast-0", "fast-1", "fast-2", "slow-0", "slow-1", "slow-2", "slow-3", "gpu"};
    expect(mixed, 8, 0, "fast-0..fast-2, slow-0..slow-3, gpu", 3);
    const char *order[] = {"a2", "a1", "a0"}; /* descending is not a run: order is kept */
    expect(order, 3, 0, "a2, a1, a0", 3);
    const char *many[] = {"p", "q", "r", "s", "t"};
    expect(many, 5, 2, "p, q, ... and 3 more", 5);
    expect(h, 200, 1, "h0..h159, ... and 40 more", 2);
    expect(h, 0, 0, "", 0);
    const char *digits[] = {"99999999999999999999", "100000000000000000000"}; /* past 64 bits: no crash */
    expect(digits, 2, 0, "99999999999999999999, 100000000000000000000", 2);
    return ah_test_finish();
}
