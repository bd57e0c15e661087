/* The architecture tables (spec/arch.h): the expansion for a model, shard shapes and indices,
 * Hugging Face names, the tied and untied heads, and the sums the accounting reads. Expected
 * values are counted by hand (tiny shapes) or are published parameter counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "cost/cost.h"
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
    /* Sums: a block 12C^2 + 13C = 872 at t = 1; matmuls 3C^2 + C^2 + 2CF = 768. The tied matrix
     * is split by vocabulary rows, V = 10 padded to a multiple of 128 t: Vp = 128 at t = 1 and
     * 256 at t = 2, so a rank holds Vp/t x C = 128 x 8 = 1024 elements at either. */
    const int64_t VP1 = 128, VP2 = 256;
    CHECK_EQ_I64(ah_vocab_padded(&m, 1), VP1);
    CHECK_EQ_I64(ah_vocab_padded(&m, 2), VP2);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_BLOCK, 1), 872);
    CHECK_EQ_I64(ah_block_matmul_elems(&m, 1), 768);
    CHECK_EQ_I64(ah_block_matmul_elems(&m, 2), 384);
    CHECK_EQ_I64(ah_tied_params(&m, 2), VP2 / 2 * 8);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 1), VP1 * 8);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 2), VP2 / 2 * 8);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_HEAD, 1), 16);
    /* the embedding: wte's padded shard + wpe P x C (replicated); content V x C + P x C */
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 2), VP2 / 2 * 8 + 6 * 8);
    CHECK_EQ_I64(ah_layer_content_params(&m, AH_LAYER_EMBED), 10 * 8 + 6 * 8);
    int64_t wshape[2];
    ah_tensor_shard_shape(wte, 2, wshape);
    CHECK(wshape[0] == 128 && wshape[1] == 8, "wte shard at t=2: (Vp/2, C) = (128, 8), got (%lld, %lld)",
          (long long)wshape[0], (long long)wshape[1]);
    /* rank 0 holds rows 0 .. 127: rows 0 .. 9 are the vocabulary, the rest padding; rank 1 only
     * padding (V = 10 < 128) */
    CHECK_EQ_I64(ah_tensor_full_index(wte, 2, 0, 9 * 8 + 7), 9 * 8 + 7);
    CHECK_EQ_I64(ah_tensor_full_index(wte, 2, 0, 10 * 8), -1);
    CHECK_EQ_I64(ah_tensor_full_index(wte, 2, 1, 0), -1);
    CHECK(ah_layer_tp_split(&m, AH_LAYER_EMBED) && ah_layer_tp_split(&m, AH_LAYER_BLOCK) &&
              !ah_layer_tp_split(&m, AH_LAYER_HEAD),
          "TP splits the embedding (by vocabulary) and the blocks; a tied head holds only ln_f");
    /* Untied: the head gets its own lm_head.weight, wte is no longer tied. */
    m.tied = false;
    CHECK_EQ_I64(ah_model_tensor_count(&m), n + 1);
    ah_model_tensors(&m, ts);
    CHECK(strcmp(ts[n].name, "lm_head.weight") == 0 && ts[n].spec->layer == AH_LAYER_HEAD, "lm_head last");
    CHECK(!ah_tensor_tied(&ts[0], &m), "untied wte");
    CHECK_EQ_I64(ah_tied_params(&m, 1), 0);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 1), VP1 * 8);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_HEAD, 1), 16 + VP1 * 8);
    CHECK_EQ_I64(ah_layer_content_params(&m, AH_LAYER_HEAD), 16 + 10 * 8);
    CHECK(ah_layer_tp_split(&m, AH_LAYER_HEAD), "an untied head is split by vocabulary");
    CHECK_EQ_I64(ah_head_norm_params(&m, 2), 16); /* ln_f weight and bias, tied or not */
}

/* Megatron's padding of the vocabulary to a multiple of 128 t, on GPT-2's 50257 and LLaMA's
 * vocabularies; the shards that memory counts include it, the printed counts do not. */
