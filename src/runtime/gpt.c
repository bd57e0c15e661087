/* A model stage shard: parameters, initialisation, the embedding and head, forward and backward
 * with Megatron TP; the blocks' code is the architecture's (runtime/gpt_block.h). */
#include "runtime/gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/hash.h"
#include "core/timing.h"
#include "runtime/emulate.h"
#include "runtime/gpt_block.h"

static const ah_block_ops_t *block_ops(ah_arch_t a) { return a == AH_ARCH_LLAMA ? &ah_block_llama : &ah_block_gpt2; }

/* Whether the architecture's table is the one its block code was written against: the block's
 * tensors and saved activations at the positions the code names. */
static bool table_matches(const ah_model_t *m) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    const ah_block_ops_t *ops = block_ops(m->arch);
    if (a->n_block_acts != ops->n_acts || a->n_block_acts > AH_MAX_BLOCK_ACTS ||
        ah_block_tensor_count(m) != ops->n_tensors)
        return false;
    for (int i = 0; i < a->n_block_acts; i++)
        if (strcmp(a->block_acts[i].name, ops->acts[i]) != 0) return false;
    int k = 0;
    for (int i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].layer == AH_LAYER_BLOCK && strcmp(a->tensors[i].name, ops->tensors[k++]) != 0) return false;
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
    st->k->zero(st->m, (size_t)st->opt_elems);
    st->k->zero(st->v, (size_t)st->opt_elems);
    st->k->zero(st->g, (size_t)st->n_elems);
    return s;
}

/* ---- construction ---- */

/* Floats of the attention state the backend keeps for the backward (the CPU's probabilities are
 * b * H/t * T * T, what ah_layer_act_bytes counts; ring attention's logsumexp b * H/t * T/cp). */
