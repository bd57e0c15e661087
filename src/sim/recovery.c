/* What a (re)start costs in a replay (sim/replay.h; the rules in sim.h and docs/simulator.md): the
 * stop at a notice (the step finishing, the save to the disks or memory first, the handover), the
 * transfer of the state onto the next plan by tier (local, peer, memory, cloud: who held what is the
 * runtime's shard placement, ckpt/placement.h), and how far the run rolls back. Errors: out of host
 * memory sets x->oom. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/placement.h"
#include "core/vec.h"
#include "elastic/join_rule.h"
#include "plan/ckpt_traffic.h"
#include "sim/replay.h"

#define AH_SIM_ADMIT_STEPS 2    /* the agent's JOIN_STEPS (agent_inplace_join.c): the step under way and the change's */
#define AH_SIM_ADMIT_MIN_S 1.0  /* its NOTICE_ADMIT_MIN_S: the least admission wait a notice's change asks */

static ah_layer_kind_t layer_kind(int layer, int L) {
    return layer == 0 ? AH_LAYER_EMBED : layer == L + 1 ? AH_LAYER_HEAD : AH_LAYER_BLOCK;
}

/* Appends an empty record at x->t; NULL when out of host memory. */
static ah_sim_recovery_t *rec_push(ah_sim_replay_t *x, const char *label, const char *arg) {
    ah_sim_result_t *r = x->r;
    if (!ah_grow(&r->recs, &x->cap_recs, r->n_recs + 1, sizeof *r->recs)) {
        x->oom = true;
        return NULL;
    }
    ah_sim_recovery_t *v = &r->recs[r->n_recs++];
    memset(v, 0, sizeof *v);
    v->t_s = x->t;
    snprintf(v->event, sizeof v->event, label, arg);
    return v;
}

/* The save at the notice: a sharded plan's all-gather of the moments, then every node writes its
 * devices' checkpoints to its own disk, in parallel. */
static double save_s(ah_sim_replay_t *x, const ah_sim_entry_t *from) {
    double *node = calloc((size_t)x->c->n_nodes + 1, sizeof(double)), worst = 0;
    if (!node) {
        x->oom = true;
        return 0;
    }
    for (int i = 0; i < from->place.n_ranks; i++) node[from->place.ranks[i].node] += (double)from->ckpt_bytes[i];
    for (int n = 0; n < x->c->n_nodes; n++)
        if (node[n] > worst) worst = node[n];
    free(node);
    return from->gather_s + worst / (x->o->disk_gb_s * 1e9);
}

/* The node a device on `node` reads shard group g at TP indices k0 .. k1 - 1 of the state plan `was`
 * from: for each index the source on the nearest link (its own node, its zone, its region, another)
 * among the nodes whose `alive` is set (NULL: all; a peer read: the state plan's nodes that still
 * hold it, holder NULL; a memory read: the nodes whose pieces a surviving host's memory holds,
 * holder[n] that host), the farthest of those over the indices; -1 when none holds one. */
static int nearest_source(const ah_cluster_t *c, const ah_placement_t *was, ah_shard_group_t g, int k0, int k1,
                          int node, const bool *alive, const int *holder) {
    int from = -1;
    ah_link_t from_cls = AH_LINK_INTRA;
    for (int k = k0; k < k1; k++) {
        int best = -1;
        ah_link_t best_cls = AH_LINK_INTER_REGION;
        for (int j = 0; j < was->n_ranks; j++) {
            const int o = was->ranks[j].node, n = holder ? holder[o] : o;
            if ((alive && !alive[o]) || !ah_placement_holds(was, j, g, k)) continue;
            const ah_link_t cls = ah_link_between(c, n, node);
            if (best < 0 || cls < best_cls) {
                best = n;
                best_cls = cls;
            }
            if (best_cls == AH_LINK_INTRA) break;
        }
        if (best < 0) return -1;
        if (from < 0 || best_cls > from_cls) {
            from = best;
            from_cls = best_cls;
        }
    }
    return from;
}

/* Whether the cluster's nodes are in more than one zone (a read may then cross one). */
static bool several_zones(const ah_cluster_t *c) {
    for (int n = 1; n < c->n_nodes; n++)
        if (strcmp(c->nodes[n].zone, c->nodes[0].zone) != 0 || strcmp(c->nodes[n].region, c->nodes[0].region) != 0)
            return true;
    return false;
}

/* One device's reads of a tier: the bytes moved on their links (ah_sim_flow) and their seconds. */
typedef struct {
    int64_t bytes;
    double seconds;
} reads_t;

/* The piece lb of group g at TP indices k0 .. k1 - 1 read by a device on `node` from its nearest source
 * (nearest_source), on the link between them, into *r; only where the cluster has several zones (else
 * the remainder's inter-node rate prices it, as every byte inside a zone is). */
static void read_piece(const ah_sim_replay_t *x, ah_sim_flows_t *f, reads_t *r, bool zones, const ah_placement_t *was,
                       ah_shard_group_t g, int k0, int k1, int node, const bool *alive, const int *holder, int64_t lb) {
    const int from = zones ? nearest_source(x->c, was, g, k0, k1, node, alive, holder) : -1;
    if (from < 0) return;
    r->seconds += ah_sim_flow(f, from, node, (double)lb);
    r->bytes += lb;
}

/* A tier's seconds for one device: its reads on their links plus the rest of `total` at inter_node_gb_s. */
static double tier_seconds(const ah_cluster_t *c, const reads_t *r, int64_t total) {
    return r->seconds + (double)(total > r->bytes ? total - r->bytes : 0) / (c->net.inter_node_gb_s * 1e9);
}

