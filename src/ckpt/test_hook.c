/* The test-only stop point (test_hook.h). */
#include "ckpt/test_hook.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/str.h"

static const char *const PHASES[] = {"step", "ckpt-piece", "ckpt-write", "upload", "notice-snapshot", "notice-memory", "replica",
                                     "notice-uploads", "reconfig-split", "reconfig-save", "reconfig-move",
                                     "reconfig-join", "resume-list"};
enum { N_PHASES = sizeof PHASES / sizeof PHASES[0] };

static _Noreturn void bad(const char *value, const char *why) {
    fprintf(stderr, "autohet: AH_TEST_HOOK=\"%s\": %s (expected "
            "phase=step|ckpt-piece|ckpt-write|upload|notice-snapshot|notice-memory|replica|notice-uploads|"
            "reconfig-split|reconfig-save|reconfig-move|reconfig-join|resume-list,step=N|N+|any"
            "[,node=NAME][,file=PATH][,action=wait|kill|pause|fail|failonce|nomem]; test-only)\n", value, why);
    exit(2);
}

/* Whether AH_TEST_HOOK names this point (phase, step, node); its action and file then. */
static bool matches(const char *phase, int64_t step, const char *node, char *action, char *file) {
    const char *value = getenv("AH_TEST_HOOK");
    if (!value || !value[0]) return false;
    char buf[1024], want_phase[32] = "", want_node[256] = "";
    snprintf(action, 16, "wait");
    file[0] = 0;
    long long want_step = -1;
    bool any_step = false, or_later = false; /* step=N+: N or any later step */
    if (strlen(value) >= sizeof buf) bad(value, "too long");
    snprintf(buf, sizeof buf, "%s", value);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1]) bad(value, "each item is KEY=VALUE");
        *eq = 0;
        const char *v = eq + 1;
        if (!strcmp(kv, "phase")) {
            if (ah_str_index(v, PHASES, N_PHASES) < 0) bad(value, "unknown phase");
            snprintf(want_phase, sizeof want_phase, "%s", v);
        } else if (!strcmp(kv, "step") && !strcmp(v, "any")) {
            any_step = true;
        } else if (!strcmp(kv, "step")) {
            char *end = NULL;
            errno = 0;
            want_step = strtoll(v, &end, 10);
            or_later = end != v && !strcmp(end, "+");
            if ((*end && !or_later) || errno || want_step < 0) bad(value, "step is not a number >= 0 (or N+)");
        } else if (!strcmp(kv, "node")) snprintf(want_node, sizeof want_node, "%s", v);
        else if (!strcmp(kv, "file")) snprintf(file, 768, "%s", v);
        else if (!strcmp(kv, "action") && (!strcmp(v, "wait") || !strcmp(v, "kill") || !strcmp(v, "pause") ||
                                           !strcmp(v, "fail") || !strcmp(v, "failonce") || !strcmp(v, "nomem")))
            snprintf(action, 16, "%s", v);
        else bad(value, !strcmp(kv, "action") ? "action is wait, kill, pause, fail, failonce or nomem" : "unknown key");
    }
    const bool no_file = !strcmp(action, "kill") || !strncmp(action, "fail", 4) || !strcmp(action, "nomem");
    if (!want_phase[0] || (want_step < 0 && !any_step) || (!file[0] && !no_file))
        bad(value, "phase, step and file (for action=wait or pause) are required");
    if (strcmp(phase, want_phase) || (!any_step && step != want_step && !(or_later && step > want_step))) return false;
    return !want_node[0] || (node && !strcmp(node, want_node));
}

bool ah_test_hook_fails(const char *phase, int64_t step, const char *node) {
    static bool failed; /* failonce: this process's first match only */
    char action[16], file[768];
    if (!matches(phase, step, node, action, file)) return false;
    const bool once = !strcmp(action, "failonce") && !failed;
    failed = failed || once;
    return once || !strcmp(action, "fail");
}

bool ah_test_hook_nomem(const char *phase, int64_t step, const char *node) {
    char action[16], file[768];
    return matches(phase, step, node, action, file) && !strcmp(action, "nomem");
}

void ah_test_hook(const char *phase, int64_t step, const char *node) {
    char action[16], file[768];
    if (!matches(phase, step, node, action, file) || !strncmp(action, "fail", 4) || !strcmp(action, "nomem")) return;
    if (!strcmp(action, "kill")) raise(SIGKILL); /* as the kernel's OOM killer would: no error written, nothing flushed */
    FILE *f = fopen(file, "w");
    if (!f) {
        fprintf(stderr, "autohet: AH_TEST_HOOK: cannot create %s: %s\n", file, strerror(errno));
        exit(2);
    }
    fprintf(f, "%s %" PRId64 " %s %ld\n", phase, step, node ? node : "-", (long)getpid());
    fclose(f);
    if (strcmp(action, "pause") != 0)
        for (;;) pause();
    const struct timespec tick = {0, 20 * 1000 * 1000};
    while (access(file, F_OK) == 0) nanosleep(&tick, NULL); /* pause: until the test removes PATH */
}
