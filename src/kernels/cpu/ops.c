/* Pointwise and row-wise ops: layer norm, GELU, residual add, embedding lookup. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/ring_attention.h"

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
        dinp[i] = (s + 2.0f * x * s * (1.0f - s) * d_inner) * dout[i];
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

/* The row of wte that token `tok` reads on a rank holding rows [v0, v0 + Vl), or NULL. */
static const float *embedding_row(const float *wte, int32_t tok, int C, int v0, int Vl) {
    return tok >= v0 && tok - v0 < Vl ? wte + (size_t)(tok - v0) * C : NULL;
}

void ah_cpu_embedding_fwd_at(float *out, const int32_t *tokens, const float *wte, const float *wpe, ah_cp_at_t at,
                             int B, int T, int C, int v0, int Vl) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float *y = out + ((size_t)b * T + t) * C;
            const float *e = embedding_row(wte, tokens[(size_t)b * T + t], C, v0, Vl);
            const float *p = wpe ? wpe + (size_t)ah_cp_pos(at, T, t) * C : NULL;
            /* Each case written out, so that the ones with a single term copy it exactly. */
            if (e && p)
                for (int i = 0; i < C; i++) y[i] = e[i] + p[i];
            else if (e || p)
                memcpy(y, e ? e : p, (size_t)C * sizeof *y);
            else
                memset(y, 0, (size_t)C * sizeof *y);
        }
}

void ah_cpu_embedding_bwd_at(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, ah_cp_at_t at,
                             int B, int T, int C, int v0, int Vl) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const float *dy = dout + ((size_t)b * T + t) * C;
            const int32_t tok = tokens[(size_t)b * T + t];
            if (dwte && tok >= v0 && tok - v0 < Vl) {
                float *de = dwte + (size_t)(tok - v0) * C;
                for (int i = 0; i < C; i++) de[i] += dy[i];
            }
            if (dwpe) {
                float *dp = dwpe + (size_t)ah_cp_pos(at, T, t) * C;
                for (int i = 0; i < C; i++) dp[i] += dy[i];
            }
        }
}
