#include "spec/model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/str.h"

typedef struct {
    const char *name;
    ah_arch_t arch;
    int64_t L, C, H, KV, FF, V, P;
    bool tied;
    double eps, theta;
    int64_t bos, eos; /* special token ids; -1: none (the tiny models) */
    const ah_rope_scaling_t *scaling; /* LLaMA 3.1's rotary scaling; NULL: none */
} preset_t;

/* LLaMA 3.1's rope_scaling, as meta-llama/Llama-3.1-8B's and -70B's config.json give it. */
static const ah_rope_scaling_t LLAMA31_SCALING = {.factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                                                  .original_max_pos = 8192};

/* Shapes from each model's published Hugging Face config.json (openai-community/gpt2*,
 * meta-llama/Llama-2-*-hf, meta-llama/Meta-Llama-3-8B, meta-llama/Llama-3.1-8B and -70B: their
 * context 131072 tokens with LLAMA31_SCALING, rope_theta 500000, bos 128000, eos 128001) and, for
 * GPT-3 175B, Table 2.1 of Brown et al. 2020 (96 layers, d_model 12288, 96 heads, n_ctx 2048, GPT-2
 * vocabulary), with their bos and eos token ids (GPT-3's are GPT-2's tokenizer's). The tiny ones
 * are ours, for tests and the CPU demo. */
static const preset_t PRESETS[] = {
    {"gpt2-124m", AH_ARCH_GPT2, 12, 768, 12, 12, 3072, 50257, 1024, true, 1e-5, 0, 50256, 50256, NULL},
    {"gpt2-350m", AH_ARCH_GPT2, 24, 1024, 16, 16, 4096, 50257, 1024, true, 1e-5, 0, 50256, 50256, NULL},
    {"gpt2-774m", AH_ARCH_GPT2, 36, 1280, 20, 20, 5120, 50257, 1024, true, 1e-5, 0, 50256, 50256, NULL},
    {"gpt2-1.5b", AH_ARCH_GPT2, 48, 1600, 25, 25, 6400, 50257, 1024, true, 1e-5, 0, 50256, 50256, NULL},
    {"gpt3-175b", AH_ARCH_GPT2, 96, 12288, 96, 96, 49152, 50257, 2048, true, 1e-5, 0, 50256, 50256, NULL},
    {"llama2-7b", AH_ARCH_LLAMA, 32, 4096, 32, 32, 11008, 32000, 4096, false, 1e-5, 10000, 1, 2, NULL},
    {"llama2-13b", AH_ARCH_LLAMA, 40, 5120, 40, 40, 13824, 32000, 4096, false, 1e-5, 10000, 1, 2, NULL},
    {"llama2-70b", AH_ARCH_LLAMA, 80, 8192, 64, 8, 28672, 32000, 4096, false, 1e-5, 10000, 1, 2, NULL},
    {"llama3-8b", AH_ARCH_LLAMA, 32, 4096, 32, 8, 14336, 128256, 8192, false, 1e-5, 500000, 128000, 128001, NULL},
    {"llama3.1-8b", AH_ARCH_LLAMA, 32, 4096, 32, 8, 14336, 128256, 131072, false, 1e-5, 500000, 128000, 128001,
     &LLAMA31_SCALING},
    {"llama3.1-70b", AH_ARCH_LLAMA, 80, 8192, 64, 8, 28672, 128256, 131072, false, 1e-5, 500000, 128000, 128001,
     &LLAMA31_SCALING},
    /* tiny models for tests and the CPU demo; tiny-llama-tp4 has the 4 key/value heads TP 4
     * needs (tiny-llama's 2 allow TP 2) */
    {"tiny-gpt2", AH_ARCH_GPT2, 4, 64, 4, 4, 256, 256, 64, true, 1e-5, 0, -1, -1, NULL},
    {"tiny-llama", AH_ARCH_LLAMA, 4, 64, 4, 2, 176, 256, 64, false, 1e-5, 10000, -1, -1, NULL},
    {"tiny-llama-tp4", AH_ARCH_LLAMA, 4, 64, 8, 4, 192, 256, 64, false, 1e-5, 10000, -1, -1, NULL},
    {"demo-gpt2", AH_ARCH_GPT2, 6, 128, 4, 4, 512, 256, 128, true, 1e-5, 0, -1, -1, NULL},
};
#define N_PRESETS ((int)(sizeof PRESETS / sizeof PRESETS[0]))

int ah_model_preset_count(void) { return N_PRESETS; }
const char *ah_model_preset_name(int i) { return (i >= 0 && i < N_PRESETS) ? PRESETS[i].name : NULL; }
const char *ah_arch_name(ah_arch_t a) { return a == AH_ARCH_LLAMA ? "llama" : "gpt2"; }

static void preset_list(char *buf, size_t cap) {
    ah_str_t s = ah_str_fixed(buf, cap);
    for (int i = 0; i < N_PRESETS; i++) ah_str_appendf(&s, "%s%s", i ? ", " : "", PRESETS[i].name);
}

