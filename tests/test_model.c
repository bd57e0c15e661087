/* Model spec: presets, HF config parsing, and published parameter counts. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cost/cost.h"
#include "harness.h"
#include "spec/arch.h"
#include "spec/model.h"

static int64_t params_of(const char *preset) {
    ah_model_t m;
    ah_error_t err;
    if (ah_model_preset(preset, &m, &err) != AH_OK) return -1;
    return ah_model_params_total(&m);
}

static void test_published_counts(void) {
    /* GPT-2: Hugging Face model cards / num_parameters() of openai-community/gpt2*. */
    CHECK_EQ_I64(params_of("gpt2-124m"), 124439808);
    CHECK_EQ_I64(params_of("gpt2-350m"), 354823168);
    CHECK_EQ_I64(params_of("gpt2-774m"), 774030080);
    CHECK_EQ_I64(params_of("gpt2-1.5b"), 1557611200);
    /* LLaMA: num_parameters() of meta-llama/Llama-2-*-hf and Meta-Llama-3-8B. */
    CHECK_EQ_I64(params_of("llama2-7b"), 6738415616LL);
    CHECK_EQ_I64(params_of("llama2-13b"), 13015864320LL);
    CHECK_EQ_I64(params_of("llama2-70b"), 68976648192LL);
    CHECK_EQ_I64(params_of("llama3-8b"), 8030261248LL);
}

static void test_hf_config(void) {
    ah_model_t m, p;
    ah_error_t err;
    const char *gpt2 = "{\"model_type\":\"gpt2\",\"n_layer\":12,\"n_embd\":768,\"n_head\":12,"
                       "\"vocab_size\":50257,\"n_positions\":1024,\"n_inner\":null}";
    json_t *j = json_loads(gpt2, 0, NULL);
    CHECK(ah_model_from_hf_json(j, "gpt2.json", &m, &err) == AH_OK, "gpt2 config: %s", err.msg);
    json_decref(j);
    ah_model_preset("gpt2-124m", &p, &err);
    CHECK(ah_model_equal(&m, &p), "config.json and preset agree for gpt2-124m");

    const char *llama = "{\"model_type\":\"llama\",\"num_hidden_layers\":80,\"hidden_size\":8192,"
                        "\"num_attention_heads\":64,\"num_key_value_heads\":8,"
                        "\"intermediate_size\":28672,\"vocab_size\":32000,"
                        "\"max_position_embeddings\":4096,\"rms_norm_eps\":1e-05,"
                        "\"tie_word_embeddings\":false}";
    j = json_loads(llama, 0, NULL);
    CHECK(ah_model_from_hf_json(j, "llama.json", &m, &err) == AH_OK, "llama config: %s", err.msg);
    json_decref(j);
    CHECK_EQ_I64(ah_model_params_total(&m), 68976648192LL);

    /* errors name the field, the value and what is allowed */
    j = json_loads("{\"model_type\":\"gpt2\",\"n_layer\":-3,\"n_embd\":768,\"n_head\":12,"
                   "\"vocab_size\":50257,\"n_positions\":1024}", 0, NULL);
    CHECK_ERR(ah_model_from_hf_json(j, "cfg.json", &m, &err), AH_ERR_INVALID, err, "cfg.json.n_layer");
    CHECK(strstr(err.msg, "-3") != NULL, "value in message: %s", err.msg);
    json_decref(j);
    j = json_loads("{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":100,\"n_head\":3,"
                   "\"vocab_size\":50,\"n_positions\":16}", 0, NULL);
    CHECK_ERR(ah_model_from_hf_json(j, "cfg.json", &m, &err), AH_ERR_INVALID, err, "not divisible");
    json_decref(j);
    j = json_loads("{\"model_type\":\"bert\"}", 0, NULL);
    CHECK_ERR(ah_model_from_hf_json(j, "cfg.json", &m, &err), AH_ERR_INVALID, err, "bert");
    json_decref(j);
    CHECK_ERR(ah_model_load("gpt5", &m, &err), AH_ERR_INVALID, err, "gpt2-124m");
    CHECK_ERR(ah_model_load("/nonexistent/config.json", &m, &err), AH_ERR_IO, err, "/nonexistent/config.json");
}

