/* The handover at a notice: what each node of the next plan reads (handover.h). */
#include "ckpt/handover.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/placement.h"
#include "ckpt/reshard.h"

void ah_handover_needs_free(ah_handover_needs_t *h) {
    if (!h) return;
    for (int n = 0; h->names && n < h->n_nodes; n++) free(h->names[n]);
    free(h->names);
    free(h->n_names);
    free(h->in_next);
    memset(h, 0, sizeof *h);
}

bool ah_handover_reads(const ah_handover_needs_t *h, int node, const char *name) {
    if (node < 0 || node >= h->n_nodes) return false;
    for (int i = 0; i < h->n_names[node]; i++)
        if (strcmp(h->names[node][i], name) == 0) return true;
    return false;
}

/* name into node's list unless it is there (room: cap). */
static void add_name(ah_handover_needs_t *h, int node, const char *name) {
    if (!ah_handover_reads(h, node, name)) snprintf(h->names[node][h->n_names[node]++], AH_CKPT_NAME_MAX, "%s", name);
}

ah_status_t ah_handover_needs(const ah_plan_t *next, const ah_cluster_t *old_cluster, const ah_model_t *model, int T,
                              ah_handover_needs_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    if (next->model.n_layer != model->n_layer || next->model.d_model != model->d_model)
        return ah_error_set(err, AH_ERR_INVALID, "the next plan is for %s (%lld blocks of %lld), the job trains %s "
                            "(%lld of %lld): no handover", next->model.name, (long long)next->model.n_layer,
                            (long long)next->model.d_model, model->name, (long long)model->n_layer,
                            (long long)model->d_model);
    const int nn = old_cluster->n_nodes;
    int *node_map = malloc((size_t)(next->cluster.n_nodes + 1) * sizeof *node_map);
    out->n_nodes = nn;
    out->n_names = calloc((size_t)nn, sizeof *out->n_names);
    out->names = calloc((size_t)nn, sizeof *out->names);
    out->in_next = calloc((size_t)nn, sizeof *out->in_next);
    ah_placement_t pl = {0};
    ah_status_t st = node_map && out->n_names && out->names && out->in_next
                         ? AH_OK
                         : ah_error_set(err, AH_ERR_OOM, "no host memory for the handover's lists");
    /* the next plan's nodes by name among the old cluster's; one it lacks gets its own index past them */
    for (int i = 0; st == AH_OK && i < next->cluster.n_nodes; i++) {
        node_map[i] = nn + i;
        for (int n = 0; n < nn; n++)
            if (strcmp(next->cluster.nodes[i].name, old_cluster->nodes[n].name) == 0) node_map[i] = n;
    }
    if (st == AH_OK) st = ah_placement_build(next, node_map, nn + next->cluster.n_nodes, &pl, err);
    const int cap = (2 + (int)model->n_layer) * T; /* every piece of the model, at most */
    for (int n = 0; st == AH_OK && n < nn; n++)
        if (!(out->names[n] = calloc((size_t)cap, sizeof *out->names[n])))
            st = ah_error_set(err, AH_ERR_OOM, "no host memory for the handover's lists");
    ah_shard_group_t *gs = st == AH_OK ? calloc((size_t)pl.max_groups + 1, sizeof *gs) : NULL;
    if (st == AH_OK && !gs) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the handover's lists");
    for (int r = 0; st == AH_OK && r < pl.n_ranks; r++) {
        const int node = pl.ranks[r].node;
        if (node >= nn) continue; /* not in the old cluster: nothing handed to it */
        out->in_next[node] = true;
        const int ng = ah_placement_groups(&pl, r, true, gs);
        for (int gi = 0; gi < ng; gi++) {
            int idx[AH_RESHARD_MAX_PIECES];
            const int nf = ah_reshard_pieces(model, gs[gi], T, next->tp, pl.ranks[r].tp_index, idx);
            for (int j = 0; j < nf; j++) {
                char name[AH_CKPT_NAME_MAX];
                ah_shard_group_name(name, gs[gi], T, idx[j]);
                add_name(out, node, name);
            }
        }
    }
    free(gs);
    free(node_map);
    ah_placement_free(&pl);
    if (st != AH_OK) ah_handover_needs_free(out);
    return st;
}
