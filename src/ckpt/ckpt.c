#include "ckpt/ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "core/fs.h"

/* ---- names ----------------------------------------------------------------------------------- */

int ah_ckpt_shard_name(char *buf, size_t cap, ah_shard_kind_t kind, int layer, int tp, int tp_index) {
    if (tp < 1 || tp_index < 0 || tp_index >= tp) return -1;
    int n;
    switch (kind) {
    case AH_SHARD_EMBED: n = snprintf(buf, cap, "embed.tp%d-%d.safetensors", tp, tp_index); break;
    case AH_SHARD_HEAD: n = snprintf(buf, cap, "head.tp%d-%d.safetensors", tp, tp_index); break;
    case AH_SHARD_BLOCK:
        if (layer < 0) return -1;
        n = snprintf(buf, cap, "block-%03d.tp%d-%d.safetensors", layer, tp, tp_index);
        break;
    default: return -1;
    }
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

bool ah_ckpt_shard_parse(const char *name, ah_shard_kind_t *kind, int *layer, int *tp, int *tp_index) {
    int l = -1, t, i, end = 0;
    ah_shard_kind_t k;
    if (sscanf(name, "block-%d.tp%d-%d.safetensors%n", &l, &t, &i, &end) == 3 && end > 0) k = AH_SHARD_BLOCK;
    else if (sscanf(name, "embed.tp%d-%d.safetensors%n", &t, &i, &end) == 2 && end > 0) k = AH_SHARD_EMBED;
    else if (sscanf(name, "head.tp%d-%d.safetensors%n", &t, &i, &end) == 2 && end > 0) k = AH_SHARD_HEAD;
    else return false;
    /* Only the exact form ah_ckpt_shard_name writes ("block-3" or "+3" would alias files). */
    char back[AH_CKPT_NAME_MAX];
    if (name[end] != '\0' || ah_ckpt_shard_name(back, sizeof back, k, l, t, i) < 0 || strcmp(back, name) != 0)
        return false;
    *kind = k;
    *layer = k == AH_SHARD_BLOCK ? l : -1;
    *tp = t;
    *tp_index = i;
    return true;
}

bool ah_ckpt_name_ok(const char *name) {
    size_t n = strlen(name);
    if (n == 0 || n >= AH_CKPT_NAME_MAX || name[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok) return false;
    }
    return true;
}

int ah_ckpt_step_dir(char *buf, size_t cap, const char *root, int64_t step) {
    int n = snprintf(buf, cap, "%s/step-%08lld", root, (long long)step);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

int64_t ah_ckpt_parse_step_dir(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    const char *d = name + 5;
    size_t n = strlen(d);
    if (n < 8 || n > 18) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (d[i] < '0' || d[i] > '9') return -1;
        v = v * 10 + (d[i] - '0');
    }
    char back[32];
    snprintf(back, sizeof back, "%08lld", (long long)v);
    return strcmp(back, d) == 0 ? v : -1;
}

/* ---- writing --------------------------------------------------------------------------------- */

struct ah_ckpt_writer {
    char dir[AH_CKPT_PATH_MAX];
    int64_t step;
    pthread_mutex_t mu; /* guards n, cap, files: shards may be written from several threads */
    int n, cap;
    ah_ckpt_file_t *files;
    bool extend;                 /* ah_ckpt_writer_extend: the step is committed, `committed` its manifest */
    ah_ckpt_manifest_t committed;
};

static bool file_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

ah_status_t ah_ckpt_writer_begin(const char *root, int64_t step, ah_ckpt_writer_t **out,
                                 ah_error_t *err) {
    *out = NULL;
    if (step < 0) return ah_error_set(err, AH_ERR_INVALID, "checkpoint step %lld must be >= 0", (long long)step);
    ah_ckpt_writer_t *w = calloc(1, sizeof *w);
    if (!w) return ah_error_set(err, AH_ERR_OOM, "out of memory for a checkpoint writer");
    w->step = step;
    pthread_mutex_init(&w->mu, NULL);
    char man[AH_CKPT_PATH_MAX];
    if (ah_ckpt_step_dir(w->dir, sizeof w->dir, root, step) < 0 ||
        snprintf(man, sizeof man, "%s/%s", w->dir, AH_CKPT_MANIFEST) >= (int)sizeof man) {
        ah_ckpt_writer_free(w);
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    }
    if (ah_fs_mkdirs(w->dir, err) != AH_OK) {
        ah_ckpt_writer_free(w);
        return ah_error_prefix(err, "cannot start checkpoint of step %lld", (long long)step);
    }
    /* Rewriting files of a committed step could break it if this writer dies half way. */
    if (file_exists(man)) {
        ah_error_set(err, AH_ERR_INVALID,
                     "%s: step %lld is already committed; save a later step, or remove that "
                     "directory first",
                     w->dir, (long long)step);
        ah_ckpt_writer_free(w);
        return err->code;
    }
    *out = w;
    return AH_OK;
}

ah_status_t ah_ckpt_writer_extend(const char *root, int64_t step, ah_ckpt_writer_t **out, ah_error_t *err) {
    *out = NULL;
    ah_ckpt_writer_t *w = calloc(1, sizeof *w);
    if (!w) return ah_error_set(err, AH_ERR_OOM, "out of memory for a checkpoint writer");
    w->step = step;
    w->extend = true;
    pthread_mutex_init(&w->mu, NULL);
    ah_status_t st = ah_ckpt_step_dir(w->dir, sizeof w->dir, root, step) < 0
                         ? ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root)
                         : ah_ckpt_load(root, step, &w->committed, err);
    if (st != AH_OK) {
        ah_ckpt_writer_free(w);
        return ah_error_prefix(err, "cannot add files to step %lld", (long long)step);
    }
    ah_ckpt_manifest_sort(&w->committed); /* for ah_ckpt_manifest_find */
    *out = w;
    return AH_OK;
}

