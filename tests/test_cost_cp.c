/* The cost model under context parallelism (docs/cost-model.md "Context parallelism"): a CP
 * rank's activation bytes (CP 2 halves every tensor but attention's, which becomes the ring's
 * logsumexp), the ring's buffers and step, the ring's time against the link (more time on a
 * slower link; hidden behind the attention on a fast one; the transfers' own seconds on a very
 * slow one), and ah_evaluate on the example CP plans: a time, memory per CP rank, and a DP group
 * of every replica's CP ranks; a profile's ring attention (cost/profile.h "ring_attention"): a CP
 * rank's block priced as block / c + ring - attention / c, or from an entry at the rank's own T/c
 * tokens where the profile has one, the file's form read back, a bad degree refused. */
#include <math.h>
#include <stdio.h>

#include <jansson.h>
#include <string.h>

#include "cost/cost.h"
#include "cost/profile.h"
#include "harness.h"
#include "plan/evaluate.h"
#include "plan/plan.h"

static ah_model_t preset(const char *name) {
    ah_model_t m;
    ah_error_t err = {0};
    CHECK(ah_model_preset(name, &m, &err) == AH_OK, "preset %s: %s", name, err.msg);
    return m;
}

static void test_act_bytes(void) {
    const ah_model_t models[2] = {preset("tiny-gpt2"), preset("tiny-llama")};
    for (int k = 0; k < 2; k++) {
        const ah_model_t *m = &models[k];
        const int64_t b = 2, T = 32;
        for (int t = 1; t <= 2; t++) {
            /* the embedding's ids and the head's tensors: half at CP 2, a quarter at CP 4 */
            static const ah_layer_kind_t ends[2] = {AH_LAYER_EMBED, AH_LAYER_HEAD};
            for (int e = 0; e < 2; e++) {
                const int64_t one = ah_layer_act_bytes(m, ends[e], t, b, T, AH_PREC_FP32, false);
                CHECK_EQ_I64(ah_layer_act_bytes_cp(m, ends[e], t, b, T, 2, AH_PREC_FP32, false), one / 2);
                CHECK_EQ_I64(ah_layer_act_bytes_cp(m, ends[e], t, b, T, 4, AH_PREC_FP32, false), one / 4);
            }
            /* a block: its tensors but attention's halve; the probabilities (b H/t T^2 fp32) become
             * the ring's logsumexp (b H/t T/2 fp32) */
            const int64_t heads = m->n_head / t;
            const int64_t one = ah_layer_act_bytes(m, AH_LAYER_BLOCK, t, b, T, AH_PREC_FP32, false) - b * heads * T * T * 4;
            const int64_t two = ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, 2, AH_PREC_FP32, false) -
                                b * heads * (T / 2) * 4;
            CHECK(two * 2 == one, "%s t %d: a CP 2 rank's block tensors %lld bytes, the unsplit %lld", m->name, t,
                  (long long)two, (long long)one);
            /* recomputation keeps the block input: half */
            CHECK_EQ_I64(ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, 2, AH_PREC_FP32, true),
                         ah_layer_act_bytes(m, AH_LAYER_BLOCK, t, b, T, AH_PREC_FP32, true) / 2);
            /* cp 1 is the unsplit model */
            CHECK_EQ_I64(ah_layer_act_bytes_cp(m, AH_LAYER_BLOCK, t, b, T, 1, AH_PREC_FP32, false),
                         ah_layer_act_bytes(m, AH_LAYER_BLOCK, t, b, T, AH_PREC_FP32, false));
        }
    }
    /* tiny-llama (C 64, H 4, KV 2: hd 16), b 2, T 32, CP 2, t 1: a block is 2 x 16 x 2 x 2 x 16 x 4
     * = 8192 bytes; the ring: 4 blocks, accumulator 2 x 4 x 16 x 16 x 4 = 8192, statistics 2 x 4 x
     * 16 x 2 x 4 = 1024, scratch 2 x 16 x 16 x 4 = 2048 */
    const ah_model_t *l = &models[1];
    CHECK(l->d_model == 64 && l->n_head == 4 && l->n_kv_head == 2, "tiny-llama's shape changed: fix the hand count");
    CHECK_EQ_I64(ah_cp_ring_block_bytes(l, 1, 2, 32, 2), 8192);
    CHECK_EQ_I64(ah_cp_ring_bytes(l, 1, 2, 32, 2, AH_PREC_FP32), 4 * 8192 + 8192 + 1024 + 2048);
    CHECK_EQ_I64(ah_cp_ring_bytes(l, 1, 2, 32, 1, AH_PREC_FP32), 0);
    /* bf16, fp16 (the CUDA backend's ring): the same fp32 blocks, accumulator and statistics; the
     * scratch is the backward's D, one fp32 per row: 2 x 4 x 16 x 4 = 512 */
    for (int p = AH_PREC_BF16; p <= AH_PREC_FP16; p++)
        CHECK_EQ_I64(ah_cp_ring_bytes(l, 1, 2, 32, 2, (ah_precision_t)p), 4 * 8192 + 8192 + 1024 + 512);
}

