/* Pointwise and row-wise ops: layer norm, RMS norm, rotary embedding, GELU, SwiGLU, residual add,
 * embedding lookup. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"

AH_CPU_CLONES void ah_cpu_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp,
                          const float *weight, const float *bias, int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        /* Two passes (mean, then squared deviations, kept in y): the one-pass E[x^2] - E[x]^2
         * form loses digits when |mean| >> std. */
        const float m = ah_cpu_sum(x, C) / (float)C;
        for (int i = 0; i < C; i++) y[i] = x[i] - m;
        const float var = ah_cpu_dot(y, y, C) / (float)C;
        const float s = 1.0f / sqrtf(var + eps);
        for (int i = 0; i < C; i++) y[i] = y[i] * s * weight[i] + bias[i];
        mean[n] = m;
        rstd[n] = s;
    }
}

/* The per-column part of a layer-norm backward row, at column i, with its two row sums going to
 * lane k: g = dy * weight summed, g * xhat summed, and dweight, dbias accumulated. */
static inline void layernorm_bwd_column(int i, int k, float g_sum[AH_CPU_LANES],
                                        float gx_sum[AH_CPU_LANES], float *dweight, float *dbias,
                                        const float *x, const float *dy, const float *weight,
                                        float m, float s) {
    const float xhat = (x[i] - m) * s;
    const float g = dy[i] * weight[i];
    g_sum[k] += g;
    gx_sum[k] += g * xhat;
    dbias[i] += dy[i];
    dweight[i] += dy[i] * xhat;
}

AH_CPU_CLONES void ah_cpu_layernorm_bwd(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, const float *mean,
                          const float *rstd, int N, int C) {
    const int C_lanes = C - C % AH_CPU_LANES;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *dy = dout + (size_t)n * C;
        const float m = mean[n], s = rstd[n];
        /* dinp = s * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight. */
        float g_sum[AH_CPU_LANES] = {0}, gx_sum[AH_CPU_LANES] = {0};
        for (int i = 0; i < C_lanes; i += AH_CPU_LANES)
            for (int k = 0; k < AH_CPU_LANES; k++)
                layernorm_bwd_column(i + k, k, g_sum, gx_sum, dweight, dbias, x, dy, weight, m, s);
        for (int i = C_lanes; i < C; i++)
            layernorm_bwd_column(i, i - C_lanes, g_sum, gx_sum, dweight, dbias, x, dy, weight, m, s);
        const float g_mean = ah_cpu_lanes_total(g_sum) / (float)C;
        const float gx_mean = ah_cpu_lanes_total(gx_sum) / (float)C;
        if (!dinp) continue;
        float *dx = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            float xhat = (x[i] - m) * s;
            dx[i] += (dy[i] * weight[i] - g_mean - xhat * gx_mean) * s;
        }
    }
}

AH_CPU_CLONES void ah_cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, int N,
                                      int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        const float s = 1.0f / sqrtf(ah_cpu_dot(x, x, C) / (float)C + eps);
        for (int i = 0; i < C; i++) y[i] = x[i] * s * weight[i];
        rstd[n] = s;
    }
}

AH_CPU_CLONES void ah_cpu_rmsnorm_bwd(float *dinp, float *dweight, const float *dout, const float *inp,
                                      const float *weight, const float *rstd, int N, int C) {
    const int C_lanes = C - C % AH_CPU_LANES;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *dy = dout + (size_t)n * C;
        const float s = rstd[n];
        /* y = w x s: dx = s (g - x s^2 mean(g x)) with g = dy * w; dw += dy x s. */
        float gx[AH_CPU_LANES] = {0};
        for (int i = 0; i < C_lanes; i += AH_CPU_LANES)
            for (int k = 0; k < AH_CPU_LANES; k++) gx[k] += dy[i + k] * weight[i + k] * x[i + k];
        for (int i = C_lanes; i < C; i++) gx[i - C_lanes] += dy[i] * weight[i] * x[i];
        for (int i = 0; i < C; i++) dweight[i] += dy[i] * x[i] * s;
        if (!dinp) continue;
        const float c = ah_cpu_lanes_total(gx) / (float)C * s * s;
        float *dx = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) dx[i] += (dy[i] * weight[i] - x[i] * c) * s;
    }
}

/* Turns the (i, i + hd/2) pairs of every head of every row at position t by +angle (sign 1) or
 * -angle (sign -1); one cos and sin per (t, i), shared by the batch and the heads. */
