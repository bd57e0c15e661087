/* autohet evaluate: scores a plan (the planner's or a hand-written one) under the cost model —
 * per-stage times and memory, iteration time with its breakdown, tokens/s, its $/h and $ per
 * million tokens as plan shows them ("unpriced" where a node it uses has no price), the
 * bottleneck. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "ckpt/host_memory.h"
#include "ckpt/s3.h"
#include "cli/cli.h"
#include "core/str.h"
#include "cost/profile.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "runtime/device.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char USAGE[] = "--plan FILE [--cluster C] [--profile FILE] [--shard-optimizer none|even] [--dp-sync ring|hierarchical] [-o plan.json] [--svg FILE] [--json]";
static const char ABOUT[] = "Scores a plan under the cost model: per-stage time and memory, iteration time with its breakdown, "
                            "tokens/s, $/h and $ per million tokens (as plan prints them: \"unpriced\" where a node the "
                            "plan uses has no usd_per_gpu_hour) and the bottleneck. Exits 1 when the plan is invalid or "
                            "does not fit in memory (the table is still printed then).";

/* "a100-0:0-3" or "h20-0:1,4": the stage's node and its GPU indices, runs compressed. */
static void devices_str(const ah_plan_t *p, const ah_pipeline_t *pl, const ah_stage_t *st, char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const int n = ah_stage_devices(pl, p->tp); /* every CP rank's too, a node's name once per run */
    for (int r = 0; r < n; r++) {
        const ah_device_ref_t *d = st->devices;
        const bool new_node = r == 0 || d[r].node != d[r - 1].node;
        if (new_node) ah_str_appendf(&s, "%s%s:", r ? " " : "", p->cluster.nodes[d[r].node].name);
        int e = r;
        while (e + 1 < n && d[e + 1].node == d[e].node && d[e + 1].index == d[e].index + 1) e++;
        if (e > r) ah_str_appendf(&s, "%s%d-%d", new_node ? "" : ",", d[r].index, d[e].index);
        else ah_str_appendf(&s, "%s%d", new_node ? "" : ",", d[r].index);
        r = e;
    }
}

typedef struct {
    int pipeline, stage;
    const char *gpu;
    double stage_s;     /* f + b of the bottleneck stage, one micro-batch */
    double tp_share;    /* fraction of stage_s that is TP all-reduce */
    char reason[512];
} bottleneck_t;

static void find_bottleneck(const ah_plan_t *p, const ah_eval_t *e, bottleneck_t *b) {
    const ah_breakdown_t *bd = &e->pred.breakdown;
    b->pipeline = e->critical_pipeline;
    b->stage = e->bottleneck_stage;
    const ah_pipeline_t *pl = &p->pipelines[b->pipeline];
    const ah_stage_t *st = &pl->stages[b->stage];
    const ah_stage_eval_t *se = &e->pipelines[b->pipeline].stages[b->stage];
    b->gpu = p->cluster.types[st->type].name;
    const int groups = ah_pipeline_groups(pl); /* interleaved: the device's stages together */
    b->stage_s = 0;
    for (int k = b->stage; k < pl->n_stages; k += groups) b->stage_s += se[k - b->stage].fwd_s + se[k - b->stage].bwd_s;
    double pipe_s = e->pipelines[b->pipeline].time_s, it = e->pred.iteration_s;
    b->tp_share = (bd->compute_s + bd->tp_comm_s) > 0 ? bd->tp_comm_s / (bd->compute_s + bd->tp_comm_s) : 0;
    /* Say which term dominates: the slowest pipeline's pace, or what comes after it. */
    double after = bd->dp_sync_s + bd->optimizer_s;
    if (after > pipe_s)
        snprintf(b->reason, sizeof b->reason,
                 "gradient sync (%.1f%%) and optimizer step (%.1f%%) outweigh the pipelines: "
                 "fewer, larger pipelines or faster links between them would help most",
                 100 * bd->dp_sync_s / it, 100 * bd->optimizer_s / it);
    else if (groups < pl->n_stages)
        snprintf(b->reason, sizeof b->reason,
                 "slowest device of the slowest pipeline: %s, its %d stages from layers [%d, %d) on, %.3f ms "
                 "forward + backward per micro-batch (%.0f%% TP all-reduce), paces its %lld micro-batches",
                 b->gpu, pl->n_stages / groups, st->first, st->last, 1e3 * b->stage_s, 100 * b->tp_share,
                 (long long)pl->micro_batches);
    else
        snprintf(b->reason, sizeof b->reason,
                 "slowest stage of the slowest pipeline: %s, layers [%d, %d), %.3f ms forward + "
                 "backward per micro-batch (%.0f%% TP all-reduce)%s, paces its %lld micro-batches",
                 b->gpu, st->first, st->last, 1e3 * b->stage_s, 100 * b->tp_share,
                 st->recompute ? " with recomputation" : "", (long long)pl->micro_batches);
}

