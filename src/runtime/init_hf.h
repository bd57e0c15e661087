/* A stage's weights from a Hugging Face model directory (`autohet train --init-from DIR`).
 *
 * ah_gpt_init_from_hf opens DIR for the stage's model (ckpt/import_hf.h: config.json matched field
 * by field, every header checked, every tensor mapped, on every rank alike), then fills each tensor
 * the stage holds (its blocks, the embedding on stage 0, the head on the last, a last stage's copy
 * of a tied embedding) with its TP shard, read from the files and converted to fp32; vocabulary
 * padding stays 0. AdamW's m and v are zeroed: training starts at step 0 with a fresh optimizer.
 * Not collective: the caller agrees the outcome across ranks (ah_comm_agree), as the trainer's
 * start-up does. On a device the weights are filled on the host and uploaded.
 */
#ifndef AH_RUNTIME_INIT_HF_H
#define AH_RUNTIME_INIT_HF_H

#include "runtime/gpt.h"

/* *loaded (may be NULL) gets the number of the stage's tensors filled, *skipped the tensors of
 * the files the model does not use (buffers such as rotary_emb.inv_freq). */
ah_status_t ah_gpt_init_from_hf(ah_gpt_stage_t *st, const char *dir, int *loaded, int *skipped, ah_error_t *err);

#endif
