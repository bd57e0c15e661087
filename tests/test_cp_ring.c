/* Ring attention over real MPI ranks (runtime/cp_ring.h): 4 ranks run a CP group of 4 and two CP
 * groups of 2 (ranks 0, 1 and 2, 3), plain and grouped-query attention; each rank compares its
 * output rows and its qkv gradient (queries, keys, values) with one process's attention kernel
 * on the whole sequence: within 1e-6 (dk, dv: 2e-6), relative to the tensor's largest entry; the ring's
 * buffers are in the rank's budget, ah_cp_ring_bytes to the byte, and freed. In a build with the
 * CUDA backend (a GPU's, or its CPU emulation: scripts/gpu-check.sh runs this test there) the ring
 * is also set up with the CUDA backend's bf16 and fp16 tables on device memory: its buffers there
 * are ah_cp_ring_bytes of that precision to the byte (the model prices fp32 as the CPU's layout);
 * and it runs with the fp32 table over a device communicator of the group, NCCL (the ranks on
 * devices of their own, as the emulation's 8 give: the exchange must say "nccl") and forced
 * host-staged ("mpi-staged"), its output and qkv gradient within 1e-5 of the CPU ring's.
 * Run alone (as CTest does), it starts itself under `mpirun -np 4`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "cost/cost.h"
#include "elastic/launcher.h"
#include "harness.h"
#include "kernels/cpu/ring_attention.h"
#include "kernels/kernels.h"
#include "runtime/cp_ring.h"
#ifdef AH_HAVE_CUDA
#include "backend/backend.h"
#include "comm/nccl.h"
#include "kernels/cuda/kernels_cuda.h"
#endif

static float *fill(size_t n, unsigned s) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n && x; i++) s = s * 1103515245u + 12345u, x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
    return x;
}

/* max |loc - full at pos| over full's columns [off, off + w) (loc's [0, w)), relative to full's
 * largest entry there (at least 1) */
static double diff(const float *loc, int ldl, const float *full, int ldf, const int *pos, int B, int T, int Tl,
                   int off, int w) {
    double d = 0, big = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++)
            for (int k = 0; k < w; k++) {
                const double f = full[((size_t)b * T + pos[t]) * ldf + off + k];
                d = fmax(d, fabs(loc[((size_t)b * Tl + t) * ldl + k] - f));
                big = fmax(big, fabs(f));
            }
    return d / big;
}

#ifdef AH_HAVE_CUDA
/* The ring set up with the 16-bit CUDA tables on device memory: exactly the model's bytes of that
 * precision. */
static void ring_memory_cuda(ah_group_t *g, int B, int T, int Hl, int KVl, int hd) {
    const ah_kernels_t *tables[3] = {NULL, ah_kernels_cuda_bf16(), ah_kernels_cuda_fp16()};
    const ah_model_t shape = {.d_model = Hl * hd, .n_head = Hl, .n_kv_head = KVl};
    for (int p = AH_PREC_BF16; p <= AH_PREC_FP16; p++) {
        ah_cp_ring_t r;
        ah_error_t err = {0};
        ah_mem_t mem;
        ah_mem_init(&mem, 0, "ring test (cuda)");
        mem.space = ah_backend_find("cuda")->space;
        CHECK(tables[p] && ah_cp_ring_init(&r, g, tables[p], &mem, B, T, Hl, KVl, hd, &err) == AH_OK,
              "cuda init (%s): %s", ah_precision_name((ah_precision_t)p), err.msg);
        const int64_t want = ah_cp_ring_bytes(&shape, 1, B, T, ah_comm_size(g->c), (ah_precision_t)p);
        CHECK(mem.high == want, "cuda %s cp %d KVl %d: ring buffers %lld bytes, the model's %lld",
              ah_precision_name((ah_precision_t)p), ah_comm_size(g->c), KVl, (long long)mem.high, (long long)want);
        ah_cp_ring_free(&r);
    }
}

/* max |a - b| over n floats, relative to b's largest entry (at least 1) */
static double rel_diff(const float *a, const float *b, size_t n) {
    double d = 0, big = 1;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), big = fmax(big, fabs(b[i]));
    return d / big;
}

static float *to_device(ah_arena_t *a, const float *host, size_t n) {
    float *d = NULL;
    ah_error_t err = {0};
    CHECK(ah_arena_floats(a, (int64_t)n, "ring test tensor", &d, &err) == AH_OK, "device tensor: %s", err.msg);
    if (d && host) CHECK(ah_cuda_upload(d, host, n * sizeof *d, &err) == AH_OK, "upload: %s", err.msg);
    return d;
}

/* The CPU ring's output lo and qkv gradient ldq for the rows lq, ldo, again with the fp32 CUDA
 * table on device memory, its blocks over a device communicator of the group (staged or not). */