/* Under w->mu: NAME's size and CRC in the writer's list (replacing an earlier write of it). */
static ah_status_t record_file(ah_ckpt_writer_t *w, const char *name, uint64_t bytes, uint32_t crc, ah_error_t *err) {
    ah_ckpt_file_t *e = NULL;
    for (int i = 0; i < w->n && !e; i++)
        if (strcmp(w->files[i].name, name) == 0) e = &w->files[i];
    if (!e && w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        ah_ckpt_file_t *g = realloc(w->files, (size_t)cap * sizeof *g);
        if (!g) return ah_error_set(err, AH_ERR_OOM, "out of memory for the shard list");
        w->files = g;
        w->cap = cap;
    }
    if (!e) e = &w->files[w->n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->bytes = bytes;
    e->crc32c = crc;
    return AH_OK;
}

ah_status_t ah_ckpt_write_shard(ah_ckpt_writer_t *w, const char *name, const ah_st_tensor_t *tensors,
                                int n, const json_t *metadata, ah_error_t *err) {
    if (!ah_ckpt_name_ok(name) || strcmp(name, AH_CKPT_MANIFEST) == 0 || strncmp(name, "part-", 5) == 0)
        return ah_error_set(err, AH_ERR_INVALID,
                            "shard name \"%s\" is not allowed: use 1..%d characters of [A-Za-z0-9._-], "
                            "not starting with '.', not manifest.json or part-*",
                            name, AH_CKPT_NAME_MAX - 1);
    char path[AH_CKPT_PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", w->dir, name) >= (int)sizeof path)
        return ah_error_set(err, AH_ERR_IO, "%s/%s: path too long", w->dir, name);
    ah_afile_t f;
    if (ah_afile_open(&f, path, err) != AH_OK) return err->code;
    ah_afile_direct(&f); /* shards are large: past the page cache (afile.h) */
    if (ah_st_write(&f, tensors, n, metadata, err) != AH_OK) {
        ah_afile_abort(&f);
        return err->code;
    }
    const ah_ckpt_file_t *listed = w->extend ? ah_ckpt_manifest_find(&w->committed, name) : NULL;
    if (listed) { /* a committed file is never rewritten: the same bytes, or the write fails */
        ah_afile_abort(&f);
        if (f.bytes != listed->bytes || f.crc != listed->crc32c)
            return ah_error_set(err, AH_ERR_INVALID,
                                "%s: step %lld is committed there with other contents (%llu bytes, CRC-32C %08x; "
                                "this write: %llu bytes, %08x); a committed file is never rewritten",
                                path, (long long)w->step, (unsigned long long)listed->bytes, listed->crc32c,
                                (unsigned long long)f.bytes, f.crc);
        if (ah_ckpt_verify_file(path, listed, err) != AH_OK)
            return ah_error_prefix(err, "step %lld is committed there; a committed file is never rewritten",
                                   (long long)w->step);
    } else if (ah_afile_commit(&f, false, err) != AH_OK) { /* the directory: synced once per part (finish_part) */
        return err->code;
    }
    pthread_mutex_lock(&w->mu);
    ah_status_t st = record_file(w, name, f.bytes, f.crc, err);
    pthread_mutex_unlock(&w->mu);
    return st;
}

static int part_path(char *buf, size_t cap, const char *dir, int part) {
    int n = snprintf(buf, cap, "%s/part-%d.json", dir, part);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

ah_status_t ah_ckpt_writer_finish_part(ah_ckpt_writer_t *w, int part, ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    if (part < 0 || part_path(path, sizeof path, w->dir, part) < 0)
        return ah_error_set(err, AH_ERR_INVALID, "%s: bad part number %d", w->dir, part);
    /* The shards' renames must be durable before anything can point at them. */
    if (ah_ckpt_fsync_dir(w->dir, err) != AH_OK) return err->code;
    ah_ckpt_manifest_t m = {.meta = {.step = w->step}, .n_files = w->n, .files = w->files};
    ah_ckpt_manifest_sort(&m);
    return ah_ckpt_manifest_save(&m, path, err);
}

uint64_t ah_ckpt_writer_bytes(const ah_ckpt_writer_t *w) {
    uint64_t n = 0;
    for (int i = 0; i < w->n; i++) n += w->files[i].bytes;
    return n;
}

void ah_ckpt_writer_free(ah_ckpt_writer_t *w) {
    if (!w) return;
    pthread_mutex_destroy(&w->mu);
    if (w->extend) ah_ckpt_manifest_free(&w->committed);
    free(w->files);
    free(w);
}

/* Part p of dir's step merged into *all (cap: its room): every file it lists present with its size, a
 * name listed already (by an earlier part, or by the committed manifest when extending: its first
 * n_committed) with the same size and checksum. */
static ah_status_t merge_part(const char *dir, int p, int n_parts, const ah_ckpt_meta_t *meta, int n_committed,
                              ah_ckpt_manifest_t *all, int *cap, ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    part_path(path, sizeof path, dir, p);
    if (!file_exists(path))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: part %d of %d is missing: a rank did not finish its shards "
                            "(call ah_ckpt_writer_finish_part on every rank before the commit)",
                            path, p, n_parts);
    ah_ckpt_manifest_t part;
    if (ah_ckpt_manifest_load(path, &part, err) != AH_OK) return err->code;
    ah_status_t st = AH_OK;
    if (part.meta.step != meta->step)
        st = ah_error_set(err, AH_ERR_INVALID, "%s: lists step %lld, committing step %lld", path,
                          (long long)part.meta.step, (long long)meta->step);
    for (int i = 0; i < part.n_files && st == AH_OK; i++) {
        const ah_ckpt_file_t *f = &part.files[i];
        char fp[AH_CKPT_PATH_MAX];
        struct stat sb;
        if (ah_ckpt_join(fp, sizeof fp, dir, f->name) < 0 || stat(fp, &sb) != 0 || (uint64_t)sb.st_size != f->bytes) {
            st = ah_error_set(err, AH_ERR_IO, "%s: listed by part %d with %llu bytes but %s", fp, p,
                              (unsigned long long)f->bytes, errno == ENOENT ? "missing" : "its size differs");
            break;
        }
        int k = 0;
        while (k < all->n_files && strcmp(all->files[k].name, f->name) != 0) k++;
        if (k < all->n_files) {
            if (all->files[k].crc32c != f->crc32c || all->files[k].bytes != f->bytes)
                st = ah_error_set(err, AH_ERR_INVALID,
                                  k < n_committed ? "%s: differs from the committed file (CRC-32C %08x vs %08x): a "
                                                    "committed file is never rewritten"
                                                  : "%s: written by two ranks with different contents (CRC-32C "
                                                    "%08x vs %08x): replicas of one shard must be identical, and "
                                                    "only one rank per node should write it",
                                  fp, all->files[k].crc32c, f->crc32c);
            continue;
        }
        if (all->n_files == *cap) {
            const int grown = *cap ? 2 * *cap : 32;
            ah_ckpt_file_t *g = realloc(all->files, (size_t)grown * sizeof *g);
            if (!g) {
                st = ah_error_set(err, AH_ERR_OOM, "out of memory for the manifest");
                break;
            }
            all->files = g;
            *cap = grown;
        }
        all->files[all->n_files++] = *f;
    }
    ah_ckpt_manifest_free(&part);
    return st;
}

/* The commit (ckpt.h): extend, the step committed already (ah_ckpt_commit_more), its manifest's
 * files kept and the parts' added. */
static ah_status_t commit_parts(const char *root, const ah_ckpt_meta_t *meta, int n_parts, bool extend,
                                ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX], man[AH_CKPT_PATH_MAX];
    if (ah_ckpt_step_dir(dir, sizeof dir, root, meta->step) < 0 ||
        snprintf(man, sizeof man, "%s/%s", dir, AH_CKPT_MANIFEST) >= (int)sizeof man)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (n_parts < 1) return ah_error_set(err, AH_ERR_INVALID, "%s: commit needs n_parts >= 1, got %d", dir, n_parts);
    if (meta->rng_len < 0 || meta->rng_len > AH_CKPT_RNG_MAX || (meta->node[0] && !ah_ckpt_name_ok(meta->node)))
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: bad checkpoint metadata (rng_len %d must be 0..%d; node \"%s\" must be "
                            "[A-Za-z0-9._-])",
                            dir, meta->rng_len, AH_CKPT_RNG_MAX, meta->node);
    ah_ckpt_manifest_t all = {.meta = *meta};
    if (!extend && file_exists(man))
        return ah_error_set(err, AH_ERR_INVALID, "%s: step %lld is already committed", dir, (long long)meta->step);
    if (extend && ah_ckpt_load(root, meta->step, &all, err) != AH_OK)
        return ah_error_prefix(err, "cannot add files to step %lld", (long long)meta->step);
    ah_status_t st = AH_OK;
    if (extend && (all.meta.data_position != meta->data_position || all.meta.seq_len != meta->seq_len))
        st = ah_error_set(err, AH_ERR_INVALID,
                          "%s: step %lld is committed there at data position %lld (T %lld), this save's is %lld "
                          "(T %lld): not the same state; a committed step is never rewritten",
                          man, (long long)meta->step, (long long)all.meta.data_position, (long long)all.meta.seq_len,
                          (long long)meta->data_position, (long long)meta->seq_len);
    all.meta = *meta; /* the newer plan's hash: its files are all listed now */
    const int n_committed = all.n_files;
    int cap = all.n_files;
    for (int p = 0; p < n_parts && st == AH_OK; p++)
        st = merge_part(dir, p, n_parts, meta, n_committed, &all, &cap, err);
    if (st == AH_OK) {
        ah_ckpt_manifest_sort(&all);
        st = ah_ckpt_manifest_save(&all, man, err); /* atomic: the old manifest or this one */
        if (st != AH_OK) ah_error_prefix(err, "step %lld NOT committed", (long long)meta->step);
    }
    ah_ckpt_manifest_free(&all);
    if (st == AH_OK)
        for (int p = 0; p < n_parts; p++) { /* merged into the manifest; tidy, best effort */
            char path[AH_CKPT_PATH_MAX];
            part_path(path, sizeof path, dir, p);
            unlink(path);
        }
    return st;
}

ah_status_t ah_ckpt_commit(const char *root, const ah_ckpt_meta_t *meta, int n_parts, ah_error_t *err) {
    return commit_parts(root, meta, n_parts, false, err);
}

ah_status_t ah_ckpt_commit_more(const char *root, const ah_ckpt_meta_t *meta, int n_parts, ah_error_t *err) {
    return commit_parts(root, meta, n_parts, true, err);
}

ah_status_t ah_ckpt_unlisted_remove(const char *root, int64_t step, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX];
    ah_ckpt_manifest_t m;
    if (ah_ckpt_step_dir(dir, sizeof dir, root, step) < 0)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (ah_ckpt_load(root, step, &m, err) != AH_OK) return err->code;
    ah_ckpt_manifest_sort(&m);
    DIR *d = opendir(dir);
    if (!d) {
        ah_ckpt_manifest_free(&m);
        return ah_error_set(err, AH_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    }
    struct dirent *de;
    int gone = 0;
    while ((de = readdir(d))) {
        char p[AH_CKPT_PATH_MAX];
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2]))) continue;
        if (strcmp(de->d_name, AH_CKPT_MANIFEST) == 0 || ah_ckpt_manifest_find(&m, de->d_name)) continue;
        if (ah_ckpt_join(p, sizeof p, dir, de->d_name) >= 0 && unlink(p) == 0) gone++;
    }
    closedir(d);
    ah_ckpt_manifest_free(&m);
    return gone ? ah_ckpt_fsync_dir(dir, err) : AH_OK;
}