static void rope(float *x, int B, int T, int n_heads, int hd, int stride, float theta, float sign) {
    const int half = hd / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float inv_freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
            const float angle = (float)t * inv_freq;
            const float c = (float)cos((double)angle), s = sign * (float)sin((double)angle);
            for (int b = 0; b < B; b++) {
                float *row = x + ((size_t)b * T + t) * (size_t)stride;
                for (int h = 0; h < n_heads; h++) {
                    float *p = row + (size_t)h * hd;
                    const float x1 = p[i], x2 = p[i + half];
                    p[i] = x1 * c - x2 * s;
                    p[i + half] = x2 * c + x1 * s;
                }
            }
        }
}

void ah_cpu_rope_fwd(float *x, int B, int T, int n_heads, int hd, int stride, float theta) {
    rope(x, B, T, n_heads, hd, stride, theta, 1.0f);
}

void ah_cpu_rope_bwd(float *dx, int B, int T, int n_heads, int hd, int stride, float theta) {
    rope(dx, B, T, n_heads, hd, stride, theta, -1.0f);
}

AH_CPU_CLONES void ah_cpu_swiglu_fwd(float *out, const float *gu, int N, int F) {
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *y = out + (size_t)n * F;
        for (int i = 0; i < F; i++) y[i] = g[i] / (1.0f + ah_cpu_expf(-g[i])) * u[i];
    }
}

AH_CPU_CLONES void ah_cpu_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int F) {
    /* silu'(g) = sig + g sig (1 - sig) */
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F, *dy = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            const float sig = 1.0f / (1.0f + ah_cpu_expf(-g[i]));
            dg[i] += dy[i] * u[i] * (sig + g[i] * sig * (1.0f - sig));
            du[i] += dy[i] * g[i] * sig;
        }
    }
}

/* sqrt(2/pi), the constant of GPT-2's tanh approximation, and the cubic coefficient. */
#define GELU_BETA 0.7978845608028654f
#define GELU_KAPPA 0.044715f

/* 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^{-2u}), u = beta (x + kappa x^3): the same
 * function as GPT-2's tanh form, written with one exp that vectorises (ah_cpu_expf) and without
 * the cancellation of 1 + tanh(u) for negative u. */
static inline float gelu_sigmoid(float x, float x2) {
    return 1.0f / (1.0f + ah_cpu_expf(-2.0f * GELU_BETA * (x + GELU_KAPPA * x2 * x)));
}

AH_CPU_CLONES void ah_cpu_gelu_fwd(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = x * gelu_sigmoid(x, x * x);
    }
}

AH_CPU_CLONES void ah_cpu_gelu_bwd(float *dinp, const float *dout, const float *inp, size_t n) {
    /* d/dx [x s] = s + x s (1 - s) 2 du/dx, since 1 - tanh(u)^2 = 4 s (1 - s). */
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i], x2 = x * x;
        const float s = gelu_sigmoid(x, x2);
        const float d_inner = GELU_BETA * (1.0f + 3.0f * GELU_KAPPA * x2);
        dinp[i] += (s + 2.0f * x * s * (1.0f - s) * d_inner) * dout[i];
    }
}

void ah_cpu_residual_fwd(float *out, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ah_cpu_residual_bwd(float *da, float *db, const float *dout, size_t n) {
    if (da)
        for (size_t i = 0; i < n; i++) da[i] += dout[i];
    if (db)
        for (size_t i = 0; i < n; i++) db[i] += dout[i];
}

void ah_cpu_embedding_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                          int B, int T, int C, int v0, int Vl) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *y = out + ((size_t)b * T + t) * C;
            const int r = tokens[(size_t)b * T + t] - v0;
            const float *e = r >= 0 && r < Vl ? wte + (size_t)r * C : NULL;
            const float *p = wpe ? wpe + (size_t)t * C : NULL;
            if (e && p) for (int i = 0; i < C; i++) y[i] = e[i] + p[i];
            else if (e) memcpy(y, e, (size_t)C * sizeof *y);
            else if (p) memcpy(y, p, (size_t)C * sizeof *y);
            else memset(y, 0, (size_t)C * sizeof *y);
        }
}

void ah_cpu_embedding_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                          int B, int T, int C, int v0, int Vl) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *dy = dout + ((size_t)b * T + t) * C;
            const int r = tokens[(size_t)b * T + t] - v0;
            if (dwte && r >= 0 && r < Vl) {
                float *de = dwte + (size_t)r * C;
                for (int i = 0; i < C; i++) de[i] += dy[i];
            }
            if (dwpe) {
                float *dp = dwpe + (size_t)t * C;
                for (int i = 0; i < C; i++) dp[i] += dy[i];
            }
        }
}