ah_status_t ah_model_preset(const char *name, ah_model_t *m, ah_error_t *err) {
    for (int i = 0; i < N_PRESETS; i++) {
        const preset_t *p = &PRESETS[i];
        if (strcmp(p->name, name) != 0) continue;
        memset(m, 0, sizeof *m);
        snprintf(m->name, sizeof m->name, "%s", p->name);
        m->arch = p->arch;
        m->n_layer = p->L;
        m->d_model = p->C;
        m->n_head = p->H;
        m->n_kv_head = p->KV;
        m->d_ff = p->FF;
        m->vocab = p->V;
        m->max_pos = p->P;
        m->tied = p->tied;
        m->norm_eps = p->eps;
        m->rope_theta = p->theta;
        if (p->scaling) m->rope_scaling = *p->scaling;
        if (p->bos >= 0) m->tokens = (ah_token_ids_t){.has_bos = true, .bos = p->bos, .n_eos = 1, .eos = {p->eos}};
        return AH_OK;
    }
    char list[1024];
    preset_list(list, sizeof list);
    return ah_error_set(err, AH_ERR_INVALID,
                        "unknown model \"%s\": give a preset (%s) or a path to a Hugging Face config.json",
                        name, list);
}

/* Whether --model's value names a config.json rather than a preset. */
static bool is_config_path(const char *name_or_path) {
    return strchr(name_or_path, '/') || strstr(name_or_path, ".json");
}

ah_status_t ah_model_load(const char *name_or_path, ah_model_t *m, ah_error_t *err) {
    if (is_config_path(name_or_path)) return ah_model_from_hf_config(name_or_path, m, err);
    return ah_model_preset(name_or_path, m, err);
}

int ah_model_unapplied_dropout(const char *name_or_path, char *buf, size_t cap) {
    static const char *const keys[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop"};
    ah_str_t s = ah_str_fixed(buf, cap);
    json_t *cfg;
    ah_error_t err;
    int n = 0;
    if (!is_config_path(name_or_path) || ah_json_load_file(name_or_path, &cfg, &err) != AH_OK) return 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const double p = json_number_value(json_object_get(cfg, keys[i])); /* 0 when absent */
        if (p != 0) ah_str_appendf(&s, "%s%s %g", n++ ? ", " : "", keys[i], p);
    }
    json_decref(cfg);
    return n;
}

ah_status_t ah_model_validate(const ah_model_t *m, const char *where, ah_error_t *err) {
    struct { const char *field; int64_t v; } pos[] = {
        {"n_layer", m->n_layer}, {"d_model", m->d_model}, {"n_head", m->n_head},
        {"n_kv_head", m->n_kv_head}, {"d_ff", m->d_ff}, {"vocab", m->vocab}, {"max_pos", m->max_pos}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
        if (pos[i].v < 1)
            return ah_error_set(err, AH_ERR_INVALID, "%s: %s must be at least 1, got %lld", where,
                                pos[i].field, (long long)pos[i].v);
    /* Limits far beyond any real model, so that every count in the cost model (parameters, FLOPs,
     * activation bytes) stays exact in int64 arithmetic. */
    struct { const char *field; int64_t v, max; } lim[] = {
        {"n_layer", m->n_layer, 100000},      {"d_model", m->d_model, (int64_t)1 << 18},
        {"d_ff", m->d_ff, (int64_t)1 << 20},  {"vocab", m->vocab, (int64_t)1 << 22},
        {"max_pos", m->max_pos, (int64_t)1 << 20}};
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v > lim[i].max)
            return ah_error_set(err, AH_ERR_INVALID, "%s: %s %lld is larger than autohet supports "
                                "(at most %lld)", where, lim[i].field, (long long)lim[i].v,
                                (long long)lim[i].max);
    double C = (double)m->d_model, est = (double)m->n_layer * (4 * C * C + 3 * C * (double)m->d_ff) +
                                         2 * (double)m->vocab * C + (double)m->max_pos * C;
    if (est > 1e15)
        return ah_error_set(err, AH_ERR_INVALID, "%s: about %.3g parameters is more than autohet "
                            "supports (10^15)", where, est);
    if (m->d_model % m->n_head)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: hidden size %lld is not divisible by the %lld attention heads", where,
                            (long long)m->d_model, (long long)m->n_head);
    if (m->n_head % m->n_kv_head)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: %lld attention heads are not divisible by the %lld key/value heads",
                            where, (long long)m->n_head, (long long)m->n_kv_head);
    if (m->arch == AH_ARCH_GPT2 && m->n_kv_head != m->n_head)
        return ah_error_set(err, AH_ERR_INVALID, "%s: GPT-2 models have no grouped-query attention "
                            "(n_kv_head %lld != n_head %lld)", where, (long long)m->n_kv_head,
                            (long long)m->n_head);
    if (m->sliding_window < 0 || (m->sliding_window > 0 && m->sliding_window >= m->max_pos))
        return ah_error_set(err, AH_ERR_INVALID, "%s: sliding_window %lld must be 0 (none) or shorter "
                            "than the %lld positions", where, (long long)m->sliding_window,
                            (long long)m->max_pos);
    if (m->arch == AH_ARCH_GPT2 && m->sliding_window)
        return ah_error_set(err, AH_ERR_INVALID, "%s: GPT-2 models have no sliding attention window", where);
    if (!(m->norm_eps > 0 && m->norm_eps < 1))
        return ah_error_set(err, AH_ERR_INVALID, "%s: norm epsilon must be in (0, 1), got %g", where,
                            m->norm_eps);
    return AH_OK;
}

