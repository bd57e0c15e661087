/* safetensors: round trip, CRC-32C vectors, and strict rejection of malformed headers. */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "ckpt/crc32c.h"
#include "ckpt/safetensors.h"
#include "harness.h"

static char dir[] = "/tmp/ah_test_st_XXXXXX";

static void test_crc32c(void) {
    /* The check value of CRC-32C and the RFC 3720 (iSCSI) test vectors. */
    CHECK_EQ_I64(ah_crc32c(0, "123456789", 9), 0xE3069283u);
    unsigned char zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xFF, sizeof ones);
    for (int i = 0; i < 32; i++) inc[i] = (unsigned char)i;
    CHECK_EQ_I64(ah_crc32c(0, zeros, 32), 0x8A9136AAu);
    CHECK_EQ_I64(ah_crc32c(0, ones, 32), 0x62A8AB43u);
    CHECK_EQ_I64(ah_crc32c(0, inc, 32), 0x46DD794Eu);
    /* Feeding in pieces gives the same value as one call. */
    uint32_t c = ah_crc32c(0, inc, 5);
    c = ah_crc32c(c, inc + 5, 27);
    CHECK_EQ_I64(c, 0x46DD794Eu);
    /* The CPU's crc32 instruction (when ah_crc32c uses it) and the tables agree on every length and
     * alignment, whole and in pieces. */
    unsigned char buf[1100];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    int mismatches = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t len = 0; len + off <= sizeof buf; len += len < 64 ? 1 : 37) {
            const uint32_t want = ah_crc32c_portable(0, buf + off, len);
            mismatches += ah_crc32c(0, buf + off, len) != want;
            mismatches += ah_crc32c(ah_crc32c(0, buf + off, len / 3), buf + off + len / 3, len - len / 3) != want;
        }
    CHECK_EQ_I64(mismatches, 0);
    /* Past three lanes (crc32c.c's three CRCs side by side, 3 x 8192 bytes a round): whole rounds, a
     * round and a rest, at every alignment and split. */
    enum { BIG = 2 * 3 * 8192 + 1000 };
    unsigned char *big = malloc(BIG + 8);
    for (size_t i = 0; i < BIG + 8; i++) big[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
    const size_t lens[] = {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 7, 2 * 3 * 8192, BIG};
    for (size_t off = 0; off < 8; off++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
            const uint32_t want = ah_crc32c_portable(0, big + off, lens[k]);
            mismatches += ah_crc32c(0, big + off, lens[k]) != want;
            mismatches += ah_crc32c(ah_crc32c(0, big + off, 5000 + off), big + off + 5000 + off, lens[k] - 5000 - off) != want;
        }
    /* The copy that takes the CRC (ah_crc32c_copy) copies every byte and no more, and gives the CRC,
     * at every source and destination alignment and length around the lanes; the CRC of two pieces
     * joined (ah_crc32c_combine) is the CRC of both, whatever their lengths (0 too). */
    unsigned char *copy = malloc(BIG + 16);
    int wrong_bytes = 0;
    for (size_t off = 0; off < 8; off++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (size_t len = lens[k] - off; len <= lens[k]; len += off + 1) {
                memset(copy, 0xA5, BIG + 16);
                unsigned char *to = copy + 8 - off; /* every alignment relative to the source's */
                mismatches += ah_crc32c_copy(to, big + off, len) != ah_crc32c_portable(0, big + off, len);
                wrong_bytes += memcmp(to, big + off, len) != 0 || to[-1] != 0xA5 || to[len] != 0xA5;
            }
    const size_t cuts[] = {0, 1, 7, 8, 4096, 3 * 8192, 40000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
        for (size_t j = 0; j < sizeof cuts / sizeof cuts[0]; j++) {
            const size_t a = cuts[i], b = cuts[j] < BIG - a ? cuts[j] : BIG - a;
            mismatches += ah_crc32c_combine(ah_crc32c(0, big, a), ah_crc32c(0, big + a, b), b) != ah_crc32c(0, big, a + b);
        }
    free(copy);
    free(big);
    CHECK_EQ_I64(mismatches, 0);
    CHECK_EQ_I64(wrong_bytes, 0);
    CHECK_EQ_I64(ah_crc32c_portable(0, "123456789", 9), 0xE3069283u);
}

static void test_round_trip(void) {
    float w[6] = {1, 2, 3, 4, 5, 6.5f}, b[3] = {-1, 0.25f, 1e30f};
    uint16_t h[2] = {0x3C00, 0xBC00};
    ah_st_tensor_t t[] = {
        {"block.3.attn.qkv.w", AH_DTYPE_F32, 2, {2, 3}, w, false, 0},
        {"block.3.attn.qkv.b", AH_DTYPE_F32, 1, {3}, b, false, 0},
        {"half", AH_DTYPE_F16, 1, {2}, h, false, 0},
        {"empty", AH_DTYPE_F32, 2, {0, 4}, NULL, false, 0},
        {"scalar", AH_DTYPE_BF16, 0, {0}, h, false, 0},
    };
    json_t *md = json_pack("{s:s, s:s}", "format", "pt", "step", "12");
    char path[256];
    snprintf(path, sizeof path, "%s/rt.safetensors", dir);
    ah_error_t err;
    uint64_t bytes = 0;
    uint32_t crc = 0;
    CHECK(ah_st_save(path, t, 5, md, &bytes, &crc, &err) == AH_OK, "save: %s", err.msg);
    json_decref(md);
    uint64_t b2;
    uint32_t c2;
    CHECK(ah_ckpt_file_crc(path, &b2, &c2, &err) == AH_OK, "crc: %s", err.msg);
    CHECK_EQ_I64(b2, bytes);
    CHECK_EQ_I64(c2, crc);

    ah_st_file_t f;
    CHECK(ah_st_open(path, &f, &err) == AH_OK, "open: %s", err.msg);
    CHECK_EQ_I64(f.n, 5);
    CHECK_EQ_I64(f.data_start % 8, 0);
    CHECK_EQ_I64(f.file_size, bytes);
    const ah_st_entry_t *e = ah_st_find(&f, "block.3.attn.qkv.w");
    CHECK(e && e->ndim == 2 && e->shape[0] == 2 && e->shape[1] == 3 && e->dtype == AH_DTYPE_F32,
          "entry for qkv.w");
    float w2[6] = {0};
    CHECK(ah_st_read(&f, "block.3.attn.qkv.w", w2, sizeof w2, &err) == AH_OK, "read: %s", err.msg);
    CHECK(memcmp(w, w2, sizeof w) == 0, "qkv.w round trips bit for bit");
    float b3[3];
    CHECK(ah_st_read(&f, "block.3.attn.qkv.b", b3, sizeof b3, &err) == AH_OK, "read b: %s", err.msg);
    CHECK(memcmp(b, b3, sizeof b) == 0, "qkv.b round trips");
    uint16_t h2[2];
    CHECK(ah_st_read(&f, "half", h2, sizeof h2, &err) == AH_OK && h2[0] == 0x3C00 && h2[1] == 0xBC00,
          "F16 round trips");
    e = ah_st_find(&f, "scalar");
    CHECK(e && e->ndim == 0 && e->end - e->begin == 2, "0-d BF16 scalar holds one element");
    CHECK(json_is_string(json_object_get(f.metadata, "format")), "metadata kept");
    CHECK_ERR(ah_st_read(&f, "block.3.attn.qkv.w", w2, 8, &err), AH_ERR_INVALID, err, "destination holds 8");
    CHECK_ERR(ah_st_read(&f, "nope", w2, 8, &err), AH_ERR_INVALID, err, "no tensor \"nope\"");
    ah_st_close(&f);

    /* Writer rejects what a reader would reject. */
    ah_st_tensor_t dup[] = {{"a", AH_DTYPE_F32, 1, {1}, w, false, 0}, {"a", AH_DTYPE_F32, 1, {1}, w, false, 0}};
    CHECK_ERR(ah_st_save(path, dup, 2, NULL, NULL, NULL, &err), AH_ERR_INVALID, err, "given twice");
    ah_st_tensor_t neg[] = {{"a", AH_DTYPE_F32, 1, {-1}, w, false, 0}};
    CHECK_ERR(ah_st_save(path, neg, 1, NULL, NULL, NULL, &err), AH_ERR_INVALID, err, "shape [-1]");
    json_t *badmd = json_pack("{s:i}", "n", 3);
    CHECK_ERR(ah_st_save(path, t, 1, badmd, NULL, NULL, &err), AH_ERR_INVALID, err, "__metadata__.n");
    json_decref(badmd);
    /* The failed saves left the good file as it was. */
    CHECK(ah_ckpt_file_crc(path, &b2, &c2, &err) == AH_OK && c2 == crc, "failed save kept the old file");
}

/* A file image: 8-byte length + header text + data bytes. */
static size_t image(char *buf, const char *hdr, size_t hdr_len_field, size_t data_len) {
    size_t n = strlen(hdr);
    for (int b = 0; b < 8; b++) buf[b] = (char)((hdr_len_field >> (8 * b)) & 0xFF);
    memcpy(buf + 8, hdr, n);
    memset(buf + 8 + n, 0x11, data_len);
    return 8 + n + data_len;
}

static void test_malformed(void) {
    static const struct {
        const char *hdr;
        size_t data;
        const char *needle;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, NULL},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the data section"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "trailing bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "needs 12"},
        {"{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "dtype \"F64\" is not supported"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "gap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "0 <= begin <= end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, "overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8, "unknown field \"x\""},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "shape must be"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "duplicate"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__.k must be a string"},
        {"[1,2]", 0, "must be a JSON object"},
        {"{\"a\":", 0, "invalid JSON"},
        {"{\"a\":3}", 0, "tensor \"a\": expected an object"},
    };
    char buf[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = image(buf, cases[i].hdr, strlen(cases[i].hdr), cases[i].data);
        ah_st_file_t f;
        ah_error_t err;
        ah_status_t st = ah_st_parse(buf, n, "x.safetensors", &f, &err);
        if (!cases[i].needle) {
            CHECK(st == AH_OK, "case %zu accepted: %s", i, err.msg);
            ah_st_close(&f);
            continue;
        }
        CHECK(st != AH_OK && strstr(err.msg, cases[i].needle) && strstr(err.msg, "x.safetensors"),
              "case %zu: want \"%s\", got: %s", i, cases[i].needle, st == AH_OK ? "(accepted)" : err.msg);
        if (st == AH_OK) ah_st_close(&f);
    }
    /* Header length field lies. */
    const char *ok = "{}";
    ah_st_file_t f;
    ah_error_t err;
    size_t n = image(buf, ok, 1000, 0);
    CHECK_ERR(ah_st_parse(buf, n, "x.safetensors", &f, &err), AH_ERR_PARSE, err, "header length 1000");
    n = image(buf, ok, (size_t)1 << 62, 0);
    CHECK_ERR(ah_st_parse(buf, n, "x.safetensors", &f, &err), AH_ERR_PARSE, err, "not a safetensors file");
    CHECK_ERR(ah_st_parse(buf, 5, "x.safetensors", &f, &err), AH_ERR_PARSE, err, "too short");

    /* A truncated file on disk names the file and the tensor. */
    char path[256];
    snprintf(path, sizeof path, "%s/trunc.safetensors", dir);
    float w[64] = {0};
    ah_st_tensor_t t[] = {{"w", AH_DTYPE_F32, 1, {64}, w, false, 0}};
    CHECK(ah_st_save(path, t, 1, NULL, NULL, NULL, &err) == AH_OK, "save: %s", err.msg);
    CHECK(truncate(path, 100) == 0, "truncate");
    CHECK_ERR(ah_st_open(path, &f, &err), AH_ERR_INVALID, err, "tensor \"w\"");
    CHECK(strstr(err.msg, "trunc.safetensors") != NULL, "file named: %s", err.msg);
    CHECK_ERR(ah_st_open("/nonexistent/x.safetensors", &f, &err), AH_ERR_IO, err, "cannot open");
}

