/* GPT-2 training steps on one GPU through the CUDA backend's kernel table: tokens/s and model
 * FLOPs utilisation, for scripts/gpu-check.sh (beside bench/bench_gpu_torch.py on the same GPU).
 *
 *   bench_gpu_gpt2 --layers L --d C --heads H --seq-len T --batch B [--vocab V] [--steps S]
 *                  [--precision fp32|bf16] [--peak-tflops P]
 * prints one JSON line. A kernel benchmark, not the trainer: one GPU, no plan, no MPI; it drives
 * the same per-block sequence of table calls as src/runtime/gpt.c on device buffers. Random
 * tokens, random init; loss is printed only as a sanity check (about ln V at step 1). */
#include <stdio.h>

#ifndef AH_HAVE_CUDA
int main(void) {
    fprintf(stderr, "bench_gpu_gpt2: this build has no CUDA backend (configure with -DAH_CUDA=ON)\n");
    return 2;
}
#else
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "kernels/cuda/kernels_cuda.h"
#include "runtime/mem.h"

enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B, NP };

typedef struct {
    int L, C, H, T, B, V, F;
    size_t off[NP], per_layer, wte, wpe, lnf_w, lnf_b, total;
} cfg_t;

typedef struct { /* one block's saved activations */
    float *x_in, *ln1, *m1, *r1, *qkv, *att, *lse, *x_mid, *ln2, *m2, *r2, *fch, *fchg;
} acts_t;

static ah_arena_t arena;
static ah_error_t err;

static float *dalloc(size_t n, const char *name) {
    float *p = NULL;
    if (ah_arena_floats(&arena, (int64_t)n, name, &p, &err) != AH_OK) {
        fprintf(stderr, "bench_gpu_gpt2: %s\n", err.msg);
        exit(1);
    }
    return p;
}

