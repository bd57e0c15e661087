/* `autohet ckpt export`: a committed step as a Hugging Face GPT-2 model, offline (no MPI, no
 * trainer: the node directories are all it reads).
 *
 * Output: OUT_DIR/model.safetensors (transformer.* names, the Conv1D (in, out) layout for c_attn,
 * c_proj and c_fc; the head tied to wte) and OUT_DIR/config.json. Input: a node's checkpoint
 * root or a directory of them (DIR/NODE/, as --local-root of autohet train). Each shard is taken
 * from whichever node holds a copy that verifies (size, CRC-32C, structure), at whatever TP
 * degree it was saved, and the full tensors are assembled (ckpt/reshard.h).
 */
#ifndef AH_CKPT_EXPORT_HF_H
#define AH_CKPT_EXPORT_HF_H

#include <stdint.h>

#include "ckpt/afile.h"
#include "core/status.h"

/* The node checkpoint roots a --local-root DIR names: DIR itself when it holds step directories
 * (one node's root), else each of its subdirectories (DIR/NODE/, as autohet train writes them),
 * sorted. A DIR that cannot be opened is an error, not an empty list. *roots is malloc'ed; free
 * it. (`ckpt ls` and `ckpt verify` take the same DIR.) */
ah_status_t ah_ckpt_node_roots(const char *dir, char (**roots)[AH_CKPT_PATH_MAX], int *n, ah_error_t *err);

/* step < 0: the newest step whose weights are complete at some TP degree. *step_out (may be
 * NULL) gets the step exported. */
ah_status_t ah_ckpt_export_hf(const char *local_root, int64_t step, const char *out_dir, int64_t *step_out,
                              ah_error_t *err);

#endif
