/* Compute kernels for GPT-2 and LLaMA training, forward and backward, as a backend table.
 *
 * A backend (CPU, CUDA: backend/backend.h) fills one ah_kernels_t with function pointers; the
 * runtime calls through the table and never knows which backend it has. Every buffer argument is a
 * "device" pointer of that backend — for the CPU backend plain host float* / int32_t*, fp32,
 * row-major, contiguous unless a stride says otherwise. Shapes are passed explicitly and are
 * written beside each argument.
 *
 * Ownership: kernels allocate nothing. The caller owns every buffer, including scratch (sizes
 * given by the *_scratch_floats functions), so the runtime can put them in its arenas and
 * account for them byte for byte. Inputs and outputs must not alias unless an argument says so.
 *
 * Gradients ACCUMULATE: every backward adds into its gradient outputs (d* += ...), because
 * gradient accumulation across micro-batches and a residual stream that feeds two branches both
 * need "+=". The caller zeroes gradient buffers (ah_kernels_t.zero) when it starts a sum. A
 * gradient output passed as NULL is not computed (e.g. dinp of the first layer). The exception:
 * the pointwise activations' backwards (gelu_bwd, swiglu_bwd) WRITE their output, which is the
 * MLP's hidden gradient, a sum of one term in every block: a zeroing pass over it is saved (N x
 * 4C floats per block, about a fifth of a block backward's memory traffic outside the matmuls).
 *
 * Determinism: the CPU backend reduces in a fixed order on one thread, and OpenBLAS sgemm is
 * deterministic for a fixed thread count, so the same inputs give bitwise the same outputs.
 *
 * Attention layout. qkv is (B, T, (Hl + 2*KVl)*hd): per token, Hl query heads, then KVl key heads,
 * then KVl value heads, each of hd consecutive values (GPT-2's c_attn output viewed as
 * (B, T, 3, Hl, hd) when KVl = Hl; LLaMA's q, k and v projections of one matmul). Grouped-query
 * attention: query head h reads key/value head h / (Hl / KVl); KVl divides Hl. A tensor-parallel
 * rank holding Hl = H / t query heads holds KVl = KV / t key/value heads. The output is
 * (B, T, Hl*hd) in the query heads' order, ready for the row-parallel projection. Attention is
 * causal with scale 1/sqrt(hd).
 *
 * Vocabulary parallelism. The embedding and the LM head of a TP rank hold Vl consecutive rows
 * [v0, v0 + Vl) of the (padded) vocabulary, of which the first `nvalid` are real tokens (the rest
 * padding); the cross-entropy is three kernels around two group reductions of per-row
 * statistics, so the logits are never gathered (xent_max, xent_stats, xent_grad below).
 *
 * Dimensions are int (what cblas takes); products of them are formed in size_t.
 */
#ifndef AH_KERNELS_KERNELS_H
#define AH_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* AdamW hyperparameters, as torch.optim.AdamW names them (decoupled weight decay). */
typedef struct ah_adamw_hparams {
    float lr;
    float beta1, beta2;
    float eps;
    float weight_decay;
} ah_adamw_hparams_t;

/* The entries of a backend's table, as function types: each with its contract and the shape of
 * every argument. */

/* x[i] = 0 for n floats. */
typedef void ah_kernel_zero_fn(float *x, // (n)
                               size_t n);

/* ---- linear layer ---- */

/* out = inp @ w^T + bias. bias may be NULL. */
typedef void ah_kernel_matmul_fwd_fn(float *out,        // (N, OC)
                                     const float *inp,  // (N, IC)
                                     const float *w,    // (OC, IC)
                                     const float *bias, // (OC) or NULL
                                     int N, int IC, int OC);
/* dinp += dout @ w ; dw += dout^T @ inp ; dbias += sum over rows of dout.
 * Any of dinp, dw, dbias may be NULL (not computed). */
typedef void ah_kernel_matmul_bwd_fn(float *dinp,       // (N, IC) or NULL
                                     float *dw,         // (OC, IC) or NULL
                                     float *dbias,      // (OC) or NULL
                                     const float *dout, // (N, OC)
                                     const float *inp,  // (N, IC)
                                     const float *w,    // (OC, IC)
                                     int N, int IC, int OC);

