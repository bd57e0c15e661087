/* Runtime pieces without MPI: the 1F1B, interleaved and zero-bubble schedules, the learning-rate schedule, TP sharding and the
 * plan-independent initialisation, the stage's backward against finite differences, and device
 * emulation's stretch (and that it sleeps off the core), and the CPU clock it reads leaving background
 * threads out (ah_cpu_s). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "core/timing.h"
#include "harness.h"
#include "runtime/emulate.h"
#include "runtime/gpt.h"
#include "runtime/schedule.h"
#include "runtime/trainer.h"

/* Every micro-batch runs F then B (zero-bubble: then W) once each per chunk, in the cost model's
 * order (ah_sched_order); 1F1B's warm-up length and slot j mod min(S - s, n); slots (each inside
 * its chunk's) and W sets never double-booked, as many as the plan's memory model counts
 * (ah_sched_peak_act's live per chunk, ah_sched_wgrad_inflight W sets); each chunk's gradients
 * final after exactly one op, its last B (zero-bubble: W). */
static void check_order(ah_schedule_t sched, int S, int P, int d, int64_t n) {
    enum { MAX_OPS = 72, MAX_SLOTS = 64 };
    const int v = S / P;
    ah_sched_op_t ops[MAX_OPS];
    ah_op_t ref[MAX_OPS];
    int64_t slots[3], wsets, live_ref[12], ones[12], base[3] = {0};
    for (int q = 0; q < S; q++) ones[q] = 1;
    CHECK(ah_sched_build(sched, S, P, d, n, NULL, ops, slots, &wsets), "build");
    ah_sched_order(sched, S, P, n, d, ref);
    ah_sched_peak_act(sched, S, P, n, d, ones, live_ref);
    const bool zb = sched == AH_SCHED_ZERO_BUBBLE;
    const int64_t count = ah_sched_ops_per_device(sched, S, P, n);
    CHECK_EQ_I64(count, (zb ? 3 : 2) * n * v);
    CHECK_EQ_I64(wsets, ah_sched_wgrad_inflight(sched, S, P, n, d));
    for (int c = 0; c < v; c++) CHECK_EQ_I64(slots[c], live_ref[c * P + d]);
    if (sched == AH_SCHED_1F1B) CHECK_EQ_I64(slots[0], S - d < n ? S - d : n);
    if (zb) CHECK_EQ_I64(slots[0], S < n ? S : n);
    for (int c = 1; c < v; c++) base[c] = base[c - 1] + slots[c - 1];
    int64_t owner[MAX_SLOTS], wowner[8], done[3][12][3] = {{{0}}}, live[3] = {0}, peak[3] = {0}, finals[3] = {0};
    for (int i = 0; i < MAX_SLOTS; i++) owner[i] = -1;
    for (int i = 0; i < 8; i++) wowner[i] = -1;
    if (v == 1) {
        const int64_t w = S - d - 1 < n ? S - d - 1 : n;
        int64_t lead = 0;
        while (lead < count && ops[lead].kind == AH_OP_F) lead++;
        CHECK(lead == (w < n ? w + 1 : n), "S=%d s=%d n=%lld: %lld forwards before the first backward", S, d,
              (long long)n, (long long)lead);
    }
    for (int64_t i = 0; i < count; i++) {
        const ah_sched_op_t o = ops[i];
        const int c = o.chunk;
        CHECK(ref[i].stage == d + c * P && ref[i].mb == o.mb && ref[i].kind == o.kind, "op %lld is the cost model's",
              (long long)i);
        CHECK(o.slot >= base[c] && o.slot < base[c] + slots[c], "slot %lld in chunk %d's", (long long)o.slot, c);
        CHECK(zb == (o.kind != AH_OP_F) || o.wset == -1, "W set of a 1F1B op or a forward");
        finals[c] += o.grads_final;
        if (o.kind == AH_OP_F) {
            CHECK(owner[o.slot] < 0, "S=%d P=%d d=%d n=%lld: slot %lld reused while mb %lld is live", S, P, d,
                  (long long)n, (long long)o.slot, (long long)owner[o.slot]);
            if (sched == AH_SCHED_1F1B) CHECK_EQ_I64(o.slot, o.mb % slots[0]);
            owner[o.slot] = o.mb;
            if (++live[c] > peak[c]) peak[c] = live[c];
        } else {
            CHECK(done[c][o.mb][o.kind - 1] == 1 && owner[o.slot] == o.mb, "%c(%lld) before its predecessor",
                  o.kind == AH_OP_B ? 'B' : 'W', (long long)o.mb);
            if (o.kind == AH_OP_B && zb) {
                CHECK(o.wset >= 0 && o.wset < wsets && wowner[o.wset] < 0, "W set %lld", (long long)o.wset);
                wowner[o.wset] = o.mb;
            }
            if (o.kind == AH_OP_W) {
                CHECK(wowner[o.wset] == o.mb, "W(%lld) reads another's W set", (long long)o.mb);
                wowner[o.wset] = -1;
            }
            if (o.kind == (zb ? AH_OP_W : AH_OP_B)) owner[o.slot] = -1, live[c]--;
        }
        CHECK(!o.grads_final || o.kind == (zb ? AH_OP_W : AH_OP_B), "gradients final after a forward");
        done[c][o.mb][o.kind]++;
    }
    for (int c = 0; c < v; c++) {
        CHECK_EQ_I64(peak[c], slots[c]);
        CHECK_EQ_I64(finals[c], 1);
        for (int64_t j = 0; j < n; j++)
            CHECK(done[c][j][0] == 1 && done[c][j][1] == 1 && done[c][j][2] == (zb ? 1 : 0), "chunk %d mb %lld", c,
                  (long long)j);
    }
}