/* The ring's time on stage [0, 4) (the embedding and the head too) of p's model on its first
 * stage's type, CP cp, at ring bandwidth bw (latency 0). */
static ah_stage_cost_t ring_stage(const ah_plan_t *p, double bw, int cp) {
    ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = 1, .profile = NULL,
                         .cp = cp, .cp_bw = bw, .cp_latency_s = 0};
    ah_stage_cost_t sc;
    ah_stage_cost(&ctx, p->pipelines[0].stages[0].type, 0, 4, true, true, false, &sc);
    return sc;
}

static void test_ring_time(const ah_plan_t *p) {
    const ah_stage_cost_t fast = ring_stage(p, 1e15, 2), mid = ring_stage(p, 1e8, 2), slow = ring_stage(p, 1e5, 2);
    const ah_stage_cost_t none = ring_stage(p, 1e8, 1);
    /* a fast link: the forward's transfer hides behind the attention; the backward's gradient
     * accumulators (sent after each step's compute) cost their few bytes' time */
    CHECK(fast.cp_comm_fwd_s == 0, "fast ring: %.3g s of the forward's transfers exposed", fast.cp_comm_fwd_s);
    CHECK(fast.cp_comm_bwd_s > 0 && fast.cp_comm_bwd_s < 1e-9, "fast ring: backward %.3g s", fast.cp_comm_bwd_s);
    /* lower bandwidth, more time */
    CHECK(slow.cp_comm_fwd_s > mid.cp_comm_fwd_s && mid.cp_comm_fwd_s >= fast.cp_comm_fwd_s,
          "forward ring %.3g, %.3g, %.3g s at 1e15, 1e8, 1e5 B/s", fast.cp_comm_fwd_s, mid.cp_comm_fwd_s,
          slow.cp_comm_fwd_s);
    CHECK(slow.cp_comm_bwd_s > mid.cp_comm_bwd_s && mid.cp_comm_bwd_s > fast.cp_comm_bwd_s,
          "backward ring %.3g, %.3g, %.3g s", fast.cp_comm_bwd_s, mid.cp_comm_bwd_s, slow.cp_comm_bwd_s);
    CHECK(slow.fwd_s > fast.fwd_s && slow.bwd_s > fast.bwd_s, "the stage's time grows with the ring's");
    /* a very slow link: the transfers' own time dominates: per block, 1 forward step of x and 1 + 2
     * backward (x = one key/value block / 1e5 B/s; tiny-gpt2 (C 64, 4 heads), b 1, T 32: 1 x 16 x
     * 2 x 64 x 4 = 8192 bytes), the attention hidden behind it negligible */
    CHECK_EQ_I64(ah_cp_ring_block_bytes(&p->model, 1, p->train.micro_batch, p->train.seq_len, 2), 8192);
    const double x = 8192 / 1e5;
    CHECK_NEAR(slow.cp_comm_fwd_s, 4 * x, 1e-3);
    CHECK_NEAR(slow.cp_comm_bwd_s, 4 * 3 * x, 1e-3);
    /* the compute: a CP 2 rank does half the unsplit stage's FLOPs (the roofline's parameter bytes
     * do not halve) */
    const double compute = fast.fwd_s - fast.cp_comm_fwd_s;
    CHECK(compute < none.fwd_s && compute >= none.fwd_s / 2 * (1 - 1e-12), "a CP 2 rank's forward %.3g s, unsplit %.3g s",
          compute, none.fwd_s);
    CHECK(none.cp_comm_fwd_s == 0 && none.cp_comm_bwd_s == 0, "no ring at cp 1");
}

