/* The save at a preemption notice (ckpt_session.h: ah_ckpt_notice_rule, ah_ckpt_notice_save;
 * docs/checkpoints.md "The save at a notice, memory first").
 *
 * Without in-memory replicas the notice's save is the synchronous save: every rank writes its pieces
 * to its node's disk, each node commits, then the upload hand-off (ckpt_io.c).
 *
 * With them (--replica-memory-gb), when ckpt/policy.h's rule says memory first (the last
 * measured snapshot + replication took less than the last save to the disks, or either is not
 * known yet; otherwise the disks first, as without replicas), so that the grace period has to
 * cover only what commits the step in memory:
 *   1. snapshot: every rank writes its pieces of step N into its own host's memory, the checkpoint
 *      root REPLICA_ROOT/from-NODE of its node (the tmpfs of ckpt/replica.h: it outlives the job's
 *      processes), and each node's leader commits the step there (test hook "notice-snapshot");
 *   2. replicate: each leaving node sends the files of that step that no staying node's step holds
 *      to its partner's memory (ckpt_replica.c: one flow a rank; a staying node's own pieces are in
 *      its own memory since step 1, and a data-parallel replica's on a staying node are there too),
 *      the holders keeping their older step until the new one is complete (so a kill during the
 *      copy leaves the last committed replica; a periodic replication too, when both fit the budget);
 *      at a join's restart (every node noticed, none leaves) every node's step, as a periodic one;
 *   3. the step is committed in memory when every leaving node has every file sent in its partner's
 *      memory (nothing over the budget, no write failed) and no leaving node's partner leaves too
 *      (a staying node keeps its own copy of step 1): s->memory_saved (test hook "notice-memory");
 *      the older replicas are freed then when every node's step was sent, else once the disks hold
 *      step N (the staying nodes' older replicas at their partners protect them until then);
 *   4. the disks: the same pieces, still the trainer's buffers, written to each node's
 *      --local-root and committed there (ah_ckpt_commit_step: retention, the upload, the event,
 *      which gains "memory_first", "memory_committed", "memory_commit_seconds",
 *      "memory_snapshot_seconds"); once the disks hold it the own copy of step 1 is freed.
 *
 * With the next plan known (the handover: ckpt/handover.h, s->handover), step 2 sends each file that a
 * node of that plan reads, and its own step lacks, into that node's memory (ah_ckpt_hand_over) instead
 * of the partners'; committed when every node of the next plan then has every file it reads on its own
 * host; step 4 is then skipped: the relaunch reads step N from memory and writes it to its disks at once,
 * in the background (ckpt_resume.c write_behind; a host of the next plan lost before that commits rolls
 * back to the disks' older step).
 *
 * What "committed" means per tier (a resume takes the newest step whose every piece some tier has
 * committed, restore.h): local, the node's manifest.json on its disk (the run's step once every
 * node's is); memory, a holder's manifest in its tmpfs, written after every file it lists; cloud,
 * every uploading node's manifest object. A kill anywhere leaves the last committed step intact:
 * before 3 nothing older was removed (the disks' and the holders' older steps are kept), after 3
 * step N is committed in memory; the disks' older steps go only after their step N committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/policy.h"
#include "ckpt/replica.h"
#include "ckpt/test_hook.h"
#include "core/json.h"
#include "core/timing.h"
#include "runtime/ckpt_session.h"
#include "runtime/protocol.h"

/* Whether every leaving node's pieces have a holder that stays: its partner got no notice. */
static bool holders_stay(const ah_ckpt_session_t *s) {
    const int nn = s->place.n_nodes;
    int *partner = calloc((size_t)nn, sizeof *partner);
    const char **zones = calloc((size_t)nn, sizeof *zones);
    bool ok = partner && zones;
    for (int y = 0; ok && y < nn; y++) zones[y] = s->tr->plan->cluster.nodes[y].zone;
    ok = ok && ah_replica_partners(&s->place, zones, partner);
    for (int y = 0; ok && y < nn; y++)
        if (s->place.node_leader[y] >= 0 && s->hit[y] && (partner[y] < 0 || s->hit[partner[y]])) ok = false;
    free(partner);
    free(zones);
    return ok;
}

