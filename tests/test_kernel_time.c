/* Kernel time (cost/kernel_time.h) and how a stage uses it (issue 18): the GEMM curve's tile and
 * wave quantization over the SM count and its K saturation, counted by hand; a larger micro-batch
 * raising a GPU type's GEMM efficiency (where the flat roofline only scaled); fused attention
 * priced as the causal half; memory-bound kernels from their bytes; CPU-emulated types and types
 * without an SM count keeping the flat roofline; the cluster file's sm_count and attention. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/json.h"
#include "cost/cost.h"
#include "cost/kernel_time.h"
#include "harness.h"

/* A type with round figures: 100 SMs, ceiling 0.8, 100 TFLOP/s bf16, 1000 GB/s. */
static ah_gpu_type_t round_type(void) {
    ah_gpu_type_t g = {.name = "round", .memory_gib = 80, .tflops_bf16 = 100, .tflops_fp16 = 100,
                       .tflops_fp32 = 10, .mem_bw_gb_s = 1000, .intra_node_gb_s = 100,
                       .efficiency = 0.8, .sm_count = 100};
    return g;
}

static void test_curve(void) {
    ah_gpu_type_t g = round_type();
    const double ksat = 4096.0 / (4096 + AH_GEMM_K_HALF);
    /* 2560 x 5120: 10 x 40 = 400 tiles of 256 x 128, 4 full waves of 100: no quantization. */
    CHECK_NEAR(ah_gemm_efficiency(&g, 2560, 5120, 4096, 1), 0.8 * ksat, 1e-12);
    /* One more tile column (N = 5248 = 41 x 128): 410 tiles need 5 waves (500 slots) with
     * 256 x 128 and 128 x 256 alike (20 x 21 = 420 -> 5 waves); the 128 x 128 tile gives 20 x 41
     * = 820 tiles, 9 waves (900): 0.9 x 820/900. The best: 0.9 x 0.911 = 0.82 of 0.8 x ksat. */
    const double large = 410.0 / 500, small = 0.9 * 820.0 / 900;
    CHECK_NEAR(ah_gemm_efficiency(&g, 2560, 5248, 4096, 1), 0.8 * ksat * fmax(large, small), 1e-12);
    /* Tile quantization: N = 5120 + 64 pads the last tile column: 5184 / (41 x 128) used, and
     * 20 x 41 = 820 tiles of 128 x 128 (9 waves) at 0.9; 256 x 128: 410 tiles, 5 waves. */
    const double pad = 5184.0 / 5248;
    CHECK_NEAR(ah_gemm_efficiency(&g, 2560, 5184, 4096, 1),
               0.8 * ksat * pad * fmax(410.0 / 500, 0.9 * 820.0 / 900), 1e-12);
    /* K saturation: K = 64 runs at half the rate of K -> infinity. */
    CHECK_NEAR(ah_gemm_efficiency(&g, 2560, 5120, AH_GEMM_K_HALF, 1), 0.4, 1e-12);
    /* Seconds: compute-bound at that efficiency, or the bytes of A, B, C when they are slower. */
    const double flops = 2.0 * 2560 * 5120 * 4096;
    CHECK_NEAR(ah_gemm_seconds(&g, 100e12, 2, 2560, 5120, 4096, 1), flops / (100e12 * 0.8 * ksat), 1e-12);
    /* on a 10 GB/s memory the same product is bound by moving A, B and C once */
    g.mem_bw_gb_s = 10;
    CHECK_NEAR(ah_gemm_seconds(&g, 100e12, 2, 2560, 5120, 4096, 1),
               (2560.0 * 4096 + 4096.0 * 5120 + 2560.0 * 5120) * 2 / 10e9, 1e-12);
}

