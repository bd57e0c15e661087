/* autohet report: a metrics JSONL (autohet train --metrics, or autohet run's merged file) as a
 * summary on stdout and, with --svg FILE, one picture of two panels:
 *   top:    training loss (one line per launch) and validation loss (dots) against tokens trained,
 *           with each preemption's step marked (dashed);
 *   bottom: throughput (tokens/s of each step) against wall time, with each stop-to-resume span
 *           shaded and labelled with its cause, joins and non-finite steps marked.
 * Time: a step line's "t_s" (autohet run stamps the seconds since its start) or, in a trainer's own
 * file, the running sum of the steps' "seconds". Tokens: (step + 1) x the step's "tokens", so
 * steps redone after a rollback are drawn over the first try. Events read: "preempt" (t_s, step,
 * cause: counted as a preemption unless "node joined", "agent killed" or "job failed", each
 * counted apart),
 * "recover" (seconds from the notice to the first step after it), "restore" (autohet run's copy of
 * the trainer's recover event; its "repaired" files, one summary line each, as a trainer's own
 * recover event's), "join" (t_s), "nonfinite" (step), and "plan" after step lines: a rerun of
 * autohet run appended to its file, whose launches and time go on from the earlier run's. Errors
 * name the file and line. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/vec.h"
#include "runtime/protocol.h"

#define VERB "report"
/* The largest launch number and step a metrics line may carry (a step count stays exact in a
 * double, and launch numbers index the colours). */
#define AH_REPORT_MAX_LAUNCH 1000000
#define AH_REPORT_MAX_STEP ((int64_t)1 << 50)
/* causes of autohet run's preempt events that are not preemptions (elastic/agent.h) */
#define AH_REPORT_CAUSE_JOIN "node joined"
#define AH_REPORT_CAUSE_AGENT "agent killed"
#define AH_REPORT_CAUSE_FAILED "job failed" /* relaunched under the failure policy */
#define AH_REPORT_MAX_REPAIRS 16

typedef struct {
    int64_t step;
    int launch;
    double loss, val_loss, tokens, seconds, t; /* tokens: trained by the end of this step */
} point_t;

typedef struct {
    char kind;          /* 'p' preempt (with its recovery span), 'j' join, 'n' non-finite */
    double t, span_s;   /* span_s: notice to first step after it (recover "seconds"), 0 when none */
    int64_t step;
    char cause[48];
} mark_t;

typedef struct {
    point_t *pts;
    int n, cap;
    mark_t *marks;
    int n_marks, cap_marks;
    bool stamped;       /* the step lines carry t_s */
    /* autohet run appends a rerun to its file, from its own "plan" event on: launches numbered and
     * t_s counted from 0 again, so they are shifted past the earlier run's (base = last + 1, and
     * the time of its last step) */
    int launch_base, max_launch;
    double t_base;
    /* the copies a restore replaced ("restore" events' "repaired"), a line each */
    char repairs[AH_REPORT_MAX_REPAIRS][600];
    int n_repairs;
} series_t;

/* autohet run's "restore" event (the trainer's recover): each copy of a file it replaced from another
 * tier, a line for the summary. */
static void read_restore(series_t *s, const json_t *d) {
    const json_t *fixed = json_object_get(d, "repaired");
    for (size_t i = 0; i < json_array_size(fixed) && s->n_repairs < AH_REPORT_MAX_REPAIRS; i++) {
        const char *what = json_string_value(json_array_get(fixed, i));
        if (what)
            snprintf(s->repairs[s->n_repairs++], sizeof s->repairs[0], "restore of step %lld (launch %lld) "
                     "repaired: %.500s", (long long)json_integer_value(json_object_get(d, AH_PROTO_STEP)),
                     (long long)json_integer_value(json_object_get(d, "launch")), what);
    }
}

static bool add_mark(series_t *s, mark_t m) {
    if (!ah_grow(&s->marks, &s->cap_marks, s->n_marks + 1, sizeof *s->marks)) return false;
    s->marks[s->n_marks++] = m;
    return true;
}

