/* A training job's checkpoint session: open, save, commit per node, upload, notices (the tiered
 * resume is ckpt_resume.c; the state both share, ckpt_session.h). */
#include "runtime/ckpt_io.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/afile.h"
#include "ckpt/ckpt.h"
#include "ckpt/cloud.h"
#include "ckpt/placement.h"
#include "ckpt/policy.h"
#include "ckpt/replica.h"
#include "ckpt/test_hook.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/timing.h"
#include "runtime/ckpt_session.h"
#include "runtime/preempt.h"
#include "runtime/protocol.h"

/* ---- session ------------------------------------------------------------------------------ */

/* The shape of TP rank k's piece of d: 1-D for vectors. */
static int piece_shape(const ah_tensor_t *d, int t, int64_t *shape) {
    ah_tensor_shard_shape(d, t, shape);
    return d->cols == 1 ? 1 : 2;
}

static void plan_hash(const ah_plan_t *p, char *out, size_t cap) {
    json_t *doc = ah_plan_to_json(p);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    const uint64_t h = ah_fnv1a64_str(text);
    snprintf(out, cap, "fnv1a64:%016llx", (unsigned long long)h);
    free(text);
    json_decref(doc);
}

/* A sharded plan's rule (docs/checkpoints.md "Sharded optimizer"): each sharded group's state is
 * saved by its members' nodes, so without a cloud those must be two nodes at least, or a lost node
 * would take the only copy of its parts. The message names the group and the node. */
static ah_status_t sharded_durable(const ah_plan_t *p, const ah_ckpt_opts_t *o, ah_error_t *err) {
    if (p->n_opt_groups == 0 || !o->local_root || o->cloud) return AH_OK;
    for (int k = 0; k < p->n_opt_groups; k++) {
        const int node = ah_opt_group_one_node(p, &p->opt_groups[k]);
        char name[64];
        if (node >= 0)
            return ah_error_set(err, AH_ERR_USAGE,
                                "the optimizer's group %s is sharded over devices of node %s only: its checkpoints would be "
                                "on that node's disk alone, and the node's loss would lose them; give --cloud, or place the "
                                "group's members on two nodes, or drop its optimizer_shards",
                                ah_opt_group_name(&p->opt_groups[k], name, sizeof name), p->cluster.nodes[node].name);
    }
    return AH_OK;
}

/* This rank's node directory at start-up (ckpt_io.h): made, writable and, unless the job resumes,
 * free of committed steps (a fresh run saving there would find its steps "already committed" by the
 * earlier run and its GC would keep the two runs' steps side by side). */
static ah_status_t check_node_root(const ah_ckpt_session_t *s, const char *node_name, ah_error_t *err) {
    const char *root = s->o.local_root;
    int64_t newest = -1;
    /* a node's own directory given as the root (DIR/NODE instead of DIR): its steps would be missed */
    if (ah_ckpt_latest(root, &newest, err) == AH_OK && newest >= 0)
        return ah_error_set(err, AH_ERR_USAGE, "--local-root %s holds checkpoint steps itself (newest %lld): it is one "
                            "node's directory; give the directory above it (train keeps node X's steps in "
                            "--local-root/X/)", root, (long long)newest);
    if (ah_fs_mkdirs(s->node_root, err) != AH_OK)
        return ah_error_prefix(err, "--local-root %s: cannot make node %s's checkpoint directory", root, node_name);
    if (access(s->node_root, W_OK | X_OK) != 0)
        return ah_error_set(err, AH_ERR_IO, "--local-root %s: node %s's checkpoint directory %s is not writable: %s",
                            root, node_name, s->node_root, strerror(errno));
    ah_status_t st = ah_ckpt_latest(s->node_root, &newest, err);
    if (st != AH_OK) return ah_error_prefix(err, "--local-root %s", root);
    if (newest >= 0 && !s->o.resume)
        return ah_error_set(err, AH_ERR_USAGE, "--local-root %s holds an earlier run's checkpoints (node %s's newest "
                            "committed step is %lld, in %s): give --resume to continue that run, or use an empty root",
                            root, node_name, (long long)newest, s->node_root);
    return AH_OK;
}

