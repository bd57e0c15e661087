/* The CUDA backend against the CPU backend on random inputs, kernel by kernel: fp32 within 1e-5
 * and the bf16 table's matmuls within 1e-2, the fp16 table's within 2e-3 (max-norm relative error:
 * max |gpu - cpu| / max |cpu|), and fp16's overflow past 65504 reaching sum_squares as non-finite;
 * ring attention and the kernels by position (context parallelism) within 1e-5 in every table.
 * Gradient outputs start non-zero, so the "+=" contract is checked too. Also the tracked device
 * allocator (cap, high-water mark, out-of-memory message) and error reporting.
 *
 * Exits 77 (CTest: skipped) with the reason when the build has no CUDA backend or the machine
 * has no usable GPU. */
#include <stdio.h>

#include "harness.h"

#ifndef AH_HAVE_CUDA
int main(void) {
    printf("SKIP: this build has no CUDA backend (configure with -DAH_CUDA=ON on a machine with "
           "the CUDA toolkit; see docs/gpu.md)\n");
    return 77;
}
#else
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "kernels/cuda/kernels_cuda.h"
#include "runtime/mem.h"

static ah_mem_t mem;
static ah_arena_t arena;
static ah_error_t err;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float urand(void) { /* uniform in [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float *host_rand(size_t n, float amp) {
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = urand() * amp;
    return h;
}

/* A device copy of host data (or zeros when h is NULL), from the tracked arena. */
static void *dev_bytes(const void *h, size_t bytes) {
    void *d = NULL;
    if (ah_arena_alloc(&arena, (int64_t)bytes, "test buffer", &d, &err) != AH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    if (h && ah_cuda_upload(d, h, bytes, &err) != AH_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return d;
}
static float *dev(const float *h, size_t n) { return dev_bytes(h, n * sizeof(float)); }

static void expect_close(const char *what, const float *d, const float *ref, size_t n, double tol) {
    float *got = malloc(n * sizeof *got);
    CHECK(ah_cuda_download(got, d, n * sizeof *got, &err) == AH_OK, "%s: download: %s", what,
          err.msg);
    double max_diff = 0.0, max_ref = 0.0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i])) finite = 0;
        const double diff = fabs((double)got[i] - ref[i]);
        if (diff > max_diff) max_diff = diff;
        if (fabs(ref[i]) > max_ref) max_ref = fabs(ref[i]);
    }
    const double rel = max_ref > 0 ? max_diff / max_ref : max_diff;
    printf("  %-28s rel err %.3g (tol %.0e)\n", what, rel, tol);
    CHECK(finite && rel <= tol, "%s: max relative error %g > %g (or non-finite)", what, rel, tol);
    free(got);
}

static void check_clean(const char *what) {
    CHECK(ah_cuda_check(&err) == AH_OK, "%s: %s", what, err.msg);
}

static void test_matmul(const ah_kernels_t *cpu, const ah_kernels_t *gpu, double tol) {
    const int N = 134, IC = 96, OC = 80;
    float *inp = host_rand((size_t)N * IC, 1), *w = host_rand((size_t)OC * IC, 0.5f);
    float *bias = host_rand(OC, 1), *dout = host_rand((size_t)N * OC, 1);
    float *out = host_rand((size_t)N * OC, 1);
    float *dinp = host_rand((size_t)N * IC, 1), *dw = host_rand((size_t)OC * IC, 1);
    float *dbias = host_rand(OC, 1);
    float *d_inp = dev(inp, (size_t)N * IC), *d_w = dev(w, (size_t)OC * IC), *d_bias = dev(bias, OC);
    float *d_dout = dev(dout, (size_t)N * OC), *d_out = dev(NULL, (size_t)N * OC);
    float *d_dinp = dev(dinp, (size_t)N * IC), *d_dw = dev(dw, (size_t)OC * IC);
    float *d_dbias = dev(dbias, OC);

    cpu->matmul_fwd(out, inp, w, bias, N, IC, OC);
    gpu->matmul_fwd(d_out, d_inp, d_w, d_bias, N, IC, OC);
    expect_close("matmul_fwd (bias)", d_out, out, (size_t)N * OC, tol);
    cpu->matmul_fwd(out, inp, w, NULL, N, IC, OC);
    gpu->matmul_fwd(d_out, d_inp, d_w, NULL, N, IC, OC);
    expect_close("matmul_fwd (no bias)", d_out, out, (size_t)N * OC, tol);

    cpu->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, IC, OC);
    gpu->matmul_bwd(d_dinp, d_dw, d_dbias, d_dout, d_inp, d_w, N, IC, OC);
    expect_close("matmul_bwd dinp", d_dinp, dinp, (size_t)N * IC, tol);
    expect_close("matmul_bwd dw", d_dw, dw, (size_t)OC * IC, tol);
    expect_close("matmul_bwd dbias", d_dbias, dbias, OC, 1e-5); /* fp32 in both tables */
    /* zero-bubble's split backward: B (dinp, dbias) then W (dw alone), against the CPU's whole one */
    cpu->matmul_bwd(dinp, dw, dbias, dout, inp, w, N, IC, OC);
    gpu->matmul_bwd(d_dinp, NULL, d_dbias, d_dout, d_inp, d_w, N, IC, OC);
    gpu->matmul_bwd(NULL, d_dw, NULL, d_dout, d_inp, d_w, N, IC, OC);
    expect_close("split matmul_bwd dinp", d_dinp, dinp, (size_t)N * IC, tol);
    expect_close("split matmul_bwd dw", d_dw, dw, (size_t)OC * IC, tol);
    expect_close("split matmul_bwd dbias", d_dbias, dbias, OC, 1e-5);
    check_clean("matmul");
    free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(dbias);
}

