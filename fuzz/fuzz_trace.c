/* libFuzzer harness: a spot-availability trace (Oobleck events CSV, Bamboo counts CSV, SkyPilot
 * JSON), as `autohet simulate --trace` and `autohet run --events` read it (spec/trace.h).
 *
 * Input: the bytes of the file. ah_trace_load takes a path, so the bytes are written once as
 * trace.csv (read with every unit: auto, ms, s, h) and once as trace.json (auto, s), since the
 * name also picks the format. Beyond "no crash, no leak, no undefined behaviour" it checks: a
 * refusal names the file; an accepted trace has a unit and a format, times finite, >= 0 and in
 * order, ends no earlier than its last row; event ids are in range, non-empty and terminated;
 * count steps are >= 0 and each differs from the one before (they are changes).
 * Seeds: tests/corpus/trace/. Run: scripts/run-fuzzers.sh trace.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"
#include "spec/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *path, const char *what) {
    fprintf(stderr, "fuzz_trace: %s: %s\n", path, what);
    abort();
}

static bool time_ok(double t) { return isfinite(t) && t >= 0; }

static void check_events(const char *path, const ah_trace_t *t) {
    if (t->n_events < 1 || t->n_ids < 1 || t->n_ids > t->n_events) fail(path, "event counts out of range");
    for (int i = 0; i < t->n_ids; i++)
        if (!t->ids[i][0] || !memchr(t->ids[i], 0, sizeof t->ids[i])) fail(path, "id empty or unterminated");
    for (int e = 0; e < t->n_events; e++) {
        const ah_trace_event_t *v = &t->events[e];
        if (v->id < 0 || v->id >= t->n_ids) fail(path, "event id out of range");
        if (!time_ok(v->t_s) || (e && v->t_s < t->events[e - 1].t_s)) fail(path, "event time bad or out of order");
    }
    if (t->end_s < t->events[t->n_events - 1].t_s) fail(path, "ends before its last event");
}

static void check_counts(const char *path, const ah_trace_t *t) {
    if (t->n_steps < 1) fail(path, "count trace without steps");
    for (int i = 0; i < t->n_steps; i++) {
        const ah_trace_step_t *s = &t->steps[i];
        if (!time_ok(s->t_s) || (i && s->t_s < t->steps[i - 1].t_s)) fail(path, "step time bad or out of order");
        if (s->count < 0 || (i && s->count == t->steps[i - 1].count)) fail(path, "step count negative or no change");
    }
    if (t->end_s < t->steps[t->n_steps - 1].t_s) fail(path, "ends before its last step");
}

static void load(const char *path, ah_time_unit_t unit) {
    ah_trace_t t;
    ah_error_t err;
    if (ah_trace_load(path, unit, &t, &err) != AH_OK) {
        if (!strstr(err.msg, path)) fail(path, "refusal does not name the file");
        return;
    }
    if (t.unit == AH_UNIT_AUTO || !t.format || !t.unit_how[0]) fail(path, "unit or format not filled in");
    if (!time_ok(t.end_s)) fail(path, "end time not finite and >= 0");
    if (t.kind == AH_TRACE_EVENTS) check_events(path, &t);
    else check_counts(path, &t);
    ah_trace_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *csv = ah_fuzz_input_file("trace.csv", data, size);
    const ah_time_unit_t units[] = {AH_UNIT_AUTO, AH_UNIT_MS, AH_UNIT_S, AH_UNIT_H};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) load(csv, units[i]);
    const char *json = ah_fuzz_input_file("trace.json", data, size);
    load(json, AH_UNIT_AUTO);
    load(json, AH_UNIT_S);
    return 0;
}
