/* Cluster spec: JSON in and out, built-in clusters, lookups. Format in spec/cluster.h. */
#include "spec/cluster.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/names.h"
#include "core/str.h"

/* Defaults of a type given in full (not based on a catalog entry). An emulated CPU device has
 * no CUDA context, and its allocator cap is exactly what the runtime may use, so it reserves
 * nothing; other full types reserve what the catalog does (see catalog.c). */
#define FULL_TYPE_EFFICIENCY 0.5
#define FULL_TYPE_RESERVED_GIB 1.0

#define MAX_GPUS_PER_NODE 64

/* Ranges of the numeric fields. Lower bounds of "positive" quantities are small but non-zero
 * so that a zero (a division by zero later) is rejected with the range in the message. */
#define POS_MIN 1e-6
#define BIG 1e9

static const char *const TOP_KEYS[] = {"gpu_types", "nodes", "network", NULL};
static const char *const TYPE_KEYS[] = {"base", "memory_gib", "tflops", "mem_bw_gb_s",
                                        "intra_node_gb_s", "efficiency", "sm_count",
                                        "attention", "reserved_gib", "emulate", NULL};
static const char *const TFLOPS_KEYS[] = {"bf16", "fp16", "fp32", NULL};
static const char *const EMULATE_KEYS[] = {"slowdown", "memory_mib", NULL};
static const char *const NODE_KEYS[] = {"name", "gpu", "count", "zone", "region", "spot",
                                        "usd_per_gpu_hour", "host_memory_gib", NULL};
/* Catalog names for messages: "A100-40G, A100-80G, ..., H100 (= H100-SXM)", into buf, which it
 * returns. */
static const char *catalog_names(char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    for (int i = 0; i < ah_gpu_catalog_count(); i++) ah_str_appendf(&s, "%s%s", i ? ", " : "", ah_gpu_catalog_get(i)->name);
    ah_str_appendf(&s, "; alias H100 = H100-SXM");
    return buf;
}

/* A top-level member of the required JSON type ("cluster.json: nodes: expected an array"). */
static ah_status_t top_member(const json_t *doc, const char *where, const char *key, json_type type,
                              bool required, json_t **out, ah_error_t *err) {
    json_t *v = json_object_get(doc, key);
    const char *want = type == JSON_OBJECT ? "an object" : "an array";
    *out = NULL;
    if (!v)
        return required ? ah_error_set(err, AH_ERR_INVALID, "%s: missing field \"%s\" (%s)", where,
                                       key, want)
                        : AH_OK;
    if (json_typeof(v) != type)
        return ah_error_set(err, AH_ERR_INVALID, "%s: %s: expected %s, got %s", where, key, want,
                            ah_json_type_name(v));
    *out = v;
    return AH_OK;
}

/* A field a type given in full must have: the message says why and what the alternatives are. */
static ah_status_t need_full_field(const json_t *obj, const char *where, const char *type_name,
                                   const char *key, ah_error_t *err) {
    if (json_object_get(obj, key)) return AH_OK;
    char cat[1024];
    return ah_error_set(err, AH_ERR_INVALID,
                        "%s: missing field \"%s\": \"%s\" is not a catalog GPU, so it must be given "
                        "in full (memory_gib, tflops {bf16, fp16, fp32: those it runs}, mem_bw_gb_s, "
                        "intra_node_gb_s), or name a catalog type in \"base\" and override only "
                        "some fields (catalog: %s)",
                        where, key, type_name, catalog_names(cat, sizeof cat));
}

/* The fields that choose how the type's kernels are priced: "sm_count" (an integer; the GEMM
 * curve's wave quantization) and "attention" ("fused" or "unfused"). */
