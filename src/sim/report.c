/* Simulator output: the policies' names, the JSON document and the SVG timeline (layout in sim.h). */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/str.h"
#include "sim/sim.h"

static const char *const POLICY_NAMES[AH_POLICY_COUNT] = {"autohet", "uniform", "varuna", "on-demand",
                                                               "megatron-best", "autohet-region"};

const char *ah_policy_name(ah_policy_t p) { return p >= 0 && p < AH_POLICY_COUNT ? POLICY_NAMES[p] : "?"; }

bool ah_policy_parse(const char *s, ah_policy_t *out) {
    const int p = ah_str_index(s, POLICY_NAMES, AH_POLICY_COUNT);
    if (p >= 0) *out = (ah_policy_t)p;
    return p >= 0;
}

/* Available GPUs by type as a step function: n steps, step i from t[i] to t[i+1] (the last to
 * the horizon), gpus[i * n_types + ty]. */
typedef struct {
    int n, n_types;
    double *t;
    int *gpus;
} steps_t;

static void steps_free(steps_t *s) {
    free(s->t);
    free(s->gpus);
}

static bool avail_steps(const ah_sim_avail_t *a, double horizon, steps_t *s) {
    const ah_cluster_t *c = a->cluster;
    s->n_types = c->n_types;
    s->n = 0;
    s->t = malloc(sizeof(double) * (size_t)(a->n_changes + 1));
    s->gpus = calloc((size_t)(a->n_changes + 1) * (size_t)c->n_types + 1, sizeof(int));
    bool *up = malloc(sizeof(bool) * (size_t)(c->n_nodes + 1));
    if (!s->t || !s->gpus || !up) {
        free(up);
        steps_free(s);
        return false;
    }
    memcpy(up, a->up0, sizeof(bool) * (size_t)c->n_nodes);
    int ci = 0;
    double t = 0;
    while (t < horizon) {
        int *g = &s->gpus[(size_t)s->n * (size_t)c->n_types];
        for (int i = 0; i < c->n_nodes; i++)
            if (up[i]) g[c->nodes[i].type] += c->nodes[i].count;
        s->t[s->n++] = t;
        if (ci >= a->n_changes) break;
        t = a->changes[ci].t_s;
        for (; ci < a->n_changes && a->changes[ci].t_s == t; ci++) up[a->changes[ci].node] = a->changes[ci].up;
    }
    free(up);
    return true;
}

void ah_sim_breakdown(const ah_sim_avail_t *a, double horizon, const ah_sim_result_t *r, ah_sim_breakdown_t *b) {
    const ah_cluster_t *c = a->cluster;
    memset(b, 0, sizeof *b);
    double train_tokens = 0;
    for (int k = 0; k < r->n_segs; k++) {
        const ah_sim_segment_t *g = &r->segs[k];
        const double h = (g->end_s - g->start_s) / 3600;
        if (g->phase == AH_PHASE_TRAIN) {
            b->train_h += h;
            train_tokens += g->tokens_per_s * h * 3600;
        } else if (g->phase == AH_PHASE_RECOVER) b->recover_h += h;
        else b->stalled_h += h;
    }
    b->ckpt_hold_h = r->ckpt_stall_s / 3600;
    b->train_tokens_per_s = b->train_h > 0 ? train_tokens / (b->train_h * 3600) : 0;
    double finished = 0;
    for (int k = 0; k < r->n_recs; k++) {
        const ah_sim_recovery_t *v = &r->recs[k];
        /* interrupted, or cut by the horizon: its time so far is in interrupted_h (until session 25 a recovery
         * the horizon cut counted its whole terms here, past the horizon: the terms summed to more than recover_h) */
        if (v->interrupted || v->t_s + v->seconds > horizon) continue;
        b->wait_h += v->wait_s / 3600;
        b->save_h += v->save_s / 3600;
        b->replan_h += v->replan_s / 3600;
        b->restart_h += v->restart_s / 3600;
        b->transfer_h += v->transfer_s / 3600;
        b->first_step_h += v->first_step_s / 3600;
        finished += v->seconds / 3600;
    }
    b->interrupted_h = fmax(0, b->recover_h - finished); /* a recovery cut by the horizon counts here too */
    if (r->policy == AH_POLICY_ON_DEMAND) {
        for (int i = 0; i < c->n_nodes; i++) b->gpu_hours_up += c->nodes[i].count * horizon / 3600;
        return;
    }
    steps_t st;
    if (!avail_steps(a, horizon, &st)) return;
    for (int i = 0; i < st.n; i++) {
        const double h = ((i + 1 < st.n ? st.t[i + 1] : horizon) - st.t[i]) / 3600;
        for (int ty = 0; ty < c->n_types; ty++) b->gpu_hours_up += st.gpus[(size_t)i * (size_t)c->n_types + ty] * h;
    }
    steps_free(&st);
}

