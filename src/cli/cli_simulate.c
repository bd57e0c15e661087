/* autohet simulate: replays spot-availability traces on a cluster and compares policies
 * (autohet, uniform, varuna, on-demand, megatron-best) in tokens, hours and dollars. Model: src/sim/sim.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "core/json.h"
#include "core/names.h"
#include "core/str.h"
#include "cost/profile.h"
#include "sim/sim.h"

#define MAX_TRACES 16
#define MAPPING_LINES 12 /* assignments printed per pool; all of them are in --json */
#define RUNS_SHOWN 12    /* runs of node names per list; the rest are counted */
#define RECOVERY_LINES 6 /* (re)starts printed per policy; all of them are in --json */
#define WHY_MAX 384      /* ah_plan_result_t.precision_why */
#define LEFT_OUT_MAX 512 /* ah_plan_result_t.left_out */

/* "POOL=FILE[,unit=s|h|ms]" */
static ah_status_t parse_trace_spec(const char *spec, char *pool, size_t pool_cap, char *file, size_t file_cap,
                                    ah_time_unit_t *unit, ah_error_t *err) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || (size_t)(eq - spec) >= pool_cap)
        return ah_error_set(err, AH_ERR_USAGE, "--trace \"%s\": expected POOL=FILE[,unit=s|h|ms], e.g. H800=p3-trace.csv",
                            spec);
    memcpy(pool, spec, (size_t)(eq - spec));
    pool[eq - spec] = 0;
    *unit = AH_UNIT_AUTO;
    const char *opt = strstr(eq + 1, ",unit=");
    size_t flen = opt ? (size_t)(opt - eq - 1) : strlen(eq + 1);
    if (flen == 0 || flen >= file_cap)
        return ah_error_set(err, AH_ERR_USAGE, "--trace \"%s\": the file name is empty or too long", spec);
    memcpy(file, eq + 1, flen);
    file[flen] = 0;
    if (opt && !ah_time_unit_parse(opt + 6, unit))
        return ah_error_set(err, AH_ERR_USAGE, "--trace \"%s\": unit \"%s\" is not one of s, h, ms, auto", spec, opt + 6);
    return AH_OK;
}

/* The names of nodes idx[0 .. n) as runs (core/names.h: "h0..h159"), into buf. */
static const char *node_runs(const ah_cluster_t *c, const int *idx, int n, char *buf, size_t cap) {
    const char **names = malloc(sizeof *names * (size_t)(n > 0 ? n : 1));
    ah_str_t s = ah_str_fixed(buf, cap);
    if (!names) {
        ah_str_appendf(&s, "%d nodes", n);
        return buf;
    }
    for (int k = 0; k < n; k++) names[k] = c->nodes[idx[k]].name;
    ah_names_append(&s, names, n, " ", RUNS_SHOWN);
    free(names);
    return buf;
}

/* "always up: h160..h311: 152 spot nodes, no trace; d0..d7: 8 on-demand nodes": the nodes no
 * --trace covers, spot ones first. */
static void print_always_up(const ah_cluster_t *c, const ah_sim_pool_t *pools, int n_pools) {
    int *idx = malloc(sizeof *idx * (size_t)c->n_nodes);
    if (!idx) return;
    printf("always up:");
    int groups = 0;
    for (int spot = 1; spot >= 0; spot--) {
        int n = 0;
        for (int k = 0; k < c->n_nodes; k++) {
            bool traced = false;
            for (int i = 0; i < n_pools && !traced; i++)
                for (int j = 0; j < pools[i].n_nodes; j++) traced = traced || pools[i].nodes[j] == k;
            if (!traced && c->nodes[k].spot == (spot == 1)) idx[n++] = k;
        }
        if (n == 0) continue;
        char buf[1024];
        printf("%s %s: %d %s node%s%s", groups++ ? ";" : "", node_runs(c, idx, n, buf, sizeof buf), n,
               spot ? "spot" : "on-demand", n == 1 ? "" : "s", spot ? ", no trace" : "");
    }
    printf("%s\n", groups ? "" : " none");
    free(idx);
}

static void print_pools(const ah_cluster_t *c, const ah_sim_avail_t *a, const ah_sim_pool_t *pools, int n_pools) {
    for (int i = 0; i < n_pools; i++) {
        const ah_sim_pool_t *p = &pools[i];
        char buf[1024];
        printf("pool %s: %d spot node%s [%s", p->name, p->n_nodes, p->n_nodes == 1 ? "" : "s",
               node_runs(c, p->nodes, p->n_nodes, buf, sizeof buf));
        printf("] <- %s\n  %s, unit %s (%s), %.2f h\n", p->trace.path, p->trace.format,
               ah_time_unit_name(p->trace.unit), p->trace.unit_how, p->trace.end_s / 3600);
        if (p->trace.kind == AH_TRACE_EVENTS)
            printf("  mapping: each trace id takes the first free node of the pool (cluster order) at its add\n");
        else if (a->seed)
            printf("  mapping: count increases take random free nodes, decreases remove random live nodes (seed %llu)\n",
                   (unsigned long long)a->seed);
        else
            printf("  mapping: count increases take the first free nodes (cluster order), decreases remove the newest\n");
        if (p->capped)
            printf("  capped: the trace wants up to %d instances, the pool has %d; %d %s ignored\n", p->max_wanted,
                   p->n_nodes, p->capped, p->trace.kind == AH_TRACE_EVENTS ? "adds" : "rows above the cap");
        int shown = 0, total = 0;
        for (int pass = 0; pass < 2; pass++) {
            const ah_sim_change_t *v = pass ? a->changes : a->initial;
            for (int k = 0, n = pass ? a->n_changes : a->n_initial; k < n; k++) {
                if (v[k].pool != i) continue;
                total++;
                if (shown >= MAPPING_LINES) continue;
                shown++;
                printf("    %9.3f h  %-10s %-4s %s\n", v[k].t_s / 3600,
                       v[k].trace_id >= 0 ? p->trace.ids[v[k].trace_id] : "count", v[k].up ? "up" : "down",
                       c->nodes[v[k].node].name);
            }
        }
        if (total > shown) printf("    ... %d more changes (all in --json \"mapping\")\n", total - shown);
    }
    print_always_up(c, pools, n_pools);
}

