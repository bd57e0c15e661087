/* GPT-2's architecture table (spec/arch.h): LayerNorm with bias, GELU MLP of width d_ff, learned
 * positions, biases on every linear layer, LM head tied to the token embedding. Hugging Face
 * names of GPT2LMHeadModel; its Conv1D layers store their matrices (in, out), ours are (out, in). */
#include "spec/arch.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* name, layer, rows, cols, split, grad, init, decay, untied_only, hf_name, hf_transposed */
static const ah_tensor_spec_t TENSORS[] = {
    {"wte", AH_LAYER_EMBED, AH_DIM_VOCAB, AH_DIM_MODEL, AH_SPLIT_REPL, AH_GRAD_TIED, AH_INIT_NORMAL, true, false,
     "transformer.wte.weight", false},
    {"wpe", AH_LAYER_EMBED, AH_DIM_POS, AH_DIM_MODEL, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_NORMAL, true, false,
     "transformer.wpe.weight", false},
    {"ln_1.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false, false,
     "transformer.h.%d.ln_1.weight", false},
    {"ln_1.bias", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.h.%d.ln_1.bias", false},
    {"attn.qkv.weight", AH_LAYER_BLOCK, AH_DIM_QKV, AH_DIM_MODEL, AH_SPLIT_QKV, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "transformer.h.%d.attn.c_attn.weight", true},
    {"attn.qkv.bias", AH_LAYER_BLOCK, AH_DIM_QKV, AH_DIM_ONE, AH_SPLIT_QKV, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.h.%d.attn.c_attn.bias", false},
    {"attn.proj.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_MODEL, AH_SPLIT_COLS, AH_GRAD_DP, AH_INIT_RESIDUAL,
     true, false, "transformer.h.%d.attn.c_proj.weight", true},
    {"attn.proj.bias", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ZEROS, false,
     false, "transformer.h.%d.attn.c_proj.bias", false},
    {"ln_2.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false, false,
     "transformer.h.%d.ln_2.weight", false},
    {"ln_2.bias", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.h.%d.ln_2.bias", false},
    {"mlp.fc.weight", AH_LAYER_BLOCK, AH_DIM_FF, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true, false,
     "transformer.h.%d.mlp.c_fc.weight", true},
    {"mlp.fc.bias", AH_LAYER_BLOCK, AH_DIM_FF, AH_DIM_ONE, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.h.%d.mlp.c_fc.bias", false},
    {"mlp.proj.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_FF, AH_SPLIT_COLS, AH_GRAD_DP, AH_INIT_RESIDUAL, true,
     false, "transformer.h.%d.mlp.c_proj.weight", true},
    {"mlp.proj.bias", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.h.%d.mlp.c_proj.bias", false},
    {"ln_f.weight", AH_LAYER_HEAD, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false, false,
     "transformer.ln_f.weight", false},
    {"ln_f.bias", AH_LAYER_HEAD, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ZEROS, false, false,
     "transformer.ln_f.bias", false},
    /* A GPT-2 config with tie_word_embeddings false: priced by the planner; the trainer refuses it. */
    {"lm_head.weight", AH_LAYER_HEAD, AH_DIM_VOCAB, AH_DIM_MODEL, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_NORMAL, true,
     true, "lm_head.weight", false},
};

/* runtime/gpt.c's ah_block_act_t, field for field. */
static const ah_act_spec_t BLOCK_ACTS[] = {
    {"x_in", AH_ACT_TENSOR, AH_DIM_MODEL, false},   {"ln1", AH_ACT_TENSOR, AH_DIM_MODEL, false},
    {"ln1_mean", AH_ACT_STAT, AH_DIM_ONE, false},   {"ln1_rstd", AH_ACT_STAT, AH_DIM_ONE, false},
    {"qkv", AH_ACT_TENSOR, AH_DIM_QKV, true},       {"attn_state", AH_ACT_ATTN, AH_DIM_ONE, false},
    {"atty", AH_ACT_TENSOR, AH_DIM_MODEL, true},    {"x_mid", AH_ACT_TENSOR, AH_DIM_MODEL, false},
    {"ln2", AH_ACT_TENSOR, AH_DIM_MODEL, false},    {"ln2_mean", AH_ACT_STAT, AH_DIM_ONE, false},
    {"ln2_rstd", AH_ACT_STAT, AH_DIM_ONE, false},   {"fch", AH_ACT_TENSOR, AH_DIM_FF, true},
    {"fchg", AH_ACT_TENSOR, AH_DIM_FF, true},
};

const ah_arch_spec_t ah_arch_gpt2 = {AH_ARCH_GPT2, TENSORS, N(TENSORS), BLOCK_ACTS, N(BLOCK_ACTS), 2};