bool ah_sim_usd_per_mtoken(const ah_sim_result_t *r, double *usd) {
    *usd = r->tokens > 0 ? r->usd / r->tokens * 1e6 : 0.0;
    return r->tokens > 0;
}

static json_t *gpus_json(const ah_cluster_t *c, const int *g) {
    json_t *o = json_object();
    for (int ty = 0; ty < c->n_types; ty++)
        if (g[ty]) json_object_set_new(o, c->types[ty].name, json_integer(g[ty]));
    return o;
}

/* {"local": v[0], "peer": v[1], "cloud": v[2]}, integers or reals */
static json_t *tiers_json(const int64_t *bytes, const double *secs) {
    json_t *o = json_object();
    for (int t = 0; t < AH_TIER_COUNT; t++)
        json_object_set_new(o, ah_ckpt_tier_name((ah_ckpt_tier_t)t), bytes ? json_integer((json_int_t)bytes[t]) : json_real(secs[t]));
    return o;
}

/* One (re)start, in the agent's `recover` terms (docs/elastic.md). */
static json_t *recovery_json(const ah_sim_recovery_t *v) {
    json_t *bd = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "stop_s", v->wait_s + v->save_s, "wait_s", v->wait_s,
                           "save_s", v->save_s, "replan_s", v->replan_s, "startup_s", v->restart_s, "transfer_s",
                           v->transfer_s, "first_step_s", v->first_step_s);
    json_t *r = json_pack("{s:f, s:s, s:f, s:o, s:o, s:o, s:b, s:b, s:f, s:b}", "t_s", v->t_s, "event", v->event,
                          "seconds", v->seconds, "breakdown", bd, "bytes", tiers_json(v->bytes, NULL), "tier_seconds",
                          tiers_json(NULL, v->tier_s), "saved", v->saved, "handover", v->handover, "tokens_lost",
                          v->tokens_lost, "interrupted", v->interrupted);
    if (v->in_place) json_object_set_new(r, "in_place", json_true()); /* --in-place: startup_s is the change's */
    if (v->parked) json_object_set_new(r, "parked", json_integer(v->parked)); /* ranks parked at it */
    if (v->written_behind) json_object_set_new(r, "written_behind", json_true()); /* "saved" false, as the agent's */
    if (v->bytes_across_regions > 0 || v->egress_usd > 0) { /* reads (or a handover) across zones or regions */
        json_object_set_new(r, "bytes_across_regions", json_integer((json_int_t)v->bytes_across_regions));
        json_object_set_new(r, "egress_usd", json_real(v->egress_usd));
    }
    return r;
}

static const char *phase_name(ah_sim_phase_t p) {
    return p == AH_PHASE_TRAIN ? "train" : p == AH_PHASE_RECOVER ? "recover" : "stalled";
}

