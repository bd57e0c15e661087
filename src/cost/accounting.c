/* Accounting per layer kind: parameters, matmul FLOPs and activation bytes, per TP rank.
 * Every formula here is written down in docs/cost-model.md ("Accounting"); keep them in step.
 *
 * Megatron-style tensor parallelism over t ranks: column-parallel layers (QKV / Q,K,V, MLP-in,
 * gate/up) split their matrix and their bias by t; row-parallel layers (attention-out, MLP-out)
 * split their matrix and keep the bias replicated; norms are replicated. So per-rank counts x t
 * exceed the total by the replicated pieces. The embedding and the head are replicated across
 * the TP group (not vocab-parallel). All divisions by t are exact for a t that passed
 * ah_model_check_tp (heads, kv heads and d_ff divisible by t, hence C and the kv width too). */
#include <string.h>

#include "cost/cost.h"

const char *ah_precision_name(ah_precision_t p) { return p == AH_PREC_BF16 ? "bf16" : "fp32"; }

bool ah_precision_parse(const char *s, ah_precision_t *out) {
    if (strcmp(s, "fp32") == 0) *out = AH_PREC_FP32;
    else if (strcmp(s, "bf16") == 0) *out = AH_PREC_BF16;
    else return false;
    return true;
}

/* Width of the key (and of the value) projection: C * KV / H (= C for GPT-2). */
static int64_t kv_width(const ah_model_t *m) { return m->d_model * m->n_kv_head / m->n_head; }

/* Per-token floats of one norm's saved statistics: LayerNorm keeps mean + rstd, RMSNorm rstd. */
static int64_t norm_stats(const ah_model_t *m) { return m->arch == AH_ARCH_GPT2 ? 2 : 1; }

static int64_t block_params(const ah_model_t *m, int64_t t) {
    const int64_t C = m->d_model, F = m->d_ff;
    if (m->arch == AH_ARCH_GPT2)
        return 2 * C                         /* ln_1 weight + bias (replicated) */
               + (3 * C * C + 3 * C) / t     /* c_attn: column-parallel, weight and bias split */
               + C * C / t + C               /* attn c_proj: row-parallel, bias replicated */
               + 2 * C                       /* ln_2 */
               + (C * F + F) / t             /* c_fc: column-parallel */
               + F * C / t + C;              /* mlp c_proj: row-parallel */
    const int64_t KVW = kv_width(m);
    return C * C / t                         /* q_proj */
           + 2 * C * KVW / t                 /* k_proj, v_proj */
           + C * C / t                       /* o_proj (row-parallel, no bias) */
           + 3 * C * F / t                   /* gate, up (column), down (row) */
           + 2 * C;                          /* two RMSNorm weights (replicated) */
}

int64_t ah_layer_params(const ah_model_t *m, ah_layer_kind_t kind, int t) {
    const int64_t C = m->d_model, V = m->vocab;
    switch (kind) {
    case AH_LAYER_EMBED:
        return V * C + (m->arch == AH_ARCH_GPT2 ? m->max_pos * C : 0); /* wte (+ wpe) */
    case AH_LAYER_BLOCK:
        return block_params(m, t);
    case AH_LAYER_HEAD:
        /* final norm (LayerNorm 2C, RMSNorm C) + the LM head matrix when it is not tied */
        return (m->arch == AH_ARCH_GPT2 ? 2 * C : C) + (m->tied ? 0 : V * C);
    }
    return 0;
}

int64_t ah_model_params_total(const ah_model_t *m) {
    return ah_layer_params(m, AH_LAYER_EMBED, 1) + m->n_layer * ah_layer_params(m, AH_LAYER_BLOCK, 1) +
           ah_layer_params(m, AH_LAYER_HEAD, 1);
}

double ah_layer_fwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T) {
    const double N = (double)b * (double)T, C = (double)m->d_model, F = (double)m->d_ff;
    const double V = (double)m->vocab, KVW = (double)kv_width(m);
    switch (kind) {
    case AH_LAYER_EMBED:
        return 0; /* a gather, no matmul */
    case AH_LAYER_BLOCK: {
        /* weight matmuls: 2 FLOPs per multiply-add per token */
        double weights = m->arch == AH_ARCH_GPT2 ? 3 * C * C + C * C + 2 * C * F
                                                 : C * C + 2 * C * KVW + C * C + 3 * C * F;
        /* attention: QK^T and AV, each 2*N*T*C, full T x T (not halved for causality) */
        return (2 * N * weights + 4 * N * (double)T * C) / t;
    }
    case AH_LAYER_HEAD:
        return 2 * N * C * V; /* replicated over the TP group, so not divided by t */
    }
    return 0;
}

double ah_layer_bwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T) {
    return 2 * ah_layer_fwd_flops(m, kind, t, b, T);
}

int64_t ah_layer_act_bytes(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T,
                           ah_precision_t p, bool recompute) {
    const int64_t N = b * T, C = m->d_model, F = m->d_ff, V = m->vocab;
    const int64_t elt = p == AH_PREC_BF16 ? 2 : 4;
    const int64_t stats = norm_stats(m) * N * 4; /* norm statistics are fp32 in both precisions */
    switch (kind) {
    case AH_LAYER_EMBED:
        return N * 4; /* int32 token ids */
    case AH_LAYER_HEAD:
        /* ln_f input (the last block's output), ln_f output, its statistics, logits */
        return (N * C + N * C + N * V) * elt + stats;
    case AH_LAYER_BLOCK:
        break;
    }
    if (recompute) return N * C * elt; /* only the block input; the rest is recomputed */
    const int64_t heads = m->n_head / t;
    /* fp32: the T x T attention probabilities (the CPU runtime's layout); bf16: a fused
     * attention kernel keeps only fp32 softmax statistics (one per query row per head). */
    const int64_t attn = p == AH_PREC_BF16 ? b * heads * T * 4 : b * heads * T * T * 4;
    int64_t tensors; /* elements kept in the activation precision */
    if (m->arch == AH_ARCH_GPT2)
        tensors = N * C           /* x_in */
                  + N * C         /* ln_1 out */
                  + 3 * N * C / t /* qkv */
                  + N * C / t     /* attention out, before c_proj */
                  + N * C         /* x_mid residual */
                  + N * C         /* ln_2 out */
                  + 2 * N * F / t;/* fc pre-activation, post-GELU */
    else
        tensors = N * C                          /* x_in */
                  + N * C                        /* rms_1 out */
                  + N * C / t                    /* q */
                  + 2 * N * kv_width(m) / t      /* k, v */
                  + N * C / t                    /* attention out, before o_proj */
                  + N * C                        /* x_mid residual */
                  + N * C                        /* rms_2 out */
                  + 3 * N * F / t;               /* gate, up, act */
    return tensors * elt + attn + 2 * stats;
}

int64_t ah_param_state_bytes(ah_precision_t p) {
    /* fp32: weight 4 + grad 4 + Adam m 4 + v 4; bf16: weight 2 + grad 2 + fp32 master 4 + m 4 +
     * v 4. Both 16. */
    return p == AH_PREC_BF16 ? 2 + 2 + 4 + 4 + 4 : 4 + 4 + 4 + 4;
}