/* A scaled gradient past fp16's 65504 becomes inf in the fp16 table's backward (the overflow loss
 * scaling exists for), and sum_squares, the runtime's overflow check, reports it; the same values
 * stay finite in fp32. */
static void test_fp16_overflow(const ah_kernels_t *fp16) {
    const int N = 4, IC = 8, OC = 8;
    float *inp = host_rand((size_t)N * IC, 1), *w = host_rand((size_t)OC * IC, 1), *dout = host_rand((size_t)N * OC, 1);
    dout[5] = 1e5f; /* representable in fp32, not in fp16 */
    float *d_inp = dev(inp, (size_t)N * IC), *d_w = dev(w, (size_t)OC * IC), *d_dout = dev(dout, (size_t)N * OC);
    float *d_dw = dev(NULL, (size_t)OC * IC);
    fp16->matmul_bwd(NULL, d_dw, NULL, d_dout, d_inp, d_w, N, IC, OC);
    CHECK(!isfinite(fp16->sum_squares(d_dw, (size_t)OC * IC)), "fp16: a gradient past 65504 is seen as overflow");
    dout[5] = 1e4f; /* fits */
    float *d_dout2 = dev(dout, (size_t)N * OC), *d_dw2 = dev(NULL, (size_t)OC * IC);
    fp16->matmul_bwd(NULL, d_dw2, NULL, d_dout2, d_inp, d_w, N, IC, OC);
    CHECK(isfinite(fp16->sum_squares(d_dw2, (size_t)OC * IC)), "fp16: a gradient under 65504 is finite");
    check_clean("fp16 overflow");
    free(inp), free(w), free(dout);
}

static void test_pointwise(const ah_kernels_t *cpu, const ah_kernels_t *gpu) {
    const int N = 77, C = 200;
    const size_t n = (size_t)N * C;
    float *x = host_rand(n, 2), *y = host_rand(n, 1), *dy = host_rand(n, 1), *dx = host_rand(n, 1);
    float *wt = host_rand(C, 1), *bs = host_rand(C, 1), *dwt = host_rand(C, 1), *dbs = host_rand(C, 1);
    float mean[77], rstd[77];
    for (size_t i = 0; i < n; i++) x[i] += 3.0f; /* a non-zero mean, as the two-pass form expects */
    float *d_x = dev(x, n), *d_y = dev(y, n), *d_dy = dev(dy, n), *d_dx = dev(dx, n);
    float *d_wt = dev(wt, C), *d_bs = dev(bs, C), *d_dwt = dev(dwt, C), *d_dbs = dev(dbs, C);
    float *d_mean = dev(NULL, N), *d_rstd = dev(NULL, N);

    cpu->layernorm_fwd(y, mean, rstd, x, wt, bs, N, C, 1e-5f);
    gpu->layernorm_fwd(d_y, d_mean, d_rstd, d_x, d_wt, d_bs, N, C, 1e-5f);
    expect_close("layernorm_fwd out", d_y, y, n, 1e-5);
    expect_close("layernorm_fwd mean", d_mean, mean, N, 1e-5);
    expect_close("layernorm_fwd rstd", d_rstd, rstd, N, 1e-5);
    cpu->layernorm_bwd(dx, dwt, dbs, dy, x, wt, mean, rstd, N, C);
    gpu->layernorm_bwd(d_dx, d_dwt, d_dbs, d_dy, d_x, d_wt, d_mean, d_rstd, N, C);
    expect_close("layernorm_bwd dinp", d_dx, dx, n, 1e-5);
    expect_close("layernorm_bwd dweight", d_dwt, dwt, C, 1e-5);
    expect_close("layernorm_bwd dbias", d_dbs, dbs, C, 1e-5);

    cpu->gelu_fwd(y, x, n);
    gpu->gelu_fwd(d_y, d_x, n);
    expect_close("gelu_fwd", d_y, y, n, 1e-5);
    cpu->gelu_bwd(dx, dy, x, n);
    gpu->gelu_bwd(d_dx, d_dy, d_x, n);
    expect_close("gelu_bwd", d_dx, dx, n, 1e-5);

    cpu->residual_fwd(y, x, dy, n);
    gpu->residual_fwd(d_y, d_x, d_dy, n);
    expect_close("residual_fwd", d_y, y, n, 1e-5);
    cpu->residual_bwd(dx, x, dy, n);
    gpu->residual_bwd(d_dx, d_x, d_dy, n);
    expect_close("residual_bwd da", d_dx, dx, n, 1e-5);
    expect_close("residual_bwd db", d_x, x, n, 1e-5);

    cpu->zero(y, n);
    gpu->zero(d_y, n);
    expect_close("zero", d_y, y, n, 0);
    check_clean("pointwise");
    free(x), free(y), free(dy), free(dx), free(wt), free(bs), free(dwt), free(dbs);
}