static void test_attention(void) {
    ah_gpu_type_t g = round_type();
    /* Fused: the causal half of QK^T and PV, plus q, k, v and out once. */
    const double b = 1, T = 2048, H = 16, hd = 128, bh = b * H;
    const double qk = 2 * T * (T / 2) * hd * bh / (100e12 * ah_gemm_efficiency(&g, T, T / 2, hd, bh));
    const double pv = 2 * T * hd * (T / 2) * bh / (100e12 * ah_gemm_efficiency(&g, T, hd, T / 2, bh));
    CHECK_NEAR(ah_attention_fwd_seconds(&g, 100e12, 2, b, T, H, hd), qk + pv + 4 * bh * T * hd * 2 / 1e12, 1e-12);
    /* Unfused: the full square in memory costs more than the fused kernel, forward and backward. */
    ah_gpu_type_t u = g;
    u.attention_unfused = true;
    CHECK(ah_attention_fwd_seconds(&u, 100e12, 2, b, T, H, hd) >
              1.5 * ah_attention_fwd_seconds(&g, 100e12, 2, b, T, H, hd),
          "unfused forward is not slower than fused");
    CHECK(ah_attention_bwd_seconds(&u, 100e12, 2, b, T, H, hd) >
              ah_attention_bwd_seconds(&g, 100e12, 2, b, T, H, hd),
          "unfused backward is not slower than fused");
}

static ah_cluster_t one_type_cluster(ah_gpu_type_t *g, ah_node_t *n) {
    *n = (ah_node_t){.name = "n0", .type = 0, .count = 8, .zone = "a"};
    ah_cluster_t c = {.types = g, .n_types = 1, .nodes = n, .n_nodes = 1,
                      .net = {.inter_node_gb_s = 25, .inter_zone_gb_s = 1, .latency_us = 10,
                              .inter_zone_latency_us = 100, .intra_latency_us = 5, .cloud_gb_s = 1}};
    return c;
}

static double block_fwd_per_seq(ah_cluster_t *c, const ah_model_t *m, int64_t b) {
    ah_train_t tr = {.global_batch = 64, .seq_len = 2048, .micro_batch = b, .precision = AH_PREC_BF16};
    ah_cost_ctx_t ctx = {.model = m, .cluster = c, .train = &tr, .t = 1, .profile = NULL};
    ah_stage_cost_t sc;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &sc);
    return sc.fwd_s / (double)b;
}

static void test_stage(void) {
    ah_model_t m;
    ah_error_t err;
    CHECK(ah_model_preset("gpt2-1.5b", &m, &err) == AH_OK, "%s", err.msg);
    const ah_gpu_type_t *a100 = ah_gpu_catalog_find("A100-80G");
    CHECK(a100 && a100->sm_count == 108, "A100: 108 SMs (whitepaper)");
    if (!a100) return;
    /* docs/cost-model.md's curve table: the 1.7B run's QKV on an A100 (0.703 with SUSTAINED
     * 0.84; 0.686 = 0.703 x 0.82 / 0.84 since SUSTAINED was re-fitted with the 76B row
     * interleaved: the ceiling scales, the shape terms do not change) */
    CHECK_NEAR(ah_gemm_efficiency(a100, 2048, 6912, 2304, 1), 0.686, 1e-3);
    ah_gpu_type_t g = *a100;
    ah_node_t n;
    ah_cluster_t c = one_type_cluster(&g, &n);
    /* A larger micro-batch fills more waves: less time per sequence (the flat roofline gave the
     * same time per sequence at every micro-batch size). GPT-2 124M's 2048 x 768 outputs are 48
     * tiles of 256 x 128 (96 of 128 x 128, at 0.9) for 108 SMs at micro-batch 1, 384 at 8. */
    ah_model_t small;
    CHECK(ah_model_preset("gpt2-124m", &small, &err) == AH_OK, "%s", err.msg);
    const double s1 = block_fwd_per_seq(&c, &small, 1), s8 = block_fwd_per_seq(&c, &small, 8);
    CHECK(s8 < 0.95 * s1, "micro-batch 8 is not faster per sequence than 1: %g vs %g", s8, s1);
    const double l1 = block_fwd_per_seq(&c, &m, 1);
    /* The block's forward against its matmul FLOPs at the type's peak: between the ceiling and
     * half of it (memory-bound kernels and quantization cost something, not everything). */
    const double flops = ah_layer_fwd_flops(&m, AH_LAYER_BLOCK, 1, 1, 2048);
    const double frac = flops / (l1 * 312e12);
    CHECK(frac < a100->efficiency && frac > 0.5 * a100->efficiency, "achieved %g of peak", frac);

    /* Emulated (even on a catalog base) or without an SM count: the flat roofline, exactly. */
    ah_train_t tr = {.global_batch = 64, .seq_len = 2048, .micro_batch = 1, .precision = AH_PREC_BF16};
    ah_cost_ctx_t ctx = {.model = &m, .cluster = &c, .train = &tr, .t = 1, .profile = NULL};
    const double flat = fmax(flops / (312e12 * g.efficiency),
                             (double)(ah_layer_params(&m, AH_LAYER_BLOCK, 1) * 2 +
                                      ah_layer_act_bytes(&m, AH_LAYER_BLOCK, 1, 1, 2048, AH_PREC_BF16, false)) /
                                 (g.mem_bw_gb_s * 1e9));
    ah_stage_cost_t sc;
    g.emulate_slowdown = 2;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &sc);
    CHECK_NEAR(sc.fwd_s, flat, 1e-12);
    g.emulate_slowdown = 0;
    g.sm_count = 0;
    ah_stage_cost(&ctx, 0, 0, 1, false, false, false, &sc);
    CHECK_NEAR(sc.fwd_s, flat, 1e-12);
}