static ah_status_t parse_kernels(const json_t *v, const char *where, ah_gpu_type_t *g,
                                 ah_error_t *err) {
    int64_t sms = g->sm_count;
    ah_status_t s = ah_json_get_int(v, where, "sm_count", false, 1, 100000, &sms, err);
    if (s) return s;
    g->sm_count = (int)sms;
    char attn[16] = "";
    if ((s = ah_json_get_str(v, where, "attention", false, attn, sizeof attn, err))) return s;
    if (attn[0] && strcmp(attn, "fused") != 0 && strcmp(attn, "unfused") != 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.attention: \"%s\" is not an attention kernel; give \"fused\" (the "
                            "runtime's FlashAttention-style kernel, the default) or \"unfused\" (T x T "
                            "scores and probabilities in memory, as Megatron-LM ran before FlashAttention)",
                            where, attn);
    if (attn[0]) g->attention_unfused = strcmp(attn, "unfused") == 0;
    return AH_OK;
}

/* Parses gpu_types.NAME into *g: a catalog entry ("base", or NAME itself) with overrides, or a
 * full type. */
static ah_status_t parse_type(const json_t *v, const char *doc, const char *name, ah_gpu_type_t *g,
                              ah_error_t *err) {
    char where[256];
    snprintf(where, sizeof where, "%s: gpu_types.%s", doc, name);
    ah_status_t s = ah_json_expect_object(v, where, err);
    if (s) return s;
    if (name[0] == 0 || strlen(name) >= AH_NAME_MAX)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: gpu_types: type name \"%.80s\" must have 1 to %d characters", doc,
                            name, AH_NAME_MAX - 1);
    if ((s = ah_json_check_keys(v, where, TYPE_KEYS, err))) return s;

    char base[AH_NAME_MAX] = "";
    if ((s = ah_json_get_str(v, where, "base", false, base, sizeof base, err))) return s;
    const ah_gpu_type_t *cat = ah_gpu_catalog_find(base[0] ? base : name);
    char names[1024];
    if (base[0] && !cat)
        return ah_error_set(err, AH_ERR_INVALID, "%s.base: unknown catalog GPU \"%s\" (catalog: %s); name one of "
                            "those, or drop \"base\" and give the type in full",
                            where, base, catalog_names(names, sizeof names));
    bool full = cat == NULL;
    if (full) {
        memset(g, 0, sizeof *g);
        g->efficiency = FULL_TYPE_EFFICIENCY;
        g->reserved_gib = FULL_TYPE_RESERVED_GIB;
    } else {
        *g = *cat;
    }
    /* An override of a catalog type under another spelling ("H100", "h800") is that type, so that
     * nodes naming it either way get the override. */
    snprintf(g->name, sizeof g->name, "%s", base[0] || !cat ? name : cat->name);

    json_t *emu = NULL, *tfl = NULL;
    if ((s = ah_json_get_typed(v, where, "emulate", JSON_OBJECT, false, &emu, err))) return s;
    if (emu) {
        char ew[300];
        snprintf(ew, sizeof ew, "%s.emulate", where);
        double slowdown = 1, mib = 0;
        /* slowdown < 1 cannot be emulated: a rank can be slowed by sleeping, not sped up. */
        if ((s = ah_json_check_keys(emu, ew, EMULATE_KEYS, err)) ||
            (s = ah_json_get_num(emu, ew, "slowdown", false, 1, 1000, &slowdown, err)) ||
            (s = ah_json_get_num(emu, ew, "memory_mib", false, 1, BIG, &mib, err)))
            return s;
        g->emulate_slowdown = slowdown;
        g->emulate_memory_mib = mib;
        g->reserved_gib = 0;
    }

    /* An emulated type's capacity is memory_mib, so memory_gib may follow from it. */
    if (full && g->emulate_memory_mib > 0 && !json_object_get(v, "memory_gib"))
        g->memory_gib = g->emulate_memory_mib / 1024.0;
    else if (full && (s = need_full_field(v, where, name, "memory_gib", err)))
        return s;
    if ((s = ah_json_get_num(v, where, "memory_gib", false, 1.0 / 1024, BIG, &g->memory_gib, err)))
        return s;

    if (full && (s = need_full_field(v, where, name, "tflops", err))) return s;
    if ((s = ah_json_get_typed(v, where, "tflops", JSON_OBJECT, false, &tfl, err))) return s;
    if (tfl) {
        char tw[300];
        snprintf(tw, sizeof tw, "%s.tflops", where);
        double *dst[] = {&g->tflops_bf16, &g->tflops_fp16, &g->tflops_fp32};
        if ((s = ah_json_check_keys(tfl, tw, TFLOPS_KEYS, err))) return s;
        /* A type needs only the rates of the precisions it runs: a rate left out (or null,
         * which removes a catalog type's) means it cannot run that precision. */
        for (int k = 0; k < 3; k++) {
            if (json_is_null(json_object_get(tfl, TFLOPS_KEYS[k]))) *dst[k] = 0;
            else if ((s = ah_json_get_num(tfl, tw, TFLOPS_KEYS[k], false, POS_MIN, BIG, dst[k], err))) return s;
        }
        if (g->tflops_bf16 <= 0 && g->tflops_fp16 <= 0 && g->tflops_fp32 <= 0)
            return ah_error_set(err, AH_ERR_INVALID, "%s: no rate: give the dense TFLOP/s of each precision \"%s\" "
                                "runs (bf16, fp16, fp32; one is enough)", tw, name);
    }
    if ((full && (s = need_full_field(v, where, name, "mem_bw_gb_s", err))) ||
        (s = ah_json_get_num(v, where, "mem_bw_gb_s", false, POS_MIN, BIG, &g->mem_bw_gb_s, err)) ||
        (full && (s = need_full_field(v, where, name, "intra_node_gb_s", err))) ||
        (s = ah_json_get_num(v, where, "intra_node_gb_s", false, POS_MIN, BIG, &g->intra_node_gb_s,
                             err)) ||
        (s = ah_json_get_num(v, where, "efficiency", false, 0.01, 1, &g->efficiency, err)) ||
        (s = ah_json_get_num(v, where, "reserved_gib", false, 0, BIG, &g->reserved_gib, err)) ||
        (s = parse_kernels(v, where, g, err)))
        return s;

    double cap_gib = (double)ah_gpu_capacity_bytes(g) / 1073741824.0;
    if (g->reserved_gib >= cap_gib)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.reserved_gib: %g GiB leaves nothing of the device's %g GiB; give "
                            "a smaller reserved_gib or a larger memory",
                            where, g->reserved_gib, cap_gib);
    return AH_OK;
}