/* ---- reading, checking, cleaning ------------------------------------------------------------- */

ah_status_t ah_ckpt_load(const char *root, int64_t step, ah_ckpt_manifest_t *out, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX], man[AH_CKPT_PATH_MAX];
    memset(out, 0, sizeof *out);
    if (ah_ckpt_step_dir(dir, sizeof dir, root, step) < 0 ||
        snprintf(man, sizeof man, "%s/%s", dir, AH_CKPT_MANIFEST) >= (int)sizeof man)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (!file_exists(man))
        return ah_error_set(err, AH_ERR_IO, "%s: step %lld is not committed (no %s)", dir,
                            (long long)step, AH_CKPT_MANIFEST);
    if (ah_ckpt_manifest_load(man, out, err) != AH_OK) return err->code;
    if (out->meta.step != step) {
        ah_error_set(err, AH_ERR_INVALID, "%s: says step %lld but lives in the directory of step %lld",
                     man, (long long)out->meta.step, (long long)step);
        ah_ckpt_manifest_free(out);
        return err->code;
    }
    return AH_OK;
}

static int cmp_info(const void *a, const void *b) {
    int64_t x = ((const ah_ckpt_step_info_t *)a)->step, y = ((const ah_ckpt_step_info_t *)b)->step;
    return x < y ? -1 : x > y;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Shard files present in an uncommitted directory (for listings). */
static void count_present(const char *dir, ah_ckpt_step_info_t *info) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (ah_afile_is_temp_name(de->d_name) || !ends_with(de->d_name, ".safetensors")) continue;
        char p[AH_CKPT_PATH_MAX];
        struct stat sb;
        if (ah_ckpt_join(p, sizeof p, dir, de->d_name) >= 0 && stat(p, &sb) == 0) {
            info->n_files++;
            info->bytes += (uint64_t)sb.st_size;
        }
    }
    closedir(d);
}

