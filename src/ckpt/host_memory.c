/* Snapshot bytes per node, and the host-memory rule (host_memory.h). */
#include "ckpt/host_memory.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/placement.h"

#define GIB 1073741824.0

ah_status_t ah_snapshot_node_bytes(const ah_plan_t *p, int64_t *bytes, ah_error_t *err) {
    memset(bytes, 0, (size_t)p->cluster.n_nodes * sizeof *bytes);
    ah_placement_t pl;
    ah_status_t st = ah_placement_build(p, NULL, 0, &pl, err);
    if (st != AH_OK) return st;
    const int nt = ah_model_tensor_count(&p->model);
    ah_tensor_t *ts = malloc((size_t)nt * sizeof *ts);
    ah_shard_group_t *gs = malloc((size_t)pl.max_groups * sizeof *gs);
    if (!ts || !gs) st = ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoint snapshots");
    if (ts) ah_model_tensors(&p->model, ts);
    for (int r = 0; st == AH_OK && r < pl.n_ranks; r++) {
        const int n = ah_placement_groups(&pl, r, false, gs), node = pl.ranks[r].node;
        for (int i = 0; i < n; i++) {
            if (ah_placement_lowest_holder(&pl, gs[i], pl.ranks[r].tp_index, node) != r) continue;
            for (int k = 0; k < nt; k++) {
                const ah_shard_group_t g = ah_shard_group_of(&ts[k]);
                if (g.kind == gs[i].kind && g.layer == gs[i].layer)
                    bytes[node] += 3 * (int64_t)sizeof(float) * ah_tensor_shard_elems(&ts[k], pl.tp);
            }
        }
    }
    free(gs);
    free(ts);
    ah_placement_free(&pl);
    return st;
}

ah_status_t ah_snapshot_check_host(const ah_plan_t *p, int *unchecked, ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    int64_t *bytes = calloc((size_t)c->n_nodes, sizeof *bytes);
    if (!bytes) return ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoint snapshots");
    ah_status_t st = ah_snapshot_node_bytes(p, bytes, err);
    if (unchecked) *unchecked = 0;
    for (int n = 0; st == AH_OK && n < c->n_nodes; n++) {
        const double have = c->nodes[n].host_memory_gib * GIB;
        if (bytes[n] == 0) continue;
        if (have <= 0) {
            if (unchecked) (*unchecked)++;
        } else if ((double)bytes[n] > have) {
            st = ah_error_set(err, AH_ERR_INVALID, "node %s: its ranks' asynchronous checkpoint snapshots need %lld "
                              "bytes (%.2f GiB) of host memory, more than its host_memory_gib %g (%.0f bytes); give the "
                              "node more host memory in the cluster file, or train with --ckpt-sync (no snapshot)",
                              c->nodes[n].name, (long long)bytes[n], (double)bytes[n] / GIB, c->nodes[n].host_memory_gib,
                              have);
        }
    }
    free(bytes);
    return st;
}
