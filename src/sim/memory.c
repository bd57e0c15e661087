/* The memory tier of autohet's replay: in-memory peer replicas as the runtime keeps them with
 * --replica-memory-gb (ckpt/replica.h, runtime/ckpt_notice.c; sim.h and docs/simulator.md rule 8).
 *
 * Holders: node Y's checkpoint is held in the host memory of its partner in the plan
 * (ah_replica_partners: a node in another zone when there is one, the sources spread evenly over the
 * holders), when it fits the
 * holder's budget (ah_replica_fit, each node's bytes taken as one file: the runtime fits file by
 * file, so the simulator is on the conservative side). Every commit of the disks (a periodic
 * checkpoint, a save at a notice) is replicated, so the memory holds the disks' newest state.
 *
 * The save at a notice, memory first: a snapshot of each device's checkpoint into its host's memory
 * (its bytes / snapshot_gb_s, every rank its own in parallel, as the runtime's), then the replication
 * of the leaving nodes' pieces that no staying node holds (recovery.c) to their partners over the
 * network: each pair over one flow a rank of the smaller node (the runtime's lanes, plan/ckpt_traffic.h
 * ah_ckpt_lane_count), each flow at the link's per-GPU rate, the flows sharing a pair's total_gb_s
 * (and the pairs replicating across that pair at once sharing it too). What is left of the save (the disks) follows; the job ends at the removal at the
 * latest (Open MPI 4.1 aborts the job when the leaving host goes) and loses nothing committed.
 *
 * The handover at a notice (the runtime's default with replicas: runtime/ckpt_notice.c,
 * ckpt/handover.h; priced in recovery.c, ah_sim_begin_recovery): the next plan is known while every
 * device is alive, so the save is the snapshot, then each node of the next plan receives, once, each piece its devices read and its own node did not
 * hold (at inter_node_gb_s per device, or over the link from a holder in another zone or region:
 * transfer.c); committed in memory, no disk before the relaunch, which then
 * reads every byte on its own host (transfer 0) and rolls nothing back.
 *
 * Egress: every replication sends each node's checkpoint to its holder; where the two are in two
 * zones or regions, the bytes cross that link and are billed at its $/GB (cost/cost.h ah_link_of),
 * the partner rule's "another zone when there is one" sending them across a region when the plan spans two.
 *
 * Pure: no I/O. Ownership: out-arrays are the caller's. Errors: out of host memory returns -1
 * (ah_sim_memory_save_s, ah_sim_memory_replication) or false (ah_sim_memory_holders).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/replica.h"
#include "cost/cost.h"
#include "plan/ckpt_traffic.h"
#include "sim/replay.h"

bool ah_sim_memory_holders(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                           double budget_gb, int *holder) {
    const int nn = pl->n_nodes;
    const char **zones = calloc((size_t)nn + 1, sizeof *zones);
    int *partner = calloc((size_t)nn + 1, sizeof *partner), *nf = calloc((size_t)nn + 1, sizeof *nf);
    uint64_t *bytes = calloc((size_t)nn + 1, sizeof *bytes), *held = calloc((size_t)nn + 1, sizeof *held);
    uint64_t **sizes = calloc((size_t)nn + 1, sizeof *sizes);
    bool *fit = calloc((size_t)nn + 1, sizeof *fit), **fits = calloc((size_t)nn + 1, sizeof *fits);
    const bool ok = zones && partner && nf && bytes && held && sizes && fit && fits;
    for (int y = 0; ok && y < nn; y++) {
        zones[y] = c->nodes[y].zone;
        holder[y] = -1;
    }
    for (int r = 0; ok && r < pl->n_ranks; r++) bytes[pl->ranks[r].node] += (uint64_t)ckpt_bytes[r];
    const bool placed = ok && ah_replica_partners(pl, zones, partner);
    if (placed) {
        for (int y = 0; y < nn; y++) {
            nf[y] = pl->node_leader[y] >= 0 ? 1 : 0; /* a node's checkpoint, whole */
            sizes[y] = &bytes[y];
            fits[y] = &fit[y];
        }
        ah_replica_fit(nn, partner, nf, sizes, budget_gb > 0 ? (uint64_t)(budget_gb * 1e9) : 0, nn, fits, held);
        for (int y = 0; y < nn; y++)
            if (nf[y] && fit[y]) holder[y] = partner[y];
    }
    free(zones);
    free(partner);
    free(nf);
    free(bytes);
    free(held);
    free(sizes);
    free(fit);
    free(fits);
    return placed;
}