/* Seconds to move the state onto plan `to`, with bytes and seconds per tier in v (and the egress of
 * what crossed a zone or region), and whether some of it comes from the cloud, i.e. the run rolls
 * back to the last periodic checkpoint. */
static double transfer_s(ah_sim_replay_t *x, const ah_sim_entry_t *to, ah_sim_recovery_t *v, bool *rollback) {
    *rollback = !x->fresh;
    if (x->fresh) return 0;
    const ah_cluster_t *c = x->c;
    const int L = (int)x->model->n_layer;
    const bool local_first = ah_sim_agent_policy(x->pol) && x->state;
    const bool zones = several_zones(c);
    double *cloud = calloc((size_t)c->n_nodes + 1, sizeof(double));
    ah_sim_flows_t fp, fm, fc; /* peer, memory, cloud */
    const bool got_p = ah_sim_flows_init(&fp, c), got_m = ah_sim_flows_init(&fm, c), got_c = ah_sim_flows_init(&fc, c);
    const bool flows = got_p && got_m && got_c; /* each initialised, so each freed below */
    double peer_max = 0, mem_max = 0, cloud_max = 0;
    bool lost = false;
    const ah_placement_t *was = local_first ? &x->state->place : NULL;
    /* the memory tier: a node's pieces survive in memory while the node holding its replica holds */
    /* (without periodic replication, only while the memory holds the disks' newest state: a notice's) */
    /* and never a state older than the cloud's newest: a resume takes the newest step whose every piece some tier
     * holds (docs/checkpoints.md), and the cloud holds whole steps (until session 25 a memory state left older by
     * plans that did not replicate was read, rolling back past the cloud's step: bench/sim_chaos.py grace-0-mem) */
    ah_sim_uploads_settle(x);
    const bool mem_current = (!x->state || !x->state->periodic_off || x->at_mem.train_s >= x->at_disk.train_s) &&
                             x->at_mem.train_s >= x->at_cloud.train_s;
    bool *in_mem = local_first && x->state->holder && mem_current ? calloc((size_t)c->n_nodes + 1, sizeof *in_mem)
                                                                  : NULL;
    if (!cloud || !flows || (local_first && x->state->holder && mem_current && !in_mem)) x->oom = true;
    for (int n = 0; in_mem && n < c->n_nodes; n++) in_mem[n] = x->state->holder[n] >= 0 && x->holds[x->state->holder[n]];
    for (int i = 0; !x->oom && i < to->place.n_ranks; i++) {
        const ah_shard_holder_t *d = &to->place.ranks[i];
        int64_t b_cloud = 0, b_local = 0, b_mem = 0;
        reads_t peer = {0}, mem = {0}; /* on their links */
        if (!local_first) b_cloud = to->ckpt_bytes[i];
        else
            for (int l = 0; l <= L + 1; l++) {
                const ah_shard_group_t g = ah_sim_layer_group(l, L);
                if (!ah_placement_holds(&to->place, i, g, d->tp_index)) continue;
                const int64_t lb = ah_layer_params(x->model, layer_kind(l, L), to->tp) * AH_SIM_CKPT_BYTES_PER_PARAM;
                /* on a surviving device of the state; resharding needs every old shard somewhere */
                const bool same_tp = to->tp == was->tp;
                bool avail = !same_tp || ah_placement_survives(was, g, d->tp_index, x->holds);
                for (int k = 0; !same_tp && avail && k < was->tp; k++) avail = ah_placement_survives(was, g, k, x->holds);
                bool local = false;
                for (int j = 0; same_tp && !local && j < was->n_ranks; j++) {
                    const ah_shard_holder_t *o = &was->ranks[j];
                    local = o->node == d->node && o->index == d->index && x->holds[o->node] &&
                            ah_placement_holds(was, j, g, d->tp_index);
                }
                bool in_memory = !local && !avail && in_mem;
                for (int k = 0; in_memory && k < (same_tp ? 1 : was->tp); k++)
                    in_memory = ah_placement_survives(was, g, same_tp ? d->tp_index : k, in_mem);
                const int k0 = same_tp ? d->tp_index : 0, k1 = same_tp ? d->tp_index + 1 : was->tp;
                if (local) b_local += lb;
                else if (in_memory) {
                    b_mem += lb;
                    read_piece(x, &fm, &mem, zones, was, g, k0, k1, d->node, in_mem, x->state->holder, lb);
                } else if (!avail) {
                    b_cloud += lb;
                    lost = true;
                } else
                    read_piece(x, &fp, &peer, zones, was, g, k0, k1, d->node, x->holds, NULL, lb);
            }
        int64_t b_peer = to->ckpt_bytes[i] - b_cloud - b_local - b_mem;
        if (b_peer < 0) b_peer = 0;
        v->bytes[AH_TIER_LOCAL] += b_local;
        v->bytes[AH_TIER_PEER] += b_peer;
        v->bytes[AH_TIER_CLOUD] += b_cloud;
        v->bytes[AH_TIER_MEMORY] += b_mem;
        cloud[d->node] += (double)b_cloud;
        peer_max = fmax(peer_max, tier_seconds(c, &peer, b_peer));
        mem_max = fmax(mem_max, tier_seconds(c, &mem, b_mem));
    }
    free(in_mem);
    for (int n = 0; !x->oom && n < c->n_nodes; n++) cloud_max = fmax(cloud_max, ah_sim_cloud_flow(&fc, n, x->bucket, cloud[n]));
    free(cloud);
    if (flows) { /* each phase at least its pairs' bytes over their shared capacity; its egress paid */
        peer_max = fmax(peer_max, ah_sim_flows_shared_s(&fp));
        mem_max = fmax(mem_max, ah_sim_flows_shared_s(&fm));
        cloud_max = fmax(cloud_max, ah_sim_flows_shared_s(&fc));
        v->egress_usd += fp.usd + fm.usd + fc.usd;
        v->bytes_across_regions += (int64_t)(fp.bytes_across_regions + fm.bytes_across_regions + fc.bytes_across_regions);
    }
    ah_sim_flows_free(&fp);
    ah_sim_flows_free(&fm);
    ah_sim_flows_free(&fc);
    v->tier_s[AH_TIER_PEER] = peer_max;
    v->tier_s[AH_TIER_CLOUD] = cloud_max;
    v->tier_s[AH_TIER_MEMORY] = mem_max;
    *rollback = !local_first || lost;
    return cloud_max + peer_max + mem_max;
}

