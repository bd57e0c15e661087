/* Plan file reading and writing (plan.json, version 1; DESIGN.md "The plan").
 *
 * The reader checks structure and types, and resolves names (nodes, GPU types) to indices. The
 * structural rules that a planner-built plan could also break (layer coverage, batch sums, TP
 * groups, duplicate devices) are left to ah_plan_validate, so one code path checks them for
 * every plan. Two rules are checked here because the in-memory form cannot even hold a plan
 * breaking them: the version (ah_plan_t has no version field) and "every stage has exactly tp x cp
 * devices" (a stage stores exactly that many, cp within 1 .. AH_MAX_CP). Integers are read with loose ranges so
 * that the validator, not the reader, reports e.g. "micro_batches": 0 under its rule name.
 * "cluster" is the cluster object (ah_cluster_to_json's form, or the compact form with catalog
 * types) or, in a hand-written plan, the name of a built-in cluster ("mixed-32"). "model" is the
 * model object, a preset name, or, as --model takes, a Hugging Face config.json path (relative to
 * the plan file's directory); the writer always writes the object. Optional
 * fields: a stage's "recompute" (default false), "warmup_extra" (default 0, written only when not 0) and "predicted" (has_predicted says whether it
 * was there; its "profile" names the autohet profile file it timed layers with, absent for the
 * roofline), a pipeline's "schedule" (1f1b, interleaved, zero-bubble; absent means 1f1b) and its
 * "cp" (context-parallel degree, absent means 1); the writer always writes "recompute", "schedule"
 * only when it is not 1f1b, "cp" only when it is not 1, and "predicted" when the plan has one, so
 * save -> load -> save is byte-identical (and plans written before schedules or CP existed are
 * written back as they were).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/names.h"
#include "core/str.h"
#include "plan/plan.h"

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)

/* Wide enough for any real plan, small enough that sums and products cannot overflow int64
 * (LOOSE_MAX) or int (LOOSE_INT, for fields stored as int). */
#define LOOSE_MAX ((int64_t)1 << 40)
#define LOOSE_INT ((int64_t)1 << 30)

/* "fast-0..fast-3, slow-0" (nodes, as runs: core/names.h) or "cpu-fast, cpu-slow" (types) for
 * messages: the cluster's names, or "none"; into buf, which it returns. */
static const char *cluster_names(const ah_cluster_t *c, bool nodes, char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    const int n = nodes ? c->n_nodes : c->n_types;
    const char **names = malloc(sizeof *names * (size_t)(n > 0 ? n : 1));
    if (!names || n == 0) ah_str_appendf(&s, n ? "%d names" : "none", n);
    for (int i = 0; names && i < n; i++) names[i] = nodes ? c->nodes[i].name : c->types[i].name;
    if (names && n) ah_names_append(&s, names, n, ", ", 12);
    free(names);
    return buf;
}

static ah_status_t read_train(const json_t *doc, const char *where, ah_train_t *tr, ah_error_t *err) {
    json_t *o = NULL;
    char w[512];
    TRY(ah_json_get_typed(doc, where, "train", JSON_OBJECT, true, &o, err));
    snprintf(w, sizeof w, "%s: train", where);
    static const char *const keys[] = {"global_batch", "seq_len", "micro_batch", "precision", NULL};
    TRY(ah_json_check_keys(o, w, keys, err));
    TRY(ah_json_get_int(o, w, "global_batch", true, -LOOSE_MAX, LOOSE_MAX, &tr->global_batch, err));
    TRY(ah_json_get_int(o, w, "seq_len", true, -LOOSE_MAX, LOOSE_MAX, &tr->seq_len, err));
    TRY(ah_json_get_int(o, w, "micro_batch", true, -LOOSE_MAX, LOOSE_MAX, &tr->micro_batch, err));
    char prec[32];
    TRY(ah_json_get_str(o, w, "precision", true, prec, sizeof prec, err));
    if (!ah_precision_parse(prec, &tr->precision))
        return ah_error_set(err, AH_ERR_INVALID,
                            "[train] %s.precision: unknown precision \"%s\" (allowed: " AH_PRECISION_VALUES ")",
                            w, prec);
    return AH_OK;
}