ah_status_t ah_ckpt_session_open(ah_trainer_t *tr, const ah_ckpt_opts_t *o, ah_ckpt_session_t **out,
                                 ah_error_t *err) {
    *out = NULL;
    ah_status_t durable = sharded_durable(tr->plan, o, err);
    if (durable != AH_OK) return durable;
    ah_ckpt_session_t *s = calloc(1, sizeof *s);
    ah_status_t st = AH_OK;
    if (!s) return ah_error_set(err, AH_ERR_OOM, "no host memory for the checkpoint session");
    s->tr = tr;
    s->o = *o;
    if (s->o.keep < 1) s->o.keep = AH_CKPT_KEEP_DEFAULT;
    s->last_saved = -1;
    s->last_save_s = -1;
    s->cloud_disk_step = -1;
    s->cloud_base = -1;
    s->pending = s->behind_step = -1;
    s->replicated_step = s->memory_saved = s->memory_complete_step = -1;
    s->last_snapshot_s = s->last_replicate_s = -1;
    s->last_rep_complete = true;
    s->n_nodes = tr->plan->cluster.n_nodes;
    s->hit = calloc((size_t)s->n_nodes, sizeof *s->hit);
    s->figures = malloc((size_t)ah_comm_size(ah_comm_world()) * AH_CKPT_FIGURES * sizeof *s->figures);
    if (!s->hit || !s->figures) {
        st = ah_error_set(err, AH_ERR_OOM, "no host memory for the checkpoint session");
        goto agree;
    }
    if ((st = ah_placement_build(tr->plan, NULL, 0, &s->place, err)) != AH_OK) goto agree;
    s->my_node = s->place.ranks[tr->rank].node;
    const char *node_name = tr->plan->cluster.nodes[s->my_node].name;
    if (o->local_root && ah_ckpt_join(s->node_root, sizeof s->node_root, o->local_root, node_name) < 0) {
        st = ah_error_set(err, AH_ERR_USAGE, "--local-root %.200s...: path too long", o->local_root);
        goto agree;
    }
    if (o->local_root && !ah_ckpt_name_ok(node_name)) {
        st = ah_error_set(err, AH_ERR_INVALID, "node name \"%s\" cannot name a checkpoint directory; use "
                          "[A-Za-z0-9._-], not starting with '.', in the cluster's node names", node_name);
        goto agree;
    }
    if (o->local_root && (st = check_node_root(s, node_name, err)) != AH_OK) goto agree;
    if (o->local_root && (st = ah_ckpt_replica_open(s, err)) != AH_OK) goto agree;
    plan_hash(tr->plan, s->plan_hash, sizeof s->plan_hash);
    if ((st = ah_preempt_install(err)) != AH_OK) goto agree;
    if (o->run_dir) {
        const int index = s->place.ranks[tr->rank].index;
        if ((st = ah_preempt_write_rank_file(o->run_dir, tr->rank, node_name, index, err)) != AH_OK) goto agree;
    }
    if (o->cloud) {
        if (!o->local_root) {
            st = ah_error_set(err, AH_ERR_USAGE, "--cloud needs --local-root: shards are written locally first, "
                              "then uploaded");
            goto agree;
        }
        if ((st = ah_s3_url_parse(o->cloud, &s->url, err)) != AH_OK ||
            (st = ah_s3_config_from_env(&s->s3cfg, o->s3_endpoint, err)) != AH_OK)
            goto agree;
        /* The cluster's cloud bandwidth caps each transfer, so a loopback S3 server behaves like
         * the cloud link the plan (and the simulator) assume. */
        double cloud_bps = tr->plan->cluster.net.cloud_gb_s * 1e9;
        if (cloud_bps > 0) s->s3cfg.max_send_bytes_per_s = s->s3cfg.max_recv_bytes_per_s = (int64_t)cloud_bps;
        const int patience = o->cloud_timeout_s > 0 ? o->cloud_timeout_s : AH_CKPT_CLOUD_TIMEOUT_DEFAULT;
        s->s3cfg.stall_timeout_s = patience;
        s->s3cfg.connect_timeout_s = patience < 10 ? patience : 10;
        s->cloud = true;
    }
agree:
    /* The node communicator is a split over the world: every rank joins it, failed or not. */
    {
        ah_error_t e2;
        ah_status_t sp = ah_comm_split(ah_comm_world(), s->place.ranks ? s->my_node : 0, tr->rank, &s->node, &e2);
        if (st == AH_OK && sp != AH_OK) {
            *err = e2;
            st = sp;
        }
    }
    if (st == AH_OK) {
        s->node_rank = ah_comm_rank(s->node);
        s->node_size = ah_comm_size(s->node);
        if (s->cloud && s->node_rank == 0) st = ah_ckpt_uploader_start(&s->s3cfg, &s->url, &s->up, err);
        /* periodic saves write in the background unless --ckpt-sync (ckpt_async.c) */
        if (st == AH_OK && o->local_root && o->every > 0 && !o->sync) st = ah_ckpt_async_start(&s->writer, err);
        if (st == AH_OK && s->writer) s->fuse = ah_ckpt_fuse_new(s); /* NULL: the copies alone */
        ah_ckpt_snapshot_adopt(s); /* the last session's buffer, kept at an in-place change (else freed) */
    }
    st = ah_comm_agree(ah_comm_world(), st, err);
    /* the room its checkpoints need, known from the layout (ckpt_space.c), before the first step */
    if (st == AH_OK && o->local_root) st = ah_ckpt_check_space(s, err);
    if (st != AH_OK) {
        ah_ckpt_session_close(s, NULL);
        return st;
    }
    *out = s;
    return AH_OK;
}

