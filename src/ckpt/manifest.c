/* The checkpoint manifest (declared in ckpt/ckpt.h): manifest.json to and from its in-memory form,
 * load and atomic save, lookup of a file by name. from_json checks every key, type and range and
 * names the place of the first error (path.files[3].crc32c ...); file names and the node name must
 * pass ah_ckpt_name_ok; the files come back sorted by name, a name listed twice refused.
 * Ownership: a manifest owns its file array (ah_ckpt_manifest_free; from_json frees it on error).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/afile.h"
#include "ckpt/ckpt.h"
#include "core/json.h"

static int cmp_file(const void *a, const void *b) {
    return strcmp(((const ah_ckpt_file_t *)a)->name, ((const ah_ckpt_file_t *)b)->name);
}

json_t *ah_ckpt_manifest_to_json(const ah_ckpt_manifest_t *m) {
    char rng[2 * AH_CKPT_RNG_MAX + 1];
    for (int i = 0; i < m->meta.rng_len; i++) snprintf(rng + 2 * i, 3, "%02x", m->meta.rng[i]);
    rng[2 * m->meta.rng_len] = '\0';
    json_t *files = json_array();
    for (int i = 0; i < m->n_files; i++) {
        char crc[9];
        snprintf(crc, sizeof crc, "%08x", m->files[i].crc32c);
        json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "name", m->files[i].name, "bytes",
                                               (json_int_t)m->files[i].bytes, "crc32c", crc));
    }
    json_t *doc = json_pack("{s:s, s:i, s:I, s:I, s:s, s:s, s:s, s:s, s:o}", "format",
                            "autohet-checkpoint", "version", 1, "step", (json_int_t)m->meta.step,
                            "data_position", (json_int_t)m->meta.data_position, "rng", rng,
                            "plan_hash", m->meta.plan_hash, "node", m->meta.node, "checksum",
                            "crc32c", "files", files);
    if (doc && m->meta.seq_len > 0) json_object_set_new(doc, "seq_len", json_integer((json_int_t)m->meta.seq_len));
    if (doc && m->meta.has_model) json_object_set_new(doc, "model", ah_model_to_json(&m->meta.model));
    if (doc && m->meta.data[0]) json_object_set_new(doc, "data", json_loads(m->meta.data, 0, NULL));
    if (doc && m->meta.sched_steps > 0)
        json_object_set_new(doc, "schedule",
                            json_pack("{s:I, s:I, s:f}", "steps", (json_int_t)m->meta.sched_steps, "warmup",
                                      (json_int_t)m->meta.sched_warmup, "lr", m->meta.sched_lr));
    return doc;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The manifest's optional "schedule" into mt->sched_* (left 0 when absent). */
static ah_status_t schedule_from_json(const json_t *doc, const char *where, ah_ckpt_meta_t *mt, ah_error_t *err) {
    static const char *const KEYS[] = {"steps", "warmup", "lr", NULL};
    json_t *sch = NULL;
    char sw[600];
    snprintf(sw, sizeof sw, "%s.schedule", where);
    ah_status_t st = ah_json_get_typed(doc, where, "schedule", JSON_OBJECT, false, &sch, err);
    if (st != AH_OK || !sch) return st;
    if (ah_json_check_keys(sch, sw, KEYS, err) ||
        ah_json_get_int(sch, sw, "steps", true, 1, INT64_MAX, &mt->sched_steps, err) ||
        ah_json_get_int(sch, sw, "warmup", true, 0, INT64_MAX, &mt->sched_warmup, err) ||
        ah_json_get_num(sch, sw, "lr", true, 0, 1e30, &mt->sched_lr, err))
        return err->code;
    return AH_OK;
}