/* ---- layer norm over the last axis: out = (inp - mean) * rstd * weight + bias ---- */

/* rstd = 1 / sqrt(biased variance + eps). mean and rstd are saved for the backward. */
typedef void ah_kernel_layernorm_fwd_fn(float *out,          // (N, C)
                                        float *mean,         // (N)
                                        float *rstd,         // (N)
                                        const float *inp,    // (N, C)
                                        const float *weight, // (C)
                                        const float *bias,   // (C)
                                        int N, int C, float eps);
/* dinp += ..., dweight += ..., dbias += ... (dinp may be NULL). */
typedef void ah_kernel_layernorm_bwd_fn(float *dinp,         // (N, C) or NULL
                                        float *dweight,      // (C)
                                        float *dbias,        // (C)
                                        const float *dout,   // (N, C)
                                        const float *inp,    // (N, C)
                                        const float *weight, // (C)
                                        const float *mean,   // (N)
                                        const float *rstd,   // (N)
                                        int N, int C);

/* ---- RMS norm over the last axis (LLaMA): out = inp * rstd * weight ---- */

/* rstd = 1 / sqrt(mean(inp^2) + eps), saved for the backward. */
typedef void ah_kernel_rmsnorm_fwd_fn(float *out,          // (N, C)
                                      float *rstd,         // (N)
                                      const float *inp,    // (N, C)
                                      const float *weight, // (C)
                                      int N, int C, float eps);
/* dinp += ..., dweight += ... (dinp may be NULL). */
typedef void ah_kernel_rmsnorm_bwd_fn(float *dinp,         // (N, C) or NULL
                                      float *dweight,      // (C)
                                      const float *dout,   // (N, C)
                                      const float *inp,    // (N, C)
                                      const float *weight, // (C)
                                      const float *rstd,   // (N)
                                      int N, int C);

/* ---- rotary position embedding, Hugging Face's rotate-half layout (LLaMA) ----
 * In place on the first n_heads * hd values of each of the B*T rows of x, rows `stride` floats
 * apart (the q and k heads of a qkv row: n_heads = Hl + KVl, stride = (Hl + 2*KVl)*hd). Row (b, t)
 * is at position t. In each head, value i < hd/2 pairs with value i + hd/2 and the pair turns by
 * the angle t * inv_freq(i):  x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin. inv_freq is
 * computed in fp32 (ah_rope_inv_freq, kernels/rope_freq.h: 1 / theta^(2i/hd), with LLaMA 3.1's
 * scaling when rope.factor > 0) and the angle as (float)t * inv_freq, cos and sin of it in double
 * rounded to fp32 (as transformers' LlamaRotaryEmbedding, to rounding). */
typedef struct ah_rope {
    float theta;
    float factor; /* LLaMA 3.1's scaling (model rope_scaling); 0: none */
    float low_freq_factor, high_freq_factor, original_max_pos;
} ah_rope_t;
typedef void ah_kernel_rope_fwd_fn(float *x, // (B*T rows of `stride`)
                                   int B, int T, int n_heads, int hd, int stride, ah_rope_t rope);
/* The backward, in place on the gradient: dx = R^T dy, the rotation by -angle. */
typedef void ah_kernel_rope_bwd_fn(float *dx, // (B*T rows of `stride`)
                                   int B, int T, int n_heads, int hd, int stride, ah_rope_t rope);

/* ---- SwiGLU (LLaMA's MLP): out = silu(gate) * up, silu(g) = g / (1 + exp(-g)) ----
 * gu holds per row F gate values, then F up values (one matmul by the gate and up weights,
 * adjacent in the stage's buffer). */
typedef void ah_kernel_swiglu_fwd_fn(float *out,      // (N, F)
                                     const float *gu, // (N, 2F)
                                     int N, int F);
/* dgu = d(out)/d(gu)^T dout: WRITTEN, not accumulated (see the file comment). */
typedef void ah_kernel_swiglu_bwd_fn(float *dgu,        // (N, 2F)
                                     const float *dout, // (N, F)
                                     const float *gu,   // (N, 2F)
                                     int N, int F);