ah_status_t ah_ckpt_session_close(ah_ckpt_session_t *s, ah_error_t *err) {
    ah_status_t st = AH_OK;
    if (!s) return AH_OK;
    /* After a notice, a node that stays keeps its steps on its disk for the relaunch: it does not
     * hold the job up for its uploads. A leaving node's disk goes with it, so it finishes its
     * share within the grace period (the agent kills it when that ends) — unless a staying node's
     * kept disk or the memory tier holds its pieces; a staying node that the next plan leaves out
     * is read by no one either, so it finishes its share too, with the same exception
     * (ah_ckpt_notice_uploads: s->drop_upload). */
    if (s->up && s->noticed && s->drop_upload) {
        ah_ckpt_uploader_cancel(s->up);
    } else if (s->up) {
        ah_error_t e2;
        if ((st = ah_ckpt_uploader_wait(s->up, &e2)) != AH_OK && err) *err = e2;
        ah_ckpt_uploader_stop(s->up);
    }
    /* a snapshot still in flight (the loop stopped on an error) is cut short: never committed */
    ah_ckpt_async_stop(s->writer, true);
    ah_ckpt_snapshot_free(s);
    ah_comm_free(&s->node);
    ah_placement_free(&s->place);
    ah_handover_needs_free(&s->handover);
    free(s->hit);
    free(s->figures);
    free(s);
    return st;
}

/* ---- save --------------------------------------------------------------------------------- */

/* Group g of this rank's stage as a shard (a snapshot's piece): its tensor table (weights, AdamW m and
 * v from bufs, host copies of st->w, m, v (ckpt_async.c), or NULL data pointers for its size), in the
 * TP piece's own shape, its name and metadata. Free with ah_ckpt_piece_free. */
ah_status_t ah_ckpt_group_piece(const ah_ckpt_session_t *s, ah_shard_group_t g, int64_t step, float *const bufs[3],
                                ah_ckpt_piece_t *out, ah_error_t *err) {
    const ah_gpt_stage_t *st = &s->tr->stage;
    const int t = st->cfg.t, k = st->cfg.tp_rank;
    int n = 0;
    for (int i = 0; i < st->n_params; i++) n += in_group(&st->params[i].def, g);
    memset(out, 0, sizeof *out);
    out->ts = calloc((size_t)(3 * n), sizeof *out->ts);
    out->names = calloc((size_t)(3 * n), sizeof *out->names);
    char tt[16], kk[16], ss[32];
    snprintf(tt, sizeof tt, "%d", t);
    snprintf(kk, sizeof kk, "%d", k);
    snprintf(ss, sizeof ss, "%lld", (long long)step);
    out->meta = json_pack("{s:s, s:s, s:s, s:s}", "format", "autohet-shard", "tp", tt, "tp_index", kk,
                          "adam_step", ss);
    if (!out->ts || !out->names || !out->meta) {
        ah_ckpt_piece_free(out);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for a checkpoint shard's table");
    }
    int j = 0;
    for (int i = 0; i < st->n_params; i++) {
        const ah_gpt_param_t *x = &st->params[i];
        if (!in_group(&x->def, g)) continue;
        for (int b = 0; b < 3; b++, j++) {
            snprintf(out->names[j], sizeof out->names[j], "%s%s", x->def.name, SUFFIX[b]);
            out->ts[j].name = out->names[j];
            out->ts[j].dtype = AH_DTYPE_F32;
            out->ts[j].ndim = piece_shape(&x->def, t, out->ts[j].shape);
            out->ts[j].data = bufs ? bufs[b] + x->offset : NULL;
        }
    }
    out->n = j;
    ah_shard_group_name(out->name, g, t, k);
    return AH_OK;
}