ah_status_t ah_ckpt_list(const char *root, ah_ckpt_step_info_t **out, int *n, ah_error_t *err) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(root);
    if (!d) {
        if (errno == ENOENT) return AH_OK;
        return ah_error_set(err, AH_ERR_IO, "%s: cannot list checkpoint root: %s", root, strerror(errno));
    }
    int cap = 0;
    struct dirent *de;
    ah_status_t st = AH_OK;
    while ((de = readdir(d))) {
        int64_t step = ah_ckpt_parse_step_dir(de->d_name);
        if (step < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            ah_ckpt_step_info_t *g = realloc(*out, (size_t)cap * sizeof *g);
            if (!g) {
                st = ah_error_set(err, AH_ERR_OOM, "out of memory listing %s", root);
                break;
            }
            *out = g;
        }
        ah_ckpt_step_info_t *info = &(*out)[(*n)++];
        memset(info, 0, sizeof *info);
        info->step = step;
        ah_ckpt_manifest_t m;
        ah_error_t e2;
        if (ah_ckpt_load(root, step, &m, &e2) == AH_OK) {
            info->committed = true;
            info->n_files = m.n_files;
            for (int i = 0; i < m.n_files; i++) info->bytes += m.files[i].bytes;
            ah_ckpt_manifest_free(&m);
        } else {
            snprintf(info->note, sizeof info->note, "%.200s", e2.msg);
            char dir[AH_CKPT_PATH_MAX], man[AH_CKPT_PATH_MAX];
            ah_ckpt_step_dir(dir, sizeof dir, root, step);
            info->damaged = ah_ckpt_join(man, sizeof man, dir, AH_CKPT_MANIFEST) >= 0 && file_exists(man);
            count_present(dir, info);
        }
    }
    closedir(d);
    if (st != AH_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
        return st;
    }
    if (*n > 1) qsort(*out, (size_t)*n, sizeof **out, cmp_info);
    return AH_OK;
}

