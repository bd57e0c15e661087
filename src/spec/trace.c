/* Trace readers: Oobleck event CSV, Bamboo count CSV, SkyPilot JSON (formats in trace.h). Input data like
 * cluster files: the simulator (sim/) and the elastic agent's event files (elastic/events.c) read them. */
#include "spec/trace.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/vec.h"

/* Hours: the largest last time a fractional count CSV may have to be read as hours. */
#define HOURS_DETECT_MAX 240.0

const char *ah_time_unit_name(ah_time_unit_t u) {
    switch (u) {
    case AH_UNIT_MS: return "ms";
    case AH_UNIT_S: return "s";
    case AH_UNIT_H: return "h";
    default: return "auto";
    }
}

bool ah_time_unit_parse(const char *s, ah_time_unit_t *out) {
    if (strcmp(s, "ms") == 0) *out = AH_UNIT_MS;
    else if (strcmp(s, "s") == 0) *out = AH_UNIT_S;
    else if (strcmp(s, "h") == 0) *out = AH_UNIT_H;
    else if (strcmp(s, "auto") == 0) *out = AH_UNIT_AUTO;
    else return false;
    return true;
}

static double unit_seconds(ah_time_unit_t u) {
    return u == AH_UNIT_MS ? 1e-3 : u == AH_UNIT_H ? 3600.0 : 1.0;
}

void ah_trace_free(ah_trace_t *t) {
    if (!t) return;
    free(t->events);
    free(t->ids);
    free(t->steps);
    memset(t, 0, sizeof *t);
}

static ah_status_t read_all(const char *path, char **out, size_t *len, ah_error_t *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return ah_error_set(err, AH_ERR_IO, "%s: cannot open the trace: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    const int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf) return ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory reading the trace", path);
    if (read_errno) {
        free(buf);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot read the trace: %s", path,
                            read_errno == EISDIR ? "is a directory, not a trace file" : strerror(read_errno));
    }
    buf[n] = 0;
    *out = buf;
    *len = n;
    return AH_OK;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

/* A finite number filling the whole field. */
static bool parse_num(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return false;
    *out = v;
    return true;
}

typedef struct {
    char whole[160]; /* the row as written, for messages (cut at 159 characters); fields[] point
                      * into the line itself, split in place */
    int line;       /* 1-based line of the current row */
    char *fields[4];
    int n_fields;
} csv_row_t;

/* Next non-empty, non-comment row; lines end in \n, \r\n or a lone \r (one shared file has CR
 * line ends). Returns false at the end. */
static bool next_row(char **cursor, int *line, csv_row_t *row) {
    while (**cursor) {
        char *s = *cursor, *e = s + strcspn(s, "\r\n");
        char *next = e;
        if (*next == '\r' && next[1] == '\n') next += 2;
        else if (*next) next++;
        *e = 0;
        (*line)++;
        *cursor = next;
        char *t = trim(s);
        if (!*t || *t == '#') continue;
        snprintf(row->whole, sizeof row->whole, "%s", t);
        row->line = *line;
        row->n_fields = 0;
        for (char *p = t; row->n_fields < 4;) {
            char *c = strchr(p, ',');
            if (c) *c = 0;
            row->fields[row->n_fields++] = trim(p);
            if (!c) break;
            p = c + 1;
        }
        return true;
    }
    return false;
}

static bool is_event_row(const csv_row_t *r) {
    return r->n_fields == 3 && (strcmp(r->fields[1], "add") == 0 || strcmp(r->fields[1], "remove") == 0);
}

static int intern(ah_trace_t *t, int *cap, const char *id) {
    for (int i = 0; i < t->n_ids; i++)
        if (strcmp(t->ids[i], id) == 0) return i;
    if (!ah_grow(&t->ids, cap, t->n_ids + 1, sizeof *t->ids)) return -1;
    snprintf(t->ids[t->n_ids], sizeof t->ids[0], "%s", id);
    return t->n_ids++;
}

/* A time that is finite in its unit but not in seconds (1e307 hours). */
static ah_status_t too_long(const ah_trace_t *t, int line, const char *time, ah_error_t *err) {
    return ah_error_set(err, AH_ERR_PARSE, "%s:%d: time %s %s is more seconds than a double holds; check the unit",
                        t->path, line, time, ah_time_unit_name(t->unit));
}

