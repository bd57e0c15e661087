/* LLaMA's ops: RMS norm, rotary position embedding (Hugging Face's rotate-half layout), SwiGLU. */
#include <math.h>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/rope_freq.h"

AH_CPU_CLONES void ah_cpu_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight,
                                      int N, int C, float eps) {
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float *y = out + (size_t)n * C;
        const float s = 1.0f / sqrtf(ah_cpu_dot(x, x, C) / (float)C + eps);
        for (int i = 0; i < C; i++) y[i] = x[i] * s * weight[i];
        rstd[n] = s;
    }
}

/* The per-column part of an RMS-norm backward row, at column i, its row sum going to lane k:
 * g = dy * weight, g * xhat summed, and dweight accumulated. */
static inline void rmsnorm_bwd_column(int i, int k, float gx_sum[AH_CPU_LANES], float *dweight,
                                      const float *x, const float *dy, const float *weight,
                                      float s) {
    const float xhat = x[i] * s;
    gx_sum[k] += dy[i] * weight[i] * xhat;
    dweight[i] += dy[i] * xhat;
}

AH_CPU_CLONES void ah_cpu_rmsnorm_bwd(float *dinp, float *dweight, const float *dout,
                                      const float *inp, const float *weight, const float *rstd,
                                      int N, int C) {
    const int C_lanes = C - C % AH_CPU_LANES;
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *dy = dout + (size_t)n * C;
        const float s = rstd[n];
        /* dinp = s * (g - xhat * mean(g * xhat)) with g = dy * weight, xhat = x * s. */
        float gx_sum[AH_CPU_LANES] = {0};
        for (int i = 0; i < C_lanes; i += AH_CPU_LANES)
            for (int k = 0; k < AH_CPU_LANES; k++)
                rmsnorm_bwd_column(i + k, k, gx_sum, dweight, x, dy, weight, s);
        for (int i = C_lanes; i < C; i++)
            rmsnorm_bwd_column(i, i - C_lanes, gx_sum, dweight, x, dy, weight, s);
        const float gx_mean = ah_cpu_lanes_total(gx_sum) / (float)C;
        if (!dinp) continue;
        float *dx = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) dx[i] += (dy[i] * weight[i] - x[i] * s * gx_mean) * s;
    }
}

/* Frequencies one pass of rope_rotate takes at a time: its frequency, cos and sin tables live on
 * the stack. */
#define ROPE_CHUNK 128

/* Rotate every head of the B*T rows by the angle of its position, times `sign` (+1 the forward,
 * -1 the backward's transpose): pair (x1, x2) = (x[i], x[i + hd/2]) becomes
 * (x1 c - x2 s, x2 c + x1 s) with s = sign * sin. The frequencies are formed once per chunk of
 * ROPE_CHUNK; cos and sin depend on (t, i) only: for each position they are computed once per
 * frequency and applied to every sequence of the batch and every head, in loops over i that
 * vectorise. */
AH_CPU_CLONES static void rope_rotate(float *x, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride,
                                      ah_rope_t rope, float sign) {
    const int half = hd / 2;
    float inv_freq[ROPE_CHUNK], cs[ROPE_CHUNK], sn[ROPE_CHUNK];
    for (int i0 = 0; i0 < half; i0 += ROPE_CHUNK) {
        const int n = half - i0 < ROPE_CHUNK ? half - i0 : ROPE_CHUNK;
        for (int k = 0; k < n; k++) inv_freq[k] = ah_rope_inv_freq(rope, i0 + k, hd);
        for (int t = 0; t < T; t++) {
            for (int k = 0; k < n; k++) {
                const float angle = (float)ah_cp_pos(at, T, t) * inv_freq[k];
                cs[k] = (float)cos((double)angle);
                sn[k] = sign * (float)sin((double)angle);
            }
            for (int b = 0; b < B; b++) {
                float *row = x + ((size_t)b * T + t) * (size_t)stride;
                for (int h = 0; h < n_heads; h++) {
                    float *p1 = row + (size_t)h * hd + i0, *p2 = p1 + half;
                    for (int k = 0; k < n; k++) {
                        const float x1 = p1[k], x2 = p2[k];
                        p1[k] = x1 * cs[k] - x2 * sn[k];
                        p2[k] = x2 * cs[k] + x1 * sn[k];
                    }
                }
            }
        }
    }
}

void ah_cpu_rope_fwd_at(float *x, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope) {
    rope_rotate(x, at, B, T, n_heads, hd, stride, rope, 1.0f);
}

void ah_cpu_rope_bwd_at(float *dx, ah_cp_at_t at, int B, int T, int n_heads, int hd, int stride, ah_rope_t rope) {
    rope_rotate(dx, at, B, T, n_heads, hd, stride, rope, -1.0f);
}

AH_CPU_CLONES void ah_cpu_swiglu_fwd(float *out, const float *gu, int N, int F) {
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        float *y = out + (size_t)n * F;
        for (int i = 0; i < F; i++) y[i] = g[i] / (1.0f + ah_cpu_expf(-g[i])) * u[i];
    }
}

AH_CPU_CLONES void ah_cpu_swiglu_bwd(float *dgu, const float *dout, const float *gu, int N, int F) {
    /* d silu(g)/dg = s (1 + g (1 - s)) with s = sigmoid(g). */
    for (int n = 0; n < N; n++) {
        const float *g = gu + (size_t)n * 2 * F, *u = g + F;
        const float *dy = dout + (size_t)n * F;
        float *dg = dgu + (size_t)n * 2 * F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            const float s = 1.0f / (1.0f + ah_cpu_expf(-g[i]));
            dg[i] = dy[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
            du[i] = dy[i] * g[i] * s;
        }
    }
}
