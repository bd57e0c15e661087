/* A model architecture as data: one table per architecture (arch_gpt2.c, arch_llama.c) lists
 * every tensor of the model with its name, its shape as a function of the config, how tensor
 * parallelism splits it, which group sums its gradient, whether AdamW decays it, how it is
 * initialised, and its Hugging Face name and layout; and the tensors one block keeps from its
 * forward to its backward. Everything that needs to know a model's tensors reads this table:
 * the runtime's stage builder (runtime/gpt.c), the parameter / FLOP / activation accounting
 * (cost/accounting.c), the trainer's gradient groups and global sums (runtime/trainer.c),
 * checkpoint shard contents and resharding, and the Hugging Face export. No module outside the
 * table re-derives a tensor's shape, split or name (kernels keep their own struct fields).
 *
 * A table lists the embedding's tensors, ONE block's (the template; block l's full name is
 * "h.<l>.<name>"), then the head's, in that canonical order; ah_model_tensors expands it for a
 * model (embedding, blocks 0 .. L-1, head). Pure data and pure functions: no allocation, no I/O.
 */
#ifndef AH_SPEC_ARCH_H
#define AH_SPEC_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec/model.h"

/* Where a tensor lives: the embedding (stage 0 of every pipeline), a block (the stage holding it),
 * the final norm and LM head (the last stage). */
typedef enum { AH_LAYER_EMBED = 0, AH_LAYER_BLOCK = 1, AH_LAYER_HEAD = 2 } ah_layer_kind_t;

/* A dimension a shape is made of. */
typedef enum {
    AH_DIM_ONE = 0, /* 1: the second dimension of a vector */
    AH_DIM_MODEL,   /* C = d_model */
    AH_DIM_KV,      /* width of the key (and of the value) projection: C * n_kv_head / n_head */
    AH_DIM_QKV,     /* q, k and v stacked: C + 2 * KV */
    AH_DIM_FF,      /* MLP hidden width d_ff */
    AH_DIM_GATE_UP, /* SwiGLU's gate and up projections stacked: 2 * d_ff */
    AH_DIM_VOCAB,   /* V (a vocabulary-parallel shard pads it: ah_vocab_padded) */
    AH_DIM_POS      /* max_pos: learned position rows */
} ah_dim_t;

/* How Megatron-style tensor parallelism over t ranks splits a (rows, cols) tensor; rank k holds: */
typedef enum {
    AH_SPLIT_REPL = 0, /* the whole tensor (norms, row-parallel biases, the embedding) */
    AH_SPLIT_ROWS,     /* column-parallel: rows [k R/t, (k+1) R/t); for R = V (the
                        * vocabulary-parallel embedding and head) R is ah_vocab_padded(m, t) and
                        * rows past V are padding */
    AH_SPLIT_QKV,      /* column-parallel over heads of q, k and v stacked by rows in three equal
                        * parts: heads [k H/t, (k+1) H/t) of each part (GPT-2's c_attn) */
    AH_SPLIT_COLS      /* row-parallel: columns [k K/t, (k+1) K/t) */
} ah_tp_split_t;

/* Which group sums a tensor's gradient after the backward (runtime/trainer.c's DP sync). */
typedef enum {
    AH_GRAD_DP = 0, /* the data-parallel replicas of its holder, one TP rank each: a block's DP
                     * segment group; the embedding's first stages; the head's last stages */
    AH_GRAD_TIED    /* the tied embedding / LM-head matrix: every first and last stage of every
                     * pipeline at one TP rank (a last stage without the embedding holds a copy);
                     * in a model whose head is untied, AH_GRAD_DP */
} ah_grad_group_t;

/* Initialisation of a weight (runtime/gpt.c draws it plan-independently). */
typedef enum {
    AH_INIT_NORMAL = 0, /* N(0, s^2), s the model's init_std (config initializer_range; 0.02) */
    AH_INIT_RESIDUAL,   /* N(0, (s / sqrt(2 L))^2): projections into the residual stream */
    AH_INIT_ONES,
    AH_INIT_ZEROS
} ah_init_t;

typedef struct ah_tensor_spec {
    const char *name;         /* ours: "wte", "ln_f.weight"; a block's without "h.<l>." */
    ah_layer_kind_t layer;
    ah_dim_t rows, cols;      /* cols AH_DIM_ONE for a vector */
    ah_tp_split_t split;
    ah_grad_group_t grad;
    ah_init_t init;
    bool decay;               /* AdamW's weight decay applies */
    bool untied_only;         /* present only when the LM head is not tied to the embedding */
    const char *hf_name;      /* Hugging Face state-dict name; %d takes a block's index */
    bool hf_transposed;       /* HF stores it (cols, rows): GPT-2's Conv1D (in, out) weights */
} ah_tensor_spec_t;

/* What one block keeps from its forward to its backward, per micro-batch of N tokens. */
typedef enum {
    AH_ACT_TENSOR = 0, /* (N, width) in the activation precision; width / t when split */
    AH_ACT_STAT,       /* (N) fp32: a norm's per-token statistic, in every precision */
    AH_ACT_ATTN        /* the attention kernel's saved state: the backend says its size */
} ah_act_kind_t;

typedef struct ah_act_spec {
    const char *name;
    ah_act_kind_t kind;
    ah_dim_t width;           /* AH_ACT_TENSOR only */
    bool split;               /* AH_ACT_TENSOR: width / t per TP rank */
} ah_act_spec_t;

