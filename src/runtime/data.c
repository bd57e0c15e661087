/* Token shards: headers, the shard list, mapped reads, the sample order (data.h). */
#include "runtime/data.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/vec.h"

ah_status_t ah_tokens_parse_header(const void *bytes, size_t avail, uint64_t file_size, const char *name,
                                   int *width, int64_t *count, ah_error_t *err) {
    int32_t hdr[3];
    if (avail < AH_TOKENS_HEADER_BYTES || file_size < AH_TOKENS_HEADER_BYTES)
        return ah_error_set(err, AH_ERR_PARSE, "%s: truncated data file: shorter than the %d-byte header of "
                            "an llm.c token file", name, AH_TOKENS_HEADER_BYTES);
    memcpy(hdr, bytes, sizeof hdr);
    if (hdr[0] == AH_TOKENS_MAGIC && hdr[1] == AH_TOKENS_VERSION) {
        *width = 2;
    } else if (hdr[0] == AH_TOKENS32_MAGIC && hdr[1] == AH_TOKENS32_VERSION) {
        *width = 4;
    } else if (hdr[0] == AH_TOKENS_MAGIC || hdr[0] == AH_TOKENS32_MAGIC) {
        return ah_error_set(err, AH_ERR_PARSE, "%s: token file magic %d with version %d; llm.c writes "
                            "%d/%d (uint16) and %d/%d (uint32)", name, hdr[0], hdr[1], AH_TOKENS_MAGIC,
                            AH_TOKENS_VERSION, AH_TOKENS32_MAGIC, AH_TOKENS32_VERSION);
    } else {
        return ah_error_set(err, AH_ERR_PARSE, "%s: not an llm.c token file: magic %d, expected %d (uint16) "
                            "or %d (uint32)", name, hdr[0], AH_TOKENS_MAGIC, AH_TOKENS32_MAGIC);
    }
    const uint64_t have = (file_size - AH_TOKENS_HEADER_BYTES) / (uint64_t)*width;
    if (hdr[2] < 1 || (uint64_t)hdr[2] != have || (file_size - AH_TOKENS_HEADER_BYTES) % (uint64_t)*width)
        return ah_error_set(err, AH_ERR_PARSE, "%s: header says %d tokens but the file holds %llu bytes of "
                            "uint%d tokens (truncated or padded file)", name, hdr[2],
                            (unsigned long long)(file_size - AH_TOKENS_HEADER_BYTES), 8 * *width);
    *count = hdr[2];
    return AH_OK;
}

