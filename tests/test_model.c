/* Model spec: presets, HF config parsing, and published parameter counts. */
#include <jansson.h>
#include <string.h>

#include "cost/cost.h"
#include "harness.h"
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

static void test_tp_split(void) {
    ah_model_t m;
    ah_error_t err;
    ah_model_preset("llama2-70b", &m, &err);
    CHECK(ah_model_check_tp(&m, 8, &err) == AH_OK, "70b splits 8 ways");
    CHECK_ERR(ah_model_check_tp(&m, 16, &err), AH_ERR_INVALID, err, "key/value heads");
    ah_model_preset("gpt2-1.5b", &m, &err);
    CHECK_ERR(ah_model_check_tp(&m, 2, &err), AH_ERR_INVALID, err, "25 heads");
}

int main(void) {
    test_published_counts();
    test_hf_config();
    test_tp_split();
    return ah_test_finish();
}