/* Where each policy's time went (ah_sim_breakdown), and each against on-demand when it ran. */
static void print_breakdown(const ah_sim_avail_t *a, double horizon_s, const ah_sim_result_t *r, int n) {
    const ah_sim_result_t *od = NULL;
    for (int i = 0; i < n; i++)
        if (r[i].policy == AH_POLICY_ON_DEMAND) od = &r[i];
    ah_sim_breakdown_t odb = {0};
    if (od) ah_sim_breakdown(a, horizon_s, od, &odb);
    printf("\nwhere the time went (h): training (checkpoint holds), recovering = wait + save + re-plan + restart + "
           "transfer + first step + interrupted, stalled; mean tokens/s while training; GPU-h used of those up\n");
    for (int i = 0; i < n; i++) {
        ah_sim_breakdown_t b;
        ah_sim_breakdown(a, horizon_s, &r[i], &b);
        printf("%s: train %.2f (%.2f), recover %.2f = %.2f + %.2f + %.2f + %.2f + %.2f + %.2f + %.2f, stalled %.2f; "
               "%.0f tokens/s; GPU-h %.0f of %.0f",
               ah_policy_name(r[i].policy), b.train_h, b.ckpt_hold_h, b.recover_h, b.wait_h, b.save_h, b.replan_h,
               b.restart_h, b.transfer_h, b.first_step_h, b.interrupted_h, b.stalled_h, b.train_tokens_per_s,
               r[i].gpu_hours, b.gpu_hours_up);
        if (od && &r[i] != od && od->tokens > 0 && r[i].tokens > 0 && odb.train_tokens_per_s > 0)
            printf("; vs on-demand: tokens %.0f %%, $/token %.0f %%, tokens/s while training %.0f %%",
                   100 * r[i].tokens / od->tokens, 100 * (r[i].usd / r[i].tokens) / (od->usd / od->tokens),
                   100 * b.train_tokens_per_s / odb.train_tokens_per_s);
        printf("\n");
    }
}

/* --bound: what the nodes up could train with no recovery (ah_sim_bound), against on-demand when it ran. */
static void print_bound(const ah_sim_bound_t *b, const ah_sim_avail_t *a, double H, const ah_sim_result_t *r, int n) {
    const ah_cluster_t *c = a->cluster;
    printf("\nbound (--bound): every availability set trained at its plan, no recovery or checkpoint (%d sets): "
           "%.3f B tokens, $%.0f, GPU-h %.1f used; GPU-h up (of the cluster's): ",
           b->sets, b->tokens / 1e9, b->usd, b->gpu_hours_used);
    double up = 0;
    for (int ty = 0; ty < c->n_types; ty++) {
        int all = 0;
        for (int i = 0; i < c->n_nodes; i++) all += c->nodes[i].type == ty ? c->nodes[i].count : 0;
        printf("%s%s %.1f of %.1f", ty ? ", " : "", c->types[ty].name, b->gpu_hours_up[ty], all * H / 3600);
        up += b->gpu_hours_up[ty];
    }
    printf("; %.1f in all", up);
    if (b->no_plan_s > 0) printf("; no plan fits for %.2f h", b->no_plan_s / 3600);
    printf("\n  the planner's bound on any plan: %.3f B tokens", b->any_plan_tokens / 1e9);
    if (b->any_plan_unknown_s > 0) printf(" (%.2f h of sets without a bound left out)", b->any_plan_unknown_s / 3600);
    printf("; every node up the whole time: %.3f B at its plan, %.3f B at the bound\n", b->all_up_tokens / 1e9,
           b->all_up_any_plan_tokens / 1e9);
    const ah_sim_result_t *od = NULL;
    for (int i = 0; i < n; i++)
        if (r[i].policy == AH_POLICY_ON_DEMAND) od = &r[i];
    if (od && od->tokens > 0 && b->tokens > 0 && b->all_up_any_plan_tokens > 0)
        printf("  vs on-demand: tokens %.1f %% (bound on any plan vs every node up's: %.1f %%), $/token %.1f %%, "
               "$ per GPU-h used %.3f vs %.3f\n",
               100 * b->tokens / od->tokens, 100 * b->any_plan_tokens / b->all_up_any_plan_tokens,
               100 * (b->usd / b->tokens) / (od->usd / od->tokens), b->usd / b->gpu_hours_used, od->usd / od->gpu_hours);
}

