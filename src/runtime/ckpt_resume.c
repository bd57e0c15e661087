/* A checkpoint session's resume from the cheapest tier (runtime/ckpt_io.h: the contract;
 * ckpt_session.h: the state it shares with the save). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/export_hf.h"
#include "ckpt/peer.h"
#include "ckpt/placement.h"
#include "ckpt/policy.h"
#include "ckpt/reshard.h"
#include "ckpt/restore.h"
#include "ckpt/s3.h"
#include "ckpt/safetensors.h"
#include "ckpt/test_hook.h"
#include "comm/transfer.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/str.h"
#include "core/timing.h"
#include "runtime/ckpt_session.h"
#include "runtime/protocol.h"

ah_status_t ah_ckpt_load_stage(ah_trainer_t *tr, const ah_shard_group_t *gs, int ng, int T,
                               const ah_ckpt_piece_source_t *src, ah_error_t *err) {
    ah_gpt_stage_t *st = &tr->stage;
    const int t = st->cfg.t, k = st->cfg.tp_rank;
    /* Loaded into host buffers (the stage's own on the CPU, copies uploaded at the end on a GPU;
     * read first, so tensors no group covers keep their values). */
    float *dev[3] = {st->w, st->m, st->v}, *bufs[3] = {NULL, NULL, NULL};
    int idx[AH_RESHARD_MAX_PIECES];
    ah_status_t r = AH_OK;
    /* A sharded optimizer: whole moments are read into host arrays, its own parts kept after. */
    const bool sharded = tr->plan->n_opt_groups > 0;
    for (int b = 0; b < 3 && r == AH_OK; b++)
        if (b == 0 || !sharded) r = ah_gpt_host_view(st, dev[b], true, &bufs[b], err);
        else if (!(bufs[b] = calloc((size_t)st->n_elems, sizeof(float))))
            r = ah_error_set(err, AH_ERR_OOM, "no host memory to load %lld AdamW moments", (long long)st->n_elems);
    if (sharded && r == AH_OK) r = ah_gpt_moments_to_full(st, bufs[1], bufs[2], err); /* what no shard covers stays */
    for (int gi = 0; gi < ng && r == AH_OK; gi++) {
        const int nf = ah_reshard_pieces(st->cfg.model, gs[gi], T, t, k, idx);
        if ((r = src->open(src->ctx, gi, idx, nf, err)) != AH_OK) {
            src->close(src->ctx); /* what it opened before the failure */
            break;
        }
        for (int i = 0; i < st->n_params && r == AH_OK; i++) {
            const ah_gpt_param_t *x = &st->params[i];
            if (!in_group(&x->def, gs[gi])) continue;
            for (int b = 0; b < 3 && r == AH_OK; b++)
                r = ah_reshard_tensor(&x->def, SUFFIX[b], t, k, T, src->read, src->ctx, nf, bufs[b] + x->offset, x->n,
                                      err);
        }
        src->close(src->ctx);
    }
    if (sharded && r == AH_OK) r = ah_gpt_moments_from_full(st, bufs[1], bufs[2], err);
    for (int b = 0; b < 3; b++) {
        if (!bufs[b]) continue;
        if (b > 0 && sharded) {
            free(bufs[b]);
            continue;
        }
        const ah_status_t u = ah_gpt_host_done(st, dev[b], bufs[b], r == AH_OK, err);
        if (r == AH_OK) r = u;
    }
    return r;
}

/* The resume's piece source: the files the catalog fetched, group after group (paths in
 * ah_reshard_pieces' order). */
typedef struct {
    char (*paths)[AH_CKPT_PATH_MAX];
    int next, opened;
    ah_st_file_t fs[AH_RESHARD_MAX_PIECES];
} file_source_t;

static ah_status_t file_open(void *ctx, int gi, const int *idx, int nf, ah_error_t *err) {
    (void)gi, (void)idx;
    file_source_t *f = ctx;
    ah_status_t r = AH_OK;
    for (f->opened = 0; f->opened < nf && r == AH_OK; f->opened++)
        if ((r = ah_st_open(f->paths[f->next + f->opened], &f->fs[f->opened], err)) != AH_OK) break;
    f->next += nf;
    return r;
}

static ah_status_t file_read(void *ctx, int j, const char *name, float *dst, int64_t n, ah_error_t *err) {
    file_source_t *f = ctx;
    return ah_reshard_read_file(&f->fs[j], name, dst, n, err);
}

static void file_close(void *ctx) {
    file_source_t *f = ctx;
    for (int j = 0; j < f->opened; j++) ah_st_close(&f->fs[j]);
    f->opened = 0;
}

static ah_status_t load_stage(ah_ckpt_session_t *s, const ah_shard_group_t *gs, int ng, int T, char (*paths)[AH_CKPT_PATH_MAX],
                              ah_error_t *err) {
    file_source_t *f = calloc(1, sizeof *f);
    if (!f) return ah_error_set(err, AH_ERR_OOM, "no host memory to load shards");
    f->paths = paths;
    const ah_ckpt_piece_source_t src = {file_open, file_read, file_close, f};
    const ah_status_t r = ah_ckpt_load_stage(s->tr, gs, ng, T, &src, err);
    free(f);
    return r;
}

