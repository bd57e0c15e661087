/* GPT-2's block (runtime/gpt_block.h): pre-LayerNorm attention and GELU MLP, biases on every
 * linear layer; Megatron TP, the row-parallel layers' replicated bias added on TP rank 0 only,
 * before the sum (which equals adding it after). */
#include "runtime/gpt_block.h"

/* The block's tensors, in GPT-2's table order (spec/arch_gpt2.c). */
enum { P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B,
       P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_FCPROJ_W, P_FCPROJ_B, P_PER_BLOCK };
static const char *const TENSORS[P_PER_BLOCK] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"};
static const char *const ACTS[] = {"x_in", "ln1", "ln1_mean", "ln1_rstd", "qkv", "attn_state", "atty",
                                   "x_mid", "ln2", "ln2_mean", "ln2_rstd", "fch", "fchg"};

#define W(which) ah_gpt_block_w(st, l, which)
#define G(which) ah_gpt_block_g(st, l, which)

static ah_status_t fwd(ah_gpt_stage_t *st, int l, ah_block_act_t *act, float *out, const ah_block_work_t *w,
                       ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    float *tmp = w->tmp;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl;
    const float eps = (float)st->cfg.model->norm_eps;
    const bool bias_here = st->cfg.tp_rank == 0;
    ah_block_act_gpt2_t *a = &act->g;
    ah_status_t s;
    k->layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, W(P_LN1_W), W(P_LN1_B), N, C, eps);
    k->matmul_fwd(a->qkv, a->ln1, W(P_QKV_W), W(P_QKV_B), N, C, 3 * Cl);
    if ((s = ah_gpt_attention_fwd(st, a->atty, a->probs, w->scratch, a->qkv, err)) != AH_OK) return s;
    s = ah_gpt_row_residual(st, a->x_mid, a->x_in, a->atty, W(P_PROJ_W), bias_here ? W(P_PROJ_B) : NULL, Cl, tmp, err);
    if (s != AH_OK) return s;
    k->layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->x_mid, W(P_LN2_W), W(P_LN2_B), N, C, eps);
    k->matmul_fwd(a->fch, a->ln2, W(P_FC_W), W(P_FC_B), N, C, Fl);
    k->gelu_fwd(a->fchg, a->fch, (size_t)N * Fl);
    if (!out) return AH_OK;
    return ah_gpt_row_residual(st, out, a->x_mid, a->fchg, W(P_FCPROJ_W), bias_here ? W(P_FCPROJ_B) : NULL, Fl, tmp, err);
}

/* The linear layers in ah_gpt_linear_bwd's numbering (the `linears` table below). */
enum { L_QKV, L_PROJ, L_FC, L_FCPROJ };

static ah_status_t bwd(ah_gpt_stage_t *st, int l, const ah_block_act_t *act, const ah_block_work_t *w,
                       const ah_block_keep_t *keep, ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl;
    const size_t NC = (size_t)N * C, NF = (size_t)N * Fl;
    const ah_block_act_gpt2_t *a = &act->g;
    ah_status_t s;
    /* MLP branch: out = x_mid + proj(gelu(fc(ln2(x_mid)))) */
    k->zero(w->dmlp_act, NF);
    ah_gpt_linear_bwd(st, l, L_FCPROJ, keep, w->dmlp_act, w->dres, a->fchg);
    k->gelu_bwd(w->dmlp_in, w->dmlp_act, a->fch, NF);
    k->zero(w->tmp, NC);
    ah_gpt_linear_bwd(st, l, L_FC, keep, w->tmp, w->dmlp_in, a->ln2);
    if ((s = ah_gpt_tp_sum(st, w->tmp, NC, err)) != AH_OK) return s;
    k->layernorm_bwd(w->dres, G(P_LN2_W), G(P_LN2_B), w->tmp, a->x_mid, W(P_LN2_W), a->ln2_mean,
                     a->ln2_rstd, N, C);
    /* attention branch: x_mid = x_in + proj(attn(qkv(ln1(x_in)))) */
    k->zero(w->datty, (size_t)N * Cl);
    ah_gpt_linear_bwd(st, l, L_PROJ, keep, w->datty, w->dres, a->atty);
    k->zero(w->dqkv, (size_t)N * 3 * Cl);
    if ((s = ah_gpt_attention_bwd(st, w->dqkv, w->scratch, w->datty, a->qkv, a->atty, a->probs, err)) != AH_OK)
        return s;
    k->zero(w->tmp, NC);
    ah_gpt_linear_bwd(st, l, L_QKV, keep, w->tmp, w->dqkv, a->ln1);
    if ((s = ah_gpt_tp_sum(st, w->tmp, NC, err)) != AH_OK) return s;
    k->layernorm_bwd(w->dres, G(P_LN1_W), G(P_LN1_B), w->tmp, a->x_in, W(P_LN1_W), a->ln1_mean,
                     a->ln1_rstd, N, C);
    return AH_OK;
}

/* ln_f; stats are the mean (N) then rstd (N). */
static void head_norm_fwd(ah_gpt_stage_t *st, float *out, float *stats, const float *inp) {
    st->k->layernorm_fwd(out, stats, stats + st->N, inp, ah_gpt_named_w(st, "ln_f.weight"),
                         ah_gpt_named_w(st, "ln_f.bias"), (int)st->N, (int)st->C,
                         (float)st->cfg.model->norm_eps);
}

static void head_norm_bwd(ah_gpt_stage_t *st, float *dinp, const float *dout, const float *inp,
                          const float *stats) {
    st->k->layernorm_bwd(dinp, ah_gpt_named_g(st, "ln_f.weight"), ah_gpt_named_g(st, "ln_f.bias"), dout,
                         inp, ah_gpt_named_w(st, "ln_f.weight"), stats, stats + st->N, (int)st->N,
                         (int)st->C);
}

/* The saved activations that are the linear layers' inputs (positions in ACTS). */
enum { A_LN1 = 1, A_QKV = 4, A_ATTY = 6, A_LN2 = 8, A_FCH = 11, A_FCHG = 12 };

const ah_block_ops_t ah_block_gpt2 = {
    TENSORS, P_PER_BLOCK, ACTS, (int)(sizeof ACTS / sizeof ACTS[0]), 1, fwd, bwd,
    {[L_QKV] = {P_QKV_W, P_QKV_B, A_LN1, AH_BD_C, AH_BD_QKVL, A_QKV},
     [L_PROJ] = {P_PROJ_W, P_PROJ_B, A_ATTY, AH_BD_CL, AH_BD_C, -1},
     [L_FC] = {P_FC_W, P_FC_B, A_LN2, AH_BD_C, AH_BD_MLP_IN, A_FCH},
     [L_FCPROJ] = {P_FCPROJ_W, P_FCPROJ_B, A_FCHG, AH_BD_FL, AH_BD_C, -1}},
    head_norm_fwd, head_norm_bwd};
