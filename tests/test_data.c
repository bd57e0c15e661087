/* The token-shard reader (runtime/data.h): uint16 and uint32 files, lists and globs in name
 * order, windows that never cross a shard, the pass order and its wrap, vocabulary errors found
 * as read (naming shard, offset, value), refusals naming the file, the repeat step, the shard
 * list a checkpoint keeps, and shards past 2^31 tokens in all (sparse files: nothing read but
 * the samples asked for). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "runtime/data.h"

static char dir[] = "/tmp/ah-test-data-XXXXXX";

/* Writes DIR/name: an llm.c header (magic, version, n) then tokens v(i) = (i * 7 + seed) % mod,
 * as uint16 or uint32; with sparse, only the header (the file is extended with zeros). */
static const char *write_shard(const char *name, int magic, int version, int width, int64_t n, int seed,
                               int mod, bool sparse) {
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 512, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    int32_t hdr[AH_TOKENS_HEADER_INTS] = {magic, version, (int32_t)n};
    fwrite(hdr, sizeof hdr, 1, f);
    if (sparse) {
        fclose(f);
        CHECK(truncate(p, AH_TOKENS_HEADER_BYTES + n * width) == 0, "truncate %s", p);
        return p;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint32_t v = (uint32_t)((i * 7 + seed) % mod);
        const uint16_t h = (uint16_t)v;
        fwrite(width == 2 ? (const void *)&h : (const void *)&v, (size_t)width, 1, f);
    }
    fclose(f);
    return p;
}

static void test_order(void) {
    /* a: 21 tokens = 5 windows of T 4 (+1 spare); b: 10 tokens = 2 windows. Listed b-first:
     * taken in name order. */
    write_shard("b.bin", AH_TOKENS_MAGIC, AH_TOKENS_VERSION, 2, 10, 1000, 50000, false);
    write_shard("a.bin", AH_TOKENS_MAGIC, AH_TOKENS_VERSION, 2, 21, 0, 50000, false);
    char spec[1200];
    snprintf(spec, sizeof spec, "%s/b.bin,%s/a.bin", dir, dir);
    ah_dataset_t d;
    ah_error_t err;
    CHECK(ah_dataset_open(spec, "--data", 50000, 4, &d, &err) == AH_OK, "open: %s", err.msg);
    CHECK_EQ_I64(d.n, 2);
    CHECK(strstr(d.shards[0].path, "/a.bin") != NULL, "name order: %s first", d.shards[0].path);
    CHECK_EQ_I64(d.samples, 5 + 2);
    CHECK_EQ_I64(d.tokens, 31);
    int32_t in[9 * 4], tg[9 * 4];
    CHECK(ah_dataset_batch(&d, 0, 9, in, tg, &err) == AH_OK, "batch: %s", err.msg);
    /* sample 4 is a's last window [16, 20]; sample 5 is b's first (never a's token 20 + b's);
     * sample 7 wraps to a's sample 0. */
    CHECK_EQ_I64(in[4 * 4 + 0], 16 * 7);
    CHECK_EQ_I64(tg[4 * 4 + 3], 20 * 7);
    CHECK_EQ_I64(in[5 * 4 + 0], 1000);
    CHECK_EQ_I64(tg[6 * 4 + 3], (8 * 7 + 1000));
    CHECK_EQ_I64(in[7 * 4 + 1], 7);
    CHECK_EQ_I64(tg[7 * 4 + 0], 7);
    /* A glob gives the same list. */
    ah_dataset_t g;
    snprintf(spec, sizeof spec, "%s/?.bin", dir);
    CHECK(ah_dataset_open(spec, "--data", 50000, 4, &g, &err) == AH_OK, "glob: %s", err.msg);
    CHECK_EQ_I64(g.n, 2);
    json_t *saved = ah_dataset_describe(&d);
    CHECK(ah_dataset_check_same(&g, saved, &err) == AH_OK, "same list: %s", err.msg);
    ah_dataset_close(&g);
    /* Vocabulary: found when read, naming the shard, index, byte offset and value. */
    ah_dataset_t small;
    CHECK(ah_dataset_open(spec, "--data", 100, 4, &small, &err) == AH_OK, "open: %s", err.msg);
    CHECK(ah_dataset_batch(&small, 0, 1, in, NULL, &err) == AH_OK, "sample 0 is in the vocabulary: %s", err.msg);
    CHECK_ERR(ah_dataset_batch(&small, 3, 1, in, NULL, &err), AH_ERR_INVALID, err,
              "a.bin: token 15 (byte offset 1054) is 105, outside the model's vocabulary of 100");
    ah_dataset_close(&small);
    /* A shard list that differs from a checkpoint's names the first difference. */
    ah_dataset_t only_a;
    snprintf(spec, sizeof spec, "%s/a.bin", dir);
    CHECK(ah_dataset_open(spec, "--data", 50000, 4, &only_a, &err) == AH_OK, "open: %s", err.msg);
    CHECK_ERR(ah_dataset_check_same(&only_a, saved, &err), AH_ERR_INVALID, err,
              "shard 2 of the checkpoint's list, b.bin, is missing");
    json_decref(saved);
    saved = ah_dataset_describe(&only_a);
    CHECK_ERR(ah_dataset_check_same(&d, saved, &err), AH_ERR_INVALID, err, "shard 2, b.bin, is not in the checkpoint's");
    json_decref(saved);
    ah_dataset_close(&only_a);
    /* Repeat step: 7 samples a pass, 3 a step: step 2 (from 0) reads samples 6..8. */
    CHECK_EQ_I64(ah_dataset_repeat_step(&d, 0, 0, 3, 10), 2);
    CHECK_EQ_I64(ah_dataset_repeat_step(&d, 0, 0, 3, 2), -1);
    CHECK_EQ_I64(ah_dataset_repeat_step(&d, 0, 0, 7, 10), 1); /* exactly one pass a step */
    CHECK_EQ_I64(ah_dataset_repeat_step(&d, 9, 3, 3, 10), 4); /* resumed at sample 9 of pass 2 */
    ah_dataset_close(&d);
}