static ah_status_t read_device(const json_t *d, const char *w, const ah_cluster_t *c,
                               ah_device_ref_t *ref, ah_error_t *err) {
    if (!json_is_object(d))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected an object {\"node\", \"index\"}, got %s",
                            w, ah_json_type_name(d));
    static const char *const keys[] = {"node", "index", NULL};
    TRY(ah_json_check_keys(d, w, keys, err));
    char node[AH_NAME_MAX];
    TRY(ah_json_get_str(d, w, "node", true, node, sizeof node, err));
    char list[1024];
    if ((ref->node = ah_cluster_find_node(c, node)) < 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.node: unknown node \"%s\" (nodes: %s); use a node of the "
                            "plan's cluster, or pass the cluster it was made for with --cluster",
                            w, node, cluster_names(c, true, list, sizeof list));
    int64_t index;
    TRY(ah_json_get_int(d, w, "index", true, 0, LOOSE_INT, &index, err));
    ref->index = (int)index;
    return AH_OK;
}

static ah_status_t read_stage(const json_t *st, const char *w, int tp, int cp, const ah_cluster_t *c,
                              ah_stage_t *s, ah_error_t *err) {
    if (!json_is_object(st))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected a stage object, got %s", w,
                            ah_json_type_name(st));
    static const char *const keys[] = {"layers", "gpu", "recompute", "warmup_extra", "devices", NULL};
    TRY(ah_json_check_keys(st, w, keys, err));

    json_t *layers = NULL;
    TRY(ah_json_get_typed(st, w, "layers", JSON_ARRAY, true, &layers, err));
    if (json_array_size(layers) != 2)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.layers: expected [first, last), two integers (blocks first .. last-1), "
                            "got an array of %zu elements",
                            w, json_array_size(layers));
    int64_t fl[2];
    for (size_t k = 0; k < 2; k++) {
        json_t *v = json_array_get(layers, k);
        if (!json_is_integer(v) || json_integer_value(v) < -LOOSE_INT || json_integer_value(v) > LOOSE_INT)
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s.layers[%zu]: expected a block number (an integer), got %s", w, k,
                                json_is_integer(v) ? "an integer out of range" : ah_json_type_name(v));
        fl[k] = json_integer_value(v);
    }
    s->first = (int)fl[0];
    s->last = (int)fl[1];

    char gpu[AH_NAME_MAX];
    TRY(ah_json_get_str(st, w, "gpu", true, gpu, sizeof gpu, err));
    char list[1024];
    if ((s->type = ah_cluster_find_type(c, gpu)) < 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.gpu: unknown GPU type \"%s\" (the cluster's types: %s)", w,
                            gpu, cluster_names(c, false, list, sizeof list));
    s->recompute = false;
    TRY(ah_json_get_bool(st, w, "recompute", false, &s->recompute, err));
    int64_t extra = 0;
    TRY(ah_json_get_int(st, w, "warmup_extra", false, -LOOSE_INT, LOOSE_INT, &extra, err));
    s->warmup_extra = (int)extra;

    json_t *devs = NULL;
    TRY(ah_json_get_typed(st, w, "devices", JSON_ARRAY, true, &devs, err));
    if (cp > 1 && json_array_size(devs) != (size_t)(tp * cp))
        return ah_error_set(err, AH_ERR_INVALID,
                            "[cp] %s.devices: %zu devices, but the plan's tp is %d and the pipeline's cp %d; "
                            "every stage lists tp x cp = %d devices, cp-major (device k is CP rank k / tp, "
                            "TP rank k mod tp)",
                            w, json_array_size(devs), tp, cp, tp * cp);
    if (cp == 1 && json_array_size(devs) != (size_t)tp)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[tp] %s.devices: %zu devices, but the plan's tp is %d; every stage's TP "
                            "group has exactly tp devices",
                            w, json_array_size(devs), tp);
    for (int r = 0; r < tp * cp; r++) {
        char dw[600];
        snprintf(dw, sizeof dw, "%s.devices[%d]", w, r);
        TRY(read_device(json_array_get(devs, (size_t)r), dw, c, &s->devices[r], err));
    }
    return AH_OK;
}

