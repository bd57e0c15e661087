/* Per-layer profiler over the runtime's stage code (see profile.h for what is measured how). */
#include "runtime/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timing.h"
#include "runtime/device.h"
#include "runtime/emulate.h"
#include "runtime/gpt.h"

/* Blocks in the profiled shard: enough distinct weights and activations that a block's data is
 * not still in cache from its previous call, as in a stage of several blocks. */
enum { PROFILE_BLOCKS = 4, PROFILE_SLOTS = 2 };

/* One shard's means, per part (ah_gpt_part_t), forward, backward's B and its W (a split backward:
 * the blocks' weight-gradient GEMMs, zero-bubble's W). */
typedef struct {
    double s[AH_GPT_N_PARTS][3];
    int64_t act_bytes[AH_GPT_N_PARTS]; /* per micro-batch; blocks: one block */
    double opt_s_per_param;            /* mean AdamW step over the shard, per parameter */
} shard_fig_t;

/* Emulation as the trainer does it (runtime/emulate.h): each forward, each backward's B and each W
 * call is one phase, made to last slowdown x its compute (CPU) seconds plus its TP communication, segment
 * by segment between the all-reduces. What a call is timed at is that emulated phase's wall
 * seconds, from its start to the end of the emulation's sleep: the time the emulated device
 * took, as training will see it, with the all-reduces of a TP group, the sleep's late wake-up and
 * the colder caches after it (the next call starts after the core went to other processes for a
 * while, as in training, which costs measurably: about +25 % at slowdown 4 for demo-gpt2 on this
 * machine). */

static double mean_of(const double *x, int n) {
    double t = 0;
    for (int i = 0; i < n; i++) t += x[i];
    return t / n;
}

/* What the phase e ran last cost the device: emulated (slowdown > 1), the emulated phase's wall seconds up to
 * the end of its sleep, which absorbs the time this process waited for a core; not emulated, its
 * compute (CPU) seconds plus the wall seconds of its communication, since wall time would count
 * the waits for a core on a loaded machine as the device's. */
static double phase_seconds(const ah_emulator_t *e, double compute) {
    if (e->slowdown > 1) return ah_now_s() - e->phase_start.wall;
    double comm_wall, comm_cpu;
    ah_comm_seconds(&comm_wall, &comm_cpu);
    return compute + (comm_wall - e->phase_start.comm_wall);
}

/* Seconds of all parts, forward (pass 0), backward's B (1) or W (2). */
static double parts_total(const double part_s[AH_GPT_N_PARTS][3], int pass) {
    double t = 0;
    for (int p = 0; p < AH_GPT_N_PARTS; p++) t += part_s[p][pass];
    return t;
}

/* Reproducible token ids in [0, vocab). */
static void fill_tokens(int32_t *x, int64_t n, uint64_t *state, int64_t vocab) {
    for (int64_t i = 0; i < n; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = (int32_t)((*state >> 33) % (uint64_t)vocab);
    }
}

/* Builds a shard of the embedding, nb blocks and the head with `slots` micro-batch slots, runs
 * one untimed warm-up and `reps` timed forward + backward pairs, each backward split as zero-bubble
 * runs it (B, then W from one W set; their sum is the whole backward's work plus copying the W
 * inputs), takes the mean of each part's seconds (buf: 3 * AH_GPT_N_PARTS * reps doubles), times `reps` AdamW steps over the shard
 * after an untimed one, and frees it. */
/* The optimizer: `reps` AdamW steps over the shard, each an emulated phase as in training (the
 * hyperparameters do not change its time), after an untimed one: the first touches the moments'
 * fresh pages (a page fault each), which made AdamW 4-8x slower per parameter in the entries whose
 * allocations came fresh from the kernel rather than reused. *s_per_param: the mean per parameter;
 * buf: room for reps figures. */
static ah_status_t time_adamw(ah_gpt_stage_t *st, ah_emulator_t *emu, int reps, double *buf, double *s_per_param,
                              ah_error_t *err) {
    const ah_adamw_hparams_t hp = {1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f};
    ah_status_t s = AH_OK;
    for (int i = 0; i <= reps && s == AH_OK; i++) {
        double compute = 0;
        ah_emulator_begin(emu, AH_EMULATE_OPT);
        ah_gpt_adamw(st, &hp, 1.0f, i + 1);
        s = ah_emulator_end(emu, &compute, err);
        if (i > 0) buf[i - 1] = phase_seconds(emu, compute);
    }
    if (s == AH_OK) *s_per_param = mean_of(buf, reps) / (double)st->n_elems;
    return s;
}

