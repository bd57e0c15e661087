/* The architecture tables (spec/arch.h): the expansion for a model, shard shapes and indices,
 * Hugging Face names, the tied and untied heads, and the sums the accounting reads. Expected
 * values are counted by hand (tiny shapes) or are published parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "spec/arch.h"

static const ah_tensor_t *find(const ah_tensor_t *ts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(ts[i].name, name) == 0) return &ts[i];
    return NULL;
}

/* GPT-2: C=8, H=2, F=32, V=10, P=6, L=2, tied. */
static void test_gpt2(void) {
    ah_model_t m = {.arch = AH_ARCH_GPT2, .n_layer = 2, .d_model = 8, .n_head = 2, .n_kv_head = 2,
                    .d_ff = 32, .vocab = 10, .max_pos = 6, .tied = true, .norm_eps = 1e-5};
    const int n = ah_model_tensor_count(&m);
    CHECK_EQ_I64(n, 2 + 12 * 2 + 2); /* wte, wpe, 12 per block, ln_f weight and bias */
    CHECK_EQ_I64(ah_block_tensor_count(&m), 12);
    ah_tensor_t ts[64];
    ah_model_tensors(&m, ts);
    CHECK(strcmp(ts[0].name, "wte") == 0 && strcmp(ts[1].name, "wpe") == 0, "embedding first");
    CHECK(strcmp(ts[2].name, "h.0.ln_1.weight") == 0 && ts[2].block == 0, "block 0 next: %s", ts[2].name);
    CHECK(strcmp(ts[n - 1].name, "ln_f.bias") == 0 && ts[n - 1].block == -1, "head last: %s", ts[n - 1].name);
    const ah_tensor_t *qkv = find(ts, n, "h.1.attn.qkv.weight");
    CHECK(qkv && qkv->rows == 24 && qkv->cols == 8 && qkv->block == 1, "qkv (3C, C)");
    int64_t shape[2];
    ah_tensor_shard_shape(qkv, 2, shape);
    CHECK(shape[0] == 12 && shape[1] == 8, "qkv shard at t=2: (12, 8), got (%lld, %lld)", (long long)shape[0],
          (long long)shape[1]);
    /* Rank 1's first row is head 1 of q: full row 4; its row 4 is head 1 of k: full row 8 + 4. */
    CHECK_EQ_I64(ah_tensor_full_index(qkv, 2, 1, 0), 4 * 8);
    CHECK_EQ_I64(ah_tensor_full_index(qkv, 2, 1, 4 * 8), 12 * 8);
    const ah_tensor_t *proj = find(ts, n, "h.0.mlp.proj.weight");
    CHECK(proj && proj->rows == 8 && proj->cols == 32, "mlp.proj (C, F)");
    CHECK_EQ_I64(ah_tensor_shard_elems(proj, 4), 8 * 8);
    CHECK_EQ_I64(ah_tensor_full_index(proj, 4, 2, 9), 1 * 32 + 16 + 1); /* row 1, column 2*8 + 1 */
    char hf[96];
    CHECK(ah_tensor_hf_name(qkv, hf, sizeof hf) && strcmp(hf, "transformer.h.1.attn.c_attn.weight") == 0,
          "HF name %s", hf);
    CHECK(qkv->spec->hf_transposed && !find(ts, n, "wte")->spec->hf_transposed, "Conv1D weights transposed");
    CHECK(!ah_tensor_hf_name(qkv, hf, 8), "a name that does not fit is refused");
    const ah_tensor_t *wte = find(ts, n, "wte");
    CHECK(ah_tensor_tied(wte, &m) && !ah_tensor_tied(find(ts, n, "wpe"), &m), "wte is the tied matrix");
    float fill;
    CHECK(ah_tensor_init_std(wte, &m, &fill) == 0.02f, "wte N(0, 0.02)");
    CHECK(ah_tensor_init_std(find(ts, n, "h.0.ln_2.weight"), &m, &fill) == 0 && fill == 1.0f, "norm weight ones");
    CHECK(ah_tensor_init_std(find(ts, n, "h.0.attn.proj.weight"), &m, &fill) == (float)(0.02 / 2.0),
          "residual projections 0.02 / sqrt(2 L)");
    /* Sums: a block 12C^2 + 13C = 872 at t = 1; matmuls 3C^2 + C^2 + 2CF = 768; tied V x C = 80. */
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_BLOCK, 1), 872);
    CHECK_EQ_I64(ah_block_matmul_elems(&m, 1), 768);
    CHECK_EQ_I64(ah_block_matmul_elems(&m, 2), 384);
    CHECK_EQ_I64(ah_tied_params(&m, 2), 80);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 1), 80);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_HEAD, 1), 16);
    CHECK(!ah_layer_tp_split(&m, AH_LAYER_EMBED) && ah_layer_tp_split(&m, AH_LAYER_BLOCK) &&
              !ah_layer_tp_split(&m, AH_LAYER_HEAD),
          "TP splits the blocks only (embedding and head replicated)");
    /* Untied: the head gets its own lm_head.weight, wte is no longer tied. */
    m.tied = false;
    CHECK_EQ_I64(ah_model_tensor_count(&m), n + 1);
    ah_model_tensors(&m, ts);
    CHECK(strcmp(ts[n].name, "lm_head.weight") == 0 && ts[n].spec->layer == AH_LAYER_HEAD, "lm_head last");
    CHECK(!ah_tensor_tied(&ts[0], &m), "untied wte");
    CHECK_EQ_I64(ah_tied_params(&m, 1), 0);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 1), 80);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_HEAD, 1), 16 + 80);
    CHECK_EQ_I64(ah_head_norm_params(&m, 2), 16); /* ln_f weight and bias, tied or not */
}