/* LLaMA 3.1's rope_scaling, without its closing brace */
#define LLAMA31                                                                                                        \
    "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"     \
    "\"original_max_position_embeddings\":8192"

/* Config fields the runtime does not compute are refused at load, naming the field and value;
 * those it does compute (and the defaults) load. */
static void test_hf_refusals(void) {
    const char *llama = "\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                        "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":176,"
                        "\"vocab_size\":256,\"max_position_embeddings\":256";
    const char *mistral = "\"model_type\":\"mistral\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                          "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"intermediate_size\":176,"
                          "\"vocab_size\":256,\"max_position_embeddings\":256";
    const char *gpt2 = "\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":64,\"n_head\":4,"
                       "\"vocab_size\":256,\"n_positions\":64";
    struct {
        const char *base, *extra, *needle; /* needle NULL: loads */
    } cases[] = {
        {llama, "\"attention_bias\":true", "cfg.json.attention_bias: true"},
        {mistral, "\"attention_bias\":true", "cfg.json.attention_bias: true"},
        {llama, "\"attention_bias\":false", NULL},
        {llama, "\"mlp_bias\":true", "cfg.json.mlp_bias: true"},
        {llama, "\"mlp_bias\":false", NULL},
        {llama, "\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":8.0}",
         "cfg.json.rope_scaling.rope_type is \"linear\": the runtime implements LLaMA 3.1's \"llama3\""},
        {llama, "\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":2.0}", "cfg.json.rope_scaling.type is \"dynamic\""},
        {llama, "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}",
         "cfg.json.rope_scaling: missing field \"low_freq_factor\""},
        {llama, LLAMA31 ",\"attention_factor\":1}", "cfg.json.rope_scaling: unknown field \"attention_factor\""},
        /* rope_theta is not offered: only transformers v5's rope_parameters holds it */
        {llama, "\"rope_scaling\":{\"rope_type\":\"default\",\"factor\":2.0}",
         "cfg.json.rope_scaling: unknown field \"factor\" (allowed: rope_type, type)"},
        {llama, "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
                "\"high_freq_factor\":1,\"original_max_position_embeddings\":8192}",
         "cfg.json.rope_scaling: high_freq_factor 1 must exceed low_freq_factor 4"},
        {llama, "\"rope_scaling\":7", "cfg.json.rope_scaling: expected null or an object"},
        {llama, LLAMA31 "}", NULL},
        {llama, "\"rope_scaling\":{\"rope_type\":\"default\"}", NULL}, /* transformers: no scaling */
        {llama, "\"rope_scaling\":null", NULL},
        {llama, "\"hidden_act\":\"gelu\"", "cfg.json.hidden_act: \"gelu\""},
        {llama, "\"hidden_act\":\"silu\"", NULL},
        {llama, "\"head_dim\":32", "cfg.json.head_dim: 32 x 4 heads != hidden_size 64"},
        {llama, "\"head_dim\":16", NULL},
        {llama, "\"head_dim\":16.0", NULL}, /* an integral number, as for every integer field */
        {llama, "\"head_dim\":null", NULL},   /* transformers: hidden_size / num_attention_heads */
        {llama, "\"head_dim\":\"16\"", "cfg.json.head_dim: expected an integer in [1, 1099511627776], got \"16\""},
        {llama, "\"head_dim\":32.0", "cfg.json.head_dim: 32 x 4 heads != hidden_size 64"},
        {llama, "\"head_dim\":16.5", "cfg.json.head_dim: expected an integer in [1, 1099511627776], got 16.5"},
        {llama, "\"attention_dropout\":0.0", NULL},
        {llama, "\"attention_dropout\":0.1", "cfg.json.attention_dropout: 0.1; the runtime trains without dropout "
                                             "(LLaMA's published configs have 0.0)"},
        {mistral, "\"attention_dropout\":0.5", "cfg.json.attention_dropout: 0.5"},
        {llama, "\"rope_scaling\":{}", "cfg.json.rope_scaling: missing field \"rope_type\""},
        {gpt2, "\"attn_pdrop\":0.1,\"embd_pdrop\":0.1,\"resid_pdrop\":0.1", NULL}, /* the published gpt2's */
        {mistral, "\"sliding_window\":0", "cfg.json.sliding_window"},
        {mistral, "\"sliding_window\":null", NULL},
        {gpt2, "\"activation_function\":\"gelu\"", "cfg.json.activation_function: \"gelu\"; Hugging "
                                                  "Face's \"gelu\" is the exact (erf) GELU"},
        {gpt2, "\"activation_function\":\"relu\"", "cfg.json.activation_function: \"relu\""},
        {gpt2, "\"activation_function\":\"gelu_new\"", NULL},
        {gpt2, "\"activation_function\":\"gelu_pytorch_tanh\"", NULL},
        {gpt2, "\"scale_attn_weights\":false", "cfg.json.scale_attn_weights: false"},
        {gpt2, "\"scale_attn_by_inverse_layer_idx\":true", "cfg.json.scale_attn_by_inverse_layer_idx: true"},
        {gpt2, "\"tie_word_embeddings\":false", NULL}, /* the untied GPT-2 head is trained */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        snprintf(text, sizeof text, "{%s,%s}", cases[i].base, cases[i].extra);
        json_t *j = json_loads(text, 0, NULL);
        CHECK(j != NULL, "case %zu parses", i);
        ah_model_t m;
        ah_error_t err = {0};
        ah_status_t s = ah_model_from_hf_json(j, "cfg.json", &m, &err);
        if (cases[i].needle) CHECK_ERR(s, AH_ERR_INVALID, err, cases[i].needle);
        else CHECK(s == AH_OK, "{%s} loads: %s", cases[i].extra, err.msg);
        json_decref(j);
    }
}