static json_t *breakdown_json(const ah_sim_avail_t *a, double horizon, const ah_sim_result_t *r) {
    ah_sim_breakdown_t b;
    ah_sim_breakdown(a, horizon, r, &b);
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "train_h", b.train_h,
                     "ckpt_hold_h", b.ckpt_hold_h, "recover_h", b.recover_h, "wait_h", b.wait_h, "save_h", b.save_h,
                     "replan_h", b.replan_h, "restart_h", b.restart_h, "transfer_h", b.transfer_h, "first_step_h",
                     b.first_step_h, "interrupted_h", b.interrupted_h, "stalled_h", b.stalled_h, "train_tokens_per_s",
                     b.train_tokens_per_s, "gpu_hours_up", b.gpu_hours_up);
}

/* The options the replay ran under. */
static json_t *options_json(const ah_cluster_t *c, const ah_sim_opts_t *o) {
    json_t *opts =
        json_pack("{s:I, s:I, s:I, s:s, s:f, s:f, s:o, s:f, s:f, s:f, s:s, s:o}", "global_batch",
                  (json_int_t)o->train.global_batch, "seq_len", (json_int_t)o->train.seq_len, "micro_batch",
                  (json_int_t)o->train.micro_batch, "precision", ah_precision_name(o->train.precision),
                  "ckpt_every_s", o->ckpt_every_s, "restart_s", o->restart_s,
                  "replan_s", o->replan_s >= 0 ? json_real(o->replan_s) : json_string("measured"),
                  "on_demand_factor", o->on_demand_factor, "disk_gb_s", o->disk_gb_s, "grace_s", o->grace_s,
                  "objective", o->objective == AH_OBJECTIVE_COST ? "cost" : "time", "budget_usd_per_hour",
                  o->budget_usd_per_hour > 0 ? json_real(o->budget_usd_per_hour) : json_null());
    json_object_set_new(opts, "replica_memory_gb", json_real(o->replica_memory_gb));
    json_object_set_new(opts, "snapshot_gb_s", json_real(o->snapshot_gb_s));
    json_object_set_new(opts, "ckpt_snapshot_gb_s", json_real(o->ckpt_snapshot_gb_s));
    json_object_set_new(opts, "handover", json_boolean(o->handover && o->replica_memory_gb > 0));
    json_object_set_new(opts, "cloud_region", ah_cluster_region_count(c) > 1
                                                  ? json_string(o->cloud_region[0] ? o->cloud_region : c->nodes[0].region)
                                                  : json_null());
    json_object_set_new(opts, "churn_aware", json_boolean(o->churn_aware));
    json_object_set_new(opts, "release_idle", json_boolean(o->release_idle));
    json_object_set_new(opts, "exposure_aware", json_boolean(o->exposure_aware));
    json_object_set_new(opts, "in_place", json_boolean(o->in_place));
    json_object_set_new(opts, "join_horizon_s", json_real(o->join_horizon_s));
    return opts;
}

