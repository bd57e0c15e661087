/* A picture of a plan (SVG 1.1, no scripts): on top, every pipeline as a row of stages, each
 * stage a box with its GPU type, layer range and TP devices (squares coloured by GPU type); below,
 * one iteration's timeline per pipeline under its schedule (one lane per device: a stage under 1F1B
 * and zero-bubble, an interleaved device's stages on one lane; forward boxes light, backward dark,
 * zero-bubble's weight-gradient passes dark in the lane's lower half, in the stage's type colour),
 * then the DP sync and optimizer step. The timeline is the
 * replay the prediction itself comes from (plan/replay.h), with the cost model's stage times.
 * Every micro-batch is replayed and drawn; where ops are too short to draw apart (under 1.5 px
 * each, under 0.5 px apart), consecutive ones on a lane are one box, mid-tone when it holds both
 * forwards and backwards, so the file stays small however many micro-batches there are. GPUs the
 * plan leaves idle are drawn in a row of their own (type, count, node names as runs), and the
 * legend marks their types "idle" when no stage uses them. Large plans are cut to the first
 * MAX_PIPES pipelines, with a note. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_out.h"
#include "plan/replay.h"

#include "core/names.h"

#define MAX_PIPES 16
#define WIDTH 1200.0
#define LEFT 150.0

static const char *PALETTE[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
#define N_PALETTE (sizeof PALETTE / sizeof PALETTE[0])

/* Writes s with XML's special characters escaped. */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* The title line and a legend of the GPU types' colours. */
static void draw_title(FILE *f, const ah_plan_t *p, const ah_eval_t *e) {
    const ah_cluster_t *c = &p->cluster;
    fprintf(f, "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">");
    xml_text(f, p->model.name);
    fprintf(f, ": TP %d, micro-batch %lld, %d pipelines, %d GPUs; %.4f s per iteration, %.0f tokens/s</text>\n",
            p->tp, (long long)p->train.micro_batch, p->n_pipelines, ah_plan_device_count(p), e->pred.iteration_s,
            e->pred.tokens_per_s);
    double lx = 10;
    for (int k = 0; k < c->n_types; k++) {
        bool used = false;
        for (int i = 0; i < p->n_pipelines && !used; i++)
            for (int s = 0; s < p->pipelines[i].n_stages; s++) used |= p->pipelines[i].stages[s].type == k;
        fprintf(f, "<rect x=\"%.1f\" y=\"34\" width=\"12\" height=\"12\" fill=\"%s\"%s/>", lx,
                PALETTE[k % N_PALETTE], used ? "" : " fill-opacity=\"0.25\"");
        fprintf(f, "<text x=\"%.1f\" y=\"44\">", lx + 16);
        xml_text(f, c->types[k].name);
        fprintf(f, "%s</text>\n", used ? "" : " (idle)");
        lx += 30 + 7.0 * (double)(strlen(c->types[k].name) + (used ? 0 : 7));
    }
    fprintf(f, "<text x=\"%.1f\" y=\"44\" fill=\"#555\">light: forward, dark: backward, mid-tone: both, too "
               "short to draw apart; hatched border: recomputation</text>\n", lx + 10);
}

/* A stage as a box at (x, y): its type, layers, first device and one square per device (tp x the
 * pipeline's cp: n). */
static void draw_stage(FILE *f, const ah_plan_t *p, const ah_stage_t *st, int n, double x, double y, double box_w,
                       double row_h) {
    const ah_cluster_t *c = &p->cluster;
    const char *col = PALETTE[st->type % (int)N_PALETTE];
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.15\" "
               "stroke=\"%s\"%s/>\n", x + 2, y, box_w - 4, row_h, col, col,
            st->recompute ? " stroke-dasharray=\"4 2\" stroke-width=\"2\"" : "");
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 6, y + 14);
    xml_text(f, c->types[st->type].name);
    fprintf(f, " [%d, %d)</text>\n", st->first, st->last);
    const ah_node_t *nd = &c->nodes[st->devices[0].node];
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#333\">", x + 6, y + 28);
    xml_text(f, nd->name);
    fprintf(f, ":%d%s</text>\n", st->devices[0].index, n > 1 ? "+" : "");
    const double sq = fmin(12, (box_w - 12) / n - 2);
    for (int r = 0; r < n; r++) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>",
                x + 6 + r * (sq + 2), y + 38, sq > 1 ? sq : 1, sq > 1 ? sq : 1, col);
        xml_text(f, c->nodes[st->devices[r].node].name); /* a CP rank may be on another node */
        fprintf(f, ":%d</title></rect>\n", st->devices[r].index);
    }
}

/* The longest replayed schedule of the first P pipelines (their time_s: ah_evaluate replays them). */
static double replayed_span(const ah_eval_t *e, int P) {
    double replayed = 0;
    for (int i = 0; i < P; i++) replayed = fmax(replayed, e->pipelines[i].time_s);
    return replayed;
}

