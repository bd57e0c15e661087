/* Each node's checkpoint bytes, its cloud share and its replica partner (ckpt_traffic.h). */
#include "plan/ckpt_traffic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm/transfer.h"

/* Slot of a tensor's save group in a table of the embedding, the blocks and the head (L + 2). */
static int group_slot(const ah_tensor_t *x, int L) {
    switch (x->spec->layer) {
    case AH_LAYER_EMBED: break;
    case AH_LAYER_BLOCK: return x->block + 1;
    case AH_LAYER_HEAD: return L + 1;
    }
    return 0;
}

/* The save group slots stage s of pl holds, [*lo, *hi): the embedding on the first stage (slot 0),
 * its blocks (slots first + 1 .. last), the head on the last (slot L + 1) (ckpt/placement.h). */
static void stage_slots(const ah_pipeline_t *pl, int s, int L, int *lo, int *hi) {
    *lo = s == 0 ? 0 : pl->stages[s].first + 1;
    *hi = s == pl->n_stages - 1 ? L + 2 : pl->stages[s].last + 1;
}

typedef struct holder {
    int node, pipeline, stage, tp_index;
} holder_t;

static int by_node(const void *a, const void *b) {
    const holder_t *x = a, *y = b;
    return (x->node > y->node) - (x->node < y->node);
}

ah_status_t ah_ckpt_node_bytes(const ah_plan_t *p, int64_t *own, int64_t *cloud, int64_t *files, ah_error_t *err) {
    const int nn = p->cluster.n_nodes, L = (int)p->model.n_layer, tp = p->tp, slots = L + 2;
    memset(own, 0, (size_t)nn * sizeof *own);
    if (files) memset(files, 0, (size_t)nn * sizeof *files);
    if (cloud) memset(cloud, 0, (size_t)nn * sizeof *cloud);
    int nh = 0;
    for (int i = 0; i < p->n_pipelines; i++) nh += p->pipelines[i].n_stages * ah_stage_devices(&p->pipelines[i], tp);
    const int nt = ah_model_tensor_count(&p->model);
    ah_tensor_t *ts = malloc((size_t)nt * sizeof *ts);
    int64_t *group = calloc((size_t)slots, sizeof *group); /* one TP piece of each group, weights + m + v */
    holder_t *hs = malloc((size_t)(nh > 0 ? nh : 1) * sizeof *hs); /* every (stage, device) */
    int *seen = malloc((size_t)slots * (size_t)tp * sizeof *seen); /* [slot][TP index]: the last node that counted it */
    ah_status_t st = ts && group && hs && seen ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to size the checkpoints");
    if (st == AH_OK) ah_model_tensors(&p->model, ts);
    for (int k = 0; st == AH_OK && k < nt; k++)
        group[group_slot(&ts[k], L)] += 3 * (int64_t)sizeof(float) * ah_tensor_shard_elems(&ts[k], tp);
    for (int i = 0, h = 0; st == AH_OK && i < p->n_pipelines; i++) {
        const ah_pipeline_t *pl = &p->pipelines[i];
        for (int s = 0; s < pl->n_stages; s++)
            for (int k = 0, n = ah_stage_devices(pl, tp); k < n; k++) {
                hs[h++] = (holder_t){pl->stages[s].devices[k].node, i, s, k % tp};
                int lo, hi;
                stage_slots(pl, s, L, &lo, &hi);
                for (int g = lo; cloud && i == 0 && k < tp && g < hi; g++) /* the job's lowest holder: pipeline 0, CP rank 0 */
                    cloud[pl->stages[s].devices[k].node] += group[g];
            }
    }
    if (st == AH_OK) { /* a node's own step: each (slot, TP index) its devices hold, once */
        qsort(hs, (size_t)nh, sizeof *hs, by_node);
        for (int k = 0; k < slots * tp; k++) seen[k] = -1;
        for (int h = 0; h < nh; h++) {
            int lo, hi;
            stage_slots(&p->pipelines[hs[h].pipeline], hs[h].stage, L, &lo, &hi);
            for (int g = lo; g < hi; g++)
                if (seen[g * tp + hs[h].tp_index] != hs[h].node) {
                    seen[g * tp + hs[h].tp_index] = hs[h].node;
                    own[hs[h].node] += group[g];
                    if (files) files[hs[h].node]++;
                }
        }
    }
    free(seen);
    free(hs);
    free(group);
    free(ts);
    return st;
}

/* Whether nodes a and b are in one zone (zones NULL: one zone). */
static bool same_zone(const char *const *zones, int a, int b) {
    return !zones || strcmp(zones[a], zones[b]) == 0;
}

/* used[0 .. m - 1]: the used nodes grouped by zone (zones in the order of their first used node, each
 * zone's in node order); returns m; *largest: the most nodes of one zone, used[*at ..] the first such. */
static int used_by_zone(int n_nodes, const int *leader, const char *const *zones, int *used, int *largest, int *at) {
    int m = 0;
    *largest = *at = 0;
    for (int y = 0; y < n_nodes; y++) {
        bool first_of_zone = leader[y] >= 0;
        for (int k = 0; k < m && first_of_zone; k++) first_of_zone = !same_zone(zones, used[k], y);
        if (!first_of_zone) continue;
        const int start = m;
        for (int q = y; q < n_nodes; q++)
            if (leader[q] >= 0 && same_zone(zones, q, y)) used[m++] = q;
        if (m - start > *largest) {
            *largest = m - start;
            *at = start;
        }
    }
    return m;
}