/* One entry of a manifest's "files" (fw: its place, for errors). */
static ah_status_t file_from_json(const json_t *f, const char *fw, ah_ckpt_file_t *e, ah_error_t *err) {
    static const char *const FKEYS[] = {"name", "bytes", "crc32c", NULL};
    char crc[16];
    int64_t bytes;
    if (ah_json_expect_object(f, fw, err) != AH_OK || ah_json_check_keys(f, fw, FKEYS, err) ||
        ah_json_get_str(f, fw, "name", true, e->name, sizeof e->name, err) ||
        ah_json_get_int(f, fw, "bytes", true, 0, INT64_MAX, &bytes, err) ||
        ah_json_get_str(f, fw, "crc32c", true, crc, sizeof crc, err))
        return err->code;
    if (!ah_ckpt_name_ok(e->name))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.name: \"%s\" is not a valid file name ([A-Za-z0-9._-], not starting with '.')", fw,
                            e->name);
    uint32_t c = 0;
    bool ok = strlen(crc) == 8;
    for (int k = 0; ok && k < 8; k++) {
        int h = hexval(crc[k]);
        ok = h >= 0;
        c = c << 4 | (uint32_t)(h < 0 ? 0 : h);
    }
    if (!ok) return ah_error_set(err, AH_ERR_INVALID, "%s.crc32c: expected 8 hex digits, got \"%s\"", fw, crc);
    e->bytes = (uint64_t)bytes;
    e->crc32c = c;
    return AH_OK;
}

ah_status_t ah_ckpt_manifest_from_json(const json_t *doc, const char *where, ah_ckpt_manifest_t *out,
                                       ah_error_t *err) {
    memset(out, 0, sizeof *out);
    static const char *const KEYS[] = {"format", "version", "step", "data_position", "rng", "plan_hash", "node",
                                       "checksum", "files", "seq_len", "model", "data", "schedule", NULL};
    if (ah_json_expect_object(doc, where, err) != AH_OK || ah_json_check_keys(doc, where, KEYS, err) != AH_OK)
        return err->code;
    char fmt[32], sum[16], rng[2 * AH_CKPT_RNG_MAX + 1];
    int64_t version;
    ah_ckpt_meta_t *mt = &out->meta;
    if (ah_json_get_str(doc, where, "format", true, fmt, sizeof fmt, err) ||
        ah_json_get_int(doc, where, "version", true, 1, 1, &version, err) ||
        ah_json_get_int(doc, where, "step", true, 0, INT64_MAX, &mt->step, err) ||
        ah_json_get_int(doc, where, "data_position", true, 0, INT64_MAX, &mt->data_position, err) ||
        ah_json_get_int(doc, where, "seq_len", false, 1, INT64_MAX, &mt->seq_len, err) ||
        ah_json_get_str(doc, where, "rng", true, rng, sizeof rng, err) ||
        ah_json_get_str(doc, where, "plan_hash", true, mt->plan_hash, sizeof mt->plan_hash, err) ||
        ah_json_get_str(doc, where, "node", true, mt->node, sizeof mt->node, err) ||
        ah_json_get_str(doc, where, "checksum", true, sum, sizeof sum, err))
        return err->code;
    if (strcmp(fmt, "autohet-checkpoint") != 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.format: expected \"autohet-checkpoint\", got \"%s\"",
                            where, fmt);
    if (strcmp(sum, "crc32c") != 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s.checksum: expected \"crc32c\", got \"%s\"", where, sum);
    size_t rl = strlen(rng);
    if (rl % 2) return ah_error_set(err, AH_ERR_INVALID, "%s.rng: odd number of hex digits", where);
    for (size_t i = 0; i < rl; i += 2) {
        int hi = hexval(rng[i]), lo = hexval(rng[i + 1]);
        if (hi < 0 || lo < 0)
            return ah_error_set(err, AH_ERR_INVALID, "%s.rng: not hex at character %zu", where, i);
        mt->rng[i / 2] = (uint8_t)(hi << 4 | lo);
    }
    mt->rng_len = (int)(rl / 2);
    if (mt->node[0] && !ah_ckpt_name_ok(mt->node))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s.node: \"%s\" is not a valid node name ([A-Za-z0-9._-], not starting with '.')",
                            where, mt->node);
    json_t *model = NULL;
    if (ah_json_get_typed(doc, where, "model", JSON_OBJECT, false, &model, err)) return err->code;
    if (model) {
        char mw[600];
        snprintf(mw, sizeof mw, "%s.model", where);
        if (ah_model_from_json(model, mw, &mt->model, err)) return err->code;
        mt->has_model = true;
    }
    json_t *data = NULL;
    if (ah_json_get_typed(doc, where, "data", JSON_ARRAY, false, &data, err)) return err->code;
    char *text = data ? json_dumps(data, JSON_COMPACT) : NULL;
    const bool fits = !data || (text && strlen(text) < sizeof mt->data);
    if (fits && text) snprintf(mt->data, sizeof mt->data, "%s", text);
    free(text);
    if (!fits) return ah_error_set(err, AH_ERR_INVALID, "%s.data: longer than %d bytes", where, AH_CKPT_DATA_MAX - 1);
    if (schedule_from_json(doc, where, mt, err) != AH_OK) return err->code;
    json_t *files = NULL;
    if (ah_json_get_typed(doc, where, "files", JSON_ARRAY, true, &files, err)) return err->code;
    size_t n = json_array_size(files);
    out->files = calloc(n ? n : 1, sizeof *out->files);
    if (!out->files) return ah_error_set(err, AH_ERR_OOM, "%s: out of memory for %zu files", where, n);
    for (size_t i = 0; i < n; i++) {
        char fw[600];
        snprintf(fw, sizeof fw, "%s.files[%zu]", where, i);
        if (file_from_json(json_array_get(files, i), fw, &out->files[i], err) != AH_OK) goto fail;
        out->n_files++;
    }
    ah_ckpt_manifest_sort(out);
    for (int i = 1; i < out->n_files; i++)
        if (strcmp(out->files[i].name, out->files[i - 1].name) == 0) {
            ah_error_set(err, AH_ERR_INVALID, "%s.files: \"%s\" listed twice", where, out->files[i].name);
            goto fail;
        }
    return AH_OK;
