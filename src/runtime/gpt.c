/* GPT-2 stage shard: parameters, initialisation, forward and backward with Megatron TP. */
#include "runtime/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "core/timing.h"
#include "runtime/emulate.h"

/* One block's tensors kept from forward to backward: GPT-2's table list (spec/arch_gpt2.c
 * block_acts), field for field and in its order, so carve_block fills the fields by position. */
#define N_BLOCK_ACTS 13
struct ah_block_act {
    union {
        struct {
            float *x_in;                /* (N, C) block input */
            float *ln1;                 /* (N, C) */
            float *ln1_mean, *ln1_rstd; /* (N) */
            float *qkv;                 /* (N, 3C/t) */
            float *probs;               /* attention state: (b, H/t, T, T) probabilities on the CPU */
            float *atty;                /* (N, C/t) attention output, before attn.proj */
            float *x_mid;               /* (N, C) residual after attention */
            float *ln2;                 /* (N, C) */
            float *ln2_mean, *ln2_rstd; /* (N) */
            float *fch;                 /* (N, F/t) mlp.fc output, before GELU */
            float *fchg;                /* (N, F/t) after GELU */
        };
        float *at[N_BLOCK_ACTS];
    };
};

/* Block tensors in the table's order inside a block; index + P_PER_BLOCK * local block in
 * st->params. ah_gpt_stage_create checks these positions against the table's names. */
enum {
    P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_PROJ_W, P_PROJ_B,
    P_LN2_W, P_LN2_B, P_FC_W, P_FC_B, P_FCPROJ_W, P_FCPROJ_B, P_PER_BLOCK
};
static const char *const BLOCK_NAMES[P_PER_BLOCK] = {
    "ln_1.weight", "ln_1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
    "ln_2.weight", "ln_2.bias", "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"};

/* Whether GPT-2's table is the one this code was written against: the block's tensors at the
 * positions above and N_BLOCK_ACTS saved activations. */
static bool table_matches(const ah_model_t *m) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    if (a->n_block_acts != N_BLOCK_ACTS || ah_block_tensor_count(m) != P_PER_BLOCK) return false;
    int k = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].layer == AH_LAYER_BLOCK && strcmp(a->tensors[i].name, BLOCK_NAMES[k++]) != 0) return false;
    return true;
}

/* ---- deterministic initialisation: a counter-based normal per (seed, name, element) ---- */

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t name_key(uint64_t seed, const char *name) {
    return splitmix64(ah_fnv1a64_str(name) ^ splitmix64(seed));
}