static void layout(cfg_t *c) {
    const size_t C = (size_t)c->C, F = (size_t)c->F;
    const size_t sizes[NP] = {C, C, 3 * C * C, 3 * C, C * C, C, C, C, F * C, F, C * F, C};
    size_t o = 0;
    for (int i = 0; i < NP; i++) c->off[i] = o, o += sizes[i];
    c->per_layer = o;
    c->wte = o * (size_t)c->L;
    c->wpe = c->wte + (size_t)c->V * C;
    c->lnf_w = c->wpe + (size_t)c->T * C;
    c->lnf_b = c->lnf_w + C;
    c->total = c->lnf_b + C;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    cfg_t c = {.L = 12, .C = 768, .H = 12, .T = 1024, .B = 8, .V = 50257};
    int steps = 10;
    double peak = 989.0; /* H100/H200 SXM dense bf16 TFLOP/s */
    const char *prec = "bf16";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *f = argv[i], *v = argv[i + 1];
        if (!strcmp(f, "--layers")) c.L = atoi(v);
        else if (!strcmp(f, "--d")) c.C = atoi(v);
        else if (!strcmp(f, "--heads")) c.H = atoi(v);
        else if (!strcmp(f, "--seq-len")) c.T = atoi(v);
        else if (!strcmp(f, "--batch")) c.B = atoi(v);
        else if (!strcmp(f, "--vocab")) c.V = atoi(v);
        else if (!strcmp(f, "--steps")) steps = atoi(v);
        else if (!strcmp(f, "--precision")) prec = v;
        else if (!strcmp(f, "--peak-tflops")) peak = atof(v);
        else {
            fprintf(stderr, "bench_gpu_gpt2: unknown flag %s\n", f);
            return 2;
        }
    }
    if (ah_cuda_init(-1, &err) != AH_OK) {
        fprintf(stderr, "bench_gpu_gpt2: %s\n", err.msg);
        return 1;
    }
    const int bf16 = !strcmp(prec, "bf16");
    const ah_kernels_t *k = bf16 ? ah_kernels_cuda_bf16() : ah_kernels_cuda();
    c.F = 4 * c.C;
    layout(&c);
    const int L = c.L, C = c.C, H = c.H, T = c.T, B = c.B, V = c.V, F = c.F, hd = C / H;
    const int N = B * T;
    const size_t NC = (size_t)N * C;

    ah_mem_t mem;
    char dev_name[128];
    ah_cuda_device_name(dev_name, sizeof dev_name);
    ah_mem_init(&mem, 0, dev_name);
    mem.space = ah_backend_find("cuda")->space;
    ah_arena_init(&arena, &mem, "bench");

    /* Parameters: N(0, 0.02)-ish uniform of the same variance; LayerNorm weights 1. */
    float *h = malloc(c.total * sizeof *h);
    uint64_t s = 42;
    for (size_t i = 0; i < c.total; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = ((float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f) * 0.0346f;
    }
    for (int l = 0; l <= L; l++) {
        float *w = l < L ? h + (size_t)l * c.per_layer : NULL;
        for (int i = 0; i < C; i++) {
            if (w) w[c.off[LN1_W] + i] = w[c.off[LN2_W] + i] = 1.0f;
            else h[c.lnf_w + i] = 1.0f;
        }
    }
    float *W = dalloc(c.total, "weights"), *G = dalloc(c.total, "gradients");
    float *M = dalloc(c.total, "AdamW m"), *Vv = dalloc(c.total, "AdamW v");
    ah_cuda_upload(W, h, c.total * sizeof *h, &err);
    free(h);
    int32_t *tok_h = malloc((size_t)(N + 1) * sizeof *tok_h);
    for (int i = 0; i <= N; i++) tok_h[i] = (int32_t)((unsigned)(i * 2654435761u) % (unsigned)V);
    int32_t *tok = NULL;
    ah_arena_alloc(&arena, (int64_t)(N + 1) * 4, "tokens", (void **)&tok, &err);
    ah_cuda_upload(tok, tok_h, (size_t)(N + 1) * sizeof *tok_h, &err);
    free(tok_h);

    acts_t *a = calloc((size_t)L + 1, sizeof *a);
    for (int l = 0; l <= L; l++) {
        a[l].x_in = dalloc(NC, "x_in");
        if (l == L) break;
        a[l].ln1 = dalloc(NC, "ln1"), a[l].m1 = dalloc(N, "m1"), a[l].r1 = dalloc(N, "r1");
        a[l].qkv = dalloc(3 * NC, "qkv"), a[l].att = dalloc(NC, "att");
        a[l].lse = dalloc((size_t)B * H * T, "lse"), a[l].x_mid = dalloc(NC, "x_mid");
        a[l].ln2 = dalloc(NC, "ln2"), a[l].m2 = dalloc(N, "m2"), a[l].r2 = dalloc(N, "r2");
        a[l].fch = dalloc((size_t)N * F, "fch"), a[l].fchg = dalloc((size_t)N * F, "fchg");
    }
    float *lnf = dalloc(NC, "ln_f"), *mf = dalloc(N, "mf"), *rf = dalloc(N, "rf");
    float *logits = dalloc((size_t)N * V, "logits"), *dlnf = dalloc(NC, "dln_f");
    float *dres = dalloc(NC, "dres"), *tmp = dalloc(NC, "tmp"), *datt = dalloc(NC, "datt");
    float *dqkv = dalloc(3 * NC, "dqkv"), *dfch = dalloc((size_t)N * F, "dfch");
    float *dfchg = dalloc((size_t)N * F, "dfchg");
    float *scratch = dalloc(k->attention_scratch_floats(B, T, H, H, hd), "attention scratch");
    const ah_adamw_hparams_t hp = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                   .weight_decay = 0.0f};
    double loss = 0.0, t_start = 0.0;
    const int warmup = 2;
    for (int step = 0; step < warmup + steps; step++) {
        if (step == warmup) {
            if (ah_cuda_synchronize(&err) != AH_OK) break;
            t_start = now();
        }
        k->zero(G, c.total);
        k->embedding_fwd(a[0].x_in, tok, W + c.wte, W + c.wpe, B, T, C, 0, V);
        for (int l = 0; l < L; l++) {
            const float *w = W + (size_t)l * c.per_layer;
            acts_t *x = &a[l];
            k->layernorm_fwd(x->ln1, x->m1, x->r1, x->x_in, w + c.off[LN1_W], w + c.off[LN1_B], N, C, 1e-5f);
            k->matmul_fwd(x->qkv, x->ln1, w + c.off[QKV_W], w + c.off[QKV_B], N, C, 3 * C);
            k->attention_fwd(x->att, x->lse, scratch, x->qkv, B, T, H, H, hd);
            k->matmul_fwd(tmp, x->att, w + c.off[PROJ_W], w + c.off[PROJ_B], N, C, C);
            k->residual_fwd(x->x_mid, x->x_in, tmp, NC);
            k->layernorm_fwd(x->ln2, x->m2, x->r2, x->x_mid, w + c.off[LN2_W], w + c.off[LN2_B], N, C, 1e-5f);
            k->matmul_fwd(x->fch, x->ln2, w + c.off[FC_W], w + c.off[FC_B], N, C, F);
            k->gelu_fwd(x->fchg, x->fch, (size_t)N * F);
            k->matmul_fwd(tmp, x->fchg, w + c.off[FCP_W], w + c.off[FCP_B], N, F, C);
            k->residual_fwd(a[l + 1].x_in, x->x_mid, tmp, NC);
        }
        k->layernorm_fwd(lnf, mf, rf, a[L].x_in, W + c.lnf_w, W + c.lnf_b, N, C, 1e-5f);
        k->zero(dlnf, NC);
        /* the head: logits, cross-entropy (its row statistics in tmp), dln_f and dwte */
        float *rowmax = tmp, *stats = tmp + N;
        k->matmul_fwd(logits, lnf, W + c.wte, NULL, N, C, V);
        k->xent_max(rowmax, logits, N, V, V);
        k->xent_stats(stats, logits, rowmax, tok + 1, N, V, V, 0);
        loss = k->xent_grad(logits, rowmax, stats, tok + 1, 1.0f / (float)N, N, V, V, 0) / N;
        k->matmul_bwd(dlnf, G + c.wte, NULL, logits, lnf, W + c.wte, N, C, V);
        k->zero(dres, NC);
        k->layernorm_bwd(dres, G + c.lnf_w, G + c.lnf_b, dlnf, a[L].x_in, W + c.lnf_w, mf, rf, N, C);
        for (int l = L - 1; l >= 0; l--) {
            const float *w = W + (size_t)l * c.per_layer;
            float *g = G + (size_t)l * c.per_layer;
            acts_t *x = &a[l];
            k->zero(dfchg, (size_t)N * F);
            k->matmul_bwd(dfchg, g + c.off[FCP_W], g + c.off[FCP_B], dres, x->fchg, w + c.off[FCP_W], N, F, C);
            k->zero(dfch, (size_t)N * F);
            k->gelu_bwd(dfch, dfchg, x->fch, (size_t)N * F);
            k->zero(tmp, NC);
            k->matmul_bwd(tmp, g + c.off[FC_W], g + c.off[FC_B], dfch, x->ln2, w + c.off[FC_W], N, C, F);
            k->layernorm_bwd(dres, g + c.off[LN2_W], g + c.off[LN2_B], tmp, x->x_mid, w + c.off[LN2_W], x->m2, x->r2, N, C);
            k->zero(datt, NC);
            k->matmul_bwd(datt, g + c.off[PROJ_W], g + c.off[PROJ_B], dres, x->att, w + c.off[PROJ_W], N, C, C);
            k->zero(dqkv, 3 * NC);
            k->attention_bwd(dqkv, scratch, datt, x->qkv, x->att, x->lse, B, T, H, H, hd);
            k->zero(tmp, NC);
            k->matmul_bwd(tmp, g + c.off[QKV_W], g + c.off[QKV_B], dqkv, x->ln1, w + c.off[QKV_W], N, C, 3 * C);
            k->layernorm_bwd(dres, g + c.off[LN1_W], g + c.off[LN1_B], tmp, x->x_in, w + c.off[LN1_W], x->m1, x->r1, N, C);
        }
        k->embedding_bwd(G + c.wte, G + c.wpe, dres, tok, B, T, C, 0, V);
        const double norm = sqrt(k->sum_squares(G, c.total));
        k->adamw(W, G, M, Vv, c.total, &hp, norm > 1.0 ? (float)(1.0 / norm) : 1.0f, step + 1);
        if (step == 0) fprintf(stderr, "step 1 loss %.4f (ln V = %.4f)\n", loss, log((double)V));
    }
    if (ah_cuda_check(&err) != AH_OK) {
        fprintf(stderr, "bench_gpu_gpt2: %s\n", err.msg);
        return 1;
    }
    const double dt = (now() - t_start) / steps;
    /* Model FLOPs per token as nanoGPT/PaLM count them: 6 x parameters (the position table
     * excluded) + 12 L C T for attention (no causal halving). */
    const double n_params = (double)(c.total - (size_t)T * C);
    const double flops_tok = 6.0 * n_params + 12.0 * L * (double)C * T;
    const double tok_s = (double)N / dt;
    int64_t used = 0, total = 0;
    ah_cuda_device_memory(&used, &total, &err);
    printf("{\"impl\":\"autohet-cuda\",\"precision\":\"%s\",\"layers\":%d,\"d\":%d,\"heads\":%d,"
           "\"seq_len\":%d,\"batch\":%d,\"vocab\":%d,\"params\":%.0f,\"step_s\":%.5f,"
           "\"tokens_per_s\":%.0f,\"mfu\":%.4f,\"peak_tflops\":%.0f,\"loss\":%.4f,"
           "\"tracked_high_mib\":%.1f,\"device_used_mib\":%.1f,\"device\":\"%s\"}\n",
           prec, L, C, H, T, B, V, n_params, dt, tok_s, tok_s * flops_tok / (peak * 1e12), peak,
           loss, (double)mem.high / 1048576.0, (double)used / 1048576.0, dev_name);
    ah_arena_free(&arena);
    free(a);
    return 0;
}
#endif