/* LLaMA's ops: RMS norm, SwiGLU (F = 100 of a (77, 200) gate/up buffer) and the rotary embedding
 * on the q and k heads of strided GQA qkv rows (Hl = 4, KVl = 2, hd = 16). */
static void test_llama_ops(const ah_kernels_t *cpu, const ah_kernels_t *gpu) {
    const int N = 77, C = 200, F = C / 2;
    const size_t n = (size_t)N * C;
    float *x = host_rand(n, 2), *y = host_rand(n, 1), *dy = host_rand(n, 1), *dx = host_rand(n, 1);
    float *wt = host_rand(C, 1), *dwt = host_rand(C, 1), rstd[77];
    float *d_x = dev(x, n), *d_y = dev(y, n), *d_dy = dev(dy, n), *d_dx = dev(dx, n);
    float *d_wt = dev(wt, C), *d_dwt = dev(dwt, C), *d_rstd = dev(NULL, N);

    cpu->rmsnorm_fwd(y, rstd, x, wt, N, C, 1e-5f);
    gpu->rmsnorm_fwd(d_y, d_rstd, d_x, d_wt, N, C, 1e-5f);
    expect_close("rmsnorm_fwd out", d_y, y, n, 1e-5);
    expect_close("rmsnorm_fwd rstd", d_rstd, rstd, N, 1e-5);
    cpu->rmsnorm_bwd(dx, dwt, dy, x, wt, rstd, N, C);
    gpu->rmsnorm_bwd(d_dx, d_dwt, d_dy, d_x, d_wt, d_rstd, N, C);
    expect_close("rmsnorm_bwd dinp", d_dx, dx, n, 1e-5);
    expect_close("rmsnorm_bwd dweight", d_dwt, dwt, C, 1e-5);
    cpu->rmsnorm_bwd(NULL, dwt, dy, x, wt, rstd, N, C);
    gpu->rmsnorm_bwd(NULL, d_dwt, d_dy, d_x, d_wt, d_rstd, N, C);
    expect_close("rmsnorm_bwd dweight only", d_dwt, dwt, C, 1e-5);

    cpu->swiglu_fwd(y, x, N, F);
    gpu->swiglu_fwd(d_y, d_x, N, F);
    expect_close("swiglu_fwd", d_y, y, (size_t)N * F, 1e-5);
    cpu->swiglu_bwd(dx, dy, x, N, F);
    gpu->swiglu_bwd(d_dx, d_dy, d_x, N, F);
    expect_close("swiglu_bwd", d_dx, dx, n, 1e-5);

    const int B = 2, T = 75, Hl = 4, KVl = 2, hd = 16, stride = (Hl + 2 * KVl) * hd;
    const size_t nq = (size_t)B * T * stride;
    float *q = host_rand(nq, 1), *d_q = dev(q, nq);
    cpu->rope_fwd(q, B, T, Hl + KVl, hd, stride, (ah_rope_t){.theta = 10000.0f});
    gpu->rope_fwd(d_q, B, T, Hl + KVl, hd, stride, (ah_rope_t){.theta = 10000.0f});
    expect_close("rope_fwd", d_q, q, nq, 1e-5);
    /* the backward with LLaMA 3.1's scaling (kept, blended and divided frequencies at hd 16) */
    const ah_rope_t scaled = {.theta = 500000.0f, .factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                              .original_max_pos = 64.0f};
    cpu->rope_bwd(q, B, T, Hl + KVl, hd, stride, scaled);
    gpu->rope_bwd(d_q, B, T, Hl + KVl, hd, stride, scaled);
    expect_close("rope_bwd", d_q, q, nq, 1e-5);
    check_clean("llama ops");
    free(x), free(y), free(dy), free(dx), free(wt), free(dwt), free(q);
}

