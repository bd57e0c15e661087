/* The checkpoint session's in-memory peer replicas (ckpt_session.h; layout and rules: ckpt/replica.h).
 *
 * After a step committed on every node (ah_ckpt_commit_step), each node's leader sends the files of
 * its step, as its manifest lists them, to its partner's leader over MPI; the partner writes them
 * into its replica root (a tmpfs: they outlive the job's processes, not the host) and commits a
 * manifest listing what it received, last. Collective; the transfers walk one global order (the
 * pairs in rounds of disjoint pairs, plan/ckpt_traffic.h ah_ckpt_pairs_in_rounds, then file), so the
 * blocking pairs cannot deadlock (comm/transfer.h) and a round's pairs run at once. What does not
 * fit a holder's budget is left to the disks and counted; a failed write on a holder leaves that
 * file out of its manifest (the step is on the disks anyway) and is reported, not fatal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/afile.h"
#include "ckpt/handover.h"
#include "ckpt/replica.h"
#include "ckpt/test_hook.h"
#include "comm/transfer.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/timing.h"
#include "plan/ckpt_traffic.h"
#include "runtime/ckpt_session.h"

enum { TAG_REPLICA = 7200 };

ah_status_t ah_ckpt_replica_open(ah_ckpt_session_t *s, ah_error_t *err) {
    if (s->o.replica_memory_gb <= 0) return AH_OK;
    s->replica_budget = (uint64_t)(s->o.replica_memory_gb * 1e9);
    /* the caller agrees on every rank's status: none goes on out of memory with its own answer */
    if (!ah_replica_pays(&s->place, &s->replica_pays))
        return ah_error_set(err, AH_ERR_OOM, "no host memory to tell whether the replicas pay");
    const char *node = s->tr->plan->cluster.nodes[s->my_node].name;
    if (s->o.replica_root) snprintf(s->replica_base, sizeof s->replica_base, "%s", s->o.replica_root);
    else if (ah_replica_default_base(s->replica_base, sizeof s->replica_base, s->o.local_root) < 0)
        return ah_error_set(err, AH_ERR_USAGE, "--local-root %.200s...: path too long", s->o.local_root);
    if (ah_replica_holder_root(s->replica_root, sizeof s->replica_root, s->replica_base, node) < 0)
        return ah_error_set(err, AH_ERR_USAGE, "--replica-root %.200s...: path too long", s->replica_base);
    /* the node's leader (s->node_rank is not known yet: the node communicator comes after) */
    if (s->place.node_leader[s->my_node] != s->tr->rank) return AH_OK;
    /* a run from step 0 owns its replica root: an earlier run's replicas there are not its steps */
    if (!s->o.resume) ah_fs_rm_tree(s->replica_root, NULL);
    ah_status_t st = ah_fs_mkdirs(s->replica_root, err);
    if (st != AH_OK) ah_error_prefix(err, "--replica-root: node %s's replica directory", node);
    return st;
}

void ah_ckpt_replica_release(const ah_ckpt_session_t *s) {
    if (!s || s->replica_budget == 0 || s->node_rank != 0) return;
    ah_fs_rm_tree(s->replica_root, NULL);
}

/* Every node's manifest of step, as its leader read it from src_root (have[nd] false: none). */
static ah_status_t gather_manifests(const ah_ckpt_session_t *s, const char *src_root, int64_t step,
                                    ah_ckpt_manifest_t *ms, bool *have, ah_error_t *err) {
    const ah_placement_t *pl = &s->place;
    char *mine = NULL;
    ah_ckpt_manifest_t m;
    ah_error_t e2;
    if (s->node_rank == 0 && ah_ckpt_load(src_root, step, &m, &e2) == AH_OK) {
        json_t *doc = ah_ckpt_manifest_to_json(&m);
        mine = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        ah_ckpt_manifest_free(&m);
    }
    size_t *lens = malloc((size_t)pl->n_ranks * sizeof *lens);
    char *all = NULL;
    ah_status_t st = lens ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas' manifests");
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = ah_comm_allgather_bytes(ah_comm_world(), mine ? mine : "", mine ? strlen(mine) : 0, &all, lens, err);
    size_t off = 0;
    for (int r = 0; st == AH_OK && r < pl->n_ranks; off += lens[r], r++) {
        const int nd = pl->ranks[r].node;
        json_t *doc;
        if (lens[r] == 0 || pl->node_leader[nd] != r) continue;
        if (ah_json_load_string(all + off, lens[r], "a replicated manifest", &doc, &e2) != AH_OK) continue;
        have[nd] = ah_ckpt_manifest_from_json(doc, "a replicated manifest", &ms[nd], &e2) == AH_OK;
        json_decref(doc);
    }
    free(all);
    free(lens);
    free(mine);
    return st;
}