/* The type a node's "gpu" names: a type already in c (exact name, or the canonical name of a
 * catalog alias), else the catalog entry, appended to c->types. */
static ah_status_t resolve_type(ah_cluster_t *c, const char *gpu, const char *where, int *type,
                                ah_error_t *err) {
    *type = ah_cluster_find_type(c, gpu);
    if (*type >= 0) return AH_OK;
    const ah_gpu_type_t *cat = ah_gpu_catalog_find(gpu);
    char names[1024];
    if (!cat)
        return ah_error_set(err, AH_ERR_INVALID, "%s.gpu: unknown GPU type \"%s\": not in gpu_types and not in "
                            "the catalog (%s); use a catalog name or define the type in gpu_types",
                            where, gpu, catalog_names(names, sizeof names));
    /* The caller sized c->types for one new entry per node. */
    c->types[c->n_types] = *cat;
    *type = c->n_types++;
    return AH_OK;
}

static ah_status_t parse_node(const json_t *v, const char *doc, int i, ah_cluster_t *c,
                              ah_error_t *err) {
    char where[256];
    snprintf(where, sizeof where, "%s: nodes[%d]", doc, i);
    ah_status_t s = ah_json_expect_object(v, where, err);
    if (s) return s;
    ah_node_t *n = &c->nodes[i];
    memset(n, 0, sizeof *n);
    snprintf(n->zone, sizeof n->zone, "default");
    char gpu[AH_NAME_MAX];
    int64_t count = 0;
    if ((s = ah_json_check_keys(v, where, NODE_KEYS, err)) ||
        (s = ah_json_get_str(v, where, "name", true, n->name, sizeof n->name, err)) ||
        (s = ah_json_get_str(v, where, "gpu", true, gpu, sizeof gpu, err)) ||
        (s = ah_json_get_int(v, where, "count", true, 1, MAX_GPUS_PER_NODE, &count, err)) ||
        (s = ah_json_get_str(v, where, "zone", false, n->zone, sizeof n->zone, err)) ||
        (s = ah_json_get_str(v, where, "region", false, n->region, sizeof n->region, err)) ||
        (s = ah_json_get_bool(v, where, "spot", false, &n->spot, err)) ||
        (s = ah_json_get_num(v, where, "usd_per_gpu_hour", false, 0, BIG, &n->usd_per_gpu_hour,
                             err)) ||
        (s = ah_json_get_num(v, where, "host_memory_gib", false, 1.0 / 1024, BIG, &n->host_memory_gib, err)))
        return s;
    /* Node names end up in hostfiles, rankfiles, file and directory names and ssh's argv. */
    if (!ah_name_path_safe(n->name))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.name: \"%s\" is not a valid node name (use " AH_NAME_SAFE_RULE ")",
                            where, n->name);
    if (!n->zone[0])
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.zone: empty zone name; leave the field out for \"default\"", where);
    if (json_object_get(v, "region") && !n->region[0])
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.region: empty region name; leave the field out for the zone's region "
                            "(\"default\" when no node of the zone names one)", where);
    for (int j = 0; j < i; j++)
        if (strcmp(c->nodes[j].name, n->name) == 0)
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s.name: \"%s\" is already the name of nodes[%d]; node names must "
                                "be unique",
                                where, n->name, j);
    n->count = (int)count;
    n->no_price = !json_object_get(v, "usd_per_gpu_hour"); /* unknown, not $0: cluster.h "Prices" */
    return resolve_type(c, gpu, where, &n->type, err);
}

