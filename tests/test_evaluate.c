/* Cost model, level 3: a whole plan, checked term by term against a hand computation written
 * out below from the formulas of docs/cost-model.md (not through the cost module's functions),
 * plus the breakdown identity, DP link kinds and the memory rule's message. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "plan/dp_overlap.h"
#include "plan/evaluate.h"

/* Two types with round figures. "fast": 0.001 TFLOP/s fp32 x efficiency 0.5 = 5e8 FLOP/s,
 * 100 GB/s, intra-node 10 GB/s, 1 GiB, 0.25 GiB reserved. "slow": 2.5e8 FLOP/s
 * effective, 50 GB/s, 4 GB/s intra, 2 GiB. Nodes a0, a1 (fast, zone z1), b0 (slow, zone z2). */
static ah_gpu_type_t TYPES[2] = {
    {.name = "fast", .memory_gib = 1, .tflops_bf16 = 0.002, .tflops_fp16 = 0.002, .tflops_fp32 = 0.001,
     .mem_bw_gb_s = 100, .intra_node_gb_s = 10, .efficiency = 0.5, .reserved_gib = 0.25},
    {.name = "slow", .memory_gib = 2, .tflops_bf16 = 0.001, .tflops_fp16 = 0.001, .tflops_fp32 = 0.0005,
     .mem_bw_gb_s = 50, .intra_node_gb_s = 4, .efficiency = 0.5, .reserved_gib = 0},
};
static ah_node_t NODES[3] = {
    {.name = "a0", .type = 0, .count = 4, .zone = "z1"},
    {.name = "a1", .type = 0, .count = 4, .zone = "z1"},
    {.name = "b0", .type = 1, .count = 4, .zone = "z2"},
};
static const ah_cluster_t CLUSTER = {
    .types = TYPES, .n_types = 2, .nodes = NODES, .n_nodes = 3,
    .net = {.inter_node_gb_s = 2, .inter_zone_gb_s = 0.5, .latency_us = 10, .inter_zone_latency_us = 100,
            .intra_latency_us = 1, .cloud_gb_s = 1}};

/* tiny-gpt2: L=4, C=64, H=4, F=256, V=256, 64 positions, tied. b=2, T=16 -> N=32; t=2; fp32. */
enum { L = 4, C = 64, H = 4, F = 256, V = 256, POS = 64, b = 2, T = 16, N = b * T, t = 2 };
/* The vocabulary-parallel embedding and head: V padded to a multiple of 128 t (here 256, no
 * padding), each TP rank holding VL = Vp / t rows of the V x C matrix. */
enum { VP = (V + 128 * t - 1) / (128 * t) * (128 * t), VL = VP / t };
static const double PEAK[2] = {5e8, 2.5e8}, MEMBW[2] = {100e9, 50e9}, INTRA[2] = {10e9, 4e9};

/* Per TP rank, counted from the layer list (docs/cost-model.md "Accounting"). */
static const double BLK_PARAMS = 2 * C + (3.0 * C * C + 3 * C) / t + (double)C * C / t + C + 2 * C +
                                 ((double)C * F + F) / t + (double)F * C / t + C;
static const double BLK_FLOPS = (2.0 * N * (3.0 * C * C + C * C + 2.0 * C * F) + 4.0 * N * T * C) / t;
static const double HEAD_FLOPS = 2.0 * N * C * VL; /* the rank's logits (N, VL) */
/* x_in, ln_1, qkv/t, att/t, x_mid, ln_2, fc pre/post /t; 2 x LayerNorm stats; probs b(H/t)T^2 */
static const double ACT_FULL = 4.0 * (N * C + N * C + 3.0 * N * C / t + (double)N * C / t + N * C + N * C +
                                      2.0 * N * F / t + 2 * 2 * N + (double)b * (H / t) * T * T);
static const double ACT_HEAD = 4.0 * (2.0 * N * C + (double)N * VL + 2 * N);
static const double EMBED_PARAMS = (double)VL * C + (double)POS * C; /* wte's rows + wpe */

typedef struct {
    double f, b, tp, params;
    double act, fixed;
} hand_t;