static ah_status_t afile_sink(void *ctx, const void *data, size_t n, ah_error_t *err) {
    return ah_afile_write(ctx, data, n, err);
}

/* The holder's side of one file: received into dir, *ok whether it landed. */
static ah_status_t receive_file(const char *dir, const char *name, int from, bool *ok, char *why, size_t cap,
                                ah_error_t *err) {
    char path[AH_CKPT_PATH_MAX];
    ah_afile_t af;
    ah_error_t e2;
    *ok = false;
    ah_status_t st = ah_ckpt_join(path, sizeof path, dir, name) < 0 ? ah_error_set(&e2, AH_ERR_IO, "%s: path too long", dir)
                                                                      : ah_afile_open(&af, path, &e2);
    if (st != AH_OK) { /* the sender is committed to this transfer: drain it */
        if (!why[0]) snprintf(why, cap, "%.500s", e2.msg);
        st = ah_comm_recv_file(ah_comm_world(), from, TAG_REPLICA, NULL, NULL, NULL, &e2);
        return st == AH_ERR_COMM ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
    }
    st = ah_comm_recv_file(ah_comm_world(), from, TAG_REPLICA, afile_sink, &af, NULL, &e2);
    if (st == AH_OK) st = ah_afile_commit(&af, false, &e2);
    else ah_afile_abort(&af);
    *ok = st == AH_OK;
    if (!*ok && !why[0]) snprintf(why, cap, "%.500s", e2.msg);
    return st == AH_ERR_COMM ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
}

/* One pair of a copy: source node `from`'s files (m, those with fits[i]) into holder `to`'s replica of
 * it; landed[first + i]: whether file i arrived. */
typedef struct copy_job {
    int from, to, first;
    const ah_ckpt_manifest_t *m;
    const bool *fits;
} copy_job_t;

/* The k-th rank of node n in rank order (-1: it has fewer); *count (may be NULL): its ranks. */
static int rank_at(const ah_placement_t *pl, int n, int k, int *count) {
    int found = -1, c = 0;
    for (int r = 0; r < pl->n_ranks; r++)
        if (pl->ranks[r].node == n && c++ == k) found = r;
    if (count) *count = c;
    return found;
}

/* The holder's leader: an earlier attempt's replica of the step removed, its directory made; what
 * failed into rs->error (its ranks then drain what they are sent). */
static void prepare_holder(ah_ckpt_session_t *s, const copy_job_t *j, int64_t step, ah_ckpt_replica_stats_t *rs) {
    char root[AH_CKPT_PATH_MAX], dir[AH_CKPT_PATH_MAX];
    ah_error_t e2;
    ah_replica_source_root(root, sizeof root, s->replica_root, s->tr->plan->cluster.nodes[j->from].name);
    ah_ckpt_step_dir(dir, sizeof dir, root, step);
    ah_ckpt_remove_step(root, step, &e2);
    if (ah_fs_mkdirs(dir, &e2) != AH_OK && !rs->error[0]) snprintf(rs->error, sizeof rs->error, "%.500s", e2.msg);
}

/* lane[j->first + i]: the lane of file i of each job this rank takes part in (-1: not sent), the
 * pair's files split over its lanes (plan/ckpt_traffic.h ah_ckpt_lanes_assign), lane k from the
 * source's k-th rank to the holder's k-th. false when out of host memory. */