static void test_schedule(void) {
    for (int S = 1; S <= 5; S++)
        for (int s = 0; s < S; s++)
            for (int64_t n = 1; n <= 7; n++) {
                check_order(AH_SCHED_1F1B, S, S, s, n);
                check_order(AH_SCHED_ZERO_BUBBLE, S, S, s, n);
            }
    for (int P = 2; P <= 4; P++)
        for (int v = 2; v <= 3; v++)
            for (int64_t n = P; n <= 3 * P && n <= 12; n += P)
                for (int d = 0; d < P; d++) check_order(AH_SCHED_INTERLEAVED, v * P, P, d, n);
    /* extra warm-up (plan "warmup_extra"): stage 0 of 4 with 2 more runs 5 warm-up forwards and keeps
     * min(S - s + x, n) = 6 slots of 8 micro-batches' (5 of 5), as the memory model counts */
    const int extra[4] = {2, 2, 0, 0};
    ah_sched_op_t ops[24];
    int64_t slots[1], wsets;
    for (int z = 0; z < 2; z++) {
        const ah_schedule_t sched = z ? AH_SCHED_ZERO_BUBBLE : AH_SCHED_1F1B;
        CHECK(ah_sched_build(sched, 4, 4, 0, 8, extra, ops, slots, &wsets), "build");
        CHECK_EQ_I64(slots[0], 6);
        CHECK(ops[4].kind == AH_OP_F && ops[5].kind == AH_OP_F && ops[6].kind == AH_OP_B && ops[6].mb == 0,
              "schedule %d: stage 0 runs 6 forwards (5 warm-up, then F(5)), then B(0)", (int)sched);
        CHECK(ah_sched_build(sched, 4, 4, 0, 5, extra, ops, slots, &wsets), "build");
        CHECK_EQ_I64(slots[0], 5);
    }
}

static void test_lr(void) {
    ah_train_opts_t o;
    ah_train_opts_default(&o);
    o.lr = 1e-3;
    o.warmup = 10;
    o.steps = 110;
    CHECK_NEAR(ah_train_lr(&o, 0), 1e-4, 1e-12);
    CHECK_NEAR(ah_train_lr(&o, 9), 1e-3, 1e-12);
    CHECK_NEAR(ah_train_lr(&o, 10), 1e-3, 1e-12);
    CHECK_NEAR(ah_train_lr(&o, 60), 0.55e-3, 1e-9); /* half-way down the cosine */
    CHECK_NEAR(ah_train_lr(&o, 110), 1e-4, 1e-9);
}