static void test_vocab_padding(void) {
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK, "preset: %s", err.msg);
    /* 50257 = 392 x 128 + 81 -> 393 x 128 = 50304; = 196 x 256 + 81 -> 197 x 256 = 50432;
     * = 49 x 1024 + 81 -> 50 x 1024 = 51200 */
    CHECK_EQ_I64(ah_vocab_padded(&m, 1), 393 * 128);
    CHECK_EQ_I64(ah_vocab_padded(&m, 1), 50304);
    CHECK_EQ_I64(ah_vocab_padded(&m, 2), 197 * 256);
    CHECK_EQ_I64(ah_vocab_padded(&m, 2), 50432);
    CHECK_EQ_I64(ah_vocab_padded(&m, 8), 50 * 1024);
    CHECK_EQ_I64(ah_vocab_padded(&m, 8), 51200);
    const int64_t C = 768, P = 1024;
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 1), 50304 * C + P * C);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 2), 50432 / 2 * C + P * C);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 8), 51200 / 8 * C + P * C);
    CHECK_EQ_I64(ah_tied_params(&m, 8), 6400 * C);
    CHECK_EQ_I64(ah_layer_content_params(&m, AH_LAYER_EMBED), 50257 * C + P * C);
    /* the published count, from content: 50257 x 768 + 1024 x 768 + 12 (12 C^2 + 13 C) + 2C */
    CHECK_EQ_I64(ah_model_params_total(&m), 50257 * C + P * C + 12 * (12 * C * C + 13 * C) + 2 * C);
    CHECK_EQ_I64(ah_model_params_total(&m), 124439808);
    /* the last rank's last real row at t = 8: row 50256 is row 50256 - 7 x 6400 = 5456 of rank 7;
     * its next row is padding */
    ah_tensor_t ts[256];
    ah_model_tensors(&m, ts);
    CHECK(strcmp(ts[0].name, "wte") == 0 && ts[0].padded_rows, "wte is padded");
    CHECK_EQ_I64(ah_tensor_full_index(&ts[0], 8, 7, 5456 * C), 50256 * C);
    CHECK_EQ_I64(ah_tensor_full_index(&ts[0], 8, 7, 5457 * C), -1);

    /* LLaMA-2's 32000 = 250 x 128 needs no padding at t = 1; LLaMA-3's 128256 = 1002 x 128, at
     * t = 8 (multiple 1024) 126 x 1024 = 129024. */
    CHECK(ah_model_preset("llama2-7b", &m, &err) == AH_OK, "preset: %s", err.msg);
    CHECK_EQ_I64(ah_vocab_padded(&m, 1), 32000);
    CHECK_EQ_I64(ah_vocab_padded(&m, 2), 32000);
    CHECK_EQ_I64(ah_vocab_padded(&m, 8), 32 * 1024);
    CHECK_EQ_I64(ah_model_params_total(&m), 6738415616LL);
    CHECK(ah_model_preset("llama3-8b", &m, &err) == AH_OK, "preset: %s", err.msg);
    CHECK_EQ_I64(ah_vocab_padded(&m, 1), 128256);
    CHECK_EQ_I64(ah_vocab_padded(&m, 8), 129024);
    CHECK_EQ_I64(ah_head_matrix_params(&m, 8), 129024 / 8 * 4096);
    /* content: embed V C + 32 blocks (2 C^2 + 2 C KV + 3 C F + 2 C) + final norm C + head V C,
     * KV = 4096 x 8 / 32 = 1024 */
    const int64_t C3 = 4096, V3 = 128256, F3 = 14336, KV3 = 1024;
    CHECK_EQ_I64(ah_model_params_total(&m),
                 V3 * C3 + 32 * (2 * C3 * C3 + 2 * C3 * KV3 + 3 * C3 * F3 + 2 * C3) + C3 + V3 * C3);
    CHECK_EQ_I64(ah_model_params_total(&m), 8030261248LL);
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
    /* embed_tokens: V = 10 padded to 128 at t = 1, 256 at t = 2; content V x C = 80 */
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 1), 128 * 8);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_EMBED, 2), 256 / 2 * 8);
    CHECK_EQ_I64(ah_layer_content_params(&m, AH_LAYER_EMBED), 80);
    CHECK_EQ_I64(ah_layer_params(&m, AH_LAYER_HEAD, 2), 8 + 256 / 2 * 8); /* norm + lm_head shard */
    ah_model_t l7 = {.arch = AH_ARCH_LLAMA, .n_layer = 32, .d_model = 4096, .n_head = 32, .n_kv_head = 32,
                     .d_ff = 11008, .vocab = 32000, .max_pos = 4096, .tied = false, .norm_eps = 1e-5};
    /* 32000 = 250 x 128: no padding at t = 1, so the padded sums are the published count too */
    const int64_t total = ah_layer_params(&l7, AH_LAYER_EMBED, 1) + 32 * ah_layer_params(&l7, AH_LAYER_BLOCK, 1) +
                          ah_layer_params(&l7, AH_LAYER_HEAD, 1);
    CHECK_EQ_I64(total, 6738415616LL);
    CHECK_EQ_I64(ah_model_params_total(&l7), 6738415616LL);
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
    test_vocab_padding();
    test_tables();
    return ah_test_finish();
}
