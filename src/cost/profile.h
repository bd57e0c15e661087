/* Measured per-layer timings (`autohet profile` writes them, the cost model reads them).
 *
 * JSON (version 2):
 *   {"version": 2, "host": "free text naming the machine",
 *    "model": {the model object of plan files (ah_model_to_json), or a preset name},
 *    "entries": [{"gpu": TYPE, "tp": t, "micro_batch": m, "seq_len": T, "precision": "fp32",
 *                 "includes_tp_comm": bool, "emulate_slowdown": k,
 *                 "block": {"fwd_s", "bwd_s", "wgrad_s", "act_bytes"},
 *                 "embed": {"fwd_s", "bwd_s", "act_bytes"},
 *                 "head":  {"fwd_s", "bwd_s", "act_bytes"},
 *                 "optimizer_s_per_param": x,
 *                 "attention": {"fwd_s", "bwd_s"},
 *                 "ring_attention": [{"cp": c, "fwd_s", "bwd_s"}]}]}
 * Seconds are per micro-batch, per TP rank; "block" is one transformer block. An entry is keyed by
 * (gpu, tp, micro_batch, seq_len, precision); two entries with one key are an error. Each of
 * block/embed/head may be missing; ah_stage_cost then uses the roofline for that layer kind.
 * optimizer_s_per_param (optional) is the measured AdamW step per parameter on that device; without
 * it the cost model prices the optimizer from the type's memory bandwidth.
 * wgrad_s (optional, any layer; the profiler writes it for the block) is the part of bwd_s that is a
 * split backward's W, the weight-gradient GEMMs (runtime/gpt.h ah_gpt_backward_weights), measured
 * apart from its B; zero-bubble's B and W are priced from it (cost.h wgrad_s), and without it by
 * the weight GEMMs' share of the backward's FLOPs. A file without it reads as before.
 * attention and ring_attention (optional; the profiler writes them on the CPU backend): the causal
 * attention kernel alone of one block at T (one process), and one CP rank's ring attention kernels
 * at CP c (c = 2, 4, 8 where 2c divides T: its c key/value blocks, forward from init to finish,
 * backward), per micro-batch, per TP rank, without the ring's transfers. The cost model prices a
 * CP c rank's block as block / c + ring(c) - attention / c where both are present (the ring
 * kernels cost more than 1/c of the one-process kernel), else block / c (docs/cost-model.md
 * "Context parallelism").
 * includes_tp_comm says whether the block timings already contain the TP all-reduces (measured
 * on a real TP group); when false the cost model adds them from the link model. act_bytes is what
 * the profiler measured; the memory model does not use it (memory always comes from the model,
 * which the runtime matches byte for byte), it is kept so the two can be compared.
 *
 * What the timings depend on is recorded, and a profile is refused (ah_profile_check, which the
 * planner, the baselines and ah_evaluate call) where it does not hold: "model" is the model it
 * was measured on, and a model of another shape — architecture, d_model, heads, kv heads, d_ff,
 * vocabulary, tied head: everything a block, the embedding or the head computes with — is refused,
 * naming the first field that differs (the depth n_layer may differ: the figures are per layer);
 * "emulate_slowdown" (optional, default 1: a real device or no emulation) is the emulation an
 * emulated type was measured through, and a cluster that emulates that type at another slowdown
 * is refused. Version 1 files, which recorded neither, are refused with a note to re-profile.
 *
 * Ownership: an ah_profile_t owns its entries; free with ah_profile_free. Lookups return pointers
 * into it, valid until the profile is freed or an entry is added.
 */
#ifndef AH_COST_PROFILE_H
#define AH_COST_PROFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "cost/cost.h"
#include "spec/cluster.h"
#include "spec/model.h"

#define AH_PROFILE_VERSION 2

typedef struct ah_profile_layer {
    bool present;      /* false: the profile has no figure for this layer kind */
    double fwd_s;      /* one micro-batch forward, seconds */
    double bwd_s;      /* one micro-batch backward, seconds */
    double wgrad_s;    /* the W part of bwd_s (measured apart), seconds; 0: not measured */
    int64_t act_bytes; /* measured activation bytes kept for backward */
} ah_profile_layer_t;

typedef struct ah_profile_entry {
    char gpu[AH_NAME_MAX]; /* GPU type name as the cluster names it */
    int tp;
    int64_t micro_batch;
    int64_t seq_len;
    ah_precision_t precision;
    bool includes_tp_comm;
    ah_profile_layer_t layer[3]; /* indexed by ah_layer_kind_t */
    double optimizer_s_per_param; /* AdamW seconds per parameter; 0: not measured */
    double emulate_slowdown;      /* the emulation it was measured through; 1: none */
    ah_profile_layer_t attention; /* one block's attention kernel at T (fwd_s, bwd_s); present: measured */
    ah_profile_layer_t ring[4];   /* [k]: one CP rank's ring attention at CP 2^k (k = 1..3) */
} ah_profile_entry_t;

/* An empty profile of model m (for the profiler, which adds entries). NULL when out of host
 * memory. */
ah_profile_t *ah_profile_create(const char *host, const ah_model_t *m);
/* Adds a copy of e; fails (AH_ERR_INVALID) on a duplicate key. */
ah_status_t ah_profile_add(ah_profile_t *p, const ah_profile_entry_t *e, ah_error_t *err);

ah_status_t ah_profile_load(const char *path, ah_profile_t **out, ah_error_t *err);
/* Parses a loaded document; `where` names it in messages (a file name). */
struct json_t;
ah_status_t ah_profile_from_json(const struct json_t *doc, const char *where, ah_profile_t **out,
                                 ah_error_t *err);
struct json_t *ah_profile_to_json(const ah_profile_t *p);
ah_status_t ah_profile_save(const ah_profile_t *p, const char *path, ah_error_t *err);
void ah_profile_free(ah_profile_t *p);

int ah_profile_count(const ah_profile_t *p);
const ah_profile_entry_t *ah_profile_get(const ah_profile_t *p, int i);
const char *ah_profile_host(const ah_profile_t *p);
const ah_model_t *ah_profile_model(const ah_profile_t *p);
/* Whether p's figures hold for model m on cluster c (see above); AH_ERR_INVALID naming the
 * profile, the field and both values when not. */
ah_status_t ah_profile_check(const ah_profile_t *p, const ah_model_t *m, const ah_cluster_t *c, ah_error_t *err);
/* The entry for that key, or NULL (then the caller falls back to the roofline). */
const ah_profile_entry_t *ah_profile_find(const ah_profile_t *p, const char *gpu, int tp,
                                          int64_t micro_batch, int64_t seq_len,
                                          ah_precision_t precision);

#endif