static void ring_cuda(ah_comm_t *c, int staged, const float *lq, const float *ldo, const float *lo,
                      const float *ldq, int B, int T, int Hl, int KVl, int hd) {
    const int n = ah_comm_size(c), ld = (Hl + 2 * KVl) * hd, Cl = Hl * hd, Tl = T / n, devs = ah_cuda_device_count();
    ah_error_t err = {0};
    ah_group_t g = {.c = c, .backend = ah_backend_find("cuda")};
    CHECK(ah_dcomm_create(c, ah_comm_rank(ah_comm_world()) % devs, staged, &g.dc, &err) == AH_OK, "dcomm: %s", err.msg);
    /* fewer devices than ranks: some groups share one (staged), some not */
    const char *want = staged ? "mpi-staged" : devs >= ah_comm_size(ah_comm_world()) ? "nccl" : NULL;
    ah_mem_t mem;
    ah_mem_init(&mem, 0, "ring test (cuda fp32)");
    mem.space = g.backend->space;
    ah_arena_t a;
    ah_arena_init(&a, &mem, "ring test tensors");
    float *q = to_device(&a, lq, (size_t)B * Tl * ld), *dout = to_device(&a, ldo, (size_t)B * Tl * Cl);
    float *out = to_device(&a, NULL, (size_t)B * Tl * Cl), *lse = to_device(&a, NULL, (size_t)B * Hl * Tl);
    float *dq = to_device(&a, NULL, (size_t)B * Tl * ld);
    ah_cp_ring_t r;
    CHECK(g.dc && ah_cp_ring_init(&r, &g, ah_kernels_cuda(), &mem, B, T, Hl, KVl, hd, &err) == AH_OK, "init: %s",
          err.msg);
    CHECK(!want || !strcmp(ah_cp_ring_exchange(&r), want), "exchange %s, expected %s", ah_cp_ring_exchange(&r), want);
    CHECK(ah_cp_attention_fwd(&r, out, lse, q, &err) == AH_OK && ah_cp_attention_bwd(&r, dq, dout, q, out, lse, &err) ==
          AH_OK, "cuda ring: %s", err.msg);
    float *h_out = malloc((size_t)B * Tl * Cl * sizeof *h_out), *h_dq = malloc((size_t)B * Tl * ld * sizeof *h_dq);
    CHECK(ah_cuda_download(h_out, out, (size_t)B * Tl * Cl * sizeof *h_out, &err) == AH_OK &&
          ah_cuda_download(h_dq, dq, (size_t)B * Tl * ld * sizeof *h_dq, &err) == AH_OK, "download: %s", err.msg);
    const double e_out = rel_diff(h_out, lo, (size_t)B * Tl * Cl), e_dq = rel_diff(h_dq, ldq, (size_t)B * Tl * ld);
    printf("cp %d rank %d KVl %d, CUDA fp32 over %s: out %.2e, dqkv %.2e against the CPU ring\n", n,
           ah_comm_rank(c), KVl, ah_cp_ring_exchange(&r), e_out, e_dq);
    CHECK(e_out <= 1e-5 && e_dq <= 1e-5, "cp %d over %s: out %.2e, dqkv %.2e", n, ah_cp_ring_exchange(&r), e_out,
          e_dq);
    ah_cp_ring_free(&r);
    ah_arena_free(&a);
    ah_dcomm_free(&g.dc);
    free(h_out), free(h_dq);
}
#endif