/* --bound in --json: "bound": {tokens, usd, gpu_hours_used, any_plan_tokens, any_plan_unknown_s (the seconds of sets
 * whose result claims no bound, left out of any_plan_tokens: it bounds nothing unless 0), all_up_tokens,
 * all_up_any_plan_tokens, "timeline": [{"start_s", "tokens_per_s"}]}. */
static json_t *bound_json(const ah_sim_bound_t *b) {
    json_t *steps = json_array();
    for (int i = 0; steps && i < b->n_steps; i++)
        json_array_append_new(steps, json_pack("{s:f, s:f}", "start_s", b->t_s[i], "tokens_per_s", b->tokens_per_s[i]));
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:o*}", "tokens", b->tokens, "usd", b->usd, "gpu_hours_used",
                     b->gpu_hours_used, "any_plan_tokens", b->any_plan_tokens, "any_plan_unknown_s",
                     b->any_plan_unknown_s, "all_up_tokens", b->all_up_tokens,
                     "all_up_any_plan_tokens", b->all_up_any_plan_tokens, "timeline", steps);
}

static void print_results(const ah_sim_result_t *r, int n) {
    int w = 13; /* the names' column */
    for (int i = 0; i < n; i++)
        if ((int)strlen(ah_policy_name(r[i].policy)) > w) w = (int)strlen(ah_policy_name(r[i].policy));
    printf("\n%-*s %12s %7s %9s %10s %8s %8s %7s %7s %6s %9s %8s\n", w, "policy", "tokens (B)", "wall h", "GPU-h", "$",
           "$/Mtok", "recov h", "replans", "preempt", "sets", "planner s", "sim s");
    for (int i = 0; i < n; i++) {
        double per_m;
        char per_m_text[32] = "-"; /* no tokens kept: no ratio */
        if (ah_sim_usd_per_mtoken(&r[i], &per_m)) snprintf(per_m_text, sizeof per_m_text, "%.3f", per_m);
        printf("%-*s %12.3f %7.2f %9.1f %10.*f %8s %8.2f %7d %7d %6d %9.2f %8.2f\n", w, ah_policy_name(r[i].policy),
               r[i].tokens / 1e9, r[i].wall_s / 3600, r[i].gpu_hours, r[i].usd < 100 ? 2 : 0, r[i].usd, /* cents when small */
               per_m_text, r[i].recovery_s / 3600, r[i].replans, r[i].preemptions, r[i].plans_computed, r[i].planner_s,
               r[i].sim_wall_s);
    }
    for (int i = 0; i < n; i++) {
        printf("%s: %.3f B tokens lost to rollbacks; recovery bytes local %.1f GB, memory %.1f GB, peer %.1f GB, "
               "cloud %.1f GB; first plan %.3f s; egress $%.2f of the $\n",
               ah_policy_name(r[i].policy), r[i].tokens_lost / 1e9, r[i].bytes_local / 1e9, r[i].bytes_memory / 1e9,
               r[i].bytes_peer / 1e9, r[i].bytes_cloud / 1e9, r[i].first_plan_s, r[i].egress_usd);
        if (r[i].ckpt_egress_usd > 0 || r[i].ckpt_bytes_across_regions > 0)
            printf("  egress: $%.2f of it the checkpoints' (the memory tier's replication, recoveries' and handovers' "
                   "moves across zones and regions, uploads to the cloud tier; %.1f GB across regions)\n",
                   r[i].ckpt_egress_usd, r[i].ckpt_bytes_across_regions / 1e9);
        if (r[i].replica_plans_off > 0)
            printf("  replicas off in %d of %d plans: every piece on two nodes' disks, so a replication would only "
                   "hold training\n", r[i].replica_plans_off, r[i].plans_computed);
        if (r[i].region[0]) printf("  plans in region %s alone (--region; default the least mean $ per GPU-hour)\n",
                                   r[i].region);
        if (r[i].note[0]) printf("  note: %s\n", r[i].note);
        for (int k = 0; k < r[i].n_recs && k < RECOVERY_LINES; k++) {
            const ah_sim_recovery_t *v = &r[i].recs[k];
            printf("  %.2f s %s: %.3f s = stop %.3f (wait %.3f + save %.3f%s) + re-plan %.3f + restart %.3f + transfer "
                   "%.3f + first step %.3f; local %.1f MB, memory %.1f MB, peer %.1f MB, cloud %.1f MB%s\n",
                   v->t_s, v->event, v->seconds, v->wait_s + v->save_s, v->wait_s, v->save_s,
                   v->written_behind             ? ", written behind the next step"
                   : v->wait_s > 0 && !v->saved ? ", did not fit the grace period"
                                                : "",
                   v->replan_s,
                   v->restart_s, v->transfer_s, v->first_step_s, v->bytes[AH_TIER_LOCAL] / 1e6, v->bytes[AH_TIER_MEMORY] / 1e6,
                   v->bytes[AH_TIER_PEER] / 1e6, v->bytes[AH_TIER_CLOUD] / 1e6,
                   v->interrupted ? " (interrupted)" : "");
        }
        if (r[i].n_recs > RECOVERY_LINES)
            printf("  ... %d more (re)starts (all in --json \"recoveries\")\n", r[i].n_recs - RECOVERY_LINES);
    }
}

/* --trace repeats, which the flag parser does not do: moves every occurrence's value to specs and
 * the other arguments to rest (argc + 1 entries). Returns 0, or 2 with the message printed. */
