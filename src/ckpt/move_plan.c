/* The in-place move's slice plan (move_plan.h). */
#include "ckpt/move_plan.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define GIB 1073741824.0

#include "ckpt/reshard.h"

int64_t ah_move_group_floats(const ah_model_t *m, ah_shard_group_t g, int T) {
    const int n = ah_model_tensor_count(m);
    ah_tensor_t *ts = malloc((size_t)n * sizeof *ts);
    int64_t sum = 0;
    if (!ts) return -1;
    ah_model_tensors(m, ts);
    for (int i = 0; i < n; i++) {
        const ah_shard_group_t h = ah_shard_group_of(&ts[i]);
        if (h.kind == g.kind && h.layer == g.layer) sum += 3 * ah_tensor_shard_elems(&ts[i], T);
    }
    free(ts);
    return sum;
}

/* The old rank that has sent the least so far (sent[]), the lowest on a tie, among those that hold (g, piece)
 * (any: holds false) and stay (only those: stays true); -1 when none. */
static int least_sent(const ah_placement_t *from, const int *to_rank, ah_shard_group_t g, int piece, bool holds,
                      bool stays, const int64_t *sent) {
    int best = -1;
    for (int r = 0; r < from->n_ranks; r++)
        if ((!stays || to_rank[r] >= 0) && (!holds || ah_placement_holds(from, r, g, piece)) &&
            (best < 0 || sent[r] < sent[best]))
            best = r;
    return best;
}

/* The old rank that sends (g, piece) to dst: dst itself when it holds it, else the holder that has sent
 * the least so far (sent[], updated); -1 when none holds it. dst -1 (a joining process): a holder that stays
 * (to_rank[r] >= 0), else (*via: a leaving holder) the staying rank that relays it (both counted in sent[]). */
static int source_of(const ah_placement_t *from, const int *to_rank, ah_shard_group_t g, int piece, int dst,
                     int64_t floats, int64_t *sent, int *via) {
    *via = -1;
    if (dst >= 0 && ah_placement_holds(from, dst, g, piece)) return dst;
    int best = least_sent(from, to_rank, g, piece, true, dst < 0, sent);
    if (best < 0 && dst < 0 && (*via = least_sent(from, to_rank, g, piece, true, false, sent)) >= 0) {
        sent[*via] += floats;
        best = least_sent(from, to_rank, g, piece, false, true, sent);
    }
    if (best >= 0) sent[best] += floats;
    return best;
}

/* old_of[n] for every new rank n: the old rank that runs it, -1 a joining process (join); AH_ERR_INVALID when not
 * one each (join: at most one). */
static ah_status_t invert(const ah_placement_t *from, const ah_placement_t *to, const int *to_rank, bool join,
                          int *old_of, ah_error_t *err) {
    for (int n = 0; n < to->n_ranks; n++) old_of[n] = -1;
    for (int r = 0; r < from->n_ranks; r++) {
        const int n = to_rank[r];
        if (n < -1 || n >= to->n_ranks || (n >= 0 && old_of[n] >= 0))
            return ah_error_set(err, AH_ERR_INVALID, "the move: old rank %d is given new rank %d, which is %s", r, n,
                                n >= to->n_ranks || n < -1 ? "not a rank of the new plan" : "another old rank's too");
        if (n >= 0) old_of[n] = r;
    }
    for (int n = 0; n < to->n_ranks && !join; n++)
        if (old_of[n] < 0)
            return ah_error_set(err, AH_ERR_INVALID, "the move: no old rank runs new rank %d (a new process: the "
                                "state comes through the checkpoint)", n);
    return AH_OK;
}

static ah_status_t build(const ah_model_t *m, const ah_placement_t *from, const ah_placement_t *to, const int *to_rank,
                         bool join, ah_move_plan_t *out, ah_error_t *err) {
    memset(out, 0, sizeof *out);
    const int T = from->tp, cap_items = to->n_ranks * to->max_groups * AH_RESHARD_MAX_PIECES;
    int *old_of = malloc((size_t)to->n_ranks * sizeof *old_of), idx[AH_RESHARD_MAX_PIECES];
    int64_t *sent = calloc((size_t)from->n_ranks, sizeof *sent);
    ah_shard_group_t *gs = malloc((size_t)to->max_groups * sizeof *gs);
    out->items = malloc((size_t)cap_items * sizeof *out->items);
    ah_status_t st = old_of && sent && gs && out->items ? AH_OK
        : ah_error_set(err, AH_ERR_OOM, "no host memory for the move's plan");
    if (st == AH_OK) st = invert(from, to, to_rank, join, old_of, err);
    for (int n = 0; n < to->n_ranks && st == AH_OK; n++) {
        const int dst = old_of[n], ng = ah_placement_groups(to, n, true, gs);
        for (int gi = 0; gi < ng && st == AH_OK; gi++) {
            const int nf = ah_reshard_pieces(m, gs[gi], T, to->tp, to->ranks[n].tp_index, idx);
            const int64_t floats = ah_move_group_floats(m, gs[gi], T);
            if (floats < 0) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the model's tensor table");
            for (int j = 0; j < nf && st == AH_OK; j++) {
                int via;
                const int src = source_of(from, to_rank, gs[gi], idx[j], dst, floats, sent, &via);
                if (src < 0) {
                    char name[AH_CKPT_NAME_MAX];
                    ah_shard_group_name(name, gs[gi], T, idx[j]);
                    st = ah_error_set(err, AH_ERR_INVALID, "the move: no rank of the old plan %s %s, which %s rank %d "
                                      "loads", via >= 0 ? "stays to relay" : "holds", name,
                                      dst < 0 ? "the joining" : "new", n);
                    break;
                }
                out->items[out->n++] = (ah_move_item_t){dst, src, n, gs[gi], idx[j], gi, floats, via};
                *(src == dst ? &out->kept_floats : &out->moved_floats) += floats * (via >= 0 ? 2 : 1);
            }
        }
    }
    free(old_of);
    free(sent);
    free(gs);
    if (st != AH_OK) ah_move_plan_free(out);
    return st;
}

