/* The architecture tables' expansion for one model and the sums over them (spec/arch.h). */
#include "spec/arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern const ah_arch_spec_t ah_arch_gpt2, ah_arch_llama; /* arch_gpt2.c, arch_llama.c */

const ah_arch_spec_t *ah_arch_spec(ah_arch_t a) { return a == AH_ARCH_LLAMA ? &ah_arch_llama : &ah_arch_gpt2; }

int64_t ah_dim_value(const ah_model_t *m, ah_dim_t d) {
    const int64_t kv = m->d_model * m->n_kv_head / m->n_head;
    switch (d) {
    case AH_DIM_ONE: return 1;
    case AH_DIM_MODEL: return m->d_model;
    case AH_DIM_KV: return kv;
    case AH_DIM_QKV: return m->d_model + 2 * kv;
    case AH_DIM_FF: return m->d_ff;
    case AH_DIM_GATE_UP: return 2 * m->d_ff;
    case AH_DIM_VOCAB: return m->vocab;
    case AH_DIM_POS: return m->max_pos;
    }
    return 0;
}

int64_t ah_vocab_padded(const ah_model_t *m, int t) {
    const int64_t q = (int64_t)AH_VOCAB_PAD * (t > 0 ? t : 1);
    return (m->vocab + q - 1) / q * q;
}

static bool present(const ah_model_t *m, const ah_tensor_spec_t *s) { return !s->untied_only || !m->tied; }

/* The row's shape for the model, without its name (the sums below run in the planner's inner loops,
 * where formatting names was most of their time). */
static ah_tensor_t expand_shape(const ah_model_t *m, const ah_tensor_spec_t *s, int block) {
    ah_tensor_t x;
    memset(&x, 0, sizeof x);
    x.rows = ah_dim_value(m, s->rows);
    x.cols = ah_dim_value(m, s->cols);
    x.block = block;
    x.spec = s;
    x.padded_rows = s->rows == AH_DIM_VOCAB && s->split == AH_SPLIT_ROWS;
    return x;
}

static ah_tensor_t expand(const ah_model_t *m, const ah_tensor_spec_t *s, int block) {
    ah_tensor_t x = expand_shape(m, s, block);
    if (block >= 0) snprintf(x.name, sizeof x.name, "h.%d.%s", block, s->name);
    else snprintf(x.name, sizeof x.name, "%s", s->name);
    return x;
}

/* The model's tensors in canonical order into out (when not NULL); returns the count. */
static int each_tensor(const ah_model_t *m, ah_tensor_t *out) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    int n = 0;
    for (int kind = AH_LAYER_EMBED; kind <= AH_LAYER_HEAD; kind++) {
        const int blocks = kind == AH_LAYER_BLOCK ? (int)m->n_layer : 1;
        for (int l = 0; l < blocks; l++)
            for (int i = 0; i < a->n_tensors; i++) {
                const ah_tensor_spec_t *s = &a->tensors[i];
                if ((int)s->layer != kind || !present(m, s)) continue;
                if (out) out[n] = expand(m, s, kind == AH_LAYER_BLOCK ? l : -1);
                n++;
            }
    }
    return n;
}

int ah_model_tensor_count(const ah_model_t *m) { return each_tensor(m, NULL); }
void ah_model_tensors(const ah_model_t *m, ah_tensor_t *out) { each_tensor(m, out); }

int ah_block_tensor_count(const ah_model_t *m) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    int n = 0;
    for (int i = 0; i < a->n_tensors; i++) n += a->tensors[i].layer == AH_LAYER_BLOCK && present(m, &a->tensors[i]);
    return n;
}

int64_t ah_tensor_elems(const ah_tensor_t *x) { return x->rows * x->cols; }

/* Rows of the tensor the t shards split, padding included: V padded for a vocabulary split. */
static int64_t split_rows(const ah_tensor_t *x, int t) {
    if (!x->padded_rows) return x->rows;
    const int64_t q = (int64_t)AH_VOCAB_PAD * t;
    return (x->rows + q - 1) / q * q;
}

void ah_tensor_shard_shape(const ah_tensor_t *x, int t, int64_t shape[2]) {
    shape[0] = x->rows;
    shape[1] = x->cols;
    if (x->spec->split == AH_SPLIT_ROWS) shape[0] = split_rows(x, t) / t;
    if (x->spec->split == AH_SPLIT_QKV) shape[0] /= t;
    if (x->spec->split == AH_SPLIT_COLS) shape[1] /= t;
}

int64_t ah_tensor_shard_elems(const ah_tensor_t *x, int t) {
    int64_t shape[2];
    ah_tensor_shard_shape(x, t, shape);
    return shape[0] * shape[1];
}