static ah_model_t small_model(void) {
    ah_model_t m;
    memset(&m, 0, sizeof m);
    strcpy(m.name, "test");
    m.arch = AH_ARCH_GPT2;
    m.n_layer = 2;
    m.d_model = 16;
    m.n_head = 4;
    m.n_kv_head = 4;
    m.d_ff = 32;
    m.vocab = 32;
    m.max_pos = 8;
    m.tied = true;
    m.norm_eps = 1e-5;
    return m;
}

static ah_status_t make_stage(ah_gpt_stage_t *st, ah_mem_t *mem, const ah_model_t *m, int t, int k,
                              ah_error_t *err) {
    ah_gpt_config_t c = {.model = m, .n_chunks = 1, .chunks = {{0, (int)m->n_layer, 1, false}}, .has_embed = true,
                         .has_head = true, .recompute = false, .t = t, .tp_rank = k,
                         .micro_batch = 2, .seq_len = 8};
    ah_mem_init(mem, 0, "test");
    return ah_gpt_stage_create(st, &c, ah_kernels_cpu(), NULL, mem, err);
}

/* A TP shard's initial weights are exactly the slice of the full (t = 1) tensor that the
 * sharding rule names: init does not depend on the plan. */
static void test_init_sharding(void) {
    ah_model_t m = small_model();
    ah_error_t err;
    ah_mem_t mem1, mem2;
    ah_gpt_stage_t full, part;
    CHECK(make_stage(&full, &mem1, &m, 1, 0, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_gpt_init_params(&full, 7, &err) == AH_OK, "%s", err.msg);
    for (int k = 0; k < 2; k++) {
        CHECK(make_stage(&part, &mem2, &m, 2, k, &err) == AH_OK, "%s", err.msg);
        CHECK(ah_gpt_init_params(&part, 7, &err) == AH_OK, "%s", err.msg);
        int bad = 0;
        for (int i = 0; i < part.n_params; i++) {
            const ah_gpt_param_t *p = &part.params[i], *f = ah_gpt_find(&full, p->def.name);
            for (int64_t e = 0; e < p->n; e++) { /* -1: vocabulary padding, which is zero */
                const int64_t x = ah_tensor_full_index(&p->def, 2, k, e);
                bad += part.w[p->offset + e] != (x < 0 ? 0.0f : full.w[f->offset + x]);
            }
        }
        CHECK(bad == 0, "tp rank %d: %d weights differ from the full tensors' slices", k, bad);
        ah_gpt_stage_free(&part);
    }
    /* A qkv shard holds the same heads of q, k and v: row 0 of rank 1's shard is row C/2 of q. */
    const ah_gpt_param_t *qkv = ah_gpt_find(&full, "h.0.attn.qkv.weight");
    CHECK_EQ_I64(ah_tensor_full_index(&qkv->def, 2, 1, 0), 8 * 16);
    CHECK_EQ_I64(ah_tensor_full_index(&qkv->def, 2, 1, 8 * 16), (16 + 8) * 16); /* k part */
    const ah_gpt_param_t *proj = ah_gpt_find(&full, "h.0.attn.proj.weight");
    CHECK_EQ_I64(ah_tensor_full_index(&proj->def, 2, 1, 9), 1 * 16 + 8 + 1); /* row 1, column 9 */
    CHECK(mem1.high > 0 && mem1.high == mem1.live, "the stage's bytes are all live");
    ah_gpt_stage_free(&full);
    CHECK_EQ_I64(mem1.live, 0);
}

static double loss_of(ah_gpt_stage_t *st, const int32_t *ids, const int32_t *tg) {
    double loss = 0;
    ah_error_t err;
    memcpy(ah_gpt_ids(st, 0), ids, 16 * sizeof *ids);
    memcpy(ah_gpt_targets(st), tg, 16 * sizeof *tg);
    CHECK(ah_gpt_forward(st, 0, NULL, 1.0f / 16, &loss, &err) == AH_OK, "%s", err.msg);
    return loss / 16;
}

/* Analytic gradients of every tensor against central differences (in fp32, so a loose bound). */
static void test_gradients(void) {
    ah_model_t m = small_model();
    ah_error_t err;
    ah_mem_t mem;
    ah_gpt_stage_t st;
    CHECK(make_stage(&st, &mem, &m, 1, 0, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_gpt_init_params(&st, 3, &err) == AH_OK, "%s", err.msg);
    /* Larger weights than the 0.02 init so every path carries signal. */
    for (int64_t i = 0; i < st.n_elems; i++) st.w[i] *= 2.0f;
    int32_t ids[16], tg[16];
    for (int i = 0; i < 16; i++) ids[i] = (i * 7 + 3) % 32, tg[i] = (i * 5 + 1) % 32;
    ah_gpt_zero_grads(&st);
    loss_of(&st, ids, tg);
    CHECK(ah_gpt_backward(&st, 0, NULL, NULL, -1, &err) == AH_OK, "%s", err.msg);
    float *g = malloc((size_t)st.n_elems * sizeof *g);
    memcpy(g, st.g, (size_t)st.n_elems * sizeof *g);
    for (int i = 0; i < st.n_params; i++) {
        const ah_gpt_param_t *p = &st.params[i];
        int64_t at = 0; /* the element with the largest gradient */
        for (int64_t e = 1; e < p->n; e++)
            if (fabsf(g[p->offset + e]) > fabsf(g[p->offset + at])) at = e;
        float *w = &st.w[p->offset + at];
        const float h = 2e-3f, keep = *w;
        *w = keep + h;
        const double up = loss_of(&st, ids, tg);
        *w = keep - h;
        const double down = loss_of(&st, ids, tg);
        *w = keep;
        const double fd = (up - down) / (2.0 * h), an = g[p->offset + at];
        CHECK(fabs(fd - an) <= 2e-3 + 2e-2 * fabs(an), "%s[%lld]: analytic %.6g, numeric %.6g",
              p->def.name, (long long)at, an, fd);
    }
    free(g);
    ah_gpt_stage_free(&st);
}

/* Spends `s` seconds of this process's CPU time. */
static volatile double burn_sink; /* volatile: the loop is not optimised away */

static void burn_cpu(double s) {
    const double end = ah_cpu_s() + s;
    while (ah_cpu_s() < end)
        for (int i = 0; i < 1000; i++) burn_sink += i;
}

/* One emulated forward of `cpu_s` CPU seconds through e; returns its wall seconds and, in
 * *work_s, the wall seconds of its compute alone (more than cpu_s when the machine is loaded). */
static double emulated_phase(double cpu_s, ah_emulator_t *e, double *work_s) {
    ah_error_t err;
    double compute;
    ah_emulator_begin(e, AH_EMULATE_FWD);
    const double t0 = e->phase_start.wall;
    burn_cpu(cpu_s);
    *work_s = ah_now_s() - t0;
    CHECK(ah_emulator_end(e, &compute, &err) == AH_OK, "emulator_end");
    CHECK(compute >= 0.9 * cpu_s, "compute %.4f s for %.4f s of CPU", compute, cpu_s);
    return ah_now_s() - t0;
}

/* A phase is stretched to k x the lower quartile of its kind's recent compute seconds: a call
 * with 4x the usual CPU time (a host hiccup), or one of a run where every other call takes 1.8x
 * (ranks sharing a core), lasts about k x the usual, not k x its own; a lasting change of speed
 * is followed once it makes up 6 of the last 7 calls. Bounds: the phase lasts at least the
 * stretch (the sleep), at most the longer of the stretch and its own compute plus 20 ms of
 * wake-up latency. A stretch from the call's own seconds is 120 ms longer for the hiccup and
 * 32 ms for the 1.8x call, and one from the median of the history 32 ms for the 1.8x call. */
static void expect_stretch(double got, double work, double want, const char *what) {
    CHECK(got >= 0.95 * want && got <= fmax(want, work) + 0.02,
          "%s: the phase lasted %.1f ms (its compute %.1f ms); expected about %.1f ms", what,
          1e3 * got, 1e3 * work, 1e3 * want);
}

static void test_emulation_typical(void) {
    const double k = 8, usual = 0.005;
    ah_emulator_t e;
    ah_error_t err;
    CHECK(ah_emulator_init(&e, k, NULL, 1, &err) == AH_OK, "emulator_init");
    double work;
    for (int i = 0; i < 5; i++) emulated_phase(usual, &e, &work);
    expect_stretch(emulated_phase(4 * usual, &e, &work), work, k * usual, "a 4x hiccup");
    for (int i = 0; i < 7; i++) emulated_phase(i % 2 ? 1.8 * usual : usual, &e, &work);
    expect_stretch(emulated_phase(1.8 * usual, &e, &work), work, k * usual,
                   "every other call at 1.8x");
    double last = 0;
    for (int i = 0; i < 6; i++) last = emulated_phase(2 * usual, &e, &work);
    expect_stretch(last, work, k * 2 * usual, "after 6 calls at 2x");
    CHECK(e.history[AH_EMULATE_FWD].n == AH_EMULATE_HISTORY, "history holds %d calls",
          e.history[AH_EMULATE_FWD].n);
    ah_emulator_free(&e);
}

/* A phase with a collective inside (a TP all-reduce) is stretched segment by segment: the rank
 * reaches the collective k x the first segment's typical compute after the phase began, even when
 * it lost its core for a while before it (here a 15 ms sleep without CPU), and the phase ends k x
 * the second segment's later. Each segment has its own history (a 2x longer second segment is
 * stretched as such). Not emulated, a split sleeps not at all. */
static void test_emulation_segments(void) {
    const double k = 6, usual = 0.005;
    ah_error_t err;
    ah_emulator_t e;
    CHECK(ah_emulator_init(&e, k, NULL, 3, &err) == AH_OK, "emulator_init");
    double at_split = 0, total = 0, compute = 0, idle = 0; /* idle: the phases' wall less their compute */
    for (int i = 0; i < 4; i++) {
        ah_emulator_begin(&e, AH_EMULATE_BWD);
        const double t0 = e.phase_start.wall;
        burn_cpu(usual);
        if (i == 3) ah_sleep_until(ah_now_s() + 0.015); /* off a core: wall time, no CPU */
        ah_emulator_split(&e);
        at_split = ah_now_s() - t0;
        burn_cpu(2 * usual);
        CHECK(ah_emulator_end(&e, &compute, &err) == AH_OK, "emulator_end");
        total = ah_now_s() - t0;
        idle += total - compute;
    }
    CHECK(at_split >= 0.95 * k * usual && at_split <= k * usual + 0.02,
          "the collective was reached %.1f ms into the phase; expected about %.1f ms", 1e3 * at_split,
          1e3 * k * usual);
    CHECK(total >= 0.95 * 3 * k * usual && total <= 3 * k * usual + 0.04,
          "the phase lasted %.1f ms; expected about %.1f ms", 1e3 * total, 1e3 * 3 * k * usual);
    CHECK(compute >= 0.9 * 3 * usual && compute <= 3 * usual + 0.01, "the phase's compute %.1f ms",
          1e3 * compute);
    CHECK(e.history[AH_EMULATE_BWD * 3].n == 4 && e.history[AH_EMULATE_BWD * 3 + 1].n == 4 &&
              e.history[AH_EMULATE_FWD * 3].n == 0,
          "one history per segment and kind");
    /* The emulator's sleep is most of the phases' wall beyond their CPU compute, and never more: on a
     * loaded machine the compute takes more wall time and the sleep less (the phases' lengths, checked
     * above, are what the emulation promises), so the floor is loose. */
    CHECK(e.slept > 0.5 * 4 * (3 * k - 3) * usual && e.slept <= idle + 0.001,
          "slept %.1f ms in all, the phases' wall beyond their compute %.1f ms", 1e3 * e.slept, 1e3 * idle);
    ah_emulator_free(&e);

    CHECK(ah_emulator_init(&e, 1, NULL, 3, &err) == AH_OK, "emulator_init (not emulated)");
    ah_emulator_begin(&e, AH_EMULATE_FWD);
    const double t0 = e.phase_start.wall;
    burn_cpu(usual);
    ah_emulator_split(&e);
    burn_cpu(usual);
    CHECK(ah_emulator_end(&e, &compute, &err) == AH_OK, "emulator_end");
    CHECK(e.slept == 0 && ah_now_s() - t0 < 2 * usual + 0.02, "not emulated: no sleep (%.1f ms)",
          1e3 * (ah_now_s() - t0));
    ah_emulator_free(&e);
}

/* The number of times e->progress was called (the test's transfers in flight). */
static void count_progress(void *ctx) { (*(int *)ctx)++; }

/* This thread's voluntary context switches so far: one per sleep that gave up the core. */
static long voluntary_switches(void) {
    struct rusage u;
    return getrusage(RUSAGE_THREAD, &u) == 0 ? u.ru_nvcsw : -1;
}

/* With transfers in flight (a progress callback, as training always has), the stretch still
 * sleeps off the core: the stretch gives the core up in many slices (each slice was a 100 us
 * spin, no sleep at all: 0 voluntary switches, the core held throughout) and progresses the
 * transfers between them, each call followed by a slice slept. Counted in context switches, not
 * CPU time, so a loaded machine (which would lend a spinning rank only a share of a core) cannot
 * pass the spin. The stretch is made 100 ms longer than the burn took here, measured: with a fixed
 * slowdown (9 x 5 ms), a burn that took over 45 ms of wall (load 15 on 2 cores) left no stretch at
 * all to sleep; and each slice's wake-up is late by what the load makes it, so the slices are
 * counted against the calls, not against a fixed number. */
static void test_emulation_sleeps_off_core(void) {
    const double k = 9, usual = 0.005, beyond = 0.1;
    ah_error_t err;
    ah_emulator_t e;
    CHECK(ah_emulator_init(&e, k, NULL, 1, &err) == AH_OK, "emulator_init");
    int calls = 0;
    e.progress = count_progress;
    e.progress_ctx = &calls;
    double compute;
    ah_emulator_begin(&e, AH_EMULATE_FWD);
    burn_cpu(usual);
    /* the stretch (slowdown x this first call's CPU seconds) ends `beyond` after the burn's wall */
    const double burn_wall = ah_now_s() - e.phase_start.wall, burn_cpu_s = ah_cpu_s() - e.phase_start.cpu;
    e.slowdown = fmax(k, (burn_wall + beyond) / burn_cpu_s);
    const long before = voluntary_switches();
    const double slept_before = e.slept;
    CHECK(ah_emulator_end(&e, &compute, &err) == AH_OK, "emulator_end");
    const long switches = voluntary_switches() - before;
    const double slept = e.slept - slept_before;
    /* about `beyond`, less whatever the thread waited for a core between the two clocks above and
     * the stretch (its length is test_emulation_typical's): a real sleep, not a few microseconds */
    CHECK(slept > 0.004, "the stretch slept %.1f ms; expected about %.1f", 1e3 * slept, 1e3 * beyond);
    CHECK(before >= 0 && calls >= 3 && switches >= calls / 2,
          "a %.1f ms stretch gave the core up %ld times and progressed the transfers %d times (a slice slept "
          "after each call expected: a sleep in slices, not a spin)", 1e3 * slept, switches, calls);
    ah_emulator_free(&e);
}

/* Where the overlapped sync's hook is (dp_sync.c): the emulated device reaches it k x the compute
 * so far (CPU seconds, so a loaded machine does not move it) into the phase, and asking neither
 * sleeps nor cuts the phase; not emulated, the device is there now. */
static void test_emulation_device_now(void) {
    const double k = 6, usual = 0.005;
    ah_error_t err;
    ah_emulator_t e;
    CHECK(ah_emulator_init(&e, 1, NULL, 1, &err) == AH_OK, "emulator_init (not emulated)");
    CHECK(fabs(ah_emulator_device_now(&e) - ah_now_s()) < 0.001, "not emulated: the device is now");
    ah_emulator_free(&e);
    CHECK(ah_emulator_init(&e, k, NULL, 1, &err) == AH_OK, "emulator_init");
    ah_emulator_begin(&e, AH_EMULATE_BWD);
    burn_cpu(usual);
    const double due = ah_emulator_device_now(&e) - e.phase_start.wall;
    CHECK(due >= 0.95 * k * usual && due <= k * (usual + 0.002), "the device reaches the hook %.1f ms in; "
          "expected about %.1f ms", 1e3 * due, 1e3 * k * usual);
    CHECK(e.segment == 0 && e.slept == 0, "asking cut the phase (segment %d) or slept (%.1f ms)", e.segment,
          1e3 * e.slept);
    ah_emulator_free(&e);
}

/* A thread burning CPU: marked as background (ah_cpu_background_begin) or not. */
static void *burner(void *arg) {
    const bool background = *(const bool *)arg;
    if (background) ah_cpu_background_begin();
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        for (int i = 0; i < 1000; i++) burn_sink += i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < 0.05);
    if (background) ah_cpu_background_end();
    return NULL;
}

/* ah_cpu_s leaves out a background thread's CPU (the checkpoint writer's: device emulation must not
 * stretch it as the device's compute) and counts another thread's, while it runs and after it ended. */
static void test_cpu_background(void) {
    for (int marked = 0; marked < 2; marked++) {
        const bool background = marked;
        const double c0 = ah_cpu_s();
        struct timespec p0, p1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p0);
        pthread_t th;
        pthread_create(&th, NULL, burner, (void *)&background);
        pthread_join(th, NULL);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &p1);
        const double counted = ah_cpu_s() - c0;
        const double process = (double)(p1.tv_sec - p0.tv_sec) + 1e-9 * (double)(p1.tv_nsec - p0.tv_nsec);
        CHECK(process >= 0.05, "the thread burnt %.1f ms of CPU", 1e3 * process);
        if (background)
            CHECK(counted < 0.01, "a background thread's %.1f ms of CPU left out: %.1f ms counted", 1e3 * process,
                  1e3 * counted);
        else
            CHECK(counted >= 0.05, "another thread's CPU counted: %.1f ms of %.1f ms", 1e3 * counted, 1e3 * process);
    }
}