static int take_traces(int argc, char **argv, char **rest, int *n_rest, const char **specs, int *n_specs) {
    *n_rest = *n_specs = 0;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (i > 0 && strcmp(argv[i], "--trace") == 0 && i + 1 < argc) v = argv[++i];
        else if (i > 0 && strncmp(argv[i], "--trace=", 8) == 0) v = argv[i] + 8;
        if (!v) {
            rest[(*n_rest)++] = argv[i];
            continue;
        }
        if (*n_specs == MAX_TRACES) {
            fprintf(stderr, "autohet simulate: at most %d --trace flags\n", MAX_TRACES);
            return 2;
        }
        specs[(*n_specs)++] = v;
    }
    return 0;
}

/* --policy's comma list into want[]; at least one. */
static ah_status_t parse_policies(const char *list, bool want[AH_POLICY_COUNT], ah_error_t *err) {
    char pl[256];
    snprintf(pl, sizeof pl, "%s", list);
    bool any = false;
    for (char *tok = strtok(pl, ","); tok; tok = strtok(NULL, ",")) {
        ah_policy_t p;
        if (!ah_policy_parse(tok, &p))
            return ah_error_set(err, AH_ERR_USAGE,
                                "--policy: \"%s\" is not one of autohet, uniform, varuna, on-demand, megatron-best, "
                                "autohet-region",
                                tok);
        want[p] = any = true;
    }
    if (!any)
        return ah_error_set(err, AH_ERR_USAGE, "--policy \"%s\": name at least one of autohet, uniform, varuna, "
                            "on-demand, megatron-best, autohet-region", list);
    return AH_OK;
}

/* Each --trace's pool resolved on the cluster and its file loaded (*n_pools counts the resolved). */
static ah_status_t load_pools(const ah_cluster_t *cluster, const char **specs, int n_specs, ah_sim_pool_t *pools,
                              int *n_pools, ah_error_t *err) {
    ah_status_t st = AH_OK;
    for (int i = 0; i < n_specs && st == AH_OK; i++) {
        char pool[2 * AH_NAME_MAX + 2], file[512];
        ah_time_unit_t unit;
        st = parse_trace_spec(specs[i], pool, sizeof pool, file, sizeof file, &unit, err);
        if (st == AH_OK) st = ah_sim_pool_resolve(cluster, pool, &pools[*n_pools], err);
        if (st == AH_OK) st = ah_trace_load(file, unit, &pools[(*n_pools)++].trace, err);
    }
    return st;
}

/* What the replay runs on: the model, the cluster as given and the one replayed (left-out nodes
 * removed), --precision auto's choice. */
typedef struct {
    const ah_model_t *model;
    const ah_cluster_t *cluster; /* replayed: the nodes whose type runs the precision */
    const char *cluster_s;
    int given_gpus, given_nodes; /* the cluster as given */
    const char *why;             /* --precision auto: the choice and why; "" when given */
    const char *left_out;        /* the types left out (the planner's text); "" when none */
} setting_t;

/* The settings the run is under, before its results. */
static void print_setting(const setting_t *g, const ah_sim_opts_t *o, double horizon_s) {
    printf("model %s, global batch %lld x seq-len %lld, %s; cluster %s: %d GPUs in %d node%s", g->model->name,
           (long long)o->train.global_batch, (long long)o->train.seq_len, ah_precision_name(o->train.precision),
           g->cluster_s, ah_cluster_gpu_count(g->cluster), g->cluster->n_nodes, g->cluster->n_nodes == 1 ? "" : "s");
    if (g->given_nodes > g->cluster->n_nodes)
        printf(" (of %d GPUs in %d nodes)", g->given_gpus, g->given_nodes);
    printf("\n");
    if (g->why[0]) printf("why %s: %s\n", ah_precision_name(o->train.precision), g->why);
    if (g->left_out[0]) printf("left out: %s; no policy uses those nodes\n", g->left_out);
    if (o->objective == AH_OBJECTIVE_COST || o->budget_usd_per_hour > 0) {
        printf("autohet and on-demand plan for %s", o->objective == AH_OBJECTIVE_COST ? "the least $ per token"
                                                                                        : "the least time");
        if (o->budget_usd_per_hour > 0) printf(", at most $%g per hour of GPUs and egress", o->budget_usd_per_hour);
        printf(" (--objective, --budget; the baselines' plans are their own)\n");
    }
    printf("horizon %.2f h (%s); checkpoint every %g s; restart %g s; disk %g GB/s; grace %g s; re-plan ",
           horizon_s / 3600, o->hours > 0 ? "--hours" : "the latest trace end", o->ckpt_every_s, o->restart_s,
           o->disk_gb_s, o->grace_s);
    if (o->replan_s >= 0) printf("%g s (given)", o->replan_s);
    else printf("time as measured");
    printf("; on-demand price: an on-demand node's of the same type, else spot x %g\n", o->on_demand_factor);
    if (ah_cluster_region_count(g->cluster) > 1)
        printf("cloud tier in region %s (--cloud-region): other regions' uploads and downloads cross their link\n",
               o->cloud_region[0] ? o->cloud_region : g->cluster->nodes[0].region);
    if (o->replica_memory_gb > 0)
        printf("autohet: in-memory peer replicas, at most %g GB per host; snapshot %g GB/s per device, replication on "
               "each pair's link; %s\n", o->replica_memory_gb, o->snapshot_gb_s,
               o->handover ? "the handover at a notice (--no-handover: off)" : "no handover at a notice");
    if (o->join_horizon_s > 0)
        printf("autohet: joined nodes taken in when the restart pays over a fixed %g s (--join-horizon-s)\n",
               o->join_horizon_s);
    if (o->in_place)
        printf("autohet: plans changed in place at a notice (the default; --no-in-place: off), the change's step "
               "written behind when the last committed step outlives the leavers, else saved before the move: restart "
               "%g s there (%g s parking ranks, %g s taking in a free node or a parked rank), not %g s "
               "(measured on the CPU runtime: a lower bound at scale; docs/simulator.md rule 11)\n",
               o->restart_s * AH_SIM_IN_PLACE_FRACTION, o->restart_s * AH_SIM_PARK_IN_PLACE_FRACTION,
               o->restart_s * AH_SIM_JOIN_IN_PLACE_FRACTION, o->restart_s);
    if (o->release_idle)
        printf("every policy pays only the nodes its plan uses (--release-idle): the others given back while idle\n");
    if (o->exposure_aware)
        printf("autohet: exposure-aware plans (--exposure-aware): the rollbacks of pieces held by one node weighed\n");
    if (o->churn_aware)
        printf("autohet: churn-aware plans (--churn-aware): spot types left out where their preemptions cost more "
               "than they train\n");
}