/* One stage by hand, on type ty with nb blocks. */
static hand_t hand_stage(int ty, int nb, bool embed, bool head, bool rc) {
    hand_t h = {0};
    double blk_bytes = BLK_PARAMS * 4 + ACT_FULL;
    double bf = fmax(BLK_FLOPS / PEAK[ty], blk_bytes / MEMBW[ty]);
    double bb = fmax(2 * BLK_FLOPS / PEAK[ty], blk_bytes / MEMBW[ty]);
    h.f = nb * bf;
    h.b = nb * (bb + (rc ? bf : 0));
    if (embed) { /* no FLOPs: the table plus the token ids, both passes */
        double e = (EMBED_PARAMS * 4 + N * 4) / MEMBW[ty];
        h.f += e;
        h.b += e;
    }
    if (head) { /* ln_f + the rank's rows of the tied matrix it reads, and its activations */
        double hb = ((2.0 * C + (double)VL * C) * 4 + ACT_HEAD) / MEMBW[ty];
        h.f += fmax(HEAD_FLOPS / PEAK[ty], hb);
        h.b += fmax(2 * HEAD_FLOPS / PEAK[ty], hb);
    }
    /* ring all-reduce of x bytes over t=2: 2(1)/2 x x/bw + 2 x 1 us. Per block 2 of N*C*4 each
     * pass (4 backward with recompute); the embedding's output N*C*4 forward; the head's softmax
     * max (N floats) and sums (2N floats) forward and its input gradient N*C*4 backward. */
    double ar = (double)N * C * 4 / INTRA[ty] + 2 * 1e-6;
    double tpf = nb * 2 * ar + (embed ? ar : 0) +
                 (head ? (4.0 * N / INTRA[ty] + 2e-6) + (8.0 * N / INTRA[ty] + 2e-6) : 0);
    double tpb = nb * 2 * ar * (rc ? 2 : 1) + (head ? ar : 0);
    h.tp = tpf + tpb;
    h.f += tpf;
    h.b += tpb;
    h.params = nb * BLK_PARAMS + (embed ? EMBED_PARAMS : 0) + (head ? 2 * C : 0) +
               (head && !embed ? (double)VL * C : 0);
    h.act = nb * (rc ? 4.0 * N * C : ACT_FULL) + (embed ? 4.0 * N : 0) + (head ? ACT_HEAD : 0);
    int neighbours = (embed ? 0 : 1) + (head ? 0 : 1);
    h.fixed = (nb ? ACT_FULL : 0) + (rc ? ACT_FULL : 0) + neighbours * 2.0 * N * C * 4 +
              TYPES[ty].reserved_gib * 1073741824.0;
    return h;
}

static double ar(double bytes, int n, double bw, double lat) {
    return n <= 1 ? 0 : 2.0 * (n - 1) / n * bytes / bw + 2.0 * (n - 1) * lat;
}

typedef struct {
    int first, last, type, node, dev0;
    bool rc;
} stage_spec_t;

/* A plan of `np` pipelines, 2 micro-batches each, from stage specs (devices dev0, dev0+1). */
static void build(ah_plan_t *p, int np, const int *n_stages, const stage_spec_t *specs) {
    ah_error_t err;
    ah_model_t m;
    ah_model_preset("tiny-gpt2", &m, &err);
    ah_train_t tr = {.global_batch = 4 * np, .seq_len = T, .micro_batch = b, .precision = AH_PREC_FP32};
    CHECK(ah_plan_init(p, &m, &tr, t, &CLUSTER, np, &err) == AH_OK, "init: %s", err.msg);
    for (int i = 0, k = 0; i < np; i++) {
        ah_pipeline_alloc(&p->pipelines[i], n_stages[i], &err);
        p->pipelines[i].micro_batches = 2;
        for (int s = 0; s < n_stages[i]; s++, k++) {
            ah_stage_t *st = &p->pipelines[i].stages[s];
            st->first = specs[k].first;
            st->last = specs[k].last;
            st->type = specs[k].type;
            st->recompute = specs[k].rc;
            for (int r = 0; r < t; r++) st->devices[r] = (ah_device_ref_t){specs[k].node, specs[k].dev0 + r};
        }
    }
    CHECK(ah_plan_validate(p, &err) == AH_OK, "the test plan is valid: %s", err.msg);
}

/* Pipeline 0: blocks [0,2) on a0 GPUs 0-1, [2,4) on a1 GPUs 0-1.
 * Pipeline 1: [0,1) on b0 GPUs 0-1 with recompute, [1,4) on a0 GPUs 2-3. */
static const int TWO_PIPES[2] = {2, 2};
static const stage_spec_t TWO_SPECS[4] = {
    {0, 2, 0, 0, 0, false}, {2, 4, 0, 1, 0, false}, {0, 1, 1, 2, 0, true}, {1, 4, 0, 0, 2, false}};