int64_t ah_tensor_full_index(const ah_tensor_t *x, int t, int k, int64_t i) {
    switch (x->spec->split) {
    case AH_SPLIT_REPL:
        return i;
    case AH_SPLIT_ROWS: {
        const int64_t row = (int64_t)k * (split_rows(x, t) / t) + i / x->cols;
        return row < x->rows ? row * x->cols + i % x->cols : -1;
    }
    case AH_SPLIT_QKV: {
        const int64_t part_rows = x->rows / 3, mine = part_rows / t; /* rows of q (k, v) held */
        const int64_t r = i / x->cols, c = i % x->cols;
        const int64_t part = r / mine, rr = r % mine;
        return (part * part_rows + (int64_t)k * mine + rr) * x->cols + c;
    }
    case AH_SPLIT_COLS: {
        const int64_t cl = x->cols / t, r = i / cl, c = i % cl;
        return r * x->cols + (int64_t)k * cl + c;
    }
    }
    return i;
}

float ah_tensor_init_std(const ah_tensor_t *x, const ah_model_t *m, float *fill) {
    *fill = x->spec->init == AH_INIT_ONES ? 1.0f : 0.0f;
    const double std = m->init_std > 0 ? m->init_std : AH_INIT_STD_DEFAULT;
    switch (x->spec->init) {
    case AH_INIT_NORMAL: return (float)std;
    case AH_INIT_RESIDUAL: return (float)(std / sqrt(2.0 * (double)m->n_layer));
    case AH_INIT_ONES:
    case AH_INIT_ZEROS: return 0.0f;
    }
    return 0.0f;
}

bool ah_tensor_hf_name(const ah_tensor_t *x, char *out, size_t cap) {
    const int n = x->block >= 0 ? snprintf(out, cap, x->spec->hf_name, x->block)
                                : snprintf(out, cap, "%s", x->spec->hf_name);
    return n >= 0 && (size_t)n < cap;
}

bool ah_tensor_tied(const ah_tensor_t *x, const ah_model_t *m) { return m->tied && x->spec->grad == AH_GRAD_TIED; }

typedef enum { ALL_TENSORS, MATRICES, VECTORS, TIED_TENSORS, CONTENT } which_t;

/* Elements per TP rank of t of one layer's tensors (block 0 stands for every block): all of them,
 * its 2-D ones, its 1-D ones, or its tied ones. */
static int64_t layer_sum(const ah_model_t *m, ah_layer_kind_t kind, int t, which_t which) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    int64_t sum = 0;
    for (int i = 0; i < a->n_tensors; i++) {
        const ah_tensor_spec_t *s = &a->tensors[i];
        if (s->layer != kind || !present(m, s)) continue;
        const ah_tensor_t x = expand_shape(m, s, kind == AH_LAYER_BLOCK ? 0 : -1);
        const bool vector = x.rows == 1 || x.cols == 1;
        if ((which == MATRICES && vector) || (which == VECTORS && !vector)) continue;
        if (which == TIED_TENSORS && !ah_tensor_tied(&x, m)) continue;
        sum += which == CONTENT ? ah_tensor_elems(&x) : ah_tensor_shard_elems(&x, t);
    }
    return sum;
}

int64_t ah_layer_params(const ah_model_t *m, ah_layer_kind_t kind, int t) { return layer_sum(m, kind, t, ALL_TENSORS); }

int64_t ah_layer_content_params(const ah_model_t *m, ah_layer_kind_t kind) { return layer_sum(m, kind, 1, CONTENT); }

int64_t ah_tied_params(const ah_model_t *m, int t) { return layer_sum(m, AH_LAYER_EMBED, t, TIED_TENSORS); }

int64_t ah_block_matmul_elems(const ah_model_t *m, int t) { return layer_sum(m, AH_LAYER_BLOCK, t, MATRICES); }

int64_t ah_head_norm_params(const ah_model_t *m, int t) { return layer_sum(m, AH_LAYER_HEAD, t, VECTORS); }

int64_t ah_head_matrix_params(const ah_model_t *m, int t) {
    return m->tied ? ah_tied_params(m, t) : layer_sum(m, AH_LAYER_HEAD, t, MATRICES);
}

bool ah_layer_tp_split(const ah_model_t *m, ah_layer_kind_t kind) {
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    for (int i = 0; i < a->n_tensors; i++)
        if (a->tensors[i].layer == kind && present(m, &a->tensors[i]) && a->tensors[i].split != AH_SPLIT_REPL) return true;
    return false;
}
