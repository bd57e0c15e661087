/* ckpt/import_hf.h without MPI or a trainer: the 16-bit conversions (F16 exhaustively against
 * its definition, BF16 by bits), and a GPT-2 directory written here whose every element is its own
 * index in the file's layout, read into TP shards: each element of each shard must be the file's
 * element ah_tensor_full_index names (through the Conv1D transpose), padding 0; and a config that
 * differs, named. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/import_hf.h"
#include "ckpt/safetensors.h"
#include "core/json.h"
#include "harness.h"

static void test_f16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
        const float got = ah_f16_to_f32((uint16_t)h);
        double want = exp == 0 ? ldexp(man, -24) : ldexp(1024 + man, exp - 25);
        if (exp == 31) want = man ? NAN : INFINITY;
        if (sign) want = -want;
        const bool ok = exp == 31 && man ? isnan(got) && !!signbit(got) == sign
                                         : (double)got == want && !!signbit(got) == sign;
        bad += !ok;
        if (!ok && bad < 5) CHECK(false, "f16 0x%04x: %.9g, want %.9g", h, got, want);
    }
    CHECK(bad == 0, "%d of 65536 half values convert wrongly", bad);
    CHECK(ah_bf16_to_f32(0x3f80) == 1.0f && ah_bf16_to_f32(0xc040) == -3.0f, "bf16 1, -3");
    CHECK(isinf(ah_bf16_to_f32(0x7f80)) && ah_bf16_to_f32(0x0001) > 0, "bf16 inf, subnormal");
}

/* DIR/model.safetensors + config.json for model m: element j of each file tensor is 1000*i + j
 * (i the tensor's index, j the element's flat index in the file's layout), but element 7 of tensor
 * bad (-1: none), which is bad_value. */
static void write_dir(const char *dir, const ah_model_t *m, int bad, float bad_value) {
    const int n = ah_model_tensor_count(m);
    ah_tensor_t *defs = calloc((size_t)n, sizeof *defs);
    ah_st_tensor_t *ts = calloc((size_t)n, sizeof *ts);
    char (*names)[128] = calloc((size_t)n, sizeof *names);
    float **data = calloc((size_t)n, sizeof *data);
    ah_model_tensors(m, defs);
    for (int i = 0; i < n; i++) {
        const ah_tensor_t *d = &defs[i];
        ah_tensor_hf_name(d, names[i], sizeof names[i]);
        data[i] = malloc((size_t)ah_tensor_elems(d) * sizeof **data);
        for (int64_t j = 0; j < ah_tensor_elems(d); j++) data[i][j] = (float)(1000 * i + j);
        if (i == bad) data[i][7] = bad_value;
        const bool tr = d->spec->hf_transposed;
        ts[i] = (ah_st_tensor_t){.name = names[i], .dtype = AH_DTYPE_F32, .ndim = d->cols == 1 ? 1 : 2,
                                 .data = data[i]};
        ts[i].shape[0] = tr ? d->cols : d->rows;
        ts[i].shape[1] = tr ? d->rows : d->cols;
    }
    char path[512];
    ah_error_t err;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(ah_st_save(path, ts, n, NULL, NULL, NULL, &err) == AH_OK, "save: %s", err.msg);
    json_t *cfg = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "model_type", "gpt2", "n_layer",
                            (json_int_t)m->n_layer, "n_embd", (json_int_t)m->d_model, "n_head", (json_int_t)m->n_head,
                            "vocab_size", (json_int_t)m->vocab, "n_positions", (json_int_t)m->max_pos,
                            "tie_word_embeddings", m->tied);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(ah_json_save_file(cfg, path, &err) == AH_OK, "config: %s", err.msg);
    json_decref(cfg);
    for (int i = 0; i < n; i++) free(data[i]);
    free(data);
    free(names);
    free(ts);
    free(defs);
}