/* One line of the file into s; where: "FILE:LINE". */
static ah_status_t read_line(series_t *s, const json_t *d, const char *where, ah_error_t *err) {
    const char *ev = json_string_value(json_object_get(d, AH_PROTO_EVENT));
    if (!ev) {
        if (!json_is_integer(json_object_get(d, AH_PROTO_STEP)))
            return ah_error_set(err, AH_ERR_PARSE, "%s: neither a step line (integer \"step\") nor an event", where);
        const json_t *launch = json_object_get(d, "launch"); /* autohet run's launch number; absent: 0 */
        if (launch && (!json_is_integer(launch) || json_integer_value(launch) < 0 ||
                       json_integer_value(launch) > AH_REPORT_MAX_LAUNCH))
            return ah_error_set(err, AH_ERR_PARSE, "%s: \"launch\": expected an integer 0 .. %d", where,
                                AH_REPORT_MAX_LAUNCH);
        if (json_integer_value(json_object_get(d, AH_PROTO_STEP)) > AH_REPORT_MAX_STEP)
            return ah_error_set(err, AH_ERR_PARSE, "%s: step %lld: more than %lld", where,
                                (long long)json_integer_value(json_object_get(d, AH_PROTO_STEP)),
                                (long long)AH_REPORT_MAX_STEP);
        point_t p = {.step = json_integer_value(json_object_get(d, AH_PROTO_STEP)),
                     .launch = s->launch_base + (int)json_integer_value(launch),
                     .loss = ah_json_num_or_nan(d, AH_PROTO_STEP_LOSS),
                     .val_loss = ah_json_num_or_nan(d, AH_PROTO_STEP_VAL_LOSS),
                     .seconds = ah_json_num_or_nan(d, AH_PROTO_STEP_SECONDS),
                     .t = s->t_base + ah_json_num_or_nan(d, "t_s")};
        p.tokens = (double)(p.step + 1) * ah_json_num_or_nan(d, AH_PROTO_STEP_TOKENS);
        if (!isfinite(p.tokens) || !isfinite(p.seconds))
            return ah_error_set(err, AH_ERR_PARSE, "%s: a step line needs numbers \"tokens\" and \"seconds\"", where);
        if (p.step < 0 || p.tokens <= 0 || p.seconds < 0)
            return ah_error_set(err, AH_ERR_PARSE, "%s: step %lld, tokens %g, seconds %g: a step is >= 0, its tokens > 0 "
                                "and its seconds >= 0", where, (long long)p.step,
                                ah_json_num_or_nan(d, AH_PROTO_STEP_TOKENS), p.seconds);
        static const char *const nullable[] = {AH_PROTO_STEP_LOSS, AH_PROTO_STEP_VAL_LOSS, "t_s"};
        for (size_t k = 0; k < sizeof nullable / sizeof nullable[0]; k++) { /* null: not finite, or none */
            const json_t *v = json_object_get(d, nullable[k]);
            if (v && !json_is_number(v) && !json_is_null(v))
                return ah_error_set(err, AH_ERR_PARSE, "%s: \"%s\": expected a number or null, got %s", where,
                                    nullable[k], ah_json_type_name(v));
        }
        if (s->n == 0) s->stamped = isfinite(p.t);
        /* unstamped, or a line of a stamped file without its t_s: the previous step's end + this one */
        if (!s->stamped || !isfinite(p.t)) p.t = (s->n ? s->pts[s->n - 1].t : 0) + p.seconds;
        if (!ah_grow(&s->pts, &s->cap, s->n + 1, sizeof *s->pts))
            return ah_error_set(err, AH_ERR_OOM, "no host memory for the report");
        s->pts[s->n++] = p;
        if (p.launch > s->max_launch) s->max_launch = p.launch;
        return AH_OK;
    }
    mark_t m = {.t = s->t_base + ah_json_num_or_nan(d, "t_s"),
                .step = json_integer_value(json_object_get(d, AH_PROTO_STEP))};
    if (strcmp(ev, "plan") == 0 && s->n > 0) { /* a rerun of autohet run, appended */
        s->launch_base = s->max_launch + 1;
        s->t_base = s->pts[s->n - 1].t;
        return AH_OK;
    }
    if (strcmp(ev, AH_PROTO_EV_PREEMPT) == 0) {
        m.kind = 'p';
        const char *cause = json_string_value(json_object_get(d, "cause"));
        snprintf(m.cause, sizeof m.cause, "stop (%s)", cause ? cause : "preemption");
    } else if (strcmp(ev, "join") == 0) {
        m.kind = 'j';
        snprintf(m.cause, sizeof m.cause, "join");
    } else if (strcmp(ev, AH_PROTO_EV_NONFINITE) == 0) {
        m.kind = 'n';
        m.t = s->n ? s->pts[s->n - 1].t : 0;
        snprintf(m.cause, sizeof m.cause, "non-finite");
    } else if (strcmp(ev, "restore") == 0) {
        read_restore(s, d);
        return AH_OK;
    } else if (strcmp(ev, AH_PROTO_EV_RECOVER) == 0) {
        read_restore(s, d); /* a trainer's own file: its recover event is the restore */
        /* the agent's recover event closes the newest preemption's span */
        for (int i = s->n_marks - 1; i >= 0; i--)
            if (s->marks[i].kind == 'p') {
                s->marks[i].span_s = ah_json_num_or_nan(d, "seconds");
                break;
            }
        return AH_OK;
    } else {
        return AH_OK; /* plan, checkpoint, done: not drawn */
    }
    if (!isfinite(m.t)) m.t = s->n ? s->pts[s->n - 1].t : 0;
    return add_mark(s, m) ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the report");
}

