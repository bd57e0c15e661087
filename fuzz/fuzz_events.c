/* libFuzzer harness: an events file, as `autohet run --events FILE` reads it (elastic/agent.h:
 * an Oobleck event trace resolved onto the nodes of a cluster).
 *
 * Input: the bytes of the file, written to a temp file (ah_agent_events_load takes a path), read
 * against the built-in cluster cpu-hetero (one on-demand node, two spot nodes). Beyond "no crash,
 * no leak, no undefined behaviour" it checks: a refusal names the file; an accepted file gives
 * every event of the trace either a node of the cluster or the ignored count, in time order, with
 * finite times >= 0, and a terminated mapping line.
 * Seeds: tests/corpus/events/. Run: scripts/run-fuzzers.sh events.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic/agent.h"
#include "input_file.h"
#include "spec/cluster.h"
#include "spec/trace.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Lives for the whole run (reachable, so LeakSanitizer does not count it). */
static ah_cluster_t g_cluster;

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_events: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ah_error_t err;
    if (ah_cluster_builtin("cpu-hetero", &g_cluster, &err) != AH_OK) fail("built-in cluster", err.msg);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = ah_fuzz_input_file("events.csv", data, size);
    ah_agent_events_t ev;
    ah_error_t err;
    if (ah_agent_events_load(path, &g_cluster, &ev, &err) != AH_OK) {
        if (!strstr(err.msg, path)) fail("refusal does not name the file", err.msg);
        return 0;
    }
    ah_trace_t t;
    if (ah_trace_load(path, AH_UNIT_AUTO, &t, &err) != AH_OK) fail("accepted, but its trace does not load", err.msg);
    if (ev.n < 0 || ev.ignored < 0 || ev.n + ev.ignored != t.n_events) fail("events lost or invented", NULL);
    for (int i = 0; i < ev.n; i++) {
        const ah_agent_event_t *e = &ev.ev[i];
        if (e->node < 0 || e->node >= g_cluster.n_nodes) fail("event on no node of the cluster", NULL);
        if (!isfinite(e->t_s) || e->t_s < 0 || (i && e->t_s < ev.ev[i - 1].t_s)) fail("time bad or out of order", NULL);
    }
    if (!memchr(ev.mapping, 0, sizeof ev.mapping)) fail("mapping line not terminated", NULL);
    ah_trace_free(&t);
    ah_agent_events_free(&ev);
    return 0;
}