static void test_refusals(void) {
    ah_dataset_t d;
    ah_error_t err;
    char spec[1200];
    snprintf(spec, sizeof spec, "%s/none_*.bin", dir);
    CHECK_ERR(ah_dataset_open(spec, "--data", 256, 4, &d, &err), AH_ERR_IO, err, "matches no file");
    const char *a = write_shard("w16.bin", AH_TOKENS_MAGIC, AH_TOKENS_VERSION, 2, 40, 0, 256, false);
    const char *b = write_shard("w32.bin", AH_TOKENS32_MAGIC, AH_TOKENS32_VERSION, 4, 40, 0, 256, false);
    snprintf(spec, sizeof spec, "%s,%s", b, a);
    CHECK_ERR(ah_dataset_open(spec, "--data", 256, 4, &d, &err), AH_ERR_INVALID, err, "w32.bin: uint32 tokens, but");
    snprintf(spec, sizeof spec, "%s,%s", a, a);
    CHECK_ERR(ah_dataset_open(spec, "--data", 256, 4, &d, &err), AH_ERR_USAGE, err, "w16.bin is listed twice");
    CHECK_ERR(ah_dataset_open(a, "--data", 256, 40, &d, &err), AH_ERR_INVALID, err,
              "w16.bin: 40 tokens, fewer than one sequence: sequence length 40 needs 41");
    const char *v = write_shard("v.bin", AH_TOKENS_MAGIC, 7, 2, 40, 0, 256, false);
    CHECK_ERR(ah_dataset_open(v, "--data", 256, 4, &d, &err), AH_ERR_PARSE, err, "v.bin: token file magic 20240520 with version 7");
    const char *t = write_shard("t.bin", AH_TOKENS32_MAGIC, AH_TOKENS32_VERSION, 2, 40, 0, 256, false);
    CHECK_ERR(ah_dataset_open(t, "--data", 256, 4, &d, &err), AH_ERR_PARSE, err, "t.bin: header says 40 tokens");
    /* uint32 reads back what was written, beyond uint16's range. */
    const char *big = write_shard("big.bin", AH_TOKENS32_MAGIC, AH_TOKENS32_VERSION, 4, 40, 70000, 200000, false);
    CHECK(ah_dataset_open(big, "--data", 200000, 4, &d, &err) == AH_OK, "uint32: %s", err.msg);
    int32_t in[4];
    CHECK(ah_dataset_batch(&d, 1, 1, in, NULL, &err) == AH_OK, "uint32 batch: %s", err.msg);
    CHECK_EQ_I64(in[0], 70000 + 4 * 7);
    ah_dataset_close(&d);
}

/* Two sparse shards of 2^31 - 1 tokens each: 2^32 - 2 in all, read near the end of the second. */
static void test_large(void) {
    const int64_t n = INT32_MAX;
    write_shard("large_0.bin", AH_TOKENS_MAGIC, AH_TOKENS_VERSION, 2, n, 0, 1, true);
    write_shard("large_1.bin", AH_TOKENS_MAGIC, AH_TOKENS_VERSION, 2, n, 0, 1, true);
    char spec[1200];
    snprintf(spec, sizeof spec, "%s/large_*.bin", dir);
    ah_dataset_t d;
    ah_error_t err;
    const int64_t T = 1024;
    CHECK(ah_dataset_open(spec, "--data", 256, T, &d, &err) == AH_OK, "open: %s", err.msg);
    CHECK_EQ_I64(d.tokens, 2 * n);
    CHECK_EQ_I64(d.samples, 2 * ((n - 1) / T));
    int32_t *in = malloc((size_t)(2 * T) * sizeof *in);
    CHECK(ah_dataset_batch(&d, d.samples - 2, 2, in, NULL, &err) == AH_OK, "batch: %s", err.msg);
    CHECK_EQ_I64(in[2 * T - 1], 0);
    free(in);
    ah_dataset_close(&d);
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    test_order();
    test_refusals();
    test_large();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return ah_test_finish();
}