ah_status_t ah_ckpt_latest(const char *root, int64_t *step, ah_error_t *err) {
    ah_ckpt_step_info_t *info;
    int n;
    *step = -1;
    if (ah_ckpt_list(root, &info, &n, err) != AH_OK) return err->code;
    for (int i = 0; i < n; i++)
        if (info[i].committed) *step = info[i].step;
    free(info);
    return AH_OK;
}

ah_status_t ah_ckpt_verify_file(const char *path, const ah_ckpt_file_t *want, ah_error_t *err) {
    uint64_t bytes;
    uint32_t crc;
    if (ah_ckpt_file_crc(path, &bytes, &crc, err) != AH_OK) return err->code;
    if (bytes != want->bytes)
        return ah_error_set(err, AH_ERR_INVALID, "%s: %llu bytes but the manifest says %llu (truncated or replaced)",
                            path, (unsigned long long)bytes, (unsigned long long)want->bytes);
    if (crc != want->crc32c)
        return ah_error_set(err, AH_ERR_INVALID,
                            "%s: CRC-32C %08x but the manifest says %08x: the file is corrupt", path,
                            crc, want->crc32c);
    if (ends_with(path, ".safetensors")) {
        ah_st_file_t f;
        if (ah_st_open(path, &f, err) != AH_OK) return err->code;
        ah_st_close(&f);
    }
    return AH_OK;
}