static ah_status_t time_shard(const ah_profile_req_t *req, const ah_kernels_t *k, int nb, int slots,
                              double *buf, shard_fig_t *out, ah_error_t *err) {
    ah_mem_t mem;
    char device[96];
    snprintf(device, sizeof device, "profiled device (%.60s)", req->gpu);
    ah_mem_init(&mem, req->mem_cap_bytes, device);
    ah_comm_t *group = req->tp > 1 ? req->tp_group : NULL;
    ah_gpt_config_t cfg = {.model = req->model, .n_chunks = 1, .chunks = {{0, nb, slots, false}}, .has_embed = true,
                           .has_head = true, .recompute = false, .t = req->tp,
                           .tp_rank = group ? ah_comm_rank(group) : 0,
                           .micro_batch = req->micro_batch, .seq_len = req->seq_len, .wsets = 1};
    ah_gpt_stage_t st;
    memset(&st, 0, sizeof st);
    /* Without a group, a TP > 1 shard runs rank 0's share of the compute without its all-reduces. */
    ah_group_t tp = {.c = group, .dc = NULL}; /* the CPU backend sums through MPI alone */
    ah_status_t s = ah_gpt_stage_create(&st, &cfg, k, group ? &tp : NULL, &mem, err);
    if (s != AH_OK) return s;
    ah_emulator_t emu;
    if ((s = ah_emulator_init(&emu, req->slowdown, group, ah_gpt_phase_segments(&st), err)) != AH_OK) {
        ah_gpt_stage_free(&st);
        return s;
    }
    /* The targets live in the workspace that each backward overwrites, so they are put back
     * before every forward, as the trainer does. */
    int32_t *targets = malloc((size_t)st.N * sizeof *targets);
    if (!targets) {
        ah_emulator_free(&emu);
        ah_gpt_stage_free(&st);
        return ah_error_set(err, AH_ERR_OOM, "no host memory for the profiler's targets");
    }
    uint64_t rng = req->seed ^ 0x9e3779b97f4a7c15ULL;
    if ((s = ah_gpt_init_params(&st, req->seed, err)) != AH_OK) {
        free(targets);
        ah_emulator_free(&emu);
        ah_gpt_stage_free(&st);
        return s;
    }
    for (int sl = 0; sl < slots; sl++) fill_tokens(ah_gpt_ids(&st, sl), st.N, &rng, st.cfg.model->vocab);
    fill_tokens(targets, st.N, &rng, st.cfg.model->vocab);
    const float scale = (float)(1.0 / (double)st.N);
    double loss = 0;
    memcpy(ah_gpt_targets(&st), targets, (size_t)st.N * sizeof *targets);
    s = ah_gpt_forward(&st, 0, NULL, scale, &loss, err); /* untimed, not emulated */
    st.emu = &emu; /* from here each call is an emulated phase */
    /* Call i runs the forward of slot (i + 1) % slots, then the backward of slot i % slots,
     * which was forwarded one call earlier: 1F1B's steady state with `slots` micro-batches in
     * flight. Call 0 is the warm-up. */
    for (int i = 0; i <= req->reps && s == AH_OK; i++) {
        double before[AH_GPT_N_PARTS][3], phase[3], compute = 0;
        memcpy(before, st.part_s, sizeof before);
        memcpy(ah_gpt_targets(&st), targets, (size_t)st.N * sizeof *targets);
        ah_emulator_begin(&emu, AH_EMULATE_FWD);
        s = ah_gpt_forward(&st, (i + 1) % slots, NULL, scale, &loss, err);
        if (s == AH_OK) s = ah_emulator_end(&emu, &compute, err);
        phase[0] = phase_seconds(&emu, compute);
        ah_emulator_begin(&emu, AH_EMULATE_BWD);
        if (s == AH_OK) s = ah_gpt_backward(&st, i % slots, NULL, NULL, 0, err);
        if (s == AH_OK) s = ah_emulator_end(&emu, &compute, err);
        phase[1] = phase_seconds(&emu, compute);
        ah_emulator_begin(&emu, AH_EMULATE_WGRAD);
        if (s == AH_OK) s = ah_gpt_backward_weights(&st, i % slots, 0, err);
        if (s == AH_OK) s = ah_emulator_end(&emu, &compute, err);
        phase[2] = phase_seconds(&emu, compute);
        if (i == 0) continue;
        /* The emulated phase's seconds, shared among the parts as their own seconds were (the
         * part clocks leave the emulation's sleeps out: gpt.c). */
        for (int d = 0; d < 3; d++) {
            const double wall = parts_total(st.part_s, d) - parts_total(before, d);
            const double f = wall > 0 ? phase[d] / wall : 1.0;
            for (int p = 0; p < AH_GPT_N_PARTS; p++)
                buf[(p * 3 + d) * req->reps + i - 1] = f * (st.part_s[p][d] - before[p][d]);
        }
    }
    if (s == AH_OK)
        for (int p = 0; p < AH_GPT_N_PARTS; p++)
            for (int d = 0; d < 3; d++) out->s[p][d] = mean_of(buf + (p * 3 + d) * req->reps, req->reps);
    if (s == AH_OK) s = time_adamw(&st, &emu, req->reps, buf, &out->opt_s_per_param, err);
    /* Activation bytes from the allocator: ah_gpt_stage_create allocates, per slot, one set per
     * block, then the embedding's token ids, then the head's tensors. */
    const int per_slot = st.a_act.n / slots;
    out->act_bytes[AH_GPT_PART_BLOCKS] = st.a_act.sizes[0];
    out->act_bytes[AH_GPT_PART_EMBED] = st.a_act.sizes[nb];
    out->act_bytes[AH_GPT_PART_HEAD] = 0;
    for (int i = nb + 1; i < per_slot; i++) out->act_bytes[AH_GPT_PART_HEAD] += st.a_act.sizes[i];
    free(targets);
    ah_emulator_free(&emu);
    ah_gpt_stage_free(&st);
    return s;
}

