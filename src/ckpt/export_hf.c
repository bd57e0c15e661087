/* A committed step as a Hugging Face model: GPT-2 or LLaMA (export_hf.h). */
#include "ckpt/export_hf.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt/cloud.h"
#include "ckpt/reshard.h"
#include "ckpt/restore.h"
#include "core/json.h"
#include "core/str.h"

static int cmp_path(const void *a, const void *b) { return strcmp(a, b); }

ah_status_t ah_ckpt_node_roots(const char *dir, char (**roots)[AH_CKPT_PATH_MAX], int *n, ah_error_t *err) {
    ah_ckpt_step_info_t *info;
    int ns;
    *roots = NULL;
    *n = 0;
    if (ah_ckpt_list(dir, &info, &ns, err) != AH_OK) return err->code;
    free(info);
    DIR *d = ns > 0 ? NULL : opendir(dir);
    if (ns == 0 && !d) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", dir, strerror(errno));
    int cap = 1;
    *roots = malloc(sizeof **roots);
    if (*roots && ns > 0) snprintf((*roots)[(*n)++], AH_CKPT_PATH_MAX, "%s", dir);
    for (struct dirent *e; *roots && d && (e = readdir(d));) {
        char p[AH_CKPT_PATH_MAX];
        struct stat sb;
        if (e->d_name[0] == '.' || ah_ckpt_join(p, sizeof p, dir, e->d_name) < 0 || stat(p, &sb) != 0 ||
            !S_ISDIR(sb.st_mode))
            continue;
        if (*n == cap) {
            char (*g)[AH_CKPT_PATH_MAX] = realloc(*roots, (size_t)(cap *= 2) * sizeof *g);
            if (!g) { /* a partial list would let ckpt verify pass with nodes unchecked */
                free(*roots);
                *roots = NULL;
                break;
            }
            *roots = g;
        }
        snprintf((*roots)[(*n)++], AH_CKPT_PATH_MAX, "%s", p);
    }
    if (d) closedir(d);
    if (!*roots) return ah_error_set(err, AH_ERR_OOM, "no host memory for the node list");
    qsort(*roots, (size_t)*n, sizeof **roots, cmp_path); /* readdir's order is arbitrary */
    return AH_OK;
}

/* ---- the committed steps of every node root ------------------------------------------------- */

typedef struct {
    char (*roots)[AH_CKPT_PATH_MAX];
    int n_roots;
    ah_ckpt_manifest_t *ms; /* every committed manifest of every root */
    int *root_of;           /* per manifest: its root */
    int n;
} committed_t;

static ah_status_t committed_gather(const char *local_root, committed_t *c, ah_error_t *err) {
    memset(c, 0, sizeof *c);
    ah_status_t st = ah_ckpt_node_roots(local_root, &c->roots, &c->n_roots, err);
    for (int r = 0; st == AH_OK && r < c->n_roots; r++) {
        ah_ckpt_manifest_t *ms;
        int n;
        ah_error_t e2;
        if (ah_ckpt_load_committed(c->roots[r], &ms, &n, &e2) != AH_OK) continue; /* unreadable: nothing */
        ah_ckpt_manifest_t *g = realloc(c->ms, (size_t)(c->n + n + 1) * sizeof *g);
        int *go = g ? realloc(c->root_of, (size_t)(c->n + n + 1) * sizeof *go) : NULL;
        if (g) c->ms = g;
        if (go) c->root_of = go;
        if (!g || !go) {
            ah_ckpt_manifests_free(ms, n);
            st = ah_error_set(err, AH_ERR_OOM, "no host memory for the manifests");
            break;
        }
        for (int i = 0; i < n; i++, c->n++) {
            c->ms[c->n] = ms[i];
            c->root_of[c->n] = r;
        }
        free(ms); /* its entries moved into c->ms */
    }
    return st;
}

static void committed_free(committed_t *c) {
    ah_ckpt_manifests_free(c->ms, c->n);
    free(c->root_of);
    free(c->roots);
}

/* Whether manifest i is a copy of step of model: pieces of another run's model saved at the same
 * step under the same names must not be spliced in. */
static bool of_model(const committed_t *c, int i, int64_t step, const ah_model_t *model) {
    const ah_ckpt_meta_t *mt = &c->ms[i].meta;
    return mt->step == step && mt->has_model && ah_model_equal(&mt->model, model);
}