json_t *ah_sim_to_json(const ah_sim_avail_t *a, const ah_sim_pool_t *pools, int n_pools,
                       const ah_sim_opts_t *o, double horizon, const ah_sim_result_t *res, int n_res) {
    const ah_cluster_t *c = a->cluster;
    json_t *doc = json_object();
    json_object_set_new(doc, "horizon_s", json_real(horizon));
    json_object_set_new(doc, "horizon_h", json_real(horizon / 3600));
    json_object_set_new(doc, "options", options_json(c, o));
    json_t *jp = json_array();
    for (int i = 0; i < n_pools; i++) {
        const ah_sim_pool_t *p = &pools[i];
        json_t *nodes = json_array();
        for (int k = 0; k < p->n_nodes; k++) json_array_append_new(nodes, json_string(c->nodes[p->nodes[k]].name));
        const char *rule = p->trace.kind == AH_TRACE_EVENTS ? "event id -> first free node (cluster order) at its add"
                           : a->seed                        ? "count changes -> random free/alive nodes (seeded)"
                                                            : "count changes -> first free node joins, newest leaves first";
        json_array_append_new(
            jp, json_pack("{s:s, s:s, s:s, s:s, s:s, s:o, s:s, s:i, s:i, s:f}", "pool", p->name, "trace", p->trace.path,
                          "format", p->trace.format, "unit", ah_time_unit_name(p->trace.unit), "unit_how",
                          p->trace.unit_how, "nodes", nodes, "mapping", rule, "capped", p->capped, "max_wanted",
                          p->max_wanted, "end_s", p->trace.end_s));
    }
    json_object_set_new(doc, "pools", jp);
    if (a->seed) json_object_set_new(doc, "seed", json_integer((json_int_t)a->seed));
    json_t *jm = json_array();
    for (int pass = 0; pass < 2; pass++) {
        const ah_sim_change_t *v = pass ? a->changes : a->initial;
        for (int i = 0, n = pass ? a->n_changes : a->n_initial; i < n; i++) {
            const ah_sim_pool_t *p = &pools[v[i].pool];
            json_t *e = json_pack("{s:f, s:s, s:s, s:s}", "t_s", v[i].t_s, "pool", p->name, "node",
                                  c->nodes[v[i].node].name, "change", v[i].up ? "up" : "down");
            if (v[i].trace_id >= 0) json_object_set_new(e, "trace_id", json_string(p->trace.ids[v[i].trace_id]));
            json_array_append_new(jm, e);
        }
    }
    json_object_set_new(doc, "mapping", jm);
    steps_t s;
    json_t *ja = json_array();
    if (avail_steps(a, horizon, &s)) {
        for (int i = 0; i < s.n; i++)
            json_array_append_new(ja, json_pack("{s:f, s:f, s:o}", "start_s", s.t[i], "end_s",
                                                i + 1 < s.n ? s.t[i + 1] : horizon, "gpus",
                                                gpus_json(c, &s.gpus[(size_t)i * (size_t)c->n_types])));
        steps_free(&s);
    }
    json_object_set_new(doc, "availability", ja);
    json_t *jr = json_array();
    for (int i = 0; i < n_res; i++) {
        const ah_sim_result_t *r = &res[i];
        json_t *tl = json_array(), *mk = json_array(), *rc = json_array();
        for (int k = 0; k < r->n_recs; k++) json_array_append_new(rc, recovery_json(&r->recs[k]));
        for (int k = 0; k < r->n_segs; k++) {
            const ah_sim_segment_t *g = &r->segs[k];
            json_array_append_new(tl, json_pack("{s:f, s:f, s:s, s:o, s:f, s:s}", "start_s", g->start_s, "end_s",
                                                g->end_s, "phase", phase_name(g->phase), "gpus", gpus_json(c, g->gpus),
                                                "tokens_per_s", g->tokens_per_s, "event", g->event));
        }
        for (int k = 0; k < r->n_markers; k++)
            json_array_append_new(mk, json_pack("{s:f, s:s}", "t_s", r->markers[k].t_s, "kind",
                                                r->markers[k].replan ? "replan" : "preempt"));
        json_t *e = json_pack(
            "{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:{s:I, s:I, s:I}, s:f, s:i, s:f, s:f, s:o, s:o}",
            "policy", ah_policy_name(r->policy), "tokens", r->tokens, "tokens_lost", r->tokens_lost, "wall_hours",
            r->wall_s / 3600, "gpu_hours", r->gpu_hours, "usd", r->usd, "recovery_hours", r->recovery_s / 3600, "replans",
            r->replans, "preemptions", r->preemptions, "bytes", "local", (json_int_t)r->bytes_local, "peer",
            (json_int_t)r->bytes_peer, "cloud", (json_int_t)r->bytes_cloud, "planner_s", r->planner_s,
            "plans_computed", r->plans_computed, "first_plan_s", r->first_plan_s, "simulate_s", r->sim_wall_s,
            "timeline", tl, "markers", mk);
        double per_m;
        json_object_set_new(e, "usd_per_mtoken", ah_sim_usd_per_mtoken(r, &per_m) ? json_real(per_m) : json_null());
        json_object_set_new(json_object_get(e, "bytes"), "memory", json_integer((json_int_t)r->bytes_memory));
        json_object_set_new(e, "egress_usd", json_real(r->egress_usd));
        json_object_set_new(e, "replica_plans_off", json_integer(r->replica_plans_off));
        json_object_set_new(e, "ckpt_egress_usd", json_real(r->ckpt_egress_usd));
        json_object_set_new(e, "ckpt_bytes_across_regions", json_real(r->ckpt_bytes_across_regions));
        json_object_set_new(e, "checkpoint_hours", json_real(r->ckpt_stall_s / 3600));
        json_object_set_new(e, "recoveries", rc);
        json_object_set_new(e, "breakdown", breakdown_json(a, horizon, r));
        if (r->note[0]) json_object_set_new(e, "note", json_string(r->note));
        if (r->region[0]) json_object_set_new(e, "region", json_string(r->region));
        json_array_append_new(jr, e);
    }
    json_object_set_new(doc, "policies", jr);
    return doc;
}