/* The next plan's file as this rank sees it now (inode, size, modification time; "" when absent). */
static void next_plan_stamp(const ah_ckpt_session_t *s, char *out, size_t cap) {
    char path[AH_CKPT_PATH_MAX];
    struct stat sb;
    out[0] = '\0';
    if (s->o.run_dir && snprintf(path, sizeof path, "%s/%s", s->o.run_dir, AH_PROTO_NEXT_PLAN_FILE) < (int)sizeof path &&
        stat(path, &sb) == 0)
        snprintf(out, cap, "%llu:%lld:%lld.%09ld", (unsigned long long)sb.st_ino, (long long)sb.st_size,
                 (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
}

/* The next plan the agent wrote into the run directory before the notice (protocol.h), read by every
 * rank: s->handover when every rank read it, none otherwise (said once by rank 0: the notice's save
 * then replicates to the partners as without it). Collective. */
static ah_status_t load_next_plan(ah_ckpt_session_t *s, ah_error_t *err) {
    if (s->handover.n_nodes > 0 || !s->o.run_dir) return AH_OK; /* the same on every rank */
    char path[AH_CKPT_PATH_MAX];
    ah_error_t e2 = {0};
    ah_status_t ls = AH_ERR_IO;
    next_plan_stamp(s, s->next_plan_seen, sizeof s->next_plan_seen);
    const bool there = snprintf(path, sizeof path, "%s/%s", s->o.run_dir, AH_PROTO_NEXT_PLAN_FILE) < (int)sizeof path &&
                       access(path, R_OK) == 0;
    if (there) {
        ah_plan_t next;
        ls = ah_plan_load(path, NULL, &next, &e2);
        if (ls == AH_OK) {
            ls = ah_handover_needs(&next, &s->tr->plan->cluster, &s->tr->plan->model, s->tr->plan->tp, &s->handover, &e2);
            ah_plan_free(&next);
        }
    }
    int64_t bad = ls != AH_OK, any_read = there;
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &bad, 1, err);
    if (st == AH_OK) st = ah_comm_allreduce_max_i64(ah_comm_world(), &any_read, 1, err);
    if (st != AH_OK || bad) ah_handover_needs_free(&s->handover);
    if (st == AH_OK && bad && any_read && s->tr->rank == 0)
        fprintf(stderr, "autohet train: note: no handover at this notice (%s): the save goes to the partners' memory\n",
                there && ls != AH_OK ? e2.msg : "some rank could not read the next plan");
    return st;
}

/* The next plan read again where its file changed since load_next_plan read it (before the notice's
 * save, with replicas): the agent re-plans when a node of it is preempted during a join's stop
 * (elastic/agent.c notice_leaving), and the uploads are decided on the plan the relaunch takes.
 * Collective: a change any rank sees reloads it on all. */
static ah_status_t reload_next_plan(ah_ckpt_session_t *s, ah_error_t *err) {
    char now[sizeof s->next_plan_seen];
    next_plan_stamp(s, now, sizeof now);
    int64_t changed = s->handover.n_nodes > 0 && strcmp(now, s->next_plan_seen) != 0;
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &changed, 1, err);
    if (st != AH_OK || !changed) return st;
    ah_handover_needs_free(&s->handover);
    return load_next_plan(s, err);
}

/* A periodic save due now too is as much on the recovery's path. Redoing the steps since the newest
 * committed one takes them at the slowest rank's pace, the same on all. */
ah_status_t ah_ckpt_notice_rule(ah_ckpt_session_t *s, int64_t done, double elapsed, bool *save, ah_error_t *err) {
    bool all = true;
    for (int n = 0; n < s->n_nodes; n++) all = all && (s->place.node_leader[n] < 0 || s->hit[n]);
    ah_ckpt_notice_t notice = {.elapsed_s = elapsed, .grace_s = s->o.grace_s, .save_s = s->last_save_s,
                               .redo_s = -1, .every_node = all, .memory_s = -1};
    /* the memory tier: replicas on, the last replication complete, every leaving node's holder staying;
     * or the handover to the next plan's nodes (none leaves: the agent planned without the leaving).
     * Not at a join (every node hit): there the next plan says only which nodes the relaunch reads
     * (read_by_relaunch), as the simulator prices it (docs/simulator.md rule 4) */
    ah_status_t st = s->replica_budget > 0 ? load_next_plan(s, err) : AH_OK;
    if (st != AH_OK) return st;
    const bool handover = s->handover.n_nodes > 0 && !all;
    notice.memory = s->replica_budget > 0 && (handover || (s->last_rep_complete && holders_stay(s)));
    if (notice.memory && s->last_replicate_s >= 0)
        notice.memory_s = s->last_replicate_s + (s->last_snapshot_s >= 0 ? s->last_snapshot_s : 0);
    if (!all && s->last_saved >= 0 && s->last_save_s >= 0 && s->step_s > 0) {
        int64_t us = (int64_t)(s->step_s * 1e6);
        st = ah_comm_allreduce_max_i64(ah_comm_world(), &us, 1, err);
        if (st != AH_OK) return st;
        notice.redo_s = (double)(done - s->last_saved) * (double)us * 1e-6;
    }
    /* the handover (ckpt/policy.h): its duration bounded by the last replication's, which moved every
     * file; what the relaunch would fetch without it is not known here (counts 0) */
    notice.handover = handover;
    *save = ah_ckpt_save_at_notice(&notice);
    s->notice_handover = ah_ckpt_notice_handover(&notice);
    s->notice_memory_first = s->notice_handover || ah_ckpt_notice_memory_first(&notice);
    return AH_OK;
}