/* Removes the staging directory of a resume (its files were loaded). */
static void remove_staging(const char *staging, int64_t step) {
    char dir[AH_CKPT_PATH_MAX];
    if (ah_ckpt_step_dir(dir, sizeof dir, staging, step) >= 0) ah_fs_rm_tree(dir, NULL);
    rmdir(staging); /* when empty */
}

/* Newest step (and its TP degree) whose every shard some tier lists (tier >= 0: that tier alone); -1
 * when none, with why in err. *inconsistent (when not NULL) gets the newest step passed over because its
 * nodes' manifests disagree (ckpt/restore.h: AH_ERR_INVALID), -1 when none. */
static int64_t choose_step(const ah_ckpt_catalog_t *cat, int tier, const ah_plan_t *p, int *T_out, ah_ckpt_meta_t *meta,
                           int64_t *inconsistent, ah_error_t *err) {
    const ah_model_t *m = &p->model;
    const int max_names = (2 + (int)m->n_layer) * AH_RESHARD_MAX_PIECES;
    char (*names)[AH_CKPT_NAME_MAX] = malloc((size_t)max_names * sizeof *names);
    const char **ptrs = malloc((size_t)max_names * sizeof *ptrs);
    int64_t best = -1;
    *T_out = 0;
    if (inconsistent) *inconsistent = -1;
    for (int T = 1; names && ptrs && T <= AH_MAX_TP; T++) {
        int64_t step;
        ah_ckpt_meta_t mt;
        ah_error_t e2;
        if (ah_model_check_tp(m, T, &e2) != AH_OK) continue; /* no plan saves at this degree */
        const int n = ah_placement_model_names(m, T, names);
        for (int i = 0; i < n; i++) ptrs[i] = names[i];
        step = -1;
        const ah_status_t st = tier < 0 ? ah_ckpt_catalog_newest(cat, ptrs, n, &step, &mt, &e2)
                                        : ah_ckpt_catalog_newest_in(cat, (ah_ckpt_tier_t)tier, ptrs, n, &step, &mt, &e2);
        if (st != AH_OK) {
            if (best < 0 && T == p->tp) *err = e2; /* why nothing was found, at the plan's degree */
            if (st == AH_ERR_INVALID && inconsistent && step > *inconsistent) *inconsistent = step, *err = e2;
            continue;
        }
        if (step > best || (step == best && T == p->tp)) {
            best = step;
            *T_out = T;
            *meta = mt;
        }
    }
    free(names);
    free(ptrs);
    return best;
}

/* What this rank reads for step's groups saved at degree T: its groups (with the embedding on a
 * last stage), the files they are read from, and where the catalog puts each. */
typedef struct {
    ah_shard_group_t *gs;
    int ng;
    char (*names)[AH_CKPT_NAME_MAX];
    const char **ptrs; /* names, as the catalog takes them */
    char (*paths)[AH_CKPT_PATH_MAX];
    int n;
} wanted_t;

static ah_status_t wanted_build(const ah_ckpt_session_t *s, int T, wanted_t *w, ah_error_t *err) {
    const int t = s->tr->plan->tp, k = s->tr->role.tp_rank;
    int idx[AH_RESHARD_MAX_PIECES];
    memset(w, 0, sizeof *w);
    w->gs = groups_alloc(s);
    w->ng = w->gs ? ah_placement_groups(&s->place, s->tr->rank, true, w->gs) : 0;
    const size_t cap = (size_t)w->ng * AH_RESHARD_MAX_PIECES;
    w->names = calloc(cap, sizeof *w->names);
    w->ptrs = calloc(cap, sizeof *w->ptrs);
    w->paths = calloc(cap, sizeof *w->paths);
    if (!w->gs || !w->names || !w->ptrs || !w->paths)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the resume lists");
    for (int gi = 0; gi < w->ng; gi++) {
        const int nf = ah_reshard_pieces(&s->tr->plan->model, w->gs[gi], T, t, k, idx);
        for (int j = 0; j < nf; j++, w->n++) {
            ah_shard_group_name(w->names[w->n], w->gs[gi], T, idx[j]);
            w->ptrs[w->n] = w->names[w->n];
        }
    }
    return AH_OK;
}

static void wanted_free(wanted_t *w) {
    free(w->gs);
    free(w->names);
    free(w->ptrs);
    free(w->paths);
}

/* The catalog of every tier: this node's disk, the hosts' memory (NULL: replicas off), the peers,
 * the cloud. Not collective (the peer and memory tiers are open). */
static ah_status_t open_catalog(ah_ckpt_session_t *s, const ah_ckpt_peer_t *peer, const ah_ckpt_peer_t *memory,
                                const char *staging, ah_s3_t **s3, ah_ckpt_catalog_t **cat, ah_error_t *err) {
    ah_status_t st = s->cloud ? ah_s3_open(&s->s3cfg, s3, err) : AH_OK;
    if (st != AH_OK) return st;
    ah_ckpt_sources_t src = {.local_root = s->node_root, .peer = peer, .memory = memory, .cloud = *s3,
                             .staging_dir = staging};
    src.cloud_url = s->url;
    ah_ckpt_cloud_sources(s, &src); /* its listing retried, each retry said */
    return ah_ckpt_catalog_open(&src, cat, err);
}

/* "--steps 100 --warmup 10 --lr 0.001": a schedule as the flags that give it; only the flags that
 * differ from other's when other is not NULL. */