ah_status_t ah_cluster_from_json(const json_t *doc, const char *where, ah_cluster_t *c,
                                 ah_error_t *err) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(doc))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: a cluster must be a JSON object with \"nodes\", got %s", where,
                            ah_json_type_name(doc));
    json_t *types = NULL, *nodes = NULL, *net = NULL;
    ah_status_t s;
    if ((s = ah_json_check_keys(doc, where, TOP_KEYS, err)) ||
        (s = top_member(doc, where, "gpu_types", JSON_OBJECT, false, &types, err)) ||
        (s = top_member(doc, where, "nodes", JSON_ARRAY, true, &nodes, err)) ||
        (s = top_member(doc, where, "network", JSON_OBJECT, false, &net, err)))
        return s;
    size_t n_nodes = json_array_size(nodes);
    if (n_nodes == 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s: nodes: the list is empty; give at least one node",
                            where);
    if (n_nodes > 1000000)
        return ah_error_set(err, AH_ERR_INVALID, "%s: nodes: %zu nodes is more than 1000000", where,
                            n_nodes);
    size_t n_decl = types ? json_object_size(types) : 0;
    /* Every node may add one catalog type on top of the declared ones. */
    c->types = calloc(n_decl + n_nodes, sizeof *c->types);
    c->nodes = calloc(n_nodes, sizeof *c->nodes);
    if (!c->types || !c->nodes) {
        ah_cluster_free(c);
        return ah_error_set(err, AH_ERR_INTERNAL, "%s: out of host memory for %zu nodes", where,
                            n_nodes);
    }
    const char *name;
    json_t *v;
    if (types) {
        json_object_foreach(types, name, v) {
            if ((s = parse_type(v, where, name, &c->types[c->n_types], err))) goto fail;
            for (int k = 0; k < c->n_types; k++)
                if (strcmp(c->types[k].name, c->types[c->n_types].name) == 0) {
                    s = ah_error_set(err, AH_ERR_INVALID, "%s: gpu_types: \"%s\" is the catalog type %s, defined "
                                     "already under another spelling; give it once", where, name,
                                     c->types[k].name);
                    goto fail;
                }
            c->n_types++;
        }
    }
    for (size_t i = 0; i < n_nodes; i++) {
        if ((s = parse_node(json_array_get(nodes, i), where, (int)i, c, err))) goto fail;
        c->n_nodes++;
    }
    if ((s = ah_cluster_parse_network(net, where, c, err))) goto fail;
    return AH_OK;