/* Mistral's sliding window: kept when shorter than the context, and a longer sequence refused;
 * a window as long as the context is no window. */
static void test_sliding_window(void) {
    const char *fmt = "{\"model_type\":\"mistral\",\"num_hidden_layers\":32,\"hidden_size\":4096,"
                      "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"intermediate_size\":14336,"
                      "\"vocab_size\":32000,\"max_position_embeddings\":32768,\"rope_theta\":10000.0,"
                      "\"hidden_act\":\"silu\",\"sliding_window\":%d}";
    char text[512];
    snprintf(text, sizeof text, fmt, 4096);
    json_t *j = json_loads(text, 0, NULL);
    ah_model_t m, back;
    ah_error_t err;
    CHECK(ah_model_from_hf_json(j, "mistral.json", &m, &err) == AH_OK, "mistral: %s", err.msg);
    json_decref(j);
    CHECK_EQ_I64(m.sliding_window, 4096);
    CHECK_EQ_I64(ah_model_context(&m), 4096);
    CHECK(ah_model_check_window(&m, 4096, "--seq-len", &err) == AH_OK, "the window itself is allowed");
    CHECK_ERR(ah_model_check_window(&m, 4097, "--seq-len", &err), AH_ERR_INVALID, err,
              "--seq-len 4097 is longer than model mistral.json's sliding attention window of 4096");
    CHECK(strstr(err.msg, "sliding_window") != NULL, "names the field: %s", err.msg);
    /* Mistral-7B-v0.1: 7,241,732,096 parameters (num_parameters() of mistralai/Mistral-7B-v0.1) */
    CHECK_EQ_I64(ah_model_params_total(&m), 7241732096LL);
    /* the plan file's model object keeps it */
    json_t *o = ah_model_to_json(&m);
    CHECK(ah_model_from_json(o, "model", &back, &err) == AH_OK && ah_model_equal(&m, &back),
          "round trip keeps sliding_window: %s", err.msg);
    json_decref(o);
    snprintf(text, sizeof text, fmt, 32768);
    j = json_loads(text, 0, NULL);
    CHECK(ah_model_from_hf_json(j, "mistral.json", &m, &err) == AH_OK, "mistral: %s", err.msg);
    json_decref(j);
    CHECK_EQ_I64(m.sliding_window, 0);
    CHECK_EQ_I64(ah_model_context(&m), 32768);
    /* without the key: transformers' MistralConfig default, 4096; null: none; a LLaMA: none */
    j = json_loads(text, 0, NULL);
    json_object_del(j, "sliding_window");
    CHECK(ah_model_from_hf_json(j, "mistral.json", &m, &err) == AH_OK, "mistral: %s", err.msg);
    CHECK_EQ_I64(m.sliding_window, 4096);
    json_object_set_new(j, "sliding_window", json_null());
    CHECK(ah_model_from_hf_json(j, "mistral.json", &m, &err) == AH_OK, "mistral: %s", err.msg);
    CHECK_EQ_I64(m.sliding_window, 0);
    json_object_del(j, "sliding_window");
    json_object_set_new(j, "model_type", json_string("llama"));
    CHECK(ah_model_from_hf_json(j, "llama.json", &m, &err) == AH_OK, "llama: %s", err.msg);
    CHECK_EQ_I64(m.sliding_window, 0);
    /* a LLaMA's sliding_window is ignored, as transformers' LlamaModel ignores it (it exported as
     * Mistral, whose attention would then slide) */
    json_object_set_new(j, "sliding_window", json_integer(4096));
    CHECK(ah_model_from_hf_json(j, "llama.json", &m, &err) == AH_OK, "llama: %s", err.msg);
    CHECK_EQ_I64(m.sliding_window, 0);
    CHECK_EQ_I64(ah_model_context(&m), 32768);
    json_object_del(j, "sliding_window");
    /* num_key_value_heads null is absent, as in transformers: as many as the attention heads */
    json_object_set_new(j, "num_key_value_heads", json_null());
    CHECK(ah_model_from_hf_json(j, "llama.json", &m, &err) == AH_OK, "kv heads null: %s", err.msg);
    CHECK_EQ_I64(m.n_kv_head, 32);
    json_decref(j);
}

