/* TP resharding: a tensor saved at TP degree T, loaded into TP rank k of degree t.
 *
 * A checkpoint holds each tensor as T pieces (one per shard of its group, in the TP piece's own
 * shape). Loading at the same degree reads piece k as it is; a tensor every TP rank holds whole
 * (replicated: embeddings, norms) reads piece 0; otherwise the full tensor is assembled from all
 * T pieces and rank k's piece at degree t is sliced out of it, with the Megatron layout of
 * ah_tensor_full_index (QKV by heads, MLP rows / columns). Weights, AdamW m and v alike: the
 * caller names which by a suffix ("", ".exp_avg", ".exp_avg_sq"). Every piece is checked (F32,
 * the size the tensor's shape asks for) before it is read. No MPI; files are the caller's.
 *
 * The tensors' shapes and splits come from the architecture table (spec/arch.h), the groups from
 * ckpt/placement.h.
 */
#ifndef AH_CKPT_RESHARD_H
#define AH_CKPT_RESHARD_H

#include "ckpt/placement.h"
#include "ckpt/safetensors.h"

/* The most pieces one group is read from: a plan's TP degree is at most AH_MAX_TP. */
#define AH_RESHARD_MAX_PIECES AH_MAX_TP

/* The pieces (TP indices at degree T) of model m's group g that TP rank k of degree t reads, into
 * idx (AH_RESHARD_MAX_PIECES): its own index when T == t; the first for a group whose layer no TP
 * rank splits (spec/arch.h: the embedding, the head); all of them to reshard the others.
 * Returns the count. */
int ah_reshard_pieces(const ah_model_t *m, ah_shard_group_t g, int T, int t, int k, int *idx);

/* Fills dst (n floats), TP rank k's piece at degree t of tensor d + sfx, from the checkpoint's
 * pieces at degree T: fs[j] is the j-th of the nf files ah_reshard_pieces listed, opened. */
ah_status_t ah_reshard_load_tensor(const ah_tensor_t *d, const char *sfx, int t, int k, int T,
                                   const ah_st_file_t *fs, int nf, float *dst, int64_t n, ah_error_t *err);

/* Where the pieces come from: read(ctx, j, name, dst, np) copies tensor `name` (d's name + sfx) of
 * the j-th piece ah_reshard_pieces listed, np floats (its size at degree T), into dst; an error when
 * that piece does not hold it so. The checkpoint's files (ah_reshard_load_tensor) and the in-place
 * move's buffers (runtime/reconfig_move.h) alike: one slicing, so both give the same bits. */
/* Copies tensor `name` (n floats, F32) of an opened shard into dst, its dtype and size checked first. */
ah_status_t ah_reshard_read_file(const ah_st_file_t *f, const char *name, float *dst, int64_t n, ah_error_t *err);
typedef ah_status_t (*ah_reshard_read_fn)(void *ctx, int j, const char *name, float *dst, int64_t np,
                                          ah_error_t *err);
ah_status_t ah_reshard_tensor(const ah_tensor_t *d, const char *sfx, int t, int k, int T, ah_reshard_read_fn read,
                              void *ctx, int nf, float *dst, int64_t n, ah_error_t *err);

#endif
