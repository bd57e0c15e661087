/* Stage cost (time per micro-batch, bytes per device), links and collectives.
 * Formulas: docs/cost-model.md ("Stage time", "Memory", "Links"); keep them in step. The links
 * themselves: cost/links.c. */
#include <math.h>
#include <string.h>

#include "cost/cost.h"
#include "cost/kernel_time.h"
#include "cost/profile.h"

#define GIB 1073741824.0

/* ---- links and collectives ---- */

double ah_allreduce_seconds(double bytes, int n, double bw, double lat) {
    if (n <= 1) return 0;
    return 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * lat;
}

/* Boundary activation of one micro-batch: N x C in the activation precision (a CP rank's N). */
static double boundary_bytes(const ah_cost_ctx_t *ctx) {
    return (double)(ctx->train->micro_batch * (ctx->train->seq_len / ah_cost_cp(ctx)) * ctx->model->d_model *
                    ah_precision_elt_bytes(ctx->train->precision));
}

double ah_p2p_seconds(const ah_cost_ctx_t *ctx, ah_link_t link, int type_a, int type_b) {
    const ah_cluster_t *c = ctx->cluster;
    const ah_link_info_t l = {.bw = ah_link_bw(c, link, type_a, type_b), .latency_s = ah_link_latency(c, link)};
    return ah_p2p_seconds_on(ctx, &l, type_a, type_b);
}

double ah_p2p_seconds_on(const ah_cost_ctx_t *ctx, const ah_link_info_t *l, int type_a, int type_b) {
    const int t = ah_p2p_parts(ctx);
    const double bytes = boundary_bytes(ctx);
    if (t == 1) return bytes / l->bw + l->latency_s;
    const ah_cluster_t *c = ctx->cluster; /* an all-gather is half a ring all-reduce's traffic and steps */
    const double gather = ah_allreduce_seconds(bytes, t, ah_link_bw(c, AH_LINK_INTRA, type_a, type_b),
                                               ah_link_latency(c, AH_LINK_INTRA)) / 2;
    return bytes / t / l->bw + l->latency_s + gather;
}

double ah_p2p_wire_seconds_on(const ah_cost_ctx_t *ctx, const ah_link_info_t *l) {
    return boundary_bytes(ctx) / ah_p2p_parts(ctx) / l->bw;
}

/* The profile's entry for this type under ctx's TP degree, micro-batch, T and precision. */
static const ah_profile_entry_t *profile_entry(const ah_cost_ctx_t *ctx, int type) {
    const ah_train_t *tr = ctx->train;
    return ctx->profile ? ah_profile_find(ctx->profile, ctx->cluster->types[type].name, ctx->t,
                                          tr->micro_batch, tr->seq_len, tr->precision)
                        : NULL;
}

double ah_optimizer_seconds(const ah_cost_ctx_t *ctx, int type, int64_t params) {
    const ah_profile_entry_t *prof = profile_entry(ctx, type);
    if (prof && prof->optimizer_s_per_param > 0) return (double)params * prof->optimizer_s_per_param;
    /* AdamW is memory-bound: it reads every state byte (w, g, m, v, and the fp32 master in bf16)
     * and writes all of them but the gradient (w, m, v, master). */
    const int64_t read = ah_param_state_bytes(ctx->train->precision);
    const int64_t written = read - ah_precision_elt_bytes(ctx->train->precision);
    return (double)params * (double)(read + written) / (ctx->cluster->types[type].mem_bw_gb_s * 1e9);
}

/* ---- a stage ---- */

int64_t ah_inflight(int S, int s, int64_t n) {
    int64_t k = (int64_t)S - s;
    return k < n ? k : n;
}

int64_t ah_stage_memory_bytes(const ah_stage_cost_t *c, int64_t inflight) {
    return c->state_bytes + c->act_bytes_per_mb * inflight + c->fixed_bytes;
}

/* One layer's forward and backward seconds per micro-batch, without TP comm. */
typedef struct {
    double fwd, bwd;
} layer_time_t;