/* Whether two profile paths as given ("" none) name one file: equal, or the same file by device
 * and inode (./p.json and /dir/p.json). */
static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (strcmp(a, b) == 0) return true;
    return a[0] && b[0] && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static void print_human(const char *path, const char *profile_path, const ah_plan_t *p, const ah_eval_t *e) {
    const char *mb_unit = p->train.micro_batch == 1 ? "sequence" : "sequences";
    printf("plan %s: model %s, global batch %lld x seq-len %lld, micro-batch %lld %s, tp %d, %s, "
           "%d pipelines, %d devices\n\n",
           path, p->model.name, (long long)p->train.global_batch, (long long)p->train.seq_len,
           (long long)p->train.micro_batch, mb_unit, p->tp, ah_precision_name(p->train.precision),
           p->n_pipelines, ah_plan_device_count(p));
    printf("%-5s %-14s %-22s %-10s %10s %10s %26s\n", "stage", "gpu", "devices", "layers", "fwd ms",
           "bwd ms", "memory used / capacity");
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const ah_pipeline_eval_t *pe = &e->pipelines[i];
        const int groups = ah_pipeline_groups(pl);
        char sched[64] = "1F1B";
        if (pl->schedule == AH_SCHED_INTERLEAVED)
            snprintf(sched, sizeof sched, "on %d devices, interleaved 1F1B (%d per device)", groups, pl->n_stages / groups);
        if (pl->schedule == AH_SCHED_ZERO_BUBBLE) snprintf(sched, sizeof sched, "zero-bubble ZB-H1");
        char cp[48] = "";
        if (ah_pipeline_cp(pl) > 1) snprintf(cp, sizeof cp, "context parallel %d, ", ah_pipeline_cp(pl));
        printf("pipeline %d: %lld micro-batch%s, %d stage%s, %s%s %.4f s%s\n", i,
               (long long)pl->micro_batches, pl->micro_batches == 1 ? "" : "es", pl->n_stages,
               pl->n_stages == 1 ? "" : "s", cp, sched, pe->time_s,
               i == e->critical_pipeline ? "  (critical)" : "");
        for (int s = 0; s < pl->n_stages; s++) {
            const ah_stage_t *st = &pl->stages[s];
            const ah_stage_eval_t *se = &pe->stages[s];
            char devs[128], layers[32], mem[64];
            devices_str(p, pl, st, devs, sizeof devs);
            snprintf(layers, sizeof layers, "[%d, %d)", st->first, st->last);
            int64_t cap = ah_gpu_capacity_bytes(&p->cluster.types[st->type]);
            /* MiB for small (emulated) devices, where GiB would print 0.00 */
            double unit = cap < 4 * GIB ? 1024.0 * 1024.0 : GIB;
            snprintf(mem, sizeof mem, "%.2f / %.2f %s (%3.0f%%)", (double)se->memory_bytes / unit,
                     (double)cap / unit, unit == GIB ? "GiB" : "MiB",
                     cap > 0 ? 100.0 * (double)se->memory_bytes / (double)cap : 0);
            char note[64] = "";
            snprintf(note, sizeof note, "%s%s%s", st->recompute ? " recompute" : "",
                     se->memory_bytes > cap ? " OVER CAPACITY" : "",
                     i == e->critical_pipeline && s == e->bottleneck_stage ? " bottleneck" : "");
            printf("%-5d %-14s %-22s %-10s %10.3f %10.3f %26s %s\n", s, p->cluster.types[st->type].name,
                   devs, layers, 1e3 * se->fwd_s, 1e3 * se->bwd_s, mem, note);
        }
    }
    const ah_breakdown_t *b = &e->pred.breakdown;
    double it = e->pred.iteration_s;
    struct { const char *name; double v; } terms[] = {
        {"compute", b->compute_s}, {"bubble", b->bubble_s}, {"p2p", b->p2p_s},
        {"TP comm", b->tp_comm_s}, {"CP ring", b->cp_comm_s}, {"DP sync", b->dp_sync_s},
        {"optimizer", b->optimizer_s}, {"checkpoint", b->ckpt_s}};
    double peak = (double)e->pred.memory_bytes;
    printf("\niteration %.6f s, %.1f tokens/s, peak device memory %.2f %s\n", it, e->pred.tokens_per_s,
           peak < 4 * GIB ? peak / (1024.0 * 1024.0) : peak / GIB, peak < 4 * GIB ? "MiB" : "GiB");
    bool cp = false; /* the ring's row only for a plan with context parallelism */
    for (int i = 0; i < p->n_pipelines; i++) cp = cp || ah_pipeline_cp(&p->pipelines[i]) > 1;
    for (size_t k = 0; k < sizeof terms / sizeof terms[0]; k++)
        if ((cp || strcmp(terms[k].name, "CP ring") != 0) && (b->ckpt_s > 0 || strcmp(terms[k].name, "checkpoint") != 0))
            printf("  %-10s %12.6f s %6.1f%%\n", terms[k].name, terms[k].v, it > 0 ? 100 * terms[k].v / it : 0);
    if (b->dp_sync_s > 0)
        printf("DP sync overlapped with the backward (train's default): %.6f s exposed of %.6f s (%.0f%% hidden), "
               "%.6f s per iteration (the figures above: without overlap, --no-overlap-grad-sync)\n",
               e->dp_sync_exposed_s, b->dp_sync_s, 100 * (1 - e->dp_sync_exposed_s / b->dp_sync_s), e->iteration_overlap_s);
    if (p->n_opt_groups > 0 && b->dp_sync_s > 0)
        printf("  of which the sharded optimizer's all-gather, overlapped with the next forward: %.6f s exposed\n",
               e->dp_gather_exposed_s);
    char price[400];
    const ah_plan_price_t pr = ah_plan_price(p, ah_plan_priced_iteration_s(e, true)); /* train's default */
    printf("price: %s\n", ah_plan_price_str(&pr, price, sizeof price));
    printf("%s\n", ah_plan_traffic_str(&pr, price, sizeof price));
    printf("%s\n", ah_plan_ckpt_str(&pr, price, sizeof price));
    char crossings[1024];
    if (ah_plan_crossings_str(p, &pr.traffic, false, crossings, sizeof crossings)[0]) printf("%s\n", crossings);
    bottleneck_t bn;
    find_bottleneck(p, e, &bn);
    printf("bottleneck: pipeline %d, stage %d (%s): %s\n", bn.pipeline, bn.stage, bn.gpu, bn.reason);
    if (p->has_predicted) {
        printf("the plan file's own prediction: %.6f s per iteration (%+.2f%% from this evaluation)",
               p->predicted.iteration_s, it > 0 ? 100 * (p->predicted.iteration_s - it) / it : 0);
        const char *theirs = p->predicted_profile, *ours = profile_path ? profile_path : "";
        if (!same_file(theirs, ours))
            printf("; it timed layers with %s%s and this evaluation with %s%s%s", theirs[0] ? "profile " : "the roofline",
                   theirs, ours[0] ? "profile " : "the roofline", ours,
                   theirs[0] ? " (give --profile with that file to compare like with like)" : "");
        printf("\n");
    }
    printf("memory: %s\n", e->feasible ? "every device fits" : "some devices are over capacity (see OVER CAPACITY)");
}