/* ---- GELU, tanh approximation (GPT-2's "gelu_new", torch approximate="tanh") ---- */

typedef void ah_kernel_gelu_fwd_fn(float *out,       // (n)
                                   const float *inp, // (n)
                                   size_t n);
/* dinp = gelu'(inp) * dout: WRITTEN, not accumulated (see the file comment). */
typedef void ah_kernel_gelu_bwd_fn(float *dinp,       // (n)
                                   const float *dout, // (n)
                                   const float *inp,  // (n)
                                   size_t n);

/* ---- causal multi-head self-attention (layout in the file comment) ---- */

/* out = softmax_j<=i(q_i . k_j / sqrt(hd)) @ v. `state` is what the backend keeps for the
 * backward, attention_state_floats(B, T, Hl, hd) floats owned by the caller and opaque to it:
 * the CPU keeps the probabilities, probs[b, kh, i, hh, j] for query head h = kh g + hh of the
 * g = Hl/KVl heads reading key/value head kh ((B, Hl, T, T) when KVl = Hl), each row written only
 * as far as its block of queries reaches (the rest is never read); the CUDA backend keeps one
 * logsumexp per query row (B, Hl, T) and never builds a T x T matrix. scratch holds
 * attention_scratch_floats(B, T, Hl, KVl, hd) floats, needs no initial value and is free again
 * on return (the forward and the backward may share one). */
typedef void ah_kernel_attention_fwd_fn(float *out,       // (B, T, Hl*hd)
                                        float *state,     // (attention_state_floats(B, T, Hl, hd))
                                        float *scratch,   // (attention_scratch_floats(B, T, Hl, KVl, hd))
                                        const float *qkv, // (B, T, (Hl + 2*KVl)*hd)
                                        int B, int T, int Hl, int KVl, int hd);
/* dqkv += d(out)/d(qkv)^T dout. out and state are the forward's (a backend may ignore out:
 * the CPU does); scratch as the forward's. */
typedef void ah_kernel_attention_bwd_fn(float *dqkv,        // (B, T, (Hl + 2*KVl)*hd)
                                        float *scratch,     // (attention_scratch_floats(B, T, Hl, KVl, hd))
                                        const float *dout,  // (B, T, Hl*hd)
                                        const float *qkv,   // (B, T, (Hl + 2*KVl)*hd)
                                        const float *out,   // (B, T, Hl*hd)
                                        const float *state, // (attention_state_floats(B, T, Hl, hd))
                                        int B, int T, int Hl, int KVl, int hd);
typedef size_t ah_kernel_attention_state_floats_fn(int B, int T, int Hl, int hd);
typedef size_t ah_kernel_attention_scratch_floats_fn(int B, int T, int Hl, int KVl, int hd);

/* ---- residual stream ---- */

/* out = a + b; out may alias a or b. */
typedef void ah_kernel_residual_fwd_fn(float *out,     // (n)
                                       const float *a, // (n)
                                       const float *b, // (n)
                                       size_t n);
/* da += dout ; db += dout (either may be NULL). */
typedef void ah_kernel_residual_bwd_fn(float *da,         // (n) or NULL
                                       float *db,         // (n) or NULL
                                       const float *dout, // (n)
                                       size_t n);

/* ---- embedding, vocabulary-parallel: this rank holds rows [v0, v0 + Vl) of the token table ----
 * out[b,t] = (v0 <= tokens[b,t] < v0 + Vl ? wte[tokens[b,t] - v0] : 0) + (wpe ? wpe[t] : 0);
 * the TP group's sum of the ranks' outputs is the embedding (one rank passes wpe, the others
 * NULL). t = 1: v0 = 0, Vl >= V, and this is wte[token] + wpe[t]. */
typedef void ah_kernel_embedding_fwd_fn(float *out,            // (B, T, C)
                                        const int32_t *tokens, // (B, T)
                                        const float *wte,      // (Vl, C)
                                        const float *wpe,      // (P, C), P >= T, or NULL
                                        int B, int T, int C, int v0, int Vl);
