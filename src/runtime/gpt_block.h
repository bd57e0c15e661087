/* Inside a stage (runtime/gpt.c): one block's saved activations, the backward's workspace, and
 * each architecture's block code (block_gpt2.c, block_llama.c). Internal to src/runtime/.
 *
 * A block's code reads its tensors by their position in the architecture table (spec/arch_*.c,
 * the block's rows in order) and its saved activations by their position in the table's
 * block_acts; ah_gpt_stage_create checks both against the names each ah_block_ops_t lists, so a
 * table edit that the code does not follow is an internal error at start-up, not wrong numbers.
 * Tensors a block multiplies together lie adjacent in the stage's flat buffer (build_params lays
 * them out in table order): LLaMA's q, k, v weights are one (Hl + 2 KVl) hd x C matrix and its gate
 * and up weights one 2 Fl x C matrix, each a single matmul.
 *
 * The backward is whole (keep NULL: input, bias, norm and weight gradients together) or split
 * (zero-bubble): B computes the input gradients and the cheap ones (biases, norms) and keeps, per
 * linear layer, its output gradient (and, on a recomputing stage, its input, which the next
 * block's recomputation overwrites) in an ah_block_keep_t; W (gpt.c, one code for both
 * architectures) then computes the four weight-gradient GEMMs from the kept tensors and the
 * block's saved activations, listed by the architecture's `linears`.
 *
 * Every block does 2 TP all-reduces (ah_gpt_tp_sum) in its forward, 1 in a recomputing
 * backward's shortened forward (out == NULL: it stops before the MLP's output projection) and 2
 * in its backward. */
#ifndef AH_RUNTIME_GPT_BLOCK_H
#define AH_RUNTIME_GPT_BLOCK_H

#include "runtime/gpt.h"

#define AH_MAX_BLOCK_ACTS 13

/* A block's attention: the kernel's, or under context parallelism (cfg.cp_ring) ring attention
 * over the CP group (its state: a logsumexp per query row). */
/* The embedding's forward (x = the rank's token rows + GPT-2's position rows when wpe) and its
 * backward, at the rank's positions under context parallelism. */
void ah_gpt_embedding_fwd(ah_gpt_stage_t *st, float *x, const int32_t *ids, const float *wte, const float *wpe);
void ah_gpt_embedding_bwd(ah_gpt_stage_t *st, float *dwte, float *dwpe, const float *dx, const int32_t *ids);
/* Model m's rotary frequencies as the kernels take them: rope_theta and its LLaMA 3.1 scaling. */
ah_rope_t ah_llama_rope(const ah_model_t *m);
/* This rank's positions under context parallelism (seq_len of them, a host table), or NULL. */
const int *ah_gpt_positions(const ah_gpt_stage_t *st);
/* The same as the kernels take them (the identity without context parallelism). */
ah_cp_at_t ah_gpt_cp_at(const ah_gpt_stage_t *st);
ah_status_t ah_gpt_attention_fwd(ah_gpt_stage_t *st, float *out, float *state, float *scratch, const float *qkv,
                                 ah_error_t *err);
ah_status_t ah_gpt_attention_bwd(ah_gpt_stage_t *st, float *dqkv, float *scratch, const float *dout,
                                 const float *qkv, const float *out, const float *state, ah_error_t *err);

/* One block's tensors kept from forward to backward, in the table's order (at[0] is the block's
 * input in both architectures), viewed field by field per architecture. */
typedef struct {                       /* GPT-2 (spec/arch_gpt2.c) */
    float *x_in;                       /* (N, C) block input */
    float *ln1, *ln1_mean, *ln1_rstd;  /* (N, C), (N), (N) */
    float *qkv;                        /* (N, 3C/t) */
    float *probs;                      /* attention state */
    float *atty;                       /* (N, C/t) attention output, before attn.proj */
    float *x_mid;                      /* (N, C) residual after attention */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch, *fchg;                 /* (N, F/t) mlp.fc output, before and after GELU */
} ah_block_act_gpt2_t;

typedef struct {                       /* LLaMA (spec/arch_llama.c) */
    float *x_in;                       /* (N, C) */
    float *rms1, *rms1_rstd;           /* (N, C), (N) */
    float *qkv;                        /* (N, (Hl + 2 KVl) hd): q and k after RoPE */
    float *probs;
    float *atty;                       /* (N, C/t) */
    float *x_mid;
    float *rms2, *rms2_rstd;
    float *gu;                         /* (N, 2 F/t): gate then up, per token */
    float *act;                        /* (N, F/t) silu(gate) * up */
} ah_block_act_llama_t;

struct ah_block_act {
    union {
        float *at[AH_MAX_BLOCK_ACTS];
        ah_block_act_gpt2_t g;
        ah_block_act_llama_t l;
    };
};

/* The backward's temporaries, carved from the stage's workspace (gpt.c carve_work):
 * dres (N, C) | tmp (N, C) | datty (N, C/t) | dqkv (N, QKVl) | dmlp_in (N, mlp_in) |
 * dmlp_act (N, F/t) | attention scratch. */
typedef struct ah_block_work {
    float *dres, *tmp, *datty, *dqkv, *dmlp_in, *dmlp_act, *scratch;
} ah_block_work_t;

/* The widths a linear layer's input or output has, per TP rank. */
typedef enum { AH_BD_C, AH_BD_CL, AH_BD_FL, AH_BD_QKVL, AH_BD_MLP_IN } ah_block_dim_t;

