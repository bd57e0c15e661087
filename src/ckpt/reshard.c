/* Loading a tensor saved at one TP degree into another (reshard.h). */
#include "ckpt/reshard.h"

#include <stdio.h>
#include <stdlib.h>

ah_status_t ah_reshard_read_file(const ah_st_file_t *f, const char *name, float *dst, int64_t n, ah_error_t *err) {
    const ah_st_entry_t *e = ah_st_find(f, name);
    if (!e)
        return ah_error_set(err, AH_ERR_INVALID, "%s: no tensor \"%s\" (a shard of another model or an "
                            "older format); resume with the plan's model or from another checkpoint", f->path, name);
    if (e->dtype != AH_DTYPE_F32 || e->end - e->begin != (uint64_t)n * sizeof(float))
        return ah_error_set(err, AH_ERR_INVALID, "%s: tensor \"%s\" is %s with %llu bytes; expected F32 with "
                            "%lld bytes (the checkpoint's model shape differs from the plan's)", f->path, name,
                            ah_dtype_name(e->dtype), (unsigned long long)(e->end - e->begin),
                            (long long)(n * (int64_t)sizeof(float)));
    return ah_st_read(f, name, dst, (size_t)n * sizeof(float), err);
}

/* ah_reshard_read_fn over the opened files. */
static ah_status_t read_file_piece(void *ctx, int j, const char *name, float *dst, int64_t n, ah_error_t *err) {
    return ah_reshard_read_file(&((const ah_st_file_t *)ctx)[j], name, dst, n, err);
}

ah_status_t ah_reshard_load_tensor(const ah_tensor_t *d, const char *sfx, int t, int k, int T,
                                   const ah_st_file_t *fs, int nf, float *dst, int64_t n, ah_error_t *err) {
    return ah_reshard_tensor(d, sfx, t, k, T, read_file_piece, (void *)fs, nf, dst, n, err);
}

ah_status_t ah_reshard_tensor(const ah_tensor_t *d, const char *sfx, int t, int k, int T, ah_reshard_read_fn read,
                              void *ctx, int nf, float *dst, int64_t n, ah_error_t *err) {
    char name[96];
    snprintf(name, sizeof name, "%s%s", d->name, sfx);
    if (T == t || d->spec->split == AH_SPLIT_REPL) return read(ctx, 0, name, dst, n, err);
    if (nf < T) return ah_error_set(err, AH_ERR_INTERNAL, "resharding %s needs %d pieces, got %d", name, T, nf);
    const int64_t np = ah_tensor_shard_elems(d, T);
    float *full = malloc((size_t)(d->rows * d->cols) * sizeof *full), *piece = malloc((size_t)np * sizeof *piece);
    ah_status_t st = full && piece ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to reshard %s", name);
    for (int j = 0; j < T && st == AH_OK; j++) {
        if ((st = read(ctx, j, name, piece, np, err)) != AH_OK) break;
        for (int64_t e = 0; e < np; e++) {
            const int64_t f = ah_tensor_full_index(d, T, j, e);
            if (f >= 0) full[f] = piece[e]; /* -1: a padded vocabulary row */
        }
    }
    for (int64_t e = 0; st == AH_OK && e < n; e++) {
        const int64_t f = ah_tensor_full_index(d, t, k, e);
        dst[e] = f >= 0 ? full[f] : 0.0f;
    }
    free(full);
    free(piece);
    return st;
}

int ah_reshard_pieces(const ah_model_t *m, ah_shard_group_t g, int T, int t, int k, int *idx) {
    if (T == t) {
        idx[0] = k;
        return 1;
    }
    if (!ah_layer_tp_split(m, ah_shard_group_layer(g))) {
        idx[0] = 0;
        return 1;
    }
    for (int j = 0; j < T; j++) idx[j] = j;
    return T;
}