/* ah_model_diff names the first field that differs, under either naming, with both values in
 * the fewest digits that read back (1e-05, not 1.0000000000000001e-05). */
static void test_model_diff(void) {
    ah_model_t a, b;
    ah_error_t err;
    ah_model_diff_t d;
    ah_model_preset("tiny-llama", &a, &err);
    b = a;
    CHECK(!ah_model_diff(&a, &b, true, &d) && ah_model_equal(&a, &b), "a model equals itself");
    b.rope_theta = 20000;
    CHECK(ah_model_diff(&b, &a, false, &d) && strcmp(d.field, "rope_theta") == 0 && strcmp(d.a, "20000") == 0 &&
              strcmp(d.b, "10000") == 0,
          "rope_theta: %s %s %s", d.field, d.a, d.b);
    b = a;
    b.norm_eps = 1e-6;
    CHECK(ah_model_diff(&a, &b, true, &d) && strcmp(d.field, "rms_norm_eps") == 0 && strcmp(d.a, "1e-05") == 0 &&
              strcmp(d.b, "1e-06") == 0,
          "rms_norm_eps: %s %s %s", d.field, d.a, d.b);
    CHECK(ah_model_diff(&a, &b, false, &d) && strcmp(d.field, "norm_eps") == 0, "norm_eps: %s", d.field);
    b = a;
    b.n_layer = 3;
    CHECK(ah_model_diff(&a, &b, true, &d) && strcmp(d.field, "num_hidden_layers") == 0 && strcmp(d.b, "3") == 0,
          "num_hidden_layers: %s %s", d.field, d.b);
    b.tied = true;
    b.n_layer = a.n_layer;
    CHECK(ah_model_diff(&a, &b, true, &d) && strcmp(d.field, "tie_word_embeddings") == 0 && strcmp(d.b, "true") == 0,
          "tie_word_embeddings: %s %s", d.field, d.b);
    ah_model_preset("tiny-gpt2", &b, &err);
    CHECK(ah_model_diff(&a, &b, true, &d) && strcmp(d.field, "model_type") == 0 && strcmp(d.b, "gpt2") == 0,
          "model_type: %s %s", d.field, d.b);
}