/* One lane per device of pipeline i from y on (per stage under 1F1B and zero-bubble; an
 * interleaved device's lane holds its stages' ops), its ops at `scale` px per second; returns the
 * y below it, or a negative value when out of memory. */
static double draw_timeline(FILE *f, const ah_plan_t *p, const ah_eval_t *e, int i, double y, double scale,
                            double lane_h) {
    const ah_pipeline_t *pl = &p->pipelines[i];
    const int S = pl->n_stages, P = ah_pipeline_groups(pl), n = (int)pl->micro_batches;
    const int per = (int)ah_sched_ops_per_device(pl->schedule, S, P, n);
    ah_op_t *ops = calloc((size_t)P * (size_t)per, sizeof *ops);
    if (!ops) return -1;
    ah_sched_replay(pl->schedule, e->pipelines[i].stages, S, P, n, true, ops);
    fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">pipeline %d</text>\n", y + 11, i);
    if (pl->schedule != AH_SCHED_1F1B)
        fprintf(f, "<text x=\"10\" y=\"%.1f\" font-size=\"9\">%s</text>\n", y + 23,
                pl->schedule == AH_SCHED_INTERLEAVED ? "interleaved 1F1B" : "zero-bubble ZB-H1");
    for (int s = 0; s < P; s++) {
        const char *col = PALETTE[pl->stages[s].type % (int)N_PALETTE];
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"9\">%s %d</text>\n", LEFT - 4,
                y + 10, P < S ? "device" : "stage", s);
        const ah_op_t *lane = ops + (size_t)s * (size_t)per;
        /* what every box of the lane shares is said once, on its group (a lane may hold
         * thousands of boxes) */
        fprintf(f, "<g fill=\"%s\" stroke=\"white\" stroke-width=\"0.3\">\n", col);
        for (int k = 0; k < per;) {
            /* ops k .. j-1 as one box: each next one is short, and starts within half a pixel */
            int j = k + 1, kinds = 1 << lane[k].kind; /* 1 F, 2 B, 4 W */
            while (j < per && (lane[j].end - lane[j].start) * scale < 1.5 &&
                   (lane[j - 1].end - lane[j - 1].start) * scale < 1.5 && (lane[j].start - lane[j - 1].end) * scale < 0.5)
                kinds |= 1 << lane[j++].kind;
            /* a W alone: the lower half of the lane, dark */
            const double h = kinds == 4 ? (lane_h - 2) / 2 : lane_h - 2;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill-opacity=\"%s\"/>\n",
                    LEFT + lane[k].start * scale, y + 1 + (lane_h - 2 - h), fmax((lane[j - 1].end - lane[k].start) * scale, 0.3),
                    h, kinds == 1 ? "0.45" : kinds == 2 || kinds == 4 ? "1" : "0.7");
            k = j;
        }
        fprintf(f, "</g>\n");
        y += lane_h;
    }
    free(ops);
    return y + 18;
}

/* GPUs of each node that no stage uses, into idle[n_nodes]; the number of GPU types with any. */
static int count_idle(const ah_plan_t *p, int *idle) {
    const ah_cluster_t *c = &p->cluster;
    for (int n = 0; n < c->n_nodes; n++) idle[n] = c->nodes[n].count;
    for (int i = 0; i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++)
            for (int r = 0, n = ah_stage_devices(&p->pipelines[i], p->tp); r < n; r++)
                idle[p->pipelines[i].stages[s].devices[r].node]--;
    int types = 0;
    for (int k = 0; k < c->n_types; k++) {
        bool any = false;
        for (int n = 0; n < c->n_nodes; n++) any |= c->nodes[n].type == k && idle[n] > 0;
        types += any;
    }
    return types;
}

/* One row per GPU type with idle GPUs from y on: a square in its colour, the count and the nodes
 * they are on (as runs, core/names.h). False when out of host memory. */
static bool draw_idle(FILE *f, const ah_plan_t *p, const int *idle, double y) {
    const ah_cluster_t *c = &p->cluster;
    const char **names = malloc(sizeof *names * (size_t)c->n_nodes);
    if (!names) return false;
    for (int k = 0; k < c->n_types; k++) {
        int gpus = 0, n_names = 0;
        for (int n = 0; n < c->n_nodes; n++)
            if (c->nodes[n].type == k && idle[n] > 0) {
                gpus += idle[n];
                names[n_names++] = c->nodes[n].name;
            }
        if (gpus == 0) continue;
        char list[1024];
        ah_str_t ls = ah_str_fixed(list, sizeof list);
        ah_names_append(&ls, names, n_names, ", ", 12);
        fprintf(f, "<rect x=\"10\" y=\"%.1f\" width=\"12\" height=\"12\" fill=\"%s\" fill-opacity=\"0.25\" "
                   "stroke=\"%s\"/><text x=\"28\" y=\"%.1f\">idle: %d ", y, PALETTE[k % N_PALETTE],
                PALETTE[k % N_PALETTE], y + 10, gpus);
        xml_text(f, c->types[k].name);
        fprintf(f, " GPU%s on ", gpus == 1 ? "" : "s");
        xml_text(f, list);
        fprintf(f, " (in no pipeline)</text>\n");
        y += 20;
    }
    free(names);
    return true;
}

