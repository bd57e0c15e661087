// Pointwise and row-wise kernels: layer norm, RMS norm, rotary embedding, SwiGLU, GELU, residual,
// embedding, column sums (bias and norm-parameter gradients), AdamW and the sum of squares. Every reduction runs in a fixed
// order, so a step is bitwise repeatable on the same device.
#include <math.h>

#include "kernels/cuda/common.cuh"
#include "kernels/rope_freq.h"


void ah_cuda_zero(float *x, size_t n) { AH_CUDA_CALL(cudaMemsetAsync(x, 0, n * sizeof *x, 0)); }

// ---- layer norm: one warp per row ----

#define ROWS_PER_BLOCK (AH_CUDA_THREADS / 32)

__global__ void layernorm_fwd_kernel(float *out, float *mean, float *rstd, const float *inp,
                                     const float *weight, const float *bias, int N, int C,
                                     float eps) {
    const int n = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const float *x = inp + (size_t)n * C;
    float *y = out + (size_t)n * C;
    // Two passes, as the CPU backend (E[x^2] - E[x]^2 loses digits when |mean| >> std).
    float s = 0.0f;
    for (int i = lane; i < C; i += 32) s += x[i];
    const float m = ah_warp_sum(s) / (float)C;
    float v = 0.0f;
    for (int i = lane; i < C; i += 32) {
        const float d = x[i] - m;
        v += d * d;
    }
    const float r = 1.0f / sqrtf(ah_warp_sum(v) / (float)C + eps);
    for (int i = lane; i < C; i += 32) y[i] = (x[i] - m) * r * weight[i] + bias[i];
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = r;
    }
}