/* LLaMA 3.1-8B's config: its rotary scaling is read, carried by the plan file's model object,
 * distinguishes the model from LLaMA 3-8B's shape, and a GPT-2 model object cannot carry it (nor a
 * rope_theta). */
static void test_rope_scaling(void) {
    const char *text = "{\"model_type\":\"llama\",\"num_hidden_layers\":32,\"hidden_size\":4096,"
                       "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"intermediate_size\":14336,"
                       "\"vocab_size\":128256,\"max_position_embeddings\":131072,\"rope_theta\":500000.0," LLAMA31 "}}";
    json_t *j = json_loads(text, 0, NULL);
    ah_model_t m, back;
    ah_error_t err = {0};
    CHECK(ah_model_from_hf_json(j, "llama31.json", &m, &err) == AH_OK, "llama 3.1: %s", err.msg);
    json_decref(j);
    CHECK(m.rope_scaling.factor == 8 && m.rope_scaling.low_freq_factor == 1 && m.rope_scaling.high_freq_factor == 4,
          "the factors are read");
    CHECK_EQ_I64(m.rope_scaling.original_max_pos, 8192);
    CHECK_EQ_I64(ah_model_params_total(&m), 8030261248LL); /* Llama-3.1-8B, as LLaMA 3-8B */
    json_t *o = ah_model_to_json(&m);
    CHECK(ah_model_from_json(o, "model", &back, &err) == AH_OK && ah_model_equal(&m, &back),
          "round trip keeps rope_scaling: %s", err.msg);
    back.rope_scaling.factor = 0;
    CHECK(!ah_model_equal(&m, &back), "a model without the scaling is another model");
    /* transformers v5 writes rope_theta and the scaling as one rope_parameters object:
     * Llama-3.2-1B (1,235,814,400 parameters, tied) */
    json_t *v5 = json_loads("{\"model_type\":\"llama\",\"num_hidden_layers\":16,\"hidden_size\":2048,"
                            "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"intermediate_size\":8192,"
                            "\"vocab_size\":128256,\"max_position_embeddings\":131072,\"tie_word_embeddings\":true,"
                            "\"rope_parameters\":{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,\"factor\":32.0,"
                            "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                            "\"original_max_position_embeddings\":8192}}",
                            0, NULL);
    CHECK(ah_model_from_hf_json(v5, "v5.json", &back, &err) == AH_OK, "rope_parameters: %s", err.msg);
    CHECK(back.rope_theta == 500000 && back.rope_scaling.factor == 32, "rope_parameters: theta and factor read");
    CHECK_EQ_I64(ah_model_params_total(&back), 1235814400LL);
    json_object_set_new(v5, "rope_theta", json_real(10000));
    CHECK_ERR(ah_model_from_hf_json(v5, "v5.json", &back, &err), AH_ERR_INVALID, err,
              "v5.json: both rope_parameters and rope_theta; give one form");
    json_object_del(v5, "rope_theta");
    json_object_set_new(v5, "rope_parameters", json_pack("{s:s, s:f}", "rope_type", "default", "rope_theta", 1e6));
    CHECK(ah_model_from_hf_json(v5, "v5.json", &back, &err) == AH_OK && back.rope_theta == 1e6 &&
              back.rope_scaling.factor == 0,
          "rope_parameters of type default: theta only: %s", err.msg);
    json_object_set_new(v5, "rope_parameters", json_pack("{s:s, s:f}", "rope_type", "yarn", "factor", 4.0));
    CHECK_ERR(ah_model_from_hf_json(v5, "v5.json", &back, &err), AH_ERR_INVALID, err,
              "v5.json.rope_parameters.rope_type is \"yarn\"");
    json_object_del(v5, "rope_parameters");
    json_object_set_new(v5, "rope_scaling", json_pack("{s:s, s:f}", "rope_type", "default", "rope_theta", 1e6));
    CHECK_ERR(ah_model_from_hf_json(v5, "v5.json", &back, &err), AH_ERR_INVALID, err,
              "v5.json.rope_scaling: unknown field \"rope_theta\"");
    json_decref(v5);
    /* GPT-2 has learned positions: any rotary field is refused as such, whatever its kind. */
    json_object_set_new(o, "arch", json_string("gpt2"));
    json_object_set_new(o, "rope_theta", json_real(5e5));
    CHECK_ERR(ah_model_from_json(o, "model", &back, &err), AH_ERR_INVALID, err,
              "model.rope_theta: a GPT-2 model has learned positions, no rotary ones");
    json_object_del(o, "rope_theta");
    json_object_set_new(o, "rope_scaling", json_pack("{s:s, s:f}", "type", "linear", "factor", 2.0));
    CHECK_ERR(ah_model_from_json(o, "model", &back, &err), AH_ERR_INVALID, err,
              "model.rope_scaling: a GPT-2 model has learned positions, no rotary ones");
    json_decref(o);
}

