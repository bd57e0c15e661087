/* LLaMA's architecture table (spec/arch.h): RMSNorm, grouped-query attention with rotary
 * positions, SwiGLU MLP, no biases, LM head tied only if tie_word_embeddings. Hugging Face names of
 * LlamaForCausalLM (nn.Linear weights are (out, in), as ours). The planner prices it from this
 * table; the runtime does not train it yet (runtime/gpt.c refuses it). */
#include "spec/arch.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* name, layer, rows, cols, split, grad, init, decay, untied_only, hf_name, hf_transposed */
static const ah_tensor_spec_t TENSORS[] = {
    {"wte", AH_LAYER_EMBED, AH_DIM_VOCAB, AH_DIM_MODEL, AH_SPLIT_REPL, AH_GRAD_TIED, AH_INIT_NORMAL, true, false,
     "model.embed_tokens.weight", false},
    {"rms_1.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false,
     false, "model.layers.%d.input_layernorm.weight", false},
    {"attn.q.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.self_attn.q_proj.weight", false},
    {"attn.k.weight", AH_LAYER_BLOCK, AH_DIM_KV, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.self_attn.k_proj.weight", false},
    {"attn.v.weight", AH_LAYER_BLOCK, AH_DIM_KV, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.self_attn.v_proj.weight", false},
    {"attn.o.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_MODEL, AH_SPLIT_COLS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.self_attn.o_proj.weight", false},
    {"rms_2.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false,
     false, "model.layers.%d.post_attention_layernorm.weight", false},
    {"mlp.gate.weight", AH_LAYER_BLOCK, AH_DIM_FF, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.mlp.gate_proj.weight", false},
    {"mlp.up.weight", AH_LAYER_BLOCK, AH_DIM_FF, AH_DIM_MODEL, AH_SPLIT_ROWS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.mlp.up_proj.weight", false},
    {"mlp.down.weight", AH_LAYER_BLOCK, AH_DIM_MODEL, AH_DIM_FF, AH_SPLIT_COLS, AH_GRAD_DP, AH_INIT_NORMAL, true,
     false, "model.layers.%d.mlp.down_proj.weight", false},
    {"norm.weight", AH_LAYER_HEAD, AH_DIM_MODEL, AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_ONES, false, false,
     "model.norm.weight", false},
    {"lm_head.weight", AH_LAYER_HEAD, AH_DIM_VOCAB, AH_DIM_MODEL, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_NORMAL, true,
     true, "lm_head.weight", false},
};

/* What the accounting counts per block (docs/cost-model.md "Accounting"). */
static const ah_act_spec_t BLOCK_ACTS[] = {
    {"x_in", AH_ACT_TENSOR, AH_DIM_MODEL, false},   {"rms1", AH_ACT_TENSOR, AH_DIM_MODEL, false},
    {"rms1_rstd", AH_ACT_STAT, AH_DIM_ONE, false},  {"q", AH_ACT_TENSOR, AH_DIM_MODEL, true},
    {"k", AH_ACT_TENSOR, AH_DIM_KV, true},          {"v", AH_ACT_TENSOR, AH_DIM_KV, true},
    {"attn_state", AH_ACT_ATTN, AH_DIM_ONE, false}, {"atty", AH_ACT_TENSOR, AH_DIM_MODEL, true},
    {"x_mid", AH_ACT_TENSOR, AH_DIM_MODEL, false},  {"rms2", AH_ACT_TENSOR, AH_DIM_MODEL, false},
    {"rms2_rstd", AH_ACT_STAT, AH_DIM_ONE, false},  {"gate", AH_ACT_TENSOR, AH_DIM_FF, true},
    {"up", AH_ACT_TENSOR, AH_DIM_FF, true},         {"act", AH_ACT_TENSOR, AH_DIM_FF, true},
};

const ah_arch_spec_t ah_arch_llama = {AH_ARCH_LLAMA, TENSORS, N(TENSORS), BLOCK_ACTS, N(BLOCK_ACTS), 1};