static void test_embedding(const ah_kernels_t *cpu, const ah_kernels_t *gpu) {
    const int B = 3, T = 40, C = 72, V = 50, P = 64;
    int32_t tok[3 * 40];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)((urand() + 1.0f) * 0.5f * 7) % V; /* repeats */
    float *wte = host_rand((size_t)V * C, 1), *wpe = host_rand((size_t)P * C, 1);
    float *out = host_rand((size_t)B * T * C, 1), *dout = host_rand((size_t)B * T * C, 1);
    float *dwte = host_rand((size_t)V * C, 1), *dwpe = host_rand((size_t)P * C, 1);
    int32_t *d_tok = dev_bytes(tok, sizeof tok);
    float *d_wte = dev(wte, (size_t)V * C), *d_wpe = dev(wpe, (size_t)P * C);
    float *d_out = dev(NULL, (size_t)B * T * C), *d_dout = dev(dout, (size_t)B * T * C);
    float *d_dwte = dev(dwte, (size_t)V * C), *d_dwpe = dev(dwpe, (size_t)P * C);
    cpu->embedding_fwd(out, tok, wte, wpe, B, T, C, 0, V);
    gpu->embedding_fwd(d_out, d_tok, d_wte, d_wpe, B, T, C, 0, V);
    expect_close("embedding_fwd", d_out, out, (size_t)B * T * C, 1e-5);
    cpu->embedding_bwd(dwte, dwpe, dout, tok, B, T, C, 0, V);
    gpu->embedding_bwd(d_dwte, d_dwpe, d_dout, d_tok, B, T, C, 0, V);
    expect_close("embedding_bwd dwte", d_dwte, dwte, (size_t)V * C, 1e-5);
    expect_close("embedding_bwd dwpe", d_dwpe, dwpe, (size_t)P * C, 1e-5);
    /* a rank's range of the vocabulary, rows [4, 4 + 20), without wpe */
    cpu->embedding_fwd(out, tok, wte, NULL, B, T, C, 4, 20);
    gpu->embedding_fwd(d_out, d_tok, d_wte, NULL, B, T, C, 4, 20);
    expect_close("embedding_fwd range, no wpe", d_out, out, (size_t)B * T * C, 1e-5);
    cpu->embedding_bwd(dwte, NULL, dout, tok, B, T, C, 4, 20);
    gpu->embedding_bwd(d_dwte, NULL, d_dout, d_tok, B, T, C, 4, 20);
    expect_close("embedding_bwd range dwte", d_dwte, dwte, (size_t)V * C, 1e-5);
    check_clean("embedding");
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}

/* Attention against the CPU's materialised probabilities: each backend keeps its own state
 * (the CPU the probabilities, CUDA a logsumexp per row), sized by attention_state_floats. */
static void test_attention(const ah_kernels_t *cpu, const ah_kernels_t *gpu, int B, int T, int Hl,
                           int KVl, int hd) {
    char what[96];
    const int Cl = Hl * hd;
    const size_t nqkv = (size_t)B * T * (Hl + 2 * KVl) * hd, nout = (size_t)B * T * Cl;
    const size_t nstate = cpu->attention_state_floats(B, T, Hl, hd);
    float *qkv = host_rand(nqkv, 1.5f), *dout = host_rand(nout, 1), *dqkv = host_rand(nqkv, 1);
    float *out = malloc(nout * sizeof *out), *state = malloc(nstate * sizeof *state);
    float *scratch = malloc(cpu->attention_scratch_floats(B, T, Hl, KVl, hd) * sizeof *scratch);
    float *d_qkv = dev(qkv, nqkv), *d_dout = dev(dout, nout), *d_out = dev(NULL, nout);
    float *d_dqkv = dev(dqkv, nqkv);
    float *d_state = dev(NULL, gpu->attention_state_floats(B, T, Hl, hd));
    float *d_scratch = dev(NULL, gpu->attention_scratch_floats(B, T, Hl, KVl, hd));

    CHECK(gpu->attention_state_floats(B, T, Hl, hd) == (size_t)B * Hl * T,
          "the CUDA attention state is one float per query row");
    cpu->attention_fwd(out, state, scratch, qkv, B, T, Hl, KVl, hd);
    gpu->attention_fwd(d_out, d_state, d_scratch, d_qkv, B, T, Hl, KVl, hd);
    snprintf(what, sizeof what, "attention_fwd T=%d Hl=%d KVl=%d hd=%d", T, Hl, KVl, hd);
    expect_close(what, d_out, out, nout, 1e-5);
    cpu->attention_bwd(dqkv, scratch, dout, qkv, out, state, B, T, Hl, KVl, hd);
    gpu->attention_bwd(d_dqkv, d_scratch, d_dout, d_qkv, d_out, d_state, B, T, Hl, KVl, hd);
    snprintf(what, sizeof what, "attention_bwd T=%d Hl=%d KVl=%d hd=%d", T, Hl, KVl, hd);
    expect_close(what, d_dqkv, dqkv, nqkv, 1e-5);
    check_clean("attention");
    free(qkv), free(dout), free(dqkv), free(out), free(state), free(scratch);
}

