/* Training data: llm.c token files, one or many shards, memory-mapped.
 *
 * A token file (llm.c dev/data/data_common.py) is a header of 256 int32 (magic, version, token
 * count, rest zero), then `count` tokens: uint16 for magic 20240520 / version 1 (GPT-2), uint32
 * for magic 20240801 / version 7 (LLaMA-3). A count is an int32, so one shard holds < 2^31
 * tokens; a data set of many shards has no such limit (counts are int64 here).
 *
 * A data set is a list of shards sorted by name (ah_dataset_open expands "a.bin,b_*.bin": each
 * comma-separated item is a path or a glob(3) pattern). Sample j of a shard of n tokens is the
 * window [j*T, j*T + T] (T inputs and their T next-token targets), j < (n - 1) / T: windows do
 * not overlap and never cross a shard boundary. One pass (an epoch) is shard 0's samples, then
 * shard 1's, ...; global sample g is sample g mod (samples of a pass) of that order, so the
 * order depends only on the shard list and T, never on the plan, and a resume continues it from
 * a checkpoint's data position. Iteration i trains on global samples [i*B, (i+1)*B).
 *
 * Every shard is mapped, not read: a rank touches the pages of the samples it trains on and no
 * others. A token is checked against the model's vocabulary as it is read (ah_dataset_batch).
 * Refused at open, each naming the file: a pattern matching nothing, a shard listed twice, a
 * directory, a bad header, a size that disagrees with the count, a shard shorter than T + 1
 * tokens, shards of mixed token widths. */
#ifndef AH_RUNTIME_DATA_H
#define AH_RUNTIME_DATA_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

#define AH_TOKENS_MAGIC 20240520   /* uint16 tokens (llm.c "gpt-2") */
#define AH_TOKENS_VERSION 1
#define AH_TOKENS32_MAGIC 20240801 /* uint32 tokens (llm.c "llama-3") */
#define AH_TOKENS32_VERSION 7
#define AH_TOKENS_HEADER_INTS 256
#define AH_TOKENS_HEADER_BYTES (AH_TOKENS_HEADER_INTS * 4)

/* Checks the header at bytes[0 .. header bytes) of a file of file_size bytes named name:
 * magic and version, count >= 1, and header + count * width == file_size. Sets *width (2 or 4)
 * and *count. Errors name the file. */
ah_status_t ah_tokens_parse_header(const void *bytes, size_t avail, uint64_t file_size, const char *name,
                                   int *width, int64_t *count, ah_error_t *err);

typedef struct ah_shard {
    char *path;            /* as listed (owned) */
    int64_t count;         /* tokens */
    const uint8_t *tok;    /* the mapped tokens, width bytes each */
    void *map;             /* the whole file's mapping */
    size_t map_bytes;
    int64_t first;         /* index within a pass of its first sample */
} ah_shard_t;

typedef struct ah_dataset {
    ah_shard_t *shards;    /* sorted by path */
    int n;
    int width;             /* bytes per token: 2 or 4 */
    int64_t vocab, T;
    int64_t samples;       /* in one pass */
    int64_t tokens;        /* over all shards */
} ah_dataset_t;

/* Opens the shards that spec lists (flag, e.g. "--data", names it in errors) for sequences of T
 * with tokens < vocab. */
ah_status_t ah_dataset_open(const char *spec, const char *flag, int64_t vocab, int64_t T, ah_dataset_t *d,
                            ah_error_t *err);
void ah_dataset_close(ah_dataset_t *d);

/* Fills inputs/targets (b x T each) for global samples [first, first + b); either may be NULL
 * (a pipeline's first stage needs only the inputs, its last only the targets). A token outside
 * the vocabulary is an error naming the shard, the token's index and byte offset, and its value. */
ah_status_t ah_dataset_batch(const ah_dataset_t *d, int64_t first, int64_t b, int32_t *inputs, int32_t *targets,
                             ah_error_t *err);

/* The first iteration in [start, steps) whose samples (B a step, iteration start beginning at
 * global sample pos) reach past the end of a pass, or -1 if none does: from there the run sees
 * its data again. */
int64_t ah_dataset_repeat_step(const ah_dataset_t *d, int64_t pos, int64_t start, int64_t B, int64_t steps);

/* The shard list as a checkpoint keeps it: [{"name": BASENAME, "tokens": N}, ...] (new ref). */
json_t *ah_dataset_describe(const ah_dataset_t *d);
/* Compares the shard list with a checkpoint's (ah_dataset_describe's form); on a difference,
 * an error naming the first one. */
ah_status_t ah_dataset_check_same(const ah_dataset_t *d, const json_t *saved, ah_error_t *err);

/* Writes uint16 tokens atomically (temp + rename). */
ah_status_t ah_tokens_save(const char *path, const uint16_t *tok, int64_t count, ah_error_t *err);

/* Byte-level tokenizer: each byte is one token (vocabulary 256). */
ah_status_t ah_tokenize_bytes(const char *text_path, const char *out_path, int64_t *count,
                              ah_error_t *err);

#endif
