/* libFuzzer harness: model.safetensors.index.json, as `autohet train --init-from DIR` reads a
 * sharded Hugging Face directory (ckpt/import_hf.h).
 *
 * Input: the bytes of the index. The directory around it is fixed, made once: config.json of a
 * 2-layer tiny-gpt2 and its tensors in two shards, model-00001-of-00002.safetensors (the first
 * half, in canonical order) and model-00002-of-00002.safetensors (the rest). ah_hf_import_open
 * reads the index, opens what it names and checks index, headers and model against each other.
 * Beyond "no crash, no leak, no undefined behaviour", it checks: a refusal names the directory;
 * an accepted index maps every tensor of the model to an entry of an open file, by its name.
 * Seeds: tests/corpus/hf_index/. Run: scripts/run-fuzzers.sh hf_index.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/import_hf.h"
#include "ckpt/safetensors.h"
#include "core/json.h"
#include "input_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ah_model_t g_model;

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_hf_index: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

/* Tensors [from, to) of the model as one shard file, zeros, in Hugging Face shapes and names. */
static void write_shard(const char *name, const ah_tensor_t *defs, int from, int to) {
    ah_st_tensor_t ts[64];
    char names[64][AH_ST_NAME_MAX];
    float *zeros[64];
    if (to - from > 64) fail("too many tensors for one shard", name);
    for (int i = from; i < to; i++) {
        const ah_tensor_t *d = &defs[i];
        const bool tr = d->spec->hf_transposed;
        ah_tensor_hf_name(d, names[i - from], sizeof names[0]);
        if (!(zeros[i - from] = calloc((size_t)ah_tensor_elems(d), sizeof(float)))) fail("out of memory", NULL);
        ts[i - from] = (ah_st_tensor_t){.name = names[i - from], .dtype = AH_DTYPE_F32,
                                        .ndim = d->cols == 1 ? 1 : 2, .data = zeros[i - from]};
        ts[i - from].shape[0] = tr ? d->cols : d->rows;
        ts[i - from].shape[1] = tr ? d->rows : d->cols;
    }
    char path[1024];
    ah_error_t err;
    snprintf(path, sizeof path, "%s/%s", ah_fuzz_input_dir(), name);
    if (ah_st_save(path, ts, to - from, NULL, NULL, NULL, &err) != AH_OK) fail("writing a shard", err.msg);
    for (int i = 0; i < to - from; i++) free(zeros[i]);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    ah_error_t err;
    if (ah_model_preset("tiny-gpt2", &g_model, &err) != AH_OK) fail("preset", err.msg);
    g_model.n_layer = 2;
    const int n = ah_model_tensor_count(&g_model);
    ah_tensor_t *defs = calloc((size_t)n, sizeof *defs);
    if (!defs) fail("out of memory", NULL);
    ah_model_tensors(&g_model, defs);
    write_shard("model-00001-of-00002.safetensors", defs, 0, n / 2);
    write_shard("model-00002-of-00002.safetensors", defs, n / 2, n);
    free(defs);
    char cfg[512];
    int len = snprintf(cfg, sizeof cfg,
                       "{\"model_type\": \"gpt2\", \"n_layer\": %d, \"n_embd\": %d, \"n_head\": %d, "
                       "\"vocab_size\": %lld, \"n_positions\": %lld, \"tie_word_embeddings\": %s}\n",
                       (int)g_model.n_layer, (int)g_model.d_model, (int)g_model.n_head,
                       (long long)g_model.vocab, (long long)g_model.max_pos, g_model.tied ? "true" : "false");
    ah_fuzz_input_file("config.json", (const uint8_t *)cfg, (size_t)len);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_fuzz_input_file("model.safetensors.index.json", data, size);
    const char *dir = ah_fuzz_input_dir();
    ah_hf_import_t h;
    ah_error_t err;
    if (ah_hf_import_open(dir, &g_model, &h, &err) != AH_OK) {
        if (!strstr(err.msg, dir)) fail("refusal does not name the directory", err.msg);
        return 0;
    }
    if (h.n_files < 1 || h.n_files > 2) fail("file count out of range", NULL);
    for (int i = 0; i < h.n_tensors; i++) {
        const ah_hf_found_t *f = &h.found[i];
        if (f->file < 0 || f->file >= h.n_files || !f->e) fail("tensor not mapped", h.defs[i].name);
        if (ah_st_find(&h.files[f->file], f->e->name) != f->e) fail("mapped entry not in its file", h.defs[i].name);
    }
    ah_hf_import_close(&h);
    return 0;
}
