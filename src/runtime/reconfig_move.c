/* The in-place change's state moved rank to rank (reconfig_move.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, MAP_POPULATE */
#include "runtime/reconfig_move.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ckpt/move_plan.h"
#include "ckpt/test_hook.h"
#include "core/timing.h"
#include "runtime/ckpt_io.h"

#define MOVE_TAG 19798              /* the exchange's messages, in the item order on every rank */
#define MOVE_CHUNK ((int64_t)1 << 28) /* floats a message: MPI's int counts */

/* The checkpoint shard's suffixes (ckpt_session.h): weights, AdamW m and v. */
static const char *const SFX[3] = {"", ".exp_avg", ".exp_avg_sq"};

/* The move's buffers: mapped populated, every page made at once (on this machine's sandbox a page faulted
 * one at a time made a fresh 1 GB buffer cost 6.1 s against 1.6 s populated; measured 2026-12-07). */
static float *map_floats(int64_t n) {
    void *p = mmap(NULL, (size_t)(n > 0 ? n : 1) * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void unmap_floats(float *p, int64_t n) {
    if (p) munmap(p, (size_t)(n > 0 ? n : 1) * sizeof(float));
}

struct ah_reconfig_moved {
    ah_model_t model;
    int T, rank;                 /* the old TP degree; this process's rank under the new plan */
    int64_t step, data_position;
    int ng;
    ah_shard_group_t *gs;        /* the groups it loads (ah_placement_groups, for_load) */
    int n;
    ah_move_item_t *items;       /* the move plan's items it receives, in order */
    float **bufs;                /* their data, the move's layout: parts of data */
    float *data;                 /* map_floats(n_data) */
    int64_t n_data;
    ah_tensor_t *ts;             /* the model's tensors (canonical order) */
    int nts;
    /* The pieces this process held (src == dst: no buffer): read at the load straight from the old
     * stage's w, m and v (keep; one copy into the new stage). On host memory those are the old stage's
     * own arenas, taken from it before the old trainer is freed (stolen: its gradients freed at once);
     * on a device, the host copies the move's views downloaded (keep_dev: what they are views of). */
    int n_kept;
    int64_t *old_off;            /* [nts] the tensor's offset in the old stage; -1: it held none */
    float *keep[3], *keep_dev[3];
    bool stolen;
    ah_mem_t keep_mem;           /* the stolen arenas' space and count (the old trainer's is reset) */
    ah_arena_t keep_params, keep_opt;
    /* A join (ah_reconfig_move with join, then ah_reconfig_move_join over the new world): the items the
     * joining ranks load (every staying rank has them all; src the sender's new rank), this rank's packed
     * buffers of those it sends (jout[k], NULL where it does not), and the old world's part of the move. */
    int n_join;
    ah_move_item_t *jitems;
    float **jout;
    ah_reconfig_move_stats_t st1;
};

static void free_jout(ah_reconfig_moved_t *mv) {
    for (int k = 0; mv->jout && k < mv->n_join; k++) unmap_floats(mv->jout[k], mv->jitems[k].floats);
    free(mv->jout);
    mv->jout = NULL;
}

static void release_kept(ah_reconfig_moved_t *mv) {
    if (mv->stolen) {
        ah_arena_free(&mv->keep_params);
        ah_arena_free(&mv->keep_opt);
    } else {
        for (int b = 0; b < 3; b++)
            if (mv->keep[b]) ah_mem_host_done(mv->keep_dev[b], mv->keep[b]);
    }
    memset(mv->keep, 0, sizeof mv->keep);
    mv->stolen = false;
}

void ah_reconfig_moved_free(ah_reconfig_moved_t *mv) {
    if (mv) {
        release_kept(mv);
        free_jout(mv);
        free(mv->jitems);
        unmap_floats(mv->data, mv->n_data), free(mv->bufs), free(mv->items), free(mv->gs), free(mv->ts);
        free(mv->old_off);
    }
    free(mv);
}

/* Whether this rank (me) sends item it over the old world: to another process that loads it, or, a leaving
 * rank, a piece only leavers held to the staying rank that relays it to a joining one (ckpt/move_plan.h via). */
static bool sends_old(const ah_move_item_t *it, int me) {
    return it->dst >= 0 ? it->src == me && it->dst != me : it->via == me;
}

/* Whether me receives item it over the old world from another process: to load it, or to relay it. */
static bool recvs_old(const ah_move_item_t *it, int me) {
    return it->dst >= 0 ? it->dst == me && it->src != me : it->via >= 0 && it->src == me;
}

static bool same_group(const ah_tensor_t *x, ah_shard_group_t g) {
    const ah_shard_group_t h = ah_shard_group_of(x);
    return h.kind == g.kind && h.layer == g.layer;
}

/* Where the old stage holds each of the model's tensors (mv->old_off), checked for the groups of the
 * pieces this rank sends or keeps (old_n: their floats at the old degree). */
static ah_status_t index_old(const ah_gpt_stage_t *st, const ah_move_plan_t *mp, int me, ah_reconfig_moved_t *mv,
                             ah_error_t *err) {
    if (!(mv->old_off = malloc((size_t)mv->nts * sizeof *mv->old_off)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the move");
    for (int i = 0; i < mv->nts; i++) {
        const ah_gpt_param_t *p = ah_gpt_find(st, mv->ts[i].name);
        mv->old_off[i] = p && p->n == ah_tensor_shard_elems(&mv->ts[i], mv->T) ? p->offset : -1;
    }
    for (int k = 0; k < mp->n; k++) { /* the pieces it packs: it sends them, or hands them to a relay */
        if ((mp->items[k].via >= 0 ? mp->items[k].via : mp->items[k].src) != me) continue;
        for (int i = 0; i < mv->nts; i++) {
            if (!same_group(&mv->ts[i], mp->items[k].g) || mv->old_off[i] >= 0) continue;
            const ah_gpt_param_t *p = ah_gpt_find(st, mv->ts[i].name);
            return ah_error_set(err, AH_ERR_INTERNAL, "the move: this rank's stage %s %s (%lld floats, %lld expected)",
                                p ? "holds" : "lacks", mv->ts[i].name, (long long)(p ? p->n : 0),
                                (long long)ah_tensor_shard_elems(&mv->ts[i], mv->T));
        }
    }
    return AH_OK;
}

/* Group g's tensors of the old stage (host copies of w, m, v in host[]) into out, the move's layout. */
static void pack(float *const host[3], const ah_reconfig_moved_t *mv, ah_shard_group_t g, float *out) {
    int64_t off = 0;
    for (int i = 0; i < mv->nts; i++) {
        if (!same_group(&mv->ts[i], g)) continue;
        const int64_t n = ah_tensor_shard_elems(&mv->ts[i], mv->T);
        for (int b = 0; b < 3; b++, off += n) memcpy(out + off, host[b] + mv->old_off[i], (size_t)n * sizeof *out);
    }
}

/* The old stage's w, m and v (host[]: the move's views of them) kept for the load of the pieces this
 * process held: on host memory the old stage's arenas, taken out of tr (nothing else of it changes:
 * it is freed next, its tensors no longer used), its gradients freed; on a device the views
 * themselves (host[] set NULL: mv owns them). Cannot fail. */
static void keep_old(ah_trainer_t *tr, ah_reconfig_moved_t *mv, float *host[3], float *const dev[3]) {
    ah_gpt_stage_t *st = &tr->stage;
    for (int b = 0; b < 3; b++) mv->keep[b] = host[b], mv->keep_dev[b] = dev[b];
    if (host[0] != dev[0]) {
        for (int b = 0; b < 3; b++) host[b] = NULL;
        return;
    }
    mv->stolen = true;
    mv->keep_mem = *st->a_params.mem;
    mv->keep_params = st->a_params, mv->keep_opt = st->a_opt;
    mv->keep_params.mem = mv->keep_opt.mem = &mv->keep_mem;
    ah_arena_init(&st->a_params, st->a_params.mem, mv->keep_params.name);
    ah_arena_init(&st->a_opt, st->a_opt.mem, mv->keep_opt.name);
    ah_arena_t *a = &mv->keep_params; /* the gradients: not part of the state */
    for (int i = 0; i < a->n; i++)
        if (a->blocks[i] == st->g) {
            a->mem->space->free(a->blocks[i]);
            a->mem->live -= a->sizes[i];
            a->blocks[i] = a->blocks[a->n - 1], a->sizes[i] = a->sizes[a->n - 1];
            a->n--;
            break;
        }
    st->w = st->g = st->m = st->v = NULL;
}

/* The receiving side's state: the model, the groups and this rank's items with their buffers. */
static ah_status_t moved_new(const ah_plan_t *next, const ah_placement_t *to, const ah_move_plan_t *mp, int me,
                             int new_rank, int T, ah_reconfig_moved_t **out, ah_error_t *err) {
    ah_reconfig_moved_t *mv = calloc(1, sizeof *mv);
    if (!mv) return ah_error_set(err, AH_ERR_OOM, "no host memory for the move");
    *out = mv;
    mv->model = next->model;
    mv->T = T;
    mv->rank = new_rank;
    mv->nts = ah_model_tensor_count(&next->model);
    mv->ts = malloc((size_t)mv->nts * sizeof *mv->ts);
    mv->gs = malloc((size_t)to->max_groups * sizeof *mv->gs);
    mv->items = malloc((size_t)(mp->n ? mp->n : 1) * sizeof *mv->items);
    mv->bufs = calloc((size_t)(mp->n ? mp->n : 1), sizeof *mv->bufs);
    if (!mv->ts || !mv->gs || !mv->items || !mv->bufs) return ah_error_set(err, AH_ERR_OOM, "no host memory for the move");
    ah_model_tensors(&next->model, mv->ts);
    if (new_rank >= 0) mv->ng = ah_placement_groups(to, new_rank, true, mv->gs);
    int64_t total = 0;
    for (int i = 0; i < mp->n; i++)
        if (mp->items[i].dst == me) {
            mv->items[mv->n++] = mp->items[i];
            if (mp->items[i].src == me) mv->n_kept++;
            else total += mp->items[i].floats;
        }
    mv->n_data = total;
    if (!(mv->data = map_floats(total)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the %lld floats the move brings", (long long)total);
    float *at = mv->data;
    for (int i = 0; i < mv->n; i++)
        if (mv->items[i].src != me) mv->bufs[i] = at, at += mv->items[i].floats;
    return AH_OK;
}

/* Posts one buffer's messages (chunks) to or from rank peer; *nr counts the requests. */
static ah_status_t post(ah_comm_t *w, float *buf, int64_t n, int peer, bool send, ah_comm_req_t *reqs, int *nr,
                        ah_error_t *err) {
    ah_status_t st = AH_OK;
    for (int64_t o = 0; o < n && st == AH_OK; o += MOVE_CHUNK) {
        const size_t c = (size_t)(n - o < MOVE_CHUNK ? n - o : MOVE_CHUNK);
        st = send ? ah_comm_isend_f32(w, buf + o, c, peer, MOVE_TAG, &reqs[*nr], err)
                  : ah_comm_irecv_f32(w, buf + o, c, peer, MOVE_TAG, &reqs[*nr], err);
        if (st == AH_OK) (*nr)++;
    }
    return st;
}

/* This rank's part of the move made ready before any rank posts a message: the requests of every message
 * it posts (*reqs) and a buffer for each item it sends to another process (outs, in the plan's order), packed
 * (the buffers it receives into are moved_new's). nomem: the test hook's failed map (ckpt/test_hook.h). */
static ah_status_t stage_sends(const ah_trainer_t *tr, const ah_move_plan_t *mp, const ah_reconfig_moved_t *mv,
                               float *const host[3], float **outs, bool nomem, ah_comm_req_t **reqs, ah_error_t *err) {
    const int me = tr->rank;
    int nreq = 0, sends = 0;
    for (int i = 0; i < mp->n; i++)
        if (sends_old(&mp->items[i], me) || recvs_old(&mp->items[i], me))
            nreq += (int)((mp->items[i].floats + MOVE_CHUNK - 1) / MOVE_CHUNK);
    if (!(*reqs = calloc((size_t)(nreq ? nreq : 1), sizeof **reqs)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the move's requests");
    for (int i = 0; i < mp->n; i++) {
        const ah_move_item_t *it = &mp->items[i];
        if (!sends_old(it, me)) continue;
        float *buf = outs[sends++] = nomem ? NULL : map_floats(it->floats);
        if (!buf) return ah_error_set(err, AH_ERR_OOM, "no host memory for %lld floats to send", (long long)it->floats);
        pack(host, mv, it->g, buf);
    }
    return AH_OK;
}

/* A join's items (dst -1: a joining rank's) kept in mv for ah_reconfig_move_join, their senders renumbered to
 * the new world (to_rank), and this rank's in buffers of their own (mv->jout): packed, or a relayed piece's
 * filled by the old world's exchange (via). */
static ah_status_t stage_join(const ah_move_plan_t *mp, const int *to_rank, int me, float *const host[3], bool nomem,
                              ah_reconfig_moved_t *mv, ah_error_t *err) {
    int n = 0;
    for (int i = 0; i < mp->n; i++) n += mp->items[i].dst < 0;
    mv->jitems = malloc((size_t)(n ? n : 1) * sizeof *mv->jitems);
    mv->jout = calloc((size_t)(n ? n : 1), sizeof *mv->jout);
    if (!mv->jitems || !mv->jout) return ah_error_set(err, AH_ERR_OOM, "no host memory for the join's move");
    for (int i = 0; i < mp->n; i++) {
        const ah_move_item_t *it = &mp->items[i];
        if (it->dst >= 0) continue;
        const int k = mv->n_join++;
        mv->jitems[k] = *it;
        mv->jitems[k].src = to_rank[it->src];
        if (it->src != me) continue;
        if (!(mv->jout[k] = nomem ? NULL : map_floats(it->floats)))
            return ah_error_set(err, AH_ERR_OOM, "no host memory for %lld floats to send a joining rank",
                                (long long)it->floats);
        if (it->via < 0) pack(host, mv, it->g, mv->jout[k]);
    }
    return AH_OK;
}

/* The exchange of mp on this rank (me), stage_sends's and stage_join's requests and buffers ready on every rank
 * (agreed): every receive and send posted in the plan's order, then waited for; the pieces it keeps stay where
 * they are; a piece it relays to a joining rank received into its join buffer. */
static ah_status_t exchange(const ah_trainer_t *tr, const ah_move_plan_t *mp, const ah_reconfig_moved_t *mv,
                            float *const *outs, ah_comm_req_t *reqs, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    const int me = tr->rank;
    int nr = 0, mine = 0, sends = 0, k = 0;
    ah_status_t st = AH_OK;
    for (int i = 0; i < mp->n && st == AH_OK; i++) {
        const ah_move_item_t *it = &mp->items[i];
        const int j = it->dst < 0 ? k++ : -1; /* its index among the join's items (mv->jout) */
        if (it->dst == me) { /* a piece it keeps: read from the old stage at the load (keep_old) */
            float *buf = mv->bufs[mine++];
            if (it->src != me) st = post(w, buf, it->floats, it->src, false, reqs, &nr, err);
        } else if (recvs_old(it, me)) {
            st = post(w, mv->jout[j], it->floats, it->via, false, reqs, &nr, err);
        } else if (sends_old(it, me)) {
            st = post(w, outs[sends++], it->floats, it->dst >= 0 ? it->dst : it->src, true, reqs, &nr, err);
        }
    }
    for (int i = 0; i < nr; i++) { /* a failed post (an MPI error) has been said; its partners wait for it here */
        const ah_status_t u = ah_comm_wait(&reqs[i], err);
        if (st == AH_OK) st = u;
    }
    return st;
}

/* This rank's sends over the old world: how many items it sends to another process. */
static int count_sends(const ah_move_plan_t *mp, int me) {
    int n = 0;
    for (int i = 0; i < mp->n; i++) n += sends_old(&mp->items[i], me);
    return n;
}

/* Collective: every rank's data position at step, the same (checked), into *pos. */
static ah_status_t agree_position(const ah_trainer_t *tr, int64_t step, int64_t *pos, ah_error_t *err) {
    *pos = ah_trainer_data_position(tr, step);
    int64_t v[2] = {*pos, -*pos};
    ah_status_t st = ah_comm_allreduce_max_i64(ah_comm_world(), v, 2, err);
    if (st == AH_OK && v[0] != -v[1])
        st = ah_error_set(err, AH_ERR_INTERNAL, "the move: the ranks' data positions at step %lld differ (%lld..%lld)",
                          (long long)step, (long long)-v[1], (long long)v[0]);
    return st;
}

/* The plans' placements and the move plan (the same on every rank; its buffers checked against the nodes' host
 * memory, held what they hold besides), this rank's buffers. */
static ah_status_t prepare(const ah_trainer_t *tr, const ah_plan_t *next, const int *to_rank, bool join,
                           const int64_t *held, ah_placement_t *from, ah_placement_t *to, ah_move_plan_t *mp,
                           ah_reconfig_moved_t **mv, ah_error_t *err) {
    if (!next) return ah_error_set(err, AH_ERR_USAGE, "this rank could not load the next plan");
    if (tr->plan->n_opt_groups > 0 || next->n_opt_groups > 0)
        return ah_error_set(err, AH_ERR_USAGE, "a sharded optimizer's moments are not moved rank to rank (yet)");
    ah_status_t st = ah_placement_build(tr->plan, NULL, 0, from, err);
    if (st == AH_OK) st = ah_placement_build(next, NULL, 0, to, err);
    if (st == AH_OK)
        st = (join ? ah_move_plan_build_join : ah_move_plan_build)(&next->model, from, to, to_rank, mp, err);
    if (st == AH_OK) /* on a device the move downloads the old stage (ah_gpt_host_view): host memory too */
        st = ah_move_plan_host_check(mp, tr->plan, from, next, to, held, tr->stage.a_params.mem->space != &ah_mem_host,
                                     err);
    if (st == AH_OK) st = moved_new(next, to, mp, tr->rank, to_rank[tr->rank], from->tp, mv, err);
    if (st == AH_OK) st = index_old(&tr->stage, mp, tr->rank, *mv, err);
    return st;
}

ah_status_t ah_reconfig_move(ah_trainer_t *tr, const ah_plan_t *next, const int *to_rank, bool join, int64_t step,
                             const int64_t *held, ah_reconfig_moved_t **out, ah_reconfig_move_stats_t *stats,
                             ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    const double t0 = ah_now_s();
    ah_placement_t from = {0}, to = {0};
    ah_move_plan_t mp = {0};
    ah_reconfig_moved_t *mv = NULL;
    float *host[3] = {NULL, NULL, NULL}, *dev[3] = {tr->stage.w, tr->stage.m, tr->stage.v}, **outs = NULL;
    *out = NULL;
    memset(stats, 0, sizeof *stats);
    ah_status_t st = prepare(tr, next, to_rank, join, held, &from, &to, &mp, &mv, err);
    for (int b = 0; b < 3 && st == AH_OK; b++) st = ah_gpt_host_view(&tr->stage, dev[b], true, &host[b], err);
    const int nsend = st == AH_OK ? count_sends(&mp, tr->rank) : 0;
    if (st == AH_OK && !(outs = calloc((size_t)(nsend ? nsend : 1), sizeof *outs)))
        st = ah_error_set(err, AH_ERR_OOM, "no host memory for the move's send list");
    ah_comm_req_t *reqs = NULL;
    const bool nomem = st == AH_OK && ah_test_hook_nomem("reconfig-move", step, NULL);
    if (st == AH_OK) st = stage_sends(tr, &mp, mv, host, outs, nomem, &reqs, err);
    if (st == AH_OK && join) st = stage_join(&mp, to_rank, tr->rank, host, nomem, mv, err);
    if ((st = ah_comm_agree(w, st, err)) == AH_OK) /* every rank ready: only MPI calls from here to the end */
        st = ah_comm_agree(w, exchange(tr, &mp, mv, outs, reqs, err), err);
    free(reqs);
    if (st == AH_OK) st = agree_position(tr, step, &mv->data_position, err);
    int64_t sums[3] = {(int64_t)((ah_now_s() - t0) * 1e6), 0, 0};
    for (int i = 0; st == AH_OK && i < mp.n; i++) /* each item once: by its receiver (a relayed piece's hop too) */
        if (mp.items[i].dst == tr->rank) sums[mp.items[i].src == tr->rank ? 2 : 1] += mp.items[i].floats * 4;
        else if (recvs_old(&mp.items[i], tr->rank)) sums[1] += mp.items[i].floats * 4;
    if (st == AH_OK) {
        int64_t t = sums[0];
        st = ah_comm_allreduce_max_i64(w, &t, 1, err);
        double b[2] = {(double)sums[1], (double)sums[2]}; /* a sum: exact below 2^53 bytes */
        if (st == AH_OK) st = ah_comm_allreduce_f64(w, b, 2, err);
        *stats = mv->st1 = (ah_reconfig_move_stats_t){(int64_t)b[0], (int64_t)b[1], t * 1e-6};
    }
    if (st == AH_OK && mv->rank >= 0 && mv->n_kept > 0) keep_old(tr, mv, host, dev);
    for (int i = 0, k = 0; outs && i < mp.n; i++) /* the send buffers, in stage_sends's order */
        if (sends_old(&mp.items[i], tr->rank)) unmap_floats(outs[k++], mp.items[i].floats);
    free(outs);
    for (int b = 0; b < 3; b++) /* not the ones keep_old took (on host memory a view is the buffer: nothing) */
        if (host[b]) ah_mem_host_done(dev[b], host[b]);
    ah_move_plan_free(&mp);
    ah_placement_free(&from);
    ah_placement_free(&to);
    if (st == AH_OK && mv->rank >= 0) {
        mv->step = step;
        *out = mv;
    } else {
        ah_reconfig_moved_free(mv);
    }
    return st;
}

/* What the staying root tells every rank of the new world before the join's exchange (ah_reconfig_move_join). */
typedef struct {
    int ok, T, n_join, committed;
    int64_t step, data_position, moved, kept, us;
    char why[200];
} join_head_t;

/* A joining rank's receiving side: the items new rank `me` loads (of the n broadcast), buffers for each. */
static ah_status_t joined_new(const ah_plan_t *next, const join_head_t *h, ah_move_item_t *items, int me,
                              ah_reconfig_moved_t **out, ah_error_t *err) {
    ah_placement_t to = {0};
    for (int i = 0; i < h->n_join; i++) items[i].dst = items[i].to; /* moved_new picks its own by dst */
    const ah_move_plan_t mp = {.n = h->n_join, .items = items};
    ah_status_t st = ah_test_hook_nomem("reconfig-join", h->step, NULL) /* test-only: a failed map */
        ? ah_error_set(err, AH_ERR_OOM, "no host memory for the pieces joining rank %d loads", me)
        : ah_placement_build(next, NULL, 0, &to, err);
    if (st == AH_OK) st = moved_new(next, &to, &mp, me, me, h->T, out, err);
    ah_placement_free(&to);
    if (st == AH_OK) (*out)->step = h->step, (*out)->data_position = h->data_position;
    return st;
}

/* The join's messages on this rank of the new world: a joining rank receives its items from their senders, a
 * staying one sends the ones it packed (jout); both in the items' order. */
static ah_status_t join_exchange(const ah_reconfig_moved_t *mv, const ah_move_item_t *items, int n, int me,
                                 ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    int nreq = 0, nr = 0, mine = 0;
    for (int i = 0; i < n; i++)
        if (items[i].to == me || items[i].src == me) nreq += (int)((items[i].floats + MOVE_CHUNK - 1) / MOVE_CHUNK);
    ah_comm_req_t *reqs = calloc((size_t)(nreq ? nreq : 1), sizeof *reqs);
    ah_status_t st = reqs ? AH_OK : ah_error_set(err, AH_ERR_OOM, "no host memory for the join's requests");
    for (int i = 0; i < n && st == AH_OK; i++) {
        if (items[i].to == me) st = post(w, mv->bufs[mine++], items[i].floats, items[i].src, false, reqs, &nr, err);
        else if (items[i].src == me) st = post(w, mv->jout[i], items[i].floats, items[i].to, true, reqs, &nr, err);
    }
    for (int i = 0; i < nr; i++) {
        const ah_status_t u = ah_comm_wait(&reqs[i], err);
        if (st == AH_OK) st = u;
    }
    free(reqs);
    return st;
}

ah_status_t ah_reconfig_move_join(ah_reconfig_moved_t **mv, bool joining, const ah_plan_t *next, bool *committed,
                                  const char *why, ah_reconfig_move_stats_t *stats, ah_error_t *err) {
    ah_comm_t *w = ah_comm_world();
    const int me = ah_comm_rank(w);
    const double t0 = ah_now_s();
    ah_reconfig_moved_t *m = joining ? NULL : *mv;
    join_head_t h = {0};
    memset(stats, 0, sizeof *stats);
    int64_t root = joining ? -INT64_MAX : -(int64_t)me; /* the lowest staying rank: its max */
    ah_status_t st = ah_comm_allreduce_max_i64(w, &root, 1, err);
    if (st == AH_OK && me == (int)-root) {
        h.ok = m != NULL, h.committed = *committed;
        if (m) h = (join_head_t){1, m->T, m->n_join, *committed, m->step, m->data_position, m->st1.moved_bytes,
                                 m->st1.kept_bytes, (int64_t)(m->st1.seconds * 1e6), ""};
        snprintf(h.why, sizeof h.why, "%s", why ? why : "");
    }
    if (st == AH_OK) st = ah_comm_bcast(w, &h, sizeof h, (int)-root, err);
    *committed = h.committed;
    ah_move_item_t *items = m ? m->jitems : NULL;
    if (st == AH_OK && h.ok && joining && !(items = malloc((size_t)(h.n_join ? h.n_join : 1) * sizeof *items)))
        st = ah_error_set(err, AH_ERR_OOM, "no host memory for the join's %d pieces", h.n_join);
    if ((st = ah_comm_agree(w, st, err)) == AH_OK && h.ok) /* the same items on every rank */
        st = ah_comm_bcast(w, items, (size_t)h.n_join * sizeof *items, (int)-root, err);
    if (st == AH_OK && !h.ok) st = ah_error_set(err, AH_ERR_USAGE, "%s", h.why);
    else if (st == AH_OK && joining) st = joined_new(next, &h, items, me, &m, err);
    if (h.ok && (st = ah_comm_agree(w, st, err)) == AH_OK) /* every rank ready: only MPI calls from here */
        st = ah_comm_agree(w, join_exchange(m, items, h.n_join, me, err), err);
    int64_t us = (int64_t)((ah_now_s() - t0) * 1e6), joined = 0;
    for (int i = 0; st == AH_OK && i < h.n_join; i++) joined += items[i].floats * 4;
    if (st == AH_OK) st = ah_comm_allreduce_max_i64(w, &us, 1, err);
    if (st == AH_OK) *stats = (ah_reconfig_move_stats_t){h.moved + joined, h.kept, (double)(h.us + us) * 1e-6};
    if (joining) free(items);
    if (m) free_jout(m);
    if (st != AH_OK) {
        ah_reconfig_moved_free(m);
        m = NULL;
    }
    *mv = m;
    return st;
}

/* ah_ckpt_load_stage's source over the moved buffers: the opened group's first item. */
typedef struct {
    const ah_reconfig_moved_t *mv;
    int first;
} moved_source_t;

static ah_status_t moved_open(void *ctx, int gi, const int *idx, int nf, ah_error_t *err) {
    moved_source_t *s = ctx;
    const ah_reconfig_moved_t *mv = s->mv;
    s->first = 0;
    while (s->first < mv->n && mv->items[s->first].gi != gi) s->first++;
    for (int j = 0; j < nf; j++)
        if (s->first + j >= mv->n || mv->items[s->first + j].gi != gi || mv->items[s->first + j].piece != idx[j])
            return ah_error_set(err, AH_ERR_INTERNAL, "the move brought no piece %d of this rank's group %d", idx[j], gi);
    return AH_OK;
}

static ah_status_t moved_read(void *ctx, int j, const char *name, float *dst, int64_t np, ah_error_t *err) {
    const moved_source_t *s = ctx;
    const ah_reconfig_moved_t *mv = s->mv;
    const ah_move_item_t *it = &mv->items[s->first + j];
    const float *buf = mv->bufs[s->first + j]; /* NULL: a piece this process kept */
    int64_t off = 0;
    char full[96];
    for (int i = 0; i < mv->nts; i++) {
        if (!same_group(&mv->ts[i], it->g)) continue;
        const int64_t n = ah_tensor_shard_elems(&mv->ts[i], mv->T);
        for (int b = 0; b < 3; b++, off += n) {
            snprintf(full, sizeof full, "%s%s", mv->ts[i].name, SFX[b]);
            if (strcmp(full, name) != 0) continue;
            if (n != np)
                return ah_error_set(err, AH_ERR_INTERNAL, "the move's %s has %lld floats, %lld expected", name,
                                    (long long)n, (long long)np);
            const float *from = buf ? buf + off : mv->keep[b] && mv->old_off[i] >= 0 ? mv->keep[b] + mv->old_off[i] : NULL;
            if (!from) return ah_error_set(err, AH_ERR_INTERNAL, "the move kept no %s in this process", name);
            memcpy(dst, from, (size_t)n * sizeof *dst);
            return AH_OK;
        }
    }
    return ah_error_set(err, AH_ERR_INTERNAL, "the move brought no tensor %s", name);
}

static void moved_close(void *ctx) {
    (void)ctx;
}

ah_status_t ah_reconfig_move_load(const ah_reconfig_moved_t *mv, ah_trainer_t *tr, ah_error_t *err) {
    if (tr->rank != mv->rank)
        return ah_error_set(err, AH_ERR_INTERNAL, "the move brought new rank %d's state to the new world's rank %d",
                            mv->rank, tr->rank);
    moved_source_t s = {mv, 0};
    const ah_ckpt_piece_source_t src = {moved_open, moved_read, moved_close, &s};
    const ah_status_t st = ah_ckpt_load_stage(tr, mv->gs, mv->ng, mv->T, &src, err);
    if (st == AH_OK) ah_trainer_set_data_position(tr, mv->step, mv->data_position);
    return st;
}
