/* Checkpoint bytes on the links they cross, for the replay (sim/replay.h; the rules in sim.h and
 * docs/simulator.md): a move between two nodes, or between a node and the cloud tier's bucket, is
 * timed and billed on its link (cost/cost.h ah_link_of).
 *
 * - Between nodes: inside a zone at inter_node_gb_s per device (as the replay has always moved
 *   peer and memory bytes); across a zone or region at that link's per-GPU bandwidth, billed at its
 *   $/GB. Sharing: one device's reads run one after the other at one GPU's share each; the flows
 *   of one phase (a handover, a recovery's peer or memory or cloud reads) that cross one "links"
 *   pair with a total_gb_s share it, so the phase lasts at least their bytes over that total
 *   (ah_sim_flows_shared_s).
 * - The cloud tier: the bucket is in one region (opts cloud_region, else the first node's);
 *   a node in that region moves at cloud_gb_s (per node, as before), a node in another region at the
 *   least of cloud_gb_s and the link to the bucket's region (its per-GPU bandwidth x the node's
 *   GPUs), billed at that link's $/GB. Object storage is regional: moving between zones of its region
 *   is neither slowed nor billed here (S3's pricing).
 * - Uploads: every periodic checkpoint puts each (layer, TP shard) once, from its lowest holder in
 *   the job (ckpt/placement.h, the runtime's uploader), every node its own at once at the cloud rate
 *   above; the bytes a holder in another region sends pay the link's $/GB (ah_sim_upload). They run
 *   in the background and hold no training, but the cloud holds the checkpoint only when its upload
 *   ends (sim.c ah_sim_uploads_settle): one upload at a time, the newest checkpoint next; its
 *   egress is paid when it starts, and a restart cuts it (ah_sim_uploads_cut: pays what it sent).
 *
 * Pure: no I/O. Errors: ah_sim_flows_init returns false when out of host memory; an unknown
 * cloud region is refused naming the regions.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "sim/replay.h"

bool ah_sim_flows_init(ah_sim_flows_t *f, const ah_cluster_t *c) {
    memset(f, 0, sizeof *f);
    f->c = c;
    f->pair_bytes = calloc((size_t)c->net.n_links + 1, sizeof *f->pair_bytes);
    return f->pair_bytes != NULL;
}

void ah_sim_flows_free(ah_sim_flows_t *f) {
    free(f->pair_bytes);
    f->pair_bytes = NULL;
}

/* Records bytes on link l: its egress, the bytes across a region, its pair's share. */
static void record(ah_sim_flows_t *f, const ah_link_info_t *l, double bytes) {
    f->usd += bytes / 1e9 * l->usd_per_gb;
    if (l->cls == AH_LINK_INTER_REGION) f->bytes_across_regions += bytes;
    if (l->override >= 0 && l->total_bw > 0) f->pair_bytes[l->override] += bytes;
}

double ah_sim_flow(ah_sim_flows_t *f, int from, int to, double bytes) {
    const ah_cluster_t *c = f->c;
    const ah_link_info_t l = ah_link_of(c, from, to, c->nodes[from].type, c->nodes[to].type);
    if (l.cls < AH_LINK_INTER_ZONE) return bytes / (c->net.inter_node_gb_s * 1e9);
    record(f, &l, bytes);
    return bytes / l.bw;
}

double ah_sim_flows_shared_s(const ah_sim_flows_t *f) {
    double s = 0;
    for (int k = 0; k < f->c->net.n_links; k++)
        if (f->pair_bytes[k] > 0) s = fmax(s, f->pair_bytes[k] / (f->c->net.links[k].total_gb_s * 1e9));
    return s;
}

double ah_sim_cloud_flow(ah_sim_flows_t *f, int node, int bucket, double bytes) {
    const ah_cluster_t *c = f->c;
    double rate = c->net.cloud_gb_s * 1e9;
    if (bucket >= 0 && bytes > 0) {
        const ah_link_info_t l = ah_link_of(c, node, bucket, c->nodes[node].type, c->nodes[bucket].type);
        if (l.cls == AH_LINK_INTER_REGION) {
            record(f, &l, bytes);
            rate = fmin(rate, l.bw * (c->nodes[node].count > 0 ? c->nodes[node].count : 1));
        }
    }
    return bytes / rate;
}

ah_status_t ah_sim_cloud_node(const ah_cluster_t *c, const ah_sim_opts_t *o, int *bucket, ah_error_t *err) {
    *bucket = -1;
    if (c->n_nodes == 0) return AH_OK;
    const char *want = o->cloud_region[0] ? o->cloud_region : c->nodes[0].region;
    char have[512];
    ah_str_t s = ah_str_fixed(have, sizeof have);
    for (int i = 0; i < c->n_nodes; i++) {
        if (strcmp(c->nodes[i].region, want) == 0) {
            *bucket = ah_cluster_region_count(c) > 1 ? i : -1; /* one region: nothing crosses */
            return AH_OK;
        }
        bool first = true;
        for (int j = 0; j < i && first; j++) first = strcmp(c->nodes[j].region, c->nodes[i].region) != 0;
        if (first) ah_str_appendf(&s, "%s%s", s.len ? ", " : "", c->nodes[i].region);
    }
    return ah_error_set(err, AH_ERR_USAGE, "--cloud-region \"%s\": no node of the cluster is in it; its regions are %s",
                        want, have);
}

bool ah_sim_upload(const ah_cluster_t *c, const ah_model_t *m, int bucket, ah_sim_entry_t *e) {
    const ah_placement_t *pl = &e->place;
    double *node = calloc((size_t)c->n_nodes + 1, sizeof *node);
    ah_sim_flows_t f;
    const bool ok = ah_sim_flows_init(&f, c) && node;
    const int L = (int)m->n_layer;
    for (int l = 0; ok && l <= L + 1; l++) {
        const ah_shard_group_t g = ah_sim_layer_group(l, L);
        const double lb = (double)ah_layer_params(m, ah_shard_group_layer(g), pl->tp) * AH_SIM_CKPT_BYTES_PER_PARAM;
        for (int k = 0; k < pl->tp; k++) {
            const int r = ah_placement_lowest_holder(pl, g, k, -1);
            if (r >= 0) node[pl->ranks[r].node] += lb;
        }
    }
    e->upload_s = 0;
    for (int n = 0; ok && n < c->n_nodes; n++) e->upload_s = fmax(e->upload_s, ah_sim_cloud_flow(&f, n, bucket, node[n]));
    if (ok) {
        e->upload_s = fmax(e->upload_s, ah_sim_flows_shared_s(&f));
        e->upload_usd = f.usd;
        e->upload_wan_bytes = f.bytes_across_regions;
    }
    ah_sim_flows_free(&f);
    free(node);
    return ok;
}