/* The special token ids ride along, as given: LLaMA 3.1's eos list, a GPT-2 config's single ids,
 * the presets' published ones; a model object round trip keeps them; they do not make two models
 * differ; a malformed one is refused naming the field. */
static void test_token_ids(void) {
    const char *text = "{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                       "\"num_attention_heads\":4,\"intermediate_size\":176,\"vocab_size\":256,"
                       "\"bos_token_id\":200,\"eos_token_id\":[201,202,203],\"pad_token_id\":-1}";
    json_t *j = json_loads(text, 0, NULL);
    ah_model_t m, back;
    ah_error_t err = {0};
    CHECK(ah_model_from_hf_json(j, "ids.json", &m, &err) == AH_OK, "token ids: %s", err.msg);
    CHECK(m.tokens.has_bos && m.tokens.bos == 200 && m.tokens.has_pad && m.tokens.pad == -1, "bos and pad read");
    CHECK(m.tokens.n_eos == 3 && m.tokens.eos_list && m.tokens.eos[2] == 203, "the eos list read");
    json_t *o = ah_model_to_json(&m);
    CHECK(ah_model_from_json(o, "model", &back, &err) == AH_OK, "model object with ids: %s", err.msg);
    CHECK(memcmp(&back.tokens, &m.tokens, sizeof m.tokens) == 0, "the round trip keeps the ids");
    char *dump = json_dumps(o, JSON_COMPACT);
    CHECK(strstr(dump, "\"eos_token_id\":[201,202,203]") && strstr(dump, "\"pad_token_id\":-1"),
          "written as the config had them: %s", dump);
    free(dump);
    json_decref(o);
    back.tokens = (ah_token_ids_t){0};
    CHECK(ah_model_equal(&m, &back), "ids change no math: a model without them is the same model");
    json_object_set_new(j, "eos_token_id", json_integer(7));
    CHECK(ah_model_from_hf_json(j, "ids.json", &m, &err) == AH_OK && m.tokens.n_eos == 1 && !m.tokens.eos_list &&
              m.tokens.eos[0] == 7,
          "a single eos id: %s", err.msg);
    json_object_set_new(j, "eos_token_id", json_null());
    json_object_set_new(j, "bos_token_id", json_null());
    CHECK(ah_model_from_hf_json(j, "ids.json", &m, &err) == AH_OK && m.tokens.n_eos == 0 && !m.tokens.has_bos,
          "null ids are absent: %s", err.msg);
    json_object_set_new(j, "eos_token_id", json_pack("[i, s]", 1, "2"));
    CHECK_ERR(ah_model_from_hf_json(j, "ids.json", &m, &err), AH_ERR_INVALID, err,
              "ids.json.eos_token_id[1]: expected an integer id, got a string");
    json_object_set_new(j, "eos_token_id", json_integer(2));
    json_object_set_new(j, "bos_token_id", json_string("1"));
    CHECK_ERR(ah_model_from_hf_json(j, "ids.json", &m, &err), AH_ERR_INVALID, err, "ids.json.bos_token_id");
    json_decref(j);
    CHECK(ah_model_preset("llama3-8b", &m, &err) == AH_OK && m.tokens.bos == 128000 && m.tokens.eos[0] == 128001,
          "LLaMA 3's published ids");
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK && m.tokens.bos == 50256 && m.tokens.eos[0] == 50256,
          "GPT-2's published ids");
    CHECK(ah_model_preset("tiny-llama", &m, &err) == AH_OK && !m.tokens.has_bos && m.tokens.n_eos == 0,
          "the tiny presets have none");
}