ah_status_t ah_model_check_tp(const ah_model_t *m, int t, ah_error_t *err) {
    if (t < 1) return ah_error_set(err, AH_ERR_INVALID, "tensor-parallel degree must be >= 1, got %d", t);
    const char *what[] = {"attention head count", "key/value head count", "MLP width"};
    const int64_t of[] = {m->n_head, m->n_kv_head, m->d_ff};
    for (int i = 0; i < 3; i++)
        if (of[i] % t)
            return ah_error_set(err, AH_ERR_INVALID,
                                "model %s cannot be split %d ways by tensor parallelism: its %s %lld is not "
                                "divisible by %d (the attention head count %lld, the key/value head count %lld and the MLP "
                                "width %lld must all be)", m->name, t, what[i], (long long)of[i], t,
                                (long long)m->n_head, (long long)m->n_kv_head, (long long)m->d_ff);
    return AH_OK;
}

/* v as ah_model_diff writes it: the fewest digits that read back as v. */
static void real_text(double v, char *buf, size_t cap) { snprintf(buf, cap, "%.*g", ah_real_digits(v), v); }

bool ah_model_diff(const ah_model_t *a, const ah_model_t *b, bool hf, ah_model_diff_t *d) {
    if (a->arch != b->arch) {
        snprintf(d->field, sizeof d->field, "%s", hf ? "model_type" : "arch");
        snprintf(d->a, sizeof d->a, "%s", ah_arch_name(a->arch));
        snprintf(d->b, sizeof d->b, "%s", ah_arch_name(b->arch));
        return true;
    }
    const bool gpt2 = a->arch == AH_ARCH_GPT2;
    const struct {
        const char *hf, *obj;
        int64_t a, b;
    } ints[] = {
        {gpt2 ? "n_layer" : "num_hidden_layers", "n_layer", a->n_layer, b->n_layer},
        {gpt2 ? "n_embd" : "hidden_size", "d_model", a->d_model, b->d_model},
        {gpt2 ? "n_head" : "num_attention_heads", "n_head", a->n_head, b->n_head},
        {"num_key_value_heads", "n_kv_head", a->n_kv_head, b->n_kv_head}, /* GPT-2: n_head both */
        {gpt2 ? "n_inner" : "intermediate_size", "d_ff", a->d_ff, b->d_ff},
        {"vocab_size", "vocab", a->vocab, b->vocab},
        {gpt2 ? "n_positions" : "max_position_embeddings", "max_pos", a->max_pos, b->max_pos},
        {"sliding_window", "sliding_window", a->sliding_window, b->sliding_window}, /* 0: none */
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        if (ints[i].a == ints[i].b) continue;
        snprintf(d->field, sizeof d->field, "%s", hf ? ints[i].hf : ints[i].obj);
        snprintf(d->a, sizeof d->a, "%lld", (long long)ints[i].a);
        snprintf(d->b, sizeof d->b, "%lld", (long long)ints[i].b);
        return true;
    }
    if (a->tied != b->tied) {
        snprintf(d->field, sizeof d->field, "%s", hf ? "tie_word_embeddings" : "tied");
        snprintf(d->a, sizeof d->a, "%s", a->tied ? "true" : "false");
        snprintf(d->b, sizeof d->b, "%s", b->tied ? "true" : "false");
        return true;
    }
    const struct {
        const char *hf, *obj;
        double a, b;
    } nums[] = {
        {gpt2 ? "layer_norm_epsilon" : "rms_norm_eps", "norm_eps", a->norm_eps, b->norm_eps},
        {"rope_theta", "rope_theta", a->rope_theta, b->rope_theta}, /* GPT-2: 0 both */
        {"rope_scaling.factor", "rope_scaling.factor", a->rope_scaling.factor, b->rope_scaling.factor}, /* 0: none */
        {"rope_scaling.low_freq_factor", "rope_scaling.low_freq_factor", a->rope_scaling.low_freq_factor,
         b->rope_scaling.low_freq_factor},
        {"rope_scaling.high_freq_factor", "rope_scaling.high_freq_factor", a->rope_scaling.high_freq_factor,
         b->rope_scaling.high_freq_factor},
        {"rope_scaling.original_max_position_embeddings", "rope_scaling.original_max_position_embeddings",
         (double)a->rope_scaling.original_max_pos, (double)b->rope_scaling.original_max_pos},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (nums[i].a == nums[i].b) continue;
        snprintf(d->field, sizeof d->field, "%s", hf ? nums[i].hf : nums[i].obj);
        real_text(nums[i].a, d->a, sizeof d->a);
        real_text(nums[i].b, d->b, sizeof d->b);
        return true;
    }
    return false;
}

