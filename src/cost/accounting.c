/* Accounting per layer kind: matmul FLOPs and activation bytes, per TP rank, summed over the
 * architecture table (spec/arch.h; parameters: ah_layer_params there).
 * Every formula here is written down in docs/cost-model.md ("Accounting"); keep them in step.
 *
 * Megatron-style tensor parallelism over t ranks: column-parallel layers (QKV / Q,K,V, MLP-in,
 * gate/up) split their matrix and their bias by t; row-parallel layers (attention-out, MLP-out)
 * split their matrix and keep the bias replicated; norms are replicated. So per-rank counts x t
 * exceed the total by the replicated pieces. The embedding and the LM head are vocabulary-parallel:
 * each rank holds Vp/t rows of the V x C matrix, Vp = ah_vocab_padded(m, t), and the padded rows
 * are computed and stored like the others (they count in FLOPs and bytes, not in the model's
 * parameter count). All divisions by t are exact for a t that passed ah_model_check_tp (heads,
 * kv heads and d_ff divisible by t, hence C and the kv width too) and for Vp. */
#include <string.h>

#include "cost/cost.h"

static const char *const PRECISION_NAMES[] = {"fp32", "bf16", "fp16"};

const char *ah_precision_name(ah_precision_t p) {
    return p >= AH_PREC_FP32 && p <= AH_PREC_FP16 ? PRECISION_NAMES[p] : "unknown";
}

bool ah_gpu_runs(const ah_gpu_type_t *g, ah_precision_t p) { return ah_gpu_peak_flops(g, (int)p) > 0; }

bool ah_precision_parse(const char *s, ah_precision_t *out) {
    for (int p = AH_PREC_FP32; p <= AH_PREC_FP16; p++)
        if (strcmp(s, PRECISION_NAMES[p]) == 0) {
            *out = (ah_precision_t)p;
            return true;
        }
    return false;
}

int64_t ah_precision_elt_bytes(ah_precision_t p) { return p == AH_PREC_FP32 ? 4 : 2; }

int64_t ah_model_params_total(const ah_model_t *m) {
    return ah_layer_content_params(m, AH_LAYER_EMBED) + m->n_layer * ah_layer_content_params(m, AH_LAYER_BLOCK) +
           ah_layer_content_params(m, AH_LAYER_HEAD);
}

double ah_attention_fwd_flops(const ah_model_t *m, int t, int64_t b, int64_t T) {
    /* QK^T and AV, each 2*N*T*C, full T x T (not halved for causality) */
    return 4 * (double)b * (double)T * (double)T * (double)m->d_model / t;
}

double ah_layer_fwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T) {
    const double N = (double)b * (double)T;
    switch (kind) {
    case AH_LAYER_EMBED:
        return 0; /* a gather, no matmul */
    case AH_LAYER_BLOCK: {
        /* weight matmuls: 2 FLOPs per multiply-add per token, one multiply-add per element of
         * the block's matmul weights (spec/arch.h) */
        const double weights = (double)ah_block_matmul_elems(m, 1);
        return 2 * N * weights / t + ah_attention_fwd_flops(m, t, b, T);
    }
    case AH_LAYER_HEAD:
        /* logits (N, Vp/t): the rank's rows of the head matrix, padding included */
        return 2 * N * (double)ah_head_matrix_params(m, t);
    }
    return 0;
}

double ah_layer_bwd_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T) {
    return 2 * ah_layer_fwd_flops(m, kind, t, b, T);
}

double ah_layer_wgrad_flops(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T) {
    const double N = (double)b * (double)T;
    switch (kind) {
    case AH_LAYER_EMBED:
        return 0;
    case AH_LAYER_BLOCK:
        return 2 * N * (double)ah_block_matmul_elems(m, 1) / t;
    case AH_LAYER_HEAD:
        return 2 * N * (double)ah_head_matrix_params(m, t);
    }
    return 0;
}

/* Bytes of one block activation of the table (spec/arch.h) per TP rank, for b sequences of which
 * this rank holds T tokens each (T / cp under context parallelism); ring: ring attention's. */