static bool assign_lanes(const ah_ckpt_session_t *s, const copy_job_t *jobs, int n_jobs, int *lane) {
    const ah_placement_t *pl = &s->place;
    const int node = pl->ranks[s->tr->rank].node;
    bool ok = true;
    for (int k = 0; ok && k < n_jobs; k++) {
        const copy_job_t *j = &jobs[k];
        const int n = j->m->n_files;
        if (node != j->from && node != j->to) continue;
        int n_from, n_to;
        (void)rank_at(pl, j->from, 0, &n_from);
        (void)rank_at(pl, j->to, 0, &n_to);
        uint64_t *sizes = malloc((size_t)(n > 0 ? n : 1) * sizeof *sizes);
        for (int i = 0; sizes && i < n; i++) sizes[i] = j->m->files[i].bytes;
        ok = sizes && ah_ckpt_lanes_assign(sizes, j->fits, n, ah_ckpt_lane_count(n_from, n_to), lane + j->first);
        free(sizes);
    }
    return ok;
}

/* This rank's part of job j: each file on its lane (lane, assign_lanes), read from the source node's
 * src_root step, written into the holder's replica root. */
static ah_status_t copy_lanes(ah_ckpt_session_t *s, const char *src_root, int64_t step, const copy_job_t *j,
                              const int *lane, int64_t *landed, ah_ckpt_replica_stats_t *rs, ah_error_t *err) {
    const ah_placement_t *pl = &s->place;
    const int me = s->tr->rank, n = j->m->n_files;
    if (pl->ranks[me].node != j->from && pl->ranks[me].node != j->to) return AH_OK;
    lane += j->first;
    char src_dir[AH_CKPT_PATH_MAX], root[AH_CKPT_PATH_MAX], dir[AH_CKPT_PATH_MAX], path[AH_CKPT_PATH_MAX];
    ah_ckpt_step_dir(src_dir, sizeof src_dir, src_root, step);
    ah_replica_source_root(root, sizeof root, s->replica_root, s->tr->plan->cluster.nodes[j->from].name);
    ah_ckpt_step_dir(dir, sizeof dir, root, step);
    ah_status_t st = AH_OK;
    bool first = true;
    ah_error_t e2;
    for (int i = 0; st == AH_OK && i < n; i++) {
        if (lane[i] < 0) continue;
        const int from = rank_at(pl, j->from, lane[i], NULL), to = rank_at(pl, j->to, lane[i], NULL);
        if (me == from) { /* a file it cannot read is refused to the holder, which leaves it out */
            st = ah_ckpt_join(path, sizeof path, src_dir, j->m->files[i].name) < 0
                     ? ah_comm_send_refusal(ah_comm_world(), to, TAG_REPLICA, "path too long", &e2)
                     : ah_comm_send_file(ah_comm_world(), path, to, TAG_REPLICA, NULL, &e2);
            st = st == AH_ERR_COMM ? ah_error_set(err, AH_ERR_COMM, "%s", e2.msg) : AH_OK;
        } else if (me == to) {
            bool ok = false;
            st = receive_file(dir, j->m->files[i].name, from, &ok, rs->error, sizeof rs->error, err);
            /* test-only: mid-replication, a file of the holder's step received, its manifest not */
            if (ok && first) ah_test_hook("replica", step, s->tr->plan->cluster.nodes[j->to].name);
            first = first && !ok;
            landed[j->first + i] = ok;
        }
    }
    return st;
}

/* The holder's leader: its manifest of job j's replica, listing the files that landed, written last
 * (the replica counts only once every file it lists is there); their bytes into rs. */