/* A layer kind's figures: the part's mean (per block for the blocks); the backward is B + W. */
static ah_profile_layer_t layer_of(const shard_fig_t *f, ah_gpt_part_t part, int nb) {
    const double per = part == AH_GPT_PART_BLOCKS ? 1.0 / nb : 1.0;
    return (ah_profile_layer_t){.present = true, .fwd_s = per * f->s[part][0],
                                .bwd_s = per * (f->s[part][1] + f->s[part][2]), .wgrad_s = per * f->s[part][2],
                                .act_bytes = f->act_bytes[part]};
}

ah_status_t ah_profile_measure(const ah_profile_req_t *req, const ah_kernels_t *k,
                               ah_profile_entry_t *out, ah_error_t *err) {
    const ah_model_t *m = req->model;
    if (req->seq_len < 1 || req->seq_len > m->max_pos)
        return ah_error_set(err, AH_ERR_USAGE, "seq_len %lld: expected 1 .. %lld (the context of %s)",
                            (long long)req->seq_len, (long long)m->max_pos, m->name);
    if (req->micro_batch < 1 || req->reps < 1)
        return ah_error_set(err, AH_ERR_USAGE, "micro_batch (%lld) and repetitions (%d) must be >= 1",
                            (long long)req->micro_batch, req->reps);
    ah_status_t s = ah_model_check_tp(m, req->tp, err);
    if (s != AH_OK) return s;
    if (req->tp > 1 && req->tp_group && ah_comm_size(req->tp_group) != req->tp)
        return ah_error_set(err, AH_ERR_USAGE, "a TP group of %d ranks cannot measure tp %d",
                            ah_comm_size(req->tp_group), req->tp);
    double *buf = malloc(3 * AH_GPT_N_PARTS * (size_t)req->reps * sizeof *buf);
    if (!buf) return ah_error_set(err, AH_ERR_OOM, "no host memory for %d repetitions", req->reps);
    /* As many blocks (up to PROFILE_BLOCKS) and slots as an emulated memory cap holds; a cap too
     * small for one block and one slot fails with the trainer's out-of-memory message. */
    shard_fig_t fig = {0};
    int nb = m->n_layer < PROFILE_BLOCKS ? (int)m->n_layer : PROFILE_BLOCKS, slots = PROFILE_SLOTS;
    for (;;) {
        s = time_shard(req, k, nb, slots, buf, &fig, err);
        if (s != AH_ERR_OOM || (nb == 1 && slots == 1)) break;
        if (nb > 1) nb /= 2;
        else slots = 1;
    }
    free(buf);
    if (s != AH_OK)
        return ah_error_prefix(err, "profiling %s at tp %d, micro-batch %lld, seq-len %lld", req->gpu,
                               req->tp, (long long)req->micro_batch, (long long)req->seq_len);
    ah_profile_entry_t *e = out;
    memset(e, 0, sizeof *e);
    snprintf(e->gpu, sizeof e->gpu, "%s", req->gpu);
    e->tp = req->tp;
    e->micro_batch = req->micro_batch;
    e->seq_len = req->seq_len;
    e->precision = AH_PREC_FP32;
    e->includes_tp_comm = req->tp > 1 && req->tp_group;
    e->layer[AH_LAYER_BLOCK] = layer_of(&fig, AH_GPT_PART_BLOCKS, nb);
    e->layer[AH_LAYER_EMBED] = layer_of(&fig, AH_GPT_PART_EMBED, nb);
    e->layer[AH_LAYER_HEAD] = layer_of(&fig, AH_GPT_PART_HEAD, nb);
    e->optimizer_s_per_param = fig.opt_s_per_param;
    e->emulate_slowdown = req->slowdown > 1 ? req->slowdown : 1;
    if (k == ah_kernels_cpu()) ah_profile_measure_attention(req, k, e);
    return AH_OK;
}