fail:
    ah_ckpt_manifest_free(out);
    return err->code;
}

ah_status_t ah_ckpt_manifest_load(const char *path, ah_ckpt_manifest_t *out, ah_error_t *err) {
    json_t *doc;
    memset(out, 0, sizeof *out);
    if (ah_json_load_file(path, &doc, err) != AH_OK) return err->code;
    ah_status_t st = ah_ckpt_manifest_from_json(doc, path, out, err);
    json_decref(doc);
    return st;
}

ah_status_t ah_ckpt_manifest_save(const ah_ckpt_manifest_t *m, const char *path, ah_error_t *err) {
    json_t *doc = ah_ckpt_manifest_to_json(m);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(doc);
    if (!text) return ah_error_set(err, AH_ERR_OOM, "%s: out of memory serialising the manifest", path);
    ah_afile_t f;
    ah_status_t st = ah_afile_open(&f, path, err);
    if (st == AH_OK) st = ah_afile_write(&f, text, strlen(text), err);
    if (st == AH_OK) st = ah_afile_write(&f, "\n", 1, err);
    if (st == AH_OK) st = ah_afile_commit(&f, true, err);
    else ah_afile_abort(&f);
    free(text);
    return st;
}

void ah_ckpt_manifest_sort(ah_ckpt_manifest_t *m) {
    if (m->n_files > 1) qsort(m->files, (size_t)m->n_files, sizeof *m->files, cmp_file);
}

const ah_ckpt_file_t *ah_ckpt_manifest_find(const ah_ckpt_manifest_t *m, const char *name) {
    ah_ckpt_file_t key;
    snprintf(key.name, sizeof key.name, "%s", name);
    if (m->n_files == 0) return NULL; /* bsearch must not get a NULL base */
    return bsearch(&key, m->files, (size_t)m->n_files, sizeof *m->files, cmp_file);
}

void ah_ckpt_manifest_free(ah_ckpt_manifest_t *m) {
    free(m->files);
    m->files = NULL;
    m->n_files = 0;
}