static void commit_holder(ah_ckpt_session_t *s, int64_t step, const copy_job_t *j, const int64_t *landed,
                          ah_ckpt_replica_stats_t *rs) {
    const ah_ckpt_manifest_t *m = j->m;
    ah_ckpt_manifest_t held = {.meta = m->meta, .files = calloc((size_t)m->n_files + 1, sizeof *held.files)};
    char root[AH_CKPT_PATH_MAX], dir[AH_CKPT_PATH_MAX], path[AH_CKPT_PATH_MAX];
    ah_error_t e2;
    if (!held.files) {
        if (!rs->error[0]) snprintf(rs->error, sizeof rs->error, "no host memory for a replica's manifest");
        return;
    }
    for (int i = 0; i < m->n_files; i++)
        if (landed[j->first + i]) {
            held.files[held.n_files++] = m->files[i];
            rs->bytes += m->files[i].bytes;
            rs->files++;
        }
    ah_replica_source_root(root, sizeof root, s->replica_root, s->tr->plan->cluster.nodes[j->from].name);
    ah_ckpt_step_dir(dir, sizeof dir, root, step);
    if (held.n_files > 0 && ah_ckpt_join(path, sizeof path, dir, "manifest.json") >= 0 &&
        ah_ckpt_manifest_save(&held, path, &e2) != AH_OK && !rs->error[0])
        snprintf(rs->error, sizeof rs->error, "%.500s", e2.msg);
    free(held.files);
}

/* Collective: jobs[0 .. n - 1] in the one order every rank walks (each rank in at most one lane of a
 * pair, the pairs' lanes one global order, so the blocking sends cannot deadlock: comm/transfer.h).
 * The holders' directories made first (then a barrier: a holder's ranks write into them), the
 * manifests last, once every lane has reported what landed. */
static ah_status_t copy_pairs(ah_ckpt_session_t *s, const char *src_root, int64_t step, copy_job_t *jobs, int n,
                              ah_ckpt_replica_stats_t *rs, ah_error_t *err) {
    const ah_placement_t *pl = &s->place;
    const int me = s->tr->rank;
    int total = 0;
    for (int k = 0; k < n; k++) {
        jobs[k].first = total;
        total += jobs[k].m->n_files;
    }
    /* every rank's allocations agreed before any pair's transfers: a rank out of memory fails with
     * the others, never leaving its lane partner blocked in a send or a receive */
    int64_t *landed = calloc((size_t)total + 1, sizeof *landed);
    int *lane = malloc(((size_t)total + 1) * sizeof *lane);
    const bool ok = landed && lane && assign_lanes(s, jobs, n, lane);
    ah_status_t st = ah_comm_agree(ah_comm_world(), ok ? AH_OK : ah_error_set(err, AH_ERR_OOM,
                                   "no host memory for the replicas' files and lanes"), err);
    for (int k = 0; st == AH_OK && k < n; k++)
        if (pl->node_leader[jobs[k].to] == me) prepare_holder(s, &jobs[k], step, rs);
    if (st == AH_OK) st = ah_comm_barrier(ah_comm_world(), err);
    for (int k = 0; st == AH_OK && k < n; k++) st = copy_lanes(s, src_root, step, &jobs[k], lane, landed, rs, err);
    if (st == AH_OK && total > 0) st = ah_comm_allreduce_max_i64(ah_comm_world(), landed, (size_t)total, err);
    for (int k = 0; st == AH_OK && k < n; k++)
        if (pl->node_leader[jobs[k].to] == me) commit_holder(s, step, &jobs[k], landed, rs);
    free(lane);
    free(landed);
    return st;
}

/* What fits each holder, the same on every rank; the left-over is counted on rank 0; *mine: the bytes
 * this rank's node then holds of the step. */