/* A replay in which no policy trained a token because none had a plan that fits: refused, with
 * each policy's reason (the results are printed first). */
static ah_status_t check_trained(const ah_sim_result_t *r, int n, ah_error_t *err) {
    for (int i = 0; i < n; i++)
        if (r[i].tokens > 0 || !r[i].note[0]) return AH_OK; /* trained, or a horizon too short to */
    char why[AH_ERROR_MSG_MAX];
    ah_str_t s = ah_str_fixed(why, sizeof why);
    for (int i = 0; i < n; i++) ah_str_appendf(&s, "; %s: %s", ah_policy_name(r[i].policy), r[i].note);
    return ah_error_set(err, AH_ERR_INFEASIBLE, "no policy trained a token: none has a plan that fits what is up%s",
                        why);
}

/* Runs each wanted policy on the availability and reports them; --json and --svg when asked. */
static ah_status_t simulate(const setting_t *g, const ah_sim_avail_t *avail, const ah_sim_pool_t *pools, int n_pools,
                            const ah_sim_opts_t *o, const bool want[AH_POLICY_COUNT], bool bound,
                            const char *json_path, const char *svg_path, ah_error_t *err) {
    ah_status_t st = ah_sim_check_horizon(avail, o, err);
    if (st != AH_OK && o->hours <= 0 && avail->end_s <= 0 && n_pools > 0) /* name the traces (a one-row file) */
        return ah_error_set(err, AH_ERR_USAGE, "nothing to replay: %s%s: its rows (%d) are all at time 0; give --hours H",
                            pools[0].trace.path, n_pools > 1 ? " and the other traces" : "",
                            pools[0].trace.n_events + pools[0].trace.n_steps);
    int bucket;
    if (st == AH_OK) st = ah_sim_cloud_node(g->cluster, o, &bucket, err); /* --cloud-region, before the report */
    if (st != AH_OK) return st;
    const double H = ah_sim_horizon_s(avail, o);
    const ah_model_t *model = g->model;
    print_setting(g, o, H);
    if (n_pools == 0) printf("no --trace: every node is up all the time\n");
    print_pools(g->cluster, avail, pools, n_pools);
    fflush(stdout);
    ah_sim_result_t results[AH_POLICY_COUNT];
    memset(results, 0, sizeof results);
    int n_res = 0;
    for (int p = 0; p < AH_POLICY_COUNT && st == AH_OK; p++)
        if (want[p] && (st = ah_sim_run(model, avail, o, (ah_policy_t)p, &results[n_res], err)) == AH_OK) n_res++;
    if (st == AH_OK) {
        print_results(results, n_res);
        print_breakdown(avail, H, results, n_res);
    }
    ah_sim_bound_t bd = {0};
    if (st == AH_OK && bound && (st = ah_sim_bound(model, avail, o, &bd, err)) == AH_OK)
        print_bound(&bd, avail, H, results, n_res);
    if (st == AH_OK && json_path) {
        json_t *doc = ah_sim_to_json(avail, pools, n_pools, o, H, results, n_res);
        if (doc && bound) json_object_set_new(doc, "bound", bound_json(&bd));
        st = doc ? ah_json_save_file(doc, json_path, err)
                 : ah_error_set(err, AH_ERR_INTERNAL, "out of host memory building the JSON");
        json_decref(doc);
        if (st == AH_OK) printf("wrote %s\n", json_path);
    }
    if (st == AH_OK && svg_path && (st = ah_sim_svg_write(avail, H, results, n_res, svg_path, err)) == AH_OK)
        printf("wrote %s\n", svg_path);
    if (st == AH_OK) st = check_trained(results, n_res, err);
    for (int i = 0; i < n_res; i++) ah_sim_result_free(&results[i]);
    ah_sim_bound_free(&bd);
    return st;
}

/* A --trace whose pool is of a type the precision leaves out: refused, naming it (its nodes are
 * not replayed). */