/* p's 4-block stage (no embedding, head or recomputation) at CP cp on a fast ring, priced with prof:
 * its forward and backward seconds less the ring's exposed transfers. */
static void expect_compute(const ah_plan_t *p, const ah_profile_t *prof, int cp, double fwd, double bwd) {
    ah_cost_ctx_t ctx = {.model = &p->model, .cluster = &p->cluster, .train = &p->train, .t = 1, .profile = prof,
                         .cp = cp, .cp_bw = 1e15, .cp_latency_s = 0};
    ah_stage_cost_t sc;
    ah_stage_cost(&ctx, p->pipelines[0].stages[0].type, 0, 4, false, false, false, &sc);
    CHECK_NEAR(sc.fwd_s - sc.cp_comm_fwd_s, fwd, 1e-12);
    CHECK_NEAR(sc.bwd_s - sc.cp_comm_bwd_s, bwd, 1e-12);
}

/* A profile that measured the attention kernel and the ring's at CP 2: p's 4-block stage (no
 * embedding, head or recomputation) at CP 2 on a fast ring computes 4 x (block / 2 + ring -
 * attention / 2); CP 4, not measured, 4 x block / 4. */
static void test_profile_ring(const ah_plan_t *p) {
    ah_profile_t *prof = ah_profile_create("test", &p->model);
    ah_profile_entry_t e = {.tp = 1, .micro_batch = p->train.micro_batch, .seq_len = p->train.seq_len,
                            .precision = AH_PREC_FP32, .emulate_slowdown = 1};
    snprintf(e.gpu, sizeof e.gpu, "%s", p->cluster.types[p->pipelines[0].stages[0].type].name);
    e.layer[AH_LAYER_BLOCK] = (ah_profile_layer_t){.present = true, .fwd_s = 1e-3, .bwd_s = 2e-3};
    e.attention = (ah_profile_layer_t){.present = true, .fwd_s = 4e-4, .bwd_s = 8e-4};
    e.ring[1] = (ah_profile_layer_t){.present = true, .fwd_s = 5e-4, .bwd_s = 1.4e-3};
    ah_error_t err = {0};
    CHECK(prof && ah_profile_add(prof, &e, &err) == AH_OK, "profile: %s", err.msg);
    if (prof) {
        expect_compute(p, prof, 2, 4 * (5e-4 + 5e-4 - 2e-4), 4 * (1e-3 + 1.4e-3 - 4e-4));
        expect_compute(p, prof, 4, 1e-3, 2e-3);
    }
    /* With an entry at a CP 2 rank's own T/2 tokens, its block is that entry's, its attention at
     * T/2 replaced by the ring's: 4 x (block(T/2) + ring - attention(T/2)); CP 4 (no entry at T/4)
     * as before. */
    ah_profile_entry_t half = e;
    half.seq_len = p->train.seq_len / 2;
    half.layer[AH_LAYER_BLOCK] = (ah_profile_layer_t){.present = true, .fwd_s = 6e-4, .bwd_s = 1.1e-3};
    half.attention = (ah_profile_layer_t){.present = true, .fwd_s = 1e-4, .bwd_s = 2e-4};
    CHECK(prof && ah_profile_add(prof, &half, &err) == AH_OK, "profile at T/2: %s", err.msg);
    if (prof) {
        expect_compute(p, prof, 2, 4 * (6e-4 + 5e-4 - 1e-4), 4 * (1.1e-3 + 1.4e-3 - 2e-4));
        expect_compute(p, prof, 4, 1e-3, 2e-3);
    }
    json_t *doc = prof ? ah_profile_to_json(prof) : NULL;
    ah_profile_t *back = NULL;
    CHECK(doc && ah_profile_from_json(doc, "p.json", &back, &err) == AH_OK, "read back: %s", err.msg);
    if (back) {
        const ah_profile_entry_t *b = ah_profile_get(back, 0);
        CHECK(b->attention.present && b->ring[1].present && !b->ring[2].present && b->ring[1].bwd_s == 1.4e-3,
              "the attention figures read back");
        ah_profile_free(back);
    }
    json_t *ring = doc ? json_object_get(json_array_get(json_object_get(doc, "entries"), 0), "ring_attention") : NULL;
    if (ring) {
        json_object_set_new(json_array_get(ring, 0), "cp", json_integer(3));
        CHECK(ah_profile_from_json(doc, "p.json", &back, &err) == AH_ERR_INVALID &&
                  strstr(err.msg, "p.json: entries[0].ring_attention[0].cp: 3 is not 2, 4 or 8"),
              "cp 3: %s", err.msg);
    }
    json_decref(doc);
    ah_profile_free(prof);
}