/* Bytes read back from path into back (at most cap); how many. */
static size_t read_back(const char *path, unsigned char *back, size_t cap) {
    FILE *in = fopen(path, "rb");
    const size_t got = in ? fread(back, 1, cap, in) : 0;
    if (in) fclose(in);
    return got;
}

/* f opened on path, with O_DIRECT (the tests' file system takes it). */
static void open_direct(ah_afile_t *f, const char *path) {
    ah_error_t err;
    CHECK(ah_afile_open(f, path, &err) == AH_OK, "open: %s", err.msg);
    CHECK(ah_afile_direct(f), "O_DIRECT on %s", path);
}

/* Direct I/O (ah_afile_direct): files of every size around its 4 MiB buffer and 4 KiB blocks, written
 * in pieces of odd sizes, come out byte for byte, with the CRC-32C and size of the bytes; /tmp here
 * is ext4, which takes O_DIRECT. The buffer is the thread's, kept from one file to the next: once a
 * file filled it, a write faults in no fresh pages (a fresh 4 MiB buffer a file: ~1025 faults). */
static void test_direct(void) {
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, (4 << 20) - 1, 4 << 20, (4 << 20) + 1, (9 << 20) + 12345};
    const size_t most = (9 << 20) + 12345;
    unsigned char *src = malloc(most), *back = malloc(most);
    for (size_t i = 0; i < most; i++) src[i] = (unsigned char)(i * 2654435761u >> 13);
    char path[256];
    snprintf(path, sizeof path, "%s/direct.bin", dir);
    long most_faults = 0;
    bool filled = false; /* a file has filled the buffer (touched its every page) */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ah_afile_t f;
        ah_error_t err;
        struct rusage r0, r1;
        getrusage(RUSAGE_THREAD, &r0);
        open_direct(&f, path);
        for (size_t at = 0, piece = 1; at < sizes[k]; at += piece, piece = piece * 7 + 3) {
            if (piece > sizes[k] - at) piece = sizes[k] - at;
            CHECK(ah_afile_write(&f, src + at, piece, &err) == AH_OK, "write: %s", err.msg);
        }
        CHECK(f.bytes == sizes[k] && f.crc == ah_crc32c(0, src, sizes[k]), "size and CRC of %zu bytes", sizes[k]);
        CHECK(ah_afile_commit(&f, false, &err) == AH_OK, "commit: %s", err.msg);
        getrusage(RUSAGE_THREAD, &r1);
        if (filled && r1.ru_minflt - r0.ru_minflt > most_faults) most_faults = r1.ru_minflt - r0.ru_minflt;
        filled = filled || sizes[k] >= (4 << 20) - 1;
        const size_t got = read_back(path, back, most);
        CHECK(got == sizes[k] && memcmp(back, src, got) == 0, "%zu bytes back as written (%zu)", sizes[k], got);
    }
    CHECK(most_faults < 64, "the direct-I/O buffer kept from one file to the next: %ld minor page faults in "
          "one file's write", most_faults);
    free(src);
    free(back);
}