/* Whether some manifest of step of model lists piece `name`. */
static bool listed(const committed_t *c, int64_t step, const ah_model_t *model, const char *name) {
    for (int i = 0; i < c->n; i++)
        if (of_model(c, i, step, model) && ah_ckpt_manifest_find(&c->ms[i], name)) return true;
    return false;
}

/* The newest (or the wanted) step below `below` whose whole model some TP degree T lists (in
 * manifests of that model); -1 when none. */
static int64_t choose_step(const committed_t *c, int64_t want, int64_t below, int *T, ah_model_t *model) {
    int64_t step = -1;
    for (int i = 0; i < c->n; i++) {
        const ah_ckpt_meta_t *mt = &c->ms[i].meta;
        if (!mt->has_model || (want >= 0 && mt->step != want) || mt->step <= step || mt->step >= below) continue;
        const int max_names = (2 + (int)mt->model.n_layer) * AH_RESHARD_MAX_PIECES;
        char (*need)[AH_CKPT_NAME_MAX] = malloc((size_t)max_names * sizeof *need);
        for (int t = 1; need && t <= AH_MAX_TP; t++) {
            ah_error_t e2;
            if (ah_model_check_tp(&mt->model, t, &e2) != AH_OK) continue; /* no plan saves at this degree */
            const int nn = ah_placement_model_names(&mt->model, t, need);
            int k = 0;
            while (k < nn && listed(c, mt->step, &mt->model, need[k])) k++;
            if (k == nn) {
                step = mt->step;
                *T = t;
                *model = mt->model;
                break;
            }
        }
        free(need);
    }
    return step;
}

/* Opens piece `name` of step of model from the first node whose copy verifies; a copy listed by
 * a manifest of another model is not taken, and named if no copy is left. */
static ah_status_t open_piece(const committed_t *c, int64_t step, const ah_model_t *model, const char *name,
                              ah_st_file_t *f, ah_error_t *err) {
    char why[AH_ERROR_MSG_MAX] = "", other[AH_ERROR_MSG_MAX] = "";
    for (int m = 0; m < c->n; m++) {
        const ah_ckpt_file_t *want;
        char dir[AH_CKPT_PATH_MAX], path[AH_CKPT_PATH_MAX];
        ah_error_t e2;
        if (c->ms[m].meta.step != step || !(want = ah_ckpt_manifest_find(&c->ms[m], name))) continue;
        ah_ckpt_step_dir(dir, sizeof dir, c->roots[c->root_of[m]], step);
        const ah_ckpt_meta_t *mt = &c->ms[m].meta;
        ah_model_diff_t d;
        if (!of_model(c, m, step, model)) {
            if (other[0]) continue;
            if (mt->has_model && ah_model_diff(&mt->model, model, false, &d))
                snprintf(other, sizeof other, "; %.700s/%s lists a copy of another model (%s %s, not %s): not taken",
                         dir, AH_CKPT_MANIFEST, d.field, d.a, d.b);
            else
                snprintf(other, sizeof other, "; %.700s/%s lists a copy but records no model: not taken", dir,
                         AH_CKPT_MANIFEST);
            continue;
        }
        ah_ckpt_join(path, sizeof path, dir, name);
        if (ah_ckpt_verify_file(path, want, &e2) == AH_OK && ah_st_open(path, f, &e2) == AH_OK) return AH_OK;
        snprintf(why, sizeof why, "%.1000s", e2.msg);
    }
    return ah_error_set(err, AH_ERR_INVALID, "step %lld: no intact copy of %s (%.1000s)%s", (long long)step, name, why,
                        other);
}

/* The open pieces of one shard group: each verified and opened once, then read for every tensor of
 * the group (a group's tensors are adjacent in the table's order). */
typedef struct {
    ah_shard_group_t g;
    ah_st_file_t fs[AH_RESHARD_MAX_PIECES];
    int nf; /* opened */
} open_group_t;

static void group_close(open_group_t *o) {
    for (int j = 0; j < o->nf; j++) ah_st_close(&o->fs[j]);
    o->nf = 0;
}