/* Flat roofline: each pass is bound by compute at one efficiency for every matmul or by the bytes
 * it moves (its parameters plus the activations it writes), whichever is slower; per CP rank. */
static layer_time_t roofline(const ah_cost_ctx_t *ctx, const ah_gpu_type_t *g, ah_layer_kind_t kind,
                             int64_t param_elems) {
    const ah_model_t *m = ctx->model;
    const ah_train_t *tr = ctx->train;
    const int cp = ah_cost_cp(ctx);
    /* a CP rank does 1/cp of every layer's FLOPs (its T/cp tokens; attention's causal balance) */
    const double flops_s = ah_gpu_peak_flops(g, (int)tr->precision) * g->efficiency * cp;
    const double bytes = (double)(param_elems * ah_precision_elt_bytes(tr->precision) +
                                  ah_layer_act_bytes_cp(m, kind, ctx->t, tr->micro_batch, tr->seq_len, cp,
                                                        tr->precision, false));
    const double mem_s = bytes / (g->mem_bw_gb_s * 1e9);
    layer_time_t lt;
    lt.fwd = fmax(ah_layer_fwd_flops(m, kind, ctx->t, tr->micro_batch, tr->seq_len) / flops_s, mem_s);
    lt.bwd = fmax(ah_layer_bwd_flops(m, kind, ctx->t, tr->micro_batch, tr->seq_len) / flops_s, mem_s);
    return lt;
}

/* Bytes one block's memory-bound kernels move forward, per rank: two norms (read and write N x C
 * each), two residual adds (read two N x C, write one; GPT-2's fused bias-add included), the MLP
 * activation (GELU: read and write N x F/t; SwiGLU: read gate and up, write N x F/t), and LLaMA's
 * RoPE (read and write q and k). */
static double block_elementwise_bytes(const ah_model_t *m, int t, double N, double elt) {
    const double C = (double)m->d_model, F = (double)m->d_ff / t;
    const double kv = (double)ah_dim_value(m, AH_DIM_KV) / t;
    const double common = (2 * 2 + 2 * 3) * N * C;
    if (m->arch == AH_ARCH_LLAMA) return (common + 3 * N * F + 2 * N * (C / t + kv)) * elt;
    return (common + 2 * N * F) * elt;
}

/* A memory-bound kernel's backward reads its saved input and the output gradient and writes the
 * input gradient: three tensors for the forward's two. */
#define ELEMENTWISE_BWD 1.5

/* Kernel by kernel (cost/kernel_time.h): each matmul of the architecture table on the GEMM curve
 * (forward Y = X W with M = N tokens, backward dX and dW), attention as the type's kernel, and the
 * memory-bound kernels (norms, activation, residual adds, the embedding's gather, the loss) from
 * the bytes they move. */