/* Direct I/O in place (afile.h): a header-like prefix from elsewhere, then 100 "tensors" lying back to
 * back from an address congruent to their file offset modulo AH_AFILE_BLOCK (the snapshot layout),
 * each 2 blocks + 100 bytes long, so that every one has partial blocks at both ends (through the
 * buffer) and whole blocks between (written from where they are), more stretches than one writev
 * takes (AH_AFILE_PENDING): the file comes out byte for byte, with its CRC-32C. The whole blocks are
 * not copied: a byte changed in one of them after ah_afile_write_kept and before the commit is in the
 * file, while one changed in a partial block (copied into the buffer) is not. */
static void test_direct_in_place(void) {
    enum { HEAD = 136, N = 100, LEN = 2 * AH_AFILE_BLOCK + 100 };
    const size_t total = HEAD + (size_t)N * LEN;
    unsigned char *src = aligned_alloc(AH_AFILE_BLOCK, (total / AH_AFILE_BLOCK + 2) * AH_AFILE_BLOCK), *back = malloc(total + 1);
    unsigned char head[HEAD], *data = src + HEAD; /* data's address congruent to its file offset, HEAD */
    for (size_t i = 0; i < HEAD; i++) head[i] = (unsigned char)(i * 7 + 1);
    for (size_t i = 0; i < (size_t)N * LEN; i++) data[i] = (unsigned char)(i * 2654435761u >> 11);
    char path[256];
    snprintf(path, sizeof path, "%s/in-place.bin", dir);
    ah_afile_t f;
    ah_error_t err;
    open_direct(&f, path);
    CHECK(ah_afile_write(&f, head, HEAD, &err) == AH_OK, "write the head: %s", err.msg);
    for (int k = 0; k < N; k++) /* every other one with its CRC given (ah_afile_write_crc) */
        CHECK((k % 2 ? ah_afile_write_crc(&f, data + (size_t)k * LEN, LEN, ah_crc32c(0, data + (size_t)k * LEN, LEN), &err)
                     : ah_afile_write_kept(&f, data + (size_t)k * LEN, LEN, &err)) == AH_OK,
              "write tensor %d: %s", k, err.msg);
    uint32_t want = ah_crc32c(ah_crc32c(0, head, HEAD), data, (size_t)N * LEN);
    CHECK(f.bytes == total && f.crc == want, "size and CRC of %zu bytes written in place", total);
    /* the last tensor's whole blocks are still pending (the commit writes them); its first partial
     * block was copied into the buffer */
    const size_t last = (size_t)(N - 1) * LEN, first_block = AH_AFILE_BLOCK - (HEAD + last) % AH_AFILE_BLOCK;
    data[last + first_block + 10] ^= 0xFF;
    data[last + 10] ^= 0xFF;
    CHECK(ah_afile_commit(&f, false, &err) == AH_OK, "commit: %s", err.msg);
    CHECK(read_back(path, back, total + 1) == total, "%zu bytes back", total);
    CHECK(memcmp(back, head, HEAD) == 0, "the head back as written");
    data[last + 10] ^= 0xFF; /* as it was when written */
    CHECK(memcmp(back + HEAD, data, (size_t)N * LEN) == 0,
          "every byte back as it was at the commit: the whole blocks' bytes read from the caller's memory then, the "
          "partial blocks' copied when written");
    free(src);
    free(back);
}

