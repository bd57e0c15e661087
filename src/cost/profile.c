/* Profile files: reading, writing, lookup (format in profile.h). */
#include "cost/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

#define HOST_MAX 256

struct ah_profile {
    char host[HOST_MAX];
    char source[HOST_MAX]; /* the file it was read from, for messages; "" when made here */
    ah_model_t model;
    int n, cap;
    ah_profile_entry_t *entries;
};

static const char *const LAYER_KEYS[3] = {"embed", "block", "head"}; /* by ah_layer_kind_t */

ah_profile_t *ah_profile_create(const char *host, const ah_model_t *m) {
    ah_profile_t *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->host, sizeof p->host, "%s", host ? host : "");
    p->model = *m;
    return p;
}

void ah_profile_free(ah_profile_t *p) {
    if (!p) return;
    free(p->entries);
    free(p);
}

int ah_profile_count(const ah_profile_t *p) { return p->n; }
const ah_profile_entry_t *ah_profile_get(const ah_profile_t *p, int i) {
    return i >= 0 && i < p->n ? &p->entries[i] : NULL;
}
const char *ah_profile_host(const ah_profile_t *p) { return p->host; }
const ah_model_t *ah_profile_model(const ah_profile_t *p) { return &p->model; }

/* 1 for "no emulation" in either spelling (a cluster's 0, a profile's 1). */
static double slowdown_of(double k) { return k > 1 ? k : 1; }

ah_status_t ah_profile_check(const ah_profile_t *p, const ah_model_t *m, const ah_cluster_t *c, ah_error_t *err) {
    const ah_model_t *a = &p->model;
    const char *src = p->source[0] ? p->source : "the profile";
    const struct {
        const char *field;
        int64_t had, want;
    } f[] = {{"arch", a->arch, m->arch},           {"d_model", a->d_model, m->d_model},
             {"n_head", a->n_head, m->n_head},     {"n_kv_head", a->n_kv_head, m->n_kv_head},
             {"d_ff", a->d_ff, m->d_ff},           {"vocab", a->vocab, m->vocab},
             {"tied", a->tied, m->tied}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].had == f[i].want) continue;
        char had[32], want[32];
        snprintf(had, sizeof had, "%lld", (long long)f[i].had);
        snprintf(want, sizeof want, "%lld", (long long)f[i].want);
        if (i == 0) {
            snprintf(had, sizeof had, "%s", ah_arch_name(a->arch));
            snprintf(want, sizeof want, "%s", ah_arch_name(m->arch));
        } else if (i == 6) {
            snprintf(had, sizeof had, "%s", a->tied ? "true" : "false");
            snprintf(want, sizeof want, "%s", m->tied ? "true" : "false");
        }
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s was measured for model %s, not %s: %s %s there, %s here, so its per-layer times "
                            "do not hold; measure this model with `autohet profile --model %s`",
                            src, a->name, m->name, f[i].field, had, want, m->name);
    }
    for (int i = 0; i < p->n; i++) {
        const ah_profile_entry_t *e = &p->entries[i];
        const int ti = ah_cluster_find_type(c, e->gpu);
        if (ti < 0) continue; /* a type the cluster lacks is never looked up */
        const double have = slowdown_of(e->emulate_slowdown), want = slowdown_of(c->types[ti].emulate_slowdown);
        if (have != want)
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: entries[%d] measured GPU type %s at emulate_slowdown %g, but this cluster's "
                                "gpu_types.%s.emulate.slowdown is %g%s, so its times do not hold; profile the type "
                                "again with this cluster (`autohet profile --cluster ...`)",
                                src, i, e->gpu, have, e->gpu, want, want == 1 ? " (no emulation)" : "");
    }
    return AH_OK;
}

const ah_profile_entry_t *ah_profile_find(const ah_profile_t *p, const char *gpu, int tp,
                                          int64_t micro_batch, int64_t seq_len,
                                          ah_precision_t precision) {
    /* Linear: profiles hold tens of entries, and a hash would not pay for itself. */
    for (int i = 0; i < p->n; i++) {
        const ah_profile_entry_t *e = &p->entries[i];
        if (e->tp == tp && e->micro_batch == micro_batch && e->seq_len == seq_len &&
            e->precision == precision && strcmp(e->gpu, gpu) == 0)
            return e;
    }
    return NULL;
}

