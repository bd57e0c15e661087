#include "ckpt/crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#include <nmmintrin.h>
#define AH_CRC32C_X86 1
#endif

#define CRC32C_POLY 0x82F63B78u /* the polynomial 0x1EDC6F41, reflected */

/* Reflected polynomial 0x1EDC6F41. table[k][b] is the CRC of byte b followed by k zero bytes,
 * which lets the main loop fold 8 input bytes per step (slicing-by-8). */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++) table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xFF];
}

/* a(x) b(x) modulo the polynomial, both reflected (x^0 the top bit); a not 0. */
static uint32_t multmodp(uint32_t a, uint32_t b) {
    uint32_t m = 1u << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
    }
    return p;
}

/* x2n[k] = x^(2^k) modulo the polynomial: the register after 2^k / 8 zero bytes, by squaring. */
static uint32_t x2n[64];
static pthread_once_t x2n_once = PTHREAD_ONCE_INIT;

static void x2n_build(void) {
    x2n[0] = 1u << 30; /* x^1 */
    for (int k = 1; k < 64; k++) x2n[k] = multmodp(x2n[k - 1], x2n[k - 1]);
}

uint32_t ah_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    pthread_once(&x2n_once, x2n_build);
    uint32_t shift = 1u << 31; /* x^0; times x^(8 len_b), a power of two at a time */
    for (int k = 3; len_b; len_b >>= 1, k++)
        if (len_b & 1) shift = multmodp(x2n[k & 63], shift);
    return multmodp(shift, crc_a) ^ crc_b; /* the pre- and post-conditioning cancel (zlib's crc32_combine) */
}

uint32_t ah_crc32c_portable(uint32_t crc, const void *data, size_t len) {
    pthread_once(&table_once, build_table);
    const uint8_t *p = data;
    crc = ~crc;
    while (len >= 8) {
        /* Assemble little-endian words byte by byte: no alignment or endianness assumptions. */
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
              table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
              table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xFF];
    return ~crc;
}

#ifdef AH_CRC32C_X86
/* SSE4.2's crc32 instruction computes exactly this CRC (the Castagnoli polynomial, reflected), 8
 * bytes an instruction; one result every cycle but each 3 cycles after its input, so one running
 * CRC uses a third of the unit. Three run side by side instead, over three consecutive lanes of
 * LANE bytes each, and are joined: the CRC register is linear, so the register after lanes a b c
 * is shift(A, 2 LANE) ^ shift(B, LANE) ^ C, A started from the running value and B, C from 0, where
 * shift(r, n) is r times x^(8 n) modulo the polynomial (the register after n zero bytes), by tables
 * built once (shift_tables). Measured (bench_ckpt_writer, 306 MB, load 13-15): 0.022-0.029 CPU-s
 * against 0.032-0.038 with one CRC: not a third of it, as reading the bytes from memory bounds it now. */
enum { LANE = 8192 };
static uint32_t shift_1[4][256], shift_2[4][256]; /* by x^(8 LANE) and x^(16 LANE), a byte at a time */
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void shift_tables(void) {
    uint32_t x1 = 1u << 30; /* x^1; squared 16 times: x^65536 = x^(8 LANE) */
    for (int i = 0; i < 16; i++) x1 = multmodp(x1, x1);
    const uint32_t x2 = multmodp(x1, x1);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            shift_1[k][b] = multmodp(x1, b << (8 * k));
            shift_2[k][b] = multmodp(x2, b << (8 * k));
        }
}

static uint32_t shift(const uint32_t t[4][256], uint32_t r) {
    return t[0][r & 0xFF] ^ t[1][(r >> 8) & 0xFF] ^ t[2][(r >> 16) & 0xFF] ^ t[3][r >> 24];
}

static uint64_t load64(const unsigned char *p) {
    uint64_t word;
    __builtin_memcpy(&word, p, 8); /* unaligned load */
    return word;
}

/* The three lanes' loop of crc32c_sse42 and copy_sse42: the CRC of p's n bytes continuing crc, each
 * word also stored at the same offset of dst when store (inlined into both with store known, so the
 * CRC alone has no stores and no test per word). The lanes' stores go around the caches (movnti,
 * then one sfence; session 20): the copy's destination (a checkpoint snapshot) is read next by the
 * disk's DMA or not for a while, so ordinary stores first read every destination line into the
 * cache (a third of the copy's memory traffic) and push the training's working set out of it. */
__attribute__((target("sse4.2"), always_inline)) static inline uint32_t crc_lanes(uint32_t crc, unsigned char *dst,
                                                                                 const unsigned char *p, size_t n,
                                                                                 const bool store) {
    uint64_t c = ~crc;
    size_t o = 0;
    if (n >= 3 * LANE) pthread_once(&shift_once, shift_tables);
    for (; n - o >= 3 * LANE; o += 3 * LANE) {
        uint64_t b = 0, d = 0;
        for (size_t i = o; i < o + LANE; i += 8) {
            const uint64_t x = load64(p + i), y = load64(p + LANE + i), z = load64(p + 2 * LANE + i);
            c = _mm_crc32_u64(c, x);
            b = _mm_crc32_u64(b, y);
            d = _mm_crc32_u64(d, z);
            if (store) { /* around the caches (above) */
                _mm_stream_si64((long long *)(void *)(dst + i), (long long)x);
                _mm_stream_si64((long long *)(void *)(dst + LANE + i), (long long)y);
                _mm_stream_si64((long long *)(void *)(dst + 2 * LANE + i), (long long)z);
            }
        }
        c = shift(shift_2, (uint32_t)c) ^ shift(shift_1, (uint32_t)b) ^ (uint32_t)d;
    }
    if (store && o > 0) _mm_sfence(); /* the streamed stores ordered before whatever follows */
    for (; n - o >= 8; o += 8) {
        const uint64_t x = load64(p + o);
        c = _mm_crc32_u64(c, x);
        if (store) __builtin_memcpy(dst + o, &x, 8);
    }
    uint32_t c32 = (uint32_t)c;
    for (; o < n; o++) {
        c32 = _mm_crc32_u8(c32, p[o]);
        if (store) dst[o] = p[o];
    }
    return ~c32;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t len) {
    return crc_lanes(crc, NULL, data, len, false);
}

/* ah_crc32c_copy_more with the instruction: each word stored as it is read. */
__attribute__((target("sse4.2"))) static uint32_t copy_sse42(uint32_t crc, unsigned char *dst, const unsigned char *p,
                                                             size_t len) {
    return crc_lanes(crc, dst, p, len, true);
}
#endif

uint32_t ah_crc32c_copy_more(uint32_t crc, void *dst, const void *src, size_t n) {
#ifdef AH_CRC32C_X86
    if (__builtin_cpu_supports("sse4.2")) return copy_sse42(crc, dst, src, n);
#endif
    memcpy(dst, src, n);
    return ah_crc32c(crc, dst, n);
}

uint32_t ah_crc32c_copy(void *dst, const void *src, size_t n) { return ah_crc32c_copy_more(0, dst, src, n); }

bool ah_crc32c_hardware(void) {
#ifdef AH_CRC32C_X86
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

uint32_t ah_crc32c(uint32_t crc, const void *data, size_t len) {
#ifdef AH_CRC32C_X86
    if (__builtin_cpu_supports("sse4.2")) return crc32c_sse42(crc, data, len);
#endif
    return ah_crc32c_portable(crc, data, len);
}
