/* Who holds which checkpoint shard (placement.h). */
#include "ckpt/placement.h"

#include <stdlib.h>
#include <string.h>

ah_status_t ah_placement_build(const ah_plan_t *p, const int *node_map, int n_nodes, ah_placement_t *out,
                               ah_error_t *err) {
    memset(out, 0, sizeof *out);
    out->n_ranks = ah_plan_device_count(p);
    out->n_nodes = node_map ? n_nodes : p->cluster.n_nodes;
    out->tp = p->tp;
    out->max_groups = (int)p->model.n_layer + 2;
    const int L = (int)p->model.n_layer;
    out->ranks = malloc((size_t)(out->n_ranks > 0 ? out->n_ranks : 1) * sizeof *out->ranks);
    out->node_leader = malloc((size_t)(out->n_nodes > 0 ? out->n_nodes : 1) * sizeof *out->node_leader);
    out->blocks = calloc((size_t)(out->n_ranks > 0 ? out->n_ranks : 1) * (size_t)(L > 0 ? L : 1), sizeof *out->blocks);
    if (!out->ranks || !out->node_leader || !out->blocks) {
        ah_placement_free(out);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the shard placement");
    }
    for (int n = 0; n < out->n_nodes; n++) out->node_leader[n] = -1;
    int base = 0; /* the pipeline's first rank */
    for (int i = 0; i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        const int per_stage = ah_stage_devices(pl, p->tp); /* tp x cp, cp-major */
        for (int s = 0; s < pl->n_stages; s++) { /* a device is placed by its first stage */
            const ah_stage_t *st = &pl->stages[s];
            const int r0 = base + ah_pipeline_group_of(pl, s) * per_stage;
            for (int k = 0; k < per_stage; k++) {
                ah_shard_holder_t *h = &out->ranks[r0 + k];
                bool *blocks = out->blocks + (size_t)(r0 + k) * (size_t)L;
                if (ah_pipeline_group_of(pl, s) == s) {
                    const int node = node_map ? node_map[st->devices[k].node] : st->devices[k].node;
                    *h = (ah_shard_holder_t){node, st->devices[k].index, k % p->tp, blocks, false, false};
                    if (out->node_leader[node] < 0) out->node_leader[node] = r0 + k;
                }
                for (int l = st->first; l < st->last; l++) blocks[l] = true;
                h->embed = h->embed || s == 0;
                h->head = h->head || s == pl->n_stages - 1;
            }
        }
        base += ah_pipeline_groups(pl) * per_stage;
    }
    return AH_OK;
}

void ah_placement_free(ah_placement_t *pl) {
    free(pl->ranks);
    free(pl->node_leader);
    free(pl->blocks);
    memset(pl, 0, sizeof *pl);
}

ah_layer_kind_t ah_shard_group_layer(ah_shard_group_t g) {
    switch (g.kind) {
    case AH_SHARD_EMBED: break;
    case AH_SHARD_BLOCK: return AH_LAYER_BLOCK;
    case AH_SHARD_HEAD: return AH_LAYER_HEAD;
    }
    return AH_LAYER_EMBED;
}

ah_shard_group_t ah_shard_group_of(const ah_tensor_t *x) {
    switch (x->spec->layer) {
    case AH_LAYER_EMBED: break;
    case AH_LAYER_BLOCK: return (ah_shard_group_t){AH_SHARD_BLOCK, x->block};
    case AH_LAYER_HEAD: return (ah_shard_group_t){AH_SHARD_HEAD, -1};
    }
    return (ah_shard_group_t){AH_SHARD_EMBED, -1};
}

void ah_shard_group_name(char *buf, ah_shard_group_t g, int tp, int tp_index) {
    ah_ckpt_shard_name(buf, AH_CKPT_NAME_MAX, g.kind, g.layer, tp, tp_index);
}

int ah_placement_groups(const ah_placement_t *pl, int rank, bool for_load, ah_shard_group_t *g) {
    const ah_shard_holder_t *h = &pl->ranks[rank];
    int n = 0;
    if (h->embed || (for_load && h->head)) g[n++] = (ah_shard_group_t){AH_SHARD_EMBED, -1};
    for (int l = 0; l < pl->max_groups - 2; l++)
        if (h->block[l]) g[n++] = (ah_shard_group_t){AH_SHARD_BLOCK, l};
    if (h->head) g[n++] = (ah_shard_group_t){AH_SHARD_HEAD, -1};
    return n;
}

bool ah_placement_holds(const ah_placement_t *pl, int rank, ah_shard_group_t g, int tp_index) {
    const ah_shard_holder_t *h = &pl->ranks[rank];
    if (h->tp_index != tp_index) return false;
    switch (g.kind) {
    case AH_SHARD_EMBED: return h->embed;
    case AH_SHARD_HEAD: return h->head;
    case AH_SHARD_BLOCK: return g.layer >= 0 && g.layer < pl->max_groups - 2 && h->block[g.layer];
    }
    return false;
}

int ah_placement_lowest_holder(const ah_placement_t *pl, ah_shard_group_t g, int tp_index, int node) {
    /* a node's ranks start at its leader, the lowest of them */
    for (int r = node >= 0 ? pl->node_leader[node] : 0; r >= 0 && r < pl->n_ranks; r++)
        if ((node < 0 || pl->ranks[r].node == node) && ah_placement_holds(pl, r, g, tp_index)) return r;
    return -1;
}

bool ah_placement_survives(const ah_placement_t *pl, ah_shard_group_t g, int tp_index, const bool *alive) {
    for (int r = 0; r < pl->n_ranks; r++)
        if (alive[pl->ranks[r].node] && ah_placement_holds(pl, r, g, tp_index)) return true;
    return false;
}

/* Appends group g's needed piece names at degree T to names[*n]. */
static void group_names(const ah_model_t *m, ah_shard_group_t g, int T, char (*names)[AH_CKPT_NAME_MAX], int *n) {
    const int pieces = ah_layer_tp_split(m, ah_shard_group_layer(g)) ? T : 1;
    for (int j = 0; j < pieces; j++) ah_shard_group_name(names[(*n)++], g, T, j);
}

int ah_placement_model_names(const ah_model_t *m, int T, char (*names)[AH_CKPT_NAME_MAX]) {
    int n = 0;
    group_names(m, (ah_shard_group_t){AH_SHARD_EMBED, -1}, T, names, &n);
    for (int l = 0; l < (int)m->n_layer; l++) group_names(m, (ah_shard_group_t){AH_SHARD_BLOCK, l}, T, names, &n);
    group_names(m, (ah_shard_group_t){AH_SHARD_HEAD, -1}, T, names, &n);
    return n;
}