/* The LLaMA 3.1 presets are meta-llama/Llama-3.1-8B's and -70B's published config.json, field for
 * field (rope_scaling included), with their token ids and published parameter counts. */
static void test_llama31_presets(void) {
    static const struct {
        const char *name, *shape;
        int64_t params;
    } cases[] = {
        {"llama3.1-8b", "\"num_hidden_layers\":32,\"hidden_size\":4096,\"num_attention_heads\":32,"
                        "\"intermediate_size\":14336,", 8030261248LL},
        {"llama3.1-70b", "\"num_hidden_layers\":80,\"hidden_size\":8192,\"num_attention_heads\":64,"
                         "\"intermediate_size\":28672,", 70553706496LL},
    };
    for (int k = 0; k < 2; k++) {
        char text[1024];
        snprintf(text, sizeof text,
                 "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"attention_bias\":false,"
                 "\"bos_token_id\":128000,\"eos_token_id\":128001,\"hidden_act\":\"silu\",%s"
                 "\"max_position_embeddings\":131072,\"mlp_bias\":false,\"num_key_value_heads\":8,"
                 "\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,\"tie_word_embeddings\":false,"
                 "\"vocab_size\":128256," LLAMA31 "}}",
                 cases[k].shape);
        json_t *j = json_loads(text, 0, NULL);
        ah_model_t hf, preset;
        ah_error_t err = {0};
        ah_model_diff_t d;
        memset(&d, 0, sizeof d);
        CHECK(j && ah_model_from_hf_json(j, "config.json", &hf, &err) == AH_OK, "%s config: %s", cases[k].name, err.msg);
        json_decref(j);
        CHECK(ah_model_preset(cases[k].name, &preset, &err) == AH_OK, "%s: %s", cases[k].name, err.msg);
        CHECK(!ah_model_diff(&preset, &hf, true, &d), "%s: preset and config.json differ in %s (%s vs %s)",
              cases[k].name, d.field, d.a, d.b);
        CHECK(preset.rope_scaling.factor == 8 && preset.rope_scaling.original_max_pos == 8192 && preset.max_pos == 131072,
              "%s carries LLaMA 3.1's rotary scaling and context", cases[k].name);
        CHECK(preset.tokens.bos == hf.tokens.bos && preset.tokens.n_eos == 1 && preset.tokens.eos[0] == hf.tokens.eos[0],
              "%s: the published token ids", cases[k].name);
        CHECK_EQ_I64(ah_model_params_total(&preset), cases[k].params);
    }
}

static void test_tp_split(void) {
    ah_model_t m;
    ah_error_t err;
    ah_model_preset("llama2-70b", &m, &err);
    CHECK(ah_model_check_tp(&m, 8, &err) == AH_OK, "70b splits 8 ways");
    CHECK_ERR(ah_model_check_tp(&m, 16, &err), AH_ERR_INVALID, err, "its key/value head count 8 is not divisible by 16");
    ah_model_preset("gpt2-1.5b", &m, &err);
    CHECK_ERR(ah_model_check_tp(&m, 2, &err), AH_ERR_INVALID, err, "its attention head count 25 is not divisible by 2");
}

