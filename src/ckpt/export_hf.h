/* `autohet ckpt export`: a committed step as a Hugging Face model in the model's own layout,
 * offline (no MPI, no trainer: the node directories are all it reads).
 *
 * Output: OUT_DIR/model.safetensors and OUT_DIR/config.json, fp32, names and layouts from the
 * architecture table (spec/arch.h: hf_name, hf_transposed). GPT-2: GPT2LMHeadModel's transformer.*
 * names, the Conv1D (in, out) layout for c_attn, c_proj and c_fc, lm_head.weight only when the
 * head is untied. LLaMA: LlamaForCausalLM's model.embed_tokens / model.layers.N.{self_attn,mlp,
 * input_layernorm,post_attention_layernorm} / model.norm names, lm_head.weight when untied, and a
 * config.json transformers reads (architectures, model_type llama, sizes, head_dim, rms_norm_eps,
 * rope_theta, rope_scaling, tie_word_embeddings, hidden_act silu, no biases). Vocabulary padding is never
 * exported: V rows, whatever TP degree the step was saved at. ckpt/import_hf.h reads it back. Input: a node's checkpoint
 * root or a directory of them (DIR/NODE/, as --local-root of autohet train). Each shard is taken
 * from whichever node holds a copy that verifies (size, CRC-32C, structure) and is listed by a
 * manifest of the chosen step's model (never from another run of another model that saved the same
 * step under the same names), at whatever TP degree it was saved, and the full tensors are
 * assembled (ckpt/reshard.h). An OUT_DIR holding model.safetensors.index.json or
 * model-*-of-*.safetensors shards is refused (a loader would read those, not the new file).
 * config.json's numbers are written in the fewest digits that read back as the same doubles.
 */
#ifndef AH_CKPT_EXPORT_HF_H
#define AH_CKPT_EXPORT_HF_H

#include <stdint.h>

#include "ckpt/afile.h"
#include "core/status.h"

/* The node checkpoint roots a --local-root DIR names: DIR itself when it holds step directories
 * (one node's root), else each of its subdirectories (DIR/NODE/, as autohet train writes them),
 * sorted. A DIR that cannot be opened is an error, not an empty list. *roots is malloc'ed; free
 * it. (`ckpt ls` and `ckpt verify` take the same DIR.) */
ah_status_t ah_ckpt_node_roots(const char *dir, char (**roots)[AH_CKPT_PATH_MAX], int *n, ah_error_t *err);

/* step < 0: the newest step whose weights are complete at some TP degree and intact; a newer one
 * with a piece no node holds intact is skipped, and skipped (skipped_cap >= 1) says which and why
 * ("" when none). A step given is exported or refused, never replaced. *step_out (may be NULL) gets
 * the step exported. */
ah_status_t ah_ckpt_export_hf(const char *local_root, int64_t step, const char *out_dir, int64_t *step_out,
                              char *skipped, size_t skipped_cap, ah_error_t *err);

#endif