bool ah_sim_handover_moved(const ah_cluster_t *c, const ah_model_t *m, const ah_placement_t *was,
                           const ah_placement_t *next, ah_sim_flows_t *f, double *moved) {
    const int L = (int)m->n_layer, nn = c->n_nodes;
    const bool zones = f && several_zones(c);
    bool *counted = calloc((size_t)nn * (size_t)(L + 2) * (size_t)was->tp + 1, sizeof *counted); /* [node][layer][old TP index] */
    if (!counted) return false;
    for (int p = 0; p < nn * nn; p++) moved[p] = 0;
    for (int i = 0; i < next->n_ranks; i++) {
        const ah_shard_holder_t *d = &next->ranks[i];
        for (int l = 0; l <= L + 1; l++) {
            const ah_shard_group_t g = ah_sim_layer_group(l, L);
            if (!ah_placement_holds(next, i, g, d->tp_index)) continue;
            const int64_t piece = ah_layer_params(m, layer_kind(l, L), was->tp) * AH_SIM_CKPT_BYTES_PER_PARAM;
            const bool same_tp = next->tp == was->tp;
            for (int k = same_tp ? d->tp_index : 0; k < (same_tp ? d->tp_index + 1 : was->tp); k++) {
                bool *once = &counted[((size_t)d->node * (size_t)(L + 2) + (size_t)l) * (size_t)was->tp + (size_t)k];
                if (*once) continue; /* another device of its node reads it: sent to the node once */
                *once = true;
                const int src = nearest_source(c, was, g, k, k + 1, d->node, NULL, NULL);
                if (src < 0 || src == d->node) continue; /* on its own host: read in place */
                if (zones) (void)ah_sim_flow(f, src, d->node, (double)piece);
                moved[src * nn + d->node] += (double)piece;
            }
        }
    }
    free(counted);
    return true;
}

/* The handover's seconds (ah_sim_handover_moved's bytes): the runtime sends them node pair by node pair
 * in one order (source-major: runtime/ckpt_replica.c ah_ckpt_hand_over), blocking, one flow a rank of
 * the smaller node each (ah_ckpt_lane_count)
 * (plan/ckpt_traffic.h ah_ckpt_pairs_s), or a "links" pair's shared capacity bounds it; f gets its
 * egress (where the cluster has several zones). Out of host memory: x->oom, 0. */
static double handover_s(ah_sim_replay_t *x, const ah_sim_entry_t *e, ah_sim_flows_t *f) {
    const int nn = x->c->n_nodes;
    double *moved = calloc((size_t)nn * (size_t)nn + 1, sizeof *moved); /* [source * nn + reader] */
    ah_ckpt_pair_t *pairs = calloc((size_t)nn * (size_t)nn + 1, sizeof *pairs);
    if (!moved || !pairs || !ah_sim_handover_moved(x->c, x->model, &x->state->place, &e->place, f, moved)) x->oom = true;
    int n = 0, *ranks = calloc((size_t)nn + 1, sizeof *ranks); /* the job's ranks on each node: its lanes */
    if (!ranks) x->oom = true;
    for (int r = 0; ranks && r < x->state->place.n_ranks; r++) ranks[x->state->place.ranks[r].node]++;
    for (int p = 0; !x->oom && p < nn * nn; p++)
        if (moved[p] > 0)
            pairs[n++] = (ah_ckpt_pair_t){.from = p / nn, .to = p % nn, .bytes = moved[p],
                                          .lanes = ah_ckpt_lane_count(ranks[p / nn], ranks[p % nn])};
    free(ranks);
    const double seconds = x->oom ? 0 : ah_ckpt_pairs_s(x->c, pairs, n);
    if (seconds < 0) x->oom = true;
    free(moved);
    free(pairs);
    return seconds < 0 ? 0 : fmax(seconds, ah_sim_flows_shared_s(f));
}

/* What the runtime replicates during a notice that leaves some nodes (runtime/ckpt_replica.c): each
 * leaving node's pieces (each (layer, TP index) its devices hold, once a node, as its node writes them)
 * that no staying node holds (ckpt/placement.h ah_placement_survives), to the leaving node's holder;
 * its seconds (ah_sim_memory_send_s), f its egress. *held: whether every leaving node sending has a
 * holder that stays (the runtime's rule for the memory tier, ckpt_notice.c holders_stay). -1 when out
 * of host memory. */