ah_status_t ah_profile_add(ah_profile_t *p, const ah_profile_entry_t *e, ah_error_t *err) {
    const ah_profile_entry_t *dup =
        ah_profile_find(p, e->gpu, e->tp, e->micro_batch, e->seq_len, e->precision);
    if (dup)
        return ah_error_set(err, AH_ERR_INVALID,
                            "entries[%d] and entries[%d] both give gpu \"%s\", tp %d, micro_batch "
                            "%lld, seq_len %lld, precision %s: keep one of them",
                            (int)(dup - p->entries), p->n, e->gpu, e->tp, (long long)e->micro_batch,
                            (long long)e->seq_len, ah_precision_name(e->precision));
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        ah_profile_entry_t *grown = realloc(p->entries, (size_t)cap * sizeof *grown);
        if (!grown) return ah_error_set(err, AH_ERR_OOM, "out of host memory for %d profile entries", cap);
        p->entries = grown;
        p->cap = cap;
    }
    p->entries[p->n++] = *e;
    return AH_OK;
}

static ah_status_t layer_from_json(const json_t *obj, const char *where, ah_profile_layer_t *l,
                                   ah_error_t *err) {
    static const char *const keys[] = {"fwd_s", "bwd_s", "wgrad_s", "act_bytes", NULL};
    ah_status_t s = ah_json_check_keys(obj, where, keys, err);
    l->wgrad_s = 0;
    if (s == AH_OK) s = ah_json_get_num(obj, where, "fwd_s", true, 0, 1e6, &l->fwd_s, err);
    if (s == AH_OK) s = ah_json_get_num(obj, where, "bwd_s", true, 0, 1e6, &l->bwd_s, err);
    if (s == AH_OK) s = ah_json_get_num(obj, where, "wgrad_s", false, 0, 1e6, &l->wgrad_s, err);
    if (s == AH_OK && l->wgrad_s > l->bwd_s)
        s = ah_error_set(err, AH_ERR_INVALID, "%s: wgrad_s %g exceeds bwd_s %g (W is a part of the backward)", where,
                         l->wgrad_s, l->bwd_s);
    if (s == AH_OK) s = ah_json_get_int(obj, where, "act_bytes", true, 0, INT64_MAX, &l->act_bytes, err);
    l->present = s == AH_OK;
    return s;
}

/* {"fwd_s", "bwd_s"} (and "cp" in a ring entry, into *cp) into l. */
static ah_status_t seconds_from_json(const json_t *obj, const char *where, ah_profile_layer_t *l, int64_t *cp,
                                     ah_error_t *err) {
    static const char *const keys[] = {"fwd_s", "bwd_s", NULL}, *const ring_keys[] = {"cp", "fwd_s", "bwd_s", NULL};
    ah_status_t s = ah_json_expect_object(obj, where, err);
    if (s == AH_OK) s = ah_json_check_keys(obj, where, cp ? ring_keys : keys, err);
    if (s == AH_OK && cp) s = ah_json_get_int(obj, where, "cp", true, 2, 8, cp, err);
    if (s == AH_OK && cp && (*cp & (*cp - 1)))
        s = ah_error_set(err, AH_ERR_INVALID, "%s.cp: %lld is not 2, 4 or 8", where, (long long)*cp);
    if (s == AH_OK) s = ah_json_get_num(obj, where, "fwd_s", true, 0, 1e6, &l->fwd_s, err);
    if (s == AH_OK) s = ah_json_get_num(obj, where, "bwd_s", true, 0, 1e6, &l->bwd_s, err);
    l->present = s == AH_OK;
    return s;
}

/* The entry's "attention" and "ring_attention" (both optional). */
static ah_status_t attention_from_json(const json_t *obj, const char *where, ah_profile_entry_t *e, ah_error_t *err) {
    json_t *a = NULL, *ring = NULL;
    char w[600];
    ah_status_t s = ah_json_get_typed(obj, where, "attention", JSON_OBJECT, false, &a, err);
    if (s == AH_OK && a) {
        snprintf(w, sizeof w, "%s.attention", where);
        s = seconds_from_json(a, w, &e->attention, NULL, err);
    }
    if (s == AH_OK) s = ah_json_get_typed(obj, where, "ring_attention", JSON_ARRAY, false, &ring, err);
    size_t i;
    json_t *v;
    json_array_foreach(ring, i, v) {
        if (s != AH_OK) break;
        snprintf(w, sizeof w, "%s.ring_attention[%zu]", where, i);
        ah_profile_layer_t l = {0};
        int64_t cp = 0;
        s = seconds_from_json(v, w, &l, &cp, err);
        if (s == AH_OK && e->ring[__builtin_ctzll((unsigned long long)cp)].present)
            s = ah_error_set(err, AH_ERR_INVALID, "%s: cp %lld given twice", w, (long long)cp);
        if (s == AH_OK) e->ring[__builtin_ctzll((unsigned long long)cp)] = l;
    }
    return s;
}