ah_status_t ah_ckpt_verify(const char *root, int64_t step, int *n_bad, ah_error_t *err) {
    ah_ckpt_manifest_t m;
    if (n_bad) *n_bad = 0;
    if (ah_ckpt_load(root, step, &m, err) != AH_OK) return err->code;
    char dir[AH_CKPT_PATH_MAX];
    ah_ckpt_step_dir(dir, sizeof dir, root, step);
    int bad = 0;
    ah_error_t first = {0};
    for (int i = 0; i < m.n_files; i++) {
        char p[AH_CKPT_PATH_MAX];
        ah_error_t e2;
        ah_status_t st = ah_ckpt_join(p, sizeof p, dir, m.files[i].name) < 0
                             ? ah_error_set(&e2, AH_ERR_IO, "%s: path too long", dir)
                             : ah_ckpt_verify_file(p, &m.files[i], &e2);
        if (st != AH_OK && bad++ == 0) first = e2;
    }
    int total = m.n_files;
    ah_ckpt_manifest_free(&m);
    if (n_bad) *n_bad = bad;
    if (bad)
        return ah_error_set(err, first.code, "step %lld: %d of %d files fail verification; first: %s",
                            (long long)step, bad, total, first.msg);
    return AH_OK;
}

ah_status_t ah_ckpt_remove_step(const char *root, int64_t step, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX], p[AH_CKPT_PATH_MAX];
    ah_ckpt_step_dir(dir, sizeof dir, root, step);
    if (ah_ckpt_join(p, sizeof p, dir, AH_CKPT_MANIFEST) < 0)
        return ah_error_set(err, AH_ERR_IO, "%s: path too long", dir);
    if (unlink(p) == 0) {
        if (ah_ckpt_fsync_dir(dir, err) != AH_OK) return err->code;
    } else if (errno != ENOENT) {
        return ah_error_set(err, AH_ERR_IO, "%s: cannot remove: %s", p, strerror(errno));
    }
    return ah_fs_rm_tree(dir, err);
}