static int64_t att_state_floats(const ah_gpt_stage_t *st) {
    if (st->cfg.cp_ring) return st->cfg.micro_batch * st->Hl * st->cfg.seq_len;
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

/* The workspace's temporaries (runtime/gpt_block.h's layout); the targets (N int32) of the head's
 * forward share datty's place and its softmax statistics (3N floats) dres's: the blocks' forward
 * uses only tmp and the attention scratch. Returns the floats used. */
static int64_t carve_work(const ah_gpt_stage_t *st, ah_block_work_t *w) {
    const int64_t N = st->N;
    float *p = st->work;
    w->dres = p, p += N * st->C;
    w->tmp = p, p += N * st->C;
    w->datty = p, p += N * st->Cl;
    w->dqkv = p, p += N * st->QKVl;
    w->dmlp_in = p, p += N * st->Fl * st->ops->mlp_in_mult;
    w->dmlp_act = p, p += N * st->Fl;
    w->scratch = p;
    if (!st->cfg.cp_ring) /* ring attention has its own (runtime/cp_ring.h) */
        p += st->k->attention_scratch_floats((int)st->cfg.micro_batch, (int)st->cfg.seq_len,
                                             (int)st->Hl, (int)st->KVl, (int)st->hd);
    return p - st->work;
}

/* What the stage code can build: refuses the rest, naming the setting. */
static ah_status_t check_config(const ah_gpt_config_t *cfg, ah_error_t *err) {
    const ah_model_t *m = cfg->model;
    if (!table_matches(m))
        return ah_error_set(err, AH_ERR_INTERNAL, "%s's architecture table (spec/arch_%s.c) does not "
                            "list the block tensors and activations runtime/block_%s.c reads",
                            ah_arch_name(m->arch), ah_arch_name(m->arch), ah_arch_name(m->arch));
    if (cfg->n_chunks < 1 || cfg->n_chunks > AH_GPT_MAX_CHUNKS)
        return ah_error_set(err, AH_ERR_INVALID, "a stage holds 1 to %d chunks (virtual stages), got %d",
                            AH_GPT_MAX_CHUNKS, cfg->n_chunks);
    for (int c = 0; c < cfg->n_chunks; c++) {
        const ah_gpt_chunk_t *x = &cfg->chunks[c];
        if (x->last <= x->first || (c > 0 && x->first < cfg->chunks[c - 1].last))
            return ah_error_set(err, AH_ERR_INVALID, "chunk %d of a stage must hold at least one block, after "
                                "the chunk before it; got [%d, %d)", c, x->first, x->last);
        if (x->recompute && !cfg->recompute)
            return ah_error_set(err, AH_ERR_INTERNAL, "chunk %d recomputes but the stage has no recompute buffer", c);
    }
    if (cfg->seq_len > m->max_pos)
        return ah_error_set(err, AH_ERR_INVALID, "train.seq_len %lld exceeds the model's %lld "
                            "positions; use a shorter sequence", (long long)cfg->seq_len,
                            (long long)m->max_pos);
    return AH_OK;
}

/* Blocks of the stage's chunks before block l (l's place among them when it holds l). */
static int blocks_before(const ah_gpt_config_t *cfg, int l) {
    int n = 0;
    for (int c = 0; c < cfg->n_chunks; c++) {
        const ah_gpt_chunk_t *x = &cfg->chunks[c];
        n += l >= x->last ? x->last - x->first : l > x->first ? l - x->first : 0;
    }
    return n;
}

static bool holds_block(const ah_gpt_config_t *cfg, int l) {
    for (int c = 0; c < cfg->n_chunks; c++)
        if (l >= cfg->chunks[c].first && l < cfg->chunks[c].last) return true;
    return false;
}

int ah_gpt_param_list(const ah_gpt_config_t *cfg, ah_gpt_param_t *out, int *first_block_param) {
    const ah_model_t *m = cfg->model;
    const int n_all = ah_model_tensor_count(m);
    ah_tensor_t *all = malloc((size_t)n_all * sizeof *all);
    if (!all) return -1;
    ah_model_tensors(m, all);
    int n = 0;
    int64_t off = 0;
    *first_block_param = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n_all; i++) {
            const ah_tensor_t *x = &all[i];
            const ah_layer_kind_t kind = x->spec->layer;
            const bool held = pass == 0 ? (kind == AH_LAYER_EMBED && cfg->has_embed) ||
                                              (kind == AH_LAYER_BLOCK && holds_block(cfg, x->block)) ||
                                              (kind == AH_LAYER_HEAD && cfg->has_head)
                                        : cfg->has_head && !cfg->has_embed && ah_tensor_tied(x, m);
            if (!held) continue;
            if (pass == 0 && kind == AH_LAYER_EMBED) *first_block_param = n + 1;
            ah_gpt_param_t *p = &out[n++];
            p->def = *x;
            p->offset = off;
            p->n = ah_tensor_shard_elems(x, cfg->t);
            off += p->n;
        }
    free(all);
    return n;
}

/* st->params (ah_gpt_param_list), st->n_elems, and the optimizer's runs: cfg's, or the whole
 * buffer, each with its place in m and v. */
static ah_status_t build_params(ah_gpt_stage_t *st, ah_error_t *err) {
    const ah_gpt_config_t *cfg = &st->cfg;
    st->params = malloc((size_t)(ah_model_tensor_count(cfg->model) + 1) * sizeof *st->params);
    const int n_runs = cfg->opt_runs ? cfg->n_opt_runs : 1;
    st->opt_runs = malloc((size_t)(n_runs + 1) * sizeof *st->opt_runs);
    if (!st->params || !st->opt_runs || (st->n_params = ah_gpt_param_list(cfg, st->params, &st->first_block_param)) < 0)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the parameter list");
    st->n_elems = st->n_params ? st->params[st->n_params - 1].offset + st->params[st->n_params - 1].n : 0;
    st->n_opt_runs = n_runs;
    st->opt_elems = 0;
    for (int i = 0; i < n_runs; i++) {
        st->opt_runs[i] = cfg->opt_runs ? cfg->opt_runs[i] : (ah_gpt_run_t){0, st->n_elems, 0};
        st->opt_runs[i].mv = st->opt_elems;
        st->opt_elems += st->opt_runs[i].n;
    }
    return AH_OK;
}