static layer_time_t kernel_layer_time(const ah_cost_ctx_t *ctx, const ah_gpu_type_t *g,
                                      ah_layer_kind_t kind) {
    const ah_model_t *m = ctx->model;
    const int t = ctx->t;
    const double peak = ah_gpu_peak_flops(g, (int)ctx->train->precision);
    const double elt = (double)ah_precision_elt_bytes(ctx->train->precision);
    /* a CP rank's N = b T/cp tokens; its attention is 1/cp of the whole sequence's (the balance) */
    const double cp = ah_cost_cp(ctx);
    const double b = (double)ctx->train->micro_batch, T = (double)ctx->train->seq_len, N = b * T / cp;
    const double C = (double)m->d_model;
    layer_time_t lt = {0, 0};
    if (kind == AH_LAYER_EMBED) {
        /* gather N rows (GPT-2 adds its position rows: one more N x C read) and the token ids;
         * backward: scatter-add of the N x C gradient into the rows (read it, read-modify-write) */
        const double reads = m->arch == AH_ARCH_GPT2 ? 3 : 2;
        lt.fwd = ah_mem_seconds(g, reads * N * C * elt + N * 4);
        lt.bwd = ah_mem_seconds(g, 3 * N * C * elt);
        return lt;
    }
    if (kind == AH_LAYER_HEAD) {
        /* final norm, logits (N x Vp/t), the loss reading them and writing their gradient */
        const double Vl = (double)ah_head_matrix_params(m, t) / C, norm = 2 * N * C * elt;
        lt.fwd = ah_mem_seconds(g, norm + 2 * N * Vl * elt) + ah_gemm_fwd_seconds(g, peak, elt, N, Vl, C);
        lt.bwd = ah_mem_seconds(g, ELEMENTWISE_BWD * norm) + ah_gemm_bwd_seconds(g, peak, elt, N, Vl, C);
        return lt;
    }
    const ah_arch_spec_t *a = ah_arch_spec(m->arch);
    for (int i = 0; i < a->n_tensors; i++) {
        const ah_tensor_spec_t *ts = &a->tensors[i];
        if (ts->layer != AH_LAYER_BLOCK || ts->cols == AH_DIM_ONE) continue;
        double out = (double)ah_dim_value(m, ts->rows), in = (double)ah_dim_value(m, ts->cols);
        if (ts->split == AH_SPLIT_ROWS || ts->split == AH_SPLIT_QKV) out /= t;
        else if (ts->split == AH_SPLIT_COLS) in /= t;
        lt.fwd += ah_gemm_fwd_seconds(g, peak, elt, N, out, in);
        lt.bwd += ah_gemm_bwd_seconds(g, peak, elt, N, out, in);
    }
    const double heads = (double)(m->n_head / t), hd = C / m->n_head;
    lt.fwd += ah_attention_fwd_seconds(g, peak, elt, b, T, heads, hd) / cp;
    lt.bwd += ah_attention_bwd_seconds(g, peak, elt, b, T, heads, hd) / cp;
    const double ew = block_elementwise_bytes(m, t, N, elt);
    lt.fwd += ah_mem_seconds(g, ew);
    lt.bwd += ah_mem_seconds(g, ELEMENTWISE_BWD * ew);
    return lt;
}

/* kernel_layer_time is a few dozen GEMM evaluations and the planner and baselines price the same
 * (model, type, t, micro-batch) millions of times, so the last few results are kept, per thread,
 * under everything they depend on (values, not pointers: callers reuse structs). */
typedef struct {
    ah_arch_t arch;
    int64_t C, H, KV, F, V, b, T;
    int t, cp, kind, precision, sms;
    bool tied, unfused;
    double peak_bf16, peak_fp32, efficiency, mem_bw;
} kernel_key_t;

#define KERNEL_CACHE 16

static layer_time_t cached_kernel_layer_time(const ah_cost_ctx_t *ctx, const ah_gpu_type_t *g,
                                             ah_layer_kind_t kind) {
    static _Thread_local struct {
        kernel_key_t key;
        layer_time_t lt;
    } cache[KERNEL_CACHE];
    static _Thread_local int used, next;
    const ah_model_t *m = ctx->model;
    kernel_key_t k;
    memset(&k, 0, sizeof k); /* padding too, for memcmp */
    k.arch = m->arch, k.C = m->d_model, k.H = m->n_head, k.KV = m->n_kv_head, k.F = m->d_ff;
    k.V = m->vocab, k.b = ctx->train->micro_batch, k.T = ctx->train->seq_len, k.t = ctx->t;
    k.cp = ah_cost_cp(ctx);
    k.kind = kind, k.precision = ctx->train->precision, k.sms = g->sm_count, k.tied = m->tied;
    k.unfused = g->attention_unfused, k.peak_bf16 = g->tflops_bf16, k.peak_fp32 = g->tflops_fp32;
    k.efficiency = g->efficiency, k.mem_bw = g->mem_bw_gb_s;
    for (int i = 0; i < used; i++)
        if (memcmp(&cache[i].key, &k, sizeof k) == 0) return cache[i].lt;
    const layer_time_t lt = kernel_layer_time(ctx, g, kind);
    cache[next].key = k;
    cache[next].lt = lt;
    next = (next + 1) % KERNEL_CACHE;
    if (used < KERNEL_CACHE) used++;
    return lt;
}