static double notice_replication_s(ah_sim_replay_t *x, const ah_sim_entry_t *run, ah_sim_flows_t *f, bool *held) {
    const ah_placement_t *pl = &run->place;
    const int L = (int)x->model->n_layer, nn = pl->n_nodes;
    double *bytes = calloc((size_t)nn + 1, sizeof *bytes);
    bool *counted = calloc((size_t)nn * (size_t)(L + 2) * (size_t)pl->tp + 1, sizeof *counted); /* [node][layer][TP] */
    if (!bytes || !counted) {
        free(bytes);
        free(counted);
        return -1;
    }
    *held = true;
    for (int r = 0; r < pl->n_ranks; r++) {
        const int y = pl->ranks[r].node, k = pl->ranks[r].tp_index;
        if (x->holds[y]) continue; /* a staying node keeps its own pieces in its memory and disk */
        for (int l = 0; l <= L + 1; l++) {
            const ah_shard_group_t g = ah_sim_layer_group(l, L);
            bool *once = &counted[((size_t)y * (size_t)(L + 2) + (size_t)l) * (size_t)pl->tp + (size_t)k];
            if (*once || !ah_placement_holds(pl, r, g, k) || ah_placement_survives(pl, g, k, x->holds)) continue;
            *once = true;
            bytes[y] += (double)(ah_layer_params(x->model, layer_kind(l, L), pl->tp) * AH_SIM_CKPT_BYTES_PER_PARAM);
        }
    }
    for (int y = 0; y < nn; y++)
        if (bytes[y] > 0 && (run->holder[y] < 0 || !x->holds[run->holder[y]])) *held = false;
    const double seconds = ah_sim_memory_send_s(x->c, pl, bytes, run->holder, f);
    free(bytes);
    free(counted);
    return seconds;
}

/* The stop at a notice, for the policies the agent runs (it reacts to the notice like the
 * runtime): the step in progress finishes, then every node saves when ckpt/policy.h's rule says so;
 * v's wait and save, what the disks and the memory then hold; *unsaved when nothing was saved (the
 * disks hold what they held); *handover when the save was the handover to plan e. */
static void stop_at_notice(ah_sim_replay_t *x, ah_sim_entry_t *e, bool join, bool in_place, ah_sim_recovery_t *v,
                           bool *unsaved, bool *handover) {
    /* autohet reacts to the notice like the runtime: the step in progress finishes, then
     * every node saves to its disk (a checkpoint of the disks; the cloud keeps the last
     * periodic one) when the runtime's rule says so (ckpt/policy.h); if not, the disks hold
     * what they held */
    /* a checkpoint's hold in progress (sim.c stall_until: the step's AdamW waiting for the snapshot's
     * copies) first: the step cannot end before it, and the runtime's save or change waits for the snapshot
     * in flight (runtime/ckpt_async.c); it trains no more for the notice */
    const double holding = fmax(0, x->stall_until - x->t);
    x->stall_until = x->t;
    v->wait_s = holding + x->run->iteration_s / 2;
    ah_sim_train(x, x->run->iteration_s / 2);
    const double sv = save_s(x, x->run);
    /* with the memory tier the runtime's save to the disks replicates the step to the partners
     * after its commit, before the job exits (runtime/ckpt_io.c), and its seconds, which the
     * rule takes, include that: at a notice leaving some nodes, only their pieces no staying node
     * holds (notice_replication_s; a join's notice, every node's) */
    const ah_sim_entry_t *run = x->run;
    ah_sim_flows_t rf;
    bool held = run->holder != NULL, rf_ok = false;
    double rep = 0;
    if (run->holder && !join) {
        rf_ok = ah_sim_flows_init(&rf, x->c);
        rep = rf_ok ? notice_replication_s(x, run, &rf, &held) : -1;
        if (rep < 0) x->oom = true;
        rep = fmax(rep, 0);
    } else if (run->holder && !run->periodic_off) /* a join's: every node's, as a periodic one */
        rep = fmax(0, ah_sim_memory_save_s(x->c, &run->place, run->ckpt_bytes, run->holder, x->o) -
                          ah_sim_memory_snapshot_s(&run->place, run->ckpt_bytes, x->o));
    ah_ckpt_notice_t notice = {.elapsed_s = v->wait_s, .grace_s = x->o->grace_s, .save_s = sv + rep,
                               .redo_s = in_place ? -1 : x->now.train_s - x->at_disk.train_s, .every_node = join};
    /* a change in place saves whenever it fits (runtime/ckpt_io.h ah_ckpt_session_save_leaving: always made;
     * the agent falls back to the relaunch when the request is not taken within the grace period): an unknown
     * redo_s skips the rule's second test */
    /* the memory tier (memory.c): when it commits sooner than the disks, what commits the step is
     * the snapshot and the replication; the disks follow until the job ends, at the removal at
     * the latest. Not where a leaving node's holder leaves too (the runtime's rule) */
    notice.memory = x->run->holder != NULL && held;
    notice.memory_s = -1;
    /* the handover (memory.c; not for a join): each device's pieces into the memory of the host
     * that reads them under e, when ckpt/policy.h's rule takes it */
    notice.handover = notice.memory && x->o->handover && !join && x->state;
    if (notice.handover) { /* against the disks plus what the relaunch would fetch without it */
        ah_sim_recovery_t without = {0};
        bool rolls_back;
        notice.fetch_s = transfer_s(x, e, &without, &rolls_back);
        ah_sim_flows_t f;
        if (!ah_sim_flows_init(&f, x->c)) x->oom = true;
        else {
            notice.memory_s = x->run->gather_s +
                              ah_sim_memory_snapshot_s(&x->run->place, x->run->ckpt_bytes, x->o) + handover_s(x, e, &f);
            notice.handover = ah_ckpt_notice_handover(&notice);
            v->egress_usd = f.usd; /* the handover's, kept if it is taken (ah_sim_begin_recovery) */
            v->bytes_across_regions = (int64_t)f.bytes_across_regions;
        }
        ah_sim_flows_free(&f);
    }
    if (notice.memory && !notice.handover)
        notice.memory_s = run->gather_s + ah_sim_memory_snapshot_s(&run->place, run->ckpt_bytes, x->o) + rep;
    v->saved = ah_ckpt_save_at_notice(&notice);
    v->save_s = v->saved ? sv + rep : 0;
    *handover = notice.handover && v->saved;
    const bool replicated = v->saved && !*handover && run->holder && (join ? !run->periodic_off : notice.memory);
    if (*handover) {
        v->save_s = notice.memory_s;
        x->at_mem = x->now;
    } else if (v->saved && ah_ckpt_notice_memory_first(&notice)) /* memory first, then the disks */
        v->save_s = fmin(notice.memory_s + sv - x->run->gather_s, x->o->grace_s - v->wait_s);
    if (replicated) { /* to the holders: a join's every node, else the leaving nodes' own pieces */
        x->at_mem = x->now;
        if (rf_ok) ah_sim_pay_ckpt_egress(x, rf.usd, rf.bytes_across_regions);
        else ah_sim_replicated(x); /* as a periodic checkpoint is */
    }
    if (rf_ok) ah_sim_flows_free(&rf);
    if (v->saved) x->at_disk = x->now; /* a handover's: written right after the relaunch, in the background */
    *unsaved = !v->saved;
}

