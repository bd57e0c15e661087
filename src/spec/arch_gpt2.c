/* GPT-2's architecture table (spec/arch.h): LayerNorm with bias, GELU MLP of width d_ff, learned
 * positions, biases on every linear layer, LM head tied to the token embedding. Hugging Face
 * names of GPT2LMHeadModel; its Conv1D layers store their matrices (in, out), ours are (out, in). */
#include "spec/arch.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Fields left out are the defaults: cols AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_NORMAL, no
 * decay, always present, HF layout as ours. */
static const ah_tensor_spec_t TENSORS[] = {
    {.name = "wte", .layer = AH_LAYER_EMBED, .rows = AH_DIM_VOCAB, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .grad = AH_GRAD_TIED,
     .decay = true, .hf_name = "transformer.wte.weight"},
    {.name = "wpe", .layer = AH_LAYER_EMBED, .rows = AH_DIM_POS, .cols = AH_DIM_MODEL, .decay = true,
     .hf_name = "transformer.wpe.weight"},
    {.name = "ln_1.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "transformer.h.%d.ln_1.weight"},
    {.name = "ln_1.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ZEROS,
     .hf_name = "transformer.h.%d.ln_1.bias"},
    {.name = "attn.qkv.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_QKV, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_QKV, .decay = true, .hf_name = "transformer.h.%d.attn.c_attn.weight",
     .hf_transposed = true},
    {.name = "attn.qkv.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_QKV, .split = AH_SPLIT_QKV,
     .init = AH_INIT_ZEROS, .hf_name = "transformer.h.%d.attn.c_attn.bias"},
    {.name = "attn.proj.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_COLS, .init = AH_INIT_RESIDUAL, .decay = true,
     .hf_name = "transformer.h.%d.attn.c_proj.weight", .hf_transposed = true},
    {.name = "attn.proj.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ZEROS,
     .hf_name = "transformer.h.%d.attn.c_proj.bias"},
    {.name = "ln_2.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "transformer.h.%d.ln_2.weight"},
    {.name = "ln_2.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ZEROS,
     .hf_name = "transformer.h.%d.ln_2.bias"},
    {.name = "mlp.fc.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_FF, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "transformer.h.%d.mlp.c_fc.weight",
     .hf_transposed = true},
    {.name = "mlp.fc.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_FF, .split = AH_SPLIT_ROWS,
     .init = AH_INIT_ZEROS, .hf_name = "transformer.h.%d.mlp.c_fc.bias"},
    {.name = "mlp.proj.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .cols = AH_DIM_FF,
     .split = AH_SPLIT_COLS, .init = AH_INIT_RESIDUAL, .decay = true,
     .hf_name = "transformer.h.%d.mlp.c_proj.weight", .hf_transposed = true},
    {.name = "mlp.proj.bias", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ZEROS,
     .hf_name = "transformer.h.%d.mlp.c_proj.bias"},
    {.name = "ln_f.weight", .layer = AH_LAYER_HEAD, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "transformer.ln_f.weight"},
    {.name = "ln_f.bias", .layer = AH_LAYER_HEAD, .rows = AH_DIM_MODEL, .init = AH_INIT_ZEROS,
     .hf_name = "transformer.ln_f.bias"},
    /* A GPT-2 config with tie_word_embeddings false: priced by the planner; the trainer refuses it. */
    {.name = "lm_head.weight", .layer = AH_LAYER_HEAD, .rows = AH_DIM_VOCAB, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true,
     .untied_only = true, .hf_name = "lm_head.weight"},
};

/* runtime/gpt.c's ah_block_act_t, field for field. */
static const ah_act_spec_t BLOCK_ACTS[] = {
    {.name = "x_in", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "ln1", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "ln1_mean", .kind = AH_ACT_STAT}, {.name = "ln1_rstd", .kind = AH_ACT_STAT},
    {.name = "qkv", .kind = AH_ACT_TENSOR, .width = AH_DIM_QKV, .split = true},
    {.name = "attn_state", .kind = AH_ACT_ATTN},
    {.name = "atty", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL, .split = true},
    {.name = "x_mid", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "ln2", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "ln2_mean", .kind = AH_ACT_STAT}, {.name = "ln2_rstd", .kind = AH_ACT_STAT},
    {.name = "fch", .kind = AH_ACT_TENSOR, .width = AH_DIM_FF, .split = true},
    {.name = "fchg", .kind = AH_ACT_TENSOR, .width = AH_DIM_FF, .split = true},
};

const ah_arch_spec_t ah_arch_gpt2 = {AH_ARCH_GPT2, TENSORS, N(TENSORS), BLOCK_ACTS, N(BLOCK_ACTS), 2};