#define TRY(call)                                   \
    do {                                            \
        ah_status_t s_ = (call);                    \
        if (s_ != AH_OK) return s_;                 \
    } while (0)

/* The slot tables: per slot its chunk and the index in act of its first block (chunk after
 * chunk, each chunk's slots in order). */
static ah_status_t number_slots(ah_gpt_stage_t *st, ah_error_t *err) {
    const ah_gpt_config_t *cfg = &st->cfg;
    st->n_slots = 0;
    for (int c = 0; c < cfg->n_chunks; c++) st->n_slots += cfg->chunks[c].slots;
    st->n_blocks = blocks_before(cfg, cfg->chunks[cfg->n_chunks - 1].last);
    const size_t S = (size_t)st->n_slots;
    st->slot_chunk = calloc(S, sizeof *st->slot_chunk);
    st->slot_act = calloc(S, sizeof *st->slot_act);
    st->ids = calloc(S, sizeof *st->ids);
    st->head_in = calloc(S, sizeof *st->head_in);
    st->head_out = calloc(S, sizeof *st->head_out);
    st->head_stats = calloc(S, sizeof *st->head_stats);
    st->logits = calloc(S, sizeof *st->logits);
    if (!st->slot_chunk || !st->slot_act || !st->ids || !st->head_in || !st->head_out || !st->head_stats || !st->logits)
        return ah_error_set(err, AH_ERR_OOM, "no host memory for activation slots");
    int64_t sl = 0, at = 0;
    for (int c = 0; c < cfg->n_chunks; c++)
        for (int64_t k = 0; k < cfg->chunks[c].slots; k++, sl++) {
            st->slot_chunk[sl] = c;
            st->slot_act[sl] = at;
            at += cfg->chunks[c].last - cfg->chunks[c].first;
        }
    if (!(st->act = calloc((size_t)(at > 0 ? at : 1), sizeof *st->act)))
        return ah_error_set(err, AH_ERR_OOM, "no host memory for activation slots");
    return AH_OK;
}

/* The head's tensors of one slot. */
static ah_status_t alloc_head_slot(ah_gpt_stage_t *st, int64_t sl, ah_error_t *err) {
    const int64_t N = st->N, C = st->C;
    char name[96];
    snprintf(name, sizeof name, "head activations, micro-batch slot %lld", (long long)sl);
    TRY(ah_arena_floats(&st->a_act, 2 * N * C, name, &st->head_in[sl], err));
    st->head_out[sl] = st->head_in[sl] + N * C;
    TRY(ah_arena_floats(&st->a_act, ah_arch_spec(st->cfg.model->arch)->norm_stats * N, "final norm statistics",
                        &st->head_stats[sl], err));
    snprintf(name, sizeof name, "logits (%lld x %lld), micro-batch slot %lld", (long long)N, (long long)st->Vl,
             (long long)sl);
    return ah_arena_floats(&st->a_act, N * st->Vl, name, &st->logits[sl], err);
}

/* The activation slots: per in-flight micro-batch of a chunk, each of its blocks' saved tensors
 * (its input only when recomputing), the token ids on chunk 0 of stage 0, the head's tensors and
 * logits on the last chunk of the last stage. */