/* Step 1: this rank's pieces (snap) into its host's memory (self), committed there by the node's
 * leader; agreed by every rank. */
static ah_status_t snapshot_in_memory(ah_ckpt_session_t *s, const char *self, ah_ckpt_snap_t *snap, ah_status_t take,
                                      int64_t step, bool *ok, ah_error_t *err) {
    ah_error_t lerr = {0};
    ah_status_t ls = take;
    if (ls == AH_OK && snap) {
        snprintf(snap->root, sizeof snap->root, "%s", self);
        ls = ah_ckpt_snap_write(snap, NULL, &lerr);
    }
    ah_status_t ns = ah_comm_agree(s->node, ls, &lerr);
    bool kept;
    if (s->node_rank == 0 && ns == AH_OK) ns = ah_ckpt_commit_node(s, self, step, &kept, &lerr);
    ah_status_t ws = ah_comm_agree(ah_comm_world(), s->node_rank == 0 ? ns : AH_OK, &lerr);
    *ok = ws == AH_OK;
    if (!*ok && s->tr->rank == 0)
        fprintf(stderr, "autohet train: warning: the snapshot of step %lld in the hosts' memory failed (%s); the "
                "notice's save goes to the disks first\n", (long long)step, lerr.msg);
    (void)err;
    return AH_OK;
}

/* Rank 0: the memory-first figures into the checkpoint event. */
static void notice_event(json_t *ev, bool committed, double commit_s, double snapshot_s) {
    if (!ev) return;
    json_object_set_new(ev, "memory_first", json_true());
    json_object_set_new(ev, "memory_committed", json_boolean(committed));
    json_object_set_new(ev, "memory_commit_seconds", json_real(commit_s)); /* notice save start -> committed in memory */
    json_object_set_new(ev, "memory_snapshot_seconds", json_real(snapshot_s));
}

/* Rank 0: the checkpoint event of a handover committed in memory, no disk written (bytes.local 0). */
static json_t *handover_event(int64_t step, double commit_s, double snapshot_s, const ah_ckpt_replica_stats_t *rep) {
    json_t *ev = json_pack("{s:s, s:I, s:f, s:b, s:i, s:{s:i, s:i, s:i}, s:b, s:b}", AH_PROTO_EVENT,
                           AH_PROTO_EV_CHECKPOINT, AH_PROTO_STEP, (json_int_t)step, "seconds", commit_s, "ok", 1,
                           "files", rep->files, "bytes", "local", 0, "peer", 0, "cloud", 0, "handover", 1, "disks", 0);
    if (!ev) return NULL;
    ah_ckpt_replica_event(rep, ev);
    notice_event(ev, true, commit_s, snapshot_s);
    return ev;
}

