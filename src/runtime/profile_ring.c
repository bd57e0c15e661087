/* The profiler's attention figures (runtime/profile.h ah_profile_measure_attention; cost/profile.h
 * "attention", "ring_attention"): the CPU backend's causal attention kernel alone at T, and one CP
 * rank's ring attention kernels (the table's ring_* entries) at CP 2, 4, 8 where 2c divides T:
 * rank 0's forward (init, its c key/value blocks in ring order, finish) and backward (c blocks), the
 * transfers left out (the cost model prices them on the ring's links). Each is the least CPU
 * seconds of this thread over `reps` calls after an untimed one (a loaded host's waits for a core
 * are not the kernel's), times the emulation's slowdown where there is one: an emulated phase lasts
 * slowdown x its compute seconds (runtime/emulate.h), so that is what the extra work of the ring
 * kernels costs a phase. Every CP rank does the same attention work (the causal load balance).
 * Inputs are fixed pseudo-random values; the kernels' time does not depend on them. */
#include <stdlib.h>
#include <time.h>

#include "runtime/profile.h"

static double thread_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    const ah_kernels_t *k;
    int B, T, Hl, KVl, hd, c, Tq;
    float *qkv, *out, *state, *scratch, *dout, *dqkv;               /* one process at T */
    float *kv, *acc, *stats, *lse, *rscratch, *dkv;                 /* CP rank 0 (its qkv: qkv's first rows) */
} att_t;

static void one_fwd(att_t *a) { a->k->attention_fwd(a->out, a->state, a->scratch, a->qkv, a->B, a->T, a->Hl, a->KVl, a->hd); }
static void one_bwd(att_t *a) {
    a->k->attention_bwd(a->dqkv, a->scratch, a->dout, a->qkv, a->out, a->state, a->B, a->T, a->Hl, a->KVl, a->hd);
}
/* CP rank 0's queries against every rank's block (rank j's positions). */
static void ring_fwd(att_t *a) {
    a->k->ring_attn_init(a->acc, a->stats, a->B, a->Tq, a->Hl, a->hd);
    for (int j = 0; j < a->c; j++)
        a->k->ring_attn_fwd_block(a->acc, a->stats, a->rscratch, a->qkv, ah_cp_at(a->T, a->c, 0), a->kv,
                                  ah_cp_at(a->T, a->c, j), a->B, a->Tq, a->Tq, a->Hl, a->KVl, a->hd);
    a->k->ring_attn_finish(a->out, a->lse, a->acc, a->stats, a->B, a->Tq, a->Hl, a->hd);
}
static void ring_bwd(att_t *a) {
    for (int j = 0; j < a->c; j++)
        a->k->ring_attn_bwd_block(a->dqkv, a->dkv, a->rscratch, a->dout, a->qkv, a->out, a->lse,
                                  ah_cp_at(a->T, a->c, 0), a->kv, ah_cp_at(a->T, a->c, j), a->B, a->Tq, a->Tq, a->Hl,
                                  a->KVl, a->hd);
}

/* Least CPU seconds of one call of f over reps calls after an untimed one. */
static double least_s(void (*f)(att_t *), att_t *a, int reps) {
    double least = 1e30;
    f(a);
    for (int i = 0; i < reps; i++) {
        const double t0 = thread_cpu_s();
        f(a);
        const double t = thread_cpu_s() - t0;
        least = t < least ? t : least;
    }
    return least;
}

static float *filled(size_t n) {
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; x && i < n; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return x;
}

void ah_profile_measure_attention(const ah_profile_req_t *req, const ah_kernels_t *k, ah_profile_entry_t *e) {
    const ah_model_t *m = req->model;
    att_t a = {.k = k, .B = (int)req->micro_batch, .T = (int)req->seq_len, .Hl = (int)(m->n_head / req->tp),
               .KVl = (int)(m->n_kv_head / req->tp), .hd = (int)(m->d_model / m->n_head)};
    const double scale = req->slowdown > 1 ? req->slowdown : 1;
    const size_t rows = (size_t)a.B * (size_t)a.T, width = (size_t)(a.Hl + 2 * a.KVl) * (size_t)a.hd;
    const size_t q_width = (size_t)a.Hl * (size_t)a.hd, kv_width = (size_t)(2 * a.KVl) * (size_t)a.hd;
    a.qkv = filled(rows * width), a.out = filled(rows * q_width), a.dout = filled(rows * q_width);
    a.dqkv = filled(rows * width), a.kv = filled(rows * kv_width), a.dkv = filled(rows * kv_width);
    a.state = filled(k->attention_state_floats(a.B, a.T, a.Hl, a.hd));
    a.scratch = filled(k->attention_scratch_floats(a.B, a.T, a.Hl, a.KVl, a.hd));
    a.acc = filled(rows * q_width), a.stats = filled((size_t)a.B * (size_t)a.Hl * (size_t)a.T * 2);
    a.lse = filled((size_t)a.B * (size_t)a.Hl * (size_t)a.T);
    bool ok = a.qkv && a.out && a.dout && a.dqkv && a.kv && a.dkv && a.state && a.scratch && a.acc && a.stats &&
              a.lse;
    if (ok) {
        e->attention = (ah_profile_layer_t){.present = true, .fwd_s = scale * least_s(one_fwd, &a, req->reps),
                                            .bwd_s = scale * least_s(one_bwd, &a, req->reps)};
    }
    for (int kk = 1; kk < 4 && ok; kk++) {
        a.c = 1 << kk;
        if (a.T % (2 * a.c)) continue;
        a.Tq = a.T / a.c;
        a.rscratch = filled(k->ring_attn_scratch_floats(a.B, a.Tq, a.Tq, a.Hl, a.KVl, a.hd));
        if (!(ok = a.rscratch != NULL)) break;
        e->ring[kk] = (ah_profile_layer_t){.present = true, .fwd_s = scale * least_s(ring_fwd, &a, req->reps),
                                           .bwd_s = scale * least_s(ring_bwd, &a, req->reps)};
        free(a.rscratch);
    }
    if (!ok) { /* no host memory for the buffers: the entry keeps the block's figures alone */
        e->attention.present = false;
        for (int kk = 1; kk < 4; kk++) e->ring[kk].present = false;
    }
    free(a.qkv), free(a.out), free(a.dout), free(a.dqkv), free(a.kv), free(a.dkv), free(a.state), free(a.scratch);
    free(a.acc), free(a.stats), free(a.lse);
}