static ah_status_t check_traces_kept(const ah_cluster_t *c, const char **specs, int n_specs, ah_precision_t p,
                                     ah_error_t *err) {
    for (int i = 0; i < n_specs; i++) {
        char pool[2 * AH_NAME_MAX + 2], file[512];
        ah_time_unit_t unit;
        ah_status_t st = parse_trace_spec(specs[i], pool, sizeof pool, file, sizeof file, &unit, err);
        if (st != AH_OK) return st;
        pool[strcspn(pool, "@")] = 0;
        const int ty = ah_cluster_find_type(c, pool);
        if (ty >= 0 && !ah_gpu_runs(&c->types[ty], p))
            return ah_error_set(err, AH_ERR_USAGE, "--trace \"%s\": %s is left out: it has no %s rate, so no policy "
                                "uses its nodes; drop the trace or give --precision another precision", specs[i],
                                c->types[ty].name, ah_precision_name(p));
    }
    return AH_OK;
}

/* Removes the nodes whose type cannot run p (what every policy's planner would leave out), so they
 * are neither replayed nor drawn as up. */
static void drop_left_out(ah_cluster_t *c, ah_precision_t p) {
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++)
        if (ah_gpu_runs(&c->types[c->nodes[i].type], p)) c->nodes[n++] = c->nodes[i];
    c->n_nodes = n;
}

/* The model, cluster and settings checked, --precision auto resolved, the left-out nodes dropped.
 * *g's strings live in why[] and left_out[]. */
static ah_status_t prepare(const char *model_s, const char *cluster_s, bool seq_given, bool auto_precision,
                           const char **specs, int n_specs, ah_sim_opts_t *o, ah_planner_opts_t *po, ah_model_t *model,
                           ah_cluster_t *cluster, setting_t *g, char *why, char *left_out, ah_error_t *err) {
    ah_status_t st = ah_model_load(model_s, model, err);
    if (st != AH_OK) return st;
    if (!seq_given && ah_model_context(model) < o->train.seq_len) o->train.seq_len = ah_model_context(model);
    po->train = o->train; /* every re-plan's training settings, refused once here if bad */
    if ((st = ah_planner_check_train(model, po, err)) != AH_OK) return st;
    if ((st = ah_cluster_open(cluster_s, cluster, err)) != AH_OK) return st;
    /* every policy's $ and $ per million tokens, and --objective cost / --budget: spec/cluster.h "Prices" */
    if ((st = ah_planner_require_prices(cluster, po, cluster_s, err)) != AH_OK) return st;
    st = ah_cluster_require_prices(cluster, "simulate (its $ and $ per million tokens per policy)", cluster_s, err);
    if (st == AH_OK) st = ah_cli_resolve_precision(model, cluster, po, auto_precision, why, WHY_MAX, err);
    o->train.precision = po->train.precision;
    if (st == AH_OK) st = ah_planner_check_inputs(model, cluster, po, err); /* e.g. no type runs the precision */
    if (st == AH_OK) st = check_traces_kept(cluster, specs, n_specs, o->train.precision, err);
    if (st != AH_OK) return st;
    ah_planner_left_out(cluster, o->train.precision, left_out, LEFT_OUT_MAX);
    *g = (setting_t){model, cluster, cluster_s, ah_cluster_gpu_count(cluster), cluster->n_nodes, why, left_out};
    drop_left_out(cluster, o->train.precision);
    return AH_OK;
}

/* The plan flags' settings into the simulation's options; sizes from --global-batch and --seq-len. */
static void take_plan_flags(ah_sim_opts_t *o, ah_planner_opts_t *po, int64_t gb, int64_t sl) {
    o->train.global_batch = gb;
    o->train.seq_len = sl;
    o->train.micro_batch = po->train.micro_batch;
    o->train.precision = po->train.precision; /* auto: resolved by prepare */
    o->shard = po->shard;
    o->objective = po->objective;
    o->schedule = po->schedule;
    o->cp = po->cp;
    po->schedule_trainable_only = true; /* its policies train: the precision's plans likewise */
    o->budget_usd_per_hour = po->budget_usd_per_hour;
}

/* What the command line asks for. */
typedef struct {
    const char *model_s, *cluster_s, *policies_s, *json_path, *svg_path, *profile_s;
    const char *specs[MAX_TRACES]; /* --trace POOL=FILE, in order */
    int n_specs;
    bool seq_given;                /* --seq-len given (else the model's context caps the default) */
    int64_t seed;
    ah_sim_opts_t o;               /* the simulation's flags; the plan flags taken by take_plan_flags */
    ah_planner_opts_t po;
    bool auto_precision;
    bool want[AH_POLICY_COUNT];
    bool bound;                    /* --bound: the availability bound after the policies */
} sim_args_t;