static ah_status_t read_pipelines(const json_t *doc, const char *where, ah_plan_t *p, ah_error_t *err) {
    json_t *arr = NULL;
    TRY(ah_json_get_typed(doc, where, "pipelines", JSON_ARRAY, true, &arr, err));
    size_t n = json_array_size(arr);
    if (n > 0) {
        p->pipelines = calloc(n, sizeof *p->pipelines);
        if (!p->pipelines)
            return ah_error_set(err, AH_ERR_OOM, "out of host memory for %zu pipelines", n);
        p->n_pipelines = (int)n;
    }
    for (size_t i = 0; i < n; i++) {
        char w[512];
        snprintf(w, sizeof w, "%s: pipelines[%zu]", where, i);
        const json_t *pj = json_array_get(arr, i);
        if (!json_is_object(pj))
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: expected an object {\"micro_batches\", \"stages\"}, got %s", w,
                                ah_json_type_name(pj));
        static const char *const keys[] = {"micro_batches", "schedule", "cp", "stages", NULL};
        TRY(ah_json_check_keys(pj, w, keys, err));
        ah_pipeline_t *pl = &p->pipelines[i];
        TRY(ah_json_get_int(pj, w, "micro_batches", true, -LOOSE_MAX, LOOSE_MAX, &pl->micro_batches, err));
        char sched[32] = "1f1b";
        TRY(ah_json_get_str(pj, w, "schedule", false, sched, sizeof sched, err));
        if (!ah_schedule_parse(sched, &pl->schedule))
            return ah_error_set(err, AH_ERR_INVALID, "[schedule] %s.schedule: unknown schedule \"%s\" (allowed: "
                                AH_SCHEDULE_VALUES "; absent means 1f1b)", w, sched);
        int64_t cp = 1;
        TRY(ah_json_get_int(pj, w, "cp", false, -LOOSE_MAX, LOOSE_MAX, &cp, err));
        if (cp < 1 || cp > AH_MAX_CP)
            return ah_error_set(err, AH_ERR_INVALID, "[cp] %s.cp: expected a context-parallel degree, a power of "
                                "two in [1, %d], got %lld (absent means 1)", w, AH_MAX_CP, (long long)cp);
        json_t *stages = NULL;
        TRY(ah_json_get_typed(pj, w, "stages", JSON_ARRAY, true, &stages, err));
        if (json_array_size(stages) == 0)
            return ah_error_set(err, AH_ERR_INVALID,
                                "[layers] %s.stages: empty; a pipeline needs at least one stage "
                                "holding all %lld layers",
                                w, (long long)p->model.n_layer);
        TRY(ah_pipeline_alloc(pl, (int)json_array_size(stages), err));
        pl->cp = (int)cp;
        for (int s = 0; s < pl->n_stages; s++) {
            char sw[560];
            snprintf(sw, sizeof sw, "%s.stages[%d]", w, s);
            TRY(read_stage(json_array_get(stages, (size_t)s), sw, p->tp, pl->cp, &p->cluster, &pl->stages[s], err));
        }
    }
    return AH_OK;
}

static const char *const SHARD_KINDS[] = {"blocks", "embedding", "head", "tied"};

/* One "optimizer_shards" entry: {"group", "layers" (blocks only), "tp_rank", "shares": [{"node",
 * "index", "elements": [begin, end)}]}. The rules are ah_plan_check_shards'. */