static void test_shards(void) {
    char dir[] = "/tmp/ah_import_hf_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_preset("tiny-gpt2", &m, &err) == AH_OK, "preset");
    m.vocab = 200; /* padded to 256 rows at TP 1, 512 at TP 4 */
    write_dir(dir, &m, -1, 0);
    ah_hf_import_t h;
    CHECK(ah_hf_import_open(dir, &m, &h, &err) == AH_OK, "open: %s", err.msg);
    int bad = 0;
    for (int t = 1; t <= 4; t *= 2)
        for (int k = 0; k < t; k++)
            for (int i = 0; i < h.n_tensors; i++) {
                const ah_tensor_t *d = &h.defs[i];
                const int64_t n = ah_tensor_shard_elems(d, t);
                float *buf = malloc((size_t)n * sizeof *buf);
                CHECK(ah_hf_import_shard(&h, d, t, k, buf, n, &err) == AH_OK, "%s: %s", d->name, err.msg);
                for (int64_t e = 0; e < n; e++) {
                    const int64_t f = ah_tensor_full_index(d, t, k, e);
                    const int64_t fi = f < 0 ? -1 : d->spec->hf_transposed ? (f % d->cols) * d->rows + f / d->cols : f;
                    const float want = f < 0 ? 0.0f : (float)(1000 * i + fi);
                    if (buf[e] != want && bad++ < 5)
                        CHECK(false, "%s tp %d/%d [%lld] = %g, want %g", d->name, k, t, (long long)e, buf[e], want);
                }
                free(buf);
            }
    CHECK(bad == 0, "%d shard elements wrong", bad);
    ah_hf_import_close(&h);
    ah_model_t other = m;
    other.n_layer = 3;
    CHECK_ERR(ah_hf_import_open(dir, &other, &h, &err), AH_ERR_INVALID, err, "n_layer is 4 but the plan's model");
    /* model.safetensors beside an index: which one a loader reads is not clear; refused */
    char path[512], index[512];
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    FILE *f = fopen(index, "w");
    CHECK(f && fputs("{\"weight_map\": {}}", f) >= 0 && fclose(f) == 0, "write %s", index);
    CHECK_ERR(ah_hf_import_open(dir, &m, &h, &err), AH_ERR_INVALID, err, "model.safetensors.index.json are here");
    CHECK(strstr(err.msg, "model.safetensors and") && strstr(err.msg, "remove one of them"), "names both: %s", err.msg);
    unlink(index);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    CHECK_ERR(ah_hf_import_open(dir, &m, &h, &err), AH_ERR_IO, err, "no model.safetensors");
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

/* A NaN or an infinity in a weight is refused when the tensor is read, naming the file, the tensor
 * and the element (training would otherwise fail later, on a non-finite loss of another stage). */
static void test_nonfinite(void) {
    char dir[] = "/tmp/ah_import_hf_XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_preset("tiny-gpt2", &m, &err) == AH_OK, "preset");
    const float bad[] = {NAN, -INFINITY};
    for (int b = 0; b < 2; b++) {
        write_dir(dir, &m, 3, bad[b]);
        ah_hf_import_t h;
        CHECK(ah_hf_import_open(dir, &m, &h, &err) == AH_OK, "open: %s", err.msg);
        const ah_tensor_t *d = &h.defs[3];
        const int64_t n = ah_tensor_shard_elems(d, 1);
        float *buf = malloc((size_t)n * sizeof *buf);
        char name[128], want[300];
        ah_tensor_hf_name(d, name, sizeof name);
        snprintf(want, sizeof want, "%s/model.safetensors: tensor \"%s\" holds %s at element 7", dir, name,
                 b ? "-inf" : "nan");
        CHECK_ERR(ah_hf_import_shard(&h, d, 1, 0, buf, n, &err), AH_ERR_INVALID, err, want);
        CHECK(ah_hf_import_shard(&h, &h.defs[2], 1, 0, buf, ah_tensor_shard_elems(&h.defs[2], 1), &err) == AH_OK,
              "another tensor reads: %s", err.msg);
        free(buf);
        ah_hf_import_close(&h);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    test_f16();
    test_shards();
    test_nonfinite();
    return ah_test_finish();
}
