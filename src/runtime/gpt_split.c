/* The split backward of a stage (zero-bubble's B and W, runtime/gpt.h): the W inputs' buffers,
 * each linear layer's backward in B, and the W pass over the stage's blocks. One code for both
 * architectures: a block's linear layers are its ops' `linears` table (runtime/gpt_block.h). */
#include <stdio.h>
#include <stdlib.h>

#include "runtime/gpt_block.h"

int64_t ah_gpt_block_dim(const ah_gpt_stage_t *st, ah_block_dim_t d) {
    switch (d) {
    case AH_BD_C: return st->C;
    case AH_BD_CL: return st->Cl;
    case AH_BD_FL: return st->Fl;
    case AH_BD_QKVL: return st->QKVl;
    case AH_BD_MLP_IN: return st->Fl * st->ops->mlp_in_mult;
    }
    return 0;
}

/* dst = src through the kernel table (zero, then +=), so a device backend copies on device. */
static void copy(const ah_kernels_t *k, float *dst, const float *src, size_t n) {
    k->zero(dst, n);
    k->residual_bwd(dst, NULL, src, n);
}

void ah_gpt_linear_bwd(ah_gpt_stage_t *st, int l, int i, const ah_block_keep_t *keep, float *dinp,
                       const float *dout, const float *inp) {
    const ah_block_linear_t *x = &st->ops->linears[i];
    const int64_t in = ah_gpt_block_dim(st, x->in), out = ah_gpt_block_dim(st, x->out);
    st->k->matmul_bwd(dinp, keep ? NULL : ah_gpt_block_g(st, l, x->weight),
                      x->bias >= 0 ? ah_gpt_block_g(st, l, x->bias) : NULL, dout, inp,
                      ah_gpt_block_w(st, l, x->weight), (int)st->N, (int)in, (int)out);
    if (!keep) return;
    copy(st->k, keep->dy[i], dout, (size_t)(st->N * out));
    if (keep->x[i]) copy(st->k, keep->x[i], inp, (size_t)(st->N * in));
}

ah_status_t ah_gpt_alloc_keep(ah_gpt_stage_t *st, ah_error_t *err) {
    const int64_t nb = st->n_blocks, sets = st->cfg.wsets;
    if (sets == 0) return AH_OK;
    if (!(st->keep = calloc((size_t)(sets * nb), sizeof *st->keep)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the weight-gradient input views");
    const bool rc = st->cfg.recompute;
    int64_t floats = 0;
    for (int i = 0; i < AH_BLOCK_LINEARS; i++) {
        const ah_block_linear_t *x = &st->ops->linears[i];
        floats += st->N * ((rc || x->spare < 0 ? ah_gpt_block_dim(st, x->out) : 0) + (rc ? ah_gpt_block_dim(st, x->in) : 0));
    }
    char name[96];
    for (int64_t k = 0; k < sets * nb; k++) {
        float *p;
        snprintf(name, sizeof name, "weight-gradient inputs of held block %lld, W set %lld", (long long)(k % nb),
                 (long long)(k / nb));
        ah_status_t s = ah_arena_floats(&st->a_keep, floats, name, &p, err);
        if (s != AH_OK) return s;
        for (int i = 0; i < AH_BLOCK_LINEARS; i++) {
            if (!rc && st->ops->linears[i].spare >= 0) continue; /* in the slot: ah_gpt_keep_for_b */
            st->keep[k].dy[i] = p;
            p += st->N * ah_gpt_block_dim(st, st->ops->linears[i].out);
        }
        for (int i = 0; st->cfg.recompute && i < AH_BLOCK_LINEARS; i++) {
            st->keep[k].x[i] = p;
            p += st->N * ah_gpt_block_dim(st, st->ops->linears[i].in);
        }
    }
    return AH_OK;
}

ah_block_keep_t *ah_gpt_keep_for_b(const ah_gpt_stage_t *st, int64_t wset, int l, const ah_block_act_t *a) {
    ah_block_keep_t *keep = ah_gpt_keep(st, wset, l);
    for (int i = 0; !st->cfg.recompute && i < AH_BLOCK_LINEARS; i++)
        if (st->ops->linears[i].spare >= 0) keep->dy[i] = a->at[st->ops->linears[i].spare];
    return keep;
}

ah_status_t ah_gpt_backward_weights(ah_gpt_stage_t *st, int64_t slot, int64_t wset, ah_error_t *err) {
    const ah_gpt_chunk_t *c = &st->cfg.chunks[st->slot_chunk[slot]];
    ah_status_t s;
    const double t0 = ah_gpt_part_clock(st);
    if (ah_gpt_slot_head(st, slot) && st->on_grads && (s = st->on_grads(st->on_grads_ctx, AH_GPT_GRADS_HEAD, err)) != AH_OK)
        return s;
    for (int l = c->last - 1; l >= c->first; l--) {
        const ah_block_keep_t *keep = ah_gpt_keep(st, wset, l);
        const ah_block_act_t *a = &st->act[st->slot_act[slot] + (l - c->first)];
        for (int i = 0; i < AH_BLOCK_LINEARS; i++) {
            const ah_block_linear_t *x = &st->ops->linears[i];
            st->k->matmul_bwd(NULL, ah_gpt_block_g(st, l, x->weight), NULL, keep->dy[i],
                              keep->x[i] ? keep->x[i] : a->at[x->input], ah_gpt_block_w(st, l, x->weight),
                              (int)st->N, (int)ah_gpt_block_dim(st, x->in), (int)ah_gpt_block_dim(st, x->out));
        }
        if (st->on_grads && (s = st->on_grads(st->on_grads_ctx, l, err)) != AH_OK) return s;
    }
    st->part_s[AH_GPT_PART_BLOCKS][2] += ah_gpt_part_clock(st) - t0;
    return st->on_grads && ah_gpt_slot_embed(st, slot) ? st->on_grads(st->on_grads_ctx, AH_GPT_GRADS_END, err) : AH_OK;
}