static void schedule_flags(const ah_train_opts_t *o, const ah_train_opts_t *other, char *buf, size_t cap) {
    ah_str_t t = ah_str_fixed(buf, cap);
    if (!other || o->steps != other->steps) ah_str_appendf(&t, "--steps %lld", (long long)o->steps);
    if (!other || o->warmup != other->warmup) ah_str_appendf(&t, "%s--warmup %lld", t.len ? " " : "", (long long)o->warmup);
    if (!other || o->lr != other->lr) ah_str_appendf(&t, "%s--lr %.17g", t.len ? " " : "", o->lr);
}

/* Whether step's schedule (meta) gives a step left to train (step .. --steps - 1) another learning
 * rate than this run's: then both schedules as flags into old and now (now: only the flags that
 * differ), the first such step and its rate under each. A manifest without one, a run with nothing
 * left to train, or one whose remaining rates are the same (a longer run still in its warm-up):
 * false. */
typedef struct {
    char old[128], now[128];
    int64_t at;
    double lr_was, lr_now;
} schedule_change_t;
static bool schedule_changed(const ah_trainer_t *tr, int64_t step, const ah_ckpt_meta_t *meta, schedule_change_t *c) {
    ah_train_opts_t was = tr->opts;
    was.steps = meta->sched_steps;
    was.warmup = meta->sched_warmup;
    was.lr = meta->sched_lr;
    if (meta->sched_steps <= 0 || (was.steps == tr->opts.steps && was.warmup == tr->opts.warmup && was.lr == tr->opts.lr))
        return false;
    c->at = -1; /* past a million equal steps, taken as changed: the rest is not searched */
    for (int64_t i = step; c->at < 0 && i < tr->opts.steps; i++)
        if (ah_train_lr(&was, i) != ah_train_lr(&tr->opts, i) || i - step >= 1000000) c->at = i;
    if (c->at < 0) return false;
    schedule_flags(&was, NULL, c->old, sizeof c->old);
    schedule_flags(&tr->opts, &was, c->now, sizeof c->now);
    c->lr_was = ah_train_lr(&was, c->at);
    c->lr_now = ah_train_lr(&tr->opts, c->at);
    return true;
}

/* A resume keeps the learning-rate schedule step was trained under (ckpt_io.h, o.reschedule):
 * another is refused, naming both, unless reschedule (say_schedule_change then says it). */
static ah_status_t check_schedule(const ah_trainer_t *tr, int64_t step, const ah_ckpt_meta_t *meta, bool reschedule,
                                  ah_error_t *err) {
    schedule_change_t c;
    if (reschedule || !schedule_changed(tr, step, meta, &c)) return AH_OK;
    return ah_error_set(err, AH_ERR_USAGE, "step %lld was trained under the cosine learning-rate schedule of %s; %s would "
                        "change the learning rate of the steps left to train (step %lld: %.4g, now %.4g); resume with "
                        "%s, or add --reschedule to change the schedule", (long long)step, c.old, c.now, (long long)c.at,
                        c.lr_was, c.lr_now, c.old);
}

/* Rank 0, on stderr: the schedule change --reschedule let through at the step restored. */
static void say_schedule_change(const ah_trainer_t *tr, int64_t step, const ah_ckpt_meta_t *meta) {
    schedule_change_t c;
    if (tr->rank == 0 && schedule_changed(tr, step, meta, &c))
        fprintf(stderr, "autohet train: --reschedule: resumed at step %lld under %s's learning-rate schedule, not %s's "
                "(step %lld's learning rate %.4g, was %.4g)\n", (long long)step, c.now, c.old, (long long)c.at,
                c.lr_now, c.lr_was);
}

/* Whether the state of step, saved for model `was` (NULL: not known) at seq_len was_T (0: not known) at data
 * position pos, may go on under `model` at seq_len T (check_step, ah_ckpt_check_continues). */
static ah_status_t check_same(int64_t step, const ah_model_t *was, int64_t was_T, int64_t pos, const ah_model_t *model,
                              int64_t T, ah_error_t *err) {
    ah_model_diff_t d;
    if (was && ah_model_diff(was, model, false, &d))
        return ah_error_set(err, AH_ERR_INVALID, "step %lld was saved for model %s, whose %s is %s where the plan's "
                            "model %s has %s; resume with a plan for that model, or use another --local-root",
                            (long long)step, was->name, d.field, d.a, model->name, d.b);
    if (was_T > 0 && was_T != T)
        return ah_error_set(err, AH_ERR_INVALID, "step %lld was saved with seq_len %lld but the plan trains seq_len %lld: "
                            "its data position (sample %lld) counts samples of %lld tokens, so this run would re-read or "
                            "skip data; resume with a plan of seq_len %lld, or train seq_len %lld from scratch in another "
                            "--local-root", (long long)step, (long long)was_T, (long long)T, (long long)pos,
                            (long long)was_T, (long long)was_T, (long long)T);
    return AH_OK;
}

ah_status_t ah_ckpt_check_continues(const ah_trainer_t *tr, int64_t step, const ah_plan_t *next, ah_error_t *err) {
    return check_same(step, &tr->plan->model, tr->data->T, ah_trainer_data_position(tr, step), &next->model,
                      next->train.seq_len, err);
}