static bool devices_kept(const ah_sim_replay_t *x, const ah_sim_entry_t *run, const ah_sim_entry_t *e) {
    int parked;
    return ah_sim_devices_kept(x->up, run, x->launched, x->spent, e, &parked);
}

double ah_sim_restart_rollback_s(ah_sim_replay_t *x, const ah_sim_entry_t *e, bool join, const ah_sim_entry_t *per) {
    const ah_sim_entry_t *run = x->run;
    if (!run || !x->state || !per || !(per->tokens_per_s > 0)) return 0;
    /* a join in place with a step committed writes its step behind (join_behind, joinbehind): nothing undone */
    if (join && x->o->in_place && x->at_disk.tokens > 0 && ah_sim_join_kept(x, run, e)) return 0;
    const double wait = fmax(0, x->stall_until - x->t) + run->iteration_s / 2, sv = save_s(x, run);
    ah_ckpt_notice_t n = {.elapsed_s = wait, .grace_s = x->o->grace_s, .save_s = sv, .every_node = join,
                          .redo_s = join ? -1 : x->now.train_s + run->iteration_s / 2 - x->at_disk.train_s,
                          .memory = run->holder != NULL, .memory_s = -1};
    if (n.memory) n.memory_s = run->gather_s + ah_sim_memory_snapshot_s(&run->place, run->ckpt_bytes, x->o);
    const bool saved = ah_ckpt_save_at_notice(&n);
    ah_sim_recovery_t probe = {0};
    bool cloud = false;
    (void)transfer_s(x, e, &probe, &cloud);
    ah_sim_uploads_settle(x);
    const ah_sim_progress_t back = cloud ? x->at_cloud : probe.bytes[AH_TIER_MEMORY] > 0 ? x->at_mem
                                 : saved ? x->now : x->at_disk;
    const double lost = x->now.tokens + (back.tokens < x->now.tokens ? run->tokens_per_s * run->iteration_s / 2 : 0) -
                        back.tokens;
    return fmax(0, lost) / per->tokens_per_s;
}

/* Whether relaunching onto plan `all` (every node up) pays over changing in place onto plan `kept` (on the
 * running plan's devices that stay), by the agent's rule (elastic/agent_join.c ah_agent_join_weigh, which
 * its next plan at a notice applies since 7e8a3a5): all's gain over its expected stay against the run's
 * mean recovery (ah_sim_join_cost_s) plus the extra exposure, plus (since session 25) the relaunch's own
 * rollback (ah_sim_restart_rollback_s: its save does not fit the grace period, or a piece only the cloud
 * holds), which the change in place, written behind or saved, does not undo (in_place_choice asks that it
 * roll nothing back). (Until session 22 the simulator's own cost: restart_s x (1 - AH_SIM_IN_PLACE_FRACTION)
 * plus the exposure.) */
static bool relaunch_pays(ah_sim_replay_t *x, const ah_sim_entry_t *kept, const ah_sim_entry_t *all) {
    const double now = ah_sim_join_key(x, kept), more = ah_sim_join_key(x, all);
    if (!ah_join_pays(now, more, INFINITY, 0, NULL)) return false; /* not better */
    const double hit = ah_sim_hit_rate(x, all), stay = ah_join_stay_s(hit, x->o->join_horizon_s);
    const double cost = ah_sim_join_cost_s(x) +
                        ah_join_exposure_s(ah_sim_hit_rate(x, kept), hit, stay, ah_sim_recovery_cost_s(x)) +
                        ah_sim_restart_rollback_s(x, all, false, kept);
    return ah_join_pays(now, more, stay, cost, NULL);
}

/* The move (a5590be, runtime/reconfig_move.c): at a change in place every rank of the old world is alive
 * at the boundary, the leaving ones too, and sends what the new plan's ranks lack over the old world
 * (after the change's save); so for the change's transfer the running plan's leaving nodes still hold
 * their pieces. Not with a sharded optimizer (the runtime's fallback to the restore). Sets them in
 * x->holds and returns the old values (NULL: nothing set; out of host memory sets x->oom). */