static ah_status_t alloc_slots(ah_gpt_stage_t *st, ah_error_t *err) {
    const ah_gpt_config_t *cfg = &st->cfg;
    const int64_t N = st->N, C = st->C;
    const int64_t act = block_act_floats(st);
    TRY(number_slots(st, err));
    char name[96];
    for (int64_t sl = 0; sl < st->n_slots; sl++) {
        const int c = st->slot_chunk[sl];
        const ah_gpt_chunk_t *x = &cfg->chunks[c];
        for (int64_t b = 0; b < x->last - x->first; b++) {
            ah_block_act_t *a = &st->act[st->slot_act[sl] + b];
            snprintf(name, sizeof name, "activations of block %lld, micro-batch slot %lld",
                     (long long)(x->first + b), (long long)sl);
            if (x->recompute) { /* only the input; the rest is redone in the backward */
                TRY(ah_arena_floats(&st->a_act, N * C, name, &a->at[0], err));
            } else {
                float *base;
                TRY(ah_arena_floats(&st->a_act, act, name, &base, err));
                carve_block(st, base, a);
            }
        }
        if (cfg->has_embed && c == 0) {
            void *p;
            snprintf(name, sizeof name, "token ids, micro-batch slot %lld", (long long)sl);
            TRY(ah_arena_alloc(&st->a_act, N * (int64_t)sizeof(int32_t), name, &p, err));
            st->ids[sl] = p;
        }
        if (cfg->has_head && c == cfg->n_chunks - 1) TRY(alloc_head_slot(st, sl, err));
    }
    return AH_OK;
}

/* The workspace (one block's activation set of scratch) and, when recomputing, the buffer the
 * backward redoes each block's forward into. */
static ah_status_t alloc_work(ah_gpt_stage_t *st, ah_error_t *err) {
    const int64_t act = block_act_floats(st);
    st->work_floats = act;
    TRY(ah_arena_floats(&st->a_work, act, "backward workspace", &st->work, err));
    ah_block_work_t w;
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
    st->ops = block_ops(m->arch);
    st->N = st->cfg.micro_batch * st->cfg.seq_len;
    st->C = m->d_model;
    st->Cl = m->d_model / t;
    st->Fl = m->d_ff / t;
    st->Hl = m->n_head / t;
    st->KVl = m->n_kv_head / t;
    st->hd = m->d_model / m->n_head;
    st->QKVl = (st->Hl + 2 * st->KVl) * st->hd;
    st->Vl = ah_vocab_padded(m, t) / t;
    st->v0 = st->cfg.tp_rank * st->Vl;
    st->nvalid = m->vocab - st->v0 < 0 ? 0 : m->vocab - st->v0 < st->Vl ? m->vocab - st->v0 : st->Vl;
    ah_arena_init(&st->a_params, mem, "parameters");
    ah_arena_init(&st->a_opt, mem, "optimizer");
    ah_arena_init(&st->a_act, mem, "activations");
    ah_arena_init(&st->a_work, mem, "workspace");
    ah_arena_init(&st->a_keep, mem, "weight-gradient inputs");
    TRY(build_params(st, err));
    TRY(ah_arena_floats(&st->a_params, st->n_elems, "weights", &st->w, err));
    TRY(ah_arena_floats(&st->a_params, st->n_elems, "gradients", &st->g, err));
    TRY(ah_arena_floats(&st->a_opt, st->opt_elems, "AdamW m", &st->m, err));
    TRY(ah_arena_floats(&st->a_opt, st->opt_elems, "AdamW v", &st->v, err));
    TRY(alloc_slots(st, err));
    TRY(alloc_work(st, err));
    return ah_gpt_alloc_keep(st, err);
}

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
        ah_arena_free(&st->a_keep);
    }
    /* the host tables the stage owns (views and lists; the tensors are the arenas') */
    void *const tables[] = {st->params,   st->opt_runs, st->act,        st->slot_chunk, st->slot_act, st->ids,
                            st->head_in,  st->head_out, st->head_stats, st->logits,     st->recomp,   st->keep};
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) free(tables[i]);
    memset(st, 0, sizeof *st);
}

void ah_gpt_zero_grads(ah_gpt_stage_t *st) { st->k->zero(st->g, (size_t)st->n_elems); }

void ah_gpt_adamw(ah_gpt_stage_t *st, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t) {
    ah_gpt_adamw_tapped(st, hp, grad_scale, t, NULL);
}