bool ah_model_equal(const ah_model_t *a, const ah_model_t *b) {
    ah_model_diff_t d;
    return !ah_model_diff(a, b, false, &d);
}

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)

int64_t ah_model_context(const ah_model_t *m) {
    return m->sliding_window > 0 && m->sliding_window < m->max_pos ? m->sliding_window : m->max_pos;
}

ah_status_t ah_model_check_window(const ah_model_t *m, int64_t seq_len, const char *what, ah_error_t *err) {
    if (m->sliding_window <= 0 || seq_len <= m->sliding_window) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID,
                        "%s %lld is longer than model %s's sliding attention window of %lld tokens "
                        "(config sliding_window); the runtime computes full causal attention, which is "
                        "the model's attention only within the window: use at most %lld",
                        what, (long long)seq_len, m->name, (long long)m->sliding_window,
                        (long long)m->sliding_window);
}

/* An optional integer config field that transformers also takes as null, meaning absent: *out is
 * left as it is then. */
static ah_status_t get_int_or_null(const json_t *cfg, const char *where, const char *key, int64_t min, int64_t max,
                                   int64_t *out, ah_error_t *err) {
    const json_t *v = json_object_get(cfg, key);
    return v && !json_is_null(v) ? ah_json_get_int(cfg, where, key, true, min, max, out, err) : AH_OK;
}

/* The random init's std under `key` (a config's initializer_range, a model object's init_std):
 * absent leaves *out as it is (0: the default 0.02); a value must be a number in (0, 1]. */
static ah_status_t get_init_std(const json_t *obj, const char *where, const char *key, double *out, ah_error_t *err) {
    if (!json_object_get(obj, key)) return AH_OK;
    double v = 0;
    TRY(ah_json_get_num(obj, where, key, true, 0, 1, &v, err));
    if (!(v > 0))
        return ah_error_set(err, AH_ERR_INVALID, "%s.%s: 0; the std of the weights' normal initialisation must be "
                            "above 0 (transformers' default is 0.02)", where, key);
    *out = v;
    return AH_OK;
}

/* The token ids of a config or model object (ah_token_ids_t): bos_token_id and pad_token_id an
 * integer or null, eos_token_id an integer, a list of them or null; any other value is refused with
 * the field named. Ids are kept as given (old LLaMA configs carry a pad_token_id of -1). */
static ah_status_t token_ids_from_json(const json_t *obj, const char *where, ah_token_ids_t *ids, ah_error_t *err) {
    const int64_t BIG = (int64_t)1 << 40;
    memset(ids, 0, sizeof *ids);
    ids->has_bos = json_object_get(obj, "bos_token_id") && !json_is_null(json_object_get(obj, "bos_token_id"));
    ids->has_pad = json_object_get(obj, "pad_token_id") && !json_is_null(json_object_get(obj, "pad_token_id"));
    TRY(get_int_or_null(obj, where, "bos_token_id", -BIG, BIG, &ids->bos, err));
    TRY(get_int_or_null(obj, where, "pad_token_id", -BIG, BIG, &ids->pad, err));
    const json_t *eos = json_object_get(obj, "eos_token_id");
    if (!eos || json_is_null(eos)) return AH_OK;
    if (!json_is_array(eos)) {
        ids->n_eos = 1;
        return ah_json_get_int(obj, where, "eos_token_id", true, -BIG, BIG, &ids->eos[0], err);
    }
    const size_t n = json_array_size(eos);
    if (n < 1 || n > AH_MODEL_MAX_EOS)
        return ah_error_set(err, AH_ERR_INVALID, "%s.eos_token_id: a list of %zu ids; autohet keeps 1 to %d", where,
                            n, AH_MODEL_MAX_EOS);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(eos, i);
        if (!json_is_integer(v))
            return ah_error_set(err, AH_ERR_INVALID, "%s.eos_token_id[%zu]: expected an integer id, got %s", where,
                                i, ah_json_type_name(v));
        ids->eos[i] = (int64_t)json_integer_value(v);
    }
    ids->n_eos = (int)n;
    ids->eos_list = true;
    return AH_OK;
}