static void test_two_pipelines(void) {
    ah_plan_t p;
    ah_error_t err;
    build(&p, 2, TWO_PIPES, TWO_SPECS);
    ah_eval_t e;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);

    hand_t h[2][2] = {{hand_stage(0, 2, true, false, false), hand_stage(0, 2, false, true, false)},
                      {hand_stage(1, 1, true, false, true), hand_stage(0, 3, false, true, false)}};
    /* p2p per micro-batch: N*C*4 = 8192 bytes, scatter-gather at t = 2: each TP rank sends 4096
     * bytes, then the receiving pair all-gathers them (half a ring all-reduce over the slower
     * type's intra-node link: 4096 bytes, one 1 us step). a0 -> a1 inter-node (2 GB/s, 10 us),
     * intra 10 GB/s; b0 (z2) -> a0 (z1) inter-zone (0.5 GB/s, 100 us), intra 4 GB/s (slow's). */
    const double p2p[2] = {4096 / 2e9 + 10e-6 + 4096 / 10e9 + 1e-6, 4096 / 0.5e9 + 100e-6 + 4096 / 4e9 + 1e-6};
    double tpipe[2];
    const int n = 2;
    for (int i = 0; i < 2; i++) {
        double fb0 = h[i][0].f + h[i][0].b, fb1 = h[i][1].f + h[i][1].b;
        tpipe[i] = fb0 + fb1 + 2 * p2p[i] + (n - 1) * fmax(fb0, fb1);
        CHECK_NEAR(e.pipelines[i].time_s, tpipe[i], 1e-12);
        CHECK_NEAR(e.pipelines[i].stages[0].p2p_s, p2p[i], 1e-12);
        CHECK_NEAR(e.pipelines[i].stages[1].p2p_s, 0, 0);
        for (int s = 0; s < 2; s++) {
            CHECK_NEAR(e.pipelines[i].stages[s].fwd_s, h[i][s].f, 1e-12);
            CHECK_NEAR(e.pipelines[i].stages[s].bwd_s, h[i][s].b, 1e-12);
            /* 1F1B with S=2, n=2: stage 0 holds 2 micro-batches, stage 1 one */
            CHECK_EQ_I64(e.pipelines[i].stages[s].inflight, 2 - s);
            double mem = h[i][s].params * 16 + h[i][s].act * (2 - s) + h[i][s].fixed;
            CHECK_NEAR(e.pipelines[i].stages[s].memory_bytes, mem, 1e-15);
        }
    }
    /* DP: each layer's group on the links its own ring crosses (docs/cost-model.md "Links"): block
     * 0's group {a0, b0} across the zones (0.5 GB/s, 100 us), block 1's {a0, a0} inside a0 (10
     * GB/s, 1 us), blocks 2-3's and the head's {a1, a0} between nodes (2 GB/s, 10 us); a stage's
     * blocks are one all-reduce, each segment's bytes at its group's bandwidth, the latencies of
     * the longest. P = 2 pipelines; the tied matrix has 4 holders (stage 0 and the last stage of
     * each: {a0, a1, b0, a0}, across the zones), and each TP rank syncs its own VL rows of it. */
    const double zone = 0.5e9, node = 2e9, intra = 10e9, vc = 4.0 * VL * C, blk = BLK_PARAMS * 4, norm = 2 * C * 4;
    const double embed = ar(vc, 4, zone, 100e-6);
    double sync[2][2] = {{ar(blk, 2, zone, 0) + ar(blk, 2, intra, 0) + ar(0, 2, 1, 100e-6) + embed,
                          ar(2 * blk + norm, 2, node, 10e-6) + embed},
                         {ar(blk, 2, zone, 100e-6) + embed,
                          ar(blk, 2, intra, 0) + ar(2 * blk + norm, 2, node, 10e-6) + embed}};
    double opt[2][2];
    const int ty[2][2] = {{0, 0}, {1, 0}};
    double dp = 0, optimizer = 0;
    for (int i = 0; i < 2; i++)
        for (int s = 0; s < 2; s++) {
            dp = fmax(dp, sync[i][s]);
            opt[i][s] = h[i][s].params * 28 / MEMBW[ty[i][s]]; /* fp32 AdamW: 16 read + 12 written */
            optimizer = fmax(optimizer, opt[i][s]);
        }
    CHECK_NEAR(e.pred.breakdown.dp_sync_s, dp, 1e-12);
    /* the overlapped sync's exposed part (docs/cost-model.md "Overlapped DP sync") */
    CHECK(e.dp_sync_exposed_s > 0 && e.dp_sync_exposed_s < dp, "exposed %g of %g", e.dp_sync_exposed_s, dp);
    CHECK_NEAR(dp, sync[0][0], 0); /* the stage whose block 0 crosses the zones */
    CHECK_NEAR(e.pred.breakdown.optimizer_s, optimizer, 1e-12);
    double iter = fmax(tpipe[0], tpipe[1]) + dp + optimizer;
    CHECK_NEAR(e.pred.iteration_s, iter, 1e-12);
    CHECK_NEAR(e.iteration_overlap_s, iter - dp + e.dp_sync_exposed_s, 1e-12);
    CHECK_NEAR(e.pred.tokens_per_s, 8.0 * T / iter, 1e-12);

    /* Breakdown: critical pipeline and its bottleneck stage; the parts sum to iteration_s. */
    int c = tpipe[1] > tpipe[0];
    int k = h[c][1].f + h[c][1].b > h[c][0].f + h[c][0].b;
    CHECK_EQ_I64(e.critical_pipeline, c);
    CHECK_EQ_I64(e.bottleneck_stage, k);
    CHECK_EQ_I64(e.pipelines[c].bottleneck_stage, k);
    const ah_breakdown_t *bd = &e.pred.breakdown;
    double fbk = h[c][k].f + h[c][k].b;
    CHECK_NEAR(bd->compute_s, n * (fbk - h[c][k].tp), 1e-12);
    CHECK_NEAR(bd->tp_comm_s, n * h[c][k].tp, 1e-12);
    CHECK_NEAR(bd->bubble_s, h[c][0].f + h[c][0].b + h[c][1].f + h[c][1].b - fbk, 1e-12);
    CHECK_NEAR(bd->p2p_s, 2 * p2p[c], 1e-12);
    CHECK_NEAR(bd->compute_s + bd->tp_comm_s + bd->bubble_s + bd->p2p_s + bd->dp_sync_s + bd->optimizer_s,
               e.pred.iteration_s, 1e-12);

    /* Devices in rank order with memory and capacity; all fit. */
    CHECK_EQ_I64(e.n_devices, 8);
    static const int node_of[8] = {0, 0, 1, 1, 2, 2, 0, 0}, index_of[8] = {0, 1, 0, 1, 0, 1, 2, 3};
    int64_t most = 0;
    for (int r = 0; r < 8; r++) {
        const ah_device_eval_t *d = &e.devices[r];
        CHECK(d->pipeline == r / 4 && d->stage == (r / 2) % 2 && d->tp_rank == r % 2, "rank %d place", r);
        CHECK(d->node == node_of[r] && d->index == index_of[r], "rank %d device", r);
        CHECK_EQ_I64(d->memory_bytes, e.pipelines[d->pipeline].stages[d->stage].memory_bytes);
        CHECK_EQ_I64(d->capacity_bytes, d->node == 2 ? 2LL << 30 : 1LL << 30);
        if (d->memory_bytes > most) most = d->memory_bytes;
    }
    CHECK_EQ_I64(e.pred.memory_bytes, most);
    CHECK(e.feasible, "everything fits");
    CHECK(ah_plan_check(&p, NULL, &err) == AH_OK, "check: %s", err.msg);
    ah_eval_free(&e);

    /* Untied head: the embedding matrices are summed over the P = 2 stage-0 holders, the head
     * matrices over the 2 last stages, and a last stage keeps no copy of the embedding. */
    p.model.tied = false;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate untied: %s", err.msg);
    const double embed2 = ar(vc, 2, zone, 100e-6), head2 = ar(vc, 2, node, 10e-6);
    const double dp_untied = fmax(fmax(sync[0][0] - embed + embed2, sync[0][1] - embed + head2),
                                  fmax(sync[1][0] - embed + embed2, sync[1][1] - embed + head2));
    CHECK_NEAR(e.pred.breakdown.dp_sync_s, dp_untied, 1e-12);
    CHECK(e.dp_sync_exposed_s <= dp_untied, "exposed %g of %g", e.dp_sync_exposed_s, dp_untied);
    ah_eval_free(&e);
    ah_plan_free(&p);
}