/* Whether the job may resume from step (meta: its manifest): the same model, the same shards and
 * the same sequence length, since its data position counts samples of seq_len + 1 tokens of those
 * shards (docs/runtime.md "Token files and shards"), and the same learning-rate schedule unless
 * reschedule (check_schedule). A manifest without seq_len (an older autohet) is taken as it was
 * then, unchecked. */
static ah_status_t check_step(const ah_trainer_t *tr, int64_t step, const ah_ckpt_meta_t *meta, bool reschedule,
                              ah_error_t *err) {
    ah_status_t st = check_same(step, meta->has_model ? &meta->model : NULL, meta->seq_len, meta->data_position,
                                &tr->plan->model, tr->data->T, err);
    if (st != AH_OK) return st;
    json_t *data = meta->data[0] ? json_loads(meta->data, 0, NULL) : NULL;
    st = data ? ah_dataset_check_same(tr->data, data, err) : AH_OK;
    json_decref(data);
    if (st != AH_OK)
        return ah_error_prefix(err, "step %lld (resume with the shards it was trained on, or another --local-root)",
                               (long long)step);
    return check_schedule(tr, step, meta, reschedule, err);
}

/* Collective: every rank chose the same (step, T). */
static ah_status_t agree_step(int64_t step, int T, ah_error_t *err) {
    int64_t v[4] = {step, T, -step, -(int64_t)T};
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), v, 4, err);
    if (st == AH_OK && (v[0] != -v[2] || v[1] != -v[3]))
        st = ah_error_set(err, AH_ERR_INVALID, "ranks see different newest checkpoints (steps %lld..%lld); "
                          "a tier changed during the resume, try again", (long long)-v[2], (long long)v[0]);
    return st;
}

/* This rank's shards of step from the cheapest tiers (the peer exchange is collective), loaded. When
 * some rank's file has no intact copy in any tier (ckpt/restore.h: AH_ERR_INVALID), *damaged is set
 * with err saying which, nothing is loaded and AH_OK returned: the caller tries an older step. */
static ah_status_t restore_shards(ah_ckpt_session_t *s, const ah_ckpt_catalog_t *cat, int64_t step, int T,
                                  const char *staging, ah_ckpt_restore_stats_t *stats, bool *damaged,
                                  ah_error_t *err) {
    wanted_t w;
    char dir[AH_CKPT_PATH_MAX];
    *damaged = false;
    ah_status_t st = wanted_build(s, T, &w, err);
    /* The node's disk may be new (an empty node, or one whose directory went with it): the staging
     * directory with its parents, agreed on before the collective fetch. */
    if (st == AH_OK && ah_ckpt_step_dir(dir, sizeof dir, staging, step) < 0)
        st = ah_error_set(err, AH_ERR_IO, "%s: path too long", staging);
    if (st == AH_OK && (st = ah_fs_mkdirs(dir, err)) != AH_OK)
        ah_error_prefix(err, "the restore staging directory");
    if ((st = ah_comm_agree(ah_comm_world(), st, err)) == AH_OK)
        st = ah_comm_agree(ah_comm_world(), ah_ckpt_catalog_fetch(cat, step, w.ptrs, w.n, w.paths, stats, err), err);
    if (st == AH_ERR_INVALID) {
        *damaged = true;
        st = AH_OK;
    } else if (st == AH_OK) {
        st = ah_comm_agree(ah_comm_world(), load_stage(s, w.gs, w.ng, T, w.paths, err), err);
    }
    wanted_free(&w);
    return st;
}

/* A step no tier restores (why: which file, and each tier's reason): rank 0 says so, its staging
 * copies go, the catalog forgets it and skipped (the recover event's) records it. */
static void skip_step(const ah_ckpt_session_t *s, ah_ckpt_catalog_t *cat, int64_t step, const char *staging,
                      const char *why, json_t *skipped) {
    if (s->tr->rank == 0)
        fprintf(stderr, "autohet train: warning: checkpoint step %lld skipped (%s); trying an older step\n",
                (long long)step, why);
    json_array_append_new(skipped, json_pack("{s:I, s:s}", "step", (json_int_t)step, "why", why));
    remove_staging(staging, step);
    ah_ckpt_catalog_drop(cat, step);
}

/* Collective: the newest step every tier together restores (choose_step) into *step, -1 when none (why in
 * e2). A newer step whose nodes' manifests disagree on the data position, sequence length or RNG state (a
 * bit flipped in one node's manifest, which has no checksum of its own) is skipped, on every rank, for the
 * next older one, as a step with a damaged file is: before, every rank trained from scratch. */
static ah_status_t pick_step(const ah_ckpt_session_t *s, ah_ckpt_catalog_t *cat, const char *staging, json_t *skipped,
                             int64_t *step, int *T, ah_ckpt_meta_t *meta, ah_error_t *e2, ah_error_t *err) {
    for (;;) {
        int64_t bad;
        memset(e2, 0, sizeof *e2);
        *step = choose_step(cat, -1, s->tr->plan, T, meta, &bad, e2);
        /* The newest such step and the newest chosen step any rank saw (ranks may see other tiers), reduced
         * together: every rank leaves or skips on the same values, so all call the same collective next. A
         * rank whose own step differs is left to agree_step, which names it. */
        int64_t v[2] = {bad, *step};
        ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), v, 2, err);
        if (st != AH_OK || v[0] < 0 || v[0] < v[1]) return st;
        char why[AH_ERROR_MSG_MAX];
        snprintf(why, sizeof why, "%s", bad == v[0] && e2->msg[0] ? e2->msg
                 : "the manifests of its nodes disagree on the data position, sequence length or RNG state");
        skip_step(s, cat, v[0], staging, why, skipped);
    }
}