ah_status_t ah_ckpt_notice_save(ah_ckpt_session_t *s, int64_t step, json_t **event, ah_error_t *err) {
    /* the disks first (and the replication after their commit, ckpt_io.c) without replicas, or when
     * the memory tier would not commit sooner (ckpt/policy.h) */
    if (s->replica_budget == 0 || !s->notice_memory_first) return ah_ckpt_save_sync(s, step, event, err);
    const double t0 = ah_now_s();
    const char *node = s->tr->plan->cluster.nodes[s->my_node].name;
    char self[AH_CKPT_PATH_MAX];
    ah_error_t e2;
    if (ah_replica_source_root(self, sizeof self, s->replica_root, node) < 0)
        return ah_ckpt_save_sync(s, step, event, err); /* the same on every rank of the node: a long path */
    if (s->node_rank == 0) ah_ckpt_remove_step(self, step, &e2); /* an earlier attempt's */
    ah_status_t st = ah_comm_barrier(s->node, err);
    ah_ckpt_written_t w = {.step = step};
    ah_ckpt_snap_t *snap = NULL;
    if (st == AH_OK) st = ah_ckpt_snapshot_take(s, step, false, &w, &snap, err); /* views of the trainer's buffers */
    if (st != AH_OK) return st;
    const ah_status_t take = w.st;
    bool snap_ok = false;
    snapshot_in_memory(s, self, snap, take, step, &snap_ok, err);
    const double snapshot_s = ah_now_s() - t0;
    if (snap_ok) ah_test_hook("notice-snapshot", step, node); /* test-only: in this host's memory only */
    ah_ckpt_replica_stats_t rep = {0};
    const bool handover = s->notice_handover;
    if (snap_ok)
        st = handover ? ah_ckpt_hand_over(s, self, step, &rep, err) : ah_ckpt_replicate(s, self, step, true, &rep, err);
    if (st != AH_OK) {
        ah_ckpt_views_release(s);
        ah_ckpt_snap_free(snap);
        return st;
    }
    const bool committed = snap_ok && rep.complete && (handover || holders_stay(s));
    const double commit_s = ah_now_s() - t0;
    if (snap_ok) {
        s->last_snapshot_s = snapshot_s;
        s->last_replicate_s = rep.seconds;
        s->last_rep_complete = rep.complete;
    }
    if (committed) {
        s->memory_saved = s->memory_complete_step = step;
        if (!rep.partial) ah_ckpt_replica_prune_older(s, step);
        ah_test_hook("notice-memory", step, node); /* test-only: committed in memory, not on a disk */
    }
    if (committed && handover) { /* the relaunch reads step N from its hosts' memory: the disks come after it */
        ah_ckpt_views_release(s);
        ah_ckpt_snap_free(snap);
        if (s->tr->rank == 0 && event) *event = handover_event(step, commit_s, snapshot_s, &rep);
        return AH_OK;
    }
    /* Step 4: the disks, from the same buffers (nothing trained since) */
    if (take == AH_OK && snap) {
        snprintf(snap->root, sizeof snap->root, "%s", s->node_root);
        if ((w.st = ah_ckpt_snap_write(snap, NULL, &w.err)) == AH_OK) {
            w.bytes = snap->bytes;
            w.files = snap->files;
        }
    }
    ah_ckpt_views_release(s);
    ah_ckpt_snap_free(snap);
    w.save_s = ah_now_s() - t0;
    s->replicated_step = snap_ok ? step : -1;
    s->notice_rep = rep;
    st = ah_ckpt_commit_step(s, &w, event, err);
    s->replicated_step = -1;
    if (st != AH_OK) return st;
    if (s->last_saved == step && s->node_rank == 0) ah_ckpt_remove_step(self, step, &e2); /* the disks hold it */
    if (s->last_saved == step && (!committed || rep.partial)) ah_ckpt_replica_prune_older(s, step);
    if (s->tr->rank == 0 && event) notice_event(*event, committed, commit_s, snapshot_s);
    if (s->tr->rank == 0 && event && *event) json_object_set_new(*event, "handover", json_boolean(handover));
    return AH_OK;
}

/* Whether node n is read by the relaunch. When the agent wrote the next plan (s->handover known: at a
 * notice, planned over the nodes that stay; at a join, the plan with the joined nodes, while every
 * node gets the notice), the nodes that plan has ranks on: the agent relaunches onto it whenever they
 * are all still up (elastic/agent_logic.h ah_agent_next_plan_holds), and a restore reads only the
 * disks and memory of the relaunched job's own nodes, so a copy on a node it leaves out does not count.
 * Without a next plan (a notice from outside, --no-handover, an interrupt) every node without the
 * notice counts: the agent's re-plan over the nodes up may still leave one out (docs/checkpoints.md,
 * "not done"). */
static bool read_by_relaunch(const ah_ckpt_session_t *s, int n) {
    if (s->handover.n_nodes == 0) return !s->hit[n];
    /* A node noticed after the agent wrote the plan (a second preemption in the same stop) may
     * leave it: the agent then re-plans without it, so outside a join (every node of the job
     * noticed) a noticed node counts only when no node is spared. */
    bool every_node_hit = true;
    for (int y = 0; y < s->n_nodes; y++)
        if (s->place.node_leader[y] >= 0 && !s->hit[y]) every_node_hit = false;
    return s->handover.in_next[n] && (every_node_hit || !s->hit[n]);
}