/* Makes o hold the pieces of group g of step (saved at TP degree T); kept when it holds them. */
static ah_status_t group_open(const committed_t *c, int64_t step, const ah_model_t *m, int T, ah_shard_group_t g,
                              open_group_t *o, ah_error_t *err) {
    if (o->nf > 0 && o->g.kind == g.kind && o->g.layer == g.layer) return AH_OK;
    group_close(o);
    o->g = g;
    int idx[AH_RESHARD_MAX_PIECES];
    const int n = ah_reshard_pieces(m, g, T, 1, 0, idx);
    for (int j = 0; j < n; j++) {
        char name[AH_CKPT_NAME_MAX];
        ah_shard_group_name(name, g, T, idx[j]);
        const ah_status_t st = open_piece(c, step, m, name, &o->fs[j], err);
        if (st != AH_OK) {
            group_close(o);
            return st;
        }
        o->nf = j + 1;
    }
    return AH_OK;
}

/* The full tensor d (saved at TP degree T, its group's pieces open in o) in Hugging Face's layout,
 * into *out (malloc'ed). */
static ah_status_t assemble(const open_group_t *o, int T, const ah_tensor_t *d, float **out, ah_error_t *err) {
    /* Loaded as the one shard of TP degree 1 (vocabulary rows padded to a multiple of
     * AH_VOCAB_PAD), then the padding dropped: V rows whatever T the step was saved at. */
    const int64_t n = ah_tensor_elems(d), n1 = ah_tensor_shard_elems(d, 1);
    float *full = malloc((size_t)n * sizeof *full), *one = malloc((size_t)n1 * sizeof *one);
    ah_status_t st = full && one ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for %s", d->name);
    if (st == AH_OK) st = ah_reshard_load_tensor(d, "", 1, 0, T, o->fs, o->nf, one, n1, err);
    for (int64_t e = 0; st == AH_OK && e < n1; e++) {
        const int64_t f = ah_tensor_full_index(d, 1, 0, e);
        if (f >= 0) full[f] = one[e];
    }
    free(one);
    if (st == AH_OK && d->spec->hf_transposed) {
        float *tr = malloc((size_t)n * sizeof *tr);
        if (!tr) st = ah_error_set(err, AH_ERR_OOM, "no host memory for %s", d->name);
        for (int64_t r = 0; tr && r < d->rows; r++)
            for (int64_t col = 0; col < d->cols; col++) tr[col * d->rows + r] = full[r * d->cols + col];
        free(full);
        full = tr;
    }
    if (st != AH_OK) {
        free(full);
        full = NULL;
    }
    *out = full;
    return st;
}

/* OUT_DIR (when it exists) holds no sharded Hugging Face weights: a loader finding
 * model.safetensors.index.json would read those shards, not the model.safetensors written here. */
static ah_status_t check_out_dir(const char *out_dir, ah_error_t *err) {
    DIR *d = opendir(out_dir);
    if (!d) return AH_OK; /* made by write_hf, or its error said there */
    char names[512];
    ah_str_t s = ah_str_fixed(names, sizeof names);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, "model.safetensors.index.json") == 0 ||
            fnmatch("model-*-of-*.safetensors", e->d_name, 0) == 0)
            ah_str_appendf(&s, "%s%s", n++ ? ", " : "", e->d_name);
    closedir(d);
    if (n == 0) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "%s: holds %s%s, sharded weights a loader would read instead of the "
                        "model.safetensors written here; remove %s or give an empty -o directory", out_dir, names,
                        s.failed ? " ..." : "", n == 1 ? "it" : "them");
}

/* The fewest digits at which every number in v reads back as itself (ah_real_digits). */
static int real_digits(const json_t *v) {
    int p = 15;
    const char *key;
    size_t i;
    json_t *x;
    if (json_is_real(v)) p = ah_real_digits(json_real_value(v));
    json_object_foreach((json_t *)v, key, x) {
        const int q = real_digits(x);
        if (q > p) p = q;
    }
    json_array_foreach(v, i, x) {
        const int q = real_digits(x);
        if (q > p) p = q;
    }
    return p;
}

/* config as OUT_DIR/config.json, each number in the fewest digits that read back as it for the
 * whole file ("rms_norm_eps": 1e-5, not 1.0000000000000001e-5). */
static ah_status_t write_config(const json_t *cfg, const char *path, ah_error_t *err) {
    char *text = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(real_digits(cfg)));
    if (!text) return ah_error_set(err, AH_ERR_OOM, "no host memory for %s", path);
    ah_afile_t f;
    ah_status_t st = ah_afile_open(&f, path, err);
    if (st == AH_OK) st = ah_afile_write(&f, text, strlen(text), err);
    if (st == AH_OK) st = ah_afile_commit(&f, false, err);
    else ah_afile_abort(&f);
    free(text);
    return st;
}