static ah_status_t read_shard_group(const json_t *gj, const char *w, const ah_cluster_t *c, ah_opt_group_t *g,
                                    ah_error_t *err) {
    if (!json_is_object(gj))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected an object {\"group\", \"tp_rank\", \"shares\"}, got %s", w,
                            ah_json_type_name(gj));
    static const char *const keys[] = {"group", "layers", "tp_rank", "shares", NULL};
    TRY(ah_json_check_keys(gj, w, keys, err));
    char kind[32];
    TRY(ah_json_get_str(gj, w, "group", true, kind, sizeof kind, err));
    int k = 0;
    while (k < 4 && strcmp(kind, SHARD_KINDS[k]) != 0) k++;
    if (k == 4)
        return ah_error_set(err, AH_ERR_INVALID, "%s.group: unknown group \"%s\" (blocks, embedding, head, tied)", w, kind);
    g->kind = (ah_opt_kind_t)k;
    json_t *layers = json_object_get(gj, "layers");
    if ((layers != NULL) != (g->kind == AH_OPT_BLOCKS))
        return ah_error_set(err, AH_ERR_INVALID, "%s.layers: %s", w,
                            layers ? "only a \"blocks\" group has layers" : "a \"blocks\" group needs its segment's [first, last)");
    if (layers) {
        if (!json_is_array(layers) || json_array_size(layers) != 2 || !json_is_integer(json_array_get(layers, 0)) ||
            !json_is_integer(json_array_get(layers, 1)))
            return ah_error_set(err, AH_ERR_INVALID, "%s.layers: expected [first, last), two block numbers", w);
        const json_int_t a = json_integer_value(json_array_get(layers, 0)), b = json_integer_value(json_array_get(layers, 1));
        if (a < -LOOSE_INT || a > LOOSE_INT || b < -LOOSE_INT || b > LOOSE_INT)
            return ah_error_set(err, AH_ERR_INVALID, "%s.layers: a block number out of range", w);
        g->first = (int)a;
        g->last = (int)b;
    }
    int64_t tp_rank;
    TRY(ah_json_get_int(gj, w, "tp_rank", true, -LOOSE_INT, LOOSE_INT, &tp_rank, err));
    g->tp_rank = (int)tp_rank;
    json_t *shares = NULL;
    TRY(ah_json_get_typed(gj, w, "shares", JSON_ARRAY, true, &shares, err));
    const size_t n = json_array_size(shares);
    if (!(g->shares = calloc(n + 1, sizeof *g->shares)))
        return ah_error_set(err, AH_ERR_OOM, "out of host memory for %zu optimizer shares", n);
    for (size_t i = 0; i < n; i++) {
        char sw[600];
        snprintf(sw, sizeof sw, "%s.shares[%zu]", w, i);
        json_t *sj = json_array_get(shares, i);
        json_t *el = json_is_object(sj) ? json_object_get(sj, "elements") : NULL;
        if (!el || !json_is_array(el) || json_array_size(el) != 2 || !json_is_integer(json_array_get(el, 0)) ||
            !json_is_integer(json_array_get(el, 1)))
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: expected {\"node\", \"index\", \"elements\": [begin, end)}, two integers", sw);
        g->shares[i].begin = json_integer_value(json_array_get(el, 0));
        g->shares[i].end = json_integer_value(json_array_get(el, 1));
        json_t *dev = json_deep_copy(sj);
        json_object_del(dev, "elements");
        const ah_status_t s = read_device(dev, sw, c, &g->shares[i].dev, err);
        json_decref(dev);
        TRY(s);
        g->n_shares++;
    }
    return AH_OK;
}

static ah_status_t read_shards(const json_t *doc, const char *where, ah_plan_t *p, ah_error_t *err) {
    json_t *arr = NULL;
    TRY(ah_json_get_typed(doc, where, "optimizer_shards", JSON_ARRAY, false, &arr, err));
    const size_t n = arr ? json_array_size(arr) : 0;
    if (n == 0) return AH_OK;
    if (!(p->opt_groups = calloc(n, sizeof *p->opt_groups)))
        return ah_error_set(err, AH_ERR_OOM, "out of host memory for %zu optimizer groups", n);
    for (size_t k = 0; k < n; k++) {
        char w[512];
        snprintf(w, sizeof w, "%s: optimizer_shards[%zu]", where, k);
        p->n_opt_groups++;
        TRY(read_shard_group(json_array_get(arr, k), w, &p->cluster, &p->opt_groups[k], err));
    }
    return AH_OK;
}

