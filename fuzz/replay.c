/* A main() for the fuzz harnesses in builds without libFuzzer: runs LLVMFuzzerTestOneInput once
 * on each file named (a directory: on each file in it), so every build — the ASan one included —
 * replays the seed and regression corpora (tests/test_fuzz_seeds.sh). A harness that finds a
 * broken property aborts, which fails the run. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a harness, as in libFuzzer. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "%s: cannot open: %s\n", path, strerror(errno));
        if (f) fclose(f);
        return 1;
    }
    /* Exactly the file's bytes, like libFuzzer, so ASan sees a read past the input. */
    size_t len = (size_t)st.st_size;
    uint8_t *input = malloc(len ? len : 1);
    int bad = !input || fread(input, 1, len, f) != len;
    fclose(f);
    if (bad) {
        fprintf(stderr, "%s: cannot read\n", path);
        free(input);
        return 1;
    }
    LLVMFuzzerTestOneInput(input, len);
    free(input);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Files of a directory in name order (so a failure reproduces in the same order). */
static int replay_dir(const char *dir, int *count) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot open: %s\n", dir, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int failures = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **bigger = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            if (!bigger) {
                failures++;
                break;
            }
            names = bigger;
        }
        size_t need = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(need))) {
            failures++;
            break;
        }
        snprintf(names[n++], need, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            failures += replay_file(names[i]);
            (*count)++;
        }
        free(names[i]);
    }
    free(names);
    return failures;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...  (replays each input once; build with -DAH_FUZZ=ON "
                        "and clang to fuzz)\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int failures = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            failures += replay_dir(argv[i], &count);
        } else {
            failures += replay_file(argv[i]);
            count++;
        }
    }
    fprintf(stderr, "%s: replayed %d input(s), %d unreadable\n", argv[0], count, failures);
    return failures ? 1 : 0;
}