static void test_dp_link_kinds(void) {
    ah_error_t err;
    ah_eval_t e;
    ah_plan_t p;
    /* One pipeline in one node: the only DP traffic is the tied matrix (a TP rank's VL rows)
     * between its 2 holders, over the node's link (10 GB/s, 1 us). */
    const int one[1] = {2};
    const stage_spec_t intra[2] = {{0, 2, 0, 0, 0, false}, {2, 4, 0, 0, 2, false}};
    build(&p, 1, one, intra);
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);
    CHECK_NEAR(e.pred.breakdown.dp_sync_s, ar(4.0 * VL * C, 2, 10e9, 1e-6), 1e-12);
    ah_eval_free(&e);
    ah_plan_free(&p);
    /* Two nodes of one zone: inter-node (2 GB/s, 10 us). */
    const stage_spec_t inter[2] = {{0, 2, 0, 0, 0, false}, {2, 4, 0, 1, 0, false}};
    build(&p, 1, one, inter);
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);
    CHECK_NEAR(e.pred.breakdown.dp_sync_s, ar(4.0 * VL * C, 2, 2e9, 10e-6), 1e-12);
    ah_eval_free(&e);
    ah_plan_free(&p);
    /* A single stage holds embedding and head: no tied copy, nothing to sync. */
    const stage_spec_t single[1] = {{0, 4, 0, 0, 0, false}};
    const int one_stage[1] = {1};
    build(&p, 1, one_stage, single);
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);
    CHECK_NEAR(e.pred.breakdown.dp_sync_s, 0, 0);
    CHECK_NEAR(e.pred.breakdown.bubble_s, 0, 0);
    CHECK_NEAR(e.pred.breakdown.p2p_s, 0, 0);
    ah_eval_free(&e);
    ah_plan_free(&p);
}