static ah_status_t plan_fit(const ah_ckpt_session_t *s, const ah_ckpt_manifest_t *ms, const bool *have,
                            bool *const *want, const int *partner, bool **fits, ah_ckpt_replica_stats_t *rs,
                            uint64_t *mine, ah_error_t *err) {
    const int nn = s->place.n_nodes;
    int *nf = calloc((size_t)nn, sizeof *nf);
    uint64_t **sizes = calloc((size_t)nn, sizeof *sizes), *held = calloc((size_t)nn, sizeof *held);
    ah_status_t st = nf && sizes && held ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas");
    for (int y = 0; st == AH_OK && y < nn; y++) {
        nf[y] = have[y] ? ms[y].n_files : 0;
        sizes[y] = calloc((size_t)nf[y] + 1, sizeof **sizes);
        fits[y] = calloc((size_t)nf[y] + 1, sizeof **fits);
        if (!sizes[y] || !fits[y]) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas");
        /* a file not wanted (a notice's, which a staying host holds) as 0 bytes, cleared below */
        for (int i = 0; st == AH_OK && i < nf[y]; i++) sizes[y][i] = want[y][i] ? ms[y].files[i].bytes : 0;
    }
    if (st == AH_OK) ah_replica_fit(nn, partner, nf, sizes, s->replica_budget, nn, fits, held);
    *mine = st == AH_OK ? held[s->my_node] : 0;
    for (int y = 0; st == AH_OK && y < nn; y++)
        for (int i = 0; i < nf[y]; i++) fits[y][i] = fits[y][i] && want[y][i];
    for (int y = 0; st == AH_OK && s->tr->rank == 0 && y < nn; y++)
        for (int i = 0; partner[y] >= 0 && i < nf[y]; i++)
            if (want[y][i] && !fits[y][i]) {
                rs->left_bytes += sizes[y][i];
                rs->left_files++;
            }
    for (int y = 0; sizes && y < nn; y++) free(sizes[y]);
    free(sizes);
    free(held);
    free(nf);
    return st;
}

/* The figures over the job (bytes and files held, left to the disks; the slowest rank's time), the
 * same on every rank; a failed write said where it happened. Collective. */
static ah_status_t replica_totals(ah_ckpt_session_t *s, int64_t step, double t0, ah_ckpt_replica_stats_t *rs,
                                  ah_error_t *err) {
    if (rs->error[0]) /* said where it happened; rank 0's event says that some holder failed */
        fprintf(stderr, "autohet train: warning: node %s: the in-memory replica of step %lld is incomplete: %s; those "
                "files stay on the disks only\n", s->tr->plan->cluster.nodes[s->my_node].name, (long long)step, rs->error);
    double sums[6] = {(double)rs->bytes, (double)rs->files, (double)rs->left_bytes, (double)rs->left_files,
                      rs->error[0] ? 1 : 0, (double)rs->freed_first};
    int64_t us = (int64_t)((ah_now_s() - t0) * 1e6);
    ah_status_t st = ah_comm_allreduce_f64(ah_comm_world(), sums, 6, err);
    if (st == AH_OK) st = ah_comm_allreduce_max_i64(ah_comm_world(), &us, 1, err);
    rs->bytes = (uint64_t)sums[0];
    rs->files = (int)sums[1];
    rs->left_bytes = (uint64_t)sums[2];
    rs->left_files = (int)sums[3];
    rs->freed_first = (int)sums[5];
    rs->seconds = (double)us * 1e-6;
    rs->complete = rs->complete && rs->left_files == 0 && sums[4] == 0;
    if (st == AH_OK && s->tr->rank == 0 && rs->left_files > 0 && !s->replica_said) { /* once a run */
        fprintf(stderr, "autohet train: note: --replica-memory-gb %g holds %llu bytes of step %lld in the hosts' memory; "
                "%d files (%llu bytes) do not fit and stay on the disks only (the checkpoint events' "
                "memory_left_files)\n", s->o.replica_memory_gb, (unsigned long long)rs->bytes, (long long)step,
                rs->left_files, (unsigned long long)rs->left_bytes);
        s->replica_said = true;
    }
    if (sums[4] > 0 && !rs->error[0])
        snprintf(rs->error, sizeof rs->error, "%.0f holder(s) could not write their replica (their stderr says why)", sums[4]);
    return st;
}

bool ah_ckpt_notice_leaves_some(const ah_ckpt_session_t *s) {
    int used = 0, hit = 0;
    for (int y = 0; s->hit && y < s->place.n_nodes; y++)
        if (s->place.node_leader[y] >= 0) {
            used++;
            hit += s->hit[y] != 0;
        }
    return hit > 0 && hit < used;
}

