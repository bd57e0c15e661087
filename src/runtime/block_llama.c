/* LLaMA's block (runtime/gpt_block.h): pre-RMSNorm grouped-query attention with rotary positions
 * (Hugging Face's rotate-half layout, rope_theta from the config) and a SwiGLU MLP, no biases.
 * Megatron TP: q, k, v and gate, up column-parallel (a rank holds H/t query heads and KV/t
 * key/value heads: t divides KV, ah_model_check_tp), o and down row-parallel. */
#include "runtime/gpt_block.h"

/* The block's tensors, in LLaMA's table order (spec/arch_llama.c); q, k, v adjacent, and gate, up. */
enum { P_RMS1, P_Q, P_K, P_V, P_O, P_RMS2, P_GATE, P_UP, P_DOWN, P_PER_BLOCK };
static const char *const TENSORS[P_PER_BLOCK] = {
    "rms_1.weight", "attn.q.weight", "attn.k.weight", "attn.v.weight", "attn.o.weight",
    "rms_2.weight", "mlp.gate.weight", "mlp.up.weight", "mlp.down.weight"};
static const char *const ACTS[] = {"x_in", "rms1", "rms1_rstd", "qkv", "attn_state", "atty",
                                   "x_mid", "rms2", "rms2_rstd", "gu", "act"};

ah_rope_t ah_llama_rope(const ah_model_t *m) {
    const ah_rope_scaling_t *r = &m->rope_scaling;
    return (ah_rope_t){(float)m->rope_theta, (float)r->factor, (float)r->low_freq_factor, (float)r->high_freq_factor,
                       (float)r->original_max_pos};
}

/* The q and k heads of qkv (N rows) turned by their positions (backward: the gradient, back):
 * rows at t, or at the rank's positions under context parallelism. */
static void rope(ah_gpt_stage_t *st, float *qkv, bool backward) {
    const int B = (int)st->cfg.micro_batch, T = (int)st->cfg.seq_len, heads = (int)(st->Hl + st->KVl),
              hd = (int)st->hd, QKVl = (int)st->QKVl;
    const ah_rope_t r = ah_llama_rope(st->cfg.model);
    (backward ? st->k->rope_bwd_at : st->k->rope_fwd_at)(qkv, ah_gpt_cp_at(st), B, T, heads, hd, QKVl, r);
}

#define W(which) ah_gpt_block_w(st, l, which)
#define G(which) ah_gpt_block_g(st, l, which)

static ah_status_t fwd(ah_gpt_stage_t *st, int l, ah_block_act_t *act, float *out, const ah_block_work_t *w,
                       ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    float *tmp = w->tmp;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl, QKVl = (int)st->QKVl;
    const float eps = (float)st->cfg.model->norm_eps;
    ah_block_act_llama_t *a = &act->l;
    ah_status_t s;
    k->rmsnorm_fwd(a->rms1, a->rms1_rstd, a->x_in, W(P_RMS1), N, C, eps);
    k->matmul_fwd(a->qkv, a->rms1, W(P_Q), NULL, N, C, QKVl); /* q, k, v: one (QKVl, C) matrix */
    rope(st, a->qkv, false); /* the q and k heads */
    if ((s = ah_gpt_attention_fwd(st, a->atty, a->probs, w->scratch, a->qkv, err)) != AH_OK) return s;
    if ((s = ah_gpt_row_residual(st, a->x_mid, a->x_in, a->atty, W(P_O), NULL, Cl, tmp, err)) != AH_OK) return s;
    k->rmsnorm_fwd(a->rms2, a->rms2_rstd, a->x_mid, W(P_RMS2), N, C, eps);
    k->matmul_fwd(a->gu, a->rms2, W(P_GATE), NULL, N, C, 2 * Fl); /* gate, up: one (2 Fl, C) matrix */
    k->swiglu_fwd(a->act, a->gu, N, Fl);
    if (!out) return AH_OK;
    return ah_gpt_row_residual(st, out, a->x_mid, a->act, W(P_DOWN), NULL, Fl, tmp, err);
}

/* The linear layers in ah_gpt_linear_bwd's numbering (the `linears` table below). */
enum { L_QKV, L_O, L_GATE_UP, L_DOWN };

