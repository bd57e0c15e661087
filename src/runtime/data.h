/* Token files in llm.c's format: a header of 256 int32 (magic 20240520, version 1, token
 * count, rest zero), then `count` uint16 tokens. Sample j of a file with n tokens is the window
 * [j*T, j*T + T] (T inputs and their T next-token targets), taken modulo n so the stream wraps;
 * windows do not overlap. Iteration i trains on samples [i*B, (i+1)*B). */
#ifndef AH_RUNTIME_DATA_H
#define AH_RUNTIME_DATA_H

#include <stdint.h>

#include "core/status.h"

#define AH_TOKENS_MAGIC 20240520
#define AH_TOKENS_VERSION 1
#define AH_TOKENS_HEADER_INTS 256

typedef struct ah_tokens {
    uint16_t *tok;  /* count tokens, owned */
    int64_t count;
} ah_tokens_t;

/* Reads and checks a token file: magic, version, count vs file size; tokens < vocab. */
ah_status_t ah_tokens_load(const char *path, int64_t vocab, ah_tokens_t *t, ah_error_t *err);
void ah_tokens_free(ah_tokens_t *t);
/* Writes tokens atomically (temp + rename). */
ah_status_t ah_tokens_save(const char *path, const uint16_t *tok, int64_t count, ah_error_t *err);

/* Byte-level tokenizer: each byte is one token (vocabulary 256). */
ah_status_t ah_tokenize_bytes(const char *text_path, const char *out_path, int64_t *count,
                              ah_error_t *err);

/* Fills inputs/targets (b x T each) for samples [first, first + b); either may be NULL (a
 * pipeline's first stage needs only the inputs, its last only the targets). */
void ah_tokens_batch(const ah_tokens_t *t, int64_t first_sample, int64_t b, int64_t T,
                     int32_t *inputs, int32_t *targets);

#endif
