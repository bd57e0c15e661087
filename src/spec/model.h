/* Model spec: the transformer's shape, from a preset name or a Hugging Face config.json.
 *
 * Two families: GPT-2 (LayerNorm with bias, tanh-GELU MLP of width d_ff, learned positions, biases
 * on every linear layer, LM head tied to the token embedding unless tie_word_embeddings is false)
 * and LLaMA (RMSNorm, SwiGLU MLP, grouped-query attention, rotary positions, no biases, head tied
 * only if tie_word_embeddings). GPT-3 175B is a GPT-2-architecture model at a larger shape.
 *
 * A Hugging Face config whose fields ask for something the runtime does not compute is refused at
 * load, naming the field and its value (so `model`, `plan` and `train` refuse alike): GPT-2 an
 * activation_function other than the tanh GELU ("gelu_new", "gelu_pytorch_tanh"; HF's "gelu" is
 * the exact erf GELU), scale_attn_weights false, scale_attn_by_inverse_layer_idx true; LLaMA and
 * Mistral attention_bias or mlp_bias true, a non-zero attention_dropout (the runtime trains without
 * dropout), a rope_scaling other than LLaMA 3.1's "llama3" (kept: rope_scaling below; transformers
 * v5's rope_parameters is read the same way), a hidden_act other than "silu", a head_dim other than
 * hidden_size / num_attention_heads (an integer; 16.0 reads as 16, "16" is refused). As in
 * transformers, null num_key_value_heads, head_dim, n_inner and sliding_window mean absent. A
 * sliding_window shorter than max_position_embeddings is kept (sliding_window below) and limits the
 * sequence length; a Mistral config without the key has MistralConfig's default, 4096. GPT-2's
 * dropout probabilities (attn_pdrop, embd_pdrop, resid_pdrop; 0.1 in the published configs) are
 * accepted and not applied (ah_model_unapplied_dropout names them). initializer_range (both
 * families) is the std of the random initialisation (init_std below), a number in (0, 1].
 *
 * Layers are numbered like the plan file numbers them: blocks 0 .. n_layer-1. The embedding is
 * held by stage 0 of every pipeline and the final norm + LM head by the last stage; they are not
 * in any stage's [first, last) range.
 */
#ifndef AH_SPEC_MODEL_H
#define AH_SPEC_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

typedef enum { AH_ARCH_GPT2 = 0, AH_ARCH_LLAMA = 1 } ah_arch_t;

/* LLaMA 3.1's rotary scaling (transformers' rope_type "llama3"): the frequencies whose
 * wavelength exceeds original_max_pos / low_freq_factor are divided by factor, those under
 * original_max_pos / high_freq_factor kept, those between blended (kernels/rope_freq.h). */
typedef struct ah_rope_scaling {
    double factor; /* 0: no scaling */
    double low_freq_factor, high_freq_factor;
    int64_t original_max_pos; /* original_max_position_embeddings */
} ah_rope_scaling_t;

/* The config's special token ids (bos_token_id, eos_token_id, pad_token_id). They change nothing the
 * runtime computes and are carried as given, from the config or preset to the plan's model object,
 * the checkpoint manifest and the exported config.json, so that the exported model's generation
 * starts and stops where its tokenizer expects (without them transformers' LlamaConfig falls back to
 * 1 and 2, which LLaMA 3's vocabulary does not use). eos may be a list (LLaMA 3.1: 128001, 128008,
 * 128009). */
#define AH_MODEL_MAX_EOS 8
typedef struct ah_token_ids {
    bool has_bos, has_pad;
    int64_t bos, pad;
    int n_eos;     /* 0: no eos_token_id */
    bool eos_list; /* eos_token_id was a list (written back as one, even of one id) */
    int64_t eos[AH_MODEL_MAX_EOS];
} ah_token_ids_t;

