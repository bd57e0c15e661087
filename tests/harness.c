#include "harness.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "core/json.h"
#include "elastic/launcher.h"

static int passed, failed;
static int held; /* failures of an attempt ah_test_retry may repeat: said, not counted */
static bool holding;

void ah_test_check(bool ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        passed++;
        return;
    }
    if (holding)
        held++;
    else
        failed++;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s %s:%d: ", holding ? "missed (an attempt that is repeated)" : "FAIL", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void ah_test_check_err(int status, int want, const char *msg, const char *needle, const char *file,
                       int line) {
    ah_test_check(status == want && strstr(msg, needle) != NULL, file, line,
                  "want status %d with message containing \"%s\", got status %d: %s", want, needle,
                  status, msg);
}

void ah_test_retry(void (*test)(void), int tries, const char *what) {
    for (int k = 1; k <= tries; k++) {
        holding = k < tries;
        held = 0;
        test();
        holding = false;
        if (!held) return;
        fprintf(stderr, "%s: attempt %d of %d missed %d check%s (a loaded machine's timing?): again\n", what, k,
                tries, held, held == 1 ? "" : "s");
    }
}

int ah_test_finish(void) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

const char *ah_test_src_path(const char *rel) {
    static char buf[4096];
    const char *root = getenv("AH_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/%s", root ? root : ".", rel);
    return buf;
}

ah_status_t ah_test_parse_cluster(const char *text, ah_cluster_t *c, ah_error_t *err) {
    json_t *doc = NULL;
    ah_status_t s = ah_json_load_string(text, strlen(text), "c.json", &doc, err);
    if (s) return s;
    s = ah_cluster_from_json(doc, "c.json", c, err);
    json_decref(doc);
    return s;
}

bool ah_test_mpirun_self(int np, const char *extra) {
    if (getenv("OMPI_COMM_WORLD_SIZE")) return false;
    char self[1024], cmd[1400];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "find this program");
    self[n > 0 ? n : 0] = '\0';
    snprintf(cmd, sizeof cmd, "mpirun %s %s%s-np %d %s", AH_MPIRUN_ONE_MACHINE,
             geteuid() == 0 ? "--allow-run-as-root " : "", extra, np, self);
    const int st = system(cmd);
    CHECK(st == 0, "`%s` exited with %d", cmd, st);
    return true;
}