/* On the node's leader: this node's step directories newer than the restored step (-1: trained from
 * scratch), an earlier timeline's, which this run saves anew and a directory of the same step would refuse
 * ("already committed"). A committed or damaged one is renamed aside (ah_ckpt_set_aside: kept, not deleted, out
 * of every listing), said once; a half-written one is removed after a restore, left to the save from scratch. */
static ah_status_t set_aside(const ah_ckpt_session_t *s, int64_t restored, ah_error_t *err) {
    if (s->node_rank != 0) return AH_OK;
    const char *node = s->tr->plan->cluster.nodes[s->my_node].name;
    ah_ckpt_step_info_t *info;
    int n, removed = 0;
    char to[AH_CKPT_PATH_MAX];
    ah_status_t st = ah_ckpt_list(s->node_root, &info, &n, err);
    for (int i = 0; st == AH_OK && i < n; i++) {
        const long long step = (long long)info[i].step;
        if (step <= restored || (restored < 0 && !info[i].committed)) continue; /* from scratch: the save's own */
        if (!info[i].committed && !info[i].damaged) {
            if ((st = ah_ckpt_remove_step(s->node_root, info[i].step, err)) == AH_OK) removed++;
            continue;
        }
        if ((st = ah_ckpt_set_aside(s->node_root, info[i].step, to, sizeof to, err)) == AH_OK)
            fprintf(stderr, "autohet train: node %s: step %lld moved aside to %s (not restored: this run %s and saves "
                    "step %lld anew; kept, not deleted)\n", node, step, to, restored < 0 ? "trains from scratch"
                    : "resumed from an older step", step);
    }
    if (st == AH_OK && removed) st = ah_ckpt_fsync_dir(s->node_root, err);
    free(info);
    return st;
}

/* This node's step directories newer than the restored step (-1: none was restored), on the node's
 * leader. damaged gets those whose manifest does not load (for the caller's refusal when nothing was
 * restored). After a restore they are said and set aside (set_aside). */
static ah_status_t newer_steps(const ah_ckpt_session_t *s, int64_t restored, char *damaged, size_t cap,
                               ah_error_t *err) {
    ah_str_t d = ah_str_fixed(damaged, cap);
    if (s->node_rank != 0) return AH_OK;
    const char *node = s->tr->plan->cluster.nodes[s->my_node].name;
    ah_ckpt_step_info_t *info;
    int n;
    ah_status_t st = ah_ckpt_list(s->node_root, &info, &n, err);
    for (int i = 0; st == AH_OK && i < n; i++) {
        const long long step = (long long)info[i].step;
        if (step <= restored || !info[i].damaged) continue;
        if (restored < 0)
            ah_str_appendf(&d, "%snode %s's step %lld has a damaged manifest (%s)", d.len ? "; " : "", node, step,
                           info[i].note);
        else
            fprintf(stderr, "autohet train: warning: node %s: checkpoint step %lld skipped: its manifest is damaged "
                    "(%s)\n", node, step, info[i].note);
    }
    free(info);
    return st == AH_OK && restored >= 0 ? set_aside(s, restored, err) : st;
}

/* With nothing restored: whether --local-root holds committed steps only under node names this plan
 * does not have (a resume finds a node's steps by its name, DIR/NODE/). Such a root is refused, naming
 * them: the user renamed the nodes (or gave another run's root) and would lose those steps silently.
 * A preempted node's directory is deleted with it, so a re-plan never meets this. */
static ah_status_t foreign_nodes(const ah_ckpt_session_t *s, ah_error_t *err) {
    const ah_cluster_t *c = &s->tr->plan->cluster;
    char (*roots)[AH_CKPT_PATH_MAX] = NULL, found[1024], ours[512];
    int n = 0, k = 0;
    ah_str_t f = ah_str_fixed(found, sizeof found), o = ah_str_fixed(ours, sizeof ours);
    ah_error_t e2;
    if (ah_ckpt_node_roots(s->o.local_root, &roots, &n, &e2) != AH_OK) return AH_OK; /* nothing to name */
    for (int r = 0; r < n; r++) {
        const char *slash = strrchr(roots[r], '/'), *name = slash ? slash + 1 : roots[r];
        int64_t newest = -1;
        bool in_plan = false;
        for (int i = 0; i < c->n_nodes && !in_plan; i++) in_plan = strcmp(c->nodes[i].name, name) == 0;
        if (in_plan || ah_ckpt_latest(roots[r], &newest, &e2) != AH_OK || newest < 0) continue;
        ah_str_appendf(&f, "%snode %s (newest step %lld)", k++ ? ", " : "", name, (long long)newest);
    }
    free(roots);
    if (k == 0) return AH_OK;
    for (int i = 0; i < c->n_nodes; i++) ah_str_appendf(&o, "%s%s", i ? ", " : "", c->nodes[i].name);
    return ah_error_set(err, AH_ERR_USAGE, "--local-root %s holds checkpoints of %s, not %s of this plan (%s), and "
                        "none of the plan's nodes has one: a resume reads node X's steps from %s/X only; if the nodes "
                        "were renamed, rename the director%s to match (mv %s/OLD %s/NEW), or use another --local-root "
                        "to start from scratch", s->o.local_root, found, k == 1 ? "a node" : "nodes", ours,
                        s->o.local_root, k == 1 ? "y" : "ies", s->o.local_root, s->o.local_root);
}