/* Ring attention (kernels.h's context-parallel entries) of CP rank `rank` of c: its queries against
 * the c key/value blocks in ring order (random blocks at the other ranks' positions), forward
 * (out, lse) and backward (dqkv, each block's dkv, both starting non-zero), then the packing of the
 * key/value heads and their gradients' return; and the kernels by position (rotary angles, the
 * embedding's position rows). fp32 in every table (the blocks are fp32 activations; tol 1e-5). */
static void test_ring(const ah_kernels_t *cpu, const ah_kernels_t *gpu, int c, int rank, int B, int Tl, int Hl,
                      int KVl, int hd) {
    char what[96];
    const int ld = (Hl + 2 * KVl) * hd, w = 2 * KVl * hd, Cl = Hl * hd;
    const size_t nq = (size_t)B * Tl * ld, nkv = (size_t)B * Tl * w, nout = (size_t)B * Tl * Cl;
    const size_t rows = (size_t)B * Hl * Tl, nscr = cpu->ring_attn_scratch_floats(B, Tl, Tl, Hl, KVl, hd);
    const ah_cp_at_t mine = ah_cp_at(Tl * c, c, rank);
    float *qkv = host_rand(nq, 1.5f), *kv = host_rand(nkv * c, 1.5f), *dout = host_rand(nout, 1);
    float *dqkv = host_rand(nq, 1), *dkv = host_rand(nkv * c, 1), *out = malloc(nout * sizeof *out);
    float *acc = malloc(nout * sizeof *acc), *stats = malloc(2 * rows * sizeof *stats);
    float *lse = malloc(rows * sizeof *lse), *scr = malloc(nscr * sizeof *scr), *pack = malloc(nkv * sizeof *pack);
    float *d_qkv = dev(qkv, nq), *d_kv = dev(kv, nkv * c), *d_dout = dev(dout, nout), *d_dqkv = dev(dqkv, nq);
    float *d_dkv = dev(dkv, nkv * c), *d_out = dev(NULL, nout), *d_acc = dev(NULL, nout);
    float *d_stats = dev(NULL, 2 * rows), *d_lse = dev(NULL, rows), *d_pack = dev(NULL, nkv);
    float *d_scr = dev(NULL, gpu->ring_attn_scratch_floats(B, Tl, Tl, Hl, KVl, hd));
    cpu->ring_attn_init(acc, stats, B, Tl, Hl, hd);
    gpu->ring_attn_init(d_acc, d_stats, B, Tl, Hl, hd);
    for (int s = 0; s < c; s++) {
        const int src = (rank - s + c) % c;
        const ah_cp_at_t at = ah_cp_at(Tl * c, c, src);
        cpu->ring_attn_fwd_block(acc, stats, scr, qkv, mine, kv + src * nkv, at, B, Tl, Tl, Hl, KVl, hd);
        gpu->ring_attn_fwd_block(d_acc, d_stats, d_scr, d_qkv, mine, d_kv + src * nkv, at, B, Tl, Tl, Hl, KVl, hd);
    }
    snprintf(what, sizeof what, "ring fwd stats cp %d rank %d", c, rank);
    expect_close(what, d_stats, stats, 2 * rows, 1e-5);
    cpu->ring_attn_finish(out, lse, acc, stats, B, Tl, Hl, hd);
    gpu->ring_attn_finish(d_out, d_lse, d_acc, d_stats, B, Tl, Hl, hd);
    snprintf(what, sizeof what, "ring fwd out Tl=%d Hl=%d KVl=%d", Tl, Hl, KVl);
    expect_close(what, d_out, out, nout, 1e-5);
    expect_close("ring fwd lse", d_lse, lse, rows, 1e-5);
    for (int s = 0; s < c; s++) {
        const int src = (rank - s + c) % c;
        const ah_cp_at_t at = ah_cp_at(Tl * c, c, src);
        cpu->ring_attn_bwd_block(dqkv, dkv + src * nkv, scr, dout, qkv, out, lse, mine, kv + src * nkv, at, B, Tl,
                                 Tl, Hl, KVl, hd);
        gpu->ring_attn_bwd_block(d_dqkv, d_dkv + src * nkv, d_scr, d_dout, d_qkv, d_out, d_lse, mine,
                                 d_kv + src * nkv, at, B, Tl, Tl, Hl, KVl, hd);
    }
    expect_close("ring bwd dkv (every block)", d_dkv, dkv, nkv * c, 1e-5);
    cpu->ring_kv_pack(pack, qkv, B, Tl, Hl, KVl, hd);
    gpu->ring_kv_pack(d_pack, d_qkv, B, Tl, Hl, KVl, hd);
    expect_close("ring_kv_pack", d_pack, pack, nkv, 1e-5);
    cpu->ring_kv_add(dqkv, dkv, B, Tl, Hl, KVl, hd);
    gpu->ring_kv_add(d_dqkv, d_dkv, B, Tl, Hl, KVl, hd);
    expect_close("ring bwd dqkv, ring_kv_add", d_dqkv, dqkv, nq, 1e-5);
    const ah_rope_t rope = {.theta = 500000.0f, .factor = 8.0f, .low_freq_factor = 1.0f, .high_freq_factor = 4.0f,
                            .original_max_pos = 64.0f};
    cpu->rope_fwd_at(qkv, mine, B, Tl, Hl + KVl, hd, ld, rope);
    gpu->rope_fwd_at(d_qkv, mine, B, Tl, Hl + KVl, hd, ld, rope);
    expect_close("rope_fwd_at", d_qkv, qkv, nq, 1e-5);
    cpu->rope_bwd_at(qkv, ah_cp_at(Tl * c, c, (rank + 1) % c), B, Tl, Hl + KVl, hd, ld, rope);
    gpu->rope_bwd_at(d_qkv, ah_cp_at(Tl * c, c, (rank + 1) % c), B, Tl, Hl + KVl, hd, ld, rope);
    expect_close("rope_bwd_at", d_qkv, qkv, nq, 1e-5);
    check_clean("ring attention");
    free(qkv), free(kv), free(dout), free(dqkv), free(dkv), free(out), free(acc), free(stats), free(lse), free(scr);
    free(pack);
}