/* OUT_DIR/model.safetensors and OUT_DIR/config.json. */
static ah_status_t write_hf(const char *out_dir, const ah_st_tensor_t *ts, int n_t, const ah_model_t *model,
                            int64_t step, ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot create the output directory: %s", out_dir, strerror(errno));
    if (ah_ckpt_join(path, sizeof path, out_dir, "model.safetensors") < 0)
        return ah_error_set(err, AH_ERR_IO, "%s: path too long", out_dir);
    json_t *meta = json_pack("{s:s}", "format", "pt");
    ah_status_t st = ah_st_save(path, ts, n_t, meta, NULL, NULL, err);
    json_decref(meta);
    if (st != AH_OK) return st;
    json_t *cfg;
    /* A LLaMA-architecture model with a sliding window is Mistral (same tensor names). */
    const bool mistral = model->arch == AH_ARCH_LLAMA && model->sliding_window > 0;
    if (model->arch == AH_ARCH_LLAMA)
        cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:b, s:s, s:b, s:b, s:s, "
                        "s:I}",
                        "architectures", mistral ? "MistralForCausalLM" : "LlamaForCausalLM", "model_type",
                        mistral ? "mistral" : "llama", "hidden_size",
                        (json_int_t)model->d_model, "intermediate_size", (json_int_t)model->d_ff,
                        "num_attention_heads", (json_int_t)model->n_head, "num_key_value_heads",
                        (json_int_t)model->n_kv_head, "num_hidden_layers", (json_int_t)model->n_layer,
                        "head_dim", (json_int_t)(model->d_model / model->n_head), "vocab_size",
                        (json_int_t)model->vocab, "max_position_embeddings", (json_int_t)model->max_pos,
                        "rms_norm_eps", model->norm_eps, "rope_theta", model->rope_theta, "tie_word_embeddings",
                        model->tied, "hidden_act", "silu", "attention_bias", false, "mlp_bias", false,
                        "torch_dtype", "float32", "autohet_step", (json_int_t)step);
    else
        cfg = json_pack("{s:[s], s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:f, s:b, s:s, s:I}",
                        "architectures", "GPT2LMHeadModel", "model_type", "gpt2", "n_layer",
                        (json_int_t)model->n_layer, "n_embd", (json_int_t)model->d_model, "n_head",
                        (json_int_t)model->n_head, "n_inner", (json_int_t)model->d_ff, "vocab_size",
                        (json_int_t)model->vocab, "n_positions", (json_int_t)model->max_pos, "n_ctx",
                        (json_int_t)model->max_pos, "activation_function", "gelu_new", "layer_norm_epsilon",
                        model->norm_eps, "tie_word_embeddings", model->tied, "torch_dtype", "float32",
                        "autohet_step", (json_int_t)step);
    if (cfg && mistral) json_object_set_new(cfg, "sliding_window", json_integer((json_int_t)model->sliding_window));
    if (cfg && model->arch == AH_ARCH_LLAMA)
        json_object_set_new(cfg, "rope_scaling", ah_rope_scaling_to_json(&model->rope_scaling));
    if (cfg && !ah_token_ids_to_json(model, cfg)) {
        json_decref(cfg);
        cfg = NULL;
    }
    ah_ckpt_join(path, sizeof path, out_dir, "config.json");
    st = cfg ? write_config(cfg, path, err) : ah_error_set(err, AH_ERR_OOM, "out of memory");
    json_decref(cfg);
    return st;
}

/* The model's tensors of one step in Hugging Face's names and layouts, as write_hf takes them. */
typedef struct {
    int n;
    ah_tensor_t *defs;
    float **data;
    ah_st_tensor_t *ts;
    char (*names)[96];
} hf_tensors_t;

static void hf_free(hf_tensors_t *h) {
    for (int i = 0; h->data && i < h->n; i++) free(h->data[i]);
    free(h->data);
    free(h->defs);
    free(h->ts);
    free(h->names);
    memset(h, 0, sizeof *h);
}

