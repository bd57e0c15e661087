/* FNV-1a 64 (core/hash.h). */
#include "core/hash.h"

uint64_t ah_fnv1a64_str(const char *s) {
    uint64_t h = AH_FNV1A64_OFFSET;
    for (const char *c = s ? s : ""; *c; c++) h = ah_fnv1a64_mix(h, (uint8_t)*c);
    return h;
}
