/* Compute kernels for GPT-2 training, forward and backward, as a backend table.
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
 * gradient output passed as NULL is not computed (e.g. dinp of the first layer).
 *
 * Determinism: the CPU backend reduces in a fixed order on one thread, and OpenBLAS sgemm is
 * deterministic for a fixed thread count, so the same inputs give bitwise the same outputs.
 *
 * Attention layout. qkv is (B, T, 3*Cl): per token, Cl query values, then Cl key values, then Cl
 * value values, each split into Hl heads of hd = Cl / Hl consecutive values (GPT-2's c_attn output
 * viewed as (B, T, 3, Hl, hd)). A tensor-parallel rank holding Hl = H / t heads passes
 * Cl = C / t. The output is (B, T, Cl) in the same head order, ready for the row-parallel
 * projection. Attention is causal with scale 1/sqrt(hd).
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

/* ---- GELU, tanh approximation (GPT-2's "gelu_new", torch approximate="tanh") ---- */

typedef void ah_kernel_gelu_fwd_fn(float *out,       // (n)
                                   const float *inp, // (n)
                                   size_t n);
/* dinp += gelu'(inp) * dout. */
typedef void ah_kernel_gelu_bwd_fn(float *dinp,       // (n)
                                   const float *dout, // (n)
                                   const float *inp,  // (n)
                                   size_t n);

/* ---- causal multi-head self-attention (layout in the file comment) ---- */

/* out = softmax_j<=i(q_i . k_j / sqrt(hd)) @ v. `state` is what the backend keeps for the
 * backward, attention_state_floats(B, T, Hl, hd) floats owned by the caller and opaque to it:
 * the CPU keeps the probabilities probs[b,h,i,j] (B, Hl, T, T), 0 for j > i; the CUDA
 * backend keeps one logsumexp per query row (B, Hl, T) and never builds a T x T matrix. */
typedef void ah_kernel_attention_fwd_fn(float *out,       // (B, T, Cl)
                                        float *state,     // (attention_state_floats(B, T, Hl, hd))
                                        const float *qkv, // (B, T, 3*Cl)
                                        int B, int T, int Hl, int hd);
/* dqkv += d(out)/d(qkv)^T dout. out and state are the forward's (a backend may ignore out:
 * the CPU does). scratch holds attention_scratch_floats(B, T, Hl, hd) floats and needs no
 * initial value. */
typedef void ah_kernel_attention_bwd_fn(float *dqkv,        // (B, T, 3*Cl)
                                        float *scratch,     // (attention_scratch_floats(B, T, Hl, hd))
                                        const float *dout,  // (B, T, Cl)
                                        const float *qkv,   // (B, T, 3*Cl)
                                        const float *out,   // (B, T, Cl)
                                        const float *state, // (attention_state_floats(B, T, Hl, hd))
                                        int B, int T, int Hl, int hd);
typedef size_t ah_kernel_attention_state_floats_fn(int B, int T, int Hl, int hd);
typedef size_t ah_kernel_attention_scratch_floats_fn(int B, int T, int Hl, int hd);

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

/* ---- embedding: out[b,t] = wte[tokens[b,t]] + wpe[t]; tokens must lie in [0, V) ---- */

typedef void ah_kernel_embedding_fwd_fn(float *out,            // (B, T, C)
                                        const int32_t *tokens, // (B, T)
                                        const float *wte,      // (V, C)
                                        const float *wpe,      // (P, C), P >= T
                                        int B, int T, int C);
/* dwte[tokens[b,t]] += dout[b,t] ; dwpe[t] += dout[b,t] (either may be NULL). Rows are
 * visited in (b, t) order, so repeated tokens sum deterministically. */
typedef void ah_kernel_embedding_bwd_fn(float *dwte,           // (V, C) or NULL
                                        float *dwpe,           // (P, C) or NULL
                                        const float *dout,     // (B, T, C)
                                        const int32_t *tokens, // (B, T)
                                        int B, int T, int C);

/* ---- tied LM head + softmax cross-entropy, fused ----
 * logits = x @ wte^T; loss_n = logsumexp(logits_n) - logits_n[targets_n]. Returns
 * sum_n loss_n, accumulated in double. If dx or dwte is non-NULL it also runs the backward:
 * logits is overwritten in place by dlogits = (softmax(logits) - onehot(targets)) * scale
 * (the runtime passes 1 / (B*T) of the whole global batch), then dx += dlogits @ wte and
 * dwte += dlogits^T @ x. Rows are independent, so a caller short of memory may call it on
 * row chunks of x with a smaller logits buffer; the sums add up. targets must lie in [0, V). */
typedef double ah_kernel_head_loss_fn(float *dx,              // (N, C) or NULL
                                      float *dwte,            // (V, C) or NULL
                                      float *logits,          // (N, V) scratch; holds dlogits on return
                                      const float *x,         // (N, C)
                                      const float *wte,       // (V, C)
                                      const int32_t *targets, // (N)
                                      float scale, int N, int C, int V);

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

/* ---- the table: one entry of each type above ---- */

/* The table's entries in its order, X(p, entry) for each: the table's fields are made from it, and
 * a backend that names its kernels <prefix>_<entry> declares them all, each with its entry's type,
 * by AH_KERNELS_DECLARE(prefix), and fills its table from the same list, so every signature is
 * written once, above, and every entry named once, here. */
#define AH_KERNEL_ENTRIES(X, p) X(p, zero) X(p, matmul_fwd) X(p, matmul_bwd) X(p, layernorm_fwd) \
    X(p, layernorm_bwd) X(p, gelu_fwd) X(p, gelu_bwd) X(p, attention_fwd) X(p, attention_bwd) \
    X(p, attention_state_floats) X(p, attention_scratch_floats) X(p, residual_fwd) \
    X(p, residual_bwd) X(p, embedding_fwd) X(p, embedding_bwd) X(p, head_loss) X(p, adamw) \
    X(p, sum_squares)
#define AH_KERNEL_FIELD(p, entry) ah_kernel_##entry##_fn *entry;

typedef struct ah_kernels {
    const char *name; /* "cpu", ... */
    AH_KERNEL_ENTRIES(AH_KERNEL_FIELD, _)
} ah_kernels_t;

#define AH_KERNEL_DECLARE(p, entry) ah_kernel_##entry##_fn p##_##entry;
#define AH_KERNELS_DECLARE(prefix) AH_KERNEL_ENTRIES(AH_KERNEL_DECLARE, prefix)

/* The CPU backend: fp32, OpenBLAS sgemm for matmuls, loops elsewhere. A static table. */
const ah_kernels_t *ah_kernels_cpu(void);

#endif
