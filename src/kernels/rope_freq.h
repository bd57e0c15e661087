/* A rotary embedding's frequencies, shared by the CPU and CUDA kernels (kernels.h, ah_rope_t):
 * pair i of a head of hd values turns by position x inv_freq(i). */
#ifndef AH_KERNELS_ROPE_FREQ_H
#define AH_KERNELS_ROPE_FREQ_H

#include <math.h>

#include "kernels/kernels.h"

#ifdef __CUDACC__
#define AH_ROPE_FN __host__ __device__ static inline
#else
#define AH_ROPE_FN static inline
#endif

/* 1 / theta^(2i/hd) in fp32; with LLaMA 3.1's scaling (r.factor > 0) as transformers'
 * _compute_llama3_parameters forms it in fp32: wavelength w = 2 pi / inv_freq; w below
 * original_max_pos / high_freq_factor: kept; above original_max_pos / low_freq_factor: divided
 * by factor; between: (1 - s) inv_freq / factor + s inv_freq with
 * s = (original_max_pos / w - low_freq_factor) / (high_freq_factor - low_freq_factor). A Python
 * number divided by a tensor is the tensor's reciprocal times the number in torch (two roundings:
 * Tensor.__rtruediv__), so 2 pi / inv_freq and original_max_pos / w are formed that way here. */
AH_ROPE_FN float ah_rope_inv_freq(ah_rope_t r, int i, int hd) {
    const float inv_freq = 1.0f / powf(r.theta, (float)(2 * i) / (float)hd);
    if (!(r.factor > 0.0f)) return inv_freq;
    const float wavelen = (1.0f / inv_freq) * 6.28318530717958648f;
    if (wavelen < r.original_max_pos / r.high_freq_factor) return inv_freq;
    if (wavelen > r.original_max_pos / r.low_freq_factor) return inv_freq / r.factor;
    const float s =
        ((1.0f / wavelen) * r.original_max_pos - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
    return (1.0f - s) * inv_freq / r.factor + s * inv_freq;
}

#endif