void ah_gpt_adamw_tapped(ah_gpt_stage_t *st, const ah_adamw_hparams_t *hp, float grad_scale, int64_t t,
                         const ah_gpt_adamw_tap_t *tap) {
    int r = 0; /* the runs and the tensors are both in buffer order */
    for (int i = 0; i < st->n_params; i++) {
        const ah_gpt_param_t *x = &st->params[i];
        ah_adamw_hparams_t h = *hp;
        if (!x->def.spec->decay) h.weight_decay = 0.0f;
        while (r < st->n_opt_runs && st->opt_runs[r].off + st->opt_runs[r].n <= x->offset) r++;
        for (int q = r; q < st->n_opt_runs && st->opt_runs[q].off < x->offset + x->n; q++) {
            const ah_gpt_run_t *u = &st->opt_runs[q];
            const int64_t lo = u->off > x->offset ? u->off : x->offset;
            const int64_t hi = u->off + u->n < x->offset + x->n ? u->off + u->n : x->offset + x->n;
            const int64_t mv = u->mv + (lo - u->off);
            if (tap) tap->fn(tap->ctx, st, i, lo, mv, (size_t)(hi - lo), &h, grad_scale, t);
            else st->k->adamw(st->w + lo, st->g + lo, st->m + mv, st->v + mv, (size_t)(hi - lo), &h, grad_scale, t);
        }
    }
}

/* Copies the runs' moments between the stage's m (or v) and a full host array, through a host
 * view of the stage's buffer (the buffer itself on the CPU). */
static ah_status_t moments_copy(const ah_gpt_stage_t *st, float *mine, float *full, bool to_full, ah_error_t *err) {
    const size_t bytes = (size_t)st->opt_elems * sizeof(float);
    float *h;
    TRY(ah_mem_host_view(st->a_opt.mem, mine, bytes, to_full, (void **)&h, err));
    for (int r = 0; r < st->n_opt_runs; r++) {
        const ah_gpt_run_t *u = &st->opt_runs[r];
        if (to_full) memcpy(full + u->off, h + u->mv, (size_t)u->n * sizeof *full);
        else memcpy(h + u->mv, full + u->off, (size_t)u->n * sizeof *full);
    }
    const ah_status_t s = to_full ? AH_OK : ah_mem_upload(st->a_opt.mem, mine, h, bytes, err);
    ah_mem_host_done(mine, h);
    return s;
}

ah_status_t ah_gpt_moments_to_full(const ah_gpt_stage_t *st, float *m_full, float *v_full, ah_error_t *err) {
    TRY(moments_copy(st, st->m, m_full, true, err));
    return moments_copy(st, st->v, v_full, true, err);
}

ah_status_t ah_gpt_moments_from_full(ah_gpt_stage_t *st, const float *m_full, const float *v_full, ah_error_t *err) {
    TRY(moments_copy(st, st->m, (float *)m_full, false, err));
    return moments_copy(st, st->v, (float *)v_full, false, err);
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
    return st->first_block_param + st->ops->n_tensors * blocks_before(&st->cfg, l);
}

void ah_gpt_block_range(const ah_gpt_stage_t *st, int first, int last, int64_t *offset, int64_t *n) {
    const ah_gpt_param_t *a = &st->params[block_base(st, first)];
    const ah_gpt_param_t *b = &st->params[block_base(st, last) - 1];
    *offset = a->offset;
    *n = b->offset + b->n - a->offset;
}

int32_t *ah_gpt_ids(ah_gpt_stage_t *st, int64_t slot) { return st->ids[slot]; }

float *ah_gpt_input(ah_gpt_stage_t *st, int64_t slot) { return st->act[st->slot_act[slot]].at[0]; }

int32_t *ah_gpt_targets(ah_gpt_stage_t *st) {
    ah_block_work_t w;
    carve_work(st, &w);
    return (int32_t *)w.datty;
}

/* ---- forward / backward ---- */

float *ah_gpt_block_w(const ah_gpt_stage_t *st, int l, int which) {
    return st->w + st->params[block_base(st, l) + which].offset;
}
float *ah_gpt_block_g(const ah_gpt_stage_t *st, int l, int which) {
    return st->g + st->params[block_base(st, l) + which].offset;
}
float *ah_gpt_named_w(const ah_gpt_stage_t *st, const char *name) { return st->w + ah_gpt_find(st, name)->offset; }
float *ah_gpt_named_g(const ah_gpt_stage_t *st, const char *name) { return st->g + ah_gpt_find(st, name)->offset; }