static bool *leavers_hold(ah_sim_replay_t *x) {
    if (x->o->shard != AH_SHARD_NONE || !x->run) return NULL;
    bool *was = malloc(sizeof *was * (size_t)(x->c->n_nodes + 1));
    if (!was) {
        x->oom = true;
        return NULL;
    }
    memcpy(was, x->holds, sizeof *was * (size_t)x->c->n_nodes);
    for (int n = 0; n < x->c->n_nodes; n++)
        if (x->run->uses[n] && !x->up[n]) x->holds[n] = true;
    return was;
}

static void holds_restore(ah_sim_replay_t *x, bool *was) {
    if (was) memcpy(x->holds, was, sizeof *was * (size_t)x->c->n_nodes);
    free(was);
}

/* Whether the last committed step (committed: its tokens) has a piece that, without the leaving nodes, no staying
 * node's disk or memory holds and the cloud does not hold complete (runtime/ckpt_change.c survives() false): the
 * change's step is then saved before the move. Nothing committed: false (nothing to keep). */
static bool committed_alone(ah_sim_replay_t *x, ah_sim_entry_t *e, ah_sim_progress_t committed) {
    if (x->at_cloud.tokens >= committed.tokens) return false;
    ah_sim_recovery_t probe = {0};
    bool without;
    (void)transfer_s(x, e, &probe, &without);
    return without;
}

/* Whether e's ranks on free nodes (ah_sim_gains_node) can join with the change at this notice, by the agent's
 * admission (elastic/agent_inplace_join.c admission(), agent_inplace.c's left_s): the deadline, the grace period
 * less the change's save (agent_inplace.c ah_agent_change_save_s: none when the step is written behind, which since
 * session 25 a change with incoming ranks is too when a step is committed and it outlives the leavers), leaves half
 * of what is left less two steps and the save again at least 1 s for the joining jobs' admission: grace - 2 saves -
 * 2 steps >= 2 s; with a sharded optimizer (--shard-optimizer) always taken off, as ah_agent_change_save_s does (its
 * state is not moved: saved before the change). The save is the notice's (save_s), a step the running plan's. Without a free node: true. Until
 * session 24 (simfix3) a free node's devices counted as held whether it fitted or not, so at --disk-gb-s 2 the
 * every-node plan was taken, its save never fitted, and the change fell back to a relaunch with no save. */
static bool free_node_admits(ah_sim_replay_t *x, ah_sim_entry_t *e) {
    if (!ah_sim_gains_node(x->run, e)) return true;
    /* a sharded optimizer's state is not moved (leavers_hold): the trainers save before the change (fix1) */
    const bool behind = x->o->shard == AH_SHARD_NONE && x->at_disk.tokens > 0 && !committed_alone(x, e, x->at_disk);
    const double save = behind ? 0 : save_s(x, x->run), left = x->o->grace_s - save;
    return (left - AH_SIM_ADMIT_STEPS * x->run->iteration_s - save) / 2 >= AH_SIM_ADMIT_MIN_S;
}

/* With --in-place, at a notice while training (rule 11): the plan to recover to, and *in_place whether
 * the change is to be in place. e (the plan on every node up) when it runs on the old plan's staying
 * devices (devices_kept: some may park; a free node's only when its admission fits, free_node_admits);
 * else the planner's plan over the old plan's devices on the staying nodes, when it keeps a rank on each
 * staying node (the devices it leaves idle park) and relaunching onto e does not pay over it (relaunch_pays;
 * e's extra nodes then wait for the join rule: x->pending_join). Not in place when a piece of the state would
 * come from the cloud (no staying node holds it: the run rolls back). */
static ah_sim_entry_t *in_place_choice(ah_sim_replay_t *x, ah_sim_entry_t *e, bool *in_place) {
    *in_place = false;
    if (!x->o->in_place || !x->run || !x->state) return e;
    ah_sim_entry_t *k = e;
    if (!devices_kept(x, x->run, e) || !free_node_admits(x, e)) {
        /* the plan over exactly the running ranks' devices on the staying nodes */
        uint64_t *devices = calloc((size_t)x->c->n_nodes + 1, sizeof *devices);
        for (int i = 0; devices && i < x->run->place.n_ranks; i++) {
            const ah_shard_holder_t *o = &x->run->place.ranks[i];
            if (x->up[o->node] && o->index >= 0 && o->index < 64) devices[o->node] |= (uint64_t)1 << o->index;
        }
        x->plan_within = x->run->uses;
        x->plan_devices = devices;
        k = devices ? ah_sim_plan_for(x) : NULL;
        x->plan_within = NULL;
        x->plan_devices = NULL;
        free(devices);
        if (!k) {
            x->oom = true;
            return e;
        }
        x->choice_plan_s += k->plan_s; /* planned too (as the agent plans it: 7e8a3a5) */
        if (!k->ok || !devices_kept(x, x->run, k) || relaunch_pays(x, k, e)) return e;
    }
    ah_sim_recovery_t probe = {0};
    bool rolls_back = true;
    bool *was = leavers_hold(x); /* the move: the leaving nodes send what only they hold */
    (void)transfer_s(x, k, &probe, &rolls_back);
    holds_restore(x, was);
    if (rolls_back) return e;
    *in_place = true;
    return k;
}