static int64_t act_bytes(const ah_model_t *m, const ah_act_spec_t *a, int t, int64_t b, int64_t T, ah_precision_t p,
                         bool ring) {
    const int64_t N = b * T, elt = ah_precision_elt_bytes(p);
    switch (a->kind) {
    case AH_ACT_TENSOR:
        return N * ah_dim_value(m, a->width) / (a->split ? t : 1) * elt;
    case AH_ACT_STAT:
        return N * 4; /* norm statistics are fp32 in every precision */
    case AH_ACT_ATTN: {
        /* fp32: the T x T attention probabilities (the CPU runtime's layout); bf16, fp16: a fused
         * attention kernel keeps only fp32 softmax statistics (one per query row per head), and
         * so does ring attention in every precision (a logsumexp per row of the rank's T / cp). */
        const int64_t heads = m->n_head / t;
        return p != AH_PREC_FP32 || ring ? b * heads * T * 4 : b * heads * T * T * 4;
    }
    }
    return 0;
}

int64_t ah_layer_act_bytes(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T,
                           ah_precision_t p, bool recompute) {
    return ah_layer_act_bytes_cp(m, kind, t, b, T, 1, p, recompute);
}

int64_t ah_layer_act_bytes_cp(const ah_model_t *m, ah_layer_kind_t kind, int t, int64_t b, int64_t T, int cp,
                              ah_precision_t p, bool recompute) {
    const ah_arch_spec_t *arch = ah_arch_spec(m->arch);
    const int64_t Tl = cp > 1 ? T / cp : T;
    const int64_t N = b * Tl, C = m->d_model, Vl = ah_vocab_padded(m, t) / t;
    const int64_t elt = ah_precision_elt_bytes(p);
    switch (kind) {
    case AH_LAYER_EMBED:
        return N * 4; /* int32 token ids */
    case AH_LAYER_HEAD:
        /* final norm input (the last block's output), its output, its statistics, and the rank's
         * logits (N, Vp/t) */
        return (N * C + N * C + N * Vl) * elt + arch->norm_stats * N * 4;
    case AH_LAYER_BLOCK:
        break;
    }
    if (recompute) return N * C * elt; /* only the block input; the rest is recomputed */
    int64_t bytes = 0;
    for (int i = 0; i < arch->n_block_acts; i++) bytes += act_bytes(m, &arch->block_acts[i], t, b, Tl, p, cp > 1);
    return bytes;
}

int64_t ah_cp_ring_block_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, int cp) {
    const int64_t hd = m->d_model / m->n_head;
    return cp > 1 ? b * (T / cp) * 2 * (m->n_kv_head / t) * hd * 4 : 0;
}

int64_t ah_cp_ring_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, int cp, ah_precision_t p) {
    if (cp <= 1) return 0;
    const int64_t Tl = T / cp, hd = m->d_model / m->n_head, rows = b * (m->n_head / t) * Tl;
    /* the kernels' scratch: fp32 (the CPU's ring): scores and probabilities of one (sequence, head)
     * block, Tl x Tl each; bf16, fp16 (the CUDA backend's): the backward's D, one fp32 per row */
    const int64_t scratch = p == AH_PREC_FP32 ? 2 * Tl * Tl * 4 : rows * 4;
    return 4 * ah_cp_ring_block_bytes(m, t, b, T, cp) + rows * hd * 4 + rows * 2 * 4 + scratch;
}

int64_t ah_layer_wgrad_keep_bytes(const ah_model_t *m, int t, int64_t b, int64_t T, ah_precision_t p,
                                  bool recompute) {
    const int64_t C = m->d_model, hd = m->d_model / m->n_head, F = m->d_ff / t;
    const int64_t mlp_in = (m->arch == AH_ARCH_LLAMA ? 2 : 1) * F; /* SwiGLU's gate and up */
    /* without recompute the qkv and MLP-in gradients go into the slot's dead qkv and pre-activation */
    const int64_t out = recompute ? (m->n_head + 2 * m->n_kv_head) / t * hd + C + mlp_in + C : C + C;
    const int64_t in = recompute ? C + C / t + C + F : 0;
    return b * T * (out + in) * ah_precision_elt_bytes(p);
}

int64_t ah_param_state_bytes(ah_precision_t p) {
    /* fp32: weight 4 + grad 4 + Adam m 4 + v 4; bf16, fp16: weight 2 + grad 2 + fp32 master 4 +
     * m 4 + v 4. All 16. */
    return p != AH_PREC_FP32 ? 2 + 2 + 4 + 4 + 4 : 4 + 4 + 4 + 4;
}

int64_t ah_optimizer_state_bytes(ah_precision_t p) { return p != AH_PREC_FP32 ? 4 + 4 + 4 : 4 + 4; }
