/* Ring attention over a CP group (contract in cp_ring.h). */
#include "runtime/cp_ring.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/ring_attention.h"

#define TRY(x) do { ah_status_t s_ = (x); if (s_ != AH_OK) return s_; } while (0)

ah_status_t ah_cp_ring_init(ah_cp_ring_t *r, ah_comm_t *group, ah_mem_t *mem, int B, int T, int Hl, int KVl, int hd,
                            ah_error_t *err) {
    memset(r, 0, sizeof *r);
    const int c = ah_comm_size(group);
    if (T % (2 * c) != 0 || Hl % KVl != 0)
        return ah_error_set(err, AH_ERR_INTERNAL, "ring attention: seq_len %d over %d CP ranks (a multiple of %d "
                            "needed), %d query heads over %d key/value heads", T, c, 2 * c, Hl, KVl);
    *r = (ah_cp_ring_t){.group = group, .c = c, .rank = ah_comm_rank(group), .B = B, .Tl = T / c, .Hl = Hl,
                        .KVl = KVl, .hd = hd};
    ah_arena_init(&r->arena, mem, "ring attention");
    const int64_t kv = (int64_t)B * r->Tl * 2 * KVl * hd, rows = (int64_t)B * Hl * r->Tl;
    ah_status_t s = AH_OK;
    if (!(r->pos = malloc((size_t)c * r->Tl * sizeof *r->pos)))
        s = ah_error_set(err, AH_ERR_OOM, "no host memory for ring attention's positions (%d ints)", T);
    static const char *const KV_NAMES[2] = {"ring key/value block 0", "ring key/value block 1"};
    static const char *const DKV_NAMES[2] = {"ring key/value gradient 0", "ring key/value gradient 1"};
    for (int k = 0; k < 2 && s == AH_OK; k++)
        if ((s = ah_arena_floats(&r->arena, kv, KV_NAMES[k], &r->kv[k], err)) == AH_OK)
            s = ah_arena_floats(&r->arena, kv, DKV_NAMES[k], &r->dkv[k], err);
    if (s == AH_OK) s = ah_arena_floats(&r->arena, rows * hd, "ring attention accumulator", &r->acc, err);
    if (s == AH_OK) s = ah_arena_floats(&r->arena, rows * 2, "ring attention softmax statistics", &r->stats, err);
    if (s == AH_OK)
        s = ah_arena_floats(&r->arena, (int64_t)ah_cpu_ring_attn_scratch_floats(r->Tl, r->Tl),
                            "ring attention scratch", &r->scratch, err);
    if (s != AH_OK) {
        ah_cp_ring_free(r);
        return s;
    }
    for (int i = 0; i < c; i++) ah_cp_positions(r->pos + (size_t)i * r->Tl, T, c, i);
    return AH_OK;
}

void ah_cp_ring_free(ah_cp_ring_t *r) {
    free(r->pos);
    if (r->arena.mem) ah_arena_free(&r->arena);
    memset(r, 0, sizeof *r);
}

static size_t kv_floats(const ah_cp_ring_t *r) { return (size_t)r->B * r->Tl * 2 * r->KVl * r->hd; }

/* Starts moving buf (to rank + 1) and receiving into into (from rank - 1), tag AH_CP_TAG + k. */
static ah_status_t ring_shift(const ah_cp_ring_t *r, const float *buf, float *into, int k, ah_comm_req_t req[2],
                              ah_error_t *err) {
    const int next = (r->rank + 1) % r->c, prev = (r->rank + r->c - 1) % r->c;
    TRY(ah_comm_irecv_f32(r->group, into, kv_floats(r), prev, AH_CP_TAG + k, &req[0], err));
    return ah_comm_isend_f32(r->group, buf, kv_floats(r), next, AH_CP_TAG + k, &req[1], err);
}

static ah_status_t wait_both(ah_comm_req_t req[2], ah_error_t *err) {
    TRY(ah_comm_wait(&req[0], err));
    return ah_comm_wait(&req[1], err);
}

ah_status_t ah_cp_attention_fwd(ah_cp_ring_t *r, float *out, float *lse, const float *qkv, ah_error_t *err) {
    const int *mine = r->pos + (size_t)r->rank * r->Tl;
    ah_cpu_ring_kv_pack(r->kv[0], qkv, r->B, r->Tl, r->Hl, r->KVl, r->hd);
    ah_cpu_ring_attn_init(r->acc, r->stats, r->B, r->Tl, r->Hl, r->hd);
    for (int s = 0; s < r->c; s++) {
        ah_comm_req_t req[2];
        memset(req, 0, sizeof req);
        const float *cur = r->kv[s % 2];
        if (s + 1 < r->c) TRY(ring_shift(r, cur, r->kv[(s + 1) % 2], 0, req, err));
        const int src = (r->rank - s + r->c) % r->c;
        ah_cpu_ring_attn_fwd_block(r->acc, r->stats, r->scratch, qkv, mine, cur, r->pos + (size_t)src * r->Tl, r->B,
                                   r->Tl, r->Tl, r->Hl, r->KVl, r->hd);
        TRY(wait_both(req, err));
    }
    ah_cpu_ring_attn_finish(out, lse, r->acc, r->stats, r->B, r->Tl, r->Hl, r->hd);
    return AH_OK;
}

ah_status_t ah_cp_attention_bwd(ah_cp_ring_t *r, float *dqkv, const float *dout, const float *qkv, const float *out,
                                const float *lse, ah_error_t *err) {
    const int *mine = r->pos + (size_t)r->rank * r->Tl;
    const size_t n = kv_floats(r);
    ah_cpu_ring_kv_pack(r->kv[0], qkv, r->B, r->Tl, r->Hl, r->KVl, r->hd);
    memset(r->dkv[0], 0, n * sizeof(float));
    for (int s = 0; s < r->c; s++) {
        ah_comm_req_t req[2], dreq[2];
        memset(req, 0, sizeof req);
        memset(dreq, 0, sizeof dreq);
        const int cur = s % 2;
        if (s + 1 < r->c) TRY(ring_shift(r, r->kv[cur], r->kv[1 - cur], 0, req, err));
        const int src = (r->rank - s + r->c) % r->c;
        ah_cpu_ring_attn_bwd_block(dqkv, r->dkv[cur], r->scratch, dout, qkv, out, lse, mine, r->kv[cur],
                                   r->pos + (size_t)src * r->Tl, r->B, r->Tl, r->Tl, r->Hl, r->KVl, r->hd);
        if (r->c > 1) TRY(ring_shift(r, r->dkv[cur], r->dkv[1 - cur], 1, dreq, err));
        TRY(wait_both(req, err));
        TRY(wait_both(dreq, err));
    }
    /* after c passes (none at c = 1) the accumulator of this rank's own block is back here */
    const float *mine_dkv = r->dkv[r->c > 1 ? r->c % 2 : 0];
    const size_t ld = (size_t)(r->Hl + 2 * r->KVl) * r->hd, w = (size_t)2 * r->KVl * r->hd;
    for (size_t t = 0; t < (size_t)r->B * r->Tl; t++) {
        float *d = dqkv + t * ld + (size_t)r->Hl * r->hd;
        const float *g = mine_dkv + t * w;
        for (size_t k = 0; k < w; k++) d[k] += g[k];
    }
    return AH_OK;
}
