/* A Hugging Face model directory read into any plan's shards (import_hf.h). */
#include "ckpt/import_hf.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json.h"

#define TRY(x)                          \
    do {                                \
        ah_status_t s_ = (x);           \
        if (s_ != AH_OK) return s_;     \
    } while (0)

static const char HOW[] = "--init-from takes a Hugging Face model directory: config.json plus model.safetensors, or "
                          "model-0000K-of-0000N.safetensors files with model.safetensors.index.json";

/* ---- config.json ----------------------------------------------------------------------------- */

/* The file's model f against the plan's m, field by field under the Hugging Face names. */
static ah_status_t compare_models(const char *path, const ah_model_t *f, const ah_model_t *m, ah_error_t *err) {
    ah_model_diff_t d;
    if (!ah_model_diff(f, m, true, &d)) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "%s: %s is %s but the plan's model %s %s %s; --init-from needs a "
                        "directory of the plan's model (or make a plan for this one: autohet plan --model "
                        "DIR/config.json)", path, d.field, d.a, m->name, f->arch != m->arch ? "is" : "has", d.b);
}

ah_status_t ah_hf_import_check_config(const char *dir, const ah_model_t *m, ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    struct stat sb;
    if (ah_ckpt_join(path, sizeof path, dir, "config.json") < 0)
        return ah_error_set(err, AH_ERR_USAGE, "--init-from %.200s...: path too long", dir);
    if (stat(path, &sb) != 0) return ah_error_set(err, AH_ERR_IO, "%s: cannot read: %s; %s", path, strerror(errno), HOW);
    json_t *cfg;
    TRY(ah_json_load_file(path, &cfg, err));
    ah_model_t f;
    ah_status_t st = ah_model_from_hf_json(cfg, path, &f, err);
    if (st == AH_OK) st = compare_models(path, &f, m, err);
    json_decref(cfg);
    return st;
}

/* ---- the files ------------------------------------------------------------------------------- */

/* Index of the file at path among those open, or -1. */
static int file_index(const ah_hf_import_t *h, const char *path) {
    for (int j = 0; j < h->n_files; j++)
        if (strcmp(h->files[j].path, path) == 0) return j;
    return -1;
}

/* Opens DIR/name (once), where the index puts `tensor`, and returns its index in *j. */
static ah_status_t open_file(ah_hf_import_t *h, const char *name, const char *tensor, int cap, int *j,
                             ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s/model.safetensors.index.json: weight_map names file \"%s\"; "
                            "expected a file name inside the directory", h->dir, name);
    if (ah_ckpt_join(path, sizeof path, h->dir, name) < 0)
        return ah_error_set(err, AH_ERR_USAGE, "--init-from %.200s...: path too long", h->dir);
    if ((*j = file_index(h, path)) >= 0) return AH_OK;
    if (h->n_files >= cap) return ah_error_set(err, AH_ERR_INTERNAL, "more files than the index has entries");
    if (ah_st_open(path, &h->files[h->n_files], err) != AH_OK)
        return ah_error_prefix(err, "%s/model.safetensors.index.json lists tensor \"%s\" in %s", h->dir, tensor, name);
    *j = h->n_files++;
    return AH_OK;
}

/* The files of a sharded directory: every file the index's weight_map names, opened, and the
 * index and the headers agreeing tensor for tensor. */