/* Nothing restored, though steps were there: each skipped step's reason (skipped) and the damaged
 * manifests of this node (damaged), refused with what to do; training from scratch would drop them
 * unsaid and its saves would meet the damaged directories. */
static ah_status_t refuse_damaged(const ah_ckpt_session_t *s, const json_t *skipped, const char *damaged,
                                  ah_error_t *err) {
    char why[AH_ERROR_MSG_MAX];
    ah_str_t w = ah_str_fixed(why, sizeof why);
    size_t i;
    const json_t *x;
    json_array_foreach(skipped, i, x) ah_str_appendf(&w, "%s%s", i ? "; " : "", json_string_value(json_object_get(x, "why")));
    if (damaged[0]) ah_str_appendf(&w, "%s%s", w.len ? "; " : "", damaged);
    return ah_error_set(err, AH_ERR_INVALID, "--local-root %s: no checkpoint step can be restored (%s); repair or remove "
                        "the damaged steps (autohet ckpt verify --local-root %s names them), or use another "
                        "--local-root to start from scratch", s->o.local_root, why, s->o.local_root);
}

/* The "recover" event (rank 0): figures over the job, bytes, files and fallbacks summed, seconds
 * as the slowest rank saw them. Collective. */
static ah_status_t recover_event(const ah_ckpt_session_t *s, double t0, const ah_ckpt_restore_stats_t *stats,
                                 bool found, int64_t step, int T, const ah_ckpt_meta_t *meta, const char *why,
                                 json_t *skipped, json_t **event, ah_error_t *err) {
    const ah_trainer_t *tr = s->tr;
    enum { NT = AH_TIER_COUNT };
    double sums[2 * NT + 1];
    int64_t maxes[1 + NT] = {(int64_t)((ah_now_s() - t0) * 1e6)};
    for (int i = 0; i < NT; i++) {
        sums[i] = (double)stats->bytes[i];
        sums[NT + i] = stats->files[i];
        maxes[1 + i] = (int64_t)(stats->seconds[i] * 1e6);
    }
    sums[2 * NT] = stats->fallbacks;
    ah_status_t st = ah_comm_allreduce_f64(ah_comm_world(), sums, 2 * NT + 1, err);
    if (st == AH_OK) st = ah_comm_allreduce_max_i64(ah_comm_world(), maxes, 1 + NT, err);
    /* every rank's files another tier replaced, for rank 0's event and console line */
    const int world = ah_comm_size(ah_comm_world());
    size_t *lens = st == AH_OK ? calloc((size_t)world, sizeof *lens) : NULL;
    char *all = NULL;
    if (st == AH_OK && !lens) st = ah_error_set(err, AH_ERR_OOM, "no host memory for the restore's report");
    if (st == AH_OK)
        st = ah_comm_allgather_bytes(ah_comm_world(), stats->repaired, strlen(stats->repaired), &all, lens, err);
    json_t *repaired = json_array();
    for (int r = 0, off = 0; st == AH_OK && r < world; off += (int)lens[r], r++)
        if (lens[r]) json_array_append_new(repaired, json_sprintf("rank %d: %.*s", r, (int)lens[r], all + off));
    free(lens);
    free(all);
    if (st != AH_OK || tr->rank != 0 || !event) {
        json_decref(repaired);
        return st;
    }
    *event = json_pack("{s:s, s:I, s:b, s:f}", AH_PROTO_EVENT, AH_PROTO_EV_RECOVER, AH_PROTO_STEP, (json_int_t)(found ? step : 0), "found",
                       found, AH_PROTO_RECOVER_SECONDS, (double)maxes[0] * 1e-6);
    json_t *b = json_object(), *f = json_object(), *sec = json_object();
    for (int i = 0; i < NT; i++) {
        json_object_set_new(b, ah_ckpt_tier_name(i), json_integer((json_int_t)sums[i]));
        json_object_set_new(f, ah_ckpt_tier_name(i), json_integer((json_int_t)sums[NT + i]));
        json_object_set_new(sec, ah_ckpt_tier_name(i), json_real((double)maxes[1 + i] * 1e-6));
    }
    json_object_set_new(*event, AH_PROTO_RECOVER_BYTES, b);
    json_object_set_new(*event, AH_PROTO_RECOVER_FILES, f);
    json_object_set_new(*event, AH_PROTO_RECOVER_TIER_SECONDS, sec);
    json_object_set_new(*event, "fallbacks", json_integer((json_int_t)sums[2 * NT]));
    if (found) {
        json_object_set_new(*event, "tp_from", json_integer(T));
        json_object_set_new(*event, "tp_to", json_integer(tr->plan->tp));
        json_object_set_new(*event, "data_position", json_integer(meta->data_position));
        json_object_set_new(*event, "same_plan", json_boolean(strcmp(meta->plan_hash, s->plan_hash) == 0));
        if (stats->last_fallback[0]) json_object_set_new(*event, "last_fallback", json_string(stats->last_fallback));
        if (json_array_size(repaired)) json_object_set(*event, AH_PROTO_RECOVER_REPAIRED, repaired);
        if (json_array_size(skipped)) json_object_set(*event, "skipped", skipped);
    } else {
        json_object_set_new(*event, AH_PROTO_RECOVER_NOTE, json_string(why));
    }
    json_decref(repaired);
    return AH_OK;
}