/* A change in place at a notice (rule 11): the move, the leaving ranks sending too, before the agent's deadline
 * (elastic/agent_inplace.c: the change's "reconfigure" event, after the move and the set-up, by the grace period
 * less the save estimate, the save's room; the grace period alone where the step is written behind). The save
 * written behind the next step (9fc0844) where the last committed step C survives the leavers (runtime/
 * ckpt_change.c survives(): every piece on a staying node's disk or in the memory tier, or C complete in the
 * cloud, or nothing committed; the memory tier is transfer_s's), with ranks coming in (a re-admission, a free node)
 * only when a step is committed (since session 25, joinbehind): off the path, a hold after
 * the first step instead, the wait, the move and the set-up within the grace period; else the save at the notice
 * (committed: the disks' newest step before it) too, within the grace period less the save. Whether the change
 * stays in place (e on devices the running or parked ranks hold too); v's transfer and save then the change's,
 * *behind whether its step is written behind (*unsaved then false: committed behind). */
static bool move_in_place(ah_sim_replay_t *x, ah_sim_entry_t *e, ah_sim_progress_t committed, ah_sim_recovery_t *v,
                          bool *unsaved, bool *cloud_rollback, bool *behind) {
    *behind = *cloud_rollback = false;
    if (!v->saved && v->wait_s > x->o->grace_s) return false;
    if (!devices_kept(x, x->run, e)) return false;
    bool *was = leavers_hold(x);
    bool alone = was != NULL, moves = alone; /* a piece from a leaving node only? (read before was is freed) */
    ah_sim_recovery_t moved = *v;
    const double move_s = transfer_s(x, e, &moved, cloud_rollback);
    holds_restore(x, was);
    ah_sim_uploads_settle(x);
    alone = alone && committed_alone(x, e, committed); /* not in the cloud: a staying node's? */
    /* the save before the move; with incoming ranks (a re-admission, a free node's job) also when nothing is
     * committed (their fallback restores the last committed step: cli_train_inplace.c save_and_move); until session
     * 25 (joinbehind) always with incoming ranks */
    const bool incoming = ah_sim_readmits(x->run, x->launched, x->spent, e) || ah_sim_gains_node(x->run, e);
    const bool sync = alone || (incoming && committed.tokens <= 0);
    int parked = 0; /* the change's set-up: the in-place restart (as ah_sim_begin_recovery prices it) */
    (void)ah_sim_devices_kept(x->up, x->run, x->launched, x->spent, e, &parked);
    const double set_up_s = x->o->restart_s * (ah_sim_gains_node(x->run, e) ? AH_SIM_JOIN_IN_PLACE_FRACTION
                                               : parked > 0 ? AH_SIM_PARK_IN_PLACE_FRACTION : AH_SIM_IN_PLACE_FRACTION);
    const double save_s = sync ? v->save_s : 0; /* in the change, and off the deadline (agent_inplace.c save_room) */
    const bool ok = !*cloud_rollback && (!sync || v->saved) &&
                    v->wait_s + save_s + move_s + set_up_s <= x->o->grace_s - save_s;
    *behind = ok && moves && !sync;
    if (!ok || !(v->saved || *behind)) { /* the leavers gone before their pieces are sent, or no save: the relaunch */
        *behind = false;
        return false;
    }
    *v = moved;
    v->transfer_s = move_s;
    if (*behind) {
        v->save_s = 0;
        x->hold_after_s = ah_sim_ckpt_hold_s(e, x->o->change_snapshot_gb_s);
        if (*unsaved) { /* the save did not fit, and is not needed */
            *unsaved = false;
            x->at_disk = x->now;
        }
    }
    return true;
}

/* A join in place (ah_sim_join_kept) once a step is committed: since session 25 (joinbehind) the runtime writes
 * the join's step behind the next one, as any change whose last committed step outlives the leavers (a join has
 * none), so the save stop_at_notice made is undone (the disks and memory back to what they held: committed, mem),
 * and the new plan's hold comes after its first step. Whether so. */
static bool join_behind(ah_sim_replay_t *x, ah_sim_entry_t *e, ah_sim_progress_t committed, ah_sim_progress_t mem,
                        ah_sim_recovery_t *v, bool *unsaved) {
    if (!x->o->in_place || committed.tokens <= 0 || !ah_sim_join_kept(x, x->run, e)) return false;
    v->save_s = 0;
    v->saved = *unsaved = false;
    x->at_disk = committed, x->at_mem = mem;
    x->hold_after_s = ah_sim_ckpt_hold_s(e, x->o->change_snapshot_gb_s);
    return true;
}