/* dwte[tokens[b,t] - v0] += dout[b,t] for the tokens in [v0, v0 + Vl); dwpe[t] += dout[b,t]
 * (either may be NULL). Rows are visited in (b, t) order, so repeated tokens sum
 * deterministically. */
typedef void ah_kernel_embedding_bwd_fn(float *dwte,           // (Vl, C) or NULL
                                        float *dwpe,           // (P, C) or NULL
                                        const float *dout,     // (B, T, C)
                                        const int32_t *tokens, // (B, T)
                                        int B, int T, int C, int v0, int Vl);

/* ---- softmax cross-entropy over a vocabulary split across the TP group ----
 * A rank holds logits (N, Vl) for vocabulary columns [v0, v0 + Vl), of which the first nvalid
 * are real (nvalid may be 0 on a rank holding only padding); the logits come from matmul_fwd by
 * the rank's rows of the head matrix. The runtime:
 *   xent_max -> group max of rowmax -> xent_stats -> group sum of stats -> xent_grad,
 * and then dx = dlogits @ w (matmul_bwd; a group sum of dx) and dw += dlogits^T @ x. With one
 * rank the group reductions are nothing and this is the plain cross-entropy. */
/* rowmax[n] = max over j < nvalid of logits[n, j]; -FLT_MAX when nvalid = 0. */
typedef void ah_kernel_xent_max_fn(float *rowmax,       // (N)
                                   const float *logits, // (N, Vl)
                                   int N, int Vl, int nvalid);
/* stats[n] = sum_{j < nvalid} exp(logits[n, j] - rowmax[n]) (accumulated in double, rounded
 * to fp32); stats[N + n] = logits[n, targets[n] - v0] - rowmax[n] when v0 <= targets[n] <
 * v0 + nvalid, else 0. rowmax is the group's. */
typedef void ah_kernel_xent_stats_fn(float *stats,            // (2N)
                                     const float *logits,     // (N, Vl)
                                     const float *rowmax,     // (N)
                                     const int32_t *targets,  // (N), in [0, V)
                                     int N, int Vl, int nvalid, int v0);
/* With the group's rowmax and summed stats: returns sum_n (log(stats[n]) - stats[N + n]) in
 * double (the summed token losses), and overwrites logits in place by
 * dlogits = (exp(logits - rowmax) / stats[n] - onehot(targets - v0)) * scale for j < nvalid, and
 * 0 for the padded columns (the runtime passes scale = 1 / (B*T) of the whole global batch). */
typedef double ah_kernel_xent_grad_fn(float *logits,          // (N, Vl) in; dlogits out
                                      const float *rowmax,    // (N)
                                      const float *stats,     // (2N)
                                      const int32_t *targets, // (N)
                                      float scale, int N, int Vl, int nvalid, int v0);

/* ---- optimizer ---- */

/* One AdamW step on n parameters, in torch.optim.AdamW's order of operations:
 * g = grad * grad_scale (grad_scale < 1 clips by global norm; 1 otherwise);
 * param *= 1 - lr * weight_decay; m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
 * param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). t counts from 1.
 * Call it per parameter group to give groups different weight decay. */
typedef void ah_kernel_adamw_fn(float *param,      // (n)
                                const float *grad, // (n)
                                float *m,          // (n) first moment, zero before step 1
                                float *v,          // (n) second moment, zero before step 1
                                size_t n, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t);
/* sum_i x[i]^2 in double, in a fixed order (for the global gradient norm). */
typedef double ah_kernel_sum_squares_fn(const float *x, // (n)
                                        size_t n);

/* ---- context parallelism (runtime/cp_ring.h; docs/runtime.md "Context parallelism") ----
 * A CP rank's T rows of a sequence sit at two runs of global positions (the causal load balance):
 * row t < T/2 at first + t, row t >= T/2 at second + (t - T/2). ah_cp_at gives CP rank i of c's
 * (chunks i and 2c - 1 - i of a sequence of T_seq tokens cut into 2c); {0, T/2} is 0 .. T-1, one
 * process's rows. Passed by value, so a device kernel needs no table of positions. */
