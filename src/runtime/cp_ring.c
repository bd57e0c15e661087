/* Ring attention over a CP group (contract in cp_ring.h). */
#include "runtime/cp_ring.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ring_attention.h"

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)

static size_t kv_floats(const ah_cp_ring_t *r) { return (size_t)r->B * r->Tl * 2 * r->KVl * r->hd; }

/* The ring's buffers from its arena; on a device backend, the events of its two exchanges. */
static ah_status_t alloc_buffers(ah_cp_ring_t *r, ah_error_t *err) {
    static const char *const KV_NAMES[2] = {"ring key/value block 0", "ring key/value block 1"};
    static const char *const DKV_NAMES[2] = {"ring key/value gradient 0", "ring key/value gradient 1"};
    const int64_t kv = (int64_t)kv_floats(r), rows = (int64_t)r->B * r->Hl * r->Tl;
    for (int k = 0; k < 2; k++) {
        TRY(ah_arena_floats(&r->arena, kv, KV_NAMES[k], &r->kv[k], err));
        TRY(ah_arena_floats(&r->arena, kv, DKV_NAMES[k], &r->dkv[k], err));
    }
    TRY(ah_arena_floats(&r->arena, rows * r->hd, "ring attention accumulator", &r->acc, err));
    TRY(ah_arena_floats(&r->arena, rows * 2, "ring attention softmax statistics", &r->stats, err));
    TRY(ah_arena_floats(&r->arena, (int64_t)r->k->ring_attn_scratch_floats(r->B, r->Tl, r->Tl, r->Hl, r->KVl, r->hd),
                        "ring attention scratch", &r->scratch, err));
    for (int k = 0; r->group->dc && k < 2; k++) TRY(r->group->backend->dcomm_event_create(&r->landed[k], err));
    return AH_OK;
}

ah_status_t ah_cp_ring_init(ah_cp_ring_t *r, ah_group_t *group, const ah_kernels_t *k, ah_mem_t *mem, int B, int T,
                            int Hl, int KVl, int hd, ah_error_t *err) {
    memset(r, 0, sizeof *r);
    const int c = ah_comm_size(group->c);
    if (T % (2 * c) != 0 || Hl % KVl != 0)
        return ah_error_set(err, AH_ERR_INTERNAL, "ring attention: seq_len %d over %d CP ranks (a multiple of %d "
                            "needed), %d query heads over %d key/value heads", T, c, 2 * c, Hl, KVl);
    *r = (ah_cp_ring_t){.group = group, .k = k, .c = c, .rank = ah_comm_rank(group->c), .B = B, .Tl = T / c,
                        .Hl = Hl, .KVl = KVl, .hd = hd, .mem = mem};
    ah_arena_init(&r->arena, mem, "ring attention");
    ah_status_t s = AH_OK;
    if (!(r->pos = malloc((size_t)c * r->Tl * sizeof *r->pos)))
        s = ah_error_set(err, AH_ERR_OOM, "no host memory for ring attention's positions (%d ints)", T);
    if (s == AH_OK) s = alloc_buffers(r, err);
    if (s != AH_OK) {
        ah_cp_ring_free(r);
        return s;
    }
    for (int i = 0; i < c; i++) ah_cp_positions(r->pos + (size_t)i * r->Tl, T, c, i);
    return AH_OK;
}

