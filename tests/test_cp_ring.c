/* Ring attention over real MPI ranks (runtime/cp_ring.h): 4 ranks run a CP group of 4 and two CP
 * groups of 2 (ranks 0, 1 and 2, 3), plain and grouped-query attention; each rank compares its
 * output rows and its qkv gradient (queries, keys, values) with one process's attention kernel
 * on the whole sequence: within 1e-6 (dk, dv: 2e-6), relative to the tensor's largest entry; the ring's
 * buffers are in the rank's budget, ah_cp_ring_bytes to the byte, and freed. In a build with the
 * CUDA backend (a GPU's, or its CPU emulation: scripts/gpu-check.sh runs this test there) the ring
 * is also set up with the CUDA backend's bf16 and fp16 tables on device memory: its buffers there
 * are ah_cp_ring_bytes of that precision to the byte (the model prices fp32 as the CPU's layout).
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
static void ring_memory_cuda(ah_comm_t *g, int B, int T, int Hl, int KVl, int hd) {
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
        const int64_t want = ah_cp_ring_bytes(&shape, 1, B, T, ah_comm_size(g), (ah_precision_t)p);
        CHECK(mem.high == want, "cuda %s cp %d KVl %d: ring buffers %lld bytes, the model's %lld",
              ah_precision_name((ah_precision_t)p), ah_comm_size(g), KVl, (long long)mem.high, (long long)want);
        ah_cp_ring_free(&r);
    }
}
#endif

static void run_group(ah_comm_t *g, int B, int T, int Hl, int KVl, int hd) {
    const ah_kernels_t *K = ah_kernels_cpu();
    const int c = ah_comm_size(g), me = ah_comm_rank(g), ld = (Hl + 2 * KVl) * hd, Cl = Hl * hd, Tl = T / c;
    float *qkv = fill((size_t)B * T * ld, 3u + (unsigned)KVl), *dout = fill((size_t)B * T * Cl, 5u);
    float *out = calloc((size_t)B * T * Cl, sizeof *out), *dqkv = calloc((size_t)B * T * ld, sizeof *dqkv);
    float *probs = calloc(K->attention_state_floats(B, T, Hl, hd), sizeof *probs);
    float *scr = calloc(K->attention_scratch_floats(B, T, Hl, KVl, hd), sizeof *scr);
    K->attention_fwd(out, probs, scr, qkv, B, T, Hl, KVl, hd);
    K->attention_bwd(dqkv, scr, dout, qkv, out, probs, B, T, Hl, KVl, hd);
    int *pos = malloc((size_t)Tl * sizeof *pos);
    ah_cp_positions(pos, T, c, me);
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
    const int64_t want = ah_cp_ring_bytes(&shape, 1, B, T, c, AH_PREC_FP32);
    CHECK(mem.high == want, "cp %d KVl %d: ring buffers %lld bytes, the model's %lld", c, KVl, (long long)mem.high,
          (long long)want);
    CHECK(ah_cp_attention_fwd(&r, lo, lse, lq, &err) == AH_OK, "fwd: %s", err.msg);
    CHECK(ah_cp_attention_bwd(&r, ldq, ldo, lq, lo, lse, &err) == AH_OK, "bwd: %s", err.msg);
    const double e_out = diff(lo, Cl, out, Cl, pos, B, T, Tl, 0, Cl), e_q = diff(ldq, ld, dqkv, ld, pos, B, T, Tl, 0, Cl),
                 e_kv = diff(ldq + Cl, ld, dqkv, ld, pos, B, T, Tl, Cl, 2 * KVl * hd);
    printf("cp %d rank %d, Hl %d KVl %d: out %.2e, dq %.2e, dk/dv %.2e\n", c, me, Hl, KVl, e_out, e_q, e_kv);
    CHECK(e_out <= 1e-6 && e_q <= 1e-6 && e_kv <= 2e-6, "cp %d rank %d KVl %d: out %.2e, dq %.2e, dk/dv %.2e", c, me,
          KVl, e_out, e_q, e_kv);
    ah_cp_ring_free(&r);
    CHECK(mem.live == 0, "cp %d: %lld bytes of the ring left allocated", c, (long long)mem.live);
#ifdef AH_HAVE_CUDA
    ring_memory_cuda(g, B, T, Hl, KVl, hd);
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
    if (ah_cuda_init(-1, &err) != AH_OK) {
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