json_t *ah_token_ids_to_json(const ah_model_t *model, json_t *obj) {
    const ah_token_ids_t *ids = &model->tokens;
    bool ok = true;
    if (ids->has_bos) ok &= json_object_set_new(obj, "bos_token_id", json_integer((json_int_t)ids->bos)) == 0;
    if (ids->n_eos && !ids->eos_list)
        ok &= json_object_set_new(obj, "eos_token_id", json_integer((json_int_t)ids->eos[0])) == 0;
    if (ids->n_eos && ids->eos_list) {
        json_t *list = json_array();
        for (int i = 0; list && i < ids->n_eos; i++) ok &= json_array_append_new(list, json_integer((json_int_t)ids->eos[i])) == 0;
        ok &= list && json_object_set_new(obj, "eos_token_id", list) == 0;
    }
    if (ids->has_pad) ok &= json_object_set_new(obj, "pad_token_id", json_integer((json_int_t)ids->pad)) == 0;
    return ok ? obj : NULL;
}

/* A boolean config field whose value `bad` asks for what the runtime does not compute. */
static ah_status_t refuse_bool(const json_t *cfg, const char *where, const char *key, bool bad,
                               const char *why, ah_error_t *err) {
    bool v = !bad;
    TRY(ah_json_get_bool(cfg, where, key, false, &v, err));
    if (v != bad) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "%s.%s: %s; %s", where, key, bad ? "true" : "false", why);
}

/* A string config field (def when absent) that must be one of `ok` (NULL-terminated). */
static ah_status_t require_str(const json_t *cfg, const char *where, const char *key, const char *def,
                               const char *const *ok, const char *why, ah_error_t *err) {
    char v[64];
    snprintf(v, sizeof v, "%s", def);
    TRY(ah_json_get_str(cfg, where, key, false, v, sizeof v, err));
    for (int i = 0; ok[i]; i++)
        if (strcmp(v, ok[i]) == 0) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "%s.%s: \"%s\"; %s", where, key, v, why);
}