/* want[y][i]: whether file i of node y's step goes to y's partner. Every file, but during a notice that
 * leaves some nodes (ckpt/policy.h, "only what no staying host holds"): a leaving node's files that no
 * staying node's step holds too (a data-parallel replica's piece, in that node's own memory and disk);
 * *partial then. NULL when out of host memory. */
static bool **wanted_files(const ah_ckpt_session_t *s, const ah_ckpt_manifest_t *ms, const bool *have, bool *partial) {
    const int nn = s->place.n_nodes;
    bool **want = calloc((size_t)nn, sizeof *want), ok = want != NULL;
    *partial = ah_ckpt_notice_leaves_some(s);
    for (int y = 0; ok && y < nn; y++) {
        const int nf = have[y] ? ms[y].n_files : 0;
        ok = (want[y] = calloc((size_t)nf + 1, sizeof **want)) != NULL;
        for (int i = 0; ok && i < nf; i++) {
            bool held_by_stayer = false;
            for (int x = 0; *partial && x < nn && !held_by_stayer; x++)
                held_by_stayer = x != y && have[x] && !s->hit[x] &&
                                 ah_ckpt_manifests_find(&ms[x], 1, ms[x].meta.step, ms[y].files[i].name);
            want[y][i] = !*partial || (s->hit[y] && !held_by_stayer);
        }
    }
    /* --replica-when-it-pays: nothing but a notice's leaving pieces where every piece is on two nodes */
    for (int y = 0; ok && !*partial && s->o.replica_if_pays && !s->replica_pays && y < nn; y++)
        for (int i = 0; have[y] && i < ms[y].n_files; i++) want[y][i] = false;
    for (int y = 0; !ok && want && y < nn; y++) free(want[y]);
    if (!ok) free(want);
    return ok ? want : NULL;
}