/* Per node with ranks: the asynchronous checkpoints' snapshot bytes and the in-memory replicas'
 * (replica_gb a host; 0 without them) (ckpt/host_memory.h), and its host memory (null: not given,
 * not checked). */
static json_t *host_memory_json(const ah_plan_t *p, double replica_gb) {
    json_t *arr = json_array();
    int64_t *bytes = calloc((size_t)p->cluster.n_nodes + 1, sizeof *bytes), *rep = calloc((size_t)p->cluster.n_nodes + 1, sizeof *rep);
    ah_error_t err;
    if (bytes && rep && ah_snapshot_node_bytes(p, bytes, &err) == AH_OK &&
        (replica_gb <= 0 || ah_replica_node_bytes(p, replica_gb, rep, &err) == AH_OK))
        for (int n = 0; n < p->cluster.n_nodes; n++) {
            const double gib = p->cluster.nodes[n].host_memory_gib;
            if (bytes[n] == 0) continue;
            json_array_append_new(arr, json_pack("{s:s, s:I, s:I, s:o}", "node", p->cluster.nodes[n].name, "snapshot_bytes",
                                                 (json_int_t)bytes[n], "replica_bytes", (json_int_t)rep[n], "capacity_bytes",
                                                 gib > 0 ? json_integer((json_int_t)(gib * 1073741824.0)) : json_null()));
        }
    free(bytes);
    free(rep);
    return arr;
}