/* The fields of a GPT-2 config that would change what the model computes. */
static ah_status_t gpt2_refusals(const json_t *cfg, const char *where, ah_error_t *err) {
    static const char *const tanh_gelu[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    char act[64] = "gelu_new";
    TRY(ah_json_get_str(cfg, where, "activation_function", false, act, sizeof act, err));
    TRY(require_str(cfg, where, "activation_function", "gelu_new", tanh_gelu,
                    strcmp(act, "gelu") == 0
                        ? "Hugging Face's \"gelu\" is the exact (erf) GELU, and the runtime's GPT-2 MLP "
                          "computes the tanh approximation (\"gelu_new\", \"gelu_pytorch_tanh\"), a "
                          "different function: autohet cannot train this model as it is defined"
                        : "the runtime's GPT-2 MLP computes the tanh GELU only (\"gelu_new\", "
                          "\"gelu_pytorch_tanh\")",
                    err));
    TRY(refuse_bool(cfg, where, "scale_attn_weights", false,
                    "the runtime's attention always scales the scores by 1/sqrt(head dim)", err));
    return refuse_bool(cfg, where, "scale_attn_by_inverse_layer_idx", true,
                       "the runtime's attention does not scale the scores by the layer index", err);
}

/* A rotary scaling object `name` of `where`: null or absent, none; rope_type "default", none;
 * LLaMA 3.1's "llama3" scaling with its four fields; any other kind or field is refused with its
 * name (it would change the rotary angles). theta_key: transformers v5's rope_parameters, which
 * also holds rope_theta (read into *theta). */
static ah_status_t rope_scaling_from_json(const json_t *rs, const char *where, const char *name, bool theta_key,
                                          double *theta, ah_rope_scaling_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (!rs || json_is_null(rs)) return AH_OK;
    char at[300], type[32] = "";
    snprintf(at, sizeof at, "%s.%s", where, name);
    if (!json_is_object(rs))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected null or an object, got %s", at, ah_json_type_name(rs));
    /* "type": older configs; with neither, the message names the current key */
    const char *key = json_object_get(rs, "type") && !json_object_get(rs, "rope_type") ? "type" : "rope_type";
    TRY(ah_json_get_str(rs, at, key, true, type, sizeof type, err));
    const bool llama3 = strcmp(type, "llama3") == 0;
    if (!llama3 && strcmp(type, "default") != 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.%s is \"%s\": the runtime implements LLaMA 3.1's \"llama3\" rotary scaling "
                            "only (or none: rope_scaling null, rope_type \"default\")", at, key, type);
    /* rope_theta last: only transformers v5's rope_parameters holds it */
    static const char *const keys_llama3[] = {"rope_type", "type", "factor", "low_freq_factor", "high_freq_factor",
                                              "original_max_position_embeddings", "rope_theta", NULL};
    static const char *const keys_default[] = {"rope_type", "type", "rope_theta", NULL};
    const char *allowed[sizeof keys_llama3 / sizeof *keys_llama3];
    size_t n = 0;
    for (const char *const *k = llama3 ? keys_llama3 : keys_default; *k; k++) allowed[n++] = *k;
    allowed[theta_key ? n : n - 1] = NULL;
    if (!theta_key && json_object_get(rs, "rope_theta"))
        return ah_error_set(err, AH_ERR_INVALID, "%s: unknown field \"rope_theta\" (rope_theta is a field of the "
                            "config itself)", at);
    TRY(ah_json_check_keys(rs, at, allowed, err));
    if (theta_key) TRY(ah_json_get_num(rs, at, "rope_theta", false, 1, 1e12, theta, err));
    if (!llama3) return AH_OK;
    TRY(ah_json_get_num(rs, at, "factor", true, 1, 1e6, &out->factor, err));
    TRY(ah_json_get_num(rs, at, "low_freq_factor", true, 1e-6, 1e6, &out->low_freq_factor, err));
    TRY(ah_json_get_num(rs, at, "high_freq_factor", true, 1e-6, 1e6, &out->high_freq_factor, err));
    TRY(ah_json_get_int(rs, at, "original_max_position_embeddings", true, 1, (int64_t)1 << 40,
                        &out->original_max_pos, err));
    if (!(out->high_freq_factor > out->low_freq_factor))
        return ah_error_set(err, AH_ERR_INVALID, "%s: high_freq_factor %g must exceed low_freq_factor %g", at,
                            out->high_freq_factor, out->low_freq_factor);
    return AH_OK;
}

/* A config's rotary settings: rope_theta and rope_scaling, or transformers v5's rope_parameters
 * (rope_type, rope_theta and the kind's fields in one object); both forms at once are refused. */
static ah_status_t rope_from_config(const json_t *cfg, const char *where, ah_model_t *m, ah_error_t *err) {
    const json_t *v5 = json_object_get(cfg, "rope_parameters"), *rs = json_object_get(cfg, "rope_scaling");
    if (!v5 || json_is_null(v5))
        return rope_scaling_from_json(rs, where, "rope_scaling", false, NULL, &m->rope_scaling, err);
    if ((rs && !json_is_null(rs)) || json_object_get(cfg, "rope_theta"))
        return ah_error_set(err, AH_ERR_INVALID, "%s: both rope_parameters and %s; give one form", where,
                            rs && !json_is_null(rs) ? "rope_scaling" : "rope_theta");
    return rope_scaling_from_json(v5, where, "rope_parameters", true, &m->rope_theta, &m->rope_scaling, err);
}

/* The fields of a LLaMA / Mistral config that would change what the model computes, and a Mistral
 * config's sliding window (0 when none, or when no shorter than the context; without the key,
 * transformers' MistralConfig default, 4096; null: none). A LLaMA config's sliding_window is not
 * read: transformers' LLaMA has no sliding window and ignores the key, so it changes nothing. */
static ah_status_t llama_refusals(const json_t *cfg, const char *where, bool mistral, ah_model_t *m,
                                  ah_error_t *err) {
    static const char *const silu[] = {"silu", NULL};
    double dropout = 0;
    TRY(ah_json_get_num(cfg, where, "attention_dropout", false, 0, 1, &dropout, err));
    if (dropout != 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.attention_dropout: %g; the runtime trains without dropout "
                            "(LLaMA's published configs have 0.0)", where, dropout);
    TRY(refuse_bool(cfg, where, "attention_bias", true,
                    "the runtime's LLaMA attention has no biases on its q, k, v and o projections", err));
    TRY(refuse_bool(cfg, where, "mlp_bias", true,
                    "the runtime's LLaMA MLP has no biases on its gate, up and down projections", err));
    TRY(require_str(cfg, where, "hidden_act", "silu", silu,
                    "the runtime's LLaMA MLP is SwiGLU, whose gate is \"silu\"", err));
    TRY(rope_from_config(cfg, where, m, err));
    if (!mistral) return AH_OK;
    if (!json_object_get(cfg, "sliding_window")) m->sliding_window = 4096;
    else TRY(get_int_or_null(cfg, where, "sliding_window", 1, (int64_t)1 << 40, &m->sliding_window, err));
    if (m->sliding_window >= m->max_pos) m->sliding_window = 0; /* every allowed sequence fits */
    return AH_OK;
}

ah_status_t ah_model_from_hf_json(const struct json_t *cfg_, const char *where, ah_model_t *m,
                                  ah_error_t *err) {
    const json_t *cfg = (const json_t *)cfg_;
    if (!json_is_object(cfg))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected a JSON object, got %s", where,
                            ah_json_type_name(cfg));
    memset(m, 0, sizeof *m);
    char type[64] = "";
    TRY(ah_json_get_str(cfg, where, "model_type", false, type, sizeof type, err));
    const int64_t BIG = (int64_t)1 << 40;
    bool gpt2 = strcmp(type, "gpt2") == 0 || (type[0] == 0 && json_object_get(cfg, "n_layer"));
    const bool mistral = strcmp(type, "mistral") == 0;
    bool llama = strcmp(type, "llama") == 0 || mistral ||
                 (type[0] == 0 && json_object_get(cfg, "num_hidden_layers"));
    if (gpt2) {
        m->arch = AH_ARCH_GPT2;
        TRY(ah_json_get_int(cfg, where, "n_layer", true, 1, 100000, &m->n_layer, err));
        TRY(ah_json_get_int(cfg, where, "n_embd", true, 1, BIG, &m->d_model, err));
        TRY(ah_json_get_int(cfg, where, "n_head", true, 1, BIG, &m->n_head, err));
        TRY(ah_json_get_int(cfg, where, "vocab_size", true, 1, BIG, &m->vocab, err));
        TRY(ah_json_get_int(cfg, where, "n_positions", true, 1, BIG, &m->max_pos, err));
        m->n_kv_head = m->n_head;
        m->d_ff = 4 * m->d_model;
        TRY(get_int_or_null(cfg, where, "n_inner", 1, BIG, &m->d_ff, err));
        m->tied = true;
        TRY(ah_json_get_bool(cfg, where, "tie_word_embeddings", false, &m->tied, err));
        m->norm_eps = 1e-5;
        TRY(ah_json_get_num(cfg, where, "layer_norm_epsilon", false, 0, 1, &m->norm_eps, err));
        TRY(gpt2_refusals(cfg, where, err));
    } else if (llama) {
        m->arch = AH_ARCH_LLAMA;
        TRY(ah_json_get_int(cfg, where, "num_hidden_layers", true, 1, 100000, &m->n_layer, err));
        TRY(ah_json_get_int(cfg, where, "hidden_size", true, 1, BIG, &m->d_model, err));
        TRY(ah_json_get_int(cfg, where, "num_attention_heads", true, 1, BIG, &m->n_head, err));
        m->n_kv_head = m->n_head;
        TRY(get_int_or_null(cfg, where, "num_key_value_heads", 1, BIG, &m->n_kv_head, err));
        TRY(ah_json_get_int(cfg, where, "intermediate_size", true, 1, BIG, &m->d_ff, err));
        TRY(ah_json_get_int(cfg, where, "vocab_size", true, 1, BIG, &m->vocab, err));
        m->max_pos = 2048;
        TRY(ah_json_get_int(cfg, where, "max_position_embeddings", false, 1, BIG, &m->max_pos, err));
        m->tied = false;
        TRY(ah_json_get_bool(cfg, where, "tie_word_embeddings", false, &m->tied, err));
        m->norm_eps = 1e-6;
        TRY(ah_json_get_num(cfg, where, "rms_norm_eps", false, 0, 1, &m->norm_eps, err));
        m->rope_theta = 10000;
        TRY(ah_json_get_num(cfg, where, "rope_theta", false, 1, 1e12, &m->rope_theta, err));
        int64_t hd = 0; /* an integral number such as 16.0 is read as 16, like every integer field */
        TRY(get_int_or_null(cfg, where, "head_dim", 1, BIG, &hd, err));
        /* hd * n_head == d_model, written so that a huge head_dim cannot overflow */
        if (hd && (m->d_model % m->n_head || hd != m->d_model / m->n_head))
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s.head_dim: %lld x %lld heads != hidden_size %lld; autohet needs "
                                "head_dim = hidden_size / num_attention_heads",
                                where, (long long)hd, (long long)m->n_head, (long long)m->d_model);
        TRY(llama_refusals(cfg, where, mistral, m, err));
    } else {
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: model_type \"%s\" is not supported: autohet reads GPT-2 configs "
                            "(model_type \"gpt2\": n_layer, n_embd, n_head, vocab_size, n_positions) "
                            "and LLaMA configs (model_type \"llama\": num_hidden_layers, hidden_size, ...)",
                            where, type);
    }
    TRY(token_ids_from_json(cfg, where, &m->tokens, err));
    TRY(get_init_std(cfg, where, "initializer_range", &m->init_std, err));
    snprintf(m->name, sizeof m->name, "%.63s", where);
    return ah_model_validate(m, where, err);
}