/* Whether every shard a rank of node writes is also on the disk of a node the relaunch reads
 * (a data-parallel replica holds the same layers at the same TP index). */
static bool kept_on_a_disk(const ah_ckpt_session_t *s, int node) {
    const ah_placement_t *pl = &s->place;
    ah_shard_group_t *gs = groups_alloc(s);
    bool *stays = malloc((size_t)s->n_nodes * sizeof *stays);
    bool kept = gs && stays;
    for (int n = 0; kept && n < s->n_nodes; n++) stays[n] = read_by_relaunch(s, n);
    for (int r = 0; kept && r < pl->n_ranks; r++) {
        if (pl->ranks[r].node != node) continue;
        const int n = ah_placement_groups(pl, r, false, gs);
        for (int i = 0; kept && i < n; i++) kept = ah_placement_survives(pl, gs[i], pl->ranks[r].tp_index, stays);
    }
    free(stays);
    free(gs);
    return kept;
}

/* Whether the memory tier holds node's pieces of the step a relaunch resumes (the newest committed,
 * on the disks or in memory) in a host the relaunch reads: that step's replication was complete and
 * node's partner is read by the relaunch, or it is a handover committed in the next plan's hosts. */
static bool kept_in_memory(const ah_ckpt_session_t *s, const int *partner, int node) {
    const int64_t resumed = s->last_saved > s->memory_saved ? s->last_saved : s->memory_saved;
    if (s->replica_budget == 0 || resumed < 0 || s->memory_complete_step != resumed) return false;
    if (s->notice_handover && s->memory_saved == resumed) return true;
    return partner[node] >= 0 && read_by_relaunch(s, partner[node]);
}

ah_status_t ah_ckpt_notice_uploads(ah_ckpt_session_t *s, int64_t step, json_t *ev, ah_error_t *err) {
    ah_test_hook("notice-uploads", step, s->tr->plan->cluster.nodes[s->my_node].name); /* test-only */
    const int nn = s->n_nodes;
    int64_t *pending = malloc((size_t)nn * sizeof *pending);
    int *partner = calloc((size_t)nn, sizeof *partner);
    const char **zones = calloc((size_t)nn, sizeof *zones);
    ah_status_t st = pending && partner && zones ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory at the notice");
    st = ah_comm_agree(ah_comm_world(), st, err);
    if (st == AH_OK) st = reload_next_plan(s, err); /* rewritten since the save read it */
    if (st == AH_OK) st = load_next_plan(s, err);   /* which nodes the relaunch reads (read_by_relaunch) */
    for (int n = 0; st == AH_OK && n < nn; n++) {
        pending[n] = -1;
        zones[n] = s->tr->plan->cluster.nodes[n].zone;
    }
    if (st == AH_OK && s->up) pending[s->my_node] = ah_ckpt_uploader_pending_step(s->up);
    if (st == AH_OK) st = ah_comm_allreduce_max_i64(ah_comm_world(), pending, (size_t)nn, err);
    if (st == AH_OK) /* agreed: every rank goes on to the same collectives */
        st = ah_comm_agree(ah_comm_world(), ah_replica_partners(&s->place, zones, partner) ? AH_OK
                                            : ah_error_set(err, AH_ERR_OOM, "no host memory for the replicas' holders"), err);
    /* --cloud-only drops every disk and host at the stop: only the cloud is kept, so no node drops
     * its upload (a staying node's disk is dropped too: its upload is the only copy that survives) */
    for (int n = 0; st == AH_OK && n < nn; n++) {
        const bool disk = !s->o.cloud_only && kept_on_a_disk(s, n);
        const bool memory = !s->o.cloud_only && !disk && kept_in_memory(s, partner, n);
        if (n == s->my_node) s->drop_upload = !s->o.cloud_only && (read_by_relaunch(s, n) || disk || memory);
        if (!ev || !s->hit[n] || pending[n] < 0 || !(disk || memory)) continue;
        json_t *list = json_object_get(ev, "uploads_cancelled");
        if (!list) json_object_set_new(ev, "uploads_cancelled", list = json_array());
        json_array_append_new(list, json_pack("{s:s, s:I, s:s}", "node", s->tr->plan->cluster.nodes[n].name, "step",
                                              (json_int_t)pending[n], "held_in", disk ? "disk" : "memory"));
    }
    free(pending);
    free(partner);
    free(zones);
    return st;
}