static ah_status_t load_events(char *text, ah_trace_t *t, ah_error_t *err) {
    int line = 0, cap_e = 0, cap_i = 0;
    csv_row_t r;
    double prev = -INFINITY, scale = unit_seconds(t->unit);
    while (next_row(&text, &line, &r)) {
        if (r.n_fields != 3)
            return ah_error_set(err, AH_ERR_PARSE,
                                "%s:%d: expected `time,add|remove,NODE_ID` (an Oobleck event trace), "
                                "got \"%s\"; fix the row or check that the file is an event trace",
                                t->path, r.line, r.whole);
        if (!is_event_row(&r))
            return ah_error_set(err, AH_ERR_PARSE, "%s:%d: action \"%s\" in \"%s\": expected add or remove",
                                t->path, r.line, r.fields[1], r.whole);
        double v;
        if (!parse_num(r.fields[0], &v) || v < 0)
            return ah_error_set(err, AH_ERR_PARSE, "%s:%d: time \"%s\" is not a number >= 0", t->path,
                                r.line, r.fields[0]);
        if (v < prev)
            return ah_error_set(err, AH_ERR_PARSE,
                                "%s:%d: time %s goes back (previous row %g); rows must be in time order",
                                t->path, r.line, r.fields[0], prev);
        if (!isfinite(v * scale)) return too_long(t, r.line, r.fields[0], err);
        if (!*r.fields[2] || strlen(r.fields[2]) >= sizeof t->ids[0])
            return ah_error_set(err, AH_ERR_PARSE, "%s:%d: node id \"%s\" is empty or longer than %zu characters",
                                t->path, r.line, r.fields[2], sizeof t->ids[0] - 1);
        prev = v;
        int id = intern(t, &cap_i, r.fields[2]);
        if (id < 0 || !ah_grow(&t->events, &cap_e, t->n_events + 1, sizeof *t->events))
            return ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory", t->path);
        t->events[t->n_events++] = (ah_trace_event_t){v * scale, id, strcmp(r.fields[1], "add") == 0};
        t->end_s = v * scale;
    }
    if (t->n_events == 0)
        return ah_error_set(err, AH_ERR_PARSE, "%s: the trace has no rows", t->path);
    return AH_OK;
}

/* Appends (t_s, count) when the count changes (the first row always). */
static bool push_step(ah_trace_t *t, int *cap, double t_s, int count) {
    if (t->n_steps > 0 && t->steps[t->n_steps - 1].count == count) return true;
    if (!ah_grow(&t->steps, cap, t->n_steps + 1, sizeof *t->steps)) return false;
    t->steps[t->n_steps++] = (ah_trace_step_t){t_s, count};
    return true;
}

static ah_status_t load_counts(char *text, ah_trace_t *t, ah_error_t *err) {
    /* First pass: check every row and collect the facts the unit detection needs. */
    char *copy = strdup(text);
    if (!copy) return ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory", t->path);
    char *cur = copy;
    int line = 0, rows = 0;
    bool fractional = false;
    double prev = -INFINITY;
    csv_row_t r;
    ah_status_t st = AH_OK;
    while (st == AH_OK && next_row(&cur, &line, &r)) {
        double v, c;
        if (r.n_fields != 2)
            st = ah_error_set(err, AH_ERR_PARSE,
                              "%s:%d: expected `time,count` (a Bamboo count trace), got \"%s\"", t->path,
                              r.line, r.whole);
        else if (!parse_num(r.fields[0], &v) || v < 0)
            st = ah_error_set(err, AH_ERR_PARSE, "%s:%d: time \"%s\" is not a number >= 0", t->path, r.line,
                              r.fields[0]);
        else if (!parse_num(r.fields[1], &c) || c < 0 || c != floor(c) || c > 1e6)
            st = ah_error_set(err, AH_ERR_PARSE, "%s:%d: count \"%s\" is not a whole number >= 0", t->path,
                              r.line, r.fields[1]);
        else if (v < prev)
            st = ah_error_set(err, AH_ERR_PARSE,
                              "%s:%d: time %s goes back (previous row %g); rows must be in time order",
                              t->path, r.line, r.fields[0], prev);
        else {
            if (v != floor(v)) fractional = true;
            prev = v;
            rows++;
        }
    }
    free(copy);
    if (st != AH_OK) return st;
    if (rows == 0) return ah_error_set(err, AH_ERR_PARSE, "%s: the trace has no rows", t->path);
    if (t->unit == AH_UNIT_AUTO) {
        if (!fractional) {
            t->unit = AH_UNIT_S;
            snprintf(t->unit_how, sizeof t->unit_how, "detected: whole-number times, last %g -> seconds", prev);
        } else if (prev <= HOURS_DETECT_MAX) {
            t->unit = AH_UNIT_H;
            snprintf(t->unit_how, sizeof t->unit_how,
                     "detected: fractional times, last %g <= %g -> hours", prev, HOURS_DETECT_MAX);
        } else
            return ah_error_set(err, AH_ERR_USAGE,
                                "%s: cannot tell the time unit (fractional times, last %g): say it with "
                                "--trace POOL=%s,unit=s (or unit=h, unit=ms)",
                                t->path, prev, t->path);
    }
    const double scale = unit_seconds(t->unit);
    int cap = 0;
    line = 0;
    while (next_row(&text, &line, &r)) {
        double v = 0, c = 0; /* checked in the first pass */
        parse_num(r.fields[0], &v);
        parse_num(r.fields[1], &c);
        if (!isfinite(v * scale)) return too_long(t, r.line, r.fields[0], err);
        if (!push_step(t, &cap, v * scale, (int)c))
            return ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory", t->path);
        t->end_s = v * scale;
    }
    return AH_OK;
}