static json_t *shards_to_json(const ah_plan_t *p) {
    json_t *arr = json_array();
    for (int k = 0; k < p->n_opt_groups; k++) {
        const ah_opt_group_t *g = &p->opt_groups[k];
        json_t *shares = json_array();
        for (int i = 0; i < g->n_shares; i++) {
            const ah_opt_share_t *sh = &g->shares[i];
            json_array_append_new(shares, json_pack("{s:s, s:i, s:[I,I]}", "node", p->cluster.nodes[sh->dev.node].name,
                                                    "index", sh->dev.index, "elements", (json_int_t)sh->begin,
                                                    (json_int_t)sh->end));
        }
        json_t *gj = json_pack("{s:s}", "group", SHARD_KINDS[g->kind]);
        if (g->kind == AH_OPT_BLOCKS) json_object_set_new(gj, "layers", json_pack("[i,i]", g->first, g->last));
        json_object_set_new(gj, "tp_rank", json_integer(g->tp_rank));
        json_object_set_new(gj, "shares", shares);
        json_array_append_new(arr, gj);
    }
    return arr;
}

static ah_status_t read_predicted(const json_t *doc, const char *where, ah_plan_t *p, ah_error_t *err) {
    json_t *o = NULL;
    TRY(ah_json_get_typed(doc, where, "predicted", JSON_OBJECT, false, &o, err));
    if (!o) return AH_OK;
    char w[512], bw[560];
    snprintf(w, sizeof w, "%s: predicted", where);
    static const char *const keys[] = {"iteration_s", "tokens_per_s", "memory_bytes", "breakdown", "profile", NULL};
    TRY(ah_json_check_keys(o, w, keys, err));
    ah_prediction_t *pr = &p->predicted;
    TRY(ah_json_get_num(o, w, "iteration_s", true, 0, 1e300, &pr->iteration_s, err));
    TRY(ah_json_get_num(o, w, "tokens_per_s", true, 0, 1e300, &pr->tokens_per_s, err));
    TRY(ah_json_get_int(o, w, "memory_bytes", true, 0, INT64_MAX, &pr->memory_bytes, err));
    TRY(ah_json_get_str(o, w, "profile", false, p->predicted_profile, sizeof p->predicted_profile, err));
    json_t *b = NULL;
    TRY(ah_json_get_typed(o, w, "breakdown", JSON_OBJECT, true, &b, err));
    snprintf(bw, sizeof bw, "%s.breakdown", w);
    static const char *const bkeys[] = {"compute_s", "bubble_s", "p2p_s", "tp_comm_s",
                                        "dp_sync_s", "optimizer_s", "cp_comm_s", NULL};
    TRY(ah_json_check_keys(b, bw, bkeys, err));
    double *fields[] = {&pr->breakdown.compute_s, &pr->breakdown.bubble_s, &pr->breakdown.p2p_s,
                        &pr->breakdown.tp_comm_s, &pr->breakdown.dp_sync_s, &pr->breakdown.optimizer_s,
                        &pr->breakdown.cp_comm_s};
    for (int k = 0; bkeys[k]; k++) /* cp_comm_s: only in plans with context parallelism */
        TRY(ah_json_get_num(b, bw, bkeys[k], fields[k] != &pr->breakdown.cp_comm_s, 0, 1e300, fields[k], err));
    p->has_predicted = true;
    return AH_OK;
}

