/* The fuzz harnesses' private input directory (input_file.h). */
#include "input_file.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[512];

static void die(const char *what, const char *path) {
    fprintf(stderr, "fuzz harness: %s %s: %s\n", what, path, strerror(errno));
    abort();
}

/* Removes the directory's files (flat: harnesses make no subdirectories) and the directory. */
static void remove_dir(void) {
    DIR *d = opendir(g_dir);
    if (d) {
        struct dirent *e;
        char path[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
                snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name) < (int)sizeof path)
                unlink(path);
        closedir(d);
    }
    rmdir(g_dir);
}

const char *ah_fuzz_input_dir(void) {
    if (g_dir[0]) return g_dir;
    /* Memory first: on a disk-backed /tmp, making the files takes most of a run (4x slower). */
    snprintf(g_dir, sizeof g_dir, "/dev/shm/ah-fuzz-XXXXXX");
    if (!mkdtemp(g_dir)) {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof g_dir, "%s/ah-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(g_dir)) die("cannot make", g_dir);
    }
    atexit(remove_dir);
    return g_dir;
}

const char *ah_fuzz_input_file(const char *name, const uint8_t *data, size_t size) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", ah_fuzz_input_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    const bool short_write = size && fwrite(data, 1, size, f) != size;
    if (fclose(f) != 0 || short_write) die("cannot write", path);
    return path;
}