ah_status_t ah_ckpt_rank_step_bytes(const ah_ckpt_session_t *s, uint64_t block, uint64_t *bytes, int *files,
                                     ah_error_t *err) {
    *bytes = 0;
    *files = 0;
    ah_shard_group_t *gs = groups_alloc(s);
    if (!gs) return ah_error_set(err, AH_ERR_OOM, "no host memory for the shard list");
    const int rank = s->tr->rank, n = ah_placement_groups(&s->place, rank, false, gs);
    const int k = s->place.ranks[rank].tp_index;
    ah_status_t st = AH_OK;
    for (int i = 0; i < n && st == AH_OK; i++) {
        if (ah_placement_lowest_holder(&s->place, gs[i], k, s->my_node) != rank) continue;
        ah_ckpt_piece_t g;
        uint64_t b = 0;
        /* the run's last step: the longest adam_step in the metadata */
        if ((st = ah_ckpt_group_piece(s, gs[i], s->o.steps, NULL, &g, err)) != AH_OK) break;
        st = ah_st_size(g.ts, g.n, g.meta, &b, err);
        ah_ckpt_piece_free(&g);
        *bytes += (b + block - 1) / block * block;
        (*files)++;
    }
    free(gs);
    return st;
}

/* Names of the shards whose lowest holder in the whole job is on this node: its cloud share. */
static int cloud_share(const ah_ckpt_session_t *s, char (*names)[AH_CKPT_NAME_MAX], int cap) {
    const ah_placement_t *pl = &s->place;
    int n = 0;
    ah_shard_group_t *gs = groups_alloc(s);
    for (int r = 0; gs && r < pl->n_ranks; r++) {
        if (pl->ranks[r].node != s->my_node) continue;
        const int ng = ah_placement_groups(pl, r, false, gs);
        const int k = pl->ranks[r].tp_index;
        for (int i = 0; i < ng && n < cap; i++)
            if (ah_placement_lowest_holder(pl, gs[i], k, -1) == r) ah_shard_group_name(names[n++], gs[i], pl->tp, k);
    }
    free(gs);
    return n;
}

/* The data's shard list into meta->data; false (meta->data "") when it does not fit. */
static bool keep_data(const ah_dataset_t *d, ah_ckpt_meta_t *meta) {
    json_t *list = ah_dataset_describe(d);
    char *text = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    const bool fits = text && strlen(text) < sizeof meta->data;
    if (fits) snprintf(meta->data, sizeof meta->data, "%s", text);
    free(text);
    return fits;
}

/* The node leader's commit of step `step` in root (every part written on every node); *data_kept:
 * whether the data's shard list fit the manifest. */
ah_status_t ah_ckpt_commit_node(const ah_ckpt_session_t *s, const char *root, int64_t step, bool *data_kept,
                                ah_error_t *err) {
    const ah_trainer_t *tr = s->tr;
    ah_ckpt_meta_t meta;
    memset(&meta, 0, sizeof meta);
    meta.step = step;
    meta.data_position = ah_trainer_data_position(tr, step);
    meta.seq_len = tr->data->T; /* the data position counts samples of T + 1 tokens */
    snprintf(meta.plan_hash, sizeof meta.plan_hash, "%s", s->plan_hash);
    snprintf(meta.node, sizeof meta.node, "%s", tr->plan->cluster.nodes[s->my_node].name);
    meta.has_model = true;
    meta.model = tr->plan->model;
    meta.sched_steps = tr->opts.steps; /* the learning-rate schedule, which a resume keeps */
    meta.sched_warmup = tr->opts.warmup;
    meta.sched_lr = tr->opts.lr;
    *data_kept = keep_data(tr->data, &meta);
    /* the resumed step written behind beside another plan's files of it (ckpt_resume.c) */
    if (step == s->behind_step && s->behind_extend) return ah_ckpt_commit_more(root, &meta, s->node_size, err);
    return ah_ckpt_commit(root, &meta, s->node_size, err);
}

/* The upload hand-off of a committed step (node leaders with a cloud): this node's share of it. */
static void hand_off_upload(ah_ckpt_session_t *s, int64_t step) {
    /* A node holds at most every group at every TP index. */
    const int cap = ((int)s->tr->plan->model.n_layer + 2) * s->tr->plan->tp;
    char (*names)[AH_CKPT_NAME_MAX] = calloc((size_t)cap, sizeof *names);
    const char **ptrs = calloc((size_t)cap, sizeof *ptrs);
    int n = names && ptrs ? cloud_share(s, names, cap) : 0;
    for (int i = 0; i < n; i++) ptrs[i] = names[i];
    ah_error_t e2;
    /* A node with nothing to upload (every shard it holds is another node's share) submits
     * nothing and does not count for the cloud's step (ckpt_cloud.c). */
    s->cloud_share = n;
    if (n > 0) ah_ckpt_uploader_submit(s->up, s->node_root, step, ptrs, n, &e2);
    free(names);
    free(ptrs);
}

/* Collective: a step committed on every node (ok) into the partners' memory (ckpt_replica.c), its
 * figures into *rep; a notice's step was replicated before its disk write (ckpt_notice.c): its
 * figures then. */