static ah_status_t load_skypilot(const char *path, ah_trace_t *t, ah_error_t *err) {
    json_t *doc;
    ah_status_t st = ah_json_load_file(path, &doc, err);
    if (st != AH_OK) return st;
    json_t *meta, *data;
    double gap = 0;
    char where[600];
    snprintf(where, sizeof where, "%s: metadata", path);
    if ((st = ah_json_get_typed(doc, path, "metadata", JSON_OBJECT, true, &meta, err)) ||
        (st = ah_json_get_num(meta, where, "gap_seconds", true, 1e-3, 1e9, &gap, err)) ||
        (st = ah_json_get_typed(doc, path, "data", JSON_ARRAY, true, &data, err))) {
        json_decref(doc);
        return st;
    }
    if (t->unit != AH_UNIT_AUTO && t->unit != AH_UNIT_S) {
        json_decref(doc);
        return ah_error_set(err, AH_ERR_USAGE,
                            "%s: a SkyPilot trace gives its own step (metadata.gap_seconds = %g s); drop unit=%s",
                            path, gap, ah_time_unit_name(t->unit));
    }
    t->unit = AH_UNIT_S;
    snprintf(t->unit_how, sizeof t->unit_how, "metadata.gap_seconds = %g", gap);
    int cap = 0;
    size_t n = json_array_size(data);
    for (size_t i = 0; i < n && st == AH_OK; i++) {
        json_t *v = json_array_get(data, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
            st = ah_error_set(err, AH_ERR_PARSE, "%s: data[%zu]: expected a whole count >= 0, got %s", path, i,
                              ah_json_type_name(v));
        else if (!push_step(t, &cap, (double)i * gap, (int)json_integer_value(v)))
            st = ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory", path);
    }
    if (st == AH_OK && n == 0)
        st = ah_error_set(err, AH_ERR_PARSE, "%s: data: the array is empty; give one count per %g s", path, gap);
    t->end_s = (double)n * gap;
    json_decref(doc);
    return st;
}

ah_status_t ah_trace_load(const char *path, ah_time_unit_t unit, ah_trace_t *t, ah_error_t *err) {
    memset(t, 0, sizeof *t);
    snprintf(t->path, sizeof t->path, "%s", path);
    t->unit = unit;
    if (unit != AH_UNIT_AUTO) snprintf(t->unit_how, sizeof t->unit_how, "given");
    char *text = NULL;
    size_t len = 0;
    ah_status_t st = read_all(path, &text, &len, err);
    if (st != AH_OK) return st;
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    const size_t pl = strlen(path);
    if (*p == '{' || (pl > 5 && strcmp(path + pl - 5, ".json") == 0)) {
        free(text);
        t->kind = AH_TRACE_COUNTS;
        t->format = "skypilot JSON";
        st = load_skypilot(path, t, err);
    } else {
        /* The kind follows from the first row: three fields, an event trace (whose loader names
         * what is wrong in it), else counts. */
        char *probe = strdup(text), *cur = probe;
        int line = 0;
        csv_row_t r;
        bool events = probe && next_row(&cur, &line, &r) && r.n_fields == 3;
        free(probe);
        if (events) {
            t->kind = AH_TRACE_EVENTS;
            t->format = "oobleck events CSV";
            if (t->unit == AH_UNIT_AUTO) {
                t->unit = AH_UNIT_MS;
                snprintf(t->unit_how, sizeof t->unit_how, "Oobleck event traces are in ms");
            }
            st = load_events(text, t, err);
        } else {
            t->kind = AH_TRACE_COUNTS;
            t->format = "bamboo counts CSV";
            st = load_counts(text, t, err);
        }
        free(text);
    }
    if (st != AH_OK) ah_trace_free(t);
    return st;
}