bool ah_ckpt_partners(int n_nodes, const int *leader, const char *const *zones, int *partner) {
    for (int y = 0; y < n_nodes; y++) partner[y] = -1;
    int *used = malloc((size_t)(n_nodes > 0 ? n_nodes : 1) * sizeof *used);
    if (!used) return false;
    int largest, at;
    const int m = used_by_zone(n_nodes, leader, zones, used, &largest, &at), rest = m - largest;
    if (m >= 2 && rest == 0) /* one zone: the next used node */
        for (int k = 0; k < m; k++) partner[used[k]] = used[(k + 1) % m];
    else if (m >= 2 && largest <= rest) /* a shift by the largest zone leaves every zone: one source a holder */
        for (int k = 0; k < m; k++) partner[used[k]] = used[(k + largest) % m];
    else if (m >= 2) { /* zone D (used[at .. at + largest)) has more than half the nodes: D's j-th node to
                        * the (j mod rest)-th of the others, the o-th of those to D's o-th */
#define OTHER(o) used[(o) < at ? (o) : (o) + largest]
        for (int j = 0; j < largest; j++) partner[used[at + j]] = OTHER(j % rest);
        for (int o = 0; o < rest; o++) partner[OTHER(o)] = used[at + o];
#undef OTHER
    }
    free(used);
    return true;
}

static bool pairs_meet(const ah_ckpt_pair_t *a, const ah_ckpt_pair_t *b) {
    return a->from == b->from || a->from == b->to || (a->to >= 0 && (a->to == b->from || a->to == b->to));
}

int ah_ckpt_pairs_in_rounds(ah_ckpt_pair_t *pairs, int n) {
    int placed = 0, rounds = 0;
    for (int round_start = 0; placed < n; round_start = placed) {
        for (int k = placed; k < n; k++) {
            bool free_in_round = pairs[k].bytes > 0;
            for (int j = round_start; j < placed && free_in_round; j++)
                free_in_round = !pairs_meet(&pairs[j], &pairs[k]);
            if (!free_in_round) continue;
            const ah_ckpt_pair_t taken = pairs[k]; /* to the round's end, the rest keeping their order */
            memmove(&pairs[placed + 1], &pairs[placed], (size_t)(k - placed) * sizeof *pairs);
            pairs[placed++] = taken;
        }
        if (placed == round_start) break; /* the rest move nothing */
        rounds++;
    }
    return rounds;
}

double ah_ckpt_pairs_s(const ah_cluster_t *c, const ah_ckpt_pair_t *pairs, int n) {
    double *free_at = calloc((size_t)c->n_nodes + 1, sizeof *free_at), end = 0;
    if (!free_at) return -1;
    for (int k = 0; k < n; k++) {
        const ah_ckpt_pair_t *q = &pairs[k];
        if (q->bytes <= 0) continue;
        const int ty = c->nodes[q->from].type;
        const ah_link_info_t l = q->to >= 0 ? ah_link_of(c, q->from, q->to, ty, c->nodes[q->to].type)
                                            : (ah_link_info_t){.cls = AH_LINK_INTER_NODE, .override = -1,
                                                               .bw = ah_link_bw(c, AH_LINK_INTER_NODE, ty, ty),
                                                               .latency_s = ah_link_latency(c, AH_LINK_INTER_NODE)};
        const double start = q->to >= 0 ? fmax(free_at[q->from], free_at[q->to]) : free_at[q->from];
        const int lanes = q->lanes > 0 ? q->lanes : 1;
        const double lane_bytes = q->bytes / lanes;
        const double done = start + lane_bytes / ah_link_shared_bw(&l, lanes) + ceil(lane_bytes / AH_COMM_FILE_PIECE) * l.latency_s;
        free_at[q->from] = done;
        if (q->to >= 0) free_at[q->to] = done;
        end = fmax(end, done);
    }
    free(free_at);
    return end;
}

int ah_ckpt_lane_count(int ranks_from, int ranks_to) {
    const int n = ranks_from < ranks_to ? ranks_from : ranks_to;
    return n > 1 ? n : 1;
}

bool ah_ckpt_lanes_assign(const uint64_t *sizes, const bool *take, int n, int lanes, int *lane) {
    uint64_t *load = calloc((size_t)(lanes > 0 ? lanes : 1), sizeof *load);
    bool *done = calloc((size_t)(n > 0 ? n : 1), sizeof *done);
    const bool ok = load && done;
    for (int i = 0; i < n; i++) lane[i] = -1;
    while (ok) { /* the largest file not placed yet, to the lightest lane */
        int big = -1, light = 0;
        for (int i = 0; i < n; i++)
            if ((!take || take[i]) && !done[i] && (big < 0 || sizes[i] > sizes[big])) big = i;
        if (big < 0) break;
        for (int k = 1; k < lanes; k++)
            if (load[k] < load[light]) light = k;
        done[big] = true;
        lane[big] = light;
        load[light] += sizes[big];
    }
    free(load);
    free(done);
    return ok;
}

bool ah_ckpt_node_ranks(const ah_plan_t *p, int *ranks) {
    memset(ranks, 0, (size_t)p->cluster.n_nodes * sizeof *ranks);
    const int nd = ah_plan_device_count(p);
    bool *seen = calloc((size_t)(nd > 0 ? nd : 1), sizeof *seen); /* a device of an interleaved pipeline: several stages */
    for (int i = 0; seen && i < p->n_pipelines; i++)
        for (int s = 0; s < p->pipelines[i].n_stages; s++)
            for (int k = 0, n = ah_stage_devices(&p->pipelines[i], p->tp); k < n; k++) {
                const int r = ah_plan_rank_of(p, i, s, k);
                if (r < 0 || r >= nd || seen[r]) continue;
                seen[r] = true;
                ranks[p->pipelines[i].stages[s].devices[k].node]++;
            }
    const bool ok = seen != NULL;
    free(seen);
    return ok;
}
