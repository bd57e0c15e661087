#include "runtime/data.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

ah_status_t ah_tokens_load(const char *path, int64_t vocab, ah_tokens_t *t, ah_error_t *err) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot open data file: %s (make one with "
                            "`autohet tokenize TEXT -o FILE`)", path, strerror(errno));
    int32_t hdr[AH_TOKENS_HEADER_INTS];
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || fread(hdr, sizeof hdr, 1, f) != 1) {
        fclose(f);
        return ah_error_set(err, AH_ERR_PARSE, "%s: truncated data file: shorter than the %zu-byte "
                            "header of an llm.c token file", path, sizeof hdr);
    }
    if (hdr[0] != AH_TOKENS_MAGIC) {
        fclose(f);
        return ah_error_set(err, AH_ERR_PARSE, "%s: not an llm.c token file: magic %d, expected %d",
                            path, hdr[0], AH_TOKENS_MAGIC);
    }
    if (hdr[1] != AH_TOKENS_VERSION) {
        fclose(f);
        return ah_error_set(err, AH_ERR_PARSE, "%s: token file version %d, only version %d "
                            "(uint16 tokens) is supported", path, hdr[1], AH_TOKENS_VERSION);
    }
    int64_t count = hdr[2];
    int64_t have = ((int64_t)st.st_size - (int64_t)sizeof hdr) / 2;
    if (count < 2 || count != have) {
        fclose(f);
        return ah_error_set(err, AH_ERR_PARSE, "%s: header says %lld tokens but the file holds %lld%s",
                            path, (long long)count, (long long)have,
                            count < 2 ? " (at least 2 are needed)" : " (truncated or padded file)");
    }
    t->tok = malloc((size_t)count * sizeof *t->tok);
    if (!t->tok) {
        fclose(f);
        return ah_error_set(err, AH_ERR_OOM, "%s: no host memory for %lld tokens", path, (long long)count);
    }
    if (fread(t->tok, sizeof *t->tok, (size_t)count, f) != (size_t)count) {
        fclose(f);
        ah_tokens_free(t);
        return ah_error_set(err, AH_ERR_IO, "%s: read failed", path);
    }
    fclose(f);
    for (int64_t i = 0; i < count; i++)
        if (t->tok[i] >= vocab) {
            ah_error_set(err, AH_ERR_INVALID, "%s: token %lld is %u, outside the model's vocabulary "
                         "of %lld", path, (long long)i, t->tok[i], (long long)vocab);
            ah_tokens_free(t);
            return err ? err->code : AH_ERR_INVALID;
        }
    t->count = count;
    return AH_OK;
}

void ah_tokens_free(ah_tokens_t *t) {
    free(t->tok);
    t->tok = NULL;
    t->count = 0;
}

ah_status_t ah_tokens_save(const char *path, const uint16_t *tok, int64_t count, ah_error_t *err) {
    if (count > INT32_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "%s: %lld tokens do not fit the format's int32 count",
                            path, (long long)count);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return ah_error_set(err, AH_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    int32_t hdr[AH_TOKENS_HEADER_INTS] = {AH_TOKENS_MAGIC, AH_TOKENS_VERSION, (int32_t)count};
    int ok = fwrite(hdr, sizeof hdr, 1, f) == 1 &&
             fwrite(tok, sizeof *tok, (size_t)count, f) == (size_t)count;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return AH_OK;
}

ah_status_t ah_tokenize_bytes(const char *text_path, const char *out_path, int64_t *count,
                              ah_error_t *err) {
    FILE *f = fopen(text_path, "rb");
    if (!f) return ah_error_set(err, AH_ERR_IO, "%s: cannot open: %s", text_path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint16_t *tok = malloc(cap * sizeof *tok);
    int c;
    while (tok && (c = fgetc(f)) != EOF) {
        if (n == cap) {
            uint16_t *bigger = realloc(tok, 2 * cap * sizeof *tok);
            if (!bigger) { free(tok); tok = NULL; break; }
            tok = bigger;
            cap *= 2;
        }
        tok[n++] = (uint16_t)c;
    }
    fclose(f);
    if (!tok) return ah_error_set(err, AH_ERR_OOM, "%s: no host memory to tokenize", text_path);
    if (n < 2) {
        free(tok);
        return ah_error_set(err, AH_ERR_INVALID, "%s: needs at least 2 bytes of text, has %zu", text_path, n);
    }
    ah_status_t s = ah_tokens_save(out_path, tok, (int64_t)n, err);
    free(tok);
    if (s == AH_OK && count) *count = (int64_t)n;
    return s;
}

void ah_tokens_batch(const ah_tokens_t *t, int64_t first_sample, int64_t b, int64_t T,
                     int32_t *inputs, int32_t *targets) {
    for (int64_t s = 0; s < b; s++) {
        int64_t start = ((first_sample + s) % t->count) * (T % t->count) % t->count;
        /* start = (j*T) mod n computed without overflow for large j */
        for (int64_t k = 0; k < T; k++) {
            if (inputs) inputs[s * T + k] = t->tok[(start + k) % t->count];
            if (targets) targets[s * T + k] = t->tok[(start + k + 1) % t->count];
        }
    }
}