void ah_cuda_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C, float eps) {
    AH_LAUNCH(layernorm_fwd_kernel, (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, AH_CUDA_THREADS, 0, 0)(
        out, mean, rstd, inp, weight, bias, N, C, eps);
    AH_CUDA_LAUNCHED();
}

__global__ void layernorm_bwd_kernel(float *dinp, const float *dout, const float *inp,
                                     const float *weight, const float *mean, const float *rstd,
                                     int N, int C) {
    const int n = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
    float *dx = dinp + (size_t)n * C;
    const float m = mean[n], s = rstd[n];
    // dinp = s * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight.
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (int i = lane; i < C; i += 32) {
        const float g = dy[i] * weight[i];
        g_sum += g;
        gx_sum += g * (x[i] - m) * s;
    }
    const float g_mean = ah_warp_sum(g_sum) / (float)C, gx_mean = ah_warp_sum(gx_sum) / (float)C;
    for (int i = lane; i < C; i += 32) {
        const float xhat = (x[i] - m) * s;
        dx[i] += (dy[i] * weight[i] - g_mean - xhat * gx_mean) * s;
    }
}

// dbias[c] += sum_n dy[n,c] (dbias may be NULL) and, with x, dweight[c] += sum_n dy[n,c] *
// xhat[n,c], xhat = (x - mean) * rstd or, without mean, x * rstd. Block (32, 8): 32 columns, 8 row
// phases summed in a fixed order.
__global__ void column_sums_kernel(float *dbias, float *dweight, const float *dy, const float *x,
                                   const float *mean, const float *rstd, int N, int C) {
    __shared__ float part_b[8][33], part_w[8][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    float sb = 0.0f, sw = 0.0f;
    if (c < C)
        for (int n = threadIdx.y; n < N; n += 8) {
            const float g = dy[(size_t)n * C + c];
            sb += g;
            if (x) sw += g * (x[(size_t)n * C + c] - (mean ? mean[n] : 0.0f)) * rstd[n];
        }
    part_b[threadIdx.y][threadIdx.x] = sb;
    part_w[threadIdx.y][threadIdx.x] = sw;
    __syncthreads();
    if (threadIdx.y != 0 || c >= C) return;
    for (int k = 1; k < 8; k++) {
        sb += part_b[k][threadIdx.x];
        sw += part_w[k][threadIdx.x];
    }
    if (dbias) dbias[c] += sb;
    if (x) dweight[c] += sw;
}

void ah_cuda_column_sums(float *dbias, float *dweight, const float *dy, const float *x,
                         const float *mean, const float *rstd, int N, int C) {
    AH_LAUNCH(column_sums_kernel, (C + 31) / 32, dim3(32, 8), 0, 0)(dbias, dweight, dy, x, mean, rstd, N, C);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                           const float *inp, const float *weight, const float *mean,
                           const float *rstd, int N, int C) {
    if (dinp) {
        AH_LAUNCH(layernorm_bwd_kernel, (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, AH_CUDA_THREADS, 0, 0)(
            dinp, dout, inp, weight, mean, rstd, N, C);
        AH_CUDA_LAUNCHED();
    }
    ah_cuda_column_sums(dbias, dweight, dout, inp, mean, rstd, N, C);
}

// ---- RMS norm: one warp per row ----

__global__ void rmsnorm_fwd_kernel(float *out, float *rstd, const float *inp, const float *weight,
                                   int N, int C, float eps) {
    const int n = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const float *x = inp + (size_t)n * C;
    float *y = out + (size_t)n * C;
    float ss = 0.0f;
    for (int i = lane; i < C; i += 32) ss += x[i] * x[i];
    const float r = 1.0f / sqrtf(ah_warp_sum(ss) / (float)C + eps);
    for (int i = lane; i < C; i += 32) y[i] = x[i] * r * weight[i];
    if (lane == 0) rstd[n] = r;
}

void ah_cuda_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N,
                         int C, float eps) {
    AH_LAUNCH(rmsnorm_fwd_kernel, (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, AH_CUDA_THREADS, 0, 0)(
        out, rstd, inp, weight, N, C, eps);
    AH_CUDA_LAUNCHED();
}

__global__ void rmsnorm_bwd_kernel(float *dinp, const float *dout, const float *inp,
                                   const float *weight, const float *rstd, int N, int C) {
    const int n = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return;
    const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
    float *dx = dinp + (size_t)n * C;
    const float s = rstd[n];
    // dinp = s * (g - xhat * mean(g * xhat)) with g = dy * weight, xhat = x * s.
    float gx_sum = 0.0f;
    for (int i = lane; i < C; i += 32) gx_sum += dy[i] * weight[i] * x[i] * s;
    const float gx_mean = ah_warp_sum(gx_sum) / (float)C;
    for (int i = lane; i < C; i += 32) dx[i] += (dy[i] * weight[i] - x[i] * s * gx_mean) * s;
}

void ah_cuda_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp,
                         const float *weight, const float *rstd, int N, int C) {
    if (dinp) {
        AH_LAUNCH(rmsnorm_bwd_kernel, (N + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, AH_CUDA_THREADS, 0, 0)(
            dinp, dout, inp, weight, rstd, N, C);
        AH_CUDA_LAUNCHED();
    }
    ah_cuda_column_sums(NULL, dweight, dout, inp, NULL, rstd, N, C);
}

// ---- rotary position embedding (Hugging Face's rotate-half): one thread per rotated pair ----

// Pair i of every head of the B*T rows turns by sign * (pos * inv_freq(i)), pos the row's
// position; inv_freq, the angle and cos, sin (in double, rounded) are formed as the contract
// says, as the CPU backend does.
__global__ void rope_kernel(float *x, ah_cp_at_t at, int T, int n_heads, int hd, int stride, ah_rope_t rope,
                            float sign, size_t n) {
    const int half = hd / 2;
    GRID_STRIDE(e, n) {
        const size_t row = e / ((size_t)n_heads * half);
        const int rem = (int)(e % ((size_t)n_heads * half)), h = rem / half, i = rem % half;
        const int t = ah_cuda_cp_pos(at, T, (int)(row % T));
        const float angle = (float)t * ah_rope_inv_freq(rope, i, hd);
        const float c = (float)cos((double)angle), s = sign * (float)sin((double)angle);
        float *p = x + row * stride + (size_t)h * hd;
        const float x1 = p[i], x2 = p[i + half];
        p[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        p[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
}

static void rope(float *x, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride, ah_rope_t r,
                 float sign) {
    const size_t n = (size_t)B * T * n_heads * (hd / 2);
    if (n == 0) return;
    AH_LAUNCH_1D(rope_kernel, n)(x, at, T, n_heads, hd, stride, r, sign, n);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_rope_fwd_at(float *x, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride, ah_rope_t r) {
    rope(x, at, B, T, n_heads, hd, stride, r, 1.0f);
}

void ah_cuda_rope_bwd_at(float *dx, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride, ah_rope_t r) {
    rope(dx, at, B, T, n_heads, hd, stride, r, -1.0f);
}

// ---- SwiGLU: out = silu(gate) * up, gu rows = F gate values then F up values ----

__global__ void swiglu_fwd_kernel(float *out, const float *gu, int F, size_t n) {
    GRID_STRIDE(e, n) {
        const size_t row = e / F;
        const int f = (int)(e % F);
        const float g = gu[row * 2 * F + f], u = gu[row * 2 * F + F + f];
        out[e] = g / (1.0f + expf(-g)) * u;
    }
}

__global__ void swiglu_bwd_kernel(float *dgu, const float *dout, const float *gu, int F, size_t n) {
    GRID_STRIDE(e, n) {
        const size_t row = e / F;
        const int f = (int)(e % F);
        const float g = gu[row * 2 * F + f], u = gu[row * 2 * F + F + f], dy = dout[e];
        const float s = 1.0f / (1.0f + expf(-g));
        dgu[row * 2 * F + f] = dy * u * (s * (1.0f + g * (1.0f - s)));
        dgu[row * 2 * F + F + f] = dy * g * s;
    }
}

void ah_cuda_swiglu_fwd(float *out, const float *gu, int N, int F) {
    const size_t n = (size_t)N * F;
    if (n == 0) return;
    AH_LAUNCH_1D(swiglu_fwd_kernel, n)(out, gu, F, n);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int F) {
    const size_t n = (size_t)N * F;
    if (n == 0) return;
    AH_LAUNCH_1D(swiglu_bwd_kernel, n)(dgu, dout, gu, F, n);
    AH_CUDA_LAUNCHED();
}

// ---- GELU, tanh form written as x * sigmoid(2u) (see the CPU backend) ----

#define GELU_BETA 0.7978845608028654f
#define GELU_KAPPA 0.044715f

__device__ __forceinline__ float gelu_sigmoid(float x, float x2) {
    return 1.0f / (1.0f + expf(-2.0f * GELU_BETA * (x + GELU_KAPPA * x2 * x)));
}

__global__ void gelu_fwd_kernel(float *out, const float *inp, size_t n) {
    GRID_STRIDE(i, n) {
        const float x = inp[i];
        out[i] = x * gelu_sigmoid(x, x * x);
    }
}

__global__ void gelu_bwd_kernel(float *dinp, const float *dout, const float *inp, size_t n) {
    GRID_STRIDE(i, n) {
        const float x = inp[i], x2 = x * x, s = gelu_sigmoid(x, x2);
        const float d_inner = GELU_BETA * (1.0f + 3.0f * GELU_KAPPA * x2);
        dinp[i] = (s + 2.0f * x * s * (1.0f - s) * d_inner) * dout[i];
    }
}

void ah_cuda_gelu_fwd(float *out, const float *inp, size_t n) {
    AH_LAUNCH_1D(gelu_fwd_kernel, n)(out, inp, n);
    AH_CUDA_LAUNCHED();
}
void ah_cuda_gelu_bwd(float *dinp, const float *dout, const float *inp, size_t n) {
    AH_LAUNCH_1D(gelu_bwd_kernel, n)(dinp, dout, inp, n);
    AH_CUDA_LAUNCHED();
}

// ---- residual ----

__global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}
// Both gradients in one pass over dout.
__global__ void residual_bwd_kernel(float *da, float *db, const float *dout, size_t n) {
    GRID_STRIDE(i, n) {
        const float g = dout[i];
        if (da) da[i] += g;
        if (db) db[i] += g;
    }
}

void ah_cuda_residual_fwd(float *out, const float *a, const float *b, size_t n) {
    AH_LAUNCH_1D(add_kernel, n)(out, a, b, n);
    AH_CUDA_LAUNCHED();
}
void ah_cuda_residual_bwd(float *da, float *db, const float *dout, size_t n) {
    if (!da && !db) return;
    AH_LAUNCH_1D(residual_bwd_kernel, n)(da, db, dout, n);
    AH_CUDA_LAUNCHED();
}

// ---- embedding ----

// This rank's rows [v0, v0 + Vl) of wte; wpe may be NULL (kernels/kernels.h).
__global__ void embedding_fwd_kernel(float *out, const int32_t *tokens, const float *wte,
                                     const float *wpe, ah_cp_at_t at, int T, int C, int v0, int Vl, size_t n) {
    GRID_STRIDE(i, n) {
        const size_t row = i / C;
        const int c = (int)(i % C), t = ah_cuda_cp_pos(at, T, (int)(row % T)), tok = tokens[row];
        const bool here = tok >= v0 && tok - v0 < Vl;
        const float e = here ? wte[(size_t)(tok - v0) * C + c] : 0.0f;
        out[i] = wpe ? (here ? e + wpe[(size_t)t * C + c] : wpe[(size_t)t * C + c]) : e;
    }
}

// dwte: one thread per column walks the rows in (b, t) order, so repeated tokens add in the
// CPU backend's order, without atomics. (Serial in the rows: a few ms for B*T = 8k; a sort by
// token would parallelise it.)
__global__ void embedding_bwd_wte_kernel(float *dwte, const float *dout, const int32_t *tokens,
                                         int BT, int C, int v0, int Vl) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int r = 0; r < BT; r++) {
        const int tok = tokens[r];
        if (tok >= v0 && tok - v0 < Vl) dwte[(size_t)(tok - v0) * C + c] += dout[(size_t)r * C + c];
    }
}

// dwpe's row of row t's position += sum over the sequences of dout's row t (the positions of
// a sequence's rows are distinct: one thread per element writes it).
__global__ void embedding_bwd_wpe_kernel(float *dwpe, const float *dout, ah_cp_at_t at, int B, int T, int C) {
    GRID_STRIDE(i, (size_t)T * C) {
        float s = 0.0f;
        for (int b = 0; b < B; b++) s += dout[(size_t)b * T * C + i];
        dwpe[(size_t)ah_cuda_cp_pos(at, T, (int)(i / C)) * C + i % C] += s;
    }
}

void ah_cuda_embedding_fwd_at(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                              ah_cp_at_t at, int B, int T, int C, int v0, int Vl) {
    const size_t n = (size_t)B * T * C;
    AH_LAUNCH_1D(embedding_fwd_kernel, n)(out, tokens, wte, wpe, at, T, C, v0, Vl, n);
    AH_CUDA_LAUNCHED();
}

void ah_cuda_embedding_bwd_at(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                              ah_cp_at_t at, int B, int T, int C, int v0, int Vl) {
    if (dwte) {
        AH_LAUNCH(embedding_bwd_wte_kernel, (C + 127) / 128, 128, 0, 0)(dwte, dout, tokens, B * T, C, v0, Vl);
        AH_CUDA_LAUNCHED();
    }
    if (dwpe) {
        AH_LAUNCH_1D(embedding_bwd_wpe_kernel, (size_t)T * C)(dwpe, dout, at, B, T, C);
        AH_CUDA_LAUNCHED();
    }
}

AH_KERNELS_DEFINE_PLAIN(ah_cuda)

// ---- AdamW (torch.optim.AdamW's order of operations, as the CPU backend) ----

__global__ void adamw_kernel(float *param, const float *grad, float *m, float *v, size_t n,
                             float decay, float step_size, float bc2_sqrt, float b1, float b2,
                             float eps, float grad_scale) {
    GRID_STRIDE(i, n) {
        const float g = grad[i] * grad_scale;
        const float mi = m[i] * b1 + g * (1.0f - b1);
        const float vi = v[i] * b2 + (1.0f - b2) * g * g;
        const float denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = param[i] * decay - step_size * (mi / denom);
        m[i] = mi;
        v[i] = vi;
    }
}

void ah_cuda_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                   const ah_adamw_hparams_t *hp, float grad_scale, int64_t t) {
    const double bc1 = 1.0 - pow((double)hp->beta1, (double)t);
    const double bc2 = 1.0 - pow((double)hp->beta2, (double)t);
    const float decay = (float)(1.0 - (double)hp->lr * hp->weight_decay);
    const float step_size = (float)((double)hp->lr / bc1);
    AH_LAUNCH_1D(adamw_kernel, n)(param, grad, m, v, n, decay, step_size, (float)sqrt(bc2),
                                   hp->beta1, hp->beta2, hp->eps, grad_scale);
    AH_CUDA_LAUNCHED();
}

// ---- sum of squares: one double partial per block, summed in order; the grid is one block per
// AH_CUDA_THREADS elements up to AH_CUDA_REDUCE_BLOCKS, so the order is fixed for a given n and a
// small tensor does not pay for 512 blocks of idle threads ----

__global__ void sum_squares_kernel(double *partials, const float *x, size_t n) {
    double s = 0.0;
    GRID_STRIDE(i, n) s += (double)x[i] * x[i];
    s = ah_block_sum_d(s);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

double ah_cuda_sum_squares(const float *x, size_t n) {
    const unsigned need = ah_cuda_blocks(n, AH_CUDA_THREADS);
    const unsigned blocks = need < AH_CUDA_REDUCE_BLOCKS ? need : AH_CUDA_REDUCE_BLOCKS;
    AH_LAUNCH(sum_squares_kernel, blocks, AH_CUDA_THREADS, 0, 0)(ah_cuda_g.partials, x, n);
    AH_CUDA_LAUNCHED();
    return ah_cuda_finish_reduction((int)blocks);
}