ah_status_t ah_ckpt_replicate(ah_ckpt_session_t *s, const char *src_root, int64_t step, bool keep_old,
                              ah_ckpt_replica_stats_t *rs, ah_error_t *err) {
    memset(rs, 0, sizeof *rs);
    const double t0 = ah_now_s();
    const int nn = s->place.n_nodes;
    ah_ckpt_manifest_t *ms = calloc((size_t)nn, sizeof *ms);
    bool *have = calloc((size_t)nn, sizeof *have), **fits = calloc((size_t)nn, sizeof *fits);
    int *partner = calloc((size_t)nn, sizeof *partner);
    const char **zones = calloc((size_t)nn, sizeof *zones);
    ah_ckpt_pair_t *pairs = calloc((size_t)nn + 1, sizeof *pairs);
    ah_status_t st = ms && have && fits && partner && zones && pairs ? AH_OK
                                                            : ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas");
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = gather_manifests(s, src_root, step, ms, have, err);
    for (int y = 0; st == AH_OK && y < nn; y++) zones[y] = s->tr->plan->cluster.nodes[y].zone;
    uint64_t new_bytes = 0;
    bool partial = false, **want = NULL;
    if (st == AH_OK) {
        want = wanted_files(s, ms, have, &partial);
        const ah_status_t mine = !want ? ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas' files")
                                 : ah_replica_partners(&s->place, zones, partner)
                                     ? plan_fit(s, ms, have, want, partner, fits, rs, &new_bytes, err)
                                     : ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas' holders");
        st = ah_comm_agree(ah_comm_world(), mine, err);
    }
    /* Retention (replica.h): a holder keeps its older steps while the new one is written, so that a
     * loss during the copy finds the last complete one, when they fit its budget together; they go
     * once the new one is complete on every holder (below), or, with keep_old (a notice's), when the
     * caller says (ah_ckpt_replica_prune_older). When they do not fit together they go first. */
    bool freed_first = false;
    if (st == AH_OK && s->node_rank == 0 && !keep_old &&
        ah_replica_held_bytes(s->replica_root, step) + new_bytes > s->replica_budget) {
        ah_replica_prune(s->replica_root, step, NULL);
        freed_first = true;
        rs->freed_first = 1;
    }
    /* complete: every node the plan uses (a partial one: every leaving node) has its whole step (the
     * files wanted) in a partner's memory (ckpt_session.h) */
    rs->complete = st == AH_OK;
    rs->partial = partial;
    int n_pairs = 0;
    for (int y = 0; st == AH_OK && y < nn; y++) {
        if (s->place.node_leader[y] >= 0 && (!partial || s->hit[y]) && (!have[y] || partner[y] < 0))
            rs->complete = false;
        double fit_bytes = 0;
        for (int i = 0; have[y] && i < ms[y].n_files; i++) fit_bytes += fits[y][i] ? (double)ms[y].files[i].bytes : 0;
        if (have[y] && partner[y] >= 0)
            pairs[n_pairs++] = (ah_ckpt_pair_t){.from = y, .to = partner[y], .bytes = fit_bytes};
    }
    ah_ckpt_pairs_in_rounds(pairs, n_pairs); /* the same order on every rank: disjoint pairs at once */
    copy_job_t *jobs = calloc((size_t)n_pairs + 1, sizeof *jobs);
    int n_jobs = 0;
    for (int k = 0; jobs && k < n_pairs; k++)
        if (pairs[k].bytes > 0)
            jobs[n_jobs++] = (copy_job_t){.from = pairs[k].from, .to = pairs[k].to, .m = &ms[pairs[k].from],
                                          .fits = fits[pairs[k].from]};
    if (st == AH_OK) st = ah_comm_agree(ah_comm_world(), jobs ? AH_OK : ah_error_set(err, AH_ERR_OOM,
                                        "no host memory for the replicas' pairs"), err);
    if (st == AH_OK) st = copy_pairs(s, src_root, step, jobs, n_jobs, rs, err);
    free(jobs);
    if (st == AH_OK) st = replica_totals(s, step, t0, rs, err);
    if (st == AH_OK && s->node_rank == 0 && !keep_old && !freed_first && rs->complete)
        ah_replica_prune(s->replica_root, step, NULL);
    for (int y = 0; y < nn; y++) {
        if (ms && have && have[y]) ah_ckpt_manifest_free(&ms[y]);
        if (fits) free(fits[y]);
        if (want) free(want[y]);
    }
    free(want);
    free(ms);
    free(have);
    free(fits);
    free(partner);
    free(zones);
    free(pairs);
    return st;
}

/* The one source of file i of y's step for holder x under the handover: x reads it, x's own step
 * lacks it, and y is the lowest node whose step has it. */
static bool handed_from(const ah_ckpt_session_t *s, const ah_ckpt_manifest_t *ms, const bool *have, int y, int x,
                        const char *name) {
    const int nn = s->place.n_nodes;
    if (x == y || !ah_handover_reads(&s->handover, x, name)) return false;
    if (have[x] && ah_ckpt_manifests_find(&ms[x], 1, ms[x].meta.step, name)) return false;
    for (int z = 0; z < y && z < nn; z++)
        if (have[z] && ah_ckpt_manifests_find(&ms[z], 1, ms[z].meta.step, name)) return false;
    return true;
}

/* Whether node x of the next plan finds every file it reads in its own step or handed to it (fits). */
static bool handover_covers(const ah_ckpt_session_t *s, const ah_ckpt_manifest_t *ms, const bool *have,
                            bool *const *fits, int x) {
    for (int i = 0; i < s->handover.n_names[x]; i++) {
        const char *name = s->handover.names[x][i];
        bool found = have[x] && ah_ckpt_manifests_find(&ms[x], 1, ms[x].meta.step, name);
        for (int y = 0; !found && y < s->place.n_nodes; y++) {
            const bool *fit = fits[y * s->place.n_nodes + x]; /* NULL: nothing of y's for x */
            for (int f = 0; fit && f < ms[y].n_files && !found; f++)
                found = fit[f] && strcmp(ms[y].files[f].name, name) == 0;
        }
        if (!found) return false;
    }
    return true;
}