static ah_status_t open_sharded(ah_hf_import_t *h, const char *index_path, ah_error_t *err) {
    json_t *doc;
    TRY(ah_json_load_file(index_path, &doc, err));
    json_t *map = NULL;
    ah_status_t st = ah_json_expect_object(doc, index_path, err);
    if (st == AH_OK) st = ah_json_get_typed(doc, index_path, "weight_map", JSON_OBJECT, true, &map, err);
    const int cap = map ? (int)json_object_size(map) : 0;
    if (st == AH_OK && cap == 0)
        st = ah_error_set(err, AH_ERR_INVALID, "%s: weight_map lists no tensors", index_path);
    if (st == AH_OK && !(h->files = calloc((size_t)cap, sizeof *h->files)))
        st = ah_error_set(err, AH_ERR_OOM, "no host memory for %d file headers", cap);
    const char *name;
    json_t *v;
    if (st == AH_OK) json_object_foreach(map, name, v) {
        int j;
        if (!json_is_string(v)) {
            st = ah_error_set(err, AH_ERR_INVALID, "%s: weight_map.%s must be a file name, got %s", index_path, name,
                              ah_json_type_name(v));
            break;
        }
        if ((st = open_file(h, json_string_value(v), name, cap, &j, err)) != AH_OK) break;
        if (!ah_st_find(&h->files[j], name)) {
            st = ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" is not in this file, but %s lists it there",
                              h->files[j].path, name, index_path);
            break;
        }
    }
    /* Each header's tensors must be where the index puts them: one the index does not list would
     * be loaded by Hugging Face and silently ignored here. */
    for (int j = 0; st == AH_OK && j < h->n_files; j++)
        for (int i = 0; st == AH_OK && i < h->files[j].n; i++) {
            const char *tn = h->files[j].entries[i].name;
            const json_t *where = json_object_get(map, tn);
            char path[AH_CKPT_PATH_MAX];
            if (!where || ah_ckpt_join(path, sizeof path, h->dir, json_string_value(where)) < 0 ||
                strcmp(path, h->files[j].path) != 0)
                st = ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" is in this file, but %s %s", h->files[j].path,
                                  tn, index_path, where ? "lists it in another file" : "does not list it");
        }
    json_decref(doc);
    return st;
}

/* The directory's safetensors files, opened and validated (header, dtypes, tiling). */
static ah_status_t open_files(ah_hf_import_t *h, ah_error_t *err) {
    char index[AH_CKPT_PATH_MAX], single[AH_CKPT_PATH_MAX];
    struct stat sb;
    if (ah_ckpt_join(index, sizeof index, h->dir, "model.safetensors.index.json") < 0 ||
        ah_ckpt_join(single, sizeof single, h->dir, "model.safetensors") < 0)
        return ah_error_set(err, AH_ERR_USAGE, "--init-from %.200s...: path too long", h->dir);
    const bool has_index = stat(index, &sb) == 0, has_single = stat(single, &sb) == 0;
    if (has_index && has_single) /* transformers would load model.safetensors, and the shards be ignored */
        return ah_error_set(err, AH_ERR_INVALID, "%s: both %s and %s are here, and the two may hold different "
                            "weights (Hugging Face loads model.safetensors); remove one of them", h->dir, single,
                            index);
    if (has_index) return open_sharded(h, index, err);
    if (!has_single)
        return ah_error_set(err, AH_ERR_IO, "%s: no model.safetensors and no model.safetensors.index.json (%s; "
                            "pytorch_model.bin is not read: convert it to safetensors)", h->dir, HOW);
    if (!(h->files = calloc(1, sizeof *h->files))) return ah_error_set(err, AH_ERR_OOM, "no host memory for a header");
    TRY(ah_st_open(single, &h->files[0], err));
    h->n_files = 1;
    return AH_OK;
}

/* ---- the tensors ----------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A tensor Hugging Face files carry that the model does not use: buffers, not parameters. */
static bool skippable(ah_arch_t arch, const char *name) {
    if (arch == AH_ARCH_LLAMA) return ends_with(name, ".rotary_emb.inv_freq") || strcmp(name, "rotary_emb.inv_freq") == 0;
    return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias"); /* the causal mask */
}

/* The model tensor file tensor `name` is (hf: their Hugging Face names), or -1. GPT-2's names
 * match with or without "transformer." (a GPT2Model file has none). */