/* ---- SVG ---- */

static const char *const TYPE_COLORS[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"};
static const char *const POLICY_COLORS[AH_POLICY_COUNT] = {"#d62728", "#1f77b4", "#9467bd", "#2ca02c", "#ff7f0e",
                                                            "#8c564b"};

#define W 1100
#define ML 80   /* left margin */
#define MR 170  /* right margin: legend */
#define PW (W - ML - MR)
#define AVAIL_H 190
#define POL_H 120
#define GAP 46

static double nice_step(double span, int ticks) {
    double raw = span / ticks, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static void x_axis(FILE *f, double y, double horizon_h) {
    const double step = nice_step(horizon_h, 10);
    fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#333'/>\n", ML, y, ML + PW, y);
    for (double h = 0; h <= horizon_h + 1e-9; h += step) {
        const double x = ML + PW * h / horizon_h;
        fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#333'/>", x, y, x, y + 4);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle'>%g</text>\n", x, y + 15, h);
    }
}

static void y_axis(FILE *f, double y0, double h, double vmax, const char *unit) {
    const double step = nice_step(vmax, 4);
    for (double v = 0; v <= vmax + 1e-9; v += step) {
        const double y = y0 + h - h * v / vmax;
        fprintf(f, "<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>", ML, y, ML + PW, y);
        fprintf(f, "<text x='%d' y='%.1f' font-size='10' text-anchor='end'>%g%s</text>\n", ML - 4, y + 3, v, unit);
    }
}

/* Panel 1 at y0: the available GPUs by type, stacked, with a legend of the types that ever had
 * any; returns the y where the legend ended. */
static int draw_availability(FILE *f, const ah_cluster_t *c, const steps_t *s, double horizon, double y0) {
    int gmax = 1;
    for (int i = 0; i < s->n; i++) {
        int tot = 0;
        for (int ty = 0; ty < c->n_types; ty++) tot += s->gpus[(size_t)i * (size_t)c->n_types + ty];
        if (tot > gmax) gmax = tot;
    }
    const double gtop = gmax * 1.1;
    y_axis(f, y0, AVAIL_H, gtop, "");
    fprintf(f, "<text x='%d' y='%.1f' font-size='11' transform='rotate(-90 %d %.1f)' text-anchor='middle'>GPUs available"
               "</text>\n", 22, y0 + AVAIL_H / 2.0, 22, y0 + AVAIL_H / 2.0);
    for (int ty = c->n_types - 1; ty >= 0; ty--) { /* draw cumulative from the top type down */
        fprintf(f, "<path fill='%s' fill-opacity='0.85' stroke='none' d='", TYPE_COLORS[ty % 7]);
        for (int i = 0; i < s->n; i++) {
            int cum = 0;
            for (int k = 0; k <= ty; k++) cum += s->gpus[(size_t)i * (size_t)c->n_types + k];
            const double x0 = ML + PW * s->t[i] / horizon, x1 = ML + PW * (i + 1 < s->n ? s->t[i + 1] : horizon) / horizon;
            const double y = y0 + AVAIL_H - AVAIL_H * cum / gtop;
            fprintf(f, "%s%.1f %.1f L%.1f %.1f ", i ? "L" : "M", x0, y, x1, y);
        }
        fprintf(f, "L%d %.1f L%d %.1f Z'/>\n", ML + PW, y0 + AVAIL_H, ML, y0 + AVAIL_H);
    }
    int ly = (int)y0 + 10;
    for (int ty = 0; ty < c->n_types; ty++) {
        int any = 0;
        for (int i = 0; i < s->n; i++) any |= s->gpus[(size_t)i * (size_t)c->n_types + ty];
        if (!any) continue;
        fprintf(f, "<rect x='%d' y='%d' width='12' height='12' fill='%s'/><text x='%d' y='%d' font-size='11'>%s</text>\n",
                ML + PW + 12, ly, TYPE_COLORS[ty % 7], ML + PW + 28, ly + 10, c->types[ty].name);
        ly += 18;
    }
    x_axis(f, y0 + AVAIL_H, horizon / 3600);
    return ly;
}

/* One policy's panel at y0: its totals, recovery and stalled spans, throughput on a scale up to
 * rtop tokens/s, preemption and re-plan markers. */
static void draw_policy(FILE *f, const ah_sim_result_t *r, double horizon, double y0, double rtop) {
    const char *col = POLICY_COLORS[r->policy % AH_POLICY_COUNT];
    double per_m;
    char per_m_text[48] = "no tokens kept";
    if (ah_sim_usd_per_mtoken(r, &per_m)) snprintf(per_m_text, sizeof per_m_text, "$%.2f per M tokens", per_m);
    fprintf(f, "<text x='%d' y='%.1f' font-size='12' font-weight='bold' fill='%s'>%s</text>"
               "<text x='%d' y='%.1f' font-size='11'>  %.3g B tokens, $%.0f, %s, %.2f h in "
               "recovery, %d re-plans</text>\n",
            ML, y0 - 6, col, ah_policy_name(r->policy), ML + 8 * (int)strlen(ah_policy_name(r->policy)) + 6, y0 - 6,
            r->tokens / 1e9, r->usd, per_m_text, r->recovery_s / 3600, r->replans);
    y_axis(f, y0, POL_H, rtop / 1e3, "k");
    for (int k = 0; k < r->n_segs; k++) { /* recovery and stalled spans */
        const ah_sim_segment_t *g = &r->segs[k];
        if (g->phase == AH_PHASE_TRAIN) continue;
        const double x0 = ML + PW * g->start_s / horizon, x1 = ML + PW * g->end_s / horizon;
        fprintf(f, "<rect x='%.1f' y='%.1f' width='%.2f' height='%d' fill='%s' fill-opacity='0.35'/>\n", x0, y0,
                fmax(x1 - x0, 0.8), POL_H, g->phase == AH_PHASE_RECOVER ? "#ff7f0e" : "#999");
    }
    fprintf(f, "<path fill='none' stroke='%s' stroke-width='1.6' d='", col);
    for (int k = 0; k < r->n_segs; k++) {
        const ah_sim_segment_t *g = &r->segs[k];
        const double x0 = ML + PW * g->start_s / horizon, x1 = ML + PW * g->end_s / horizon;
        const double y = y0 + POL_H - POL_H * g->tokens_per_s / rtop;
        fprintf(f, "%s%.1f %.1f L%.1f %.1f ", k ? "L" : "M", x0, y, x1, y);
    }
    fprintf(f, "'/>\n");
    for (int k = 0; k < r->n_markers; k++) {
        const double x = ML + PW * r->markers[k].t_s / horizon;
        if (r->markers[k].replan)
            fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#1f3fbf' stroke-width='1'/>\n", x,
                    y0 + POL_H - 8, x, y0 + POL_H);
        else
            fprintf(f, "<path d='M%.1f %.1f l-4 -7 h8 Z' fill='#c00'/>\n", x, y0 + 7);
    }
    x_axis(f, y0 + POL_H, horizon / 3600);
    fprintf(f, "<text x='%d' y='%.1f' font-size='11' transform='rotate(-90 %d %.1f)' text-anchor='middle'>tokens/s"
               "</text>\n", 22, y0 + POL_H / 2.0, 22, y0 + POL_H / 2.0);
}

/* The legend of the markers and spans, from ly down. */
static void draw_marker_legend(FILE *f, int ly) {
    ly += 20;
    fprintf(f, "<path d='M%d %d l-4 -7 h8 Z' fill='#c00'/><text x='%d' y='%d' font-size='11'>preemption</text>\n",
            ML + PW + 18, ly + 10, ML + PW + 28, ly + 9);
    ly += 18;
    fprintf(f, "<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='#1f3fbf'/><text x='%d' y='%d' font-size='11'>re-plan</text>\n",
            ML + PW + 18, ly, ML + PW + 18, ly + 10, ML + PW + 28, ly + 9);
    ly += 18;
    fprintf(f, "<rect x='%d' y='%d' width='12' height='10' fill='#ff7f0e' fill-opacity='0.35'/><text x='%d' y='%d' "
               "font-size='11'>recovery</text>\n", ML + PW + 12, ly, ML + PW + 28, ly + 9);
    ly += 18;
    fprintf(f, "<rect x='%d' y='%d' width='12' height='10' fill='#999' fill-opacity='0.35'/><text x='%d' y='%d' "
               "font-size='11'>no plan fits</text>\n", ML + PW + 12, ly, ML + PW + 28, ly + 9);
}

ah_status_t ah_sim_svg_write(const ah_sim_avail_t *a, double horizon, const ah_sim_result_t *res, int n_res,
                             const char *path, ah_error_t *err) {
    steps_t s;
    if (!avail_steps(a, horizon, &s)) return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory drawing %s", path);
    FILE *f = fopen(path, "w");
    if (!f) {
        steps_free(&s);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot write the SVG: %s", path, strerror(errno));
    }
    const int H = 40 + AVAIL_H + GAP + n_res * (POL_H + GAP) + 10;
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' font-family='sans-serif'>\n", W, H);
    fprintf(f, "<rect width='%d' height='%d' fill='white'/>\n", W, H);
    fprintf(f, "<text x='%d' y='22' font-size='15' font-weight='bold'>Spot availability and training throughput "
               "(%.1f h)</text>\n", ML, horizon / 3600);
    double y0 = 40;
    const int ly = draw_availability(f, a->cluster, &s, horizon, y0);
    steps_free(&s);
    /* per policy: throughput, one shared scale */
    double rmax = 1;
    for (int p = 0; p < n_res; p++)
        for (int k = 0; k < res[p].n_segs; k++) rmax = fmax(rmax, res[p].segs[k].tokens_per_s);
    for (int p = 0; p < n_res; p++) {
        y0 += (p == 0 ? AVAIL_H : POL_H) + GAP;
        draw_policy(f, &res[p], horizon, y0, rmax * 1.15);
    }
    draw_marker_legend(f, ly);
    fprintf(f, "<text x='%d' y='%d' font-size='11' text-anchor='middle'>hours</text>\n", ML + PW / 2, H - 4);
    fprintf(f, "</svg>\n");
    const bool bad = ferror(f);
    if (fclose(f) != 0 || bad) return ah_error_set(err, AH_ERR_IO, "%s: write error", path);
    return AH_OK;
}