static void test_infeasible(void) {
    ah_plan_t p;
    ah_error_t err;
    build(&p, 2, TWO_PIPES, TWO_SPECS);
    /* "slow" emulated with a 0.5 MiB cap: pipeline 1 stage 0 (on b0, recompute on; ~0.9 MiB)
     * cannot fit. */
    p.cluster.types[1].emulate_memory_mib = 0.5;
    ah_eval_t e;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);
    CHECK(!e.feasible, "over capacity");
    CHECK_EQ_I64(e.worst_device, 4);
    int64_t need = e.devices[4].memory_bytes, shortfall = need - (1 << 19);
    ah_eval_free(&e);
    ah_status_t s = ah_plan_check(&p, NULL, &err);
    CHECK_ERR(s, AH_ERR_INFEASIBLE, err, "[memory] pipelines[1].stages[0]");
    CHECK(strstr(err.msg, "device b0:0 (slow)") != NULL, "names the device and type: %s", err.msg);
    /* small (emulated) devices are reported in MiB, so the figures never read 0.00 */
    CHECK(strstr(err.msg, "has 0.50 MiB") != NULL, "capacity in MiB: %s", err.msg);
    char want[128];
    snprintf(want, sizeof want, "needs %.2f MiB", need / 1048576.0);
    CHECK(strstr(err.msg, want) != NULL, "need in MiB (%s): %s", want, err.msg);
    snprintf(want, sizeof want, "short by %lld bytes", (long long)shortfall);
    CHECK(strstr(err.msg, want) != NULL, "shortfall in bytes (%s): %s", want, err.msg);
    CHECK(strstr(err.msg, "worst of 2 devices") != NULL, "counts the others: %s", err.msg);
    CHECK(strstr(err.msg, "recompute is already on") != NULL, "advice fits the stage: %s", err.msg);
    /* On a stage without recompute the first advice is to turn it on. */
    p.cluster.types[1].emulate_memory_mib = 0;
    p.cluster.types[0].memory_gib = 0.25; /* under the 0.25 GiB reserved: every fast device */
    s = ah_plan_check(&p, NULL, &err);
    CHECK_ERR(s, AH_ERR_INFEASIBLE, err, "turn on recompute for this stage");
    CHECK(strstr(err.msg, "worst of 6 devices") != NULL, "six fast devices over: %s", err.msg);
    /* A structural error comes from ah_plan_validate first. */
    p.pipelines[0].micro_batches = 3;
    CHECK_ERR(ah_plan_check(&p, NULL, &err), AH_ERR_INVALID, err, "[batch]");
    ah_plan_free(&p);
}