ah_status_t ah_ckpt_set_aside(const char *root, int64_t step, char *to, size_t cap, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX];
    int n = ah_ckpt_step_dir(dir, sizeof dir, root, step) < 0 ? -1
            : snprintf(to, cap, "%s.superseded-%lld-%ld", dir, (long long)time(NULL), (long)getpid());
    if (n < 0 || (size_t)n >= cap) return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (rename(dir, to) != 0)
        return ah_error_set(err, AH_ERR_IO, "%s: cannot move aside to %s: %s", dir, to, strerror(errno));
    return ah_ckpt_fsync_dir(root, err);
}

ah_status_t ah_ckpt_abandon(const char *root, int64_t step, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX], man[AH_CKPT_PATH_MAX];
    if (ah_ckpt_step_dir(dir, sizeof dir, root, step) < 0 || ah_ckpt_join(man, sizeof man, dir, AH_CKPT_MANIFEST) < 0)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (file_exists(man))
        return ah_error_set(err, AH_ERR_INVALID, "%s: step %lld is committed; not abandoning it", dir,
                            (long long)step);
    if (!file_exists(dir)) return AH_OK;
    if (ah_ckpt_remove_step(root, step, err) != AH_OK) return err->code;
    return ah_ckpt_fsync_dir(root, err);
}

ah_status_t ah_ckpt_rollback(const char *root, int64_t step, ah_error_t *err) {
    char dir[AH_CKPT_PATH_MAX];
    if (ah_ckpt_step_dir(dir, sizeof dir, root, step) < 0)
        return ah_error_set(err, AH_ERR_IO, "%.200s...: checkpoint root path too long", root);
    if (!file_exists(dir)) return AH_OK;
    if (ah_ckpt_remove_step(root, step, err) != AH_OK) return err->code;
    return ah_ckpt_fsync_dir(root, err);
}

ah_status_t ah_ckpt_gc(const char *root, int keep, int *removed, ah_error_t *err) {
    return ah_ckpt_gc_pinned(root, keep, -1, removed, err);
}

ah_status_t ah_ckpt_gc_pinned(const char *root, int keep, int64_t pinned, int *removed, ah_error_t *err) {
    if (removed) *removed = 0;
    if (keep < 1)
        return ah_error_set(err, AH_ERR_USAGE, "checkpoint gc: keep must be >= 1, got %d", keep);
    ah_ckpt_step_info_t *info;
    int n;
    if (ah_ckpt_list(root, &info, &n, err) != AH_OK) return err->code;
    int64_t newest = -1, cut = -1; /* committed steps <= cut go */
    int seen = 0;
    for (int i = n - 1; i >= 0; i--) {
        if (!info[i].committed) continue;
        if (newest < 0) newest = info[i].step;
        if (++seen == keep + 1) cut = info[i].step;
    }
    ah_status_t st = AH_OK;
    int gone = 0;
    for (int i = 0; i < n && st == AH_OK; i++) {
        bool drop = info[i].committed ? info[i].step <= cut : info[i].step < newest;
        if (!drop || (info[i].committed && info[i].step == pinned)) continue;
        st = ah_ckpt_remove_step(root, info[i].step, err);
        if (st == AH_OK) gone++;
    }
    free(info);
    if (st == AH_OK && gone) st = ah_ckpt_fsync_dir(root, err);
    if (removed) *removed = gone;
    return st;
}