static ah_status_t replicate_committed(ah_ckpt_session_t *s, int64_t step, bool ok, ah_ckpt_replica_stats_t *rep,
                                       ah_error_t *err) {
    const bool replicated = s->replicated_step == step;
    *rep = replicated ? s->notice_rep : (ah_ckpt_replica_stats_t){0};
    if (!ok || s->replica_budget == 0 || replicated) return AH_OK;
    /* a periodic save's, or a join's (no node leaves): none where it cannot pay */
    if (s->o.replica_if_pays && !ah_ckpt_notice_leaves_some(s) && !s->replica_pays) {
        if (s->tr->rank == 0 && !s->replica_pays_said)
            fprintf(stderr, "autohet train: note: every piece of this plan is on two nodes' disks: its periodic "
                    "checkpoints are not replicated to the peers' memory (--replica-when-it-pays); a notice's save "
                    "still is\n");
        s->replica_pays_said = true;
        s->last_rep_complete = true; /* the memory tier stands for a notice: nothing was left out */
        return AH_OK;
    }
    ah_status_t st = ah_ckpt_replicate(s, s->node_root, step, false, rep, err);
    if (st == AH_OK) {
        s->last_replicate_s = rep->seconds;
        s->last_rep_complete = rep->complete;
        if (rep->complete) s->memory_complete_step = step;
    }
    return st;
}

/* Collective, for the resumed step written behind: the nodes whose disk held it committed already,
 * as rank 0's object of two lists of their names (NULL on the other ranks, and when none):
 * "held_nodes" (s->behind_held: written nothing, committed nothing) and "extended_nodes"
 * (s->behind_extend: this plan's files added beside another plan's). */
static ah_status_t behind_nodes(const ah_ckpt_session_t *s, json_t **out, ah_error_t *err) {
    *out = NULL;
    int64_t *how = calloc((size_t)s->n_nodes, sizeof *how);
    if (!how) return ah_error_set(err, AH_ERR_OOM, "no host memory for the nodes' list");
    how[s->my_node] = s->node_rank != 0 ? 0 : s->behind_held ? 1 : s->behind_extend ? 2 : 0;
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), how, (size_t)s->n_nodes, err);
    for (int n = 0; st == AH_OK && s->tr->rank == 0 && n < s->n_nodes; n++) {
        if (!how[n]) continue;
        const char *key = how[n] == 1 ? "held_nodes" : "extended_nodes";
        if (!*out) *out = json_object();
        if (!json_object_get(*out, key)) json_object_set_new(*out, key, json_array());
        json_array_append_new(json_object_get(*out, key), json_string(s->tr->plan->cluster.nodes[n].name));
    }
    free(how);
    return st;
}

/* Collective: a save's figures over the world, in one all-gather: in sums the bytes and files
 * written, the cloud's bytes, the snapshots' host memory and the writer threads' CPU seconds on
 * them, the snapshots' bytes AdamW wrote (each a sum over ranks); in max the
 * save's seconds until now (from t0, the commit's start, plus w->save_s), the snapshot's and the
 * wait's (the slowest rank's: it bounds the save). */
static ah_status_t commit_figures(const ah_ckpt_session_t *s, const ah_ckpt_written_t *w, double t0,
                                  double sums[AH_CKPT_SUMS], double max[3], ah_error_t *err) {
    ah_ckpt_upload_stats_t us = {.last_step = -1};
    if (s->up) us = ah_ckpt_uploader_stats(s->up);
    const double mine[AH_CKPT_FIGURES] = {(double)w->bytes, (double)w->files, (double)us.bytes,
                                          w->async ? (double)(s->snap_used * sizeof(float)) : 0,
                                          w->writer_cpu_s, (double)w->adamw_bytes, w->save_s + ah_now_s() - t0, w->snapshot_s, w->wait_s};
    const int n = ah_comm_size(ah_comm_world());
    double *all = s->figures; /* taken at the open: no rank can fail here alone while the others gather */
    const ah_status_t st = ah_comm_allgather_f64(ah_comm_world(), mine, AH_CKPT_FIGURES, all, err);
    for (int j = 0; j < AH_CKPT_SUMS; j++) sums[j] = 0;
    for (int j = 0; j < 3; j++) max[j] = 0;
    for (int r = 0; st == AH_OK && r < n; r++) {
        for (int j = 0; j < AH_CKPT_SUMS; j++) sums[j] += all[r * AH_CKPT_FIGURES + j];
        for (int j = 0; j < 3; j++) max[j] = fmax(max[j], all[r * AH_CKPT_FIGURES + AH_CKPT_SUMS + j]);
    }
    return st;
}

/* The commit of a step every rank wrote its part of (or failed to: w->st), collective: the node and
 * world agreement, the node leaders' commits, a rollback everywhere when some node failed, the upload
 * hand-off, retention and the "checkpoint" event (rank 0). */