static ah_status_t bwd(ah_gpt_stage_t *st, int l, const ah_block_act_t *act, const ah_block_work_t *w,
                       const ah_block_keep_t *keep, ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl, QKVl = (int)st->QKVl;
    const size_t NC = (size_t)N * C, NF = (size_t)N * Fl;
    const ah_block_act_llama_t *a = &act->l;
    ah_status_t s;
    /* MLP branch: out = x_mid + down(silu(gate(rms2(x_mid))) * up(rms2(x_mid))) */
    k->zero(w->dmlp_act, NF);
    ah_gpt_linear_bwd(st, l, L_DOWN, keep, w->dmlp_act, w->dres, a->act);
    k->swiglu_bwd(w->dmlp_in, w->dmlp_act, a->gu, N, Fl);
    k->zero(w->tmp, NC);
    ah_gpt_linear_bwd(st, l, L_GATE_UP, keep, w->tmp, w->dmlp_in, a->rms2);
    if ((s = ah_gpt_tp_sum(st, w->tmp, NC, err)) != AH_OK) return s;
    k->rmsnorm_bwd(w->dres, G(P_RMS2), w->tmp, a->x_mid, W(P_RMS2), a->rms2_rstd, N, C);
    /* attention branch: x_mid = x_in + o(attn(rope(qkv(rms1(x_in))))) */
    k->zero(w->datty, (size_t)N * Cl);
    ah_gpt_linear_bwd(st, l, L_O, keep, w->datty, w->dres, a->atty);
    k->zero(w->dqkv, (size_t)N * QKVl);
    if ((s = ah_gpt_attention_bwd(st, w->dqkv, w->scratch, w->datty, a->qkv, a->atty, a->probs, err)) != AH_OK)
        return s;
    rope(st, w->dqkv, true);
    k->zero(w->tmp, NC);
    ah_gpt_linear_bwd(st, l, L_QKV, keep, w->tmp, w->dqkv, a->rms1);
    if ((s = ah_gpt_tp_sum(st, w->tmp, NC, err)) != AH_OK) return s;
    k->rmsnorm_bwd(w->dres, G(P_RMS1), w->tmp, a->x_in, W(P_RMS1), a->rms1_rstd, N, C);
    return AH_OK;
}

/* model.norm; stats are the rstd (N). */
static void head_norm_fwd(ah_gpt_stage_t *st, float *out, float *stats, const float *inp) {
    st->k->rmsnorm_fwd(out, stats, inp, ah_gpt_named_w(st, "norm.weight"), (int)st->N, (int)st->C,
                       (float)st->cfg.model->norm_eps);
}

static void head_norm_bwd(ah_gpt_stage_t *st, float *dinp, const float *dout, const float *inp,
                          const float *stats) {
    st->k->rmsnorm_bwd(dinp, ah_gpt_named_g(st, "norm.weight"), dout, inp, ah_gpt_named_w(st, "norm.weight"),
                       stats, (int)st->N, (int)st->C);
}

/* The saved activations that are the linear layers' inputs (positions in ACTS). */
enum { A_RMS1 = 1, A_QKV = 3, A_ATTY = 5, A_RMS2 = 7, A_GU = 9, A_ACT = 10 };

const ah_block_ops_t ah_block_llama = {
    TENSORS, P_PER_BLOCK, ACTS, (int)(sizeof ACTS / sizeof ACTS[0]), 2, fwd, bwd,
    {[L_QKV] = {P_Q, -1, A_RMS1, AH_BD_C, AH_BD_QKVL, A_QKV}, /* q, k, v: one (QKVl, C) matrix */
     [L_O] = {P_O, -1, A_ATTY, AH_BD_CL, AH_BD_C, -1},
     [L_GATE_UP] = {P_GATE, -1, A_RMS2, AH_BD_C, AH_BD_MLP_IN, A_GU}, /* gate, up: one (2 Fl, C) matrix */
     [L_DOWN] = {P_DOWN, -1, A_ACT, AH_BD_FL, AH_BD_C, -1}},
    head_norm_fwd, head_norm_bwd};
