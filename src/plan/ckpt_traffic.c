/* Each node's checkpoint bytes, its cloud share and its replica partner (ckpt_traffic.h). */
#include "plan/ckpt_traffic.h"

#include <stdlib.h>
#include <string.h>

/* Slot of a tensor's save group in a table of the embedding, the blocks and the head (L + 2). */
static int group_slot(const ah_tensor_t *x, int L) {
    switch (x->spec->layer) {
    case AH_LAYER_EMBED: break;
    case AH_LAYER_BLOCK: return x->block + 1;
    case AH_LAYER_HEAD: return L + 1;
    }
    return 0;
}

/* Whether stage s of pl holds save group slot g (L blocks): the embedding on the first stage, its
 * blocks, the head on the last (ckpt/placement.h). */
static bool stage_holds(const ah_pipeline_t *pl, int s, int g, int L) {
    if (g == 0) return s == 0;
    if (g == L + 1) return s == pl->n_stages - 1;
    return g - 1 >= pl->stages[s].first && g - 1 < pl->stages[s].last;
}

ah_status_t ah_ckpt_node_bytes(const ah_plan_t *p, int64_t *own, int64_t *cloud, ah_error_t *err) {
    const int nn = p->cluster.n_nodes, L = (int)p->model.n_layer, tp = p->tp, slots = L + 2;
    memset(own, 0, (size_t)nn * sizeof *own);
    if (cloud) memset(cloud, 0, (size_t)nn * sizeof *cloud);
    const int nt = ah_model_tensor_count(&p->model);
    ah_tensor_t *ts = malloc((size_t)nt * sizeof *ts);
    int64_t *group = calloc((size_t)slots, sizeof *group); /* one TP piece of each group, weights + m + v */
    bool *held = calloc((size_t)nn * (size_t)slots * (size_t)tp, sizeof *held); /* [node][slot][TP index] */
    ah_status_t st = ts && group && held ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoints");
    if (st == AH_OK) ah_model_tensors(&p->model, ts);
    for (int k = 0; st == AH_OK && k < nt; k++)
        group[group_slot(&ts[k], L)] += 3 * (int64_t)sizeof(float) * ah_tensor_shard_elems(&ts[k], tp);
    for (int i = 0; st == AH_OK && i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++)
            for (int k = 0, n = ah_stage_devices(pl, tp); k < n; k++) {
                const int node = pl->stages[s].devices[k].node;
                bool *mine = held + (size_t)node * (size_t)slots * (size_t)tp; /* [slot][TP index] */
                for (int g = 0; g < slots; g++) {
                    if (!stage_holds(pl, s, g, L)) continue;
                    mine[g * tp + k % tp] = true;
                    if (cloud && i == 0 && k < tp) cloud[node] += group[g]; /* the job's lowest holder: pipeline 0, CP rank 0 */
                }
            }
    }
    for (int n = 0; st == AH_OK && n < nn; n++)
        for (int g = 0; g < slots; g++)
            for (int ti = 0; ti < tp; ti++) own[n] += held[((size_t)n * (size_t)slots + (size_t)g) * (size_t)tp + (size_t)ti] ? group[g] : 0;
    free(held);
    free(group);
    free(ts);
    return st;
}

void ah_ckpt_partners(int n_nodes, const int *leader, const char *const *zones, int *partner) {
    for (int y = 0; y < n_nodes; y++) {
        partner[y] = -1;
        if (leader[y] < 0) continue;
        int same_zone = -1;
        for (int k = 1; k < n_nodes && partner[y] < 0; k++) {
            const int q = (y + k) % n_nodes;
            if (leader[q] < 0) continue;
            if (zones && strcmp(zones[q], zones[y]) != 0) partner[y] = q;
            else if (same_zone < 0) same_zone = q;
        }
        if (partner[y] < 0) partner[y] = same_zone;
    }
}
