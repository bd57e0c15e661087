/* fp16 mixed precision on the planner side: the catalog's V100 priced at its fp16 tensor rate with
 * the 16-bit memory model, and --precision auto (ah_planner_run_auto) choosing fp16 on V100/T4,
 * bf16 on A100, and the faster of the two on a cluster that mixes them. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cost/cost.h"
#include "harness.h"
#include "planner/planner.h"

static bool cluster(const char *text, ah_cluster_t *c) {
    json_error_t je;
    json_t *doc = json_loads(text, 0, &je);
    ah_error_t err = {0};
    const bool ok = doc && ah_cluster_from_json(doc, "c.json", c, &err) == AH_OK;
    CHECK(ok, "cluster %s: %s", text, doc ? err.msg : je.text);
    json_decref(doc);
    return ok;
}

static ah_model_t gpt2(void) {
    ah_model_t m;
    ah_error_t err = {0};
    CHECK(ah_model_preset("gpt2-124m", &m, &err) == AH_OK, "preset: %s", err.msg);
    return m;
}

/* One block of GPT-2 124M on a V100 (t = 1, micro-batch 4 x 1024 tokens: compute-bound) is priced
 * at the fp16 tensor rate: exactly as a bf16 block on the same type given a bf16 rate of 125
 * TFLOP/s (both 16-bit; the GEMM curve of cost/kernel_time.h at that peak), several times faster
 * than fp32's 15.7 (the memory-bound kernels do not scale with the rate); bf16 is not available;
 * memory: 16 bytes of state per parameter, 16-bit activations with fused attention. */
static void test_pricing(void) {
    ah_cluster_t c;
    if (!cluster("{\"nodes\": [{\"name\": \"v0\", \"gpu\": \"V100-16G\", \"count\": 8}]}", &c)) return;
    const ah_model_t m = gpt2();
    const ah_gpu_type_t *v = &c.types[0];
    CHECK(ah_gpu_runs(v, AH_PREC_FP16) && !ah_gpu_runs(v, AH_PREC_BF16) && ah_gpu_runs(v, AH_PREC_FP32),
          "V100: fp16 and fp32, no bf16");
    ah_train_t tr = {.global_batch = 8, .seq_len = 1024, .micro_batch = 4, .precision = AH_PREC_FP16};
    const ah_cost_ctx_t ctx = {.model = &m, .cluster = &c, .train = &tr, .t = 1, .profile = NULL, .cp = 1};
    ah_stage_cost_t h, f;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &h);
    const double flops = ah_layer_fwd_flops(&m, AH_LAYER_BLOCK, 1, 4, 1024);
    CHECK(h.fwd_s > flops / (125e12 * v->efficiency) && h.fwd_s < 2 * flops / (125e12 * v->efficiency),
          "fp16 block forward %g s: at the fp16 rate (%g s at its ceiling)", h.fwd_s, flops / (125e12 * v->efficiency));
    c.types[0].tflops_bf16 = 125; /* a V100 that could run bf16 at its fp16 rate */
    tr.precision = AH_PREC_BF16;
    ah_stage_cost_t b;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &b);
    CHECK_NEAR(h.fwd_s, b.fwd_s, 1e-12);
    CHECK_NEAR(h.bwd_s, b.bwd_s, 1e-12);
    c.types[0].tflops_bf16 = 0;
    tr.precision = AH_PREC_FP16;
    const int64_t p_block = ah_layer_params(&m, AH_LAYER_BLOCK, 1);
    CHECK_EQ_I64(h.params, p_block);
    CHECK_EQ_I64(h.state_bytes, p_block * 16); /* fp16 w 2 + g 2 + fp32 master 4 + m 4 + v 4 */
    /* activations: every tensor 2 bytes, the norm and softmax statistics 4, no T x T matrix */
    const int64_t act16 = ah_layer_act_bytes(&m, AH_LAYER_BLOCK, 1, 4, 1024, AH_PREC_FP16, false);
    CHECK_EQ_I64(act16, ah_layer_act_bytes(&m, AH_LAYER_BLOCK, 1, 4, 1024, AH_PREC_BF16, false));
    CHECK_EQ_I64(h.act_bytes_per_mb, act16);
    CHECK_EQ_I64(ah_layer_act_bytes(&m, AH_LAYER_BLOCK, 1, 4, 1024, AH_PREC_FP16, true), 4 * 1024 * 768 * 2);
    tr.precision = AH_PREC_FP32;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &f);
    CHECK(f.fwd_s / h.fwd_s > 4 && f.fwd_s / h.fwd_s < 125 / 15.7 + 1e-9, "fp32 / fp16 block time %g: below the "
          "rates' 7.96, above 4", f.fwd_s / h.fwd_s);
    CHECK(f.act_bytes_per_mb > 2 * act16, "fp32 keeps 4-byte tensors and the T x T probabilities");
    ah_cluster_free(&c);
}

