/* The CPU backend's kernels, one function per ah_kernels_t entry (see kernels/kernels.h for the
 * contract of each); backend.c gathers them into the table. Internal to src/kernels/cpu/. */
#ifndef AH_KERNELS_CPU_CPU_H
#define AH_KERNELS_CPU_CPU_H

#include <stdint.h>
#include <string.h>

#include "kernels/kernels.h"

/* The build targets baseline x86-64 (SSE2), so that one binary runs on any x86-64 machine; the
 * elementwise loops, which gcc vectorises at -O3, are also compiled for AVX2 and AVX-512 and the
 * widest one the CPU runs is picked when the program loads (gcc's target_clones, an ifunc).
 * Vector width does not change results: the clones vectorise elementwise maps, whose every
 * element is the same IEEE operations (no FMA contraction in ISO C mode), and reductions written
 * as fixed lanes (AH_CPU_LANES below); a plain running float sum stays in its scalar order
 * (vectorising it would need -fassociative-math). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define AH_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define AH_CPU_CLONES
#endif

/* exp(x) for elementwise loops that the compiler can vectorise (libm's expf is a call per
 * element): x = n ln2 + r with |r| <= ln2/2, Cephes' degree-6 polynomial for e^r (about 1 ulp),
 * times 2^n built in the exponent bits. x is clamped to [-87, 88], where 2^n stays a normal
 * float, so the result never overflows to inf (it is at most e^88) and never reaches 0. */
static inline float ah_cpu_expf(float x) {
    /* The clamp on the bits, as integer selects: a float compare may trap, so the compiler will
     * not vectorise a float select (without -fno-trapping-math). As unsigned, negative floats
     * order by magnitude above all positive ones; as signed, positive floats order as floats. */
    uint32_t x_bits, u;
    memcpy(&x_bits, &x, sizeof u);
    u = x_bits;
    u = u > 0xC2AE0000u ? 0xC2AE0000u : u;                      /* x < -87 (and -inf) -> -87 */
    int32_t i = (int32_t)u;
    i = i > 0x42B00000 ? 0x42B00000 : i;                        /* x > 88 (and +inf) -> 88 */
    memcpy(&x, &i, sizeof x);
    /* round(x / ln2) to nearest by the 1.5 * 2^23 trick: no rounding instruction needed */
    const float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    const float r = (x - fn * 0.693359375f) + fn * 2.12194440e-4f; /* ln2 in two parts */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)fn + 127) << 23;
    float scale, y;
    memcpy(&scale, &bits, sizeof scale);
    y = p * scale;
    /* A NaN stays NaN (the clamp would have made it e^88 or e^-87), selected on the bits too. */
    uint32_t y_bits;
    memcpy(&y_bits, &y, sizeof y_bits);
    const uint32_t nan_mask = 0u - (uint32_t)((x_bits & 0x7fffffffu) > 0x7f800000u);
    y_bits = (x_bits & nan_mask) | (y_bits & ~nan_mask);
    memcpy(&y, &y_bits, sizeof y);
    return y;
}

/* Row reductions (layer norm, softmax) as AH_CPU_LANES interleaved partial sums, lane k taking
 * elements k, k + LANES, ..., combined in a fixed tree: the compiler vectorises the lanes (it may
 * not reorder one running float sum), and the result is the same whatever the vector width. */
#define AH_CPU_LANES 16

static inline float ah_cpu_lanes_total(const float acc[AH_CPU_LANES]) {
    float a[AH_CPU_LANES];
    memcpy(a, acc, sizeof a);
    for (int half = AH_CPU_LANES / 2; half >= 1; half /= 2)
        for (int k = 0; k < half; k++) a[k] += a[k + half];
    return a[0];
}

/* sum of x[0, n), and of a[i] * b[i], in AH_CPU_LANES lanes. */
static inline float ah_cpu_sum(const float *x, int n) {
    const int n_lanes = n - n % AH_CPU_LANES;
    float acc[AH_CPU_LANES] = {0};
    for (int i = 0; i < n_lanes; i += AH_CPU_LANES)
        for (int k = 0; k < AH_CPU_LANES; k++) acc[k] += x[i + k];
    for (int i = n_lanes; i < n; i++) acc[i - n_lanes] += x[i];
    return ah_cpu_lanes_total(acc);
}

static inline float ah_cpu_dot(const float *a, const float *b, int n) {
    const int n_lanes = n - n % AH_CPU_LANES;
    float acc[AH_CPU_LANES] = {0};
    for (int i = 0; i < n_lanes; i += AH_CPU_LANES)
        for (int k = 0; k < AH_CPU_LANES; k++) acc[k] += a[i + k] * b[i + k];
    for (int i = n_lanes; i < n; i++) acc[i - n_lanes] += a[i] * b[i];
    return ah_cpu_lanes_total(acc);
}

/* ah_cpu_<entry> for every entry of the table, with its type (kernels/kernels.h). */
AH_KERNELS_DECLARE(ah_cpu)

#endif