static int print_json(const ah_plan_t *p, const ah_eval_t *e, double replica_gb) {
    const ah_breakdown_t *b = &e->pred.breakdown;
    json_t *devs = json_array();
    for (int i = 0; i < e->n_devices; i++) {
        const ah_device_eval_t *d = &e->devices[i];
        json_array_append_new(devs, json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:I, s:I}", "node",
                                              p->cluster.nodes[d->node].name, "index", d->index,
                                              "pipeline", d->pipeline, "stage", d->stage, "tp_rank",
                                              d->tp_rank, "cp_rank", d->cp_rank, "memory_bytes", (json_int_t)d->memory_bytes,
                                              "capacity_bytes", (json_int_t)d->capacity_bytes));
    }
    json_t *pls = json_array();
    for (int i = 0; i < p->n_pipelines; i++) {
        json_t *stages = json_array();
        for (int s = 0; s < p->pipelines[i].n_stages; s++) {
            const ah_stage_eval_t *se = &e->pipelines[i].stages[s];
            json_t *sj = json_pack("{s:f, s:f, s:f, s:I, s:I}", "fwd_s", se->fwd_s, "bwd_s", se->bwd_s, "p2p_s",
                                   se->p2p_s, "memory_bytes", (json_int_t)se->memory_bytes, "inflight",
                                   (json_int_t)se->inflight);
            if (p->pipelines[i].schedule == AH_SCHED_ZERO_BUBBLE) json_object_set_new(sj, "wgrad_s", json_real(se->wgrad_s));
            json_array_append_new(stages, sj);
        }
        json_array_append_new(pls, json_pack("{s:f, s:s, s:i, s:o}", "time_s", e->pipelines[i].time_s, "schedule",
                                             ah_schedule_name(p->pipelines[i].schedule), "bottleneck_stage",
                                             e->pipelines[i].bottleneck_stage, "stages", stages));
    }
    bottleneck_t bn;
    find_bottleneck(p, e, &bn);
    json_t *doc = json_pack(
        "{s:f, s:f, s:b, s:I, s:o, s:{s:f, s:f, s:f, s:f, s:f, s:f}, s:{s:i, s:i, s:s, s:f, s:f, s:s}, s:o}",
        "iteration_s", e->pred.iteration_s, "tokens_per_s", e->pred.tokens_per_s, "feasible", e->feasible,
        "memory_bytes", (json_int_t)e->pred.memory_bytes, "devices", devs, "breakdown", "compute_s",
        b->compute_s, "bubble_s", b->bubble_s, "p2p_s", b->p2p_s, "tp_comm_s", b->tp_comm_s, "dp_sync_s",
        b->dp_sync_s, "optimizer_s", b->optimizer_s, "bottleneck", "pipeline", bn.pipeline, "stage",
        bn.stage, "gpu", bn.gpu, "stage_s", bn.stage_s, "tp_comm_share", bn.tp_share, "reason", bn.reason,
        "pipelines", pls);
    const ah_plan_price_t pr = ah_plan_price(p, ah_plan_priced_iteration_s(e, true)); /* train's default */
    ah_plan_price_json(&pr, doc);
    ah_plan_crossings_json(p, &pr.traffic, doc);
    json_object_set_new(doc, "dp_sync_exposed_s", json_real(e->dp_sync_exposed_s));
    json_object_set_new(doc, "dp_gather_exposed_s", json_real(e->dp_gather_exposed_s));
    json_object_set_new(json_object_get(doc, "breakdown"), "cp_comm_s", json_real(b->cp_comm_s));
    json_object_set_new(json_object_get(doc, "breakdown"), "ckpt_s", json_real(b->ckpt_s));
    json_object_set_new(doc, "iteration_overlap_s", json_real(e->iteration_overlap_s));
    json_object_set_new(doc, "host_memory", host_memory_json(p, replica_gb));
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    fputc('\n', stdout);
    json_decref(doc);
    return rc == 0 ? 0 : 1;
}

