/* libFuzzer harness: a checkpoint manifest (ROOT/step-N/manifest.json), as resume, `autohet ckpt
 * ls|verify|export` and the cloud scan read it (ckpt/ckpt.h).
 *
 * Input: the bytes of the file. Beyond "no crash, no leak, no undefined behaviour", it checks on
 * every manifest the parser accepts: its files are sorted by name, unique, with names that may
 * become paths, and each is found by ah_ckpt_manifest_find; its written form reads back into
 * the same manifest (every field, the model's too) and writes out the same text (nothing is
 * dropped or changed between save and load). A refusal names the file.
 * Seeds: tests/corpus/manifest/. Run: scripts/run-fuzzers.sh manifest.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "core/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_manifest: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static bool same(const ah_ckpt_manifest_t *a, const ah_ckpt_manifest_t *b) {
    const ah_ckpt_meta_t *x = &a->meta, *y = &b->meta;
    if (x->step != y->step || x->data_position != y->data_position || x->rng_len != y->rng_len ||
        memcmp(x->rng, y->rng, (size_t)x->rng_len) != 0 || strcmp(x->plan_hash, y->plan_hash) != 0 ||
        strcmp(x->node, y->node) != 0 || x->has_model != y->has_model ||
        (x->has_model && !ah_model_equal(&x->model, &y->model)) || a->n_files != b->n_files)
        return false;
    for (int i = 0; i < a->n_files; i++)
        if (strcmp(a->files[i].name, b->files[i].name) != 0 || a->files[i].bytes != b->files[i].bytes ||
            a->files[i].crc32c != b->files[i].crc32c)
            return false;
    return true;
}

static char *dump(const ah_ckpt_manifest_t *m) {
    json_t *doc = ah_ckpt_manifest_to_json(m);
    char *text = doc ? json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) fail("manifest_to_json failed", NULL);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_error_t err;
    json_t *doc = NULL;
    if (ah_json_load_string((const char *)data, size, "manifest.json", &doc, &err) != AH_OK) return 0;
    ah_ckpt_manifest_t m;
    if (ah_ckpt_manifest_from_json(doc, "manifest.json", &m, &err) != AH_OK) {
        if (!strstr(err.msg, "manifest.json")) fail("refusal does not name the file", err.msg);
        json_decref(doc);
        return 0;
    }
    json_decref(doc);
    for (int i = 0; i < m.n_files; i++) {
        const ah_ckpt_file_t *f = &m.files[i];
        if (!ah_ckpt_name_ok(f->name)) fail("accepted a file name that is not a safe path", f->name);
        if (i && strcmp(m.files[i - 1].name, f->name) >= 0) fail("files not sorted and unique", f->name);
        if (ah_ckpt_manifest_find(&m, f->name) != f) fail("find does not find the file", f->name);
    }
    if (m.meta.rng_len < 0 || m.meta.rng_len > AH_CKPT_RNG_MAX) fail("rng length out of range", NULL);
    char *first = dump(&m);
    json_t *again = json_loads(first, 0, NULL);
    ah_ckpt_manifest_t back;
    if (!again || ah_ckpt_manifest_from_json(again, "written manifest", &back, &err) != AH_OK)
        fail("the written manifest does not read back", again ? err.msg : first);
    if (!same(&m, &back)) fail("the written manifest reads back different", first);
    char *second = dump(&back);
    if (strcmp(first, second) != 0) fail("save/load is not a fixed point", second);
    free(first);
    free(second);
    json_decref(again);
    ah_ckpt_manifest_free(&back);
    ah_ckpt_manifest_free(&m);
    return 0;
}