/* The clock the parts are timed by: wall seconds, less the seconds device emulation slept inside
 * a phase (before a TP all-reduce), so each part counts what the host spent on it, emulated or
 * not, and the profiler can share an emulated phase's seconds among the parts by those. */
double ah_gpt_part_clock(const ah_gpt_stage_t *st) { return ah_now_s() - (st->emu ? st->emu->slept : 0); }

/* Adds the seconds since *t to part_s[part][pass] and restarts *t. */
static void charge(ah_gpt_stage_t *st, ah_gpt_part_t part, int pass, double *t) {
    const double now = ah_gpt_part_clock(st);
    st->part_s[part][pass] += now - *t;
    *t = now;
}

int ah_gpt_phase_segments(const ah_gpt_stage_t *st) {
    if (!st->tp) return 1;
    /* TP reductions (each ends a segment): a block's forward 2, its backward 2, and a recomputing
     * backward's forward 1 more; the embedding's forward 1; the head's forward 2 (the softmax
     * statistics) and its backward 1. */
    const int nb = st->n_blocks; /* all chunks': at least one phase's */
    const int fwd = 2 * nb + (st->cfg.has_embed ? 1 : 0) + (st->cfg.has_head ? 2 : 0);
    const int bwd = (st->cfg.recompute ? 3 : 2) * nb + (st->cfg.has_head ? 1 : 0);
    return (fwd > bwd ? fwd : bwd) + 1;
}

/* A TP reduction, which ends a segment of the emulated phase (runtime/emulate.h). */
static ah_status_t tp_reduce(ah_gpt_stage_t *st, float *x, size_t n, bool max, ah_error_t *err) {
    if (!st->tp) return AH_OK;
    if (st->emu) ah_emulator_split(st->emu);
    return max ? ah_group_max(st->tp, x, n, err) : ah_group_sum(st->tp, x, n, NULL, err);
}

ah_status_t ah_gpt_tp_sum(ah_gpt_stage_t *st, float *x, size_t n, ah_error_t *err) {
    return tp_reduce(st, x, n, false, err);
}

ah_status_t ah_gpt_row_residual(ah_gpt_stage_t *st, float *out, const float *resid, const float *in, const float *w,
                                const float *bias, int in_cols, float *tmp, ah_error_t *err) {
    const int N = (int)st->N, C = (int)st->C;
    st->k->matmul_fwd(tmp, in, w, bias, N, in_cols, C);
    const ah_status_t s = ah_gpt_tp_sum(st, tmp, (size_t)N * C, err);
    if (s == AH_OK) st->k->residual_fwd(out, resid, tmp, (size_t)N * C);
    return s;
}

/* The activation views of block l for slot; for a recomputing stage the recompute buffer with the
 * slot's kept input. */
static ah_block_act_t *block_view(ah_gpt_stage_t *st, int64_t slot, int l) {
    ah_block_act_t *a = &st->act[st->slot_act[slot] + (l - st->cfg.chunks[st->slot_chunk[slot]].first)];
    if (!st->cfg.chunks[st->slot_chunk[slot]].recompute) return a;
    st->recomp->at[0] = a->at[0];
    return st->recomp;
}

bool ah_gpt_slot_embed(const ah_gpt_stage_t *st, int64_t slot) { return st->cfg.has_embed && st->slot_chunk[slot] == 0; }
bool ah_gpt_slot_head(const ah_gpt_stage_t *st, int64_t slot) {
    return st->cfg.has_head && st->slot_chunk[slot] == st->cfg.n_chunks - 1;
}

/* The matrix the head multiplies by: the embedding's when tied (the stage's own copy on a last
 * stage without the embedding), else lm_head.weight. */
