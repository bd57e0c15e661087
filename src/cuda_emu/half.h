// __nv_bfloat16 and __half for the CUDA emulation: 16-bit storage types with CUDA's conversions.
// float -> bf16 and float -> half round to nearest, ties to even (the _rn intrinsics and the
// constructors from float); fp16 overflows to +-inf past 65504 + half an ulp, keeps subnormals,
// and NaN stays NaN (quiet) in both. Conversions back to float are exact. No arithmetic
// operators: the backend converts to float to compute, as cuda_bf16.h allows but does not force.
#ifndef AH_CUDA_EMU_HALF_H
#define AH_CUDA_EMU_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ah_emu_f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float ah_emu_u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// bf16: the top 16 bits of a float, rounded to nearest even.
static inline uint16_t ah_emu_float_to_bf16_bits(float f) {
    const uint32_t u = ah_emu_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); // quiet NaN
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static inline float ah_emu_bf16_bits_to_float(uint16_t h) { return ah_emu_u2f((uint32_t)h << 16); }

// IEEE binary16, round to nearest even, with subnormals and overflow to inf.
static inline uint16_t ah_emu_float_to_half_bits(float f) {
    const uint32_t u = ah_emu_f2u(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); // NaN
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); // >= 65520: rounds to inf
    if (a < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
        if (a < 0x33000000u) return (uint16_t)sign; // below half the smallest subnormal: +-0
        const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e; // 14 + (113 - e) ... value m * 2^(e-150), unit 2^-24
        const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
        const uint32_t r = q + (rem > halfway || (rem == halfway && (q & 1u)));
        return (uint16_t)(sign | r);
    }
    // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
    const uint32_t v = a - 0x38000000u; // exponent - 112
    const uint32_t r = (v + 0xfffu + ((v >> 13) & 1u)) >> 13;
    return (uint16_t)(sign | r); // a carry into the exponent is the right result (up to inf)
}
static inline float ah_emu_half_bits_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return ah_emu_u2f(sign | 0x7f800000u | (m << 13));
    if (e == 0) return (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f; // m * 2^-24
    return ah_emu_u2f(sign | ((e + 112u) << 23) | (m << 13));
}

#ifdef __cplusplus
struct __nv_bfloat16 {
    uint16_t x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : x(ah_emu_float_to_bf16_bits(f)) {}
    operator float() const { return ah_emu_bf16_bits_to_float(x); }
};
struct __half {
    uint16_t x;
    __half() = default;
    __half(float f) : x(ah_emu_float_to_half_bits(f)) {}
    operator float() const { return ah_emu_half_bits_to_float(x); }
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __half half;

static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __float2half(float f) { return __half(f); }
static inline float __half2float(__half h) { return (float)h; }
#endif

#endif