/* The share of a core this process gets (CPU seconds over wall seconds of a 20 ms burn), waiting up
 * to `patience` seconds for it to reach one half. Below that the emulation's wall-clock checks cannot
 * tell a slow stretch from a machine that lends this process a tenth of a core (CI at load 17 on 2
 * cores): they are skipped, said, rather than failed; on a machine with room they run. */
static double core_share_within(double patience) {
    const double give_up = ah_now_s() + patience;
    double share;
    for (;;) {
        const double w0 = ah_now_s();
        burn_cpu(0.02);
        share = 0.02 / (ah_now_s() - w0);
        if (share >= 0.5 || ah_now_s() > give_up) break;
        ah_sleep_until(ah_now_s() + 1.0);
    }
    if (share < 0.5) printf("SKIP the emulation's timing checks: this process gets %.0f %% of a core\n", 100 * share);
    return share;
}

int main(void) {
    /* First: OpenBLAS's threads, once started by test_gradients, spin for a while after a call
     * and add to this process's CPU time, which emulation measures. */
    if (core_share_within(10.0) >= 0.5) {
        ah_test_retry(test_emulation_typical, 3, "emulation's stretch");
        ah_test_retry(test_emulation_segments, 3, "emulation's segments");
    }
    ah_test_retry(test_emulation_sleeps_off_core, 3, "emulation's sleep off the core");
    test_emulation_device_now();
    test_cpu_background();
    test_schedule();
    test_lr();
    test_init_sharding();
    test_gradients();
    return ah_test_finish();
}