static ah_status_t read_metrics(const char *path, series_t *s, ah_error_t *err) {
    FILE *f = fopen(path, "r");
    if (!f) return ah_error_set(err, AH_ERR_IO, "%s: cannot open the metrics file: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ah_status_t st = AH_OK;
    for (int ln = 1; st == AH_OK && getline(&line, &cap, f) >= 0; ln++) {
        if (line[strspn(line, " \t\r\n")] == 0) continue;
        char where[600];
        snprintf(where, sizeof where, "%s:%d", path, ln);
        json_t *d = NULL;
        if ((st = ah_json_load_line(line, strlen(line), path, ln, &d, err)) != AH_OK) break;
        st = json_is_object(d) ? read_line(s, d, where, err)
                               : ah_error_set(err, AH_ERR_PARSE, "%s: expected a JSON object a line", where);
        json_decref(d);
    }
    free(line);
    if (st == AH_OK && ferror(f)) /* a directory opens, and its first read fails */
        st = errno == EISDIR ? ah_error_set(err, AH_ERR_IO, "%s: is a directory, not a metrics file (autohet run "
                                            "writes WORK/metrics.jsonl)", path)
                             : ah_error_set(err, AH_ERR_IO, "%s: read error: %s", path, strerror(errno));
    fclose(f);
    if (st == AH_OK && s->n == 0)
        st = ah_error_set(err, AH_ERR_INVALID, "%s: no step lines (write one with autohet train --metrics FILE or "
                          "autohet run)", path);
    return st;
}

/* ---- the picture ---- */

/* text with XML's special characters escaped */
static void put_text(FILE *f, const char *text) {
    for (const char *c = text; *c; c++) {
        switch (*c) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        default: fputc(*c, f);
        }
    }
}

enum { W = 960, PL = 80, PR = 30, PH = 250, TOP1 = 60, TOP2 = 390, H = 700, AXIS_MAX_TICKS = 20 };
static const char *const LAUNCH_COLORS[] = {"#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f"};

typedef struct {
    double x0, x1, y0, y1; /* data ranges */
    double top;            /* pixel y of the panel's top */
} panel_t;

static double px(const panel_t *p, double x) { return PL + (x - p->x0) / (p->x1 - p->x0) * (W - PL - PR); }
static double py(const panel_t *p, double y) { return p->top + PH - (y - p->y0) / (p->y1 - p->y0) * PH; }