static ah_status_t read_cluster(const json_t *doc, const char *where,
                                const ah_cluster_t *cluster_override, ah_plan_t *p, ah_error_t *err) {
    if (cluster_override) return ah_cluster_copy(cluster_override, &p->cluster, err);
    const json_t *name = json_object_get(doc, "cluster");
    /* A hand-written plan may name a built-in cluster; plans autohet writes embed it in full. */
    if (json_is_string(name)) {
        ah_status_t s = ah_cluster_builtin(json_string_value(name), &p->cluster, err);
        if (s != AH_OK) ah_error_prefix(err, "%s: cluster", where);
        return s;
    }
    json_t *c = NULL;
    TRY(ah_json_get_typed(doc, where, "cluster", JSON_OBJECT, false, &c, err));
    if (!c)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: the plan has no \"cluster\" to say which nodes its devices are on; "
                            "pass --cluster FILE (or a built-in name such as mixed-32)",
                            where);
    char w[512];
    snprintf(w, sizeof w, "%s: cluster", where);
    return ah_cluster_from_json(c, w, &p->cluster, err);
}

/* "model": a preset name, a model object, or (a string with a '/' or ending in .json) a Hugging
 * Face config.json, as --model takes; a relative path is taken from the plan file's directory
 * (plan_path's; the working directory when it has none). A plan that is not a file (plan_path
 * NULL) reads no other file: a path is refused there. */
static ah_status_t read_model(const json_t *mj, const char *where, const char *plan_path, ah_model_t *m,
                              ah_error_t *err) {
    char w[512];
    snprintf(w, sizeof w, "%s: model", where);
    const char *name = json_string_value(mj);
    if (!name || (!strchr(name, '/') && !strstr(name, ".json"))) {
        const ah_status_t s = ah_model_from_json(mj, w, m, err);
        if (s != AH_OK && name) ah_error_prefix(err, "%s", w); /* a preset's error does not say where */
        return s;
    }
    if (!plan_path)
        return ah_error_set(err, AH_ERR_INVALID, "%s: \"%s\" names a config.json, which only a plan file may do "
                            "(its path is taken from the file's directory); give a preset or the model object",
                            w, name);
    const char *slash = strrchr(plan_path, '/');
    char path[4096];
    if (name[0] == '/' || !slash) snprintf(path, sizeof path, "%s", name);
    else snprintf(path, sizeof path, "%.*s/%s", (int)(slash - plan_path), plan_path, name);
    const ah_status_t s = ah_model_from_hf_config(path, m, err);
    if (s != AH_OK) ah_error_prefix(err, "%s \"%s\" (a config.json path is taken from the plan's directory)", w, name);
    return s;
}

/* Optional string field key of doc, one of names[0 .. n - 1] (absent: names[0]): its index in *out;
 * otherwise an error naming what it is and the allowed values. */
static ah_status_t read_choice(const json_t *doc, const char *where, const char *key, const char *const *names, int n,
                               const char *what, const char *allowed, int *out, ah_error_t *err) {
    char value[32];
    snprintf(value, sizeof value, "%s", names[0]);
    TRY(ah_json_get_str(doc, where, key, false, value, sizeof value, err));
    for (*out = 0; *out < n; ++*out)
        if (strcmp(value, names[*out]) == 0) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "[%s] %s: %s: unknown %s \"%s\" (allowed: %s; absent means %s)", key, where,
                        key, what, value, allowed, names[0]);
}