/* Maps shard sh->path and checks its header and length. */
static ah_status_t map_shard(ah_shard_t *sh, int64_t T, const char *flag, int *width, ah_error_t *err) {
    const int fd = open(sh->path, O_RDONLY);
    if (fd < 0)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot open data file: %s (%s; make one with "
                            "`autohet tokenize TEXT -o FILE`)", sh->path, strerror(errno), flag);
    struct stat st;
    uint8_t hdr[AH_TOKENS_HEADER_BYTES];
    ssize_t got = fstat(fd, &st) == 0 ? pread(fd, hdr, sizeof hdr, 0) : -1;
    ah_status_t s = got >= 0 ? ah_tokens_parse_header(hdr, (size_t)got, (uint64_t)st.st_size, sh->path, width,
                                                      &sh->count, err)
                    : errno == EISDIR ? ah_error_set(err, AH_ERR_IO, "%s: is a directory, not a data file (%s takes "
                                                     "token files: a path, a quoted glob such as 'DIR/*.bin' or a "
                                                     "comma list)", sh->path, flag)
                                      : ah_error_set(err, AH_ERR_IO, "%s: cannot read: %s", sh->path, strerror(errno));
    if (s == AH_OK && sh->count < T + 1)
        s = ah_error_set(err, AH_ERR_INVALID, "%s: %lld tokens, fewer than one sequence: sequence length %lld "
                         "needs %lld (the inputs and their next-token targets)", sh->path,
                         (long long)sh->count, (long long)T, (long long)T + 1);
    if (s == AH_OK) {
        sh->map_bytes = (size_t)st.st_size;
        sh->map = mmap(NULL, sh->map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
        if (sh->map == MAP_FAILED) {
            sh->map = NULL;
            s = ah_error_set(err, AH_ERR_IO, "%s: cannot map: %s", sh->path, strerror(errno));
        } else {
            sh->tok = (const uint8_t *)sh->map + AH_TOKENS_HEADER_BYTES;
        }
    }
    close(fd);
    return s;
}

static int by_path(const void *a, const void *b) {
    return strcmp(((const ah_shard_t *)a)->path, ((const ah_shard_t *)b)->path);
}

/* Appends one listed path to d->shards. */
static ah_status_t add_path(ah_dataset_t *d, int *cap, const char *path, ah_error_t *err) {
    if (!ah_grow(&d->shards, cap, d->n + 1, sizeof *d->shards) || !(d->shards[d->n].path = strdup(path)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the shard list");
    d->n++;
    return AH_OK;
}

/* The paths spec lists: each comma-separated item a path or a glob pattern, sorted by path. */
static ah_status_t list_paths(ah_dataset_t *d, const char *spec, const char *flag, ah_error_t *err) {
    char *copy = strdup(spec), *save = NULL;
    int cap = 0;
    ah_status_t s = copy ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for %s", flag);
    for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item && s == AH_OK; item = strtok_r(NULL, ",", &save)) {
        if (!strpbrk(item, "*?[")) {
            s = add_path(d, &cap, item, err);
            continue;
        }
        glob_t g;
        const int rc = glob(item, 0, NULL, &g);
        if (rc == GLOB_NOMATCH)
            s = ah_error_set(err, AH_ERR_IO, "%s: pattern \"%s\" matches no file", flag, item);
        else if (rc != 0)
            s = ah_error_set(err, AH_ERR_IO, "%s: cannot expand pattern \"%s\"", flag, item);
        for (size_t i = 0; rc == 0 && i < g.gl_pathc && s == AH_OK; i++) s = add_path(d, &cap, g.gl_pathv[i], err);
        if (rc == 0) globfree(&g);
    }
    free(copy);
    if (s == AH_OK && d->n == 0) s = ah_error_set(err, AH_ERR_USAGE, "%s: no file listed", flag);
    if (s != AH_OK) return s;
    qsort(d->shards, (size_t)d->n, sizeof *d->shards, by_path);
    for (int i = 1; i < d->n; i++)
        if (strcmp(d->shards[i - 1].path, d->shards[i].path) == 0)
            return ah_error_set(err, AH_ERR_USAGE, "%s: %s is listed twice", flag, d->shards[i].path);
    return AH_OK;
}

ah_status_t ah_dataset_open(const char *spec, const char *flag, int64_t vocab, int64_t T, ah_dataset_t *d,
                            ah_error_t *err) {
    memset(d, 0, sizeof *d);
    d->vocab = vocab;
    d->T = T;
    ah_status_t s = list_paths(d, spec, flag, err);
    for (int i = 0; i < d->n && s == AH_OK; i++) {
        ah_shard_t *sh = &d->shards[i];
        int width = 0;
        if ((s = map_shard(sh, T, flag, &width, err)) != AH_OK) break;
        if (i == 0) d->width = width;
        if (width != d->width)
            s = ah_error_set(err, AH_ERR_INVALID, "%s: uint%d tokens, but %s, the first shard, holds uint%d: "
                             "the shards of %s must be of one token width", sh->path, 8 * width,
                             d->shards[0].path, 8 * d->width, flag);
        sh->first = d->samples;
        d->samples += (sh->count - 1) / T;
        d->tokens += sh->count;
    }
    if (s != AH_OK) ah_dataset_close(d);
    return s;
}

void ah_dataset_close(ah_dataset_t *d) {
    for (int i = 0; i < d->n; i++) {
        if (d->shards[i].map) munmap(d->shards[i].map, d->shards[i].map_bytes);
        free(d->shards[i].path);
    }
    free(d->shards);
    memset(d, 0, sizeof *d);
}

/* The shard holding sample j of a pass (0 <= j < samples): the last one whose first <= j. */
static const ah_shard_t *shard_of(const ah_dataset_t *d, int64_t j) {
    int lo = 0, hi = d->n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (d->shards[mid].first <= j) lo = mid;
        else hi = mid - 1;
    }
    return &d->shards[lo];
}

ah_status_t ah_dataset_batch(const ah_dataset_t *d, int64_t first, int64_t b, int32_t *inputs, int32_t *targets,
                             ah_error_t *err) {
    const int64_t T = d->T;
    for (int64_t s = 0; s < b; s++) {
        const int64_t j = (first + s) % d->samples;
        const ah_shard_t *sh = shard_of(d, j);
        const int64_t at = (j - sh->first) * T;
        for (int64_t k = 0; k <= T; k++) {
            uint32_t v;
            if (d->width == 2) {
                uint16_t h;
                memcpy(&h, sh->tok + 2 * (at + k), 2);
                v = h;
            } else {
                memcpy(&v, sh->tok + 4 * (at + k), 4);
            }
            if (v >= (uint64_t)d->vocab)
                return ah_error_set(err, AH_ERR_INVALID, "%s: token %lld (byte offset %lld) is %u, outside the "
                                    "model's vocabulary of %lld", sh->path, (long long)(at + k),
                                    (long long)(AH_TOKENS_HEADER_BYTES + d->width * (at + k)), v,
                                    (long long)d->vocab);
            if (inputs && k < T) inputs[s * T + k] = (int32_t)v;
            if (targets && k > 0) targets[s * T + k - 1] = (int32_t)v;
        }
    }
    return AH_OK;
}

int64_t ah_dataset_repeat_step(const ah_dataset_t *d, int64_t pos, int64_t start, int64_t B, int64_t steps) {
    /* Iteration i reads [pos + (i - start) B, + B): the first to read past the end of pos's pass
     * (end - pos samples away) is start + (end - pos) / B. */
    const int64_t end = (pos / d->samples + 1) * d->samples;
    const int64_t i = start + (end - pos) / B;
    return i < steps ? i : -1;
}

json_t *ah_dataset_describe(const ah_dataset_t *d) {
    json_t *arr = json_array();
    for (int i = 0; i < d->n; i++) {
        const char *slash = strrchr(d->shards[i].path, '/');
        json_array_append_new(arr, json_pack("{s:s, s:I}", "name", slash ? slash + 1 : d->shards[i].path,
                                             "tokens", (json_int_t)d->shards[i].count));
    }
    return arr;
}

ah_status_t ah_dataset_check_same(const ah_dataset_t *d, const json_t *saved, ah_error_t *err) {
    json_t *now = ah_dataset_describe(d);
    const size_t n_saved = json_array_size(saved), n_now = json_array_size(now);
    ah_status_t s = AH_OK;
    for (size_t i = 0; s == AH_OK && i < (n_saved > n_now ? n_saved : n_now); i++) {
        const json_t *a = json_array_get(saved, i), *b = json_array_get(now, i);
        const char *an = json_string_value(json_object_get(a, "name")), *bn = json_string_value(json_object_get(b, "name"));
        const json_int_t at = json_integer_value(json_object_get(a, "tokens"));
        const json_int_t bt = json_integer_value(json_object_get(b, "tokens"));
        if (!a)
            s = ah_error_set(err, AH_ERR_INVALID, "shard %zu, %s, is not in the checkpoint's list of %zu", i + 1,
                             bn, n_saved);
        else if (!b)
            s = ah_error_set(err, AH_ERR_INVALID, "shard %zu of the checkpoint's list, %s, is missing (%zu "
                             "shards given)", i + 1, an ? an : "?", n_now);
        else if (!an || strcmp(an, bn) != 0 || at != bt)
            s = ah_error_set(err, AH_ERR_INVALID, "shard %zu is %s (%lld tokens), the checkpoint's is %s (%lld "
                             "tokens)", i + 1, bn, (long long)bt, an ? an : "?", (long long)at);
    }
    json_decref(now);
    return s == AH_OK ? AH_OK
                      : ah_error_prefix(err, "the data differs from the checkpoint's, so its data position "
                                             "would point elsewhere");
}

ah_status_t ah_tokens_save(const char *path, const uint16_t *tok, int64_t count, ah_error_t *err) {
    if (count > INT32_MAX)
        return ah_error_set(err, AH_ERR_INVALID, "%s: %lld tokens do not fit the format's int32 count",
                            path, (long long)count);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) { /* the temp name is ours: the error names the user's path, and its directory when missing */
        const int e = errno;
        char copy[sizeof tmp];
        snprintf(copy, sizeof copy, "%s", path);
        const char *dir = dirname(copy);
        if (e == ENOENT && access(dir, F_OK) != 0)
            return ah_error_set(err, AH_ERR_IO, "%s: cannot create: the directory %s does not exist (make it first)",
                                path, dir);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot create: %s", path, strerror(e));
    }
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
    const int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    if (!tok) return ah_error_set(err, AH_ERR_OOM, "%s: no host memory to tokenize", text_path);
    if (read_errno) {
        free(tok);
        if (read_errno == EISDIR)
            return ah_error_set(err, AH_ERR_IO, "%s: is a directory; tokenize takes one text file (tokenize each "
                                "file into its own -o FILE)", text_path);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot read: %s", text_path, strerror(read_errno));
    }
    if (n < 2) {
        free(tok);
        return ah_error_set(err, AH_ERR_INVALID, "%s: needs at least 2 bytes of text, has %zu", text_path, n);
    }
    ah_status_t s = ah_tokens_save(out_path, tok, (int64_t)n, err);
    free(tok);
    if (s == AH_OK && count) *count = (int64_t)n;
    return s;
}