/* A round step for about 5 ticks over span. */
static double tick_step(double span) {
    const double raw = span / 5, mag = pow(10, floor(log10(raw)));
    const double r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

static void axes(FILE *f, const panel_t *p, const char *xlabel, const char *ylabel) {
    fprintf(f, "<rect x=\"%d\" y=\"%.0f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", PL, p->top,
            W - PL - PR, PH);
    const double xs = tick_step(p->x1 - p->x0), ys = tick_step(p->y1 - p->y0);
    /* ticks counted, not summed: at values 1e17 a step of 16 is below x's precision, x += xs never
     * moved, and the loop filled the disk */
    const double x_first = ceil(p->x0 / xs) * xs, y_first = ceil(p->y0 / ys) * ys;
    for (int k = 0; k <= AXIS_MAX_TICKS && x_first + k * xs <= p->x1 + 1e-9 * xs; k++) {
        const double x = x_first + k * xs;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%.0f\" "
                "text-anchor=\"middle\">%g</text>\n", px(p, x), p->top, px(p, x), p->top + PH, px(p, x),
                p->top + PH + 16, x);
    }
    for (int k = 0; k <= AXIS_MAX_TICKS && y_first + k * ys <= p->y1 + 1e-9 * ys; k++) {
        const double y = y_first + k * ys;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\" "
                "text-anchor=\"end\">%g</text>\n", PL, py(p, y), W - PR, py(p, y), PL - 6, py(p, y) + 4, y);
    }
    fprintf(f, "<text x=\"%d\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", PL + (W - PL - PR) / 2, p->top + PH + 34,
            xlabel);
    fprintf(f, "<text transform=\"translate(%d %.0f) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", 22,
            p->top + PH / 2.0, ylabel);
}

/* Data range [lo, hi] of the finite values v(i), padded 5 %; a flat one widened. */
static void range(const series_t *s, double (*v)(const point_t *), double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int i = 0; i < s->n; i++) {
        const double x = v(&s->pts[i]);
        if (isfinite(x)) *lo = fmin(*lo, x), *hi = fmax(*hi, x);
    }
    if (!isfinite(*lo)) *lo = 0, *hi = 1;
    /* at least a millionth of the values' size: a span under their precision would draw nothing */
    const double pad = fmax(*hi > *lo ? 0.05 * (*hi - *lo) : fmax(fabs(*hi) * 0.1, 1e-3),
                            1e-6 * fmax(fabs(*lo), fabs(*hi)));
    *lo -= pad;
    *hi += pad;
}

static double v_loss(const point_t *p) { return isfinite(p->val_loss) ? fmin(p->loss, p->val_loss) : p->loss; }
static double v_loss_hi(const point_t *p) { return isfinite(p->val_loss) ? fmax(p->loss, p->val_loss) : p->loss; }
static double v_tokens(const point_t *p) { return p->tokens; }
static double v_t(const point_t *p) { return p->t; }
static double v_tps(const point_t *p) { return p->seconds > 0 ? (p->tokens / (double)(p->step + 1)) / p->seconds : NAN; }