/* What the node leader finds of step on this node's disk for the resumed step's write-behind. */
typedef enum {
    STEP_ABSENT,   /* not committed here: written as any save */
    STEP_PARTIAL,  /* committed, without some file this plan's ranks of the node write (another plan's
                    * files of it): this plan's are added beside them (ckpt.h writer_extend) */
    STEP_DAMAGED,  /* committed, a file this plan writes listed but failing verification: refused */
    STEP_HELD,     /* committed with every such file, each verified: nothing to write */
} node_step_t;

/* The node leader: whether this node's disk holds step committed with every file this plan's ranks
 * of the node would write for it, each verified against the manifest (size, CRC-32C, structure), not
 * trusted from the directory; why (cap) names the damaged file of STEP_DAMAGED. */
static node_step_t node_step(const ah_ckpt_session_t *s, int64_t step, char *why, size_t cap) {
    const ah_placement_t *pl = &s->place;
    ah_ckpt_manifest_t m;
    ah_error_t e2;
    char dir[AH_CKPT_PATH_MAX], path[AH_CKPT_PATH_MAX], name[AH_CKPT_NAME_MAX];
    why[0] = 0;
    if (ah_ckpt_load(s->node_root, step, &m, &e2) != AH_OK) return STEP_ABSENT;
    ah_ckpt_step_dir(dir, sizeof dir, s->node_root, step);
    ah_shard_group_t *gs = groups_alloc(s);
    node_step_t found = gs ? STEP_HELD : STEP_DAMAGED;
    if (!gs) snprintf(why, cap, "no host memory for its shard list");
    for (int r = 0; found != STEP_DAMAGED && r < pl->n_ranks; r++) {
        if (pl->ranks[r].node != s->my_node) continue;
        const int n = ah_placement_groups(pl, r, false, gs), k = pl->ranks[r].tp_index;
        for (int i = 0; found != STEP_DAMAGED && i < n; i++) {
            if (ah_placement_lowest_holder(pl, gs[i], k, s->my_node) != r) continue;
            ah_shard_group_name(name, gs[i], pl->tp, k);
            const ah_ckpt_file_t *f = ah_ckpt_manifest_find(&m, name);
            if (!f) found = STEP_PARTIAL;
            else if (ah_ckpt_join(path, sizeof path, dir, name) < 0) snprintf(why, cap, "%s: path too long", dir);
            else if (ah_ckpt_verify_file(path, f, &e2) != AH_OK) snprintf(why, cap, "%s", e2.msg);
            if (why[0]) found = STEP_DAMAGED;
        }
    }
    free(gs);
    ah_ckpt_manifest_free(&m);
    return found;
}

/* A step resumed partly from the hosts' memory (a handover's at a notice, whose disks were not written;
 * a lost host's replicas) is written to the disks at once, in the background with asynchronous saves,
 * so that it does not live in memory alone until the next checkpoint; its event comes with a later
 * step's. A node whose disk already holds the step committed, verified, writes nothing (a committed
 * step is never rewritten) and the others commit it; a node whose committed step lacks files this plan
 * writes there (written under another plan) adds them beside the old ones and lists them in a new
 * manifest, atomically (ckpt.h writer_extend, commit_more); the event names both kinds. Collective. */
static ah_status_t write_behind(ah_ckpt_session_t *s, int64_t step, const ah_ckpt_restore_stats_t *stats,
                                ah_error_t *err) {
    int64_t from_memory = stats->bytes[AH_TIER_MEMORY] > 0;
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), &from_memory, 1, err);
    if (st != AH_OK || !from_memory || !s->writer) return st;
    char why[AH_ERROR_MSG_MAX] = "";
    int64_t found = s->node_rank == 0 ? node_step(s, step, why, sizeof why) : STEP_ABSENT;
    if (found == STEP_DAMAGED)
        fprintf(stderr, "autohet train: warning: node %s: its disk holds step %lld committed, but %s: the step's write "
                "behind is refused there (a committed file is never rewritten)\n",
                s->tr->plan->cluster.nodes[s->my_node].name, (long long)step, why);
    if ((st = ah_comm_allreduce_max_i64(s->node, &found, 1, err)) != AH_OK) return st;
    /* every node the plan uses holds it: nothing to write */
    int64_t to_write = s->node_rank == 0 && found != STEP_HELD;
    if ((st = ah_comm_allreduce_max_i64(ah_comm_world(), &to_write, 1, err)) != AH_OK || !to_write) return st;
    s->behind_step = step;
    s->behind_held = found == STEP_HELD;
    /* a damaged file: added to as well, the writer refuses that file (the save's error names it) */
    s->behind_extend = found == STEP_PARTIAL || found == STEP_DAMAGED;
    return ah_ckpt_save_begin(s, step, err);
}