typedef struct ah_arch_spec {
    ah_arch_t arch;
    const ah_tensor_spec_t *tensors; /* embedding, one block, head: canonical order */
    int n_tensors;
    const ah_act_spec_t *block_acts; /* one block's saved tensors, in the runtime's carve order */
    int n_block_acts;
    int norm_stats;                  /* fp32 statistics per token of one norm: LayerNorm 2 (mean,
                                      * rstd), RMSNorm 1 (rstd) */
} ah_arch_spec_t;

const ah_arch_spec_t *ah_arch_spec(ah_arch_t a);
/* The value of a dimension for a model. */
int64_t ah_dim_value(const ah_model_t *m, ah_dim_t d);

/* Vocabulary padding, as Megatron-LM pads (--make-vocab-size-divisible-by 128): the embedding and
 * the LM head are split by vocabulary rows over the TP group, and V is rounded up to a multiple of
 * AH_VOCAB_PAD * t so that each of the t ranks holds the same number of rows. Padded rows are
 * zero, masked out of the loss (their logits take no part in the softmax), never receive a
 * gradient, and are counted in memory and time but not in printed parameter counts; a checkpoint
 * shard keeps them as trained, resharding and exports drop them (ah_tensor_full_index gives them
 * -1). */
#define AH_VOCAB_PAD 128
int64_t ah_vocab_padded(const ah_model_t *m, int t);

/* One tensor of a model: its table row expanded. */
typedef struct ah_tensor {
    char name[48];            /* full name: "wte", "h.3.attn.qkv.weight", "ln_f.bias" */
    int64_t rows, cols;       /* full shape; cols = 1 for vectors */
    int block;                /* block index, or -1 for the embedding's and the head's tensors */
    bool padded_rows;         /* split by vocabulary rows, padded (ah_vocab_padded) */
    const ah_tensor_spec_t *spec;
} ah_tensor_t;

/* The model's tensors in canonical order (embedding, blocks 0 .. L-1, head; untied-only rows only
 * when the head is untied). Returns the count; fills `out` when not NULL (room for
 * ah_model_tensor_count entries). */
int ah_model_tensor_count(const ah_model_t *m);
void ah_model_tensors(const ah_model_t *m, ah_tensor_t *out);
/* Tensors of one block (the template's rows present for this model). */
int ah_block_tensor_count(const ah_model_t *m);

/* Elements of the tensor's content: rows * cols, no padding. */
int64_t ah_tensor_elems(const ah_tensor_t *x);
/* Elements of the shard a TP rank of t holds, vocabulary padding included (t = 1: the whole
 * tensor, padded to a multiple of AH_VOCAB_PAD when its rows are V). */
int64_t ah_tensor_shard_elems(const ah_tensor_t *x, int t);
/* The shard's own shape (rows, cols) at TP degree t, padding included. */
void ah_tensor_shard_shape(const ah_tensor_t *x, int t, int64_t shape[2]);
/* Flat index in the full tensor (rows x cols, no padding) of element i of TP rank k's shard, or -1
 * for an element of a padded vocabulary row. */
int64_t ah_tensor_full_index(const ah_tensor_t *x, int t, int k, int64_t i);
/* N(0, std^2) for a random initialisation, 0 for a constant one (then *fill is the constant). */
float ah_tensor_init_std(const ah_tensor_t *x, const ah_model_t *m, float *fill);
/* The Hugging Face name; false when it does not fit in cap. */
bool ah_tensor_hf_name(const ah_tensor_t *x, char *out, size_t cap);
/* The tensor is the tied embedding / LM-head matrix of this model (AH_GRAD_TIED and the model ties
 * its head; in an untied model such a row is summed as AH_GRAD_DP). */
bool ah_tensor_tied(const ah_tensor_t *x, const ah_model_t *m);

/* Whether tensor parallelism splits some tensor of that layer (else every TP rank holds the whole
 * layer, and one TP rank's copy is the layer). */
bool ah_layer_tp_split(const ah_model_t *m, ah_layer_kind_t kind);
/* Parameters a TP rank of t holds of one layer of that kind: the sum of its tensors' shards,
 * vocabulary padding included (what memory and time count). The head counts its own tensors
 * only: a tied head's matrix is the embedding's (ah_tied_params). */
int64_t ah_layer_params(const ah_model_t *m, ah_layer_kind_t kind, int t);
/* The layer's parameters as the model defines them: whole tensors, no padding (printed counts). */
int64_t ah_layer_content_params(const ah_model_t *m, ah_layer_kind_t kind);
/* Elements of the tensors whose gradient is summed in the tied group (the tied matrix a last
 * stage without the embedding keeps a copy of), per TP rank of t; 0 for an untied model. */
int64_t ah_tied_params(const ah_model_t *m, int t);
/* Per-token multiply-adds of one block's matmul weights, per TP rank of t (2-D block tensors). */
int64_t ah_block_matmul_elems(const ah_model_t *m, int t);
/* Elements per TP rank of t of the matrix the LM head multiplies by: the tied embedding's when the
 * head is tied, else the head's own. */
int64_t ah_head_matrix_params(const ah_model_t *m, int t);
/* Elements per TP rank of t of the head's vectors: its final norm. */
int64_t ah_head_norm_params(const ah_model_t *m, int t);

#endif