/* The embedding at a CP rank's positions: its position rows and their gradient rows. */
static void test_embedding_at(const ah_kernels_t *cpu, const ah_kernels_t *gpu) {
    const int B = 2, c = 4, T = 16, C = 40, V = 30, P = T * c;
    const ah_cp_at_t at = ah_cp_at(T * c, c, 1);
    int32_t tok[2 * 16];
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)((urand() + 1.0f) * 0.5f * 11) % V;
    float *wte = host_rand((size_t)V * C, 1), *wpe = host_rand((size_t)P * C, 1), *out = host_rand((size_t)B * T * C, 1);
    float *dout = host_rand((size_t)B * T * C, 1), *dwte = host_rand((size_t)V * C, 1);
    float *dwpe = host_rand((size_t)P * C, 1);
    int32_t *d_tok = dev_bytes(tok, sizeof tok);
    float *d_wte = dev(wte, (size_t)V * C), *d_wpe = dev(wpe, (size_t)P * C), *d_out = dev(NULL, (size_t)B * T * C);
    float *d_dout = dev(dout, (size_t)B * T * C), *d_dwte = dev(dwte, (size_t)V * C);
    float *d_dwpe = dev(dwpe, (size_t)P * C);
    cpu->embedding_fwd_at(out, tok, wte, wpe, at, B, T, C, 0, V);
    gpu->embedding_fwd_at(d_out, d_tok, d_wte, d_wpe, at, B, T, C, 0, V);
    expect_close("embedding_fwd_at", d_out, out, (size_t)B * T * C, 1e-5);
    cpu->embedding_bwd_at(dwte, dwpe, dout, tok, at, B, T, C, 0, V);
    gpu->embedding_bwd_at(d_dwte, d_dwpe, d_dout, d_tok, at, B, T, C, 0, V);
    expect_close("embedding_bwd_at dwte", d_dwte, dwte, (size_t)V * C, 1e-5);
    expect_close("embedding_bwd_at dwpe", d_dwpe, dwpe, (size_t)P * C, 1e-5);
    check_clean("embedding at positions");
    free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe);
}

/* The LM head of one TP rank as the runtime composes it, on both backends: logits = x @ w^T for
 * the rank's Vl = 301 rows [v0, v0 + Vl) of which nvalid are real, xent_max, xent_stats,
 * xent_grad, then dx and dw by matmul_bwd. With one rank the group reductions are nothing; the
 * statistics are compared as a group would reduce them. targets fall inside and outside the
 * range. */