static int model_tensor(const ah_hf_import_t *h, char (*hf)[AH_ST_NAME_MAX], const char *name) {
    static const char PREFIX[] = "transformer.";
    const size_t np = sizeof PREFIX - 1;
    for (int i = 0; i < h->n_tensors; i++)
        if (strcmp(hf[i], name) == 0 ||
            (h->model.arch == AH_ARCH_GPT2 && strncmp(hf[i], PREFIX, np) == 0 && strcmp(hf[i] + np, name) == 0))
            return i;
    return -1;
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* Every tensor of every file: a model tensor (found once), a skipped buffer, or an error. */
static ah_status_t map_tensors(ah_hf_import_t *h, char (*hf)[AH_ST_NAME_MAX], ah_error_t *err) {
    const ah_model_t *m = &h->model;
    for (int j = 0; j < h->n_files; j++)
        for (int i = 0; i < h->files[j].n; i++) {
            const ah_st_entry_t *e = &h->files[j].entries[i];
            const int x = model_tensor(h, hf, e->name);
            if (x >= 0 && h->found[x].file >= 0)
                return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" is %s's %s a second time (first as \"%s\" "
                                    "in %s)", h->files[j].path, e->name, m->name, h->defs[x].name,
                                    h->found[x].e->name, h->files[h->found[x].file].path);
            if (x >= 0) {
                h->found[x] = (ah_hf_found_t){.file = j, .e = e};
                continue;
            }
            if (skippable(m->arch, e->name)) {
                h->skipped++;
                continue;
            }
            if (m->tied && strcmp(e->name, "lm_head.weight") == 0) {
                h->tied_head = (ah_hf_found_t){.file = j, .e = e};
                continue;
            }
            return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" is not a tensor of the model config.json "
                                "describes (%s, %lld layers, %s head) nor one autohet knows to skip (%s); autohet "
                                "would not know where to put it", h->files[j].path, e->name, ah_arch_name(m->arch),
                                (long long)m->n_layer, m->tied ? "tied" : "untied",
                                m->arch == AH_ARCH_LLAMA ? "rotary_emb.inv_freq" : "attn.bias, attn.masked_bias");
        }
    return AH_OK;
}

/* The index of the embedding among the model's tensors. */
static int embedding_index(const ah_hf_import_t *h) {
    int i = 0;
    while (i < h->n_tensors && strcmp(h->defs[i].name, "wte") != 0) i++;
    return i;
}

/* Why a tied model cannot take lm_head.weight as a copy of its embedding: `what` differs. */
static ah_status_t tied_head_differs(const ah_hf_import_t *h, const char *what, ah_error_t *err) {
    return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"lm_head.weight\" differs from the embedding %s (%s): "
                        "config.json ties the LM head to the embedding (tie_word_embeddings true), so the model has "
                        "no head matrix of its own and a copy must equal it; drop the tensor, or set "
                        "tie_word_embeddings false and plan for that model", h->files[h->tied_head.file].path,
                        h->found[embedding_index(h)].e->name, what);
}

/* Every model tensor found, with Hugging Face's shape. */
static ah_status_t check_tensors(const ah_hf_import_t *h, char (*hf)[AH_ST_NAME_MAX], ah_error_t *err) {
    for (int x = 0; x < h->n_tensors; x++) {
        const ah_tensor_t *d = &h->defs[x];
        if (h->found[x].file < 0) {
            char files[600];
            if (h->n_files == 1) snprintf(files, sizeof files, "%s", h->files[0].path);
            else snprintf(files, sizeof files, "any of the %d files of %s/model.safetensors.index.json", h->n_files, h->dir);
            return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" (%s's %s) is missing: not in %s", h->dir, hf[x],
                                h->model.name, d->name, files);
        }
        const ah_st_entry_t *e = h->found[x].e;
        int64_t want[2] = {d->rows, d->cols};
        int nd = 2;
        if (d->cols == 1) nd = 1;
        else if (d->spec->hf_transposed) want[0] = d->cols, want[1] = d->rows;
        bool ok = e->ndim == nd;
        for (int i = 0; ok && i < nd; i++) ok = e->shape[i] == want[i];
        if (!ok) {
            char got[160], need[64];
            shape_text(e->shape, e->ndim, got, sizeof got);
            shape_text(want, nd, need, sizeof need);
            return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" has shape %s but the model config.json describes "
                                "needs %s%s", h->files[h->found[x].file].path, e->name, got, need,
                                d->spec->hf_transposed ? " (Conv1D's (in, out) layout)" : "");
        }
    }
    if (h->tied_head.file >= 0) {
        const ah_st_entry_t *head = h->tied_head.e, *emb = h->found[embedding_index(h)].e;
        if (head->dtype != emb->dtype || head->ndim != emb->ndim ||
            memcmp(head->shape, emb->shape, (size_t)emb->ndim * sizeof *emb->shape) != 0) {
            char what[400], hs[160], es[160];
            shape_text(head->shape, head->ndim, hs, sizeof hs);
            shape_text(emb->shape, emb->ndim, es, sizeof es);
            snprintf(what, sizeof what, "%s %s against %s %s", ah_dtype_name(head->dtype), hs,
                     ah_dtype_name(emb->dtype), es);
            return tied_head_differs(h, what, err);
        }
    }
    return AH_OK;
}