double ah_sim_memory_snapshot_s(const ah_placement_t *pl, const int64_t *ckpt_bytes, const ah_sim_opts_t *o) {
    double snap = 0;
    for (int r = 0; r < pl->n_ranks; r++) {
        const double s = (double)ckpt_bytes[r] / (o->snapshot_gb_s * 1e9); /* each rank its own, in parallel */
        if (s > snap) snap = s;
    }
    return snap;
}

/* bytes[y]: node y's checkpoint, the sum of its devices' (n_nodes + 1 entries, the caller frees); NULL
 * when out of host memory. */
static double *node_bytes(const ah_placement_t *pl, const int64_t *ckpt_bytes) {
    double *bytes = calloc((size_t)pl->n_nodes + 1, sizeof *bytes);
    for (int r = 0; bytes && r < pl->n_ranks; r++) bytes[pl->ranks[r].node] += (double)ckpt_bytes[r];
    return bytes;
}

double ah_sim_memory_send_s(const ah_cluster_t *c, const ah_placement_t *pl, const double *bytes, const int *holder,
                            ah_sim_flows_t *f) {
    ah_ckpt_pair_t *pairs = calloc((size_t)pl->n_nodes + 1, sizeof *pairs);
    int *ranks = calloc((size_t)pl->n_nodes + 1, sizeof *ranks);
    if (!pairs || !ranks) {
        free(pairs);
        free(ranks);
        return -1;
    }
    for (int r = 0; r < pl->n_ranks; r++) ranks[pl->ranks[r].node]++;
    int n = 0;
    for (int y = 0; y < pl->n_nodes; y++) {
        const int h = holder ? holder[y] : -1;
        if (bytes[y] <= 0) continue;
        if (h >= 0) (void)ah_sim_flow(f, y, h, bytes[y]); /* its egress and its pair's share */
        /* one flow a rank of the smaller node (to a node of its zone, h -1: its own ranks) */
        pairs[n++] = (ah_ckpt_pair_t){.from = y, .to = h, .bytes = bytes[y],
                                      .lanes = ah_ckpt_lane_count(ranks[y], h >= 0 ? ranks[h] : ranks[y])};
    }
    ah_ckpt_pairs_in_rounds(pairs, n);
    const double seconds = ah_ckpt_pairs_s(c, pairs, n);
    free(pairs);
    free(ranks);
    return seconds < 0 ? -1 : fmax(seconds, ah_sim_flows_shared_s(f));
}

/* Every node's checkpoint to its holder (held_only: the nodes with a holder alone), ah_sim_memory_send_s. */
static double replicate_s(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                          const int *holder, bool held_only, ah_sim_flows_t *f) {
    double *bytes = node_bytes(pl, ckpt_bytes);
    if (!bytes) return -1;
    for (int y = 0; held_only && y < pl->n_nodes; y++)
        if (!holder || holder[y] < 0) bytes[y] = 0;
    const double seconds = ah_sim_memory_send_s(c, pl, bytes, holder, f);
    free(bytes);
    return seconds;
}

double ah_sim_memory_save_s(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                            const int *holder, const ah_sim_opts_t *o) {
    ah_sim_flows_t f;
    const double send = ah_sim_flows_init(&f, c) ? replicate_s(c, pl, ckpt_bytes, holder, false, &f) : -1;
    ah_sim_flows_free(&f);
    return send < 0 ? -1 : ah_sim_memory_snapshot_s(pl, ckpt_bytes, o) + send;
}

void ah_sim_handed_over(ah_sim_recovery_t *v) {
    v->bytes[AH_TIER_MEMORY] += v->bytes[AH_TIER_PEER] + v->bytes[AH_TIER_CLOUD];
    v->bytes[AH_TIER_PEER] = v->bytes[AH_TIER_CLOUD] = 0;
    for (int t = 0; t < AH_TIER_COUNT; t++) v->tier_s[t] = 0;
    v->transfer_s = 0;
}

double ah_sim_memory_replication(const ah_cluster_t *c, const ah_placement_t *pl, const int64_t *ckpt_bytes,
                                 const int *holder, double *usd, double *bytes_across_regions) {
    ah_sim_flows_t f;
    const double seconds = ah_sim_flows_init(&f, c) ? replicate_s(c, pl, ckpt_bytes, holder, true, &f) : -1;
    *usd = f.usd;
    *bytes_across_regions = f.bytes_across_regions;
    ah_sim_flows_free(&f);
    return seconds;
}