fail:
    ah_cluster_free(c);
    return s;
}

ah_status_t ah_cluster_load(const char *path, ah_cluster_t *c, ah_error_t *err) {
    json_t *doc;
    ah_status_t s = ah_json_load_file(path, &doc, err);
    if (s) {
        memset(c, 0, sizeof *c);
        return s;
    }
    s = ah_cluster_from_json(doc, path, c, err);
    json_decref(doc);
    return s;
}

static json_t *type_to_json(const ah_gpu_type_t *g) {
    json_t *o = json_object();
    json_object_set_new(o, "memory_gib", json_real(g->memory_gib));
    json_t *tflops = json_object();
    const double rates[] = {g->tflops_bf16, g->tflops_fp16, g->tflops_fp32};
    for (int k = 0; k < 3; k++)
        json_object_set_new(tflops, TFLOPS_KEYS[k], rates[k] > 0 ? json_real(rates[k]) : json_null());
    json_object_set_new(o, "tflops", tflops);
    json_object_set_new(o, "mem_bw_gb_s", json_real(g->mem_bw_gb_s));
    json_object_set_new(o, "intra_node_gb_s", json_real(g->intra_node_gb_s));
    json_object_set_new(o, "efficiency", json_real(g->efficiency));
    if (g->sm_count > 0) json_object_set_new(o, "sm_count", json_integer(g->sm_count));
    if (g->attention_unfused) json_object_set_new(o, "attention", json_string("unfused"));
    json_object_set_new(o, "reserved_gib", json_real(g->reserved_gib));
    if (g->emulate_slowdown > 0) {
        json_t *e = json_pack("{s:f}", "slowdown", g->emulate_slowdown);
        if (g->emulate_memory_mib > 0)
            json_object_set_new(e, "memory_mib", json_real(g->emulate_memory_mib));
        json_object_set_new(o, "emulate", e);
    }
    return o;
}

json_t *ah_cluster_to_json(const ah_cluster_t *c) {
    json_t *types = json_object();
    for (int i = 0; i < c->n_types; i++)
        json_object_set_new(types, c->types[i].name, type_to_json(&c->types[i]));
    json_t *nodes = json_array();
    for (int i = 0; i < c->n_nodes; i++) {
        const ah_node_t *n = &c->nodes[i];
        json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:b}", "name", n->name, "gpu",
                              c->types[n->type].name, "count", n->count, "zone", n->zone, "spot",
                              n->spot);
        if (!n->no_price) json_object_set_new(o, "usd_per_gpu_hour", json_real(n->usd_per_gpu_hour));
        if (n->host_memory_gib > 0) json_object_set_new(o, "host_memory_gib", json_real(n->host_memory_gib));
        if (strcmp(n->region, "default") != 0) json_object_set_new(o, "region", json_string(n->region));
        json_array_append_new(nodes, o);
    }
    json_t *net = ah_network_to_json(c);
    return json_pack("{s:o, s:o, s:o}", "gpu_types", types, "nodes", nodes, "network", net);
}

ah_status_t ah_cluster_copy(const ah_cluster_t *src, ah_cluster_t *dst, ah_error_t *err) {
    memset(dst, 0, sizeof *dst);
    size_t nt = (size_t)src->n_types, nn = (size_t)src->n_nodes;
    dst->types = malloc((nt ? nt : 1) * sizeof *dst->types);
    dst->nodes = malloc((nn ? nn : 1) * sizeof *dst->nodes);
    if (!dst->types || !dst->nodes) {
        ah_cluster_free(dst);
        return ah_error_set(err, AH_ERR_INTERNAL, "out of host memory copying a cluster of %zu nodes",
                            nn);
    }
    if (nt) memcpy(dst->types, src->types, nt * sizeof *dst->types);
    if (nn) memcpy(dst->nodes, src->nodes, nn * sizeof *dst->nodes);
    dst->n_types = src->n_types;
    dst->n_nodes = src->n_nodes;
    dst->net = src->net;
    return AH_OK;
}

