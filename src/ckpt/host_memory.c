/* Snapshot bytes per node, and the host-memory rule (host_memory.h). */
#include "ckpt/host_memory.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/async.h"
#include "ckpt/placement.h"
#include "ckpt/replica.h"
#include "plan/ckpt_traffic.h"

#define GIB 1073741824.0

ah_status_t ah_snapshot_node_bytes(const ah_plan_t *p, int64_t *bytes, ah_error_t *err) {
    int64_t *files = calloc((size_t)p->cluster.n_nodes + 1, sizeof *files);
    ah_status_t st = files ? ah_ckpt_node_bytes(p, bytes, NULL, files, err) /* what the node's ranks write */
                           : ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoint snapshots");
    for (int n = 0; st == AH_OK && n < p->cluster.n_nodes; n++) bytes[n] += files[n] * AH_CKPT_SNAP_PAD; /* the layout's */
    free(files);
    return st;
}

ah_status_t ah_replica_node_bytes(const ah_plan_t *p, double replica_gb, int64_t *bytes, ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    int64_t *own = calloc((size_t)c->n_nodes + 1, sizeof *own);
    int *partner = calloc((size_t)c->n_nodes + 1, sizeof *partner);
    const char **zones = calloc((size_t)c->n_nodes + 1, sizeof *zones);
    ah_placement_t pl = {0};
    ah_status_t st = own && partner && zones ? ah_ckpt_node_bytes(p, own, NULL, NULL, err) /* the files' bytes */
                                             : ah_error_set(err, AH_ERR_OOM, "no host memory to size the replicas");
    if (st == AH_OK) st = ah_placement_build(p, NULL, 0, &pl, err);
    for (int n = 0; st == AH_OK && n < c->n_nodes; n++) zones[n] = c->nodes[n].zone;
    if (st == AH_OK && !ah_replica_partners(&pl, zones, partner))
        st = ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas' holders");
    const int64_t budget = (int64_t)(replica_gb * 1e9);
    for (int n = 0; st == AH_OK && n < c->n_nodes; n++) bytes[n] = 0;
    for (int y = 0; st == AH_OK && replica_gb > 0 && y < c->n_nodes; y++)
        if (partner[y] >= 0) bytes[partner[y]] += own[y];
    for (int n = 0; st == AH_OK && replica_gb > 0 && n < c->n_nodes; n++) {
        if (bytes[n] > budget) bytes[n] = budget;
        bytes[n] += own[n]; /* its own copy of a notice's step */
    }
    ah_placement_free(&pl);
    free(own);
    free(partner);
    free(zones);
    return st;
}

ah_status_t ah_host_memory_check(const ah_plan_t *p, bool snapshots, double replica_gb, int *unchecked,
                                 ah_error_t *err) {
    const ah_cluster_t *c = &p->cluster;
    int64_t *snap = calloc((size_t)c->n_nodes + 1, sizeof *snap), *rep = calloc((size_t)c->n_nodes + 1, sizeof *rep);
    ah_status_t st = snap && rep ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoint snapshots");
    if (st == AH_OK && snapshots) st = ah_snapshot_node_bytes(p, snap, err);
    if (st == AH_OK && replica_gb > 0) st = ah_replica_node_bytes(p, replica_gb, rep, err);
    if (unchecked) *unchecked = 0;
    for (int n = 0; st == AH_OK && n < c->n_nodes; n++) {
        const double have = c->nodes[n].host_memory_gib * GIB;
        const int64_t need = snap[n] + rep[n];
        if (need == 0) continue;
        if (have <= 0) {
            if (unchecked) (*unchecked)++;
        } else if ((double)need > have && rep[n] == 0) {
            st = ah_error_set(err, AH_ERR_INVALID, "node %s: its ranks' asynchronous checkpoint snapshots need %lld "
                              "bytes (%.2f GiB) of host memory, more than its host_memory_gib %g (%.0f bytes); give the "
                              "node more host memory in the cluster file, or train with --ckpt-sync (no snapshot)",
                              c->nodes[n].name, (long long)need, (double)need / GIB, c->nodes[n].host_memory_gib, have);
        } else if ((double)need > have) {
            st = ah_error_set(err, AH_ERR_INVALID, "node %s: its asynchronous checkpoint snapshots (%lld bytes) and "
                              "in-memory replicas (%lld bytes: what it holds of its partners' steps, at most "
                              "--replica-memory-gb, and its own copy of a notice's step) need %lld bytes (%.2f GiB) of "
                              "host memory, more than its host_memory_gib %g (%.0f bytes); give the node more host "
                              "memory, or a smaller --replica-memory-gb", c->nodes[n].name, (long long)snap[n],
                              (long long)rep[n], (long long)need, (double)need / GIB, c->nodes[n].host_memory_gib, have);
        }
    }
    free(snap);
    free(rep);
    return st;
}

ah_status_t ah_host_memory_node_bytes(const ah_plan_t *p, bool snapshots, double replica_gb, int64_t *bytes,
                                      ah_error_t *err) {
    int64_t *rep = calloc((size_t)p->cluster.n_nodes + 1, sizeof *rep);
    ah_status_t st = rep ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoint snapshots");
    for (int n = 0; n < p->cluster.n_nodes; n++) bytes[n] = 0;
    if (st == AH_OK && snapshots) st = ah_snapshot_node_bytes(p, bytes, err);
    if (st == AH_OK && replica_gb > 0) st = ah_replica_node_bytes(p, replica_gb, rep, err);
    for (int n = 0; st == AH_OK && replica_gb > 0 && n < p->cluster.n_nodes; n++) bytes[n] += rep[n];
    free(rep);
    return st;
}

ah_status_t ah_snapshot_check_host(const ah_plan_t *p, int *unchecked, ah_error_t *err) {
    return ah_host_memory_check(p, true, 0, unchecked, err);
}