static void loss_panel(FILE *f, const series_t *s) {
    panel_t p = {.top = TOP1};
    double unused;
    range(s, v_tokens, &p.x0, &p.x1);
    range(s, v_loss, &p.y0, &unused);
    range(s, v_loss_hi, &unused, &p.y1);
    p.x0 = fmax(p.x0, 0);
    axes(f, &p, "tokens trained", "loss");
    for (int i = 0; i < s->n_marks; i++) { /* a preemption's step */
        const mark_t *m = &s->marks[i];
        if (m->kind == 'j') continue;
        const double tok = (double)m->step * (s->pts[0].tokens / (double)(s->pts[0].step + 1));
        if (tok < p.x0 || tok > p.x1) continue;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-dasharray=\"4 3\"/>\n",
                px(&p, tok), TOP1, px(&p, tok), TOP1 + PH, m->kind == 'n' ? "#ff7f0e" : "#d62728");
    }
    for (int i = 0; i < s->n; i++) { /* one polyline per launch */
        if (!isfinite(s->pts[i].loss) ||
            (i > 0 && s->pts[i].launch == s->pts[i - 1].launch && isfinite(s->pts[i - 1].loss)))
            continue; /* a line starts at a launch's first finite loss, and again after a skipped step */
        fprintf(f, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"%s\" points=\"",
                LAUNCH_COLORS[s->pts[i].launch % 6]);
        for (int j = i; j < s->n && s->pts[j].launch == s->pts[i].launch && isfinite(s->pts[j].loss); j++)
            fprintf(f, "%.1f,%.1f ", px(&p, s->pts[j].tokens), py(&p, s->pts[j].loss));
        fprintf(f, "\"/>\n");
    }
    for (int i = 0; i < s->n; i++)
        if (isfinite(s->pts[i].val_loss))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"#ff7f0e\" stroke=\"#000\"><title>step %lld: "
                    "val loss %.4f</title></circle>\n", px(&p, s->pts[i].tokens), py(&p, s->pts[i].val_loss),
                    (long long)s->pts[i].step + 1, s->pts[i].val_loss);
}

static void throughput_panel(FILE *f, const series_t *s) {
    panel_t p = {.top = TOP2};
    double unused;
    range(s, v_t, &p.x0, &p.x1);
    range(s, v_tps, &unused, &p.y1);
    p.x0 = 0;
    p.y0 = 0;
    for (int i = 0; i < s->n_marks; i++) p.x1 = fmax(p.x1, s->marks[i].t + s->marks[i].span_s);
    axes(f, &p, "wall time (s)", "throughput (tokens/s)");
    for (int i = 0; i < s->n_marks; i++) {
        const mark_t *m = &s->marks[i];
        const char *color = m->kind == 'p' ? "#d62728" : m->kind == 'j' ? "#2ca02c" : "#ff7f0e";
        if (m->span_s > 0)
            fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\" fill-opacity=\"0.15\"/>\n",
                    px(&p, m->t), TOP2, px(&p, m->t + m->span_s) - px(&p, m->t), PH, color);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\"/>"
                "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"%s\">", px(&p, m->t), TOP2, px(&p, m->t),
                TOP2 + PH, color, px(&p, m->t) + 3, TOP2 + 12 + 12 * (i % 3), color);
        put_text(f, m->cause);
        if (m->span_s > 0) fprintf(f, ": %.2f s notice to resume", m->span_s);
        fprintf(f, "</text>\n");
    }
    for (int i = 0; i < s->n; i++) {
        const double tps = v_tps(&s->pts[i]);
        if (isfinite(tps))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"><title>step %lld: %.0f tokens/s"
                    "</title></circle>\n", px(&p, s->pts[i].t), py(&p, tps), LAUNCH_COLORS[s->pts[i].launch % 6],
                    (long long)s->pts[i].step + 1, tps);
    }
}

static ah_status_t write_svg(const series_t *s, const char *src, const char *path, ah_error_t *err) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return ah_error_set(err, AH_ERR_IO, "--svg %s: cannot create", path);
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">");
    put_text(f, src);
    fprintf(f, ": loss and throughput</text>\n");
    fprintf(f, "<text x=\"10\" y=\"42\" fill=\"#555\">lines: training loss, one colour per launch; orange dots: "
            "validation loss; red: preemptions (dashed at their step; shaded from notice to resume); green: joins"
            "</text>\n");
    loss_panel(f, s);
    throughput_panel(f, s);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return ah_error_set(err, AH_ERR_IO, "--svg %s: cannot write", path);
    }
    return AH_OK;
}

/* ", N WHAT[s]" when n > 0 (always with always) */
static void count(int n, const char *what, const char *plural, bool always) {
    if (n > 0 || always) printf("%s%d %s", always ? "" : ", ", n, n == 1 ? what : plural);
}