/* ah_afile_write copies even whole blocks that lie congruent (a header built in a malloc'd buffer
 * that happens to sit on a block boundary, freed before the commit: safetensors.c's header): bytes
 * changed after it returns are not in the file. */
static void test_direct_write_copies(void) {
    enum { LEN = 2 * AH_AFILE_BLOCK };
    unsigned char *buf = aligned_alloc(AH_AFILE_BLOCK, LEN), *back = malloc(LEN + 1), *want = malloc(LEN);
    for (size_t i = 0; i < LEN; i++) want[i] = buf[i] = (unsigned char)(i * 13 + 5);
    char path[256];
    snprintf(path, sizeof path, "%s/copied.bin", dir);
    ah_afile_t f;
    ah_error_t err;
    open_direct(&f, path);
    CHECK(ah_afile_write(&f, buf, LEN, &err) == AH_OK, "write: %s", err.msg);
    memset(buf, 0xAB, LEN); /* as a freed and reused buffer would be */
    CHECK(ah_afile_commit(&f, false, &err) == AH_OK, "commit: %s", err.msg);
    CHECK(read_back(path, back, LEN + 1) == LEN && memcmp(back, want, LEN) == 0,
          "ah_afile_write's bytes back as they were when written, not as the buffer was at the commit");
    free(buf);
    free(back);
    free(want);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_crc32c();
    test_round_trip();
    test_malformed();
    test_direct();
    test_direct_in_place();
    test_direct_write_copies();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return ah_test_finish();
}