static ah_status_t entry_from_json(const json_t *obj, const char *where, ah_profile_entry_t *e,
                                   ah_error_t *err) {
    static const char *const keys[] = {"gpu", "tp", "micro_batch", "seq_len", "precision",
                                       "includes_tp_comm", "block", "embed", "head",
                                       "optimizer_s_per_param", "emulate_slowdown", "attention",
                                       "ring_attention", NULL};
    memset(e, 0, sizeof *e);
    ah_status_t s = ah_json_expect_object(obj, where, err);
    if (s == AH_OK) s = ah_json_check_keys(obj, where, keys, err);
    int64_t tp = 0;
    char prec[16];
    if (s == AH_OK) s = ah_json_get_str(obj, where, "gpu", true, e->gpu, sizeof e->gpu, err);
    if (s == AH_OK) s = ah_json_get_int(obj, where, "tp", true, 1, 1024, &tp, err);
    if (s == AH_OK) s = ah_json_get_int(obj, where, "micro_batch", true, 1, INT32_MAX, &e->micro_batch, err);
    if (s == AH_OK) s = ah_json_get_int(obj, where, "seq_len", true, 1, INT32_MAX, &e->seq_len, err);
    if (s == AH_OK) s = ah_json_get_str(obj, where, "precision", true, prec, sizeof prec, err);
    if (s == AH_OK && !ah_precision_parse(prec, &e->precision))
        s = ah_error_set(err, AH_ERR_INVALID, "%s.precision: expected \"fp32\" or \"bf16\", got \"%s\"",
                         where, prec);
    if (s == AH_OK) s = ah_json_get_bool(obj, where, "includes_tp_comm", true, &e->includes_tp_comm, err);
    if (s == AH_OK)
        s = ah_json_get_num(obj, where, "optimizer_s_per_param", false, 0, 1, &e->optimizer_s_per_param, err);
    e->emulate_slowdown = 1;
    if (s == AH_OK) s = ah_json_get_num(obj, where, "emulate_slowdown", false, 1, 1e6, &e->emulate_slowdown, err);
    e->tp = (int)tp;
    for (int k = 0; k < 3 && s == AH_OK; k++) {
        json_t *l = NULL;
        s = ah_json_get_typed(obj, where, LAYER_KEYS[k], JSON_OBJECT, false, &l, err);
        if (s != AH_OK || !l) continue;
        char lw[600]; /* where (< 512) + "." + the layer key */
        snprintf(lw, sizeof lw, "%s.%s", where, LAYER_KEYS[k]);
        s = layer_from_json(l, lw, &e->layer[k], err);
    }
    if (s == AH_OK) s = attention_from_json(obj, where, e, err);
    if (s == AH_OK && !e->layer[0].present && !e->layer[1].present && !e->layer[2].present)
        s = ah_error_set(err, AH_ERR_INVALID,
                         "%s: no timings: give at least one of \"block\", \"embed\", \"head\"", where);
    return s;
}