static ah_status_t from_json(const json_t *doc, const char *where, const char *plan_path,
                             const ah_cluster_t *cluster_override, ah_plan_t *p, ah_error_t *err) {
    if (!json_is_object(doc))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected a plan object, got %s", where,
                            ah_json_type_name(doc));
    static const char *const keys[] = {"version", "model", "train", "tp", "dp_sync", "p2p", "pipelines",
                                       "optimizer_shards", "predicted", "cluster", NULL};
    TRY(ah_json_check_keys(doc, where, keys, err));
    int64_t version;
    if (!json_object_get(doc, "version"))
        return ah_error_set(err, AH_ERR_INVALID, "%s: missing field \"version\" (this autohet reads plan version %d; "
                            "`autohet plan` writes it)", where, AH_PLAN_VERSION);
    TRY(ah_json_get_int(doc, where, "version", true, -LOOSE_MAX, LOOSE_MAX, &version, err));
    if (version != AH_PLAN_VERSION)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[version] %s: version: this autohet reads plan version %d, got %lld; "
                            "make the plan again with `autohet plan`",
                            where, AH_PLAN_VERSION, (long long)version);
    const json_t *mj = json_object_get(doc, "model");
    if (!mj)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: missing field \"model\" (a preset name or a model object)", where);
    TRY(read_model(mj, where, plan_path, &p->model, err));
    TRY(read_train(doc, where, &p->train, err));
    int64_t tp;
    TRY(ah_json_get_int(doc, where, "tp", true, -LOOSE_MAX, LOOSE_MAX, &tp, err));
    if (tp < 1 || tp > AH_MAX_TP)
        return ah_error_set(err, AH_ERR_INVALID,
                            "[tp] %s: tp: expected a tensor-parallel degree in [1, %d], got %lld", where,
                            AH_MAX_TP, (long long)tp);
    p->tp = (int)tp;
    static const char *const dp_syncs[] = {"ring", "hierarchical"}; /* ah_dp_sync_t's order */
    static const char *const p2ps[] = {"scatter-gather", "whole"};   /* ah_p2p_split_t's */
    int dp_sync, p2p;
    TRY(read_choice(doc, where, "dp_sync", dp_syncs, 2, "gradient sync", AH_DP_SYNC_VALUES, &dp_sync, err));
    TRY(read_choice(doc, where, "p2p", p2ps, 2, "pipeline hop", AH_P2P_VALUES, &p2p, err));
    p->dp_sync = (ah_dp_sync_t)dp_sync;
    p->p2p = (ah_p2p_split_t)p2p;
    /* The cluster first: device and type names resolve against it. */
    TRY(read_cluster(doc, where, cluster_override, p, err));
    TRY(read_pipelines(doc, where, p, err));
    TRY(read_shards(doc, where, p, err));
    return read_predicted(doc, where, p, err);
}

ah_status_t ah_plan_from_json(const struct json_t *doc, const char *where,
                              const ah_cluster_t *cluster_override, ah_plan_t *p, ah_error_t *err) {
    memset(p, 0, sizeof *p);
    ah_status_t s = from_json((const json_t *)doc, where, NULL, cluster_override, p, err);
    if (s != AH_OK) ah_plan_free(p);
    return s;
}

ah_status_t ah_plan_load(const char *path, const ah_cluster_t *cluster_override, ah_plan_t *p,
                         ah_error_t *err) {
    memset(p, 0, sizeof *p);
    json_t *doc;
    TRY(ah_json_load_file(path, &doc, err));
    ah_status_t s = from_json(doc, path, path, cluster_override, p, err);
    if (s != AH_OK) ah_plan_free(p);
    json_decref(doc);
    return s;
}

static json_t *stage_to_json(const ah_plan_t *p, const ah_pipeline_t *pl, const ah_stage_t *s) {
    json_t *devs = json_array();
    for (int r = 0; r < ah_stage_devices(pl, p->tp); r++) {
        const ah_device_ref_t *d = &s->devices[r];
        json_array_append_new(devs, json_pack("{s:s, s:i}", "node", p->cluster.nodes[d->node].name,
                                              "index", d->index));
    }
    json_t *o = json_pack("{s:[i,i], s:s, s:b}", "layers", s->first, s->last, "gpu", p->cluster.types[s->type].name,
                          "recompute", s->recompute);
    if (s->warmup_extra != 0) json_object_set_new(o, "warmup_extra", json_integer(s->warmup_extra));
    json_object_set_new(o, "devices", devs);
    return o;
}

/* Names are written for node and type indices, so a plan whose indices do not point into its
 * cluster cannot be written: NULL then (ah_plan_save reports it). */