void ah_cli_profile_note(const char *verb, const char *path, const ah_profile_t *profile, const ah_plan_t *plan) {
    char missing[512];
    const int n = ah_profile_missing_types(profile, plan, missing, sizeof missing);
    if (n == 0) return;
    fprintf(stderr, "autohet %s: note: %s has no entry for %s at TP %d, micro-batch %lld, seq-len %lld, %s; "
            "the roofline times %s (autohet profile can measure those settings)\n", verb, path, missing, plan->tp,
            (long long)plan->train.micro_batch, (long long)plan->train.seq_len,
            ah_precision_name(plan->train.precision), n > 1 ? "them" : "it");
}

void ah_cli_precision_note(const char *verb, const ah_plan_t *plan) {
    if (plan->train.precision == AH_PREC_FP32) return;
    for (int p = 0; p < plan->n_pipelines; p++)
        for (int i = 0; i < plan->pipelines[p].n_stages; i++) {
            const ah_gpu_type_t *t = &plan->cluster.types[plan->pipelines[p].stages[i].type];
            if (!ah_device_type_is_cpu(t)) continue;
            fprintf(stderr, "autohet %s: note: the plan trains %s, but its device type %s runs on the CPU "
                    "backend, which trains fp32 only: autohet train will refuse it (use --precision fp32)\n", verb,
                    ah_precision_name(plan->train.precision), t->name);
            return;
        }
}

/* bytes[n]: what node n keeps in host memory with asynchronous saves and replica_gb of replicas
 * (ckpt/host_memory.h); all 0 when it cannot be sized. */
static void host_memory_node_bytes(const ah_plan_t *plan, double replica_gb, int64_t *bytes) {
    const int n_nodes = plan->cluster.n_nodes;
    int64_t *rep = calloc((size_t)n_nodes + 1, sizeof *rep);
    ah_error_t err;
    if (!rep || ah_snapshot_node_bytes(plan, bytes, &err) != AH_OK ||
        (replica_gb > 0 && ah_replica_node_bytes(plan, replica_gb, rep, &err) != AH_OK))
        memset(bytes, 0, (size_t)n_nodes * sizeof *bytes);
    for (int n = 0; rep && n < n_nodes; n++) bytes[n] += rep[n];
    free(rep);
}