/* Parses argv into *a. Returns -1 to go on, else the exit status (help, or a usage error printed). */
static int parse_args(int argc, char **argv, sim_args_t *a) {
    a->policies_s = "autohet,uniform,varuna,on-demand,megatron-best";
    ah_cli_plan_flags_t pf = {0}; /* the shared flags (cli.h): NULL, 0 for the rule's default */
    ah_sim_opts_t *o = &a->o;
    ah_sim_opts_default(o);
    int64_t gb = o->train.global_batch, sl = o->train.seq_len;
    const char *trace_help = NULL, *region = NULL, *cloud_region = NULL;
    bool no_handover = false, no_in_place = false;
    ah_flag_t flags[] = {
        {"--model", AH_FLAG_STR, &a->model_s, "M", "preset name or HF config.json (required)", false},
        {"--cluster", AH_FLAG_STR, &a->cluster_s, "C", "cluster JSON or built-in name (required)", false},
        {"--trace", AH_FLAG_STR, &trace_help, "POOL=FILE[,unit=s|h|ms]",
         "a trace for the spot nodes of POOL (TYPE, TYPE@ZONE or TYPE@REGION); repeat per pool", false},
        {"--policy", AH_FLAG_STR, &a->policies_s, "LIST",
         "comma list of autohet,uniform,varuna,on-demand,megatron-best,autohet-region (default all but autohet-region)",
         false},
        {"--region", AH_FLAG_STR, &region, "R",
         "autohet-region plans in region R's nodes alone (default: the region of the least mean $ per GPU-hour)", false},
        ah_cli_shared_flag_as("--cloud-region", &cloud_region,
                              "the cloud tier's bucket is in region R: uploads and downloads of nodes in other regions "
                              "cross that link (its rate, its $/GB; default: the first node's region)"),
        {"--hours", AH_FLAG_NUM_ABOVE(0, .value_first = true, .note = "leave it out to run to the latest trace end"),
         &o->hours, "H", "simulated wall time (default: the latest trace end)", false},
        {"--ckpt-every-s", AH_FLAG_NUM_ABOVE(0), &o->ckpt_every_s, "S", "checkpoint interval in training seconds (default 1800)",
         false},
        {"--restart-s", AH_FLAG_NUM_MIN(0), &o->restart_s, "S",
         "fixed relaunch overhead per (re)start: old job's exit, launch, start-up, warm-up (default 60)", false},
        {"--disk-gb-s", AH_FLAG_NUM_ABOVE(0), &o->disk_gb_s, "G",
         "local disk write bandwidth per node, GB/s, for the save at a notice (default 8)", false},
        {"--grace-s", AH_FLAG_NUM_MIN(0), &o->grace_s, "S",
         "notice to removal; autohet saves at a notice only if that fits (default 120)", false},
        ah_cli_shared_flag_as("--replica-memory-gb", &o->replica_memory_gb,
                              "autohet keeps in-memory peer replicas, at most G GB per holding host (the runtime's "
                              "flag): the save at a notice commits in a peer's memory first, and a lost node's pieces "
                              "come from a peer's memory at the network's rate (default 0: off; docs/simulator.md)"),
        {"--replicas-always", AH_FLAG_BOOL, &o->replicas_always, NULL, "with --replica-memory-gb: every periodic "
         "checkpoint replicated, as train --replica-memory-gb alone does (default: not under a plan whose every piece "
         "is on two nodes' disks, as run's trainers, --replica-when-it-pays)", false},
        {"--no-handover", AH_FLAG_BOOL, &no_handover, NULL, "with --replica-memory-gb: no handover at a notice (the "
         "runtime's run --no-handover: the save goes to the partners' memory, the relaunch fetches what moved; "
         "default: the handover, docs/simulator.md)", false},
        {"--release-idle", AH_FLAG_BOOL, &o->release_idle, NULL, "every policy pays only its plan's nodes (default: "
         "every node up, as the agent releases no host; simulator.md rule 2)", false},
        {"--churn-aware", AH_FLAG_BOOL, &o->churn_aware, NULL, "autohet leaves out the spot GPU types whose "
         "preemptions, at the rate seen so far, cost more than they train (docs/simulator.md \"Churn-aware plans\"; "
         "the agent does not do this yet)", false},
        {"--in-place", AH_FLAG_BOOL, &o->in_place, NULL, "plans changed in place at a notice, as run does by "
         "default, also onto a plan of the running ranks' devices on the staying nodes, as the agent does "
         "(simulator.md 11; the default)", false},
        {"--no-in-place", AH_FLAG_BOOL, &no_in_place, NULL, "every change a stop and relaunch, as run --no-in-place "
         "(default: in place where it can be; --no-handover too, as run's)", false},
        {"--exposure-aware", AH_FLAG_BOOL, &o->exposure_aware, NULL, "autohet's plan choice weighs the rollbacks of "
         "pieces one node holds alone (simulator.md rule 12; autohet run --exposure-aware, the same weighing)", false},
        {"--join-horizon-s", AH_FLAG_NUM_IN(1e-3, 1e9), &o->join_horizon_s, "S", "autohet takes joined nodes in (a "
         "restart) when the plan with them gains more over S seconds than a restart costs, as the agent's run "
         "--join-horizon-s (default: S is the expected time until that plan is preempted, from the removals seen)",
         false},
        {"--bound", AH_FLAG_BOOL, &a->bound, NULL, "after the policies, what the nodes up could train with no "
         "recovery: each availability set at autohet's plan of it, the whole time it lasts, and at the planner's "
         "bound on any plan (an accounting for analysis, not a policy; docs/simulator.md)", false},
        {"--snapshot-gb-s", AH_FLAG_NUM_ABOVE(0), &o->snapshot_gb_s, "G",
         "with --replica-memory-gb: a device's copy of its checkpoint into its host's memory, GB/s per device "
         "(default: the runtime's, measured; docs/simulator.md)", false},
        {"--replan-s", AH_FLAG_NUM_MIN(0, .value_first = true, .note = "leave it out to charge the measured time"),
         &o->replan_s, "S", "charge this per re-plan instead of the measured planner time", false},
        {"--on-demand-factor", AH_FLAG_NUM_ABOVE(0), &o->on_demand_factor, "F",
         "on-demand price = spot x F when the cluster has no on-demand node of the type (default 2.5)", false},
        {"--seed", AH_FLAG_INT_IN(0, AH_CLI_SEED_MAX, .value_first = true, .note = "0: newest-first; else the seed of random picks"),
         &a->seed, "N", "count traces: random node picks with this seed (default 0: newest-first)", false},
        ah_cli_shared_flag("--global-batch", &gb),
        ah_cli_shared_flag("--seq-len", &sl),
        AH_CLI_PLAN_FLAGS(&pf),
        ah_cli_shared_flag_as("--shard-optimizer", &pf.shard,
                              "autohet's and on-demand's plans with the optimizer sharded (autohet plan's flag); a save "
                              "then all-gathers the moments first (default none)"),
        ah_cli_shared_flag("--profile", &a->profile_s),
        {"--json", AH_FLAG_STR, &a->json_path, "FILE", "write totals, mapping and timelines as JSON", false},
        {"--svg", AH_FLAG_STR, &a->svg_path, "FILE", "write the timeline picture", false},
    };
    const int n_flags = (int)(sizeof flags / sizeof flags[0]);
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    int n_rest = 0, rc = 0;
    if (!rest) return 1;
    bool go = (rc = take_traces(argc, argv, rest, &n_rest, a->specs, &a->n_specs)) == 0 &&
              ah_cli_parse("simulate", "--model M --cluster C --trace POOL=FILE ... [flags]",
                           "Replays spot-availability traces on a cluster and compares policies side by side: "
                           "tokens, GPU-hours, dollars, time in recovery. The model is in docs/simulator.md.\n"
                           "The flags it shares with plan and run (README \"Flags shared by verbs\") mean what they "
                           "mean there; --precision auto is resolved once, on the whole cluster, as plan resolves it.",
                           flags, n_flags, n_rest, rest, &rc);
    free(rest);
    if (!go) return rc;
    a->seq_given = ah_cli_flag_seen(flags, n_flags, "--seq-len");
    o->handover = !no_handover;
    if (o->in_place && no_in_place) {
        fprintf(stderr, "autohet simulate: --in-place and --no-in-place: give one\n");
        return 2;
    }
    if (o->in_place && no_handover) { /* as run: no next plan before a notice, so no change in place */
        fprintf(stderr, "autohet simulate: --in-place needs the next plan made before a notice, which --no-handover "
                        "turns off: give one of --in-place, --no-handover\n");
        return 2;
    }
    o->in_place = !no_in_place && !no_handover; /* run's default (docs/simulator.md rule 11) */
    if (region) snprintf(o->region, sizeof o->region, "%s", region);
    if (cloud_region) snprintf(o->cloud_region, sizeof o->cloud_region, "%s", cloud_region);
    ah_planner_opts_default(&a->po);
    if (!ah_cli_plan_flags("simulate", &pf, &a->po, &a->auto_precision)) return 2;
    ah_error_t err = {0};
    if (!a->model_s || !a->cluster_s)
        ah_error_set(&err, AH_ERR_USAGE, "--model and --cluster are required (autohet simulate --help)");
    else if (parse_policies(a->policies_s, a->want, &err) == AH_OK && region && !a->want[AH_POLICY_AUTOHET_REGION])
        ah_error_set(&err, AH_ERR_USAGE, "--region is the autohet-region policy's region; add autohet-region to --policy");
    if (err.code != AH_OK) return ah_cli_fail("simulate", &err);
    take_plan_flags(o, &a->po, gb, sl);
    return -1;
}