/* The profile's ring attention of one CP rank at cp for a block, when it measured both it and the
 * one-process attention kernel (cost/profile.h); NULL otherwise (cp 1 too). */
static const ah_profile_layer_t *ring_measured(const ah_profile_entry_t *prof, ah_layer_kind_t kind, int cp) {
    if (!prof || kind != AH_LAYER_BLOCK || cp < 2 || cp > 8 || !prof->attention.present) return NULL;
    const ah_profile_layer_t *ring = &prof->ring[__builtin_ctz((unsigned)cp)];
    return ring->present ? ring : NULL;
}

/* The profile's entry at a CP rank's own T / cp tokens (prof's type, TP degree, micro-batch and
 * precision; `autohet profile --seq-len T/cp`), when it has one: NULL at cp 1. */
static const ah_profile_entry_t *cp_rank_entry(const ah_cost_ctx_t *ctx, const ah_profile_entry_t *prof) {
    const int cp = ah_cost_cp(ctx);
    if (!prof || cp < 2 || prof->seq_len % cp != 0) return NULL;
    return ah_profile_find(ctx->profile, prof->gpu, prof->tp, prof->micro_batch, prof->seq_len / cp, prof->precision);
}

/* A CP rank's layer as the profile measured it at the rank's own T / cp tokens (small GEMMs and the
 * head's weights do not shrink with the tokens: 1/cp of the one-process time misses that), the
 * block's attention there (causal over T / cp only) replaced by the ring kernels' at cp; false
 * where the profile lacks a figure this needs. */
static bool cp_rank_measured(const ah_cost_ctx_t *ctx, const ah_profile_entry_t *prof, ah_layer_kind_t kind,
                             layer_time_t *lt) {
    const ah_profile_entry_t *own = cp_rank_entry(ctx, prof);
    const ah_profile_layer_t *ring = ring_measured(prof, kind, ah_cost_cp(ctx));
    if (!own || !own->layer[kind].present || (kind == AH_LAYER_BLOCK && !(ring && own->attention.present)))
        return false;
    *lt = (layer_time_t){own->layer[kind].fwd_s, own->layer[kind].bwd_s};
    if (kind == AH_LAYER_BLOCK) {
        lt->fwd += ring->fwd_s - own->attention.fwd_s;
        lt->bwd += ring->bwd_s - own->attention.bwd_s;
    }
    return true;
}

/* Measured seconds when the profile has this layer kind; else kernel by kernel for a GPU type
 * with a known SM count; else (CPU-emulated types, types given without sm_count) the flat
 * roofline. */
static layer_time_t layer_time(const ah_cost_ctx_t *ctx, const ah_profile_entry_t *prof,
                               const ah_gpu_type_t *g, ah_layer_kind_t kind, int64_t param_elems) {
    if (prof && prof->layer[kind].present) { /* measured on one process: a CP rank does 1/cp of it */
        const int cp = ah_cost_cp(ctx);
        layer_time_t lt = {prof->layer[kind].fwd_s / cp, prof->layer[kind].bwd_s / cp};
        if (cp_rank_measured(ctx, prof, kind, &lt)) return lt;
        const ah_profile_layer_t *ring = ring_measured(prof, kind, cp);
        if (ring) { /* attention by the ring kernels' measured seconds, not 1/cp of the kernel's */
            lt.fwd += ring->fwd_s - prof->attention.fwd_s / cp;
            lt.bwd += ring->bwd_s - prof->attention.bwd_s / cp;
        }
        return lt;
    }
    if (g->sm_count > 0 && g->emulate_slowdown <= 0) return cached_kernel_layer_time(ctx, g, kind);
    return roofline(ctx, g, kind, param_elems);
}