int ah_cli_host_memory(const char *verb, const ah_plan_t *plan, double replica_gb, bool note) {
    ah_error_t err;
    int unchecked = 0;
    if (ah_host_memory_check(plan, true, replica_gb, &unchecked, &err) != AH_OK) return ah_cli_fail(verb, &err);
    if (note && unchecked > 0) {
        enum { NAMES_SHOWN = 4 }; /* whole names, then "and N more" */
        char names[NAMES_SHOWN * (sizeof plan->cluster.nodes[0].name + 2) + 32] = "", more[48] = "";
        size_t at = 0;
        int shown = 0;
        int64_t *bytes = calloc((size_t)plan->cluster.n_nodes + 1, sizeof *bytes), most = 0;
        if (bytes) host_memory_node_bytes(plan, replica_gb, bytes);
        for (int n = 0; bytes && n < plan->cluster.n_nodes; n++) {
            if (bytes[n] == 0 || plan->cluster.nodes[n].host_memory_gib > 0) continue;
            if (bytes[n] > most) most = bytes[n];
            if (shown++ < NAMES_SHOWN)
                at += (size_t)snprintf(names + at, sizeof names - at, "%s%s", at ? ", " : "", plan->cluster.nodes[n].name);
        }
        free(bytes);
        if (shown > NAMES_SHOWN) snprintf(more, sizeof more, " and %d more", shown - NAMES_SHOWN);
        fprintf(stderr, "autohet %s: note: host memory not checked on %d node%s (%s%s): the cluster file gives no "
                "\"host_memory_gib\"; asynchronous checkpoints%s keep up to %.3f GiB on one of them "
                "(train --ckpt-sync keeps no snapshot)\n", verb, unchecked, unchecked == 1 ? "" : "s", names, more,
                replica_gb > 0 ? " and in-memory replicas" : "", (double)most / 1073741824.0);
    }
    return 0;
}

int ah_cli_ckpt_policy(const char *verb, const ah_cluster_t *c, int64_t every, double replica_gb, const char *cloud,
                       const char *cloud_region, ah_ckpt_policy_t *out) {
    *out = (ah_ckpt_policy_t){.every = every, .replica_gb = replica_gb};
    if (cloud_region && !cloud) {
        fprintf(stderr, "autohet %s: --cloud-region needs --cloud s3://BUCKET/PREFIX (the tier whose bucket it places)\n",
                verb);
        return 2;
    }
    if (!cloud) return 0;
    ah_s3_url_t url;
    ah_error_t err = {0};
    if (ah_s3_url_parse(cloud, &url, &err) != AH_OK) {
        fprintf(stderr, "autohet %s: --cloud: %s\n", verb, err.msg);
        return 2;
    }
    const char *region = cloud_region ? cloud_region : ah_s3_env_region();
    int named = -1;
    for (int n = 0; n < c->n_nodes && named < 0; n++)
        if (strcmp(c->nodes[n].region, region) == 0) named = n;
    if (named < 0 && cloud_region) {
        char regions[512] = "";
        ah_str_t list = ah_str_fixed(regions, sizeof regions);
        for (int n = 0; n < c->n_nodes; n++) { /* each region once, at its first node */
            int k = 0;
            while (k < n && strcmp(c->nodes[k].region, c->nodes[n].region) != 0) k++;
            if (k == n) ah_str_appendf(&list, "%s%s", list.len ? ", " : "", c->nodes[n].region);
        }
        fprintf(stderr, "autohet %s: --cloud-region %s: none of the cluster's regions (%s)\n", verb, cloud_region, regions);
        return 2;
    }
    if (named < 0 && ah_cluster_region_count(c) > 1) {
        fprintf(stderr, "autohet %s: --cloud %s: the bucket's region %s (AWS_REGION, else AWS_DEFAULT_REGION, else "
                "us-east-1, as train signs its requests) is none of the cluster's regions; give the bucket's region, one "
                "of the cluster's (its nodes' \"region\"), with --cloud-region R or AWS_REGION\n", verb, cloud, region);
        return 2;
    }
    /* One region: a bucket named elsewhere (AWS_REGION or AWS_DEFAULT_REGION, on a cluster whose region is
     * named) is outside the cluster, its uploads priced across a region (plan_links.c); else the bucket is
     * taken to be in the cluster's region (until session 17 always, whatever AWS_REGION said) */
    const bool elsewhere = named < 0 && ah_s3_env_region_given() && strcmp(c->nodes[0].region, "default") != 0;
    snprintf(out->cloud_region, sizeof out->cloud_region, "%s",
             elsewhere ? region : c->nodes[named < 0 ? 0 : named].region);
    return 0;
}