typedef struct ah_model {
    char name[64];     /* preset name, or the config.json path as given */
    ah_arch_t arch;
    int64_t n_layer;   /* transformer blocks L */
    int64_t d_model;   /* hidden size C */
    int64_t n_head;    /* attention heads H; head dim = C / H */
    int64_t n_kv_head; /* key/value heads (GQA); == n_head for GPT-2 */
    int64_t d_ff;      /* MLP hidden width (4C for GPT-2) */
    int64_t vocab;     /* V */
    int64_t max_pos;   /* context length (learned position rows for GPT-2) */
    bool tied;         /* LM head shares the token embedding matrix */
    double norm_eps;
    double rope_theta; /* LLaMA: rotary base (config rope_theta; 10000 when absent); GPT-2: 0 */
    ah_rope_scaling_t rope_scaling; /* LLaMA 3.1's (config rope_scaling, rope_type "llama3");
                                     * factor 0: none (rope_scaling null) */
    int64_t sliding_window; /* Mistral: attention window (config sliding_window) when shorter than
                             * max_pos, else 0 (none). The runtime computes full causal attention,
                             * which is the window's attention only for sequences within it, so a
                             * longer seq_len is refused (ah_model_context) */
    ah_token_ids_t tokens; /* not compared by ah_model_diff: they change no math */
    double init_std;       /* std of the weights' random normal initialisation (config
                            * initializer_range, model object init_std; 0: AH_INIT_STD_DEFAULT);
                            * projections into the residual stream get init_std / sqrt(2 L)
                            * (spec/arch.h). Not compared by ah_model_diff: it sets where training
                            * starts, not what the model computes */
} ah_model_t;
#define AH_INIT_STD_DEFAULT 0.02 /* transformers' initializer_range default, GPT-2's and LLaMA's */

/* A preset by name (see ah_model_preset_name), or a path to a HF config.json. */
ah_status_t ah_model_load(const char *name_or_path, ah_model_t *m, ah_error_t *err);
ah_status_t ah_model_preset(const char *name, ah_model_t *m, ah_error_t *err);
ah_status_t ah_model_from_hf_config(const char *path, ah_model_t *m, ah_error_t *err);
/* A GPT-2 config's dropout probabilities (attn_pdrop, embd_pdrop, resid_pdrop: 0.1 in the published
 * gpt2 configs) are accepted and not applied: the runtime trains without dropout. The non-zero ones
 * of the config name_or_path names, as "attn_pdrop 0.1, resid_pdrop 0.1" into buf; returns how many
 * (0 for a preset or a file that does not load; LLaMA's attention_dropout is refused at load). */
int ah_model_unapplied_dropout(const char *name_or_path, char *buf, size_t cap);
struct json_t;
/* Sets the token ids model->tokens holds on obj (a config.json or a model object), under
 * Hugging Face's keys bos_token_id, eos_token_id, pad_token_id; returns obj, or NULL out of memory. */
struct json_t *ah_token_ids_to_json(const ah_model_t *model, struct json_t *obj);
/* Parses an already-loaded HF config object; `where` names it in messages. */
ah_status_t ah_model_from_hf_json(const struct json_t *cfg, const char *where, ah_model_t *m,
                                  ah_error_t *err);

/* Plan files carry the model as an object with these fields; to/from that form. */
struct json_t *ah_model_to_json(const ah_model_t *m);
/* A model's rope_scaling as a config / model object writes it: null when none. */
struct json_t *ah_rope_scaling_to_json(const ah_rope_scaling_t *r);
ah_status_t ah_model_from_json(const struct json_t *obj, const char *where, ah_model_t *m,
                               ah_error_t *err);

/* Checks the shape itself (positive sizes, C divisible by H, H divisible by n_kv_head). */
ah_status_t ah_model_validate(const ah_model_t *m, const char *where, ah_error_t *err);
/* Whether TP degree t can split this model: heads and kv heads divisible by t, d_ff too. */
ah_status_t ah_model_check_tp(const ah_model_t *m, int t, ah_error_t *err);

/* The longest sequence autohet trains the model on: max_pos, or the sliding window when shorter. */
int64_t ah_model_context(const ah_model_t *m);
/* Refuses a seq_len longer than the model's sliding window (ah_model_context), naming the field;
 * `what` names the setting in the message ("train.seq_len", "--seq-len"). Does not check max_pos,
 * whose messages each caller words itself. */
ah_status_t ah_model_check_window(const ah_model_t *m, int64_t seq_len, const char *what, ah_error_t *err);

/* The first field in which a and b differ, with both values as text ("rope_theta", "20000",
 * "10000"), named as a Hugging Face config.json names it (hf: num_hidden_layers or n_layer by
 * architecture, rms_norm_eps, ...) or as the plan file's model object does (n_layer, norm_eps, ...);
 * false when the models are equal. Every field of ah_model_t is compared but the token ids, which
 * change nothing the runtime computes. */
typedef struct ah_model_diff {
    char field[64];
    char a[32], b[32];
} ah_model_diff_t;
bool ah_model_diff(const ah_model_t *a, const ah_model_t *b, bool hf, ah_model_diff_t *d);
bool ah_model_equal(const ah_model_t *a, const ah_model_t *b);

int ah_model_preset_count(void);
const char *ah_model_preset_name(int i);

const char *ah_arch_name(ah_arch_t a);

#endif
