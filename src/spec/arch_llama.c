/* LLaMA's architecture table (spec/arch.h): RMSNorm, grouped-query attention with rotary
 * positions, SwiGLU MLP, no biases, LM head tied only if tie_word_embeddings. Hugging Face names of
 * LlamaForCausalLM (nn.Linear weights are (out, in), as ours). The planner prices it from this
 * table; the runtime does not train it yet (runtime/gpt.c refuses it). */
#include "spec/arch.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Fields left out are the defaults: cols AH_DIM_ONE, AH_SPLIT_REPL, AH_GRAD_DP, AH_INIT_NORMAL, no
 * decay, always present, HF layout as ours. */
static const ah_tensor_spec_t TENSORS[] = {
    {.name = "wte", .layer = AH_LAYER_EMBED, .rows = AH_DIM_VOCAB, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .grad = AH_GRAD_TIED,
     .decay = true, .hf_name = "model.embed_tokens.weight"},
    {.name = "rms_1.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "model.layers.%d.input_layernorm.weight"},
    {.name = "attn.q.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "model.layers.%d.self_attn.q_proj.weight"},
    {.name = "attn.k.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_KV, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "model.layers.%d.self_attn.k_proj.weight"},
    {.name = "attn.v.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_KV, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "model.layers.%d.self_attn.v_proj.weight"},
    {.name = "attn.o.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_COLS, .decay = true, .hf_name = "model.layers.%d.self_attn.o_proj.weight"},
    {.name = "rms_2.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "model.layers.%d.post_attention_layernorm.weight"},
    {.name = "mlp.gate.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_FF, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "model.layers.%d.mlp.gate_proj.weight"},
    {.name = "mlp.up.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_FF, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true, .hf_name = "model.layers.%d.mlp.up_proj.weight"},
    {.name = "mlp.down.weight", .layer = AH_LAYER_BLOCK, .rows = AH_DIM_MODEL, .cols = AH_DIM_FF,
     .split = AH_SPLIT_COLS, .decay = true, .hf_name = "model.layers.%d.mlp.down_proj.weight"},
    {.name = "norm.weight", .layer = AH_LAYER_HEAD, .rows = AH_DIM_MODEL, .init = AH_INIT_ONES,
     .hf_name = "model.norm.weight"},
    {.name = "lm_head.weight", .layer = AH_LAYER_HEAD, .rows = AH_DIM_VOCAB, .cols = AH_DIM_MODEL,
     .split = AH_SPLIT_ROWS, .decay = true,
     .untied_only = true, .hf_name = "lm_head.weight"},
};

/* runtime/gpt.c's LLaMA block activations, field for field (docs/cost-model.md "Accounting"). */
static const ah_act_spec_t BLOCK_ACTS[] = {
    {.name = "x_in", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "rms1", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "rms1_rstd", .kind = AH_ACT_STAT},
    /* q, k and v of one matmul (their weights lie adjacent in the stage's buffer), after RoPE */
    {.name = "qkv", .kind = AH_ACT_TENSOR, .width = AH_DIM_QKV, .split = true},
    {.name = "attn_state", .kind = AH_ACT_ATTN},
    {.name = "atty", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL, .split = true},
    {.name = "x_mid", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "rms2", .kind = AH_ACT_TENSOR, .width = AH_DIM_MODEL},
    {.name = "rms2_rstd", .kind = AH_ACT_STAT},
    /* gate and up of one matmul, per token the gate's d_ff / t values, then up's */
    {.name = "gu", .kind = AH_ACT_TENSOR, .width = AH_DIM_GATE_UP, .split = true},
    {.name = "act", .kind = AH_ACT_TENSOR, .width = AH_DIM_FF, .split = true},
};

const ah_arch_spec_t ah_arch_llama = {AH_ARCH_LLAMA, TENSORS, N(TENSORS), BLOCK_ACTS, N(BLOCK_ACTS), 1};