/* The sharded all-gather overlapped with the next forward (plan/dp_overlap.h), by hand: device A
 * (blocks 0-1 and the embedding, forward from 0, 1 s a block) queues the embedding's 0.5 s and each
 * block's 1 s: the embedding ready at 0.5 (needed at 0), block 0 at 1.5 (0), block 1 at 2.5 (1):
 * 1.5 s late. B (blocks 2-3 and the head, from 5 s) is never late. C, an interleaved device
 * (chunk 0: block 0 and the embedding from 0; chunk 1: block 4 from 3 s; listed chunk 1 first, as
 * evaluate does), waits 1 s for the embedding, then 2 s for block 0 (ready at 2, needed at 0 + 0);
 * block 4 ready at 5, needed at 3 + its delay 2: on time. The most: 2 s. Then the reduce-scatter's
 * queue after the backward counts only what is not the all-gather. */
static void test_gather_overlap(void) {
    ah_sync_stage_t st[4] = {
        {.first = 0, .last = 2, .blk_fwd_s = 1, .end_s = 1, .end_ag_s = 0.5, .blocks_s = 4, .blocks_ag_s = 2},
        {.first = 2, .last = 4, .head = true, .blk_fwd_s = 1, .fwd_start_s = 5, .blocks_s = 4, .blocks_ag_s = 2,
         .head_s = 0.5, .head_ag_s = 0.25, .end_s = 1, .end_ag_s = 0.5},
        {.first = 4, .last = 5, .blk_fwd_s = 1, .fwd_start_s = 3, .blocks_s = 6, .blocks_ag_s = 3},
        {.first = 0, .last = 1, .chain = true, .blk_fwd_s = 1, .end_s = 2, .end_ag_s = 1, .blocks_s = 2, .blocks_ag_s = 1},
    };
    CHECK_NEAR(ah_dp_gather_exposed_s(st, 2), 1.5, 1e-15);
    CHECK_NEAR(ah_dp_gather_exposed_s(st + 1, 1), 0, 0);
    CHECK_NEAR(ah_dp_gather_exposed_s(st + 2, 2), 2, 1e-15);
    CHECK_NEAR(ah_dp_gather_exposed_s(st, 4), 2, 1e-15);
    /* A alone, its blocks' gradients final at once (no backward left below them): its reduce-scatter
     * queue is 2 s of blocks then the embedding's 0.5 s, all after the end. */
    double work[8];
    CHECK_NEAR(ah_dp_exposed_s(st, 1, 5, work), 2.5, 1e-15);
}

/* Plan "p2p": "whole" (Megatron's --no-scatter-gather-tensors-in-pipeline): every TP rank sends
 * the whole 8192-byte boundary and nothing is gathered, so the hops of test_two_pipelines are
 * 8192 / 2e9 + 10 us and 8192 / 0.5e9 + 100 us; the field is written back, and an unknown value
 * refused, named. */
static void test_p2p_whole(void) {
    ah_plan_t p, back;
    ah_error_t err;
    build(&p, 2, TWO_PIPES, TWO_SPECS);
    p.p2p = AH_P2P_WHOLE;
    ah_eval_t e;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "evaluate: %s", err.msg);
    CHECK_NEAR(e.pipelines[0].stages[0].p2p_s, 8192 / 2e9 + 10e-6, 1e-12);
    CHECK_NEAR(e.pipelines[1].stages[0].p2p_s, 8192 / 0.5e9 + 100e-6, 1e-12);
    ah_eval_free(&e);
    json_t *doc = ah_plan_to_json(&p);
    CHECK(doc && strcmp(json_string_value(json_object_get(doc, "p2p")), "whole") == 0, "\"p2p\": \"whole\" written");
    CHECK(ah_plan_from_json(doc, "whole", &CLUSTER, &back, &err) == AH_OK && back.p2p == AH_P2P_WHOLE, "read back: %s", err.msg);
    ah_plan_free(&back);
    json_object_set_new(doc, "p2p", json_string("halves"));
    CHECK(ah_plan_from_json(doc, "bad", &CLUSTER, &back, &err) == AH_ERR_INVALID && strstr(err.msg, "[p2p]") &&
              strstr(err.msg, "halves"),
          "unknown p2p refused: %s", err.msg);
    json_decref(doc);
    p.p2p = AH_P2P_SCATTER_GATHER;
    doc = ah_plan_to_json(&p);
    CHECK(doc && !json_object_get(doc, "p2p"), "the default is not written");
    json_decref(doc);
    ah_plan_free(&p);
}

int main(void) {
    test_gather_overlap();
    test_two_pipelines();
    test_p2p_whole();
    test_dp_link_kinds();
    test_infeasible();
    return ah_test_finish();
}
