/* libFuzzer harness: a token file's header, as `autohet train --data` reads each shard
 * (runtime/data.h, ah_tokens_parse_header).
 *
 * Input: the bytes of the file (its size is the file size). Beyond "no crash, no leak, no
 * undefined behaviour", on every file the parser accepts it checks the promises the mapped reader
 * relies on: the width is 2 or 4 and matches the magic, the count is >= 1, and the header plus
 * count tokens is exactly the file; every refusal names the file.
 * Seeds: tests/corpus/tokens/. Run: scripts/run-fuzzers.sh tokens.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) {
    fprintf(stderr, "accepted header breaks a promise: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int width = 0;
    int64_t count = 0;
    ah_error_t err;
    if (ah_tokens_parse_header(data, size, size, "fuzz.bin", &width, &count, &err) != AH_OK) {
        if (!strstr(err.msg, "fuzz.bin")) fail("error message does not name the file");
        return 0;
    }
    int32_t magic;
    memcpy(&magic, data, sizeof magic);
    if (!((width == 2 && magic == AH_TOKENS_MAGIC) || (width == 4 && magic == AH_TOKENS32_MAGIC)))
        fail("width does not match the magic");
    if (count < 1) fail("count below 1");
    if ((uint64_t)AH_TOKENS_HEADER_BYTES + (uint64_t)count * (uint64_t)width != size)
        fail("header + count tokens is not the file size");
    return 0;
}
