/* libFuzzer harness: a safetensors file, as checkpoint restore and `autohet ckpt verify` read it.
 *
 * Input: the bytes of the file. Beyond "no crash, no leak, no undefined behaviour", on every file
 * the parser accepts it checks the promises readers rely on: entries sorted by offset tile the
 * data section exactly, each range holds shape x dtype bytes, names are unique and non-empty, and
 * lookup by name finds each entry.
 * Seeds: tests/corpus/safetensors/. Run: scripts/run-fuzzers.sh safetensors.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *name) {
    fprintf(stderr, "accepted file breaks a promise: %s (tensor \"%s\")\n", what, name);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_st_file_t f;
    ah_error_t err;
    if (ah_st_parse(data, size, "fuzz.safetensors", &f, &err) != AH_OK) {
        if (!strstr(err.msg, "fuzz.safetensors")) fail("error message does not name the file", "");
        return 0;
    }
    uint64_t at = 0;
    for (int i = 0; i < f.n; i++) {
        const ah_st_entry_t *e = &f.entries[i];
        uint64_t nb = ah_dtype_size(e->dtype);
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] < 0) fail("negative dimension", e->name);
            if (__builtin_mul_overflow(nb, (uint64_t)e->shape[d], &nb)) fail("size overflows", e->name);
        }
        if (e->begin != at || e->end < e->begin || e->end - e->begin != nb) fail("ranges do not tile", e->name);
        if (!e->name[0] || ah_st_find(&f, e->name) != e) fail("name empty or not unique", e->name);
        at = e->end;
    }
    if (f.data_start + at != size) fail("data section not covered exactly", "");
    ah_st_close(&f);
    return 0;
}