static void test_head_case(const ah_kernels_t *cpu, const ah_kernels_t *gpu, double tol, int v0,
                           int nvalid) {
    const int N = 90, C = 64, Vl = 301;
    int32_t tgt[90];
    for (int i = 0; i < N; i++) tgt[i] = (int32_t)(((urand() + 1.0f) * 0.5f) * 700) % 700;
    float *x = host_rand((size_t)N * C, 1), *w = host_rand((size_t)Vl * C, 1);
    float *dx = host_rand((size_t)N * C, 1), *dw = host_rand((size_t)Vl * C, 1);
    float *logits = malloc((size_t)N * Vl * sizeof *logits), rowmax[90], stats[180];
    int32_t *d_tgt = dev_bytes(tgt, sizeof tgt);
    float *d_x = dev(x, (size_t)N * C), *d_w = dev(w, (size_t)Vl * C);
    float *d_dx = dev(dx, (size_t)N * C), *d_dw = dev(dw, (size_t)Vl * C);
    float *d_logits = dev(NULL, (size_t)N * Vl), *d_rowmax = dev(NULL, N), *d_stats = dev(NULL, 2 * N);
    const float scale = 1.0f / (float)N;
    char what[96];

    cpu->matmul_fwd(logits, x, w, NULL, N, C, Vl);
    gpu->matmul_fwd(d_logits, d_x, d_w, NULL, N, C, Vl);
    cpu->xent_max(rowmax, logits, N, Vl, nvalid);
    gpu->xent_max(d_rowmax, d_logits, N, Vl, nvalid);
    snprintf(what, sizeof what, "xent_max nvalid=%d (%s)", nvalid, gpu->name);
    expect_close(what, d_rowmax, rowmax, N, tol);
    if (nvalid == 0) { /* a rank of padding: the group's max comes from the others */
        for (int n = 0; n < N; n++) rowmax[n] = 1.0f;
        CHECK(ah_cuda_upload(d_rowmax, rowmax, sizeof rowmax, &err) == AH_OK, "%s", err.msg);
    }
    cpu->xent_stats(stats, logits, rowmax, tgt, N, Vl, nvalid, v0);
    gpu->xent_stats(d_stats, d_logits, d_rowmax, d_tgt, N, Vl, nvalid, v0);
    snprintf(what, sizeof what, "xent_stats nvalid=%d (%s)", nvalid, gpu->name);
    expect_close(what, d_stats, stats, 2 * N, tol);
    if (nvalid == 0) { /* the group's sum likewise */
        for (int n = 0; n < N; n++) stats[n] = 3.0f;
        CHECK(ah_cuda_upload(d_stats, stats, sizeof stats, &err) == AH_OK, "%s", err.msg);
    }
    const double l_cpu = cpu->xent_grad(logits, rowmax, stats, tgt, scale, N, Vl, nvalid, v0);
    const double l_gpu = gpu->xent_grad(d_logits, d_rowmax, d_stats, d_tgt, scale, N, Vl, nvalid, v0);
    printf("  %-28s cpu %.9g gpu %.9g\n", "xent_grad loss", l_cpu, l_gpu);
    CHECK_NEAR(l_gpu, l_cpu, tol);
    snprintf(what, sizeof what, "xent_grad dlogits nvalid=%d (%s)", nvalid, gpu->name);
    expect_close(what, d_logits, logits, (size_t)N * Vl, tol);
    cpu->matmul_bwd(dx, dw, NULL, logits, x, w, N, C, Vl);
    gpu->matmul_bwd(d_dx, d_dw, NULL, d_logits, d_x, d_w, N, C, Vl);
    snprintf(what, sizeof what, "head dx (%s)", gpu->name);
    expect_close(what, d_dx, dx, (size_t)N * C, tol);
    snprintf(what, sizeof what, "head dw (%s)", gpu->name);
    expect_close(what, d_dw, dw, (size_t)Vl * C, tol);
    check_clean("head");
    free(x), free(w), free(dx), free(dw), free(logits);
}

static void test_head(const ah_kernels_t *cpu, const ah_kernels_t *gpu, double tol) {
    test_head_case(cpu, gpu, tol, 0, 301);   /* one rank, the whole vocabulary */
    test_head_case(cpu, gpu, tol, 301, 290); /* a rank with 11 padding columns */
    test_head_case(cpu, gpu, tol, 602, 0);   /* a rank of padding only */
}

static void test_optimizer(const ah_kernels_t *cpu, const ah_kernels_t *gpu) {
    const size_t n = 100003;
    float *p = host_rand(n, 1), *g = host_rand(n, 0.1f), *m = host_rand(n, 0.01f);
    float *v = host_rand(n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = v[i] * v[i];
    float *d_p = dev(p, n), *d_g = dev(g, n), *d_m = dev(m, n), *d_v = dev(v, n);
    const ah_adamw_hparams_t hp = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                   .weight_decay = 0.1f};
    for (int64_t t = 1; t <= 3; t++) {
        cpu->adamw(p, g, m, v, n, &hp, 0.7f, t);
        gpu->adamw(d_p, d_g, d_m, d_v, n, &hp, 0.7f, t);
    }
    expect_close("adamw param", d_p, p, n, 1e-5);
    expect_close("adamw m", d_m, m, n, 1e-5);
    expect_close("adamw v", d_v, v, n, 1e-5);
    const double s_cpu = cpu->sum_squares(g, n), s_gpu = gpu->sum_squares(d_g, n);
    printf("  %-28s cpu %.12g gpu %.12g\n", "sum_squares", s_cpu, s_gpu);
    CHECK_NEAR(s_gpu, s_cpu, 1e-12);
    CHECK(gpu->sum_squares(d_g, n) == s_gpu, "sum_squares is deterministic");
    check_clean("optimizer");
    free(p), free(g), free(m), free(v);
}