ah_status_t ah_ckpt_commit_step(ah_ckpt_session_t *s, const ah_ckpt_written_t *w, json_t **event, ah_error_t *err) {
    ah_trainer_t *tr = s->tr;
    ah_comm_t *world = ah_comm_world();
    const int64_t step = w->step;
    const double t0 = ah_now_s();
    ah_error_t lerr = w->err;
    /* Every rank's parts are on disk (or some rank failed), on every node: no node commits a step
     * another node could not write. One agreement over the world (a node's first, then the leaders',
     * cost a collective more at every boundary, each a wait for the slowest rank's core on a
     * host with fewer cores than ranks). */
    ah_status_t ns = ah_comm_agree(world, w->st, &lerr);
    /* the resumed step written behind: a node that held it committed (ckpt_resume.c) commits nothing */
    const bool held = step == s->behind_step && s->behind_held;
    bool data_kept = true;
    if (s->node_rank == 0 && ns == AH_OK && !held) ns = ah_ckpt_commit_node(s, s->node_root, step, &data_kept, &lerr);
    /* Whether every node committed. A step some node failed to write or commit is taken back on
     * every node (a node's commit alone would look restorable and is not the run's state); the
     * older steps go (--keep) only after a step committed everywhere, so a failed save never costs
     * the newest restorable step. */
    ah_status_t ws = ah_comm_agree(world, s->node_rank == 0 ? ns : AH_OK, &lerr);
    const bool ok = ws == AH_OK;
    if (!ok) {
        s->failed_saves++;
        snprintf(s->save_error, sizeof s->save_error, "%s", lerr.msg);
    }
    if (s->node_rank == 0) {
        ah_error_t e2;
        /* frees a full disk; the message is lerr's. The resumed step written behind stays where this
         * node held it committed before (the run's state, which the resume read): only what this save
         * wrote or committed is taken back; where it added files to the committed step, those it did
         * not list (a manifest that lists them lists only verified files: it stays). */
        const bool was_committed = step == s->behind_step && (s->behind_held || s->behind_extend);
        if (!ok && was_committed) ah_ckpt_unlisted_remove(s->node_root, step, &e2);
        else if (!ok) ah_ckpt_rollback(s->node_root, step, &e2);
    }
    if (ok) s->last_saved = step;
    json_t *behind = NULL; /* the nodes that held the resumed step written behind */
    if (step == s->behind_step && (ws = behind_nodes(s, &behind, err)) != AH_OK) return ws;
    /* in-memory peer replicas: before the event, so the grace period covers them */
    ah_ckpt_replica_stats_t rep;
    if ((ws = replicate_committed(s, step, ok, &rep, err)) != AH_OK) {
        json_decref(behind);
        return ws;
    }
    if (ok && s->up) hand_off_upload(s, step);
    /* commit_figures fills them when it succeeds (gcc -O3 cannot tell) */
    double sums[AH_CKPT_SUMS] = {0}, us_max[3] = {0};
    ah_status_t cs = commit_figures(s, w, t0, sums, us_max, err);
    /* Retention (--keep), best effort, once this step is the uploader's job: an older job still
     * waiting was replaced by it, and the step in flight stays, so no upload reads a step collected
     * under it. No snapshot is being written now (the caller collected it). After the figures'
     * collective: the writer thread that runs it would take a core from that wait. */
    if (ok) ah_ckpt_retain_disk(s);
    ah_ckpt_cloud_state_t cloud;
    if (cs == AH_OK && s->cloud) cs = ah_ckpt_cloud_check(s, &cloud, err);
    if (cs == AH_OK && s->cloud) cs = ah_ckpt_cloud_retain(s, err); /* --keep in the cloud */
    if (cs != AH_OK) {
        json_decref(behind);
        return cs;
    }
    s->last_save_s = us_max[0];
    if (w->async) s->last_snapshot_s = us_max[1]; /* the copy into host memory */
    if (tr->rank == 0 && event) {
        *event = json_pack("{s:s, s:I, s:f, s:b, s:I, s:{s:I, s:I, s:I}}", AH_PROTO_EVENT, AH_PROTO_EV_CHECKPOINT, AH_PROTO_STEP,
                           (json_int_t)step, "seconds", s->last_save_s, "ok", ok, "files", (json_int_t)sums[1],
                           "bytes", "local", (json_int_t)sums[0], "peer", (json_int_t)0, "cloud",
                           (json_int_t)sums[2]);
        if (*event && w->async) { /* ckpt_async.c: the copy, and what the loop waited for the write */
            json_object_set_new(*event, "async", json_true());
            json_object_set_new(*event, "snapshot_seconds", json_real(us_max[1]));
            json_object_set_new(*event, "wait_seconds", json_real(us_max[2]));
            json_object_set_new(*event, "snapshot_bytes", json_integer((json_int_t)sums[3])); /* host memory, all ranks */
            json_object_set_new(*event, "writer_cpu_seconds", json_real(sums[4])); /* the writer threads', all ranks */
            /* a GPU's copies on a side stream (timed on the device), or the CPU's made off the
             * training thread (backend/cpu_snapshot.c): ckpt_async.c */
            json_object_set_new(*event, "snapshot_copy", json_string(tr->dev.backend->gpu ? "side-stream" : "background"));
            /* of snapshot_bytes, written there by the step's AdamW, not copied (ckpt_fuse.c) */
            json_object_set_new(*event, "snapshot_adamw_bytes", json_integer((json_int_t)sums[5]));
        }
        if (*event && s->cloud) ah_ckpt_cloud_event(&cloud, *event);
        if (*event && ok && s->replica_budget > 0) ah_ckpt_replica_event(&rep, *event);
        if (*event && !ok) json_object_set_new(*event, "error", json_string(lerr.msg));
        /* a resume cannot check the shard list then (docs/runtime.md) */
        if (*event && !data_kept) json_object_set_new(*event, "data_kept", json_false());
        /* the resumed step written behind: the nodes whose disk held it committed (verified) */
        if (*event && step == s->behind_step) {
            json_object_set_new(*event, "write_behind", json_true());
            if (behind) json_object_update(*event, behind);
        }
    }
    json_decref(behind);
    return AH_OK;
}