static bool indices_in_range(const ah_plan_t *p) {
    if (p->tp < 1 || p->tp > AH_MAX_TP) return false;
    for (int i = 0; i < p->n_pipelines; i++) {
        if (ah_pipeline_cp(&p->pipelines[i]) > AH_MAX_CP) return false;
        for (int s = 0; s < p->pipelines[i].n_stages; s++) {
            const ah_stage_t *st = &p->pipelines[i].stages[s];
            if (st->type < 0 || st->type >= p->cluster.n_types) return false;
            for (int r = 0; r < ah_stage_devices(&p->pipelines[i], p->tp); r++)
                if (st->devices[r].node < 0 || st->devices[r].node >= p->cluster.n_nodes) return false;
        }
    }
    return true;
}

struct json_t *ah_plan_to_json(const ah_plan_t *p) {
    if (!indices_in_range(p)) return NULL;
    json_t *doc = json_object();
    json_object_set_new(doc, "version", json_integer(AH_PLAN_VERSION));
    json_object_set_new(doc, "model", ah_model_to_json(&p->model));
    json_object_set_new(doc, "train",
                        json_pack("{s:I, s:I, s:I, s:s}", "global_batch", (json_int_t)p->train.global_batch,
                                  "seq_len", (json_int_t)p->train.seq_len, "micro_batch",
                                  (json_int_t)p->train.micro_batch, "precision",
                                  ah_precision_name(p->train.precision)));
    json_object_set_new(doc, "tp", json_integer(p->tp));
    if (p->dp_sync == AH_DP_SYNC_HIERARCHICAL) json_object_set_new(doc, "dp_sync", json_string("hierarchical"));
    if (p->p2p == AH_P2P_WHOLE) json_object_set_new(doc, "p2p", json_string("whole"));
    json_t *pls = json_array();
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        json_t *stages = json_array();
        for (int s = 0; s < pl->n_stages; s++) json_array_append_new(stages, stage_to_json(p, pl, &pl->stages[s]));
        json_t *pj = json_pack("{s:I}", "micro_batches", (json_int_t)pl->micro_batches);
        if (pl->schedule != AH_SCHED_1F1B) json_object_set_new(pj, "schedule", json_string(ah_schedule_name(pl->schedule)));
        if (ah_pipeline_cp(pl) != 1) json_object_set_new(pj, "cp", json_integer(ah_pipeline_cp(pl)));
        json_object_set_new(pj, "stages", stages);
        json_array_append_new(pls, pj);
    }
    json_object_set_new(doc, "pipelines", pls);
    if (p->n_opt_groups > 0) json_object_set_new(doc, "optimizer_shards", shards_to_json(p));
    if (p->has_predicted) {
        const ah_prediction_t *pr = &p->predicted;
        const ah_breakdown_t *b = &pr->breakdown;
        json_object_set_new(
            doc, "predicted",
            json_pack("{s:f, s:f, s:I, s:{s:f, s:f, s:f, s:f, s:f, s:f}}", "iteration_s", pr->iteration_s,
                      "tokens_per_s", pr->tokens_per_s, "memory_bytes", (json_int_t)pr->memory_bytes,
                      "breakdown", "compute_s", b->compute_s, "bubble_s", b->bubble_s, "p2p_s",
                      b->p2p_s, "tp_comm_s", b->tp_comm_s, "dp_sync_s", b->dp_sync_s, "optimizer_s",
                      b->optimizer_s));
        if (p->predicted_profile[0])
            json_object_set_new(json_object_get(doc, "predicted"), "profile", json_string(p->predicted_profile));
        if (b->cp_comm_s > 0)
            json_object_set_new(json_object_get(json_object_get(doc, "predicted"), "breakdown"), "cp_comm_s",
                                json_real(b->cp_comm_s));
    }
    json_object_set_new(doc, "cluster", ah_cluster_to_json(&p->cluster));
    return doc;
}

ah_status_t ah_plan_save(const ah_plan_t *p, const char *path, ah_error_t *err) {
    json_t *doc = ah_plan_to_json(p);
    if (!doc)
        return ah_error_set(err, AH_ERR_INTERNAL,
                            "%s: cannot write a plan whose node or GPU type indices are outside its "
                            "cluster (run ah_plan_validate first)",
                            path);
    ah_status_t s = ah_json_save_file(doc, path, err);
    json_decref(doc);
    return s;
}