static void test_cluster_fields(void) {
    const char *ok = "{\"gpu_types\": {\"A100-80G\": {\"sm_count\": 54, \"attention\": \"unfused\"},"
                     " \"mine\": {\"memory_gib\": 24, \"tflops\": {\"bf16\": 100}, \"mem_bw_gb_s\": 900,"
                     " \"intra_node_gb_s\": 32}},"
                     " \"nodes\": [{\"name\": \"n0\", \"gpu\": \"A100-80G\", \"count\": 8},"
                     " {\"name\": \"n1\", \"gpu\": \"mine\", \"count\": 1}]}";
    json_t *doc = NULL;
    ah_error_t err;
    ah_cluster_t c;
    CHECK(ah_json_load_string(ok, strlen(ok), "c.json", &doc, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_cluster_from_json(doc, "c.json", &c, &err) == AH_OK, "%s", err.msg);
    json_decref(doc);
    const ah_gpu_type_t *a = &c.types[ah_cluster_find_type(&c, "A100-80G")];
    const ah_gpu_type_t *mine = &c.types[ah_cluster_find_type(&c, "mine")];
    CHECK(a->sm_count == 54 && a->attention_unfused, "overrides kept: %d %d", a->sm_count, a->attention_unfused);
    CHECK(mine->sm_count == 0 && !mine->attention_unfused, "a full type without sm_count: 0, fused");
    /* Written out and read back: the fields survive. */
    json_t *out = ah_cluster_to_json(&c);
    ah_cluster_t back;
    CHECK(ah_cluster_from_json(out, "round trip", &back, &err) == AH_OK, "%s", err.msg);
    const ah_gpu_type_t *b = &back.types[ah_cluster_find_type(&back, "A100-80G")];
    CHECK(b->sm_count == 54 && b->attention_unfused, "round trip lost sm_count or attention");
    json_decref(out);
    ah_cluster_free(&back);
    ah_cluster_free(&c);

    const char *bad[][2] = {
        {"{\"gpu_types\": {\"T4\": {\"attention\": \"flash\"}}, \"nodes\": [{\"name\": \"n\", \"gpu\": \"T4\", \"count\": 1}]}",
         "gpu_types.T4.attention: \"flash\" is not an attention kernel"},
        {"{\"gpu_types\": {\"T4\": {\"sm_count\": 0}}, \"nodes\": [{\"name\": \"n\", \"gpu\": \"T4\", \"count\": 1}]}",
         "sm_count"},
        {"{\"gpu_types\": {\"T4\": {\"sm_count\": 40.5}}, \"nodes\": [{\"name\": \"n\", \"gpu\": \"T4\", \"count\": 1}]}",
         "sm_count"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(ah_json_load_string(bad[i][0], strlen(bad[i][0]), "c.json", &doc, &err) == AH_OK, "%s", err.msg);
        CHECK_ERR(ah_cluster_from_json(doc, "c.json", &c, &err), AH_ERR_INVALID, err, bad[i][1]);
        json_decref(doc);
    }
}

int main(void) {
    test_curve();
    test_attention();
    test_stage();
    test_cluster_fields();
    return ah_test_finish();
}