ah_status_t ah_hf_import_open(const char *dir, const ah_model_t *m, ah_hf_import_t *h, ah_error_t *err) {
    memset(h, 0, sizeof *h);
    h->tied_head.file = -1;
    if (snprintf(h->dir, sizeof h->dir, "%s", dir) >= (int)sizeof h->dir)
        return ah_error_set(err, AH_ERR_USAGE, "--init-from %.200s...: path too long", dir);
    h->model = *m;
    TRY(ah_hf_import_check_config(dir, m, err));
    h->n_tensors = ah_model_tensor_count(m);
    h->defs = calloc((size_t)h->n_tensors, sizeof *h->defs);
    h->found = calloc((size_t)h->n_tensors, sizeof *h->found);
    char (*hf)[AH_ST_NAME_MAX] = calloc((size_t)h->n_tensors, sizeof *hf);
    ah_status_t st = h->defs && h->found && hf ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the tensor map");
    if (st == AH_OK) ah_model_tensors(m, h->defs);
    for (int x = 0; st == AH_OK && x < h->n_tensors; x++) {
        h->found[x].file = -1;
        if (!ah_tensor_hf_name(&h->defs[x], hf[x], sizeof hf[x]))
            st = ah_error_set(err, AH_ERR_INTERNAL, "%s: Hugging Face name too long", h->defs[x].name);
    }
    if (st == AH_OK) st = open_files(h, err);
    if (st == AH_OK) st = map_tensors(h, hf, err);
    if (st == AH_OK) st = check_tensors(h, hf, err);
    free(hf);
    if (st != AH_OK) ah_hf_import_close(h);
    return st;
}

void ah_hf_import_close(ah_hf_import_t *h) {
    for (int j = 0; h->files && j < h->n_files; j++) ah_st_close(&h->files[j]);
    free(h->files);
    free(h->defs);
    free(h->found);
    memset(h, 0, sizeof *h);
    h->tied_head.file = -1;
}

/* ---- the data -------------------------------------------------------------------------------- */