ah_status_t ah_ckpt_session_resume(ah_ckpt_session_t *s, int64_t *start, bool *found, json_t **event,
                                   ah_error_t *err) {
    ah_trainer_t *tr = s->tr;
    const double t0 = ah_now_s();
    *start = 0;
    *found = false;
    if (event) *event = NULL;
    ah_ckpt_peer_tier_t *peers = NULL, *mem = NULL;
    ah_s3_t *s3 = NULL;
    ah_ckpt_catalog_t *cat = NULL;
    char staging[AH_CKPT_PATH_MAX], why[AH_ERROR_MSG_MAX] = "", damaged[AH_ERROR_MSG_MAX] = "";
    char unread[AH_ERROR_MSG_MAX] = ""; /* the cloud could not be listed: why */
    ah_ckpt_restore_stats_t stats;
    memset(&stats, 0, sizeof stats);
    ah_ckpt_meta_t meta;
    memset(&meta, 0, sizeof meta);
    json_t *skipped = json_array(); /* steps no tier restored: {"step", "why"} */
    int64_t step = -1;
    int T = 0;
    ah_status_t st = AH_OK;
    if (!s->o.local_root) {
        /* Nothing to restore from without a disk to stage on; say so like an empty checkpoint. */
        snprintf(why, sizeof why, "no --local-root");
    } else {
        snprintf(staging, sizeof staging, "%s/restore-r%d", s->node_root, tr->rank);
        if ((st = ah_ckpt_peer_open(&s->place, tr->rank, s->node_root, s->node_rank == 0, &peers, err)) != AH_OK)
            goto done;
        /* the memory tier, with replicas on (its manifests shared as the peers') */
        if (s->replica_budget > 0 &&
            (st = ah_ckpt_peer_open_memory(&s->place, tr->rank, s->replica_root, s->node_rank == 0, &mem, err)) != AH_OK)
            goto done;
        ah_test_hook("resume-list", 0, tr->plan->cluster.nodes[s->my_node].name); /* test-only: the disk not listed yet */
        /* The catalog keeps a pointer to the peer hooks until it is closed: they live as long. */
        const ah_ckpt_peer_t hooks = ah_ckpt_peer_hooks(peers), mhooks = mem ? ah_ckpt_peer_hooks(mem) : hooks;
        if ((st = ah_comm_agree(ah_comm_world(), open_catalog(s, &hooks, mem ? &mhooks : NULL, staging, &s3, &cat, err),
                                err)) != AH_OK)
            goto done;
        ah_ckpt_cloud_agree_listed(s, cat, unread, sizeof unread); /* a cloud some rank could not list: out */
        /* The newest step every tier together restores: a step with a file no tier has intact is
         * skipped for the next older one. */
        for (;;) {
            ah_error_t e2;
            bool bad = false;
            if ((st = pick_step(s, cat, staging, skipped, &step, &T, &meta, &e2, err)) != AH_OK) goto done;
            if (step < 0) snprintf(why, sizeof why, "%s", e2.msg[0] ? e2.msg : "no complete checkpoint");
            st = step >= 0 ? check_step(tr, step, &meta, s->o.reschedule, err) : AH_OK;
            if ((st = ah_comm_agree(ah_comm_world(), st, err)) != AH_OK || (st = agree_step(step, T, err)) != AH_OK)
                goto done;
            if (step < 0) break;
            memset(&stats, 0, sizeof stats); /* the figures of the step restored */
            if ((st = restore_shards(s, cat, step, T, staging, &stats, &bad, err)) != AH_OK) goto done;
            if (!bad) break;
            skip_step(s, cat, step, staging, err->msg, skipped);
        }
        if (step < 0 && unread[0] && (st = ah_ckpt_cloud_unread(s, unread, why, sizeof why, err)) != AH_OK)
            goto done; /* the same on every rank: agreed above */
        if (s->cloud && !unread[0]) { /* the cloud's newest complete step: its cloud_step until this run uploads */
            ah_ckpt_meta_t m2;
            ah_error_t e3;
            int T2;
            s->cloud_base = choose_step(cat, AH_TIER_CLOUD, tr->plan, &T2, &m2, NULL, &e3);
        }
        if (step >= 0 && unread[0] && tr->rank == 0)
            fprintf(stderr, "autohet train: warning: %s; resuming from step %lld of the other tiers (the cloud may "
                    "hold a newer one)\n", unread, (long long)step);
        if (step >= 0) {
            say_schedule_change(tr, step, &meta); /* allowed by --reschedule (check_step) */
            ah_trainer_set_data_position(tr, step, meta.data_position);
            s->last_saved = step;
            *start = step;
            *found = true;
        }
        /* Nothing restored: refused when damage or other nodes' steps are why, not trained from scratch. */
        st = newer_steps(s, step, damaged, sizeof damaged, err);
        if (st == AH_OK && step < 0 && (json_array_size(skipped) > 0 || damaged[0]))
            st = refuse_damaged(s, skipped, damaged, err);
        else if (st == AH_OK && step < 0)
            st = foreign_nodes(s, err);
        if ((st = ah_comm_agree(ah_comm_world(), st, err)) != AH_OK) goto done;
        if (step < 0 && (st = ah_comm_agree(ah_comm_world(), set_aside(s, -1, err), err)) != AH_OK) goto done;
    }
    st = recover_event(s, t0, &stats, *found, step, T, &meta, why, skipped, event, err);
    if (st == AH_OK && *found) st = write_behind(s, step, &stats, err);
done:
    if (*found) remove_staging(staging, step);
    json_decref(skipped);
    ah_ckpt_catalog_free(cat);
    ah_s3_close(s3);
    ah_ckpt_peer_close(peers);
    ah_ckpt_peer_close(mem);
    return st;
}
