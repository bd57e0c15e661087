/* CRC-32C (Castagnoli), the checksum of every checkpoint file.
 *
 * Why CRC-32C: it is the checksum S3 (x-amz-checksum-crc32c), Google Cloud Storage and ext4 use,
 * so a cloud store can check the same value we record; it detects every burst error up to 32 bits
 * and all the truncations/bit flips we care about in a file at rest; and it is a small, well-known
 * algorithm that needs no extra library: x86-64's SSE4.2 crc32 instruction where the CPU has it (chosen at
 * run time), else slicing-by-8 tables (ah_crc32c_portable, ~1-2 GB/s on one core here).
 * It is not a cryptographic hash: it guards against accidents, not against an attacker.
 */
#ifndef AH_CKPT_CRC32C_H
#define AH_CKPT_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Continues a running CRC: start with crc = 0, feed the bytes in any number of pieces.
 * ah_crc32c(0, "123456789", 9) == 0xE3069283. Thread-safe. */
uint32_t ah_crc32c(uint32_t crc, const void *data, size_t len);
/* The same CRC by tables only (what ah_crc32c falls back to; tests compare the two). */
uint32_t ah_crc32c_portable(uint32_t crc, const void *data, size_t len);
/* Copies n bytes from src to dst (not overlapping) and returns their CRC-32C (from 0), reading src
 * once: the copy into a checkpoint snapshot takes the checksum its file needs (afile.h
 * ah_afile_write_crc), so the writer does not read the bytes again. */
uint32_t ah_crc32c_copy(void *dst, const void *src, size_t n);
/* The same, continuing a running CRC (ah_crc32c_copy is crc 0): a tensor copied in pieces, in order. */
uint32_t ah_crc32c_copy_more(uint32_t crc, void *dst, const void *src, size_t n);
/* The CRC-32C of bytes A then B from crc_a (A's) and crc_b (B's, len_b bytes). */
uint32_t ah_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/* Whether ah_crc32c uses the CPU's crc32 instruction. */
bool ah_crc32c_hardware(void);

#endif