static const char *head_matrix(const ah_gpt_stage_t *st) { return st->cfg.model->tied ? "wte" : "lm_head.weight"; }

/* The embedding's forward: the rank's vocabulary rows, GPT-2's positions on TP rank 0, summed
 * over the TP group. */
static ah_status_t embed_fwd(ah_gpt_stage_t *st, int64_t slot, ah_error_t *err) {
    const ah_gpt_config_t *c = &st->cfg;
    const ah_gpt_param_t *wpe = ah_gpt_find(st, "wpe");
    float *x = ah_gpt_input(st, slot);
    ah_gpt_embedding_fwd(st, x, st->ids[slot], ah_gpt_named_w(st, "wte"), wpe && c->tp_rank == 0 ? st->w + wpe->offset : NULL);
    return ah_gpt_tp_sum(st, x, (size_t)(st->N * st->C), err);
}

/* The head's forward: final norm, the rank's (N, Vl) logits, the cross-entropy over the group's
 * vocabulary; leaves dlogits in the slot's logits and adds the head matrix's gradient. */
static ah_status_t head_fwd(ah_gpt_stage_t *st, int64_t slot, float loss_scale, double *loss_sum,
                            ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const int N = (int)st->N, C = (int)st->C, Vl = (int)st->Vl, nvalid = (int)st->nvalid, v0 = (int)st->v0;
    ah_block_work_t w;
    carve_work(st, &w);
    float *rowmax = w.dres, *stats = w.dres + N; /* (N), (2N) */
    const int32_t *targets = ah_gpt_targets(st);
    float *logits = st->logits[slot];
    const float *hw = ah_gpt_named_w(st, head_matrix(st));
    ah_status_t s;
    st->ops->head_norm_fwd(st, st->head_out[slot], st->head_stats[slot], st->head_in[slot]);
    k->matmul_fwd(logits, st->head_out[slot], hw, NULL, N, C, Vl);
    k->xent_max(rowmax, logits, N, Vl, nvalid);
    if ((s = tp_reduce(st, rowmax, (size_t)N, true, err)) != AH_OK) return s;
    k->xent_stats(stats, logits, rowmax, targets, N, Vl, nvalid, v0);
    if ((s = tp_reduce(st, stats, 2 * (size_t)N, false, err)) != AH_OK) return s;
    *loss_sum = k->xent_grad(logits, rowmax, stats, targets, loss_scale, N, Vl, nvalid, v0);
    k->matmul_bwd(NULL, ah_gpt_named_g(st, head_matrix(st)), NULL, logits, st->head_out[slot], hw, N, C, Vl);
    return AH_OK;
}

ah_status_t ah_gpt_forward(ah_gpt_stage_t *st, int64_t slot, float *out, float loss_scale,
                           double *loss_sum, ah_error_t *err) {
    const ah_gpt_chunk_t *c = &st->cfg.chunks[st->slot_chunk[slot]];
    const bool embed = ah_gpt_slot_embed(st, slot), head = ah_gpt_slot_head(st, slot);
    ah_block_work_t w;
    carve_work(st, &w);
    ah_status_t s;
    ah_status_t (*const ready)(void *, int, ah_error_t *) = st->on_weights;
    void *const ctx = st->on_grads_ctx;
    double t = ah_gpt_part_clock(st);
    if (embed) {
        if (ready && (s = ready(ctx, AH_GPT_GRADS_END, err)) != AH_OK) return s;
        if ((s = embed_fwd(st, slot, err)) != AH_OK) return s;
        charge(st, AH_GPT_PART_EMBED, 0, &t);
    }
    for (int l = c->first; l < c->last; l++) {
        float *dst = l + 1 < c->last ? st->act[st->slot_act[slot] + (l + 1 - c->first)].at[0]
                     : head          ? st->head_in[slot]
                                     : out;
        if (ready && (s = ready(ctx, l, err)) != AH_OK) return s;
        if ((s = st->ops->fwd(st, l, block_view(st, slot, l), dst, &w, err)) != AH_OK) return s;
    }
    charge(st, AH_GPT_PART_BLOCKS, 0, &t);
    if (!head) return AH_OK;
    if (ready && (s = ready(ctx, AH_GPT_GRADS_HEAD, err)) != AH_OK) return s;
    s = head_fwd(st, slot, loss_scale, loss_sum, err);
    charge(st, AH_GPT_PART_HEAD, 0, &t);
    return s;
}

