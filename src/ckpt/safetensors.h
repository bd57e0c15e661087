/* safetensors files: named tensors, the format Hugging Face and PyTorch users load directly.
 *
 * Layout: an 8-byte little-endian header length N; N bytes of UTF-8 JSON
 *   {"NAME": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "string value", ...}}
 * padded with spaces so the data starts 8-byte aligned; then the data section, row-major,
 * little-endian, with offsets relative to its start. The writer emits tensors in the order given,
 * back to back.
 *
 * Reading treats the file as hostile: the header length must fit the file and a 100 MiB cap; the
 * JSON must be an object without duplicate keys; every tensor needs exactly dtype, shape and
 * data_offsets with non-negative integers; shape x dtype size must equal end - begin without
 * overflowing; and the ranges, sorted, must tile the data section exactly (start at 0, no gap, no
 * overlap, end at the end of the file). Errors name the file and the tensor.
 *
 * Ownership: ah_st_file_t owns its entry array and metadata; ah_st_close frees them. Tensors to
 * write are borrowed for the duration of the call.
 */
#ifndef AH_CKPT_SAFETENSORS_H
#define AH_CKPT_SAFETENSORS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt/afile.h"
#include "core/status.h"

/* F32 is what the CPU trainer holds; F16/BF16 are accepted so mixed-precision shards and exported
 * models fit later without a format change. Adding a dtype is one row in safetensors.c. */
typedef enum { AH_DTYPE_F32 = 0, AH_DTYPE_F16, AH_DTYPE_BF16 } ah_dtype_t;

#define AH_ST_MAX_DIMS 8
#define AH_ST_NAME_MAX 256
#define AH_ST_HEADER_MAX ((uint64_t)100 << 20)

size_t ah_dtype_size(ah_dtype_t d);
const char *ah_dtype_name(ah_dtype_t d);

/* A tensor to write; data holds prod(shape) elements of dtype in host (little-endian) order. With
 * crc_known, crc32c is the CRC-32C of those bytes (a checkpoint snapshot's copy took it), which
 * ah_st_write uses instead of reading them for it. */
typedef struct ah_st_tensor {
    const char *name;
    ah_dtype_t dtype;
    int ndim;
    int64_t shape[AH_ST_MAX_DIMS];
    const void *data;
    bool crc_known;
    uint32_t crc32c;
} ah_st_tensor_t;

/* A tensor found in a file. */
typedef struct ah_st_entry {
    char name[AH_ST_NAME_MAX];
    ah_dtype_t dtype;
    int ndim;
    int64_t shape[AH_ST_MAX_DIMS];
    uint64_t begin, end; /* byte range inside the data section */
} ah_st_entry_t;

typedef struct ah_st_file {
    char path[AH_CKPT_PATH_MAX]; /* for messages */
    int n;
    ah_st_entry_t *entries; /* sorted by offset */
    json_t *metadata;       /* the __metadata__ object (string values), or NULL */
    uint64_t data_start;    /* 8 + N */
    uint64_t file_size;
} ah_st_file_t;

/* Writes a whole safetensors file into an open atomic file (the caller commits it). metadata may
 * be NULL; otherwise an object whose values are all strings. The tensors' data must stay unchanged
 * until the caller's commit or abort (a direct-I/O file writes whole blocks from it then: afile.h);
 * the header is copied. */
ah_status_t ah_st_write(ah_afile_t *f, const ah_st_tensor_t *tensors, int n, const json_t *metadata,
                        ah_error_t *err);
/* The size in bytes of the file ah_st_write would write for these tensors and metadata (data
 * pointers are not read). */
ah_status_t ah_st_size(const ah_st_tensor_t *tensors, int n, const json_t *metadata, uint64_t *bytes,
                       ah_error_t *err);
/* ah_st_write into path, committed atomically with a directory fsync; bytes/crc may be NULL. */
ah_status_t ah_st_save(const char *path, const ah_st_tensor_t *tensors, int n,
                       const json_t *metadata, uint64_t *bytes, uint32_t *crc, ah_error_t *err);

/* Validates a whole file held in memory (what the fuzzer drives); `name` is used in messages. */
ah_status_t ah_st_parse(const void *buf, size_t size, const char *name, ah_st_file_t *out,
                        ah_error_t *err);
/* Reads and validates the header of a file on disk (not the data). */
ah_status_t ah_st_open(const char *path, ah_st_file_t *out, ah_error_t *err);
const ah_st_entry_t *ah_st_find(const ah_st_file_t *f, const char *name);
/* Copies one tensor's bytes from the file at f->path into dst (cap bytes available). */
ah_status_t ah_st_read(const ah_st_file_t *f, const char *name, void *dst, size_t cap,
                       ah_error_t *err);
/* Copies len bytes of entry e (one of f's), from byte `off` of the tensor, into dst: a part of a
 * tensor (the rows of a vocabulary-parallel shard) without reading the rest. */
ah_status_t ah_st_read_range(const ah_st_file_t *f, const ah_st_entry_t *e, uint64_t off, void *dst, size_t len,
                             ah_error_t *err);
void ah_st_close(ah_st_file_t *f);

#endif
