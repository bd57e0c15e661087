/* libFuzzer harness: an S3 ListObjectsV2 response page, as `ah_s3_list` (the cloud tier's scan of
 * a bucket for checkpoints) reads it, and the Code/Message of an S3 error body (ckpt/s3.h).
 *
 * Input: the bytes of the response body (NUL-terminated here, as the HTTP reader hands it over).
 * The page is parsed twice into one list, as two pages of one listing are. Beyond "no crash, no
 * leak, no undefined behaviour", it checks: the second page adds as many objects as the first;
 * keys are terminated and sizes are file sizes (< 2^63; "-5" is not 2^64 - 5); a page that says more follow gives a non-empty continuation token (with
 * an empty one, ah_s3_list would ask for the first page again, for ever); a refusal names the
 * listing.
 * Seeds: tests/corpus/s3_list/. Run: scripts/run-fuzzers.sh s3_list.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char WHAT[] = "s3://bucket/prefix";

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_s3_list: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void error_body(const char *xml) {
    char code[128], msg[512];
    const char *pos = NULL;
    if (ah_s3_xml_next(xml, &pos, "Code", code, sizeof code) && !memchr(code, 0, sizeof code))
        fail("Code not terminated", NULL);
    pos = NULL;
    if (ah_s3_xml_next(xml, &pos, "Message", msg, sizeof msg) && !memchr(msg, 0, sizeof msg))
        fail("Message not terminated", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *xml = malloc(size + 1);
    if (!xml) return 0;
    memcpy(xml, data, size);
    xml[size] = '\0';
    ah_s3_object_t *objs = NULL;
    int n = 0, cap = 0;
    ah_error_t err;
    for (int page = 0; page < 2; page++) {
        bool more = true;
        char token[2048] = "x";
        const int before = n;
        if (ah_s3_list_page(xml, size, WHAT, &objs, &n, &cap, &more, token, sizeof token, &err) != AH_OK) {
            if (!strstr(err.msg, WHAT)) fail("refusal does not name the listing", err.msg);
            break;
        }
        if (n > cap || (page == 1 && n != 2 * before)) fail("object count wrong", NULL);
        if (more && !token[0]) fail("more pages follow, but the continuation token is empty", NULL);
        for (int i = before; i < n; i++)
            if (!memchr(objs[i].key, 0, sizeof objs[i].key) || objs[i].size > INT64_MAX)
                fail("key not terminated or size past 2^63 - 1 (a file size)", objs[i].key);
    }
    error_body(xml);
    free(objs);
    free(xml);
    return 0;
}