ah_status_t ah_ckpt_hand_over(ah_ckpt_session_t *s, const char *src_root, int64_t step, ah_ckpt_replica_stats_t *rs,
                              ah_error_t *err) {
    memset(rs, 0, sizeof *rs);
    const double t0 = ah_now_s();
    const int nn = s->place.n_nodes;
    ah_ckpt_manifest_t *ms = calloc((size_t)nn, sizeof *ms);
    bool *have = calloc((size_t)nn, sizeof *have), **fits = calloc((size_t)nn * nn, sizeof *fits);
    uint64_t *held = calloc((size_t)nn, sizeof *held);
    ah_status_t st = ms && have && fits && held ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the handover");
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = gather_manifests(s, src_root, step, ms, have, err);
    /* pairs (source y, holder x) in one global order; a holder takes files while its budget lasts */
    for (int p = 0; st == AH_OK && p < nn * nn; p++) {
        const int y = p / nn, x = p % nn;
        if (!have[y] || x == y || s->place.node_leader[x] < 0) continue;
        if (!(fits[p] = calloc((size_t)ms[y].n_files + 1, sizeof **fits))) {
            st = ah_error_set(err, AH_ERR_OOM, "no host memory for the handover");
            break;
        }
        for (int i = 0; i < ms[y].n_files; i++) {
            if (!handed_from(s, ms, have, y, x, ms[y].files[i].name)) continue;
            if (held[x] + ms[y].files[i].bytes > s->replica_budget) {
                if (s->tr->rank == 0) rs->left_bytes += ms[y].files[i].bytes, rs->left_files++;
                continue;
            }
            fits[p][i] = true;
            held[x] += ms[y].files[i].bytes;
        }
    }
    copy_job_t *jobs = st == AH_OK ? calloc((size_t)nn * nn + 1, sizeof *jobs) : NULL;
    int n_jobs = 0;
    if (st == AH_OK && !jobs) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the handover");
    for (int p = 0; jobs && p < nn * nn; p++)
        if (fits[p]) jobs[n_jobs++] = (copy_job_t){.from = p / nn, .to = p % nn, .m = &ms[p / nn], .fits = fits[p]};
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = copy_pairs(s, src_root, step, jobs, n_jobs, rs, err);
    free(jobs);
    rs->complete = st == AH_OK;
    for (int x = 0; rs->complete && x < nn; x++)
        if (s->handover.in_next[x] && (s->place.node_leader[x] < 0 || !handover_covers(s, ms, have, fits, x)))
            rs->complete = false;
    if (st == AH_OK) st = replica_totals(s, step, t0, rs, err);
    for (int i = 0; fits && i < nn * nn; i++) free(fits[i]);
    for (int y = 0; ms && have && y < nn; y++)
        if (have[y]) ah_ckpt_manifest_free(&ms[y]);
    free(ms);
    free(have);
    free(fits);
    free(held);
    return st;
}

void ah_ckpt_replica_prune_older(const ah_ckpt_session_t *s, int64_t step) {
    if (s->replica_budget > 0 && s->node_rank == 0) ah_replica_prune(s->replica_root, step, NULL);
}

void ah_ckpt_replica_event(const ah_ckpt_replica_stats_t *rs, json_t *ev) {
    json_t *b = json_object_get(ev, "bytes");
    if (json_is_object(b)) json_object_set_new(b, "memory", json_integer((json_int_t)rs->bytes));
    json_object_set_new(ev, "memory_files", json_integer(rs->files));
    json_object_set_new(ev, "memory_seconds", json_real(rs->seconds));
    /* what did not fit --replica-memory-gb: on the disks (and the cloud) only */
    json_object_set_new(ev, "memory_left_bytes", json_integer((json_int_t)rs->left_bytes));
    json_object_set_new(ev, "memory_left_files", json_integer(rs->left_files));
    /* holders that freed their older step before the copy (it and the new one over the budget) */
    json_object_set_new(ev, "memory_freed_first", json_integer(rs->freed_first));
    if (rs->error[0]) json_object_set_new(ev, "memory_error", json_string(rs->error));
}