/* Loads, validates and scores; the table is printed even for an infeasible plan so the user
 * sees which device is over, then the memory rule's message and a non-zero exit. */
/* The checkpoint flags as given (ah_cli_ckpt_policy). */
typedef struct ckpt_flags {
    int64_t every;
    double replica_gb;
    const char *cloud, *cloud_region;
} ckpt_flags_t;

static int evaluate(const char *plan_path, const char *cluster_arg, const char *profile_path, bool json,
                    const ckpt_flags_t *ck, const char *shard, const char *dp_sync, const char *out_path,
                    const char *svg_path) {
    const double replica_gb = ck->replica_gb;
    ah_error_t err;
    ah_cluster_t override;
    ah_profile_t *profile = NULL;
    ah_plan_t plan;
    ah_eval_t ev;
    bool have_override = false, have_plan = false, have_eval = false;
    int rc = 0;
    memset(&plan, 0, sizeof plan);
    memset(&ev, 0, sizeof ev);
    if (cluster_arg) {
        if (ah_cluster_open(cluster_arg, &override, &err) != AH_OK) goto fail;
        have_override = true;
    }
    if (profile_path && ah_profile_load(profile_path, &profile, &err) != AH_OK) goto fail;
    if (ah_plan_load(plan_path, have_override ? &override : NULL, &plan, &err) != AH_OK) goto fail;
    have_plan = true;
    if (ah_plan_validate(&plan, &err) != AH_OK) {
        ah_error_prefix(&err, "%s", plan_path);
        goto fail;
    }
    if ((rc = ah_cli_ckpt_policy("evaluate", &plan.cluster, ck->every, ck->replica_gb, ck->cloud, ck->cloud_region,
                                 &plan.train.ckpt)))
        goto done;
    /* --shard-optimizer: none drops the plan's shards; even splits every group with more than one
     * member in equal parts (a valid plan stays valid) */
    if (shard && strcmp(shard, "none") == 0) {
        for (int k = 0; k < plan.n_opt_groups; k++) free(plan.opt_groups[k].shares);
        free(plan.opt_groups);
        plan.opt_groups = NULL;
        plan.n_opt_groups = 0;
    } else if (shard && (strcmp(shard, "even") != 0 || ah_plan_shard_all(&plan, NULL, NULL, &err) != AH_OK)) {
        if (strcmp(shard, "even") != 0) ah_error_set(&err, AH_ERR_USAGE, "--shard-optimizer: none or even, not \"%s\"", shard);
        goto fail;
    }
    if (dp_sync && strcmp(dp_sync, "ring") == 0) plan.dp_sync = AH_DP_SYNC_RING;
    else if (dp_sync && strcmp(dp_sync, "hierarchical") == 0) plan.dp_sync = AH_DP_SYNC_HIERARCHICAL;
    else if (dp_sync) {
        ah_error_set(&err, AH_ERR_USAGE, "--dp-sync: ring or hierarchical, not \"%s\"", dp_sync);
        goto fail;
    }
    if (profile) ah_cli_profile_note("evaluate", profile_path, profile, &plan);
    ah_cli_precision_note("evaluate", &plan);
    if (ah_evaluate(&plan, profile, &ev, &err) != AH_OK) goto fail; /* what it cannot price, first */
    have_eval = true;
    if ((rc = ah_cli_host_memory("evaluate", &plan, replica_gb, false)) != 0) goto done;
    rc = json ? print_json(&plan, &ev, replica_gb) : (print_human(plan_path, profile_path, &plan, &ev), 0);
    if (out_path) {
        plan.has_predicted = true;
        plan.predicted = ev.pred;
        snprintf(plan.predicted_profile, sizeof plan.predicted_profile, "%s", profile_path ? profile_path : "");
        if (ah_plan_save(&plan, out_path, &err) != AH_OK) goto fail;
    }
    if (svg_path && ah_plan_svg_write(&plan, &ev, svg_path, &err) != AH_OK) goto fail;
    if (!ev.feasible) {
        if (ah_plan_check(&plan, profile, &err) == AH_OK)
            ah_error_set(&err, AH_ERR_INTERNAL, "evaluate found a device over capacity but ah_plan_check did not");
        else
            ah_error_prefix(&err, "%s", plan_path);
        goto fail;
    }
    goto done;
fail:
    rc = ah_cli_fail("evaluate", &err);
done:
    if (have_eval) ah_eval_free(&ev);
    if (have_plan) ah_plan_free(&plan);
    if (have_override) ah_cluster_free(&override);
    ah_profile_free(profile);
    return rc;
}