/* A (re)start onto plan e. join: every node got the notice (a restart to take in joined nodes). */
void ah_sim_begin_recovery(ah_sim_replay_t *x, ah_sim_entry_t *e, bool join, const char *label, const char *arg) {
    ah_sim_result_t *r = x->r;
    const bool notice = x->phase == AH_PHASE_TRAIN && ah_sim_agent_policy(x->pol);
    ah_sim_entry_t *all = e;
    bool in_place = false, behind = false;
    const ah_sim_progress_t committed = x->at_disk; /* before a save at the notice */
    if (notice && !join) e = in_place_choice(x, e, &in_place);
    if (x->oom) return;
    x->hold_after_s = 0;
    if (x->phase == AH_PHASE_RECOVER && r->n_recs > 0) r->recs[r->n_recs - 1].interrupted = true;
    ah_sim_recovery_t *v = rec_push(x, label, arg);
    if (!v) return;
    bool unsaved = false, handover = false;
    const ah_sim_progress_t mem = x->at_mem; /* before a save at the notice */
    if (notice) stop_at_notice(x, e, join, in_place, v, &unsaved, &handover);
    const bool join_async = notice && join && join_behind(x, e, committed, mem, v, &unsaved);
    bool cloud_rollback;
    const double handover_usd = v->egress_usd; /* what the handover sent across zones and regions */
    const int64_t handover_across = v->bytes_across_regions;
    v->egress_usd = v->bytes_across_regions = 0;
    if (in_place) in_place = move_in_place(x, e, committed, v, &unsaved, &cloud_rollback, &behind);
    if (!in_place) e = all; /* no change in place: the relaunch takes every node up */
    else if (e != all) x->pending_join = true; /* the nodes left out: the join rule's */
    if (!in_place) v->transfer_s = transfer_s(x, e, v, &cloud_rollback);
    handover = handover && !behind; /* the change written behind saves nothing before its move: no handover either */
    v->handover = handover;
    if (handover) { /* what moved was handed over: its bytes and egress are the handover's */
        ah_sim_handed_over(v);
        cloud_rollback = false;
        v->egress_usd = handover_usd;
        v->bytes_across_regions = handover_across;
    }
    ah_sim_pay_ckpt_egress(x, v->egress_usd, (double)v->bytes_across_regions);
    /* state from the cloud: back to the periodic checkpoint; all from the disks but not saved at
     * the notice: back to the newest state on the disks */
    /* a lost node's pieces from a peer's memory: back to the state it holds */
    /* the old job's uploads not ended by now end with it (docs/simulator.md "Uploads at a restart"),
     * but varuna's (cloud-only) job finishes them first, within the grace period */
    if (x->pol == AH_POLICY_VARUNA) v->wait_s += ah_sim_uploads_drain(x, x->o->grace_s);
    ah_sim_uploads_cut(x);
    if (cloud_rollback) x->at_ckpt = x->at_cloud; /* back to what the cloud holds */
    const ah_sim_progress_t back_to = cloud_rollback                   ? x->at_cloud
                               : v->bytes[AH_TIER_MEMORY] > 0 ? x->at_mem
                               : unsaved                        ? x->at_disk
                                                                : x->now;
    v->tokens_lost = x->now.tokens - back_to.tokens;
    v->rollback_s = x->now.train_s - back_to.train_s;
    r->tokens_lost += v->tokens_lost;
    x->now = back_to;
    /* nothing newer than the state resumed from is on the disks or in memory any more */
    if (x->at_disk.tokens > x->now.tokens) x->at_disk = x->now;
    if (x->at_mem.tokens > x->now.tokens) x->at_mem = x->now;
    r->bytes_local += v->bytes[AH_TIER_LOCAL];
    r->bytes_peer += v->bytes[AH_TIER_PEER];
    r->bytes_cloud += v->bytes[AH_TIER_CLOUD];
    r->bytes_memory += v->bytes[AH_TIER_MEMORY];
    v->replan_s = x->o->replan_s >= 0 ? x->o->replan_s : x->choice_plan_s; /* the chosen set's, or every candidate's (plans.c) */
    /* in place (opts.in_place): at a notice that saved (every rank alive, the state committed), onto the
     * running ranks' devices, the ones the plan leaves out parked (AH_SIM_PARK_IN_PLACE_FRACTION); a join
     * that saved, onto them and the joining nodes (the runtime moves the state to the joining ranks since
     * cf4ac18; the transfer here is still the tiers' restore, a network copy from the holders either way) */
    const bool join_in_place = join && notice && x->o->in_place && (v->saved || join_async) && !cloud_rollback &&
                               ah_sim_join_kept(x, x->run, e);
    behind = behind || (join_async && join_in_place);
    if (join_async && !join_in_place) x->hold_after_s = 0; /* a relaunch from the cloud's step: no hold */
    int parked = 0; /* move_in_place's change: saved or written behind, no piece from the cloud, devices kept */
    if (in_place) (void)ah_sim_devices_kept(x->up, x->run, x->launched, x->spent, e, &parked);
    v->in_place = in_place || join_in_place;
    v->parked = v->in_place && !join_in_place ? parked : 0;
    /* recorded as the agent does (its rule: saved only for a "save":"sync" change, elastic/agent_inplace.c): the
     * step written behind is not saved at the change, the resume point until its commit the last committed
     * step (what is not priced of that window: docs/simulator.md rule 11) */
    v->written_behind = behind && v->in_place;
    if (v->written_behind) v->saved = false;
    v->restart_s = x->o->restart_s * (join_in_place || (v->in_place && ah_sim_gains_node(x->run, e)) /* a node joins */
                                          ? AH_SIM_JOIN_IN_PLACE_FRACTION
                                      : v->parked > 0 ? AH_SIM_PARK_IN_PLACE_FRACTION
                                      : v->in_place ? AH_SIM_IN_PLACE_FRACTION : 1);
    v->first_step_s = e->iteration_s;
    v->seconds = v->wait_s + v->save_s + v->replan_s + v->restart_s + v->transfer_s + v->first_step_s;
    if (x->started) {
        r->replans++;
        ah_sim_mark(x, true);
    }
    x->started = true;
    ah_sim_spend(x, e, !v->in_place, join_in_place || (v->in_place && ah_sim_gains_node(x->run, e))); /* a node joins */
    x->run = e;
    x->phase = AH_PHASE_RECOVER;
    x->recover_end = x->t + v->seconds;
    ah_sim_seg_open(x, AH_PHASE_RECOVER, label, arg);
}