int ah_cli_simulate(int argc, char **argv) {
    sim_args_t a = {0};
    const int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    ah_error_t err = {0};
    ah_profile_t *profile = NULL;
    if (a.profile_s && ah_profile_load(a.profile_s, &profile, &err) != AH_OK) return ah_cli_fail("simulate", &err);
    a.o.profile = a.po.profile = profile;

    ah_model_t model;
    ah_cluster_t cluster = {0};
    setting_t g;
    char why[WHY_MAX], left_out[LEFT_OUT_MAX];
    ah_sim_pool_t pools[MAX_TRACES];
    memset(pools, 0, sizeof pools);
    ah_sim_avail_t avail = {0};
    int n_pools = 0;
    ah_status_t st = prepare(a.model_s, a.cluster_s, a.seq_given, a.auto_precision, a.specs, a.n_specs, &a.o, &a.po,
                             &model, &cluster, &g, why, left_out, &err);
    if (st == AH_OK) st = load_pools(&cluster, a.specs, a.n_specs, pools, &n_pools, &err);
    if (st == AH_OK) st = ah_sim_avail_build(&cluster, pools, n_pools, (uint64_t)a.seed, &avail, &err);
    if (st == AH_OK) st = simulate(&g, &avail, pools, n_pools, &a.o, a.want, a.bound, a.json_path, a.svg_path, &err);
    ah_sim_avail_free(&avail);
    for (int i = 0; i < n_pools; i++) ah_sim_pool_free(&pools[i]);
    ah_cluster_free(&cluster);
    ah_profile_free(profile);
    return st == AH_OK ? 0 : ah_cli_fail("simulate", &err);
}