static void summary(const series_t *s, const char *path) {
    const point_t *a = &s->pts[0], *z = &s->pts[s->n - 1];
    double tps = 0, last_val = NAN, last_loss = NAN;
    int n_tps = 0, preempts = 0, nonfinite = 0, joins = 0, killed = 0, failed = 0;
    for (int i = 0; i < s->n; i++) {
        if (isfinite(v_tps(&s->pts[i]))) tps += v_tps(&s->pts[i]), n_tps++;
        if (isfinite(s->pts[i].val_loss)) last_val = s->pts[i].val_loss;
        if (isfinite(s->pts[i].loss)) last_loss = s->pts[i].loss;
    }
    for (int i = 0; i < s->n_marks; i++) { /* a stop to take in a joined node, or the agent's death, is no preemption */
        const mark_t *m = &s->marks[i];
        if (m->kind == 'p' && strstr(m->cause, "(" AH_REPORT_CAUSE_JOIN ")")) joins++;
        else if (m->kind == 'p' && strstr(m->cause, "(" AH_REPORT_CAUSE_AGENT ")")) killed++;
        else if (m->kind == 'p' && strstr(m->cause, "(" AH_REPORT_CAUSE_FAILED ")")) failed++;
        else preempts += m->kind == 'p', nonfinite += m->kind == 'n';
    }
    printf("%s: %d step lines (steps %lld..%lld), %.0f tokens; loss %.4f -> %.4f%s", path, s->n, (long long)a->step,
           (long long)z->step, z->tokens, a->loss, last_loss, isfinite(z->loss) ? "" : " (the last finite)");
    if (isfinite(last_val)) printf(", last validation loss %.4f", last_val);
    printf("; mean %.0f tokens/s a step; ", n_tps ? tps / n_tps : 0);
    count(preempts, "preemption", "preemptions", true);
    count(joins, "restart to take in a joining node", "restarts to take in joining nodes", false);
    count(killed, "stop when the agent was killed", "stops when the agent was killed", false);
    count(failed, "restart after a failure", "restarts after failures", false);
    count(nonfinite, "non-finite step", "non-finite steps", false);
    printf("; %.1f s\n", z->t);
    for (int i = 0; i < s->n_repairs; i++) printf("%s\n", s->repairs[i]);
}

int ah_cli_report(int argc, char **argv) {
    const char *svg = NULL;
    ah_flag_t flags[] = {
        {"--svg", AH_FLAG_STR, &svg, "FILE", "write the picture here (SVG): loss and validation loss against tokens; "
         "throughput, preemptions and recoveries against wall time", false},
    };
    /* The metrics file is the one positional argument; take it out before the flag parser. */
    const char *path = NULL;
    char *rest[8];
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && argv[i][0] != '-' && strcmp(argv[i - 1], "--svg") != 0) {
            if (path) {
                fprintf(stderr, "autohet report: one METRICS.jsonl expected, got \"%s\" and \"%s\"\n", path, argv[i]);
                return 2;
            }
            path = argv[i];
        } else if (n < (int)(sizeof rest / sizeof rest[0])) {
            rest[n++] = argv[i];
        } else {
            fprintf(stderr, "autohet report: too many arguments (usage: autohet report METRICS.jsonl --svg FILE)\n");
            return 2;
        }
    }
    int rc = 0;
    if (!ah_cli_parse(VERB, "METRICS.jsonl [--svg FILE]",
                      "Summarises a metrics file of autohet train --metrics or autohet run (steps, loss,\n"
                      "validation loss, throughput, preemptions) and, with --svg, draws it.",
                      flags, 1, n, rest, &rc))
        return rc;
    ah_error_t err;
    if (!path) {
        ah_error_set(&err, AH_ERR_USAGE, "usage: autohet report METRICS.jsonl [--svg FILE]");
        return ah_cli_fail(VERB, &err);
    }
    series_t s = {0};
    ah_status_t st = read_metrics(path, &s, &err);
    if (st == AH_OK) summary(&s, path);
    if (st == AH_OK && svg && (st = write_svg(&s, path, svg, &err)) == AH_OK) printf("picture: %s\n", svg);
    free(s.pts);
    free(s.marks);
    return st == AH_OK ? 0 : ah_cli_fail(VERB, &err);
}