void ah_cluster_free(ah_cluster_t *c) {
    if (!c) return;
    free(c->types);
    free(c->nodes);
    memset(c, 0, sizeof *c);
}

int ah_cluster_find_node(const ah_cluster_t *c, const char *name) {
    for (int i = 0; i < c->n_nodes; i++)
        if (strcmp(c->nodes[i].name, name) == 0) return i;
    return -1;
}

/* Exact name first; then the canonical catalog spelling of `name` ("H100" -> "H100-SXM"). */
int ah_cluster_find_type(const ah_cluster_t *c, const char *name) {
    for (int i = 0; i < c->n_types; i++)
        if (strcmp(c->types[i].name, name) == 0) return i;
    const ah_gpu_type_t *cat = ah_gpu_catalog_find(name);
    if (cat)
        for (int i = 0; i < c->n_types; i++)
            if (strcmp(c->types[i].name, cat->name) == 0) return i;
    return -1;
}

int ah_cluster_gpu_count(const ah_cluster_t *c) {
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++) n += c->nodes[i].count;
    return n;
}

int ah_cluster_type_gpus(const ah_cluster_t *c, int type) {
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++) n += c->nodes[i].type == type ? c->nodes[i].count : 0;
    return n;
}

int ah_cluster_unpriced(const ah_cluster_t *c, const bool *used, char *names, size_t cap) {
    const char **list = malloc(sizeof *list * (size_t)(c->n_nodes > 0 ? c->n_nodes : 1));
    int n = 0;
    for (int i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].no_price && (!used || used[i])) {
            if (list) list[n] = c->nodes[i].name;
            n++;
        }
    if (names && cap) {
        ah_str_t s = ah_str_fixed(names, cap);
        if (list) ah_names_append(&s, list, n, ", ", 8);
        else ah_str_appendf(&s, "%d nodes", n);
    }
    free(list);
    return n;
}

ah_status_t ah_cluster_require_prices(const ah_cluster_t *c, const char *use, const char *where,
                                      ah_error_t *err) {
    char names[512];
    const int n = ah_cluster_unpriced(c, NULL, names, sizeof names);
    if (n == 0) return AH_OK;
    const bool flag = use[0] == '-'; /* a flag can be left out; a verb's own figures cannot */
    return ah_error_set(err, AH_ERR_INVALID,
                        "%s needs every node's price: %s: no \"usd_per_gpu_hour\" for node%s %s (%d of "
                        "%d nodes); give each node its price per GPU-hour (0 for GPUs that cost "
                        "nothing)%s%s%s",
                        use, where, n == 1 ? "" : "s", names, n, c->n_nodes, flag ? ", or leave " : "",
                        flag ? use : "", flag ? " out" : "");
}

/* Built-in clusters, in the compact form a user would write; examples/clusters/ holds the same
 * clusters as files (tests check that they agree). Prices are illustrative cloud list prices of
 * the kind the AutoHet paper assumes, not quotes. */