/* One block's attention seconds on a rank: a profile's ring kernels at the rank's CP degree where it
 * measured them; the kernel's where the block is priced kernel by kernel; else the score matmuls'
 * share of the block's FLOPs (ah_attention_fwd_flops) of its time. */
static layer_time_t attention_time(const ah_cost_ctx_t *ctx, const ah_profile_entry_t *prof, const ah_gpu_type_t *g,
                                   layer_time_t blk) {
    const ah_model_t *m = ctx->model;
    const ah_train_t *tr = ctx->train;
    const double cp = ah_cost_cp(ctx), b = (double)tr->micro_batch, T = (double)tr->seq_len;
    const ah_profile_layer_t *ring = prof && prof->layer[AH_LAYER_BLOCK].present
                                         ? ring_measured(prof, AH_LAYER_BLOCK, ah_cost_cp(ctx)) : NULL;
    if (ring) return (layer_time_t){ring->fwd_s, ring->bwd_s};
    if (!(prof && prof->layer[AH_LAYER_BLOCK].present) && g->sm_count > 0 && g->emulate_slowdown <= 0) {
        const double peak = ah_gpu_peak_flops(g, (int)tr->precision), elt = (double)ah_precision_elt_bytes(tr->precision);
        const double heads = (double)(m->n_head / ctx->t), hd = (double)m->d_model / (double)m->n_head;
        return (layer_time_t){ah_attention_fwd_seconds(g, peak, elt, b, T, heads, hd) / cp,
                              ah_attention_bwd_seconds(g, peak, elt, b, T, heads, hd) / cp};
    }
    const double share = ah_attention_fwd_flops(m, ctx->t, tr->micro_batch, tr->seq_len) /
                         ah_layer_fwd_flops(m, AH_LAYER_BLOCK, ctx->t, tr->micro_batch, tr->seq_len);
    return (layer_time_t){blk.fwd * share, blk.bwd * share};
}

/* The ring's seconds per block on a CP rank beyond its attention compute (docs/cost-model.md
 * "Context parallelism"). A step sends one key/value block to the next CP rank (x seconds on the
 * ring's slowest hop) while the rank computes attention against the block it holds (attention /
 * cp): the forward's cp - 1 transfers each cost max(0, x - attention / cp) more; the backward's
 * key/value blocks the same, and each of its cp steps then sends the gradient accumulator after
 * its compute, unhidden (runtime/cp_ring.c's order): cp x more. */
static layer_time_t ring_exposed(const ah_cost_ctx_t *ctx, int type, layer_time_t attn) {
    const int cp = ah_cost_cp(ctx);
    if (cp <= 1) return (layer_time_t){0, 0};
    const ah_train_t *tr = ctx->train;
    double bw = ctx->cp_bw, lat = ctx->cp_latency_s;
    if (bw <= 0) {
        bw = ah_link_bw(ctx->cluster, AH_LINK_INTRA, type, type);
        lat = ah_link_latency(ctx->cluster, AH_LINK_INTRA);
    }
    const double x = (double)ah_cp_ring_block_bytes(ctx->model, ctx->t, tr->micro_batch, tr->seq_len, cp) / bw + lat;
    return (layer_time_t){(cp - 1) * fmax(0, x - attn.fwd / cp), (cp - 1) * fmax(0, x - attn.bwd / cp) + cp * x};
}

/* The weight-gradient pass's share of a layer kind's backward, by matmul FLOPs (0 without any). */
static double wgrad_share(const ah_model_t *m, ah_layer_kind_t kind, int t, const ah_train_t *tr) {
    const double all = ah_layer_bwd_flops(m, kind, t, tr->micro_batch, tr->seq_len);
    return all > 0 ? ah_layer_wgrad_flops(m, kind, t, tr->micro_batch, tr->seq_len) / all : 0;
}

/* Whether the profile measured this layer kind with its TP all-reduces inside its times. */
static bool measured_with_tp(const ah_profile_entry_t *prof, ah_layer_kind_t kind) {
    return prof && prof->layer[kind].present && prof->includes_tp_comm;
}