typedef struct ah_cp_at {
    int first, second;
} ah_cp_at_t;
static inline ah_cp_at_t ah_cp_at(int T_seq, int c, int i) {
    const int chunk = T_seq / (2 * c);
    const ah_cp_at_t at = {i * chunk, (2 * c - 1 - i) * chunk};
    return at;
}
static inline ah_cp_at_t ah_cp_at_identity(int T) {
    const ah_cp_at_t at = {0, T / 2};
    return at;
}
static inline int ah_cp_pos(ah_cp_at_t at, int T, int t) { return t < T / 2 ? at.first + t : at.second + t - T / 2; }

/* rope_fwd / rope_bwd and embedding_fwd / embedding_bwd with row t of each sequence at position
 * ah_cp_pos(at, T, t) instead of t (the identity gives the plain kernels' results bit for bit). */
typedef void ah_kernel_rope_fwd_at_fn(float *x, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride,
                                      ah_rope_t rope);
typedef void ah_kernel_rope_bwd_at_fn(float *dx, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride,
                                      ah_rope_t rope);
typedef void ah_kernel_embedding_fwd_at_fn(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                                           ah_cp_at_t at, int B, int T, int C, int v0, int Vl);
/* dwpe's rows are the positions' (distinct within a sequence). */
typedef void ah_kernel_embedding_bwd_at_fn(float *dwte, float *dwpe, const float *dout,
                                           const int32_t *tokens, ah_cp_at_t at, int B, int T, int C, int v0,
                                           int Vl);

/* Ring attention: causal attention of a rank's Tq query rows against one key/value block of Tk
 * rows at a time, the blocks arriving in any order, merged by the online softmax; the backward by
 * block, recomputing the probabilities from the finished forward's logsumexp. qkv as attention's;
 * a block kv is (B, Tk, 2 KVl hd): per token the KVl key heads, then the KVl value heads (the part
 * of a qkv row after its query heads: ring_kv_pack). Query row i (position ah_cp_pos(q_at, Tq, i))
 * sees key j iff ah_cp_pos(k_at, Tk, j) <= its position. Scale 1/sqrt(hd). Every row sees some key
 * of the blocks together (its own), never necessarily of one block.
 * Forward: ring_attn_init, ring_attn_fwd_block once per block (its own included), ring_attn_finish
 * (out may be acc). Backward: ring_attn_bwd_block once per block: dq accumulates into dqkv's query
 * part, dk and dv into dkv (the block owner's to sum: ring_kv_add). scratch holds
 * ring_attn_scratch_floats(B, Tq, Tk, Hl, KVl, hd) floats, no initial value, shared by both. */
typedef size_t ah_kernel_ring_attn_scratch_floats_fn(int B, int Tq, int Tk, int Hl, int KVl, int hd);
/* acc = 0; stats (B, Hl, Tq, 2): running maximum -inf, running sum 0. */
typedef void ah_kernel_ring_attn_init_fn(float *acc,   // (B, Tq, Hl*hd)
                                         float *stats, // (B, Hl, Tq, 2)
                                         int B, int Tq, int Hl, int hd);
typedef void ah_kernel_ring_attn_fwd_block_fn(float *acc, float *stats, float *scratch,
                                              const float *qkv, // (B, Tq, (Hl + 2*KVl)*hd)
                                              ah_cp_at_t q_at,
                                              const float *kv,  // (B, Tk, 2*KVl*hd)
                                              ah_cp_at_t k_at, int B, int Tq, int Tk, int Hl, int KVl, int hd);
/* out = acc / sum per row; lse (B, Hl, Tq) = max + log(sum). */
typedef void ah_kernel_ring_attn_finish_fn(float *out, float *lse, const float *acc, const float *stats, int B,
                                           int Tq, int Hl, int hd);
typedef void ah_kernel_ring_attn_bwd_block_fn(float *dqkv,       // (B, Tq, (Hl + 2*KVl)*hd), query part +=
                                              float *dkv,        // (B, Tk, 2*KVl*hd) +=
                                              float *scratch,
                                              const float *dout, // (B, Tq, Hl*hd)
                                              const float *qkv, const float *out, // the forward's
                                              const float *lse,                   // (B, Hl, Tq)
                                              ah_cp_at_t q_at, const float *kv, ah_cp_at_t k_at, int B, int Tq,
                                              int Tk, int Hl, int KVl, int hd);