static ah_planner_opts_t opts(void) {
    ah_planner_opts_t o;
    ah_planner_opts_default(&o);
    o.train.global_batch = 32;
    o.train.seq_len = 1024;
    o.train.micro_batch = 4;
    return o;
}

/* ah_planner_run_auto on the cluster: the precision chosen, checked against want (-1: the faster
 * of the two plans made directly), and precision_why holding `why`. */
static void check_auto(const char *what, const char *text, int want, const char *why) {
    ah_cluster_t c;
    if (!cluster(text, &c)) return;
    const ah_model_t m = gpt2();
    ah_planner_opts_t o = opts();
    ah_plan_result_t r;
    ah_error_t err = {0};
    if (ah_planner_run_auto(&m, &c, &o, &r, &err) != AH_OK) {
        CHECK(false, "%s: auto plans: %s", what, err.msg);
        ah_cluster_free(&c);
        return;
    }
    printf("%s: %s (%s)\n", what, ah_precision_name(r.plan.train.precision), r.precision_why);
    if (want >= 0) CHECK(r.plan.train.precision == (ah_precision_t)want, "%s: chose %s", what,
                         ah_precision_name(r.plan.train.precision));
    CHECK(strstr(r.precision_why, why) != NULL, "%s: why \"%s\" says \"%s\"", what, r.precision_why, why);
    double best = INFINITY;
    for (int p = AH_PREC_BF16; p <= AH_PREC_FP16; p++) { /* never slower than either plan */
        ah_plan_result_t d;
        o.train.precision = (ah_precision_t)p;
        if (ah_planner_run(&m, &c, &o, &d, &err) != AH_OK) continue;
        best = fmin(best, d.eval.pred.iteration_s);
        ah_plan_result_free(&d);
    }
    CHECK(r.eval.pred.iteration_s <= best * (1 + 1e-12), "%s: %.6g s, the best direct plan %.6g s", what,
          r.eval.pred.iteration_s, best);
    ah_plan_result_free(&r);
    ah_cluster_free(&c);
}

static void test_auto(void) {
    check_auto("V100 + T4", "{\"nodes\": [{\"name\": \"v0\", \"gpu\": \"V100-16G\", \"count\": 8},"
               " {\"name\": \"t0\", \"gpu\": \"T4\", \"count\": 4}]}", AH_PREC_FP16, "bf16: no GPU type of the cluster runs it");
    check_auto("A100", "{\"nodes\": [{\"name\": \"a0\", \"gpu\": \"A100-80G\", \"count\": 8}]}", AH_PREC_BF16,
               "every GPU type runs it");
    /* 2 A100s and 8 V100s: bf16 leaves the V100s out, fp16 can use them; the faster plan wins */
    check_auto("A100 + V100", "{\"nodes\": [{\"name\": \"a0\", \"gpu\": \"A100-80G\", \"count\": 2},"
               " {\"name\": \"v0\", \"gpu\": \"V100-16G\", \"count\": 8}]}", -1, "bf16");
    /* a custom type with fp32 only beside V100s: fp16 plans without it */
    check_auto("V100 + fp32-only", "{\"gpu_types\": {\"X\": {\"memory_gib\": 16, \"tflops\": {\"fp32\": 10},"
               " \"mem_bw_gb_s\": 900, \"intra_node_gb_s\": 16}}, \"nodes\": [{\"name\": \"v0\", \"gpu\": \"V100-16G\","
               " \"count\": 4}, {\"name\": \"x0\", \"gpu\": \"X\", \"count\": 4}]}", AH_PREC_FP16,
               "some types run neither 16-bit precision");
    /* no 16-bit rate anywhere: fp32, not an error */
    check_auto("fp32-only", "{\"gpu_types\": {\"X\": {\"memory_gib\": 16, \"tflops\": {\"fp32\": 10},"
               " \"mem_bw_gb_s\": 900, \"intra_node_gb_s\": 16}}, \"nodes\": [{\"name\": \"x0\", \"gpu\": \"X\","
               " \"count\": 4}]}", AH_PREC_FP32, "fp32: no GPU type gives a bf16 or fp16 rate");
}

int main(void) {
    test_pricing();
    test_auto();
    CHECK(strcmp(ah_precision_name(AH_PREC_FP16), "fp16") == 0, "name");
    ah_precision_t p = AH_PREC_FP32;
    CHECK(ah_precision_parse("fp16", &p) && p == AH_PREC_FP16, "parse fp16");
    CHECK(!ah_precision_parse("FP16", &p) && !ah_precision_parse("half", &p), "unknown names refused");
    return ah_test_finish();
}