/* Box-Muller on two uniforms in (0, 1] drawn from the element's counter. */
static float normal_at(uint64_t key, int64_t idx) {
    const uint64_t a = splitmix64(key + 2 * (uint64_t)idx), b = splitmix64(key + 2 * (uint64_t)idx + 1);
    const double u1 = ((double)(a >> 11) + 1.0) / 9007199254740992.0;
    const double u2 = (double)(b >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

ah_status_t ah_gpt_init_params(ah_gpt_stage_t *st, uint64_t seed, ah_error_t *err) {
    float *host;
    ah_status_t s = ah_gpt_host_view(st, st->w, false, &host, err);
    if (s != AH_OK) return s;
    for (int i = 0; i < st->n_params; i++) {
        const ah_gpt_param_t *p = &st->params[i];
        float *w = host + p->offset;
        float fill;
        const float std = ah_tensor_init_std(&p->def, st->cfg.model, &fill);
        if (std == 0) {
            for (int64_t e = 0; e < p->n; e++) w[e] = fill;
            continue;
        }
        const uint64_t key = name_key(seed, p->def.name);
        for (int64_t e = 0; e < p->n; e++) {
            const int64_t f = ah_tensor_full_index(&p->def, st->cfg.t, st->cfg.tp_rank, e);
            w[e] = f >= 0 ? std * normal_at(key, f) : 0.0f; /* vocabulary padding stays zero */
        }
    }
    s = ah_gpt_host_done(st, st->w, host, true, err);
    st->k->zero(st->m, (size_t)st->n_elems);
    st->k->zero(st->v, (size_t)st->n_elems);
    st->k->zero(st->g, (size_t)st->n_elems);
    return s;
}

/* ---- construction ---- */

/* Floats of the attention state the backend keeps for the backward (the CPU's probabilities are
 * b * H/t * T * T, what ah_layer_act_bytes counts). */
static int64_t att_state_floats(const ah_gpt_stage_t *st) {
    return (int64_t)st->k->attention_state_floats((int)st->cfg.micro_batch, (int)st->cfg.seq_len,
                                                  (int)st->Hl, (int)st->hd);
}

/* Floats of one of the table's block activations (ah_layer_act_bytes / 4 for fp32 on the CPU). */
static int64_t act_floats(const ah_gpt_stage_t *st, const ah_act_spec_t *a) {
    switch (a->kind) {
    case AH_ACT_TENSOR: return st->N * ah_dim_value(st->cfg.model, a->width) / (a->split ? st->cfg.t : 1);
    case AH_ACT_STAT: return st->N;
    case AH_ACT_ATTN: return att_state_floats(st);
    }
    return 0;
}

/* Floats of one block's activation set (no recompute). */
static int64_t block_act_floats(const ah_gpt_stage_t *st) {
    const ah_arch_spec_t *arch = ah_arch_spec(st->cfg.model->arch);
    int64_t n = 0;
    for (int i = 0; i < arch->n_block_acts; i++) n += act_floats(st, &arch->block_acts[i]);
    return n;
}

/* Carves one block's activation set out of base (block_act_floats floats), in the table's order. */
static void carve_block(const ah_gpt_stage_t *st, float *base, ah_block_act_t *a) {
    const ah_arch_spec_t *arch = ah_arch_spec(st->cfg.model->arch);
    float *p = base;
    for (int i = 0; i < arch->n_block_acts; i++) {
        a->at[i] = p;
        p += act_floats(st, &arch->block_acts[i]);
    }
}

/* Workspace layout (floats): dres (N, C) | tmp (N, C) | datty (N, C/t) | dqkv (N, 3C/t) |
 * dfch (N, F/t) | dfchg (N, F/t) | attention scratch. The targets (N int32) of the head's
 * forward share datty's place: the forward uses only tmp. */
typedef struct {
    float *dres, *tmp, *datty, *dqkv, *dfch, *dfchg, *scratch;
} work_t;

static int64_t carve_work(const ah_gpt_stage_t *st, work_t *w) {
    const int64_t N = st->N;
    float *p = st->work;
    w->dres = p, p += N * st->C;
    w->tmp = p, p += N * st->C;
    w->datty = p, p += N * st->Cl;
    w->dqkv = p, p += 3 * N * st->Cl;
    w->dfch = p, p += N * st->Fl;
    w->dfchg = p, p += N * st->Fl;
    w->scratch = p;
    p += st->k->attention_scratch_floats((int)st->cfg.micro_batch, (int)st->cfg.seq_len,
                                         (int)st->Hl, (int)st->hd);
    return p - st->work;
}

/* What the GPT-2 stage code can build: refuses the rest, naming the model or the setting. */
static ah_status_t check_config(const ah_gpt_config_t *cfg, ah_error_t *err) {
    const ah_model_t *m = cfg->model;
    if (m->arch != AH_ARCH_GPT2)
        return ah_error_set(err, AH_ERR_INVALID, "model %s: architecture %s; the trainer runs the "
                            "GPT-2 architecture only (use a gpt2 preset or a GPT-2 config.json)",
                            m->name, ah_arch_name(m->arch));
    if (!m->tied)
        return ah_error_set(err, AH_ERR_INVALID, "model %s: tie_word_embeddings is false; the trainer "
                            "runs GPT-2 with its LM head tied to the token embedding only", m->name);
    if (!table_matches(m))
        return ah_error_set(err, AH_ERR_INTERNAL, "GPT-2's architecture table (spec/arch_gpt2.c) does "
                            "not list the block tensors and activations runtime/gpt.c reads");
    if (cfg->last <= cfg->first)
        return ah_error_set(err, AH_ERR_INVALID, "a stage must hold at least one block, got "
                            "[%d, %d)", cfg->first, cfg->last);
    if (cfg->seq_len > m->max_pos)
        return ah_error_set(err, AH_ERR_INVALID, "train.seq_len %lld exceeds the model's %lld "
                            "positions; use a shorter sequence", (long long)cfg->seq_len,
                            (long long)m->max_pos);
    return AH_OK;
}

/* st->params: the stage's tensors in the table's order (embedding, its blocks, the head), then
 * the head's own copy of the tied matrix when the embedding lives on another stage; their places
 * in the flat buffers; st->n_elems. */
static ah_status_t build_params(ah_gpt_stage_t *st, ah_error_t *err) {
    const ah_gpt_config_t *cfg = &st->cfg;
    const ah_model_t *m = cfg->model;
    const int n_all = ah_model_tensor_count(m);
    ah_tensor_t *all = malloc((size_t)n_all * sizeof *all);
    st->params = malloc((size_t)(n_all + 1) * sizeof *st->params);
    if (!all || !st->params) {
        free(all);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the parameter list");
    }
    ah_model_tensors(m, all);
    int64_t off = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_all; i++) {
            const ah_tensor_t *x = &all[i];
            const ah_layer_kind_t kind = x->spec->layer;
            const bool held = pass == 0 ? (kind == AH_LAYER_EMBED && cfg->has_embed) ||
                                              (kind == AH_LAYER_BLOCK && x->block >= cfg->first && x->block < cfg->last) ||
                                              (kind == AH_LAYER_HEAD && cfg->has_head)
                                        : cfg->has_head && !cfg->has_embed && ah_tensor_tied(x, m);
            if (!held) continue;
            if (pass == 0 && kind == AH_LAYER_EMBED) st->first_block_param = st->n_params + 1;
            ah_gpt_param_t *p = &st->params[st->n_params++];
            p->def = *x;
            p->offset = off;
            p->n = ah_tensor_shard_elems(x, cfg->t);
            off += p->n;
        }
    free(all);
    st->n_elems = off;
    return AH_OK;
}

#define TRY(call)                                   \
    do {                                            \
        ah_status_t s_ = (call);                    \
        if (s_ != AH_OK) return s_;                 \
    } while (0)

/* The activation slots: per in-flight micro-batch, each block's saved tensors (its input only
 * when recomputing), the token ids on stage 0, the head's tensors and logits on the last stage. */
static ah_status_t alloc_slots(ah_gpt_stage_t *st, ah_error_t *err) {
    const ah_gpt_config_t *cfg = &st->cfg;
    const int64_t nb = cfg->last - cfg->first, S = cfg->slots, N = st->N, C = st->C;
    const int64_t act = block_act_floats(st);
    st->act = calloc((size_t)(S * nb), sizeof *st->act);
    st->ids = calloc((size_t)S, sizeof *st->ids);
    st->head_in = calloc((size_t)S, sizeof *st->head_in);
    st->head_out = calloc((size_t)S, sizeof *st->head_out);
    st->head_mean = calloc((size_t)S, sizeof *st->head_mean);
    st->head_rstd = calloc((size_t)S, sizeof *st->head_rstd);
    st->logits = calloc((size_t)S, sizeof *st->logits);
    if (!st->act || !st->ids || !st->head_in || !st->head_out || !st->head_mean || !st->head_rstd || !st->logits)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for activation slots");
    char name[96];
    for (int64_t sl = 0; sl < S; sl++) {
        for (int64_t b = 0; b < nb; b++) {
            ah_block_act_t *a = &st->act[sl * nb + b];
            snprintf(name, sizeof name, "activations of block %lld, micro-batch slot %lld",
                     (long long)(cfg->first + b), (long long)sl);
            if (cfg->recompute) { /* only the input; the rest is redone in the backward */
                TRY(ah_arena_floats(&st->a_act, N * C, name, &a->x_in, err));
            } else {
                float *base;
                TRY(ah_arena_floats(&st->a_act, act, name, &base, err));
                carve_block(st, base, a);
            }
        }
        if (cfg->has_embed) {
            void *p;
            snprintf(name, sizeof name, "token ids, micro-batch slot %lld", (long long)sl);
            TRY(ah_arena_alloc(&st->a_act, N * (int64_t)sizeof(int32_t), name, &p, err));
            st->ids[sl] = p;
        }
        if (cfg->has_head) {
            snprintf(name, sizeof name, "head activations, micro-batch slot %lld", (long long)sl);
            TRY(ah_arena_floats(&st->a_act, 2 * N * C, name, &st->head_in[sl], err));
            st->head_out[sl] = st->head_in[sl] + N * C;
            TRY(ah_arena_floats(&st->a_act, 2 * N, "final LayerNorm statistics", &st->head_mean[sl], err));
            st->head_rstd[sl] = st->head_mean[sl] + N;
            snprintf(name, sizeof name, "logits (%lld x %lld), micro-batch slot %lld", (long long)N,
                     (long long)st->V, (long long)sl);
            TRY(ah_arena_floats(&st->a_act, N * st->V, name, &st->logits[sl], err));
        }
    }
    return AH_OK;
}

/* The workspace (one block's activation set of scratch) and, when recomputing, the buffer the
 * backward redoes each block's forward into. */
static ah_status_t alloc_work(ah_gpt_stage_t *st, ah_error_t *err) {
    const int64_t act = block_act_floats(st);
    st->work_floats = act;
    TRY(ah_arena_floats(&st->a_work, act, "backward workspace", &st->work, err));
    work_t w;
    if (carve_work(st, &w) > act)
        return ah_error_set(err, AH_ERR_INTERNAL, "the backward's temporaries (%lld floats) exceed "
                            "the workspace of one block's activations (%lld floats)",
                            (long long)carve_work(st, &w), (long long)act);
    if (!st->cfg.recompute) return AH_OK;
    float *base;
    if (!(st->recomp = calloc(1, sizeof *st->recomp)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the recompute views");
    TRY(ah_arena_floats(&st->a_work, act, "recompute buffer", &base, err));
    carve_block(st, base, st->recomp);
    return AH_OK;
}

static ah_status_t stage_build(ah_gpt_stage_t *st, ah_mem_t *mem, ah_error_t *err) {
    const ah_model_t *m = st->cfg.model;
    const int t = st->cfg.t;
    st->N = st->cfg.micro_batch * st->cfg.seq_len;
    st->C = m->d_model;
    st->Cl = m->d_model / t;
    st->Fl = m->d_ff / t;
    st->Hl = m->n_head / t;
    st->hd = m->d_model / m->n_head;
    st->V = m->vocab;
    ah_arena_init(&st->a_params, mem, "parameters");
    ah_arena_init(&st->a_opt, mem, "optimizer");
    ah_arena_init(&st->a_act, mem, "activations");
    ah_arena_init(&st->a_work, mem, "workspace");
    TRY(build_params(st, err));
    TRY(ah_arena_floats(&st->a_params, st->n_elems, "weights", &st->w, err));
    TRY(ah_arena_floats(&st->a_params, st->n_elems, "gradients", &st->g, err));
    TRY(ah_arena_floats(&st->a_opt, st->n_elems, "AdamW m", &st->m, err));
    TRY(ah_arena_floats(&st->a_opt, st->n_elems, "AdamW v", &st->v, err));
    TRY(alloc_slots(st, err));
    return alloc_work(st, err);
}
#undef TRY

ah_status_t ah_gpt_stage_create(ah_gpt_stage_t *st, const ah_gpt_config_t *cfg,
                                const ah_kernels_t *k, ah_group_t *tp, ah_mem_t *mem, ah_error_t *err) {
    memset(st, 0, sizeof *st);
    st->cfg = *cfg;
    st->k = k;
    st->tp = tp;
    ah_status_t s = check_config(cfg, err);
    if (s == AH_OK) s = stage_build(st, mem, err);
    if (s != AH_OK) ah_gpt_stage_free(st);
    return s;
}

void ah_gpt_stage_free(ah_gpt_stage_t *st) {
    if (st->a_params.mem) {
        ah_arena_free(&st->a_params);
        ah_arena_free(&st->a_opt);
        ah_arena_free(&st->a_act);
        ah_arena_free(&st->a_work);
    }
    free(st->params);
    free(st->act);
    free(st->ids);
    free(st->head_in);
    free(st->head_out);
    free(st->head_mean);
    free(st->head_rstd);
    free(st->logits);
    free(st->recomp);
    memset(st, 0, sizeof *st);
}

void ah_gpt_zero_grads(ah_gpt_stage_t *st) { st->k->zero(st->g, (size_t)st->n_elems); }

void ah_gpt_adamw(ah_gpt_stage_t *st, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t) {
    for (int i = 0; i < st->n_params; i++) {
        const ah_gpt_param_t *x = &st->params[i];
        ah_adamw_hparams_t h = *hp;
        if (!x->def.spec->decay) h.weight_decay = 0.0f;
        st->k->adamw(st->w + x->offset, st->g + x->offset, st->m + x->offset, st->v + x->offset,
                     (size_t)x->n, &h, grad_scale, t);
    }
}

ah_status_t ah_gpt_host_view(const ah_gpt_stage_t *st, float *buf, bool read, float **host, ah_error_t *err) {
    return ah_mem_host_view(st->a_params.mem, buf, (size_t)st->n_elems * sizeof(float), read,
                            (void **)host, err);
}

ah_status_t ah_gpt_host_done(const ah_gpt_stage_t *st, float *buf, float *host, bool write_back,
                             ah_error_t *err) {
    ah_status_t s = write_back ? ah_mem_upload(st->a_params.mem, buf, host,
                                               (size_t)st->n_elems * sizeof(float), err)
                               : AH_OK;
    ah_mem_host_done(buf, host);
    return s;
}

const ah_gpt_param_t *ah_gpt_find(const ah_gpt_stage_t *st, const char *name) {
    for (int i = 0; i < st->n_params; i++)
        if (strcmp(st->params[i].def.name, name) == 0) return &st->params[i];
    return NULL;
}

/* Index in st->params of block l's first tensor. */
static int block_base(const ah_gpt_stage_t *st, int l) {
    return st->first_block_param + P_PER_BLOCK * (l - st->cfg.first);
}

void ah_gpt_block_range(const ah_gpt_stage_t *st, int first, int last, int64_t *offset, int64_t *n) {
    const ah_gpt_param_t *a = &st->params[block_base(st, first)];
    const ah_gpt_param_t *b = &st->params[block_base(st, last) - 1];
    *offset = a->offset;
    *n = b->offset + b->n - a->offset;
}

int32_t *ah_gpt_ids(ah_gpt_stage_t *st, int64_t slot) { return st->ids[slot]; }

float *ah_gpt_input(ah_gpt_stage_t *st, int64_t slot) {
    return st->act[slot * (st->cfg.last - st->cfg.first)].x_in;
}

int32_t *ah_gpt_targets(ah_gpt_stage_t *st) {
    work_t w;
    carve_work(st, &w);
    return (int32_t *)w.datty;
}

/* ---- forward / backward ---- */

static float *W(const ah_gpt_stage_t *st, int l, int which) {
    return st->w + st->params[block_base(st, l) + which].offset;
}
static float *G(const ah_gpt_stage_t *st, int l, int which) {
    return st->g + st->params[block_base(st, l) + which].offset;
}
static const float *named(const ah_gpt_stage_t *st, const float *base, const char *name) {
    return base + ah_gpt_find(st, name)->offset;
}

/* The clock the parts are timed by: wall seconds, less the seconds device emulation slept inside
 * a phase (before a TP all-reduce), so each part counts what the host spent on it, emulated or
 * not, and the profiler can share an emulated phase's seconds among the parts by those. */
static double part_clock(const ah_gpt_stage_t *st) { return ah_now_s() - (st->emu ? st->emu->slept : 0); }

/* Adds the seconds since *t to part_s[part][pass] and restarts *t. */
static void charge(ah_gpt_stage_t *st, ah_gpt_part_t part, int pass, double *t) {
    const double now = part_clock(st);
    st->part_s[part][pass] += now - *t;
    *t = now;
}

int ah_gpt_phase_segments(const ah_gpt_stage_t *st) {
    if (!st->tp) return 1;
    /* tp_sum's callers: a block forward twice, a block backward twice, and a recomputing
     * backward's forward once more (it stops before the MLP's output projection). */
    const int per_block = st->cfg.recompute ? 3 : 2;
    return per_block * (st->cfg.last - st->cfg.first) + 1;
}

/* A TP all-reduce, which ends a segment of the emulated phase (runtime/emulate.h). */
static ah_status_t tp_sum(ah_gpt_stage_t *st, float *x, ah_error_t *err) {
    if (!st->tp) return AH_OK;
    if (st->emu) ah_emulator_split(st->emu);
    return ah_group_sum(st->tp, x, (size_t)(st->N * st->C), err);
}

/* One block forward from a->x_in; out (N, C) gets the block output, or NULL to stop after the
 * MLP's GELU (all a recomputing backward needs). tmp is (N, C) scratch. */
static ah_status_t block_fwd(ah_gpt_stage_t *st, int l, ah_block_act_t *a, float *out, float *tmp,
                             ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl;
    const float eps = (float)st->cfg.model->norm_eps;
    const bool bias_here = st->cfg.tp_rank == 0;
    ah_status_t s;
    k->layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, a->x_in, W(st, l, P_LN1_W), W(st, l, P_LN1_B),
                     N, C, eps);
    k->matmul_fwd(a->qkv, a->ln1, W(st, l, P_QKV_W), W(st, l, P_QKV_B), N, C, 3 * Cl);
    k->attention_fwd(a->atty, a->probs, a->qkv, (int)st->cfg.micro_batch, (int)st->cfg.seq_len,
                     (int)st->Hl, (int)st->Hl, (int)st->hd);
    k->matmul_fwd(tmp, a->atty, W(st, l, P_PROJ_W), bias_here ? W(st, l, P_PROJ_B) : NULL, N, Cl, C);
    if ((s = tp_sum(st, tmp, err)) != AH_OK) return s;
    k->residual_fwd(a->x_mid, a->x_in, tmp, (size_t)N * C);
    k->layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->x_mid, W(st, l, P_LN2_W), W(st, l, P_LN2_B),
                     N, C, eps);
    k->matmul_fwd(a->fch, a->ln2, W(st, l, P_FC_W), W(st, l, P_FC_B), N, C, Fl);
    k->gelu_fwd(a->fchg, a->fch, (size_t)N * Fl);
    if (!out) return AH_OK;
    k->matmul_fwd(tmp, a->fchg, W(st, l, P_FCPROJ_W), bias_here ? W(st, l, P_FCPROJ_B) : NULL, N, Fl, C);
    if ((s = tp_sum(st, tmp, err)) != AH_OK) return s;
    k->residual_fwd(out, a->x_mid, tmp, (size_t)N * C);
    return AH_OK;
}

/* One block backward: w->dres holds the gradient of the block output on entry and that of its
 * input on exit. */
static ah_status_t block_bwd(ah_gpt_stage_t *st, int l, const ah_block_act_t *a, const work_t *w,
                             ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const int N = (int)st->N, C = (int)st->C, Cl = (int)st->Cl, Fl = (int)st->Fl;
    const size_t NC = (size_t)N * C, NF = (size_t)N * Fl;
    ah_status_t s;
    /* MLP branch: out = x_mid + proj(gelu(fc(ln2(x_mid)))) */
    k->zero(w->dfchg, NF);
    k->matmul_bwd(w->dfchg, G(st, l, P_FCPROJ_W), G(st, l, P_FCPROJ_B), w->dres, a->fchg,
                  W(st, l, P_FCPROJ_W), N, Fl, C);
    k->zero(w->dfch, NF);
    k->gelu_bwd(w->dfch, w->dfchg, a->fch, NF);
    k->zero(w->tmp, NC);
    k->matmul_bwd(w->tmp, G(st, l, P_FC_W), G(st, l, P_FC_B), w->dfch, a->ln2, W(st, l, P_FC_W), N,
                  C, Fl);
    if ((s = tp_sum(st, w->tmp, err)) != AH_OK) return s;
    k->layernorm_bwd(w->dres, G(st, l, P_LN2_W), G(st, l, P_LN2_B), w->tmp, a->x_mid,
                     W(st, l, P_LN2_W), a->ln2_mean, a->ln2_rstd, N, C);
    /* attention branch: x_mid = x_in + proj(attn(qkv(ln1(x_in)))) */
    k->zero(w->datty, (size_t)N * Cl);
    k->matmul_bwd(w->datty, G(st, l, P_PROJ_W), G(st, l, P_PROJ_B), w->dres, a->atty,
                  W(st, l, P_PROJ_W), N, Cl, C);
    k->zero(w->dqkv, (size_t)N * 3 * Cl);
    k->attention_bwd(w->dqkv, w->scratch, w->datty, a->qkv, a->atty, a->probs, (int)st->cfg.micro_batch,
                     (int)st->cfg.seq_len, (int)st->Hl, (int)st->Hl, (int)st->hd);
    k->zero(w->tmp, NC);
    k->matmul_bwd(w->tmp, G(st, l, P_QKV_W), G(st, l, P_QKV_B), w->dqkv, a->ln1, W(st, l, P_QKV_W),
                  N, C, 3 * Cl);
    if ((s = tp_sum(st, w->tmp, err)) != AH_OK) return s;
    k->layernorm_bwd(w->dres, G(st, l, P_LN1_W), G(st, l, P_LN1_B), w->tmp, a->x_in,
                     W(st, l, P_LN1_W), a->ln1_mean, a->ln1_rstd, N, C);
    return AH_OK;
}

/* The activation views of block l for slot; for a recomputing stage the recompute buffer with the
 * slot's kept input. */
static ah_block_act_t *block_view(ah_gpt_stage_t *st, int64_t slot, int l) {
    ah_block_act_t *a = &st->act[slot * (st->cfg.last - st->cfg.first) + (l - st->cfg.first)];
    if (!st->cfg.recompute) return a;
    st->recomp->x_in = a->x_in;
    return st->recomp;
}

ah_status_t ah_gpt_forward(ah_gpt_stage_t *st, int64_t slot, float *out, float loss_scale,
                           double *loss_sum, ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const ah_gpt_config_t *c = &st->cfg;
    const int nb = c->last - c->first;
    work_t w;
    carve_work(st, &w);
    ah_status_t s;
    double t = part_clock(st);
    if (c->has_embed) {
        k->embedding_fwd(ah_gpt_input(st, slot), st->ids[slot], named(st, st->w, "wte"),
                         named(st, st->w, "wpe"), (int)c->micro_batch, (int)c->seq_len, (int)st->C,
                         0, (int)st->V);
        charge(st, AH_GPT_PART_EMBED, 0, &t);
    }
    for (int l = c->first; l < c->last; l++) {
        float *dst = l + 1 < c->last ? st->act[slot * nb + (l + 1 - c->first)].x_in
                     : c->has_head   ? st->head_in[slot]
                                     : out;
        if ((s = block_fwd(st, l, block_view(st, slot, l), dst, w.tmp, err)) != AH_OK) return s;
    }
    charge(st, AH_GPT_PART_BLOCKS, 0, &t);
    if (!c->has_head) return AH_OK;
    const int N = (int)st->N, C = (int)st->C;
    k->layernorm_fwd(st->head_out[slot], st->head_mean[slot], st->head_rstd[slot], st->head_in[slot],
                     named(st, st->w, "ln_f.weight"), named(st, st->w, "ln_f.bias"), N, C,
                     (float)c->model->norm_eps);
    /* Head: the logits, the loss, dlogits (kept in the slot for the backward) and dwte. The row
     * statistics (rowmax (N), stats (2N)) take tmp, free once the blocks are done. */
    const int V = (int)st->V;
    const float *wte = named(st, st->w, "wte");
    float *rowmax = w.tmp, *stats = w.tmp + N;
    k->matmul_fwd(st->logits[slot], st->head_out[slot], wte, NULL, N, C, V);
    k->xent_max(rowmax, st->logits[slot], N, V, V);
    k->xent_stats(stats, st->logits[slot], rowmax, ah_gpt_targets(st), N, V, V, 0);
    *loss_sum = k->xent_grad(st->logits[slot], rowmax, stats, ah_gpt_targets(st), loss_scale, N, V,
                             V, 0);
    k->matmul_bwd(NULL, st->g + ah_gpt_find(st, "wte")->offset, NULL, st->logits[slot],
                  st->head_out[slot], wte, N, C, V);
    charge(st, AH_GPT_PART_HEAD, 0, &t);
    return AH_OK;
}

ah_status_t ah_gpt_backward(ah_gpt_stage_t *st, int64_t slot, const float *dout, float *dinp,
                            ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const ah_gpt_config_t *c = &st->cfg;
    const int N = (int)st->N, C = (int)st->C;
    const size_t NC = (size_t)N * C;
    work_t w;
    carve_work(st, &w);
    ah_status_t s;
    double t = part_clock(st);
    k->zero(w.dres, NC);
    if (c->has_head) {
        k->zero(w.tmp, NC);
        k->matmul_bwd(w.tmp, NULL, NULL, st->logits[slot], st->head_out[slot],
                      named(st, st->w, "wte"), N, C, (int)st->V);
        k->layernorm_bwd(w.dres, st->g + ah_gpt_find(st, "ln_f.weight")->offset,
                         st->g + ah_gpt_find(st, "ln_f.bias")->offset, w.tmp, st->head_in[slot],
                         named(st, st->w, "ln_f.weight"), st->head_mean[slot], st->head_rstd[slot],
                         N, C);
    } else {
        k->residual_bwd(w.dres, NULL, dout, NC); /* dres = dout */
    }
    charge(st, c->has_head ? AH_GPT_PART_HEAD : AH_GPT_PART_BLOCKS, 1, &t);
    for (int l = c->last - 1; l >= c->first; l--) {
        ah_block_act_t *a = block_view(st, slot, l);
        if (c->recompute && (s = block_fwd(st, l, a, NULL, w.tmp, err)) != AH_OK) return s;
        if ((s = block_bwd(st, l, a, &w, err)) != AH_OK) return s;
    }
    charge(st, AH_GPT_PART_BLOCKS, 1, &t);
    if (c->has_embed) {
        k->embedding_bwd(st->g + ah_gpt_find(st, "wte")->offset,
                         st->g + ah_gpt_find(st, "wpe")->offset, w.dres, st->ids[slot],
                         (int)c->micro_batch, (int)c->seq_len, C, 0, (int)st->V);
    } else {
        k->zero(dinp, NC);
        k->residual_bwd(dinp, NULL, w.dres, NC); /* dinp = dres */
    }
    charge(st, c->has_embed ? AH_GPT_PART_EMBED : AH_GPT_PART_BLOCKS, 1, &t);
    return AH_OK;
}