/* One of a block's linear layers: its weight's (and bias's, -1: none) table position, the saved
 * activation that is its input (index into the block's acts), its input and output widths, and
 * `spare`: a saved activation of the output's width that the block's backward no longer reads
 * once this layer's backward runs (-1: none), where a split backward on a stage that does not
 * recompute keeps the output gradient for W instead of in its W set (the attention's qkv, the
 * MLP's pre-activation). */
typedef struct {
    int weight, bias, input;
    ah_block_dim_t in, out;
    int spare;
} ah_block_linear_t;

#define AH_BLOCK_LINEARS 4 /* both architectures: qkv, attention output, MLP in, MLP out */

/* A split backward's W inputs for one block and micro-batch: each linear's output gradient (N, out;
 * a spare activation of the micro-batch's slot for the linears that have one, on a stage that does
 * not recompute: ah_gpt_keep_for_b) and, on a recomputing stage, its input (N, in) (NULL
 * otherwise: the saved activation). */
typedef struct ah_block_keep {
    float *dy[AH_BLOCK_LINEARS], *x[AH_BLOCK_LINEARS];
} ah_block_keep_t;

typedef struct ah_block_ops {
    const char *const *tensors;  /* the block's tensor names, in table order */
    int n_tensors;
    const char *const *acts;     /* the block's saved activations, in table order */
    int n_acts;
    int mlp_in_mult;             /* the MLP's first matmul has mlp_in_mult * F/t outputs */
    /* Block l's forward from a->at[0]; out (N, C) gets its output, or NULL to stop before the
     * MLP's output projection (all a recomputing backward needs). It uses only w->tmp and
     * w->scratch of the workspace. */
    ah_status_t (*fwd)(ah_gpt_stage_t *st, int l, ah_block_act_t *a, float *out, const ah_block_work_t *w,
                       ah_error_t *err);
    /* Block l's backward: w->dres holds the gradient of its output on entry, of its input on
     * exit; parameter gradients accumulate, all of them (keep NULL) or all but the linear
     * layers' weights, whose inputs go to keep (a split backward's B). */
    ah_status_t (*bwd)(ah_gpt_stage_t *st, int l, const ah_block_act_t *a, const ah_block_work_t *w,
                       const ah_block_keep_t *keep, ah_error_t *err);
    ah_block_linear_t linears[AH_BLOCK_LINEARS]; /* in the order bwd passes them to keep */
    /* The final norm before the head: out (N, C) and stats (norm_stats * N) from inp (N, C); the
     * backward adds into dinp and the norm's gradients. */
    void (*head_norm_fwd)(ah_gpt_stage_t *st, float *out, float *stats, const float *inp);
    void (*head_norm_bwd)(ah_gpt_stage_t *st, float *dinp, const float *dout, const float *inp,
                          const float *stats);
} ah_block_ops_t;

extern const ah_block_ops_t ah_block_gpt2, ah_block_llama;

/* Whether the slot's chunk runs the embedding (chunk 0 of stage 0) or the head (the last chunk of
 * the last stage) (gpt.c). */
bool ah_gpt_slot_embed(const ah_gpt_stage_t *st, int64_t slot);
bool ah_gpt_slot_head(const ah_gpt_stage_t *st, int64_t slot);
/* Block l's W inputs in W set wset (gpt.c). */
ah_block_keep_t *ah_gpt_keep(const ah_gpt_stage_t *st, int64_t wset, int l);
/* Weights and gradients of block l's tensor at table position `which` (gpt.c). */
float *ah_gpt_block_w(const ah_gpt_stage_t *st, int l, int which);
float *ah_gpt_block_g(const ah_gpt_stage_t *st, int l, int which);
/* Weights and gradients of the stage's tensor `name` (it must hold it). */
float *ah_gpt_named_w(const ah_gpt_stage_t *st, const char *name);
float *ah_gpt_named_g(const ah_gpt_stage_t *st, const char *name);
/* Width d of stage st. */
int64_t ah_gpt_block_dim(const ah_gpt_stage_t *st, ah_block_dim_t d);
/* The backward of block l's linear layer i (st->ops->linears[i]) from dout (N, out) and its input
 * inp (N, in): dinp (N, in; NULL: none) and the bias gradient accumulate; the weight gradient too
 * (keep NULL), or dout (and, on a recomputing stage, inp) is copied into keep for W. */
void ah_gpt_linear_bwd(ah_gpt_stage_t *st, int l, int i, const ah_block_keep_t *keep, float *dinp,
                       const float *dout, const float *inp);
/* W set wset's inputs of block l for a B whose activations are a: the spare activations (above)
 * of a's slot take the output gradients that have one, on a stage that does not recompute. */
ah_block_keep_t *ah_gpt_keep_for_b(const ah_gpt_stage_t *st, int64_t wset, int l, const ah_block_act_t *a);
/* Allocates st->keep's W sets (cfg.wsets; nothing when 0) from the stage's arena a_keep. */
ah_status_t ah_gpt_alloc_keep(ah_gpt_stage_t *st, ah_error_t *err);
/* The clock a stage's parts are timed by (gpt.c). */
double ah_gpt_part_clock(const ah_gpt_stage_t *st);
/* A TP all-reduce (sum) of n floats, which ends a segment of the emulated phase; nothing at t = 1. */
ah_status_t ah_gpt_tp_sum(ah_gpt_stage_t *st, float *x, size_t n, ah_error_t *err);
/* A row-parallel linear layer's forward into the residual stream: out (N, C) = resid + the TP sum of
 * in (N, in_cols) @ w^T (+ bias, NULL: none), through tmp (N, C). */
ah_status_t ah_gpt_row_residual(ah_gpt_stage_t *st, float *out, const float *resid, const float *in, const float *w,
                                const float *bias, int in_cols, float *tmp, ah_error_t *err);

#endif
