/* Per-layer profiler over the runtime's stage code (see profile.h for what is measured how). */
#include "runtime/profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/gpt.h"

enum { SHARD_A, SHARD_E, SHARD_H, N_SHARDS }; /* block; embedding + block; block + head */

typedef struct {
    double fwd_s, bwd_s;
    int64_t act_bytes;
} shard_time_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* A reproducible fill for inputs and upstream gradients: uniform in [-scale, scale). */
static void fill_uniform(float *x, int64_t n, uint64_t *state, float scale) {
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = scale * ((float)(*state >> 40) / 8388608.0f - 1.0f);
    }
}

static void fill_tokens(int32_t *x, int64_t n, uint64_t *state, int64_t vocab) {
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (int32_t)((*state >> 33) % (uint64_t)vocab);
    }
}

/* Builds shard `which`, times `reps` forward + backward calls and frees it. */
static ah_status_t time_shard(const ah_profile_req_t *req, const ah_kernels_t *k, int which,
                              double *fwd, double *bwd, shard_time_t *out, ah_error_t *err) {
    ah_mem_t mem;
    char device[96];
    snprintf(device, sizeof device, "profiled device (%.60s)", req->gpu);
    ah_mem_init(&mem, req->mem_cap_bytes, device);
    ah_gpt_config_t cfg = {.model = req->model, .first = 0, .last = 1,
                           .has_embed = which == SHARD_E, .has_head = which == SHARD_H,
                           .recompute = false, .t = req->tp, .tp_rank = 0,
                           .micro_batch = req->micro_batch, .seq_len = req->seq_len, .slots = 1};
    ah_gpt_stage_t st;
    memset(&st, 0, sizeof st);
    /* No TP group: a TP > 1 shard runs rank 0's share of the compute without its all-reduces. */
    ah_status_t s = ah_gpt_stage_create(&st, &cfg, k, NULL, &mem, err);
    if (s != AH_OK) return s;
    const int64_t NC = st.N * st.C;
    /* dout | dinp (host buffers like the trainer's p2p ones) | the targets, which live in the
     * workspace that each backward overwrites, so they are put back before every forward as the
     * trainer does */
    float *io = malloc((2 * (size_t)NC + (size_t)st.N) * sizeof *io);
    if (!io) {
        ah_gpt_stage_free(&st);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the profiler's buffers");
    }
    float *dout = io, *dinp = io + NC;
    int32_t *targets = (int32_t *)(io + 2 * NC);
    uint64_t rng = req->seed ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(which + 1));
    ah_gpt_init_params(&st, req->seed);
    if (cfg.has_embed) fill_tokens(ah_gpt_ids(&st, 0), st.N, &rng, st.V);
    else fill_uniform(ah_gpt_input(&st, 0), NC, &rng, 1.0f);
    if (cfg.has_head) fill_tokens(targets, st.N, &rng, st.V);
    else fill_uniform(dout, NC, &rng, 1e-3f);
    const float scale = (float)(1.0 / (double)st.N);
    for (int r = -1; r < req->reps && s == AH_OK; r++) { /* r = -1: warm-up, not timed */
        double loss = 0;
        if (cfg.has_head) memcpy(ah_gpt_targets(&st), targets, (size_t)st.N * sizeof *targets);
        const double t0 = now_s();
        s = ah_gpt_forward(&st, 0, dout, scale, &loss, err);
        const double t1 = now_s();
        /* The forward of a stage without the head writes its output into dout's buffer; the
         * backward's upstream gradient only has to be a realistic size, not a real gradient. */
        if (s == AH_OK)
            s = ah_gpt_backward(&st, 0, cfg.has_head ? NULL : dout, cfg.has_embed ? NULL : dinp, err);
        const double t2 = now_s();
        if (r >= 0) {
            fwd[r] = t1 - t0;
            bwd[r] = t2 - t1;
        }
    }
    int64_t act = 0;
    for (int i = 0; i < st.a_act.n; i++) act += st.a_act.sizes[i];
    out->act_bytes = act;
    free(io);
    ah_gpt_stage_free(&st);
    if (s != AH_OK) return s;
    out->fwd_s = median(fwd, req->reps);
    out->bwd_s = median(bwd, req->reps);
    return AH_OK;
}

/* A layer's figures as shard x minus the block shard (or shard A itself). */
static ah_profile_layer_t layer_of(const shard_time_t *x, const shard_time_t *a, double k) {
    ah_profile_layer_t l = {.present = true};
    const double f = a ? x->fwd_s - a->fwd_s : x->fwd_s, b = a ? x->bwd_s - a->bwd_s : x->bwd_s;
    l.fwd_s = k * (f > 0 ? f : 0);
    l.bwd_s = k * (b > 0 ? b : 0);
    l.act_bytes = a ? x->act_bytes - a->act_bytes : x->act_bytes;
    return l;
}

ah_status_t ah_profile_measure(const ah_profile_req_t *req, const ah_kernels_t *k,
                               ah_profile_t *out, ah_error_t *err) {
    const ah_model_t *m = req->model;
    if (m->arch != AH_ARCH_GPT2)
        return ah_error_set(err, AH_ERR_INVALID, "model %s has architecture %s; the runtime (and so "
                            "the profiler) runs the GPT-2 architecture only", m->name, ah_arch_name(m->arch));
    if (req->seq_len < 1 || req->seq_len > m->max_pos)
        return ah_error_set(err, AH_ERR_USAGE, "seq_len %lld: expected 1 .. %lld (the context of %s)",
                            (long long)req->seq_len, (long long)m->max_pos, m->name);
    if (req->micro_batch < 1 || req->reps < 1)
        return ah_error_set(err, AH_ERR_USAGE, "micro_batch (%lld) and repetitions (%d) must be >= 1",
                            (long long)req->micro_batch, req->reps);
    ah_status_t s = ah_model_check_tp(m, req->tp, err);
    if (s != AH_OK) return s;
    double *buf = malloc(2 * (size_t)req->reps * sizeof *buf);
    if (!buf) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d repetitions", req->reps);
    shard_time_t sh[N_SHARDS];
    for (int i = 0; i < N_SHARDS && s == AH_OK; i++)
        s = time_shard(req, k, i, buf, buf + req->reps, &sh[i], err);
    free(buf);
    if (s != AH_OK)
        return ah_error_prefix(err, "profiling %s at tp %d, micro-batch %lld, seq-len %lld", req->gpu,
                               req->tp, (long long)req->micro_batch, (long long)req->seq_len);
    ah_profile_entry_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.gpu, sizeof e.gpu, "%s", req->gpu);
    e.tp = req->tp;
    e.micro_batch = req->micro_batch;
    e.seq_len = req->seq_len;
    e.precision = AH_PREC_FP32;
    e.includes_tp_comm = false;
    const double kx = req->slowdown > 1 ? req->slowdown : 1;
    e.layer[AH_LAYER_BLOCK] = layer_of(&sh[SHARD_A], NULL, kx);
    e.layer[AH_LAYER_EMBED] = layer_of(&sh[SHARD_E], &sh[SHARD_A], kx);
    e.layer[AH_LAYER_HEAD] = layer_of(&sh[SHARD_H], &sh[SHARD_A], kx);
    return ah_profile_add(out, &e, err);
}