ah_status_t ah_profile_from_json(const json_t *doc, const char *where, ah_profile_t **out,
                                 ah_error_t *err) {
    static const char *const keys[] = {"version", "host", "model", "entries", NULL};
    *out = NULL;
    if (!json_is_object(doc))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected a profile object, got %s", where,
                            ah_json_type_name(doc));
    ah_status_t s = ah_json_check_keys(doc, where, keys, err);
    int64_t version = 0;
    json_t *entries = NULL;
    char host[HOST_MAX] = "";
    if (s == AH_OK) s = ah_json_get_int(doc, where, "version", true, 1, INT32_MAX, &version, err);
    if (s == AH_OK && version != AH_PROFILE_VERSION)
        s = ah_error_set(err, AH_ERR_INVALID,
                         "%s.version: this autohet reads profile version %d, got %lld: re-run "
                         "`autohet profile` with this version%s",
                         where, AH_PROFILE_VERSION, (long long)version,
                         version == 1 ? " (version 1 did not record the model and emulation its times hold for)" : "");
    if (s == AH_OK) s = ah_json_get_str(doc, where, "host", false, host, sizeof host, err);
    ah_model_t model;
    const json_t *mj = json_object_get(doc, "model");
    if (s == AH_OK && !mj)
        s = ah_error_set(err, AH_ERR_INVALID, "%s: missing field \"model\" (the model the times were measured on)",
                         where);
    if (s == AH_OK) {
        char mw[600];
        snprintf(mw, sizeof mw, "%s: model", where);
        s = ah_model_from_json(mj, mw, &model, err);
        if (s != AH_OK && json_is_string(mj)) ah_error_prefix(err, "%s", mw); /* a preset's message has no place */
    }
    if (s == AH_OK) s = ah_json_get_typed(doc, where, "entries", JSON_ARRAY, true, &entries, err);
    if (s != AH_OK) return s;

    ah_profile_t *p = ah_profile_create(host, &model);
    if (!p) return ah_error_set(err, AH_ERR_OOM, "out of host memory for a profile");
    snprintf(p->source, sizeof p->source, "%s", where);
    size_t i;
    json_t *v;
    json_array_foreach(entries, i, v) {
        char ew[512];
        snprintf(ew, sizeof ew, "%s: entries[%zu]", where, i);
        ah_profile_entry_t e;
        s = entry_from_json(v, ew, &e, err);
        if (s == AH_OK && (s = ah_profile_add(p, &e, err)) != AH_OK)
            ah_error_prefix(err, "%s", where); /* the duplicate message names entries, not the file */
        if (s == AH_OK) continue;
        ah_profile_free(p);
        return s;
    }
    *out = p;
    return AH_OK;
}

ah_status_t ah_profile_load(const char *path, ah_profile_t **out, ah_error_t *err) {
    json_t *doc;
    *out = NULL;
    ah_status_t s = ah_json_load_file(path, &doc, err);
    if (s != AH_OK) return s;
    s = ah_profile_from_json(doc, path, out, err);
    json_decref(doc);
    return s;
}

json_t *ah_profile_to_json(const ah_profile_t *p) {
    json_t *entries = json_array();
    for (int i = 0; i < p->n; i++) {
        const ah_profile_entry_t *e = &p->entries[i];
        json_t *o = json_pack("{s:s, s:i, s:I, s:I, s:s, s:b}", "gpu", e->gpu, "tp", e->tp,
                              "micro_batch", (json_int_t)e->micro_batch, "seq_len",
                              (json_int_t)e->seq_len, "precision", ah_precision_name(e->precision),
                              "includes_tp_comm", e->includes_tp_comm);
        for (int k = 0; k < 3; k++) {
            const ah_profile_layer_t *l = &e->layer[k];
            if (!l->present) continue;
            json_t *lo = json_pack("{s:f, s:f, s:I}", "fwd_s", l->fwd_s, "bwd_s", l->bwd_s, "act_bytes",
                                   (json_int_t)l->act_bytes);
            if (l->wgrad_s > 0) json_object_set_new(lo, "wgrad_s", json_real(l->wgrad_s));
            json_object_set_new(o, LAYER_KEYS[k], lo);
        }
        if (e->optimizer_s_per_param > 0)
            json_object_set_new(o, "optimizer_s_per_param", json_real(e->optimizer_s_per_param));
        json_object_set_new(o, "emulate_slowdown", json_real(slowdown_of(e->emulate_slowdown)));
        if (e->attention.present)
            json_object_set_new(o, "attention",
                                json_pack("{s:f, s:f}", "fwd_s", e->attention.fwd_s, "bwd_s", e->attention.bwd_s));
        json_t *ring = json_array();
        for (int k = 1; k < 4; k++)
            if (e->ring[k].present)
                json_array_append_new(ring, json_pack("{s:i, s:f, s:f}", "cp", 1 << k, "fwd_s", e->ring[k].fwd_s,
                                                      "bwd_s", e->ring[k].bwd_s));
        if (json_array_size(ring)) json_object_set_new(o, "ring_attention", ring);
        else json_decref(ring);
        json_array_append_new(entries, o);
    }
    return json_pack("{s:i, s:s, s:o, s:o}", "version", AH_PROFILE_VERSION, "host", p->host, "model",
                     ah_model_to_json(&p->model), "entries", entries);
}

ah_status_t ah_profile_save(const ah_profile_t *p, const char *path, ah_error_t *err) {
    json_t *doc = ah_profile_to_json(p);
    if (!doc) return ah_error_set(err, AH_ERR_OOM, "out of host memory writing %s", path);
    ah_status_t s = ah_json_save_file(doc, path, err);
    json_decref(doc);
    return s;
}