static const struct {
    const char *name, *json;
} BUILTINS[] = {
    {"mixed-32",
     "{\"nodes\": ["
     "{\"name\": \"a100-0\", \"gpu\": \"A100-80G\", \"count\": 8, \"zone\": \"a\", \"spot\": false,"
     " \"usd_per_gpu_hour\": 1.8},"
     "{\"name\": \"a100-1\", \"gpu\": \"A100-80G\", \"count\": 8, \"zone\": \"a\", \"spot\": true,"
     " \"usd_per_gpu_hour\": 0.9},"
     "{\"name\": \"h800-0\", \"gpu\": \"H800\", \"count\": 8, \"zone\": \"a\", \"spot\": true,"
     " \"usd_per_gpu_hour\": 2.5},"
     "{\"name\": \"h20-0\", \"gpu\": \"H20\", \"count\": 8, \"zone\": \"b\", \"spot\": true,"
     " \"usd_per_gpu_hour\": 1.2}]}"},
    /* For the CPU trainer demo on this 2-core machine. cpu-fast: one emulated device is about
     * what a rank gets of one shared core running our fp32 kernels (~0.05 TFLOP/s, ~10 GB/s);
     * cpu-slow is emulated 3x slower, and since emulation stretches whole compute phases, its
     * FLOP/s and memory bandwidth are both a third. Its devices are spot, to be preempted in the
     * demo; communication (MPI over shared memory) is not stretched. */
    {"cpu-hetero",
     "{\"gpu_types\": {"
     "\"cpu-fast\": {\"tflops\": {\"bf16\": 0.05, \"fp16\": 0.05, \"fp32\": 0.05},"
     " \"mem_bw_gb_s\": 10, \"intra_node_gb_s\": 5,"
     " \"emulate\": {\"slowdown\": 1, \"memory_mib\": 160}},"
     "\"cpu-slow\": {\"tflops\": {\"bf16\": 0.016666666666666666, \"fp16\": 0.016666666666666666,"
     " \"fp32\": 0.016666666666666666}, \"mem_bw_gb_s\": 3.3333333333333335,"
     " \"intra_node_gb_s\": 5, \"emulate\": {\"slowdown\": 3, \"memory_mib\": 512}}},"
     "\"nodes\": ["
     "{\"name\": \"fast-0\", \"gpu\": \"cpu-fast\", \"count\": 2, \"usd_per_gpu_hour\": 0.3},"
     "{\"name\": \"slow-0\", \"gpu\": \"cpu-slow\", \"count\": 2, \"spot\": true,"
     " \"usd_per_gpu_hour\": 0.1},"
     "{\"name\": \"slow-1\", \"gpu\": \"cpu-slow\", \"count\": 2, \"spot\": true,"
     " \"usd_per_gpu_hour\": 0.1}],"
     "\"network\": {\"inter_node_gb_s\": 1, \"cloud_gb_s\": 0.1}}"},
};
#define N_BUILTINS ((int)(sizeof BUILTINS / sizeof BUILTINS[0]))

static void builtin_names(char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    for (int i = 0; i < N_BUILTINS; i++) ah_str_appendf(&s, "%s%s", i ? ", " : "", BUILTINS[i].name);
}

ah_status_t ah_cluster_builtin(const char *name, ah_cluster_t *c, ah_error_t *err) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_BUILTINS; i++) {
        if (strcmp(BUILTINS[i].name, name) != 0) continue;
        char where[128];
        snprintf(where, sizeof where, "built-in cluster %s", name);
        json_t *doc;
        ah_status_t s = ah_json_load_string(BUILTINS[i].json, strlen(BUILTINS[i].json), where, &doc,
                                            err);
        if (!s) {
            s = ah_cluster_from_json(doc, where, c, err);
            json_decref(doc);
        }
        /* A built-in that does not parse is a bug in this file, not bad user input. */
        if (s && err) err->code = AH_ERR_INTERNAL;
        return s ? AH_ERR_INTERNAL : AH_OK;
    }
    char names[256];
    builtin_names(names, sizeof names);
    return ah_error_set(err, AH_ERR_INVALID,
                        "unknown built-in cluster \"%s\" (built-ins: %s); give one of those or a "
                        "path to a cluster JSON",
                        name, names);
}

ah_status_t ah_cluster_open(const char *name_or_path, ah_cluster_t *c, ah_error_t *err) {
    for (int i = 0; i < N_BUILTINS; i++)
        if (strcmp(BUILTINS[i].name, name_or_path) == 0)
            return ah_cluster_builtin(name_or_path, c, err);
    ah_status_t s = ah_cluster_load(name_or_path, c, err);
    if (s == AH_ERR_IO && !strchr(name_or_path, '/') && !strstr(name_or_path, ".json")) {
        /* Looks like a mistyped built-in name rather than a missing file. */
        char names[256];
        builtin_names(names, sizeof names);
        return ah_error_set(err, AH_ERR_INVALID,
                            "--cluster \"%s\": neither a built-in cluster (%s) nor a readable file",
                            name_or_path, names);
    }
    return s;
}