float ah_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* infinity, NaN (payload kept) */
    } else if (exp == 0 && man == 0) {
        bits = sign;
    } else if (exp == 0) { /* subnormal: man * 2^-24, normalised */
        int shift = 0;
        while (!(man & 0x400u)) {
            man <<= 1;
            shift++;
        }
        bits = sign | ((uint32_t)(127 - 14 - shift) << 23) | ((man & 0x3ffu) << 13);
    } else {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

float ah_bf16_to_f32(uint16_t b) {
    const uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float element(const unsigned char *p, ah_dtype_t d) {
    float f;
    uint16_t u;
    switch (d) {
    case AH_DTYPE_F32: memcpy(&f, p, sizeof f); return f;
    case AH_DTYPE_F16: memcpy(&u, p, sizeof u); return ah_f16_to_f32(u);
    case AH_DTYPE_BF16: memcpy(&u, p, sizeof u); return ah_bf16_to_f32(u);
    }
    return 0.0f;
}

/* Flat index in the file's tensor of element `full` of ours (rows x cols). */
static int64_t file_index_of(const ah_tensor_t *x, int64_t full) {
    return x->spec->hf_transposed ? (full % x->cols) * x->rows + full / x->cols : full;
}

/* A tied model's lm_head.weight against the embedding bytes just read (emb: len bytes from byte
 * `off` of the embedding), compared in pieces of at most 1 MiB; ds: bytes per element. */
static ah_status_t check_tied_copy(const ah_hf_import_t *h, const unsigned char *emb, uint64_t off, size_t len,
                                   size_t ds, ah_error_t *err) {
    const ah_st_file_t *f = &h->files[h->tied_head.file];
    const size_t piece = ((size_t)1 << 20) / ds * ds;
    unsigned char *copy = malloc(len < piece ? len : piece);
    if (!copy) return ah_error_set(err, AH_ERR_OOM, "no host memory to read lm_head.weight from %s", f->path);
    ah_status_t st = AH_OK;
    for (size_t at = 0; st == AH_OK && at < len; at += piece) {
        const size_t n = len - at < piece ? len - at : piece;
        if ((st = ah_st_read_range(f, h->tied_head.e, off + at, copy, n, err)) != AH_OK) break;
        for (size_t b = 0; b < n; b++)
            if (copy[b] != emb[at + b]) {
                char what[64];
                snprintf(what, sizeof what, "first at element %llu", (unsigned long long)((off + at + b) / ds));
                st = tied_head_differs(h, what, err);
                break;
            }
    }
    free(copy);
    return st;
}

ah_status_t ah_hf_import_shard(const ah_hf_import_t *h, const ah_tensor_t *x, int t, int k, float *dst, int64_t n,
                               ah_error_t *err) {
    int i = 0;
    while (i < h->n_tensors && strcmp(h->defs[i].name, x->name) != 0) i++;
    if (i == h->n_tensors || h->defs[i].rows != x->rows || h->defs[i].cols != x->cols)
        return ah_error_set(err, AH_ERR_INTERNAL, "%s: not a tensor of the imported model %s", x->name, h->model.name);
    if (n != ah_tensor_shard_elems(x, t))
        return ah_error_set(err, AH_ERR_INTERNAL, "%s: a TP-%d shard has %lld elements, not %lld", x->name, t,
                            (long long)ah_tensor_shard_elems(x, t), (long long)n);
    const ah_st_file_t *f = &h->files[h->found[i].file];
    const ah_st_entry_t *e = h->found[i].e;
    const size_t ds = ah_dtype_size(e->dtype);
    /* The span of the file's tensor the shard reads: its rows for a row split, nearly all of it
     * for a column split or a transposed layout. */
    int64_t lo = -1, hi = -1;
    for (int64_t j = 0; j < n; j++) {
        const int64_t full = ah_tensor_full_index(x, t, k, j);
        if (full < 0) continue; /* vocabulary padding */
        const int64_t fi = file_index_of(x, full);
        if (lo < 0 || fi < lo) lo = fi;
        if (fi > hi) hi = fi;
    }
    if (lo < 0) { /* a shard of padding only */
        memset(dst, 0, (size_t)n * sizeof *dst);
        return AH_OK;
    }
    const size_t len = (size_t)(hi - lo + 1) * ds;
    unsigned char *buf = malloc(len);
    if (!buf) return ah_error_set(err, AH_ERR_OOM, "no host memory to read %s from %s", e->name, f->path);
    ah_status_t st = ah_st_read_range(f, e, (uint64_t)lo * ds, buf, len, err);
    if (st == AH_OK && h->tied_head.file >= 0 && i == embedding_index(h))
        st = check_tied_copy(h, buf, (uint64_t)lo * ds, len, ds, err);
    for (int64_t j = 0; st == AH_OK && j < n; j++) {
        const int64_t full = ah_tensor_full_index(x, t, k, j);
        if (full < 0) {
            dst[j] = 0.0f;
            continue;
        }
        const int64_t fi = file_index_of(x, full);
        dst[j] = element(buf + (size_t)(fi - lo) * ds, e->dtype);
        if (!isfinite(dst[j]))
            st = ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" holds %g at element %lld (flat index in the "
                              "file); training cannot start from a non-finite weight", f->path, e->name,
                              (double)dst[j], (long long)fi);
    }
    free(buf);
    return st;
}
