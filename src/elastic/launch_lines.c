/* Line splitting of a trainer's metrics stream, shared by the launchers (launcher.h). */
#include "elastic/launcher.h"

void ah_launch_lines_feed(ah_launch_lines_t *lb, const char *buf, size_t n, void (*fn)(void *fn_ctx, json_t *line),
                          void *fn_ctx) {
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != '\n') {
            /* A line longer than the buffer is not one of ours: drop its excess. */
            if (lb->len + 1 < sizeof lb->partial) lb->partial[lb->len++] = buf[i];
            continue;
        }
        lb->partial[lb->len] = 0;
        json_t *line = json_loads(lb->partial, 0, NULL);
        lb->len = 0;
        if (json_is_object(line)) fn(fn_ctx, line);
        json_decref(line);
    }
}