/* The std the trainer draws tensor `name` of m with (spec/arch.h), or -1 when there is no such tensor. */
static double init_std_of(const ah_model_t *m, const char *name) {
    ah_tensor_t ts[64];
    if (ah_model_tensor_count(m) > 64) return -1;
    ah_model_tensors(m, ts);
    float fill;
    for (int i = 0; i < ah_model_tensor_count(m); i++)
        if (strcmp(ts[i].name, name) == 0) return ah_tensor_init_std(&ts[i], m, &fill);
    return -1;
}

/* initializer_range is the std of the random init (it was accepted and ignored: 0.02 always); a
 * plan's model object carries it as init_std to the trainer; values outside (0, 1] are refused. */
static void test_initializer_range(void) {
    const char *gpt2 = "{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":8,\"n_head\":2,\"vocab_size\":10,"
                       "\"n_positions\":6,\"initializer_range\":0.01}";
    ah_model_t m, back;
    ah_error_t err;
    json_t *j = json_loads(gpt2, 0, NULL);
    CHECK(ah_model_from_hf_json(j, "gpt2.json", &m, &err) == AH_OK, "gpt2 config: %s", err.msg);
    json_decref(j);
    CHECK_NEAR(init_std_of(&m, "wte"), 0.01, 1e-6);
    CHECK_NEAR(init_std_of(&m, "h.1.attn.qkv.weight"), 0.01, 1e-6);
    CHECK_NEAR(init_std_of(&m, "h.0.attn.proj.weight"), 0.01 / 2.0, 1e-6); /* / sqrt(2 L), as GPT-2's */
    json_t *o = ah_model_to_json(&m);
    CHECK(o && ah_model_from_json(o, "plan.json: model", &back, &err) == AH_OK, "round trip: %s", err.msg);
    CHECK(o && json_object_get(o, "init_std"), "the plan's model object carries init_std");
    json_decref(o);
    CHECK_NEAR(init_std_of(&back, "wte"), 0.01, 1e-6);
    CHECK(ah_model_equal(&m, &back), "init_std does not make models differ for resume or export");
    /* LLaMA: every matrix N(0, initializer_range^2), as transformers' LlamaPreTrainedModel */
    j = json_loads("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":8,\"num_attention_heads\":2,"
                   "\"intermediate_size\":16,\"vocab_size\":10,\"initializer_range\":0.05}", 0, NULL);
    CHECK(ah_model_from_hf_json(j, "llama.json", &m, &err) == AH_OK, "llama config: %s", err.msg);
    json_decref(j);
    CHECK_NEAR(init_std_of(&m, "wte"), 0.05, 1e-6);
    /* absent: 0.02, and the plan's model object stays as it was */
    ah_model_preset("tiny-gpt2", &m, &err);
    CHECK_NEAR(init_std_of(&m, "wte"), 0.02, 1e-6);
    o = ah_model_to_json(&m);
    CHECK(o && !json_object_get(o, "init_std"), "no init_std key for the default");
    json_decref(o);
    static const char *const bad[] = {"0", "-0.02", "1.5", "\"0.02\"", "null"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[256];
        snprintf(text, sizeof text, "{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":8,\"n_head\":2,"
                 "\"vocab_size\":10,\"n_positions\":6,\"initializer_range\":%s}", bad[i]);
        j = json_loads(text, 0, NULL);
        CHECK_ERR(ah_model_from_hf_json(j, "cfg.json", &m, &err), AH_ERR_INVALID, err, "cfg.json.initializer_range");
        json_decref(j);
    }
}

int main(void) {
    test_published_counts();
    test_hf_config();
    test_hf_refusals();
    test_sliding_window();
    test_rope_scaling();
    test_token_ids();
    test_model_diff();
    test_llama31_presets();
    test_tp_split();
    test_initializer_range();
    return ah_test_finish();
}