/* A stage's bytes (ah_stage_cost's memory fields), per CP rank under context parallelism (its
 * T / cp tokens of each sequence, the ring's buffers). */
static void stage_memory(const ah_cost_ctx_t *ctx, const ah_gpu_type_t *g, int64_t n_blocks, bool has_embed,
                         bool has_head, bool recompute, ah_stage_cost_t *out) {
    const ah_model_t *m = ctx->model;
    const ah_train_t *tr = ctx->train;
    const int t = ctx->t, cp = ah_cost_cp(ctx);
    const int64_t elt = ah_precision_elt_bytes(tr->precision), N = tr->micro_batch * (tr->seq_len / cp);
    const int64_t b = tr->micro_batch, T = tr->seq_len;
    const int64_t act_full = ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, cp, tr->precision, false);
    out->act_bytes_per_mb = n_blocks * ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, cp, tr->precision, recompute) +
                            (has_embed ? ah_layer_act_bytes_cp(m, AH_LAYER_EMBED, t, b, T, cp, tr->precision, false) : 0) +
                            (has_head ? ah_layer_act_bytes_cp(m, AH_LAYER_HEAD, t, b, T, cp, tr->precision, false) : 0);
    out->wgrad_keep_bytes = n_blocks * ah_layer_wgrad_keep_bytes(m, t, b, T / cp, tr->precision, recompute);
    /* Stage 0 holds the embedding and the last stage the head, so a stage has a neighbour before
     * it unless it has the embedding, and one after it unless it has the head. */
    const int64_t neighbours = (has_embed ? 0 : 1) + (has_head ? 0 : 1);
    out->shared_bytes = (n_blocks > 0 ? act_full : 0)                /* backward workspace */
                        + (n_blocks > 0 && recompute ? act_full : 0) /* recompute buffer */
                        + (n_blocks > 0 ? ah_cp_ring_bytes(m, t, b, T, cp, tr->precision) : 0) /* the ring's */
                        + (int64_t)llround(g->reserved_gib * GIB);
    out->fixed_bytes = out->shared_bytes + neighbours * 2 * N * m->d_model * elt; /* p2p send + receive */
}

