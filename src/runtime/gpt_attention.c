/* A stage's attention and embedding under context parallelism or not (runtime/gpt_block.h): the
 * backend's kernels, or with cfg.cp_ring the ring over the CP group (runtime/cp_ring.h) and the
 * backend's kernels by position (kernels/kernels.h's context-parallel entries). */
#include "runtime/cp_ring.h"
#include "runtime/gpt_block.h"

const int *ah_gpt_positions(const ah_gpt_stage_t *st) {
    const ah_cp_ring_t *r = st->cfg.cp_ring;
    return r ? r->pos + (size_t)r->rank * r->Tl : NULL;
}

ah_cp_at_t ah_gpt_cp_at(const ah_gpt_stage_t *st) {
    const ah_cp_ring_t *r = st->cfg.cp_ring;
    return r ? ah_cp_ring_at(r, r->rank) : ah_cp_at_identity((int)st->cfg.seq_len);
}

ah_status_t ah_gpt_attention_fwd(ah_gpt_stage_t *st, float *out, float *state, float *scratch, const float *qkv,
                                 ah_error_t *err) {
    if (st->cfg.cp_ring) return ah_cp_attention_fwd(st->cfg.cp_ring, out, state, qkv, err);
    st->k->attention_fwd(out, state, scratch, qkv, (int)st->cfg.micro_batch, (int)st->cfg.seq_len, (int)st->Hl,
                         (int)st->KVl, (int)st->hd);
    return AH_OK;
}

ah_status_t ah_gpt_attention_bwd(ah_gpt_stage_t *st, float *dqkv, float *scratch, const float *dout,
                                 const float *qkv, const float *out, const float *state, ah_error_t *err) {
    if (st->cfg.cp_ring) return ah_cp_attention_bwd(st->cfg.cp_ring, dqkv, dout, qkv, out, state, err);
    st->k->attention_bwd(dqkv, scratch, dout, qkv, out, state, (int)st->cfg.micro_batch, (int)st->cfg.seq_len,
                         (int)st->Hl, (int)st->KVl, (int)st->hd);
    return AH_OK;
}

void ah_gpt_embedding_fwd(ah_gpt_stage_t *st, float *x, const int32_t *ids, const float *wte, const float *wpe) {
    const int B = (int)st->cfg.micro_batch, T = (int)st->cfg.seq_len;
    st->k->embedding_fwd_at(x, ids, wte, wpe, ah_gpt_cp_at(st), B, T, (int)st->C, (int)st->v0, (int)st->Vl);
}

void ah_gpt_embedding_bwd(ah_gpt_stage_t *st, float *dwte, float *dwpe, const float *dx, const int32_t *ids) {
    const int B = (int)st->cfg.micro_batch, T = (int)st->cfg.seq_len;
    st->k->embedding_bwd_at(dwte, dwpe, dx, ids, ah_gpt_cp_at(st), B, T, (int)st->C, (int)st->v0, (int)st->Vl);
}