static void run_group(ah_comm_t *c, int B, int T, int Hl, int KVl, int hd) {
    ah_group_t group = {.c = c}, *g = &group; /* no device communicator: the CPU's MPI exchange */
    const ah_kernels_t *K = ah_kernels_cpu();
    const int n = ah_comm_size(c), me = ah_comm_rank(c), ld = (Hl + 2 * KVl) * hd, Cl = Hl * hd, Tl = T / n;
    float *qkv = fill((size_t)B * T * ld, 3u + (unsigned)KVl), *dout = fill((size_t)B * T * Cl, 5u);
    float *out = calloc((size_t)B * T * Cl, sizeof *out), *dqkv = calloc((size_t)B * T * ld, sizeof *dqkv);
    float *probs = calloc(K->attention_state_floats(B, T, Hl, hd), sizeof *probs);
    float *scr = calloc(K->attention_scratch_floats(B, T, Hl, KVl, hd), sizeof *scr);
    K->attention_fwd(out, probs, scr, qkv, B, T, Hl, KVl, hd);
    K->attention_bwd(dqkv, scr, dout, qkv, out, probs, B, T, Hl, KVl, hd);
    int *pos = malloc((size_t)Tl * sizeof *pos);
    ah_cp_positions(pos, T, n, me);
    float *lq = malloc((size_t)B * Tl * ld * sizeof *lq), *ldo = malloc((size_t)B * Tl * Cl * sizeof *ldo);
    float *lo = malloc((size_t)B * Tl * Cl * sizeof *lo), *lse = malloc((size_t)B * Hl * Tl * sizeof *lse);
    float *ldq = calloc((size_t)B * Tl * ld, sizeof *ldq);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < Tl; t++) {
            memcpy(lq + ((size_t)b * Tl + t) * ld, qkv + ((size_t)b * T + pos[t]) * ld, (size_t)ld * sizeof *lq);
            memcpy(ldo + ((size_t)b * Tl + t) * Cl, dout + ((size_t)b * T + pos[t]) * Cl, (size_t)Cl * sizeof *ldo);
        }
    ah_cp_ring_t r;
    ah_error_t err = {0};
    ah_mem_t mem;
    ah_mem_init(&mem, 0, "ring test");
    CHECK(ah_cp_ring_init(&r, g, ah_kernels_cpu(), &mem, B, T, Hl, KVl, hd, &err) == AH_OK, "init: %s", err.msg);
    /* the ring's buffers are in the budget, exactly what the memory model counts */
    const ah_model_t shape = {.d_model = Hl * hd, .n_head = Hl, .n_kv_head = KVl};
    const int64_t want = ah_cp_ring_bytes(&shape, 1, B, T, n, AH_PREC_FP32);
    CHECK(mem.high == want, "cp %d KVl %d: ring buffers %lld bytes, the model's %lld", n, KVl, (long long)mem.high,
          (long long)want);
    CHECK(ah_cp_attention_fwd(&r, lo, lse, lq, &err) == AH_OK, "fwd: %s", err.msg);
    CHECK(ah_cp_attention_bwd(&r, ldq, ldo, lq, lo, lse, &err) == AH_OK, "bwd: %s", err.msg);
    const double e_out = diff(lo, Cl, out, Cl, pos, B, T, Tl, 0, Cl), e_q = diff(ldq, ld, dqkv, ld, pos, B, T, Tl, 0, Cl),
                 e_kv = diff(ldq + Cl, ld, dqkv, ld, pos, B, T, Tl, Cl, 2 * KVl * hd);
    printf("cp %d rank %d, Hl %d KVl %d: out %.2e, dq %.2e, dk/dv %.2e\n", n, me, Hl, KVl, e_out, e_q, e_kv);
    CHECK(e_out <= 1e-6 && e_q <= 1e-6 && e_kv <= 2e-6, "cp %d rank %d KVl %d: out %.2e, dq %.2e, dk/dv %.2e", n, me,
          KVl, e_out, e_q, e_kv);
    ah_cp_ring_free(&r);
    CHECK(mem.live == 0, "cp %d: %lld bytes of the ring left allocated", n, (long long)mem.live);
#ifdef AH_HAVE_CUDA
    ring_memory_cuda(g, B, T, Hl, KVl, hd);
    for (int staged = 0; staged < 2; staged++) ring_cuda(c, staged, lq, ldo, lo, ldq, B, T, Hl, KVl, hd);
#endif
    free(qkv), free(dout), free(out), free(dqkv), free(probs), free(scr), free(pos), free(lq), free(ldo), free(lo);
    free(lse), free(ldq);
}

int main(int argc, char **argv) {
    if (ah_test_mpirun_self(4, "-x OPENBLAS_NUM_THREADS=1 ")) return ah_test_finish(); /* not under mpirun */
    ah_error_t err;
    if (ah_comm_init(&argc, &argv, &err) != AH_OK) {
        fprintf(stderr, "test_cp_ring: %s\n", err.msg);
        return 1;
    }
    ah_comm_t *world = ah_comm_world(), *half = NULL;
#ifdef AH_HAVE_CUDA
    const int devs = ah_cuda_device_count(); /* a device per rank where there are enough */
    if (ah_cuda_init(devs > 0 ? ah_comm_rank(ah_comm_world()) % devs : -1, &err) != AH_OK) {
        fprintf(stderr, "test_cp_ring: %s\n", err.msg);
        return 1;
    }
#endif
    const int me = ah_comm_rank(world);
    run_group(world, 2, 32, 4, 4, 8);
    run_group(world, 1, 64, 4, 2, 8);
    CHECK(ah_comm_split(world, me / 2, me, &half, &err) == AH_OK, "split: %s", err.msg);
    if (half) run_group(half, 2, 32, 4, 1, 8);
    ah_comm_free(&half);
    const int rc = ah_test_finish();
    ah_comm_finalize();
    return rc;
}