/* Reads step (saved at TP degree T) of model into h; AH_ERR_INVALID when a piece has no intact copy. */
static ah_status_t hf_read(const committed_t *c, int64_t step, int T, const ah_model_t *model, hf_tensors_t *h,
                           ah_error_t *err) {
    h->n = ah_model_tensor_count(model);
    h->defs = calloc((size_t)h->n, sizeof *h->defs);
    h->data = calloc((size_t)h->n, sizeof *h->data);
    h->ts = calloc((size_t)h->n, sizeof *h->ts);
    h->names = calloc((size_t)h->n, sizeof *h->names);
    if (!h->defs || !h->data || !h->ts || !h->names) return ah_error_set(err, AH_ERR_OOM, "no host memory for the export");
    ah_model_tensors(model, h->defs);
    open_group_t og = {.nf = 0};
    ah_status_t st = AH_OK;
    for (int i = 0; st == AH_OK && i < h->n; i++) {
        const ah_tensor_t *d = &h->defs[i];
        if ((st = group_open(c, step, model, T, ah_shard_group_of(d), &og, err)) != AH_OK ||
            (st = assemble(&og, T, d, &h->data[i], err)) != AH_OK)
            break;
        const bool tr = d->spec->hf_transposed;
        if (!ah_tensor_hf_name(d, h->names[i], sizeof h->names[i])) {
            st = ah_error_set(err, AH_ERR_INTERNAL, "%s: Hugging Face name too long", d->name);
            break;
        }
        h->ts[i] = (ah_st_tensor_t){.name = h->names[i], .dtype = AH_DTYPE_F32, .data = h->data[i]};
        h->ts[i].ndim = d->cols == 1 ? 1 : 2;
        h->ts[i].shape[0] = tr ? d->cols : d->rows;
        h->ts[i].shape[1] = tr ? d->rows : d->cols;
    }
    group_close(&og);
    return st;
}

/* Appends to sk the steps newer than step whose manifest is damaged (it does not load), per node. */
static void damaged_newer(const committed_t *c, int64_t step, ah_str_t *sk) {
    for (int r = 0; r < c->n_roots; r++) {
        ah_ckpt_step_info_t *info;
        int n;
        ah_error_t e2;
        if (ah_ckpt_list(c->roots[r], &info, &n, &e2) != AH_OK) continue;
        for (int i = 0; i < n; i++)
            if (info[i].damaged && info[i].step > step)
                ah_str_appendf(sk, "%sstep %lld: the manifest is damaged (%s)", sk->len ? "; " : "",
                               (long long)info[i].step, info[i].note);
        free(info);
    }
}

ah_status_t ah_ckpt_export_hf(const char *local_root, int64_t want, const char *out_dir, int64_t *step_out,
                              char *skipped, size_t skipped_cap, ah_error_t *err) {
    committed_t c;
    int T = 0;
    ah_model_t model;
    hf_tensors_t h = {0};
    ah_str_t sk = ah_str_fixed(skipped, skipped_cap);
    int64_t step = -1;
    ah_status_t st = check_out_dir(out_dir, err);
    if (st == AH_OK) st = committed_gather(local_root, &c, err);
    else memset(&c, 0, sizeof c);
    /* Without --step, a step with a piece no node holds intact gives way to the next older one. */
    for (int64_t below = INT64_MAX; st == AH_OK; below = step) {
        if ((step = choose_step(&c, want, below, &T, &model)) < 0) {
            st = want >= 0 ? ah_error_set(err, AH_ERR_INVALID, "%s: step %lld is not committed with every shard of the "
                                          "model in any node directory; `autohet ckpt ls --local-root DIR/NODE` lists "
                                          "the steps", local_root, (long long)want)
                           : ah_error_set(err, AH_ERR_INVALID, "%s: no committed step with every shard of the model "
                                          "%s(looked in %d node director%s)%s%s", local_root, sk.len ? "intact " : "",
                                          c.n_roots, c.n_roots == 1 ? "y" : "ies", sk.len ? ": " : "", skipped);
            break;
        }
        if ((st = hf_read(&c, step, T, &model, &h, err)) != AH_ERR_INVALID || want >= 0) break;
        ah_str_appendf(&sk, "%s%s", sk.len ? "; " : "", err->msg);
        hf_free(&h);
        st = AH_OK;
    }
    if (st == AH_OK && want < 0) damaged_newer(&c, step, &sk);
    if (st == AH_OK) st = write_hf(out_dir, h.ts, h.n, &model, step, err);
    if (st == AH_OK && step_out) *step_out = step;
    hf_free(&h);
    committed_free(&c);
    return st;
}
