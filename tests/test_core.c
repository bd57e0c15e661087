/* core/: growing and fixed strings, growable arrays, mkdir -p and rm -r, FNV-1a, status words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/hash.h"
#include "core/status.h"
#include "core/str.h"
#include "core/vec.h"
#include "harness.h"

static void test_str_fixed(void) {
    char buf[8];
    ah_str_t s = ah_str_fixed(buf, sizeof buf);
    CHECK(strcmp(buf, "") == 0 && s.len == 0, "emptied");
    CHECK(ah_str_appendf(&s, "%s", "abc"), "fits");
    CHECK(ah_str_appendf(&s, "%d", 1234), "fits to the last byte");
    CHECK(strcmp(buf, "abc1234") == 0 && s.len == 7 && !s.failed, "%s", buf);
    CHECK(!ah_str_appendf(&s, "x"), "a full buffer takes nothing more");
    CHECK(ah_str_appendf(&s, "%s", ""), "an empty append always fits");
    CHECK(s.failed && strcmp(buf, "abc1234") == 0, "kept, marked cut: %s", buf);
    s = ah_str_fixed(buf, sizeof buf);
    CHECK(!ah_str_appendf(&s, "%s", "a long sentence"), "cut");
    CHECK(strcmp(buf, "a long ") == 0 && s.len == 7 && s.failed, "cut to fit: \"%s\"", buf);
}

static void test_grow(void) {
    int *v = NULL, cap = 0;
    for (int i = 0; i < 1000; i++) {
        CHECK(ah_grow(&v, &cap, i + 1, sizeof *v), "grow to %d", i + 1);
        v[i] = i;
    }
    CHECK(cap >= 1000 && cap <= 2048, "doubling: cap %d", cap);
    long sum = 0;
    for (int i = 0; i < 1000; i++) sum += v[i];
    CHECK_EQ_I64(sum, 999 * 1000 / 2);
    const int before = cap;
    CHECK(ah_grow(&v, &cap, 10, sizeof *v) && cap == before, "no shrinking");
    free(v);
}

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static void touch(const char *p) {
    FILE *f = fopen(p, "w");
    CHECK(f != NULL, "create %s", p);
    if (f) fclose(f);
}

static void test_fs(void) {
    char root[] = "/tmp/autohet-test-core-XXXXXX", p[512];
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    ah_error_t err = {0};
    snprintf(p, sizeof p, "%s/a/b/c", root);
    CHECK(ah_fs_mkdirs(p, &err) == AH_OK, "%s", err.msg);
    CHECK(is_dir(p), "made %s", p);
    CHECK(ah_fs_mkdirs(p, &err) == AH_OK, "again: %s", err.msg);
    snprintf(p, sizeof p, "%s/a/b/", root);
    CHECK(ah_fs_mkdirs(p, &err) == AH_OK, "a trailing slash: %s", err.msg);
    snprintf(p, sizeof p, "%s/a/file", root);
    touch(p);
    snprintf(p, sizeof p, "%s/a/file/d", root);
    CHECK_ERR(ah_fs_mkdirs(p, &err), AH_ERR_IO, err, "is not a directory");
    snprintf(p, sizeof p, "%s/a/b/c/deep", root);
    touch(p);
    snprintf(p, sizeof p, "%s/a/link", root);
    CHECK(symlink(root, p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/a", root);
    CHECK(ah_fs_rm_tree(p, &err) == AH_OK, "%s", err.msg);
    CHECK(!is_dir(p), "removed %s", p);
    CHECK(is_dir(root), "a link's target is not followed");
    CHECK(ah_fs_rm_tree(p, &err) == AH_OK, "absent is fine: %s", err.msg);
    char longp[AH_FS_PATH_MAX + 8];
    memset(longp, 'x', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    CHECK_ERR(ah_fs_mkdirs(longp, &err), AH_ERR_IO, err, "path too long");
    CHECK(ah_fs_rm_tree(root, &err) == AH_OK, "%s", err.msg);
    CHECK(!is_dir(root), "removed the root");
}

static void test_fnv1a(void) {
    /* With autohet's offset basis (core/hash.h); Python's int arithmetic mod 2^64 gives these. */
    CHECK(ah_fnv1a64_str("") == 1469598103934665603ULL, "empty");
    CHECK(ah_fnv1a64_str(NULL) == 1469598103934665603ULL, "NULL as empty");
    CHECK(ah_fnv1a64_str("a") == 0x44bd8ad473cd9906ULL, "a");
    CHECK(ah_fnv1a64_str("foobar") == 0x88fad7c0a8ff07f2ULL, "foobar");
    uint64_t h = AH_FNV1A64_OFFSET;
    for (const char *c = "foobar"; *c; c++) h = ah_fnv1a64_mix(h, (uint8_t)*c);
    CHECK(h == 0x88fad7c0a8ff07f2ULL, "step by step");
}

static void test_index(void) {
    static const char *const names[] = {"uniform", "batch-balanced"};
    CHECK_EQ_I64(ah_str_index("uniform", names, 2), 0);
    CHECK_EQ_I64(ah_str_index("batch-balanced", names, 2), 1);
    CHECK_EQ_I64(ah_str_index("batch", names, 2), -1);
    CHECK_EQ_I64(ah_str_index("", names, 2), -1);
}

/* The status words of files other programs read (runtime/protocol.h's failed.json), both ways. */
static void test_status_key(void) {
    for (int c = AH_OK; c <= AH_ERR_INTERRUPTED; c++)
        CHECK(ah_status_of_key(ah_status_key((ah_status_t)c)) == (ah_status_t)c, "status %d round trip", c);
    CHECK(strcmp(ah_status_key(AH_ERR_INVALID), "invalid") == 0, "invalid");
    CHECK(strcmp(ah_status_key(AH_ERR_COMM), "comm") == 0, "comm");
    CHECK(ah_status_of_key("no-such") == AH_ERR_INTERNAL, "an unknown word");
    CHECK(ah_status_of_key(NULL) == AH_ERR_INTERNAL, "no word");
}

int main(void) {
    test_str_fixed();
    test_status_key();
    test_index();
    test_grow();
    test_fs();
    test_fnv1a();
    return ah_test_finish();
}
