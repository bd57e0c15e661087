/* The checkpoint session's state and the helpers its save (ckpt_io.c) and its resume
 * (ckpt_resume.c) share. Private to those two files; the contract is runtime/ckpt_io.h. */
#ifndef AH_RUNTIME_CKPT_SESSION_H
#define AH_RUNTIME_CKPT_SESSION_H

#include <stdlib.h>

#include "ckpt/cloud.h"
#include "ckpt/placement.h"
#include "runtime/ckpt_io.h"

struct ah_ckpt_session {
    ah_trainer_t *tr;
    ah_ckpt_opts_t o;
    ah_placement_t place;    /* who holds which shard; nodes are the plan's */
    int n_nodes, my_node;
    char node_root[AH_CKPT_PATH_MAX];
    ah_comm_t *node;         /* this node's ranks, by world rank */
    int node_rank, node_size;
    char plan_hash[32];
    bool cloud;
    ah_s3_config_t s3cfg;
    ah_s3_url_t url;
    ah_ckpt_uploader_t *up;  /* node leaders with a cloud only */
    int64_t last_saved;      /* newest step committed on every node, -1 when none */
    double last_save_s;      /* duration of the last save (max over ranks), -1 when none */
    int *hit;                /* n_nodes: nodes with a preemption notice */
    bool noticed;            /* a notice stopped the job */
    double step_end, step_s; /* when the last step_done returned; the step before it took step_s */
};

/* ---- the model's tensors in shard groups (spec/arch.h) ------------------------------------- */

static inline bool in_group(const ah_tensor_t *d, ah_shard_group_t g) {
    const ah_shard_group_t h = ah_shard_group_of(d);
    return h.kind == g.kind && h.layer == g.layer;
}

/* A shard holds each tensor as weights, AdamW m and v, under these suffixes. */
static const char *const SUFFIX[3] = {"", ".exp_avg", ".exp_avg_sq"};

/* Room for ah_placement_groups. */
static inline ah_shard_group_t *groups_alloc(const ah_ckpt_session_t *s) {
    return malloc((size_t)s->place.max_groups * sizeof(ah_shard_group_t));
}

#endif