int ah_cli_evaluate(int argc, char **argv) {
    const char *plan_path = NULL, *cluster = NULL, *profile = NULL, *shard = NULL, *dp_sync = NULL, *out_path = NULL,
               *svg = NULL;
    bool json = false;
    ckpt_flags_t ck = {0};
    ah_flag_t flags[] = {
        {"--plan", AH_FLAG_STR, &plan_path, "FILE", "plan.json to score (required)", false},
        {"--cluster", AH_FLAG_STR, &cluster, "C", "cluster JSON or built-in name; replaces the plan's own (default: the plan's)", false},
        ah_cli_shared_flag("--profile", &profile),
        ah_cli_shared_flag_as("--replica-memory-gb", &ck.replica_gb,
                              "check each node's host_memory_gib against its asynchronous snapshots plus in-memory "
                              "replicas of at most G GB a host, as train --replica-memory-gb G does, and with "
                              "--ckpt-every count their replication to the partners (default 0: snapshots only; "
                              "docs/checkpoints.md)"),
        ah_cli_shared_flag_as("--ckpt-every", &ck.every,
                              "count the checkpoints' traffic and egress of a save every K steps, as train "
                              "--ckpt-every K saves (default 0: not counted, said; docs/cost-model.md \"Checkpoint "
                              "traffic\")"),
        ah_cli_shared_flag_as("--cloud", &ck.cloud,
                              "with --ckpt-every, count each save's upload to this bucket, as train --cloud uploads "
                              "(the bucket's region: --cloud-region, else AWS_REGION, else AWS_DEFAULT_REGION, else us-east-1)"),
        ah_cli_shared_flag("--cloud-region", &ck.cloud_region),
        {"--json", AH_FLAG_BOOL, &json, NULL, "print JSON: {\"iteration_s\", \"tokens_per_s\", \"feasible\", \"usd_per_hour\", \"usd_per_mtoken\", \"unpriced\", \"devices\", \"breakdown\", \"bottleneck\", ...}", false},
        {"--shard-optimizer", AH_FLAG_STR, &shard, "none|even",
         "score the plan with its optimizer state unsharded (none) or split evenly over every data-parallel group (even) instead of its own optimizer_shards", false},
        {"--dp-sync", AH_FLAG_STR, &dp_sync, "ring|hierarchical",
         "score the plan with the flat ring or the hierarchical DP sync (plan.json \"dp_sync\") instead of its own", false},
        {"-o", AH_FLAG_STR, &out_path, "plan.json", "write the plan as scored (its shards, DP sync and prediction)", false},
        {"--svg", AH_FLAG_STR, &svg, "FILE", "draw the plan and one iteration of each pipeline's schedule (as plan --svg)", false},
    };
    int rc;
    if (!ah_cli_parse("evaluate", USAGE, ABOUT, flags, (int)(sizeof flags / sizeof flags[0]), argc, argv, &rc))
        return rc;
    if (!plan_path) {
        ah_error_t err;
        ah_error_set(&err, AH_ERR_USAGE, "--plan FILE is required (autohet evaluate --help)");
        return ah_cli_fail("evaluate", &err);
    }
    return evaluate(plan_path, cluster, profile, json, &ck, shard, dp_sync, out_path, svg);
}