/* LLaMA: C=8, H=4, KV=2 (kv width 4), F=12, V=10, L=2, untied; and LLaMA-2-7B's published count. */
static void test_llama(void) {
    ah_model_t m = {.arch = AH_ARCH_LLAMA, .n_layer = 2, .d_model = 8, .n_head = 4, .n_kv_head = 2,
                    .d_ff = 12, .vocab = 10, .max_pos = 6, .tied = false, .norm_eps = 1e-5};
    CHECK_EQ_I64(ah_dim_value(&m, AH_DIM_KV), 4);
    CHECK_EQ_I64(ah_dim_value(&m, AH_DIM_QKV), 16);
    const int n = ah_model_tensor_count(&m);
    CHECK_EQ_I64(n, 1 + 9 * 2 + 2); /* embedding, 9 per block, norm + lm_head */
    ah_tensor_t ts[64];
    ah_model_tensors(&m, ts);
    const ah_tensor_t *k = find(ts, n, "h.1.attn.k.weight");
    CHECK(k && k->rows == 4 && k->cols == 8 && k->spec->split == AH_SPLIT_ROWS, "k_proj (KV, C), column-parallel");
    char hf[96];
    CHECK(ah_tensor_hf_name(k, hf, sizeof hf) && strcmp(hf, "model.layers.1.self_attn.k_proj.weight") == 0,
          "HF name %s", hf);
    /* q C^2 + k, v 2 C KV + o C^2 + gate, up, down 3 C F + two norms 2C = 64+64+64+288+16 = 496. */
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_BLOCK, 1), 496);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 1), 80);
    ah_model_t l7 = {.arch = AH_ARCH_LLAMA, .n_layer = 32, .d_model = 4096, .n_head = 32, .n_kv_head = 32,
                     .d_ff = 11008, .vocab = 32000, .max_pos = 4096, .tied = false, .norm_eps = 1e-5};
    const int64_t total = ah_layer_params(&l7, AH_LAYER_EMBED, 1) + 32 * ah_layer_params(&l7, AH_LAYER_BLOCK, 1) +
                          ah_layer_params(&l7, AH_LAYER_HEAD, 1);
    CHECK_EQ_I64(total, 6738415616LL);
}

/* Every table: block tensor names unique, each row's HF name fits, the activation lists present. */
static void test_tables(void) {
    const ah_arch_t archs[] = {AH_ARCH_GPT2, AH_ARCH_LLAMA};
    for (int a = 0; a < 2; a++) {
        const ah_arch_spec_t *s = ah_arch_spec(archs[a]);
        CHECK(s->arch == archs[a] && s->n_tensors > 0 && s->n_block_acts > 0, "table %d", a);
        for (int i = 0; i < s->n_tensors; i++)
            for (int j = i + 1; j < s->n_tensors; j++)
                CHECK(strcmp(s->tensors[i].name, s->tensors[j].name) != 0, "%s twice", s->tensors[i].name);
    }
}

int main(void) {
    test_gpt2();
    test_llama();
    test_tables();
    return ah_test_finish();
}
