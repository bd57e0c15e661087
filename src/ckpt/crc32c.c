#include "ckpt/crc32c.h"

#include <pthread.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define AH_CRC32C_X86 1
#endif

/* Reflected polynomial 0x1EDC6F41. table[k][b] is the CRC of byte b followed by k zero bytes,
 * which lets the main loop fold 8 input bytes per step (slicing-by-8). */
static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int i = 0; i < 8; i++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++) table[k][b] = (table[k - 1][b] >> 8) ^ table[0][table[k - 1][b] & 0xFF];
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
 * bytes an instruction. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t word;
        __builtin_memcpy(&word, p, 8); /* unaligned load */
        c = _mm_crc32_u64(c, word);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#endif

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
