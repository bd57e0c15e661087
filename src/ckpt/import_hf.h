/* Reading a Hugging Face model directory (`autohet train --init-from DIR`): the inverse of
 * ckpt/export_hf.h, for any plan. Pure file reading and mapping: no MPI, no trainer; the runtime's
 * glue (runtime/init_hf.h) fills a stage with it, and the CLI agrees the outcome across ranks.
 *
 * A directory is config.json plus either model.safetensors, or sharded model-0000K-of-0000N
 * .safetensors files listed by model.safetensors.index.json ({"weight_map": {NAME: FILE}}); not
 * both (transformers would load model.safetensors): that is refused, naming the two files.
 *
 * Checks, each an error naming the file and the tensor or field (and both values where two
 * disagree):
 *   - config.json is read with ah_model_from_hf_json (which refuses, named, a field whose math
 *     autohet does not implement: biases, a rope_scaling other than LLaMA 3.1's, another
 *     activation, ...) and compared with the plan's model (ah_model_diff) under its Hugging Face
 *     name (n_layer, hidden_size, num_key_value_heads, rope_theta, rope_scaling.factor,
 *     sliding_window, tie_word_embeddings, ...);
 *   - every header is read and validated (ckpt/safetensors.h: a truncated file fails there, naming
 *     the tensor past the end); the index and the headers must agree tensor for tensor;
 *   - every tensor of the model (spec/arch.h, its hf_name) is in exactly one file with the shape
 *     Hugging Face gives it ((cols, rows) where hf_transposed: GPT-2's Conv1D; 1-D vectors), in
 *     F32, BF16 or F16 (converted to fp32 when read; any other dtype fails in the header check);
 *   - tensors the model does not use are recognised and skipped: rotary_emb.inv_freq (LLaMA),
 *     GPT-2's attn.bias / attn.masked_bias buffers; GPT-2 names are found with or without the
 *     "transformer." prefix (GPT2Model vs GPT2LMHeadModel files); a tied model's lm_head.weight,
 *     which some converters write beside the embedding, is taken only as an exact copy of it
 *     (dtype and shape here, every byte where the embedding is read); any other tensor is an
 *     error naming it.
 * All of that happens in ah_hf_import_open, for the whole model, on whichever rank opens it (so
 * every rank reaches the same verdict); the data is read only by ah_hf_import_shard, tensor by
 * tensor: a rank reads the bytes of its own stage's shards only (a vocabulary-parallel shard reads
 * its rows, not the matrix), and refuses a NaN or infinite value there, naming the file, the tensor
 * and the element.
 *
 * Ownership: ah_hf_import_t owns its headers and tables; ah_hf_import_close frees them. The model
 * passed to ah_hf_import_open is copied.
 */
#ifndef AH_CKPT_IMPORT_HF_H
#define AH_CKPT_IMPORT_HF_H

#include <stdint.h>

#include "ckpt/afile.h"
#include "ckpt/safetensors.h"
#include "core/status.h"
#include "spec/arch.h"
#include "spec/model.h"

/* Where one tensor of the model is: file index and header entry. */
typedef struct ah_hf_found {
    int file;                /* index into files, -1 until found */
    const ah_st_entry_t *e;  /* its header entry (files[file].entries) */
} ah_hf_found_t;

typedef struct ah_hf_import {
    char dir[AH_CKPT_PATH_MAX];
    ah_model_t model;        /* the plan's model, which config.json matches */
    int n_files;
    ah_st_file_t *files;     /* headers, in the index's order of first appearance */
    int n_tensors;           /* the model's tensors, canonical order (ah_model_tensors) */
    ah_tensor_t *defs;
    ah_hf_found_t *found;    /* per tensor of defs */
    int skipped;             /* tensors in the files the model does not use */
    /* A tied model's lm_head.weight in the files (file -1: none), as some converters write it: read
     * beside the embedding and required to equal it byte for byte (it is the same matrix). */
    ah_hf_found_t tied_head;
} ah_hf_import_t;

/* DIR/config.json describes model m (the fields above); the message names the field, the value in
 * the file and the plan's. */
ah_status_t ah_hf_import_check_config(const char *dir, const ah_model_t *m, ah_error_t *err);

/* Checks DIR for model m (everything above but reading the data) and maps its tensors. */
ah_status_t ah_hf_import_open(const char *dir, const ah_model_t *m, ah_hf_import_t *out, ah_error_t *err);

/* TP rank k of degree t's shard of tensor x (a tensor of the model: its name is looked up) into
 * dst, n = ah_tensor_shard_elems(x, t) floats, in our layout, converted to fp32; vocabulary
 * padding gets 0. */
ah_status_t ah_hf_import_shard(const ah_hf_import_t *h, const ah_tensor_t *x, int t, int k, float *dst, int64_t n,
                               ah_error_t *err);

void ah_hf_import_close(ah_hf_import_t *h);

/* fp32 of an IEEE half / a bfloat16, bit exact (subnormals, infinities and NaNs kept). */
float ah_f16_to_f32(uint16_t h);
float ah_bf16_to_f32(uint16_t b);

#endif