/* kv (B, T, 2 KVl hd) = the key and value heads of qkv; ring_kv_add: dqkv's key and value heads
 * += dkv. */
typedef void ah_kernel_ring_kv_pack_fn(float *kv, const float *qkv, int B, int T, int Hl, int KVl, int hd);
typedef void ah_kernel_ring_kv_add_fn(float *dqkv, const float *dkv, int B, int T, int Hl, int KVl, int hd);

/* ---- the table: one entry of each type above ---- */

/* The table's entries in its order, X(p, entry) for each: the table's fields are made from it, and
 * a backend that names its kernels <prefix>_<entry> declares them all, each with its entry's type,
 * by AH_KERNELS_DECLARE(prefix), and fills its table from the same list, so every signature is
 * written once, above, and every entry named once, here. */
#define AH_KERNEL_ENTRIES(X, p) X(p, zero) X(p, matmul_fwd) X(p, matmul_bwd) X(p, layernorm_fwd) \
    X(p, layernorm_bwd) X(p, rmsnorm_fwd) X(p, rmsnorm_bwd) X(p, rope_fwd) X(p, rope_bwd) \
    X(p, swiglu_fwd) X(p, swiglu_bwd) X(p, gelu_fwd) X(p, gelu_bwd) X(p, attention_fwd) \
    X(p, attention_bwd) X(p, attention_state_floats) X(p, attention_scratch_floats) \
    X(p, residual_fwd) X(p, residual_bwd) X(p, embedding_fwd) X(p, embedding_bwd) X(p, xent_max) \
    X(p, xent_stats) X(p, xent_grad) X(p, adamw) X(p, sum_squares) X(p, rope_fwd_at) X(p, rope_bwd_at) \
    X(p, embedding_fwd_at) X(p, embedding_bwd_at) X(p, ring_attn_scratch_floats) X(p, ring_attn_init) \
    X(p, ring_attn_fwd_block) X(p, ring_attn_finish) X(p, ring_attn_bwd_block) X(p, ring_kv_pack) X(p, ring_kv_add)
#define AH_KERNEL_FIELD(p, entry) ah_kernel_##entry##_fn *entry;

typedef struct ah_kernels {
    const char *name; /* "cpu", ... */
    AH_KERNEL_ENTRIES(AH_KERNEL_FIELD, _)
} ah_kernels_t;

#define AH_KERNEL_DECLARE(p, entry) ah_kernel_##entry##_fn p##_##entry;
#define AH_KERNELS_DECLARE(prefix) AH_KERNEL_ENTRIES(AH_KERNEL_DECLARE, prefix)

/* A backend's plain rope and embedding entries, defined as its _at entries at the identity
 * positions: one definition for every backend (each expands it once, after AH_KERNELS_DECLARE). */
#define AH_KERNELS_DEFINE_PLAIN(p)                                                                              \
    void p##_rope_fwd(float *x, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope) {               \
        p##_rope_fwd_at(x, ah_cp_at_identity(T), B, T, n_heads, hd, stride, rope);                             \
    }                                                                                                           \
    void p##_rope_bwd(float *dx, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope) {              \
        p##_rope_bwd_at(dx, ah_cp_at_identity(T), B, T, n_heads, hd, stride, rope);                            \
    }                                                                                                           \
    void p##_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, \
                           int C, int v0, int Vl) {                                                             \
        p##_embedding_fwd_at(out, tokens, wte, wpe, ah_cp_at_identity(T), B, T, C, v0, Vl);                   \
    }                                                                                                           \
    void p##_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T,   \
                           int C, int v0, int Vl) {                                                             \
        p##_embedding_bwd_at(dwte, dwpe, dout, tokens, ah_cp_at_identity(T), B, T, C, v0, Vl);                \
    }

/* The CPU backend: fp32, OpenBLAS sgemm for matmuls, loops elsewhere. A static table. */
const ah_kernels_t *ah_kernels_cpu(void);

#endif