void ah_cp_ring_free(ah_cp_ring_t *r) {
    free(r->pos);
    for (int k = 0; k < 2; k++)
        if (r->landed[k]) r->group->backend->dcomm_event_free(&r->landed[k]);
    if (r->arena.mem) ah_arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

ah_cp_at_t ah_cp_ring_at(const ah_cp_ring_t *r, int rank) { return ah_cp_at(r->Tl * r->c, r->c, rank); }

const char *ah_cp_ring_exchange(const ah_cp_ring_t *r) {
    return r->group->dc ? r->group->backend->dcomm_kind(r->group->dc) : "mpi";
}

/* A block (buf) on its way to rank + 1 while the next comes from rank - 1 into `into`, exchange
 * `x` (0: the key/value blocks, 1: their gradients; tag AH_CP_TAG + x): started by ring_start,
 * landed by ring_finish. On the CPU, MPI requests on the blocks themselves; on a device backend
 * the CP group's device communicator, whose event the compute stream waits for. */
typedef struct {
    ah_comm_req_t req[2];
    ah_dcomm_event_t *landed;
    bool started;
} ring_step_t;

static ah_status_t ring_start(const ah_cp_ring_t *r, float *buf, float *into, int x, ring_step_t *st,
                              ah_error_t *err) {
    const int next = (r->rank + 1) % r->c, prev = (r->rank + r->c - 1) % r->c;
    memset(st, 0, sizeof *st);
    st->started = true;
    const ah_group_t *g = r->group;
    if (g->dc) {
        st->landed = r->landed[x];
        const ah_dcomm_p2p_t ops[2] = {{buf, kv_floats(r), next, false, NULL}, {into, kv_floats(r), prev, true, st->landed}};
        return g->backend->dcomm_p2p(g->dc, ops, 2, AH_CP_TAG + x, err);
    }
    TRY(ah_comm_irecv_f32(g->c, into, kv_floats(r), prev, AH_CP_TAG + x, &st->req[0], err));
    return ah_comm_isend_f32(g->c, buf, kv_floats(r), next, AH_CP_TAG + x, &st->req[1], err);
}

static ah_status_t ring_finish(const ah_cp_ring_t *r, ring_step_t *st, ah_error_t *err) {
    if (!st->started) return AH_OK;
    if (st->landed) return r->group->backend->dcomm_event_wait(st->landed, err);
    TRY(ah_comm_wait(&st->req[0], err));
    return ah_comm_wait(&st->req[1], err);
}

ah_status_t ah_cp_attention_fwd(ah_cp_ring_t *r, float *out, float *lse, const float *qkv, ah_error_t *err) {
    const ah_kernels_t *k = r->k;
    const ah_cp_at_t mine = ah_cp_ring_at(r, r->rank);
    k->ring_kv_pack(r->kv[0], qkv, r->B, r->Tl, r->Hl, r->KVl, r->hd);
    k->ring_attn_init(r->acc, r->stats, r->B, r->Tl, r->Hl, r->hd);
    for (int s = 0; s < r->c; s++) {
        ring_step_t step = {0};
        const int cur = s % 2;
        if (s + 1 < r->c) TRY(ring_start(r, r->kv[cur], r->kv[1 - cur], 0, &step, err));
        const int src = (r->rank - s + r->c) % r->c;
        k->ring_attn_fwd_block(r->acc, r->stats, r->scratch, qkv, mine, r->kv[cur], ah_cp_ring_at(r, src), r->B,
                               r->Tl, r->Tl, r->Hl, r->KVl, r->hd);
        TRY(ring_finish(r, &step, err));
    }
    k->ring_attn_finish(out, lse, r->acc, r->stats, r->B, r->Tl, r->Hl, r->hd);
    return AH_OK;
}

ah_status_t ah_cp_attention_bwd(ah_cp_ring_t *r, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, ah_error_t *err) {
    const ah_kernels_t *k = r->k;
    const ah_cp_at_t mine = ah_cp_ring_at(r, r->rank);
    k->ring_kv_pack(r->kv[0], qkv, r->B, r->Tl, r->Hl, r->KVl, r->hd);
    k->zero(r->dkv[0], kv_floats(r));
    for (int s = 0; s < r->c; s++) {
        ring_step_t step = {0}, dstep = {0};
        const int cur = s % 2;
        if (s + 1 < r->c) TRY(ring_start(r, r->kv[cur], r->kv[1 - cur], 0, &step, err));
        const int src = (r->rank - s + r->c) % r->c;
        k->ring_attn_bwd_block(dqkv, r->dkv[cur], r->scratch, dout, qkv, out, lse, mine, r->kv[cur],
                               ah_cp_ring_at(r, src), r->B, r->Tl, r->Tl, r->Hl, r->KVl, r->hd);
        if (r->c > 1)
            TRY(ring_start(r, r->dkv[cur], r->dkv[1 - cur], 1, &dstep, err));
        TRY(ring_finish(r, &step, err));
        TRY(ring_finish(r, &dstep, err));
    }
    /* after c passes (none at c = 1) the accumulator of this rank's own block is back here */
    k->ring_kv_add(dqkv, r->dkv[r->c > 1 ? r->c % 2 : 0], r->B, r->Tl, r->Hl, r->KVl, r->hd);
    return AH_OK;
}