static void test_memory(void) {
    ah_mem_t small;
    ah_arena_t a;
    void *p = NULL;
    ah_mem_init(&small, 3 << 20, "gpu-test:0");
    small.space = ah_backend_find("cuda")->space;
    ah_arena_init(&a, &small, "activations");
    CHECK(ah_arena_alloc(&a, 2 << 20, "qkv", &p, &err) == AH_OK, "2 MiB fits: %s", err.msg);
    CHECK_ERR(ah_arena_alloc(&a, 2 << 20, "fc pre-activation", &p, &err), AH_ERR_OOM, err,
              "fc pre-activation");
    CHECK_EQ_I64(small.high, 2 << 20);
    /* Host access through the space: a view downloads, an upload writes back. */
    float one = 1.0f, *view = NULL;
    CHECK(ah_mem_upload(&small, p, &one, sizeof one, &err) == AH_OK, "upload: %s", err.msg);
    CHECK(ah_mem_host_view(&small, p, sizeof one, true, (void **)&view, &err) == AH_OK &&
              view != p && *view == 1.0f, "host view of device memory: %s", err.msg);
    ah_mem_host_done(p, view);
    ah_arena_free(&a);
    CHECK_EQ_I64(small.live, 0);
    int64_t used = 0, total = 0;
    CHECK(ah_cuda_device_memory(&used, &total, &err) == AH_OK && used > 0 && total >= used,
          "device memory: %s", err.msg);
}

static void test_errors(const ah_kernels_t *gpu) {
    /* An unsupported head size is reported by ah_cuda_check, once. */
    gpu->attention_fwd(NULL, NULL, NULL, NULL, 1, 4, 1, 1, 200);
    CHECK_ERR(ah_cuda_check(&err), AH_ERR_INTERNAL, err, "head dimension");
    CHECK(ah_cuda_check(&err) == AH_OK, "the error is cleared after it was reported");
}

int main(void) {
    if (ah_cuda_init(-1, &err) != AH_OK) {
        printf("SKIP: %s\n", err.msg);
        return 77;
    }
    char name[128];
    ah_cuda_device_name(name, sizeof name);
    printf("device: %s\n", name);
    ah_mem_init(&mem, 0, name);
    mem.space = ah_backend_find("cuda")->space;
    ah_arena_init(&arena, &mem, "test");
    const ah_kernels_t *cpu = ah_kernels_cpu(), *gpu = ah_kernels_cuda();
    const ah_kernels_t *bf16 = ah_kernels_cuda_bf16(), *fp16 = ah_kernels_cuda_fp16();
    CHECK(gpu && bf16 && fp16, "tables exist once the device is up");
    if (!gpu || !bf16 || !fp16) return ah_test_finish();

    test_matmul(cpu, gpu, 1e-5);
    test_pointwise(cpu, gpu);
    test_llama_ops(cpu, gpu);
    test_embedding(cpu, gpu);
    test_attention(cpu, gpu, 2, 67, 3, 3, 64);  /* GPT-2's head size, T not a tile multiple */
    test_attention(cpu, gpu, 1, 130, 2, 2, 16); /* the small test models' head size */
    test_attention(cpu, gpu, 1, 33, 1, 1, 128);
    test_attention(cpu, gpu, 2, 67, 4, 2, 64);  /* grouped-query: 2 query heads per kv head */
    test_attention(cpu, gpu, 1, 100, 6, 1, 16); /* one kv head for all (multi-query) */
    test_ring(cpu, gpu, 2, 0, 2, 48, 4, 2, 16); /* GQA; a tile holding both runs of positions */
    test_ring(cpu, gpu, 4, 2, 1, 40, 3, 3, 64);
    test_embedding_at(cpu, gpu);
    test_head(cpu, gpu, 1e-5);
    test_optimizer(cpu, gpu);
    printf("bf16 table:\n");
    test_matmul(cpu, bf16, 1e-2);
    test_head(cpu, bf16, 1e-2);
    test_ring(cpu, bf16, 2, 1, 1, 36, 2, 1, 32); /* the ring stays fp32 in the 16-bit tables */
    printf("fp16 table:\n");
    test_matmul(cpu, fp16, 2e-3);
    test_head(cpu, fp16, 2e-3);
    test_ring(cpu, fp16, 2, 1, 1, 36, 2, 1, 32);
    test_fp16_overflow(fp16);
    test_memory();
    test_errors(gpu);
    printf("tracked device memory high-water mark: %.2f MiB\n", (double)mem.high / 1048576.0);
    ah_arena_free(&arena);
    return ah_test_finish();
}
#endif