ah_status_t ah_move_plan_build(const ah_model_t *m, const ah_placement_t *from, const ah_placement_t *to,
                               const int *to_rank, ah_move_plan_t *out, ah_error_t *err) {
    return build(m, from, to, to_rank, false, out, err);
}

ah_status_t ah_move_plan_build_join(const ah_model_t *m, const ah_placement_t *from, const ah_placement_t *to,
                                    const int *to_rank, ah_move_plan_t *out, ah_error_t *err) {
    return build(m, from, to, to_rank, true, out, err);
}

void ah_move_plan_host_bytes(const ah_model_t *m, const ah_move_plan_t *mp, const ah_placement_t *from,
                             const ah_placement_t *to, bool views, int64_t *old_bytes, int64_t *new_bytes) {
    memset(old_bytes, 0, (size_t)from->n_nodes * sizeof *old_bytes);
    memset(new_bytes, 0, (size_t)to->n_nodes * sizeof *new_bytes);
    ah_shard_group_t *gs = views ? malloc((size_t)from->max_groups * sizeof *gs) : NULL;
    for (int r = 0; gs && r < from->n_ranks; r++) { /* the old stage's host copy: w, m, v of what it holds */
        const int ng = ah_placement_groups(from, r, true, gs);
        for (int i = 0; i < ng; i++) old_bytes[from->ranks[r].node] += ah_move_group_floats(m, gs[i], from->tp) * 4;
    }
    free(gs);
    for (int i = 0; i < mp->n; i++) {
        const ah_move_item_t *it = &mp->items[i];
        const int64_t b = it->floats * (int64_t)sizeof(float);
        if (it->dst >= 0 && it->src == it->dst) continue; /* kept: read from the old stage */
        old_bytes[from->ranks[it->src].node] += b;          /* the sender's packed copy; a relay's buffer */
        if (it->via >= 0) old_bytes[from->ranks[it->via].node] += b; /* the leaver's packed copy */
        if (it->dst >= 0) old_bytes[from->ranks[it->dst].node] += b; /* the receiver's buffer */
        else new_bytes[to->ranks[it->to].node] += b;                 /* the joining rank's */
    }
}

/* AH_ERR_INVALID naming the parts when node cannot hold the move's buffers (views: with the old stage's host copy)
 * and what it holds besides within its host_memory_gib. */
static ah_status_t node_fits(const ah_node_t *node, int64_t move, bool views, int64_t held, ah_error_t *err) {
    const double have = node->host_memory_gib * GIB;
    if (have <= 0 || (double)(move + held) <= have) return AH_OK;
    return ah_error_set(err, AH_ERR_INVALID, "node %s's host memory: the move's buffers (%lld bytes: copies sent, "
                        "buffers received%s) and snapshots and replicas (%lld bytes) need %lld, over its "
                        "host_memory_gib %g (%.0f bytes)", node->name, (long long)move,
                        views ? ", the stage's host copy" : "", (long long)held,
                        (long long)(move + held), node->host_memory_gib, have);
}

ah_status_t ah_move_plan_host_check(const ah_move_plan_t *mp, const ah_plan_t *old_plan, const ah_placement_t *from,
                                    const ah_plan_t *new_plan, const ah_placement_t *to, const int64_t *held,
                                    bool views, ah_error_t *err) {
    const ah_cluster_t *oc = &old_plan->cluster, *nc = &new_plan->cluster;
    int64_t *ob = calloc((size_t)from->n_nodes + 1, sizeof *ob), *nb = calloc((size_t)to->n_nodes + 1, sizeof *nb);
    ah_status_t st = ob && nb ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory to size the move's buffers");
    if (st == AH_OK) ah_move_plan_host_bytes(&old_plan->model, mp, from, to, views, ob, nb);
    for (int m = 0; st == AH_OK && m < nc->n_nodes && m < to->n_nodes; m++) { /* a joining rank on an old node */
        int n = 0;
        while (n < oc->n_nodes && strcmp(oc->nodes[n].name, nc->nodes[m].name) != 0) n++;
        if (n < oc->n_nodes && n < from->n_nodes) ob[n] += nb[m], nb[m] = 0;
    }
    for (int n = 0; st == AH_OK && n < oc->n_nodes && n < from->n_nodes; n++)
        st = node_fits(&oc->nodes[n], ob[n], views, held ? held[n] : 0, err);
    for (int m = 0; st == AH_OK && m < nc->n_nodes && m < to->n_nodes; m++) st = node_fits(&nc->nodes[m], nb[m], false, 0, err);
    free(ob);
    free(nb);
    return st;
}

void ah_move_plan_free(ah_move_plan_t *p) {
    free(p->items);
    memset(p, 0, sizeof *p);
}