ah_block_keep_t *ah_gpt_keep(const ah_gpt_stage_t *st, int64_t wset, int l) {
    return &st->keep[wset * st->n_blocks + blocks_before(&st->cfg, l)];
}

ah_status_t ah_gpt_backward(ah_gpt_stage_t *st, int64_t slot, const float *dout, float *dinp, int64_t wset,
                            ah_error_t *err) {
    const ah_kernels_t *k = st->k;
    const ah_gpt_config_t *cfg = &st->cfg;
    const ah_gpt_chunk_t *c = &cfg->chunks[st->slot_chunk[slot]];
    const bool embed = ah_gpt_slot_embed(st, slot), head = ah_gpt_slot_head(st, slot);
    const int N = (int)st->N, C = (int)st->C;
    const size_t NC = (size_t)N * C;
    ah_block_work_t w;
    carve_work(st, &w);
    ah_status_t s;
    double t = ah_gpt_part_clock(st);
    k->zero(w.dres, NC);
    if (head) { /* dx = dlogits @ W over the group's vocabulary, then the final norm */
        k->zero(w.tmp, NC);
        k->matmul_bwd(w.tmp, NULL, NULL, st->logits[slot], st->head_out[slot],
                      ah_gpt_named_w(st, head_matrix(st)), N, C, (int)st->Vl);
        if ((s = ah_gpt_tp_sum(st, w.tmp, NC, err)) != AH_OK) return s;
        st->ops->head_norm_bwd(st, w.dres, w.tmp, st->head_in[slot], st->head_stats[slot]);
    } else {
        k->residual_bwd(w.dres, NULL, dout, NC); /* dres = dout */
    }
    charge(st, head ? AH_GPT_PART_HEAD : AH_GPT_PART_BLOCKS, 1, &t);
    /* a split backward's B: the gradients are final after its W (on_grads is called there) */
    ah_status_t (*on_grads)(void *, int, ah_error_t *) = wset < 0 ? st->on_grads : NULL;
    if (head && on_grads && (s = on_grads(st->on_grads_ctx, AH_GPT_GRADS_HEAD, err)) != AH_OK) return s;
    for (int l = c->last - 1; l >= c->first; l--) {
        ah_block_act_t *a = block_view(st, slot, l);
        if (c->recompute && (s = st->ops->fwd(st, l, a, NULL, &w, err)) != AH_OK) return s;
        if ((s = st->ops->bwd(st, l, a, &w, wset < 0 ? NULL : ah_gpt_keep_for_b(st, wset, l, a), err)) != AH_OK) return s;
        if (on_grads && (s = on_grads(st->on_grads_ctx, l, err)) != AH_OK) return s;
    }
    charge(st, AH_GPT_PART_BLOCKS, 1, &t);
    if (embed) {
        const ah_gpt_param_t *wpe = ah_gpt_find(st, "wpe");
        ah_gpt_embedding_bwd(st, ah_gpt_named_g(st, "wte"), wpe ? st->g + wpe->offset : NULL, w.dres, st->ids[slot]);
    } else {
        k->zero(dinp, NC);
        k->residual_bwd(dinp, NULL, w.dres, NC); /* dinp = dres */
    }
    charge(st, embed ? AH_GPT_PART_EMBED : AH_GPT_PART_BLOCKS, 1, &t);
    /* the embedding's gradients are final only after its chunk's backward (chunk 0's, the last of
     * a step's backwards on an interleaved device) */
    return on_grads && embed ? on_grads(st->on_grads_ctx, AH_GPT_GRADS_END, err) : AH_OK;
}