ah_status_t ah_plan_svg_write(const ah_plan_t *p, const ah_eval_t *e, const char *path, ah_error_t *err) {
    const int P = p->n_pipelines < MAX_PIPES ? p->n_pipelines : MAX_PIPES;
    int max_s = 1, lanes = 0;
    bool all_1f1b = true, any_zb = false;
    for (int i = 0; i < P; i++) {
        if (p->pipelines[i].n_stages > max_s) max_s = p->pipelines[i].n_stages;
        lanes += ah_pipeline_groups(&p->pipelines[i]);
        all_1f1b &= p->pipelines[i].schedule == AH_SCHED_1F1B;
        any_zb |= p->pipelines[i].schedule == AH_SCHED_ZERO_BUBBLE;
    }
    int *idle = malloc(sizeof *idle * (size_t)(p->cluster.n_nodes > 0 ? p->cluster.n_nodes : 1));
    if (!idle) return ah_error_set(err, AH_ERR_OOM, "out of host memory drawing %s", path);
    const int idle_rows = count_idle(p, idle);
    const double box_w = (WIDTH - LEFT - 20) / max_s, row_h = 64, lane_h = 14;
    const double rows_h = 80 + P * (row_h + 10), top_h = rows_h + idle_rows * 20, tl_top = top_h + 40;
    const double height = tl_top + lanes * lane_h + P * 18 + 80;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(idle);
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: check the directory exists and is writable", path);
    }

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"11\">\n", WIDTH, height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    draw_title(f, p, e);
    /* devices, grouped by pipeline and stage */
    for (int i = 0; i < P; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const double y = 60 + i * (row_h + 10);
        fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">pipeline %d</text>", y + 24, i);
        fprintf(f, "<text x=\"10\" y=\"%.1f\">%lld micro-batches</text>\n", y + 40, (long long)pl->micro_batches);
        for (int s = 0; s < pl->n_stages; s++) draw_stage(f, p, &pl->stages[s], ah_stage_devices(pl, p->tp), LEFT + s * box_w, y, box_w, row_h);
    }
    if (p->n_pipelines > P)
        fprintf(f, "<text x=\"10\" y=\"%.1f\" fill=\"#555\">... and %d more pipelines (not drawn)</text>\n", rows_h - 4,
                p->n_pipelines - P);
    const bool idle_ok = draw_idle(f, p, idle, rows_h + 4);
    free(idle);

    /* timelines: the prediction's pipeline part is the slowest pipeline's replay; the drawn ones
     * may leave it out (MAX_PIPES), so the scale covers both and the note gives both */
    const double tail = e->pred.breakdown.dp_sync_s + e->pred.breakdown.optimizer_s;
    const double replayed = replayed_span(e, P);
    const double span = fmax(e->pred.iteration_s - tail, replayed);
    const double scale = (WIDTH - LEFT - 20) / (span + tail > 0 ? span + tail : 1);
    fprintf(f, "<text x=\"10\" y=\"%.1f\" font-size=\"13\" font-weight=\"bold\">one iteration, %s: "
               "pipelines %.4f s (replayed %.4f s), then DP sync %.4f s and optimizer %.4f s%s</text>\n",
            tl_top - 14, all_1f1b ? "1F1B" : "each pipeline's schedule", e->pred.iteration_s - tail, replayed,
            e->pred.breakdown.dp_sync_s, e->pred.breakdown.optimizer_s,
            any_zb ? "; a weight-gradient pass W (zero-bubble): the lower half of its lane, dark" : "");
    double y = tl_top;
    for (int i = 0; i < P; i++) {
        if (!idle_ok || (y = draw_timeline(f, p, e, i, y, scale, lane_h)) < 0) {
            fclose(f);
            remove(tmp);
            return ah_error_set(err, AH_ERR_OOM, "out of host memory drawing %s", path);
        }
    }
    /* DP sync + optimizer across all lanes */
    fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"#888\" fill-opacity=\"0.35\"/>\n",
            LEFT + span * scale, tl_top, fmax(tail * scale, 0.5), y - tl_top - 18);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555\">time 0 .. %.4f s</text>\n", LEFT, y + 10, span + tail);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return ah_error_set(err, AH_ERR_IO, "cannot write %s: disk full or directory not writable", path);
    }
    return AH_OK;
}