/* A synchronous save (--ckpt-sync; and the last step's, and a notice's without replicas): this rank's
 * pieces written from the trainer's buffers, then the commit, before the next step. */
ah_status_t ah_ckpt_save_sync(ah_ckpt_session_t *s, int64_t step, json_t **event, ah_error_t *err) {
    const double t0 = ah_now_s();
    ah_ckpt_written_t w = {.step = step};
    ah_ckpt_snap_t *snap = NULL;
    ah_status_t st = ah_ckpt_snapshot_take(s, step, false, &w, &snap, err);
    if (st != AH_OK) return st;
    if (snap && (w.st = ah_ckpt_snap_write(snap, NULL, &w.err)) == AH_OK) {
        w.bytes = snap->bytes;
        w.files = snap->files;
    }
    ah_ckpt_views_release(s);
    ah_ckpt_snap_free(snap);
    w.save_s = ah_now_s() - t0;
    return ah_ckpt_commit_step(s, &w, event, err);
}

ah_status_t ah_ckpt_session_step_done(ah_ckpt_session_t *s, int64_t done, json_t **events, bool *stop,
                                      ah_error_t *err) {
    ah_trainer_t *tr = s->tr;
    *stop = false;
    if (events) *events = NULL;
    const double t_in = ah_now_s();
    if (s->step_end > 0) s->step_s = t_in - s->step_end;
    bool any;
    double elapsed;
    ah_status_t st = ah_preempt_poll(ah_comm_world(), s->my_node, s->n_nodes, s->hit, &any, &elapsed, err);
    if (st != AH_OK) return st;
    /* every K steps, and the last one: the run's final state is never lost */
    const bool periodic = s->o.every > 0 && (done % s->o.every == 0 || done == s->o.steps);
    json_t *arr = tr->rank == 0 && events ? json_array() : NULL;
    /* A snapshot in flight commits once every rank wrote it; before another save, a notice's or
     * the last step's, it is finished first (one in flight per rank; ckpt_async.c). */
    const double t_collect = ah_now_s();
    if ((st = ah_ckpt_async_collect(s, periodic || any || done == s->o.steps, arr, err)) != AH_OK) {
        json_decref(arr);
        return st;
    }
    elapsed += ah_now_s() - t_collect;
    bool save_now = s->o.local_root && done != s->last_saved && (periodic || any);
    if (any && save_now && (st = ah_ckpt_notice_rule(s, done, elapsed, &save_now, err)) != AH_OK) {
        json_decref(arr);
        return st;
    }
    if (any && s->o.cloud_only) save_now = false; /* every disk is about to be dropped */
    if (save_now) {
        json_t *ev = NULL;
        /* a snapshot written in the background, unless --ckpt-sync, a notice (the grace period needs
         * it committed: in peers' memory first with replicas, ckpt_notice.c) or the last step (the
         * run ends on it committed) */
        const bool async = !s->o.sync && !any && done != s->o.steps;
        ah_ckpt_snap_t *none = NULL; /* a save on this thread: after the retention the commit above handed over */
        if (!async && s->writer) st = ah_ckpt_async_wait(s->writer, &none, err); /* nothing in flight: collected */
        ah_ckpt_snap_free(none);
        if (st != AH_OK) {
            json_decref(arr);
            return st;
        }
        if ((st = async  ? ah_ckpt_save_begin(s, done, err)
                  : any ? ah_ckpt_notice_save(s, done, &ev, err)
                        : ah_ckpt_save_sync(s, done, &ev, err)) != AH_OK) {
            json_decref(arr);
            return st;
        }
        if (arr && ev) json_array_append_new(arr, ev);
    }
    if (any) {
        /* on the disks, or in peers' memory (a notice's save, memory first: ckpt_notice.c) */
        const bool saved = s->o.local_root && (s->last_saved == done || s->memory_saved == done);
        const char **nodes = calloc((size_t)s->n_nodes, sizeof *nodes);
        int n = 0;
        for (int i = 0; nodes && i < s->n_nodes; i++)
            if (s->hit[i]) nodes[n++] = tr->plan->cluster.nodes[i].name;
        if (tr->rank == 0 && s->o.run_dir) {
            ah_error_t e2;
            ah_preempt_write_report(s->o.run_dir, done, saved, nodes, n, &e2);
        }
        json_t *ev = NULL;
        if (arr) {
            json_t *nl = json_array();
            for (int i = 0; i < n; i++) json_array_append_new(nl, json_string(nodes[i]));
            ev = json_pack("{s:s, s:I, s:f, s:b, s:o}", AH_PROTO_EVENT, AH_PROTO_EV_PREEMPT, AH_PROTO_STEP,
                           (json_int_t)done, "seconds", elapsed, "saved", saved, "nodes", nl);
        }
        free(nodes);
        st = s->cloud ? ah_ckpt_notice_uploads(s, done, ev, err) : AH_OK; /* which uploads the exit drops */
        if (ev) json_array_append_new(arr, ev);
        if (st != AH_OK) {
            json_decref(arr);
            return st;
        }
        s->noticed = true;
        *stop = true;
    }
    if (arr && json_array_size(arr) == 0) {
        json_decref(arr);
        arr = NULL;
    }
    if (events) *events = arr;
    s->step_end = ah_now_s();
    return AH_OK;
}

