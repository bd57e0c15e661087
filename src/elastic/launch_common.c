/* What the launchers share (launcher.h): the choice by name, and the line splitting of a trainer's
 * metrics stream. */
#include "elastic/launcher.h"

#include <string.h>

ah_status_t ah_launcher_by_name(const char *name, const ah_launch_local_opts_t *lo, const ah_launch_ssh_opts_t *so,
                                ah_launcher_t *out, ah_error_t *err) {
    if (!name || strcmp(name, "local") == 0) return ah_launcher_local(lo, out, err);
    if (strcmp(name, "ssh") == 0) return ah_launcher_ssh(so, out, err);
    if (strcmp(name, "slurm") == 0) return ah_launcher_slurm(so, out, err);
    memset(out, 0, sizeof *out);
    return ah_error_set(err, AH_ERR_USAGE, "--launcher %s: expected local, ssh or slurm", name);
}

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