void ah_stage_cost(const ah_cost_ctx_t *ctx, int type, int first, int last, bool has_embed,
                   bool has_head, bool recompute, ah_stage_cost_t *out) {
    const ah_model_t *m = ctx->model;
    const ah_train_t *tr = ctx->train;
    const ah_gpu_type_t *g = &ctx->cluster->types[type];
    const int t = ctx->t, cp = ah_cost_cp(ctx);
    const int64_t n_blocks = last > first ? last - first : 0;
    const int64_t N = tr->micro_batch * (tr->seq_len / cp); /* this rank's tokens */
    const int64_t elt = ah_precision_elt_bytes(tr->precision);
    const ah_profile_entry_t *prof = profile_entry(ctx, type);

    /* Parameters. A tied head on a stage without the embedding keeps its own copy of its rows of
     * the V x C matrix (Megatron-style); their gradient is summed with the embedding's in the DP
     * sync. */
    const int64_t p_block = ah_layer_params(m, AH_LAYER_BLOCK, t);
    const int64_t p_embed = ah_layer_params(m, AH_LAYER_EMBED, t);
    const int64_t p_head = ah_layer_params(m, AH_LAYER_HEAD, t);
    const int64_t tied_copy = has_head && !has_embed ? ah_tied_params(m, t) : 0;
    out->params = n_blocks * p_block + (has_embed ? p_embed : 0) + (has_head ? p_head + tied_copy : 0);
    out->state_bytes = out->params * ah_param_state_bytes(tr->precision);
    if (tr->opt_shard_over > 1) { /* even parts: at most ceil(group / n) of each of its groups */
        const int64_t opt = ah_optimizer_state_bytes(tr->precision), groups = n_blocks + 3;
        out->state_bytes -= out->params * opt;
        out->state_bytes += ((out->params + tr->opt_shard_over - 1) / tr->opt_shard_over + groups) * opt;
    }

    /* Time. All blocks are alike, so one block's time times the count. The tied head reads its
     * Vp/t x C rows of the matrix even when the embedding owns them, so its roofline counts those
     * bytes too. */
    const layer_time_t blk = layer_time(ctx, prof, g, AH_LAYER_BLOCK, p_block);
    double fwd = (double)n_blocks * blk.fwd;
    double bwd = (double)n_blocks * blk.bwd;
    if (recompute) bwd += (double)n_blocks * blk.fwd; /* backward redoes the blocks' forward */
    /* W: measured apart when the profile has it, else the weight GEMMs' share of the FLOPs */
    const bool w_measured = prof && prof->layer[AH_LAYER_BLOCK].present && prof->layer[AH_LAYER_BLOCK].wgrad_s > 0;
    double wgrad = (double)n_blocks * (w_measured ? prof->layer[AH_LAYER_BLOCK].wgrad_s
                                                  : blk.bwd * wgrad_share(m, AH_LAYER_BLOCK, t, tr));
    /* The embedding's and the head's backward stay in B, as the runtime runs them (runtime/gpt.h
     * ah_gpt_backward's rule: the embedding's scatter-add is cheap, the head matrix's gradient is
     * computed in the forward). */
    if (has_embed) {
        layer_time_t e = layer_time(ctx, prof, g, AH_LAYER_EMBED, p_embed);
        fwd += e.fwd;
        bwd += e.bwd;
    }
    if (has_head) {
        layer_time_t h = layer_time(ctx, prof, g, AH_LAYER_HEAD, p_head + ah_tied_params(m, t));
        fwd += h.fwd;
        bwd += h.bwd;
    }
    out->wgrad_s = wgrad;
    /* TP comm, over the node's link (0 for t = 1): 2 all-reduces of the N x C activation per
     * block forward (after attention-out and MLP-out) and 2 backward (before QKV and MLP-in); the
     * vocabulary-parallel embedding's output (N x C) forward; the head's softmax statistics
     * forward (the max, N fp32, then the sums, 2N fp32) and its input gradient (N x C) backward.
     * A layer kind the profile measured with its all-reduces inside has none added. */
    const double bw = ah_link_bw(ctx->cluster, AH_LINK_INTRA, type, type);
    const double lat = ah_link_latency(ctx->cluster, AH_LINK_INTRA);
    const double ar_nc = ah_allreduce_seconds((double)(N * m->d_model * elt), t, bw, lat);
    const double ar_blk = measured_with_tp(prof, AH_LAYER_BLOCK) ? 0 : ar_nc;
    out->tp_comm_fwd_s = (double)n_blocks * 2 * ar_blk;
    out->tp_comm_bwd_s = (double)n_blocks * 2 * ar_blk * (recompute ? 2 : 1);
    if (has_embed && !measured_with_tp(prof, AH_LAYER_EMBED)) out->tp_comm_fwd_s += ar_nc;
    if (has_head && !measured_with_tp(prof, AH_LAYER_HEAD)) {
        out->tp_comm_fwd_s += ah_allreduce_seconds((double)(N * 4), t, bw, lat) +
                              ah_allreduce_seconds((double)(2 * N * 4), t, bw, lat);
        out->tp_comm_bwd_s += ar_nc;
    }
    const layer_time_t ring = ring_exposed(ctx, type, attention_time(ctx, prof, g, blk));
    out->cp_comm_fwd_s = (double)n_blocks * ring.fwd;
    out->cp_comm_bwd_s = (double)n_blocks * (ring.bwd + (recompute ? ring.fwd : 0));
    out->fwd_s = fwd + out->tp_comm_fwd_s + out->cp_comm_fwd_s;
    out->bwd_s = bwd + out->tp_comm_bwd_s + out->cp_comm_bwd_s;

    stage_memory(ctx, g, n_blocks, has_embed, has_head, recompute, out);
}