ah_status_t ah_ckpt_session_commit_pending(ah_ckpt_session_t *s, json_t **events, ah_error_t *err) {
    *events = NULL;
    if (!s) return AH_OK;
    json_t *arr = s->tr->rank == 0 ? json_array() : NULL;
    const ah_status_t st = ah_ckpt_async_collect(s, true, arr, err);
    *events = arr;
    return st;
}

void ah_ckpt_session_adopt(ah_ckpt_session_t *s, int64_t step, bool committed) {
    if (s && committed) s->last_saved = step;
}

int64_t ah_ckpt_session_last_saved(const ah_ckpt_session_t *s) {
    return s ? s->last_saved : -1;
}

double ah_ckpt_session_wait_s(const ah_ckpt_session_t *s) {
    return s ? s->wait_s : 0;
}

void ah_ckpt_session_describe(const ah_ckpt_session_t *s, int64_t done, char *buf, size_t cap) {
    const int64_t kept = s ? s->last_saved : -1;
    if (!s || !s->o.local_root)
        snprintf(buf, cap, "no checkpoint (no --local-root): a rerun starts from step 0");
    else if (kept < 0)
        snprintf(buf, cap, "no restorable checkpoint in --local-root %s: a --resume starts from step 0 and redoes "
                 "the %lld step%s", s->o.local_root, (long long)done, done == 1 ? "" : "s");
    else if (kept >= done)
        snprintf(buf, cap, "the newest restorable checkpoint is step %lld in --local-root %s: nothing to redo",
                 (long long)kept, s->o.local_root);
    else
        snprintf(buf, cap, "the newest restorable checkpoint is step %lld in --local-root %s: a --resume redoes the "
                 "%lld step%s after it", (long long)kept, s->o.local_root, (long long)(done - kept),
                 done - kept == 1 ? "" : "s");
}

ah_status_t ah_ckpt_session_final(const ah_ckpt_session_t *s, int64_t done, ah_error_t *err) {
    if (s && s->last_saved >= done) ah_ckpt_replica_release(s); /* the run's end is on the disks */
    if (!s || !s->o.local_root || s->o.every <= 0 || s->last_saved >= done) return AH_OK;
    char where[600];
    ah_ckpt_session_describe(s, done, where, sizeof where);
    return ah_error_set(err, AH_ERR_IO, "the checkpoint of the last step, %lld, was not saved (%s); %s. Free space "
                        "there, keep fewer steps (--keep, now %d) or give a larger --local-root, then rerun with "
                        "--resume", (long long)done, s->failed_saves ? s->save_error : "no save of it ran",
                        where, s->o.keep);
}