static void test_evaluate(void) {
    static const char *const plans[] = {"train-cp2", "train-cp4", "train-cp2-tp2", "train-cp2-pp2", "train-llama-cp2",
                                        "train-cp-mixed"};
    for (size_t k = 0; k < sizeof plans / sizeof *plans; k++) {
        char path[256];
        snprintf(path, sizeof path, "examples/plans/%s.json", plans[k]);
        ah_plan_t p;
        ah_eval_t e;
        ah_error_t err = {0};
        const bool loaded = ah_plan_load(path, NULL, &p, &err) == AH_OK;
        CHECK(loaded, "%s: %s", path, err.msg);
        if (!loaded) continue;
        const bool ok = ah_evaluate(&p, NULL, &e, &err) == AH_OK;
        CHECK(ok, "evaluate %s: %s", path, err.msg);
        if (ok) {
            CHECK(e.pred.iteration_s > 0 && isfinite(e.pred.iteration_s) && e.pred.breakdown.cp_comm_s > 0,
                  "%s: iteration %.3g s, ring %.3g s", plans[k], e.pred.iteration_s, e.pred.breakdown.cp_comm_s);
            CHECK(e.n_devices == ah_plan_device_count(&p), "%s: %d devices scored of %d", plans[k], e.n_devices,
                  ah_plan_device_count(&p));
            /* every CP rank of a stage holds the same bytes */
            for (int r = 1; r < e.n_devices; r++)
                if (e.devices[r].pipeline == e.devices[r - 1].pipeline && e.devices[r].stage == e.devices[r - 1].stage)
                    CHECK_EQ_I64(e.devices[r].memory_bytes, e.devices[r - 1].memory_bytes);
            ah_eval_free(&e);
        }
        if (k == 0 && ok) test_ring_time(&p);
        if (k == 0 && ok) test_profile_ring(&p);
        ah_plan_free(&p);
    }
}

/* The DP sync of a CP 2 pipeline beside a CP 1 one: a layer's group is 3 members, so it moves
 * 2 (3 - 1) / 3 of the bytes where two CP 1 pipelines move 2 (2 - 1) / 2. */
static void test_dp_members(void) {
    ah_plan_t p;
    ah_eval_t e1, e2;
    ah_error_t err = {0};
    const bool loaded = ah_plan_load("examples/plans/train-cp-mixed.json", NULL, &p, &err) == AH_OK;
    CHECK(loaded, "%s", err.msg);
    if (!loaded) return;
    p.pipelines[1].cp = 1; /* cp 2, 1, 1: 4 members */
    CHECK(ah_evaluate(&p, NULL, &e1, &err) == AH_OK, "%s", err.msg);
    p.pipelines[0].cp = 1; /* 1, 1, 1: 3 members */
    CHECK(ah_evaluate(&p, NULL, &e2, &err) == AH_OK, "%s", err.msg);
    CHECK(e1.pred.breakdown.dp_sync_s > e2.pred.breakdown.dp_sync_s,
          "DP sync over 4 members %.3g s, over 3 %.3g s", e1.pred.breakdown.dp_sync_s, e2.pred.breakdown.dp_sync_s);
    ah_eval_free(&e1);
    ah_eval_free(&e2);
    ah_plan_free(&p);
}

int main(void) {
    test_act_bytes();
    test_evaluate();
    test_dp_members();
    return ah_test_finish();
}
