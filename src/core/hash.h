/* FNV-1a, 64 bits: a fast, non-cryptographic hash for table slots and stable seeds.
 *
 * The offset basis is the one autohet has always used, 1469598103934665603: the published
 * basis (14695981039346656037, 0xcbf29ce484222325) with its last digit dropped. It mixes as well;
 * what matters is that the values never change, since callers derive from them what must stay
 * the same from run to run (initial weights from tensor names, plan hashes in checkpoints). */
#ifndef AH_CORE_HASH_H
#define AH_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define AH_FNV1A64_OFFSET 1469598103934665603ULL
#define AH_FNV1A64_PRIME 1099511628211ULL

/* One step: mixes v (a byte, or a whole word for hashing arrays of integers) into h. */
static inline uint64_t ah_fnv1a64_mix(uint64_t h, uint64_t v) { return (h ^ v) * AH_FNV1A64_PRIME; }

/* The hash of a C string's bytes (NULL hashes as ""). */
uint64_t ah_fnv1a64_str(const char *s);

#endif
