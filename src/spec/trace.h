/* Spot-availability traces: readers for the three public formats (shared/traces/README.md).
 *
 *  - events (Oobleck): CSV `time,add|remove,nodeN`, no header; times in milliseconds by default.
 *  - counts (Bamboo): CSV `time,count`, no header, a step function (two rows at each change).
 *    The raw files are in seconds, the "_scaled" ones and the p2 multi-day file in hours; the
 *    unit is detected conservatively (see ah_trace_load) or given by the user.
 *  - SkyPilot spot-traces JSON: {"metadata": {"gap_seconds": N}, "data": [count, ...]}: count i
 *    holds from i * N seconds to (i + 1) * N seconds.
 * A count trace is stored as its changes (steps); an event trace as its events with node ids
 * interned in order of first appearance. All times are converted to seconds.
 *
 * Ownership: ah_trace_t owns its arrays; free with ah_trace_free.
 */
#ifndef AH_SPEC_TRACE_H
#define AH_SPEC_TRACE_H

#include <stdbool.h>

#include "core/status.h"

typedef enum { AH_TRACE_EVENTS = 0, AH_TRACE_COUNTS = 1 } ah_trace_kind_t;

/* AUTO: events are milliseconds; count CSVs are detected; SkyPilot JSON carries its own. */
typedef enum { AH_UNIT_AUTO = 0, AH_UNIT_MS, AH_UNIT_S, AH_UNIT_H } ah_time_unit_t;

typedef struct ah_trace_event {
    double t_s;
    int id;   /* index into ah_trace_t.ids */
    bool add;
} ah_trace_event_t;

typedef struct ah_trace_step {
    double t_s;
    int count; /* instances alive from t_s on */
} ah_trace_step_t;

typedef struct ah_trace {
    char path[512];
    ah_trace_kind_t kind;
    const char *format;     /* "oobleck events CSV", "bamboo counts CSV", "skypilot JSON" */
    ah_time_unit_t unit;    /* the unit used */
    char unit_how[160];     /* why: "given", "oobleck default", "detected: ..." */
    ah_trace_event_t *events;
    int n_events;
    char (*ids)[32];        /* event traces: node ids as written ("node7") */
    int n_ids;
    ah_trace_step_t *steps; /* count traces: first step at the first row's time */
    int n_steps;
    double end_s;           /* time of the last row */
} ah_trace_t;

const char *ah_time_unit_name(ah_time_unit_t u); /* "ms", "s", "h", "auto" */
bool ah_time_unit_parse(const char *s, ah_time_unit_t *out);

/* Reads a trace; the format follows from the content (".json" or a leading '{' is SkyPilot; a
 * CSV whose second field is add/remove is an event trace, else a count trace). Errors name
 * FILE:LINE (CSV) or FILE:LINE:COL (JSON) and what is wrong. Unit detection for count CSVs with
 * AH_UNIT_AUTO: all times integers -> seconds; some fractional and the last <= 240 -> hours
 * (ten days; the fractional files are hours with three decimals); anything else is refused with
 * a message asking for unit=s|h|ms. Times must not decrease; counts must be >= 0. */
ah_status_t ah_trace_load(const char *path, ah_time_unit_t unit, ah_trace_t *t, ah_error_t *err);
void ah_trace_free(ah_trace_t *t);

#endif