ah_status_t ah_model_from_hf_config(const char *path, ah_model_t *m, ah_error_t *err) {
    json_t *cfg;
    TRY(ah_json_load_file(path, &cfg, err));
    ah_status_t s = ah_model_from_hf_json(cfg, path, m, err);
    json_decref(cfg);
    return s;
}

struct json_t *ah_rope_scaling_to_json(const ah_rope_scaling_t *r) {
    if (r->factor <= 0) return json_null();
    return json_pack("{s:s, s:f, s:f, s:f, s:I}", "rope_type", "llama3", "factor", r->factor, "low_freq_factor",
                     r->low_freq_factor, "high_freq_factor", r->high_freq_factor, "original_max_position_embeddings",
                     (json_int_t)r->original_max_pos);
}

struct json_t *ah_model_to_json(const ah_model_t *m) {
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:f}", "name", m->name,
                          "arch", ah_arch_name(m->arch), "n_layer", (json_int_t)m->n_layer, "d_model",
                          (json_int_t)m->d_model, "n_head", (json_int_t)m->n_head, "n_kv_head",
                          (json_int_t)m->n_kv_head, "d_ff", (json_int_t)m->d_ff, "vocab",
                          (json_int_t)m->vocab, "max_pos", (json_int_t)m->max_pos, "tied", m->tied,
                          "norm_eps", m->norm_eps);
    if (o && m->arch == AH_ARCH_LLAMA) json_object_set_new(o, "rope_theta", json_real(m->rope_theta));
    if (o && m->rope_scaling.factor > 0)
        json_object_set_new(o, "rope_scaling", ah_rope_scaling_to_json(&m->rope_scaling));
    if (o && m->sliding_window > 0)
        json_object_set_new(o, "sliding_window", json_integer((json_int_t)m->sliding_window));
    if (o && m->init_std > 0 && m->init_std != AH_INIT_STD_DEFAULT) /* plans as before where it is the default */
        json_object_set_new(o, "init_std", json_real(m->init_std));
    if (o && !ah_token_ids_to_json(m, o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

ah_status_t ah_model_from_json(const struct json_t *obj_, const char *where, ah_model_t *m,
                               ah_error_t *err) {
    const json_t *obj = (const json_t *)obj_;
    if (json_is_string(obj)) return ah_model_preset(json_string_value(obj), m, err);
    if (!json_is_object(obj))
        return ah_error_set(err, AH_ERR_INVALID, "%s: expected a preset name or a model object, got %s",
                            where, ah_json_type_name(obj));
    static const char *const keys[] = {"name", "arch", "n_layer", "d_model", "n_head", "n_kv_head",
                                       "d_ff", "vocab", "max_pos", "tied", "norm_eps", "rope_theta",
                                       "rope_scaling", "sliding_window", "init_std", "bos_token_id",
                                       "eos_token_id", "pad_token_id", NULL};
    TRY(ah_json_check_keys(obj, where, keys, err));
    memset(m, 0, sizeof *m);
    char arch[16];
    const int64_t BIG = (int64_t)1 << 40;
    TRY(ah_json_get_str(obj, where, "name", true, m->name, sizeof m->name, err));
    TRY(ah_json_get_str(obj, where, "arch", true, arch, sizeof arch, err));
    if (strcmp(arch, "gpt2") == 0) m->arch = AH_ARCH_GPT2;
    else if (strcmp(arch, "llama") == 0) m->arch = AH_ARCH_LLAMA;
    else return ah_error_set(err, AH_ERR_INVALID, "%s.arch: expected \"gpt2\" or \"llama\", got \"%s\"", where, arch);
    TRY(ah_json_get_int(obj, where, "n_layer", true, 1, 100000, &m->n_layer, err));
    TRY(ah_json_get_int(obj, where, "d_model", true, 1, BIG, &m->d_model, err));
    TRY(ah_json_get_int(obj, where, "n_head", true, 1, BIG, &m->n_head, err));
    TRY(ah_json_get_int(obj, where, "n_kv_head", true, 1, BIG, &m->n_kv_head, err));
    TRY(ah_json_get_int(obj, where, "d_ff", true, 1, BIG, &m->d_ff, err));
    TRY(ah_json_get_int(obj, where, "vocab", true, 1, BIG, &m->vocab, err));
    TRY(ah_json_get_int(obj, where, "max_pos", true, 1, BIG, &m->max_pos, err));
    TRY(ah_json_get_bool(obj, where, "tied", true, &m->tied, err));
    TRY(ah_json_get_num(obj, where, "norm_eps", true, 0, 1, &m->norm_eps, err));
    if (m->arch == AH_ARCH_GPT2) { /* learned positions: a rotary field would be ignored, so it is refused */
        const json_t *rs = json_object_get(obj, "rope_scaling");
        const char *rotary = json_object_get(obj, "rope_theta") ? "rope_theta"
                             : rs && !json_is_null(rs)          ? "rope_scaling"
                                                                : NULL;
        if (rotary)
            return ah_error_set(err, AH_ERR_INVALID, "%s.%s: a GPT-2 model has learned positions, no rotary ones",
                                where, rotary);
    } else {
        m->rope_theta = 10000;
        TRY(ah_json_get_num(obj, where, "rope_theta", false, 1, 1e12, &m->rope_theta, err));
        TRY(rope_scaling_from_json(json_object_get(obj, "rope_scaling"), where, "rope_scaling", false, NULL,
                                   &m->rope_scaling, err));
    }
    TRY(ah_json_get_int(obj, where, "sliding_window", false, 0, BIG, &m->sliding_window, err));
    TRY(get_init_std(obj, where, "init_std", &m->init_std, err));
    TRY(token_ids_from_json(obj, where, &m->tokens, err));
    return ah_model_validate(m, where, err);
}
