/* Pipeline schedules (issue 35, plan side): the interleaved and zero-bubble replays against
 * hand-worked timelines on uniform and asymmetric stages, the activations each keeps in flight,
 * "schedule" in plan.json (round trip; absent for 1f1b), every [schedule] refusal with its place,
 * the runtime's 1f1b-only rule, and ah_evaluate of a plan with virtual stages (distinct devices,
 * memory summed over a device's stages). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "plan_check.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "plan/plan_out.h"
#include "plan/replay.h"

static ah_stage_eval_t stage(double f, double b, double w) {
    return (ah_stage_eval_t){.fwd_s = f, .bwd_s = b, .wgrad_s = w};
}

/* ZB-H1 on 4 uniform stages, F = B = W = 1, 8 micro-batches: 1F1B takes (n + S - 1)(F + B + W) =
 * 33 s, its bubble 3 x 3 = 9; ZB-H1 3n + (S - 1) F = 27, a bubble of 3, a third of 1F1B's. With
 * W = 0 zero-bubble is 1F1B. */
static void test_zb_uniform(void) {
    ah_stage_eval_t st[4];
    for (int s = 0; s < 4; s++) st[s] = stage(1, 2, 1);
    CHECK_NEAR(ah_1f1b_replay(st, 4, 8, true, NULL), 33, 1e-15);
    CHECK_NEAR(ah_sched_replay(AH_SCHED_ZERO_BUBBLE, st, 4, 4, 8, true, NULL), 27, 1e-15);
    CHECK_NEAR(ah_sched_replay(AH_SCHED_ZERO_BUBBLE, st, 4, 4, 4, true, NULL), 15, 1e-15); /* 12 + 3 */
    CHECK_NEAR(ah_sched_replay(AH_SCHED_1F1B, st, 4, 4, 8, true, NULL), 33, 1e-15);
    /* 8 stages, 16 micro-batches: 48 + 7 against 69 */
    ah_stage_eval_t st8[8];
    for (int s = 0; s < 8; s++) st8[s] = stage(1, 2, 1);
    CHECK_NEAR(ah_sched_replay(AH_SCHED_ZERO_BUBBLE, st8, 8, 8, 16, true, NULL), 55, 1e-15);
    CHECK_NEAR(ah_1f1b_replay(st8, 8, 16, true, NULL), 69, 1e-15);
    /* no weight gradient: the same timeline as 1F1B, on random stages and hops */
    srand(7);
    for (int trial = 0; trial < 50; trial++) {
        const int S = 1 + rand() % 6;
        const int64_t n = 1 + rand() % 9;
        ah_stage_eval_t r[6];
        for (int s = 0; s < S; s++) {
            r[s] = stage(0.1 + rand() % 100 / 50.0, 0.1 + rand() % 100 / 25.0, 0);
            r[s].p2p_s = s + 1 < S ? rand() % 100 / 80.0 : 0;
        }
        CHECK_NEAR(ah_sched_replay(AH_SCHED_ZERO_BUBBLE, r, S, S, n, true, NULL), ah_1f1b_replay(r, S, n, true, NULL),
                   1e-12);
    }
}

/* ZB-H1 on two unlike stages, 2 micro-batches: stage 0 F 1, B 1, W 1; stage 1 F 2, B 2, W 1.
 * Stage 0 runs F0 F1 B0 W0 B1 W1; stage 1 F0 B0 F1 B1 W1 W0 (its W0 deferred). Stage 1: F0 [1,3],
 * B0 [3,5], F1 [5,7], B1 [7,9], W1 [9,10], W0 [10,11]; stage 0: F0 [0,1], F1 [1,2], B0 [5,6],
 * W0 [6,7], B1 [9,10], W1 [10,11]: 11 s. 1F1B (backwards 2 and 3) takes 13. */
static void test_zb_asymmetric(void) {
    ah_stage_eval_t st[2] = {stage(1, 2, 1), stage(2, 3, 1)};
    ah_op_t ops[2 * 6];
    CHECK_NEAR(ah_sched_replay(AH_SCHED_ZERO_BUBBLE, st, 2, 2, 2, true, ops), 11, 1e-15);
    CHECK_NEAR(ah_1f1b_replay(st, 2, 2, true, NULL), 13, 1e-15);
    const char *want0 = "FFBWBW", *want1 = "FBFBWW";
    const double end1[6] = {3, 5, 7, 9, 10, 11}, start0[6] = {0, 1, 5, 6, 9, 10};
    for (int k = 0; k < 6; k++) {
        CHECK("FBW"[ops[k].kind] == want0[k], "stage 0 op %d: %c, want %c", k, "FBW"[ops[k].kind], want0[k]);
        CHECK("FBW"[ops[6 + k].kind] == want1[k], "stage 1 op %d: %c, want %c", k, "FBW"[ops[6 + k].kind], want1[k]);
        CHECK_NEAR(ops[k].start, start0[k], 1e-15);
        CHECK_NEAR(ops[6 + k].end, end1[k], 1e-15);
    }
    CHECK(ops[10].mb == 1 && ops[11].mb == 0, "stage 1 runs W1 before its deferred W0");
}

/* Interleaved, uniform: P devices, v chunks each of f = F / v, b = B / v (F = 2, B = 4: a device's
 * whole stage), n a multiple of P. Megatron's bubble is (P - 1)(F + B) / v, 1F1B's (P - 1)(F + B). */
static void test_interleaved_uniform(void) {
    static const int cases[][3] = {{2, 2, 4}, {4, 2, 8}, {4, 3, 8}, {4, 2, 4}, {2, 3, 2}, {3, 2, 6}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int P = cases[c][0], v = cases[c][1], n = cases[c][2], S = P * v;
        ah_stage_eval_t st[12], whole[4];
        for (int q = 0; q < S; q++) st[q] = stage(2.0 / v, 4.0 / v, 0);
        for (int d = 0; d < P; d++) whole[d] = stage(2, 4, 0);
        const double t = ah_sched_replay(AH_SCHED_INTERLEAVED, st, S, P, n, true, NULL);
        CHECK_NEAR(t - 6.0 * n, (P - 1) * 6.0 / v, 1e-12);
        CHECK_NEAR(ah_1f1b_replay(whole, P, n, true, NULL) - 6.0 * n, (P - 1) * 6.0, 1e-12);
    }
    /* a micro-batch count that is not a multiple of P is not run */
    ah_stage_eval_t st[4] = {stage(1, 1, 0), stage(1, 1, 0), stage(1, 1, 0), stage(1, 1, 0)};
    CHECK(isnan(ah_sched_replay(AH_SCHED_INTERLEAVED, st, 4, 2, 3, true, NULL)), "n = 3 on 2 devices is refused");
}

/* Interleaved on unlike chunks, P = 2, v = 2, n = 2 (n = P: all forwards first). Stages q0 (device
 * 0) f 1 b 1, q1 (device 1) f 2 b 2, q2 (device 0) f 1 b 3, q3 (device 1) f 1 b 1, no hops.
 * Device 0: F(q0,0) [0,1], F(q0,1) [1,2], F(q2,0) [3,4], F(q2,1) [5,6], B(q2,0) [8,11], B(q2,1)
 * [11,14], B(q0,0) [14,15], B(q0,1) [16,17]; device 1: F(q1,0) [1,3], F(q1,1) [3,5], F(q3,0) [5,6],
 * F(q3,1) [6,7], B(q3,0) [7,8], B(q3,1) [8,9], B(q1,0) [11,13], B(q1,1) [14,16]: 17 s. */
static void test_interleaved_asymmetric(void) {
    ah_stage_eval_t st[4] = {stage(1, 1, 0), stage(2, 2, 0), stage(1, 3, 0), stage(1, 1, 0)};
    ah_op_t ops[2 * 8];
    CHECK_NEAR(ah_sched_replay(AH_SCHED_INTERLEAVED, st, 4, 2, 2, true, ops), 17, 1e-15);
    const int q0[8] = {0, 0, 2, 2, 2, 2, 0, 0}, q1[8] = {1, 1, 3, 3, 3, 3, 1, 1};
    const double e0[8] = {1, 2, 4, 6, 11, 14, 15, 17}, e1[8] = {3, 5, 6, 7, 8, 9, 13, 16};
    for (int k = 0; k < 8; k++) {
        CHECK(ops[k].stage == q0[k] && ops[8 + k].stage == q1[k], "op %d: stages %d, %d", k, ops[k].stage,
              ops[8 + k].stage);
        CHECK(ops[k].fwd == (k < 4), "device 0 op %d", k);
        CHECK_NEAR(ops[k].end, e0[k], 1e-15);
        CHECK_NEAR(ops[8 + k].end, e1[k], 1e-15);
    }
}

/* Activations in flight. 1F1B: min(S - s, n). ZB-H1: min(S, n) on every stage (the W of the first
 * s micro-batches waits for the drain). Interleaved, P = 4, v = 2, n = 8: device d runs
 * 2 (P - d - 1) + (v - 1) P warm-up forwards and holds one more, 11, 9, 7, 5 chunk-micro-batches at
 * once, but its chunks peak apart: each chunk's own most (its slots in the runtime) are 8 + 4,
 * 8 + 4, 7 + 3, 5 + 1. */
static void test_inflight(void) {
    int64_t act[8], live[8];
    for (int q = 0; q < 8; q++) act[q] = 10;
    for (int s = 0; s < 4; s++) {
        CHECK_EQ_I64(ah_sched_peak_act(AH_SCHED_1F1B, 4, 4, 8, s, act, live), 10 * (4 - s));
        CHECK_EQ_I64(live[s], 4 - s);
        CHECK_EQ_I64(ah_sched_peak_act(AH_SCHED_ZERO_BUBBLE, 4, 4, 8, s, act, live), 40);
        CHECK_EQ_I64(live[s], 4);
        CHECK_EQ_I64(ah_sched_peak_act(AH_SCHED_ZERO_BUBBLE, 4, 4, 2, s, act, NULL), 20); /* n = 2 < S */
    }
    const int64_t chunk0[4] = {8, 8, 7, 5}, chunk1[4] = {4, 4, 3, 1};
    for (int d = 0; d < 4; d++) {
        CHECK_EQ_I64(ah_sched_peak_act(AH_SCHED_INTERLEAVED, 8, 4, 8, d, act, live), 10 * (chunk0[d] + chunk1[d]));
        CHECK(live[d] == chunk0[d] && live[d + 4] == chunk1[d], "device %d: chunks hold %lld and %lld", d,
              (long long)live[d], (long long)live[d + 4]);
    }
    /* n = P: every forward first, all 2n chunk-micro-batches at once; chunks of unlike sizes */
    act[0] = 1, act[2] = 100;
    CHECK_EQ_I64(ah_sched_peak_act(AH_SCHED_INTERLEAVED, 4, 2, 2, 0, act, live), 2 * 1 + 2 * 100);
    CHECK(live[0] == 2 && live[2] == 2, "both chunks hold both micro-batches");
}

/* tiny-gpt2 (4 blocks) on cpu-hetero, tp 1: pipeline 0 interleaved over fast-0's two devices
 * (device 0 on stages 0 and 2, device 1 on 1 and 3), pipeline 1 zero-bubble over slow-0 and
 * slow-1, 2 + 2 micro-batches of 2 = global batch 8. */
static const char *PLAN =
    "{\"version\": 1, \"model\": \"tiny-gpt2\","
    " \"train\": {\"global_batch\": 8, \"seq_len\": 64, \"micro_batch\": 2, \"precision\": \"fp32\"},"
    " \"tp\": 1, \"pipelines\": ["
    "  {\"micro_batches\": 2, \"schedule\": \"interleaved\", \"stages\": ["
    "    {\"layers\": [0, 1], \"gpu\": \"cpu-fast\", \"devices\": [{\"node\": \"fast-0\", \"index\": 0}]},"
    "    {\"layers\": [1, 2], \"gpu\": \"cpu-fast\", \"devices\": [{\"node\": \"fast-0\", \"index\": 1}]},"
    "    {\"layers\": [2, 3], \"gpu\": \"cpu-fast\", \"devices\": [{\"node\": \"fast-0\", \"index\": 0}]},"
    "    {\"layers\": [3, 4], \"gpu\": \"cpu-fast\", \"devices\": [{\"node\": \"fast-0\", \"index\": 1}]}]},"
    "  {\"micro_batches\": 2, \"schedule\": \"zero-bubble\", \"stages\": ["
    "    {\"layers\": [0, 2], \"gpu\": \"cpu-slow\", \"devices\": [{\"node\": \"slow-0\", \"index\": 0}]},"
    "    {\"layers\": [2, 4], \"gpu\": \"cpu-slow\", \"devices\": [{\"node\": \"slow-1\", \"index\": 0}]}]}],"
    " \"cluster\": \"cpu-hetero\"}";

static json_t *plan_doc(void) {
    json_error_t je;
    json_t *d = json_loads(PLAN, 0, &je);
    if (!d) fprintf(stderr, "PLAN: %d:%d: %s\n", je.line, je.column, je.text);
    return d;
}

static json_t *pipe_of(json_t *d, int i) { return json_array_get(json_object_get(d, "pipelines"), (size_t)i); }
static json_t *dev_of(json_t *d, int i, int s) {
    return json_array_get(json_object_get(json_array_get(json_object_get(pipe_of(d, i), "stages"), (size_t)s), "devices"), 0);
}

static void test_refusals(void) {
    EXPECT(plan_doc(), AH_OK, "", "");
    json_t *d = plan_doc();
    json_object_set_new(pipe_of(d, 0), "schedule", json_string("gpipe"));
    EXPECT(d, AH_ERR_INVALID, "[schedule] plan.json: pipelines[0].schedule: unknown schedule \"gpipe\"",
           "1f1b, interleaved or zero-bubble");
    /* uneven spacing: device 0 on stages 0 and 3 (stage 2 then on device 1) */
    d = plan_doc();
    json_object_set_new(dev_of(d, 0, 2), "index", json_integer(1));
    json_object_set_new(dev_of(d, 0, 3), "index", json_integer(0));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0].stages[2]: on fast-0 GPU 1",
           "holds stage 2 on the TP group of stage 0 (fast-0 GPU 0): device d is on stages d, d+2, d+4");
    /* uneven: device 0 on stages 0 and 1 */
    d = plan_doc();
    json_object_set_new(dev_of(d, 0, 1), "index", json_integer(0));
    json_object_set_new(dev_of(d, 0, 2), "index", json_integer(1));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0].stages[1]: fast-0 GPU 0 holds stages 0 and 1, 1 apart",
           "evenly spaced");
    /* 3 stages over 2 devices */
    d = plan_doc();
    json_array_remove(json_object_get(pipe_of(d, 0), "stages"), 3);
    json_object_set_new(json_array_get(json_object_get(pipe_of(d, 0), "stages"), 2), "layers", json_pack("[i,i]", 2, 4));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0]: interleaved, 3 stages over 2 devices",
           "make the stage count a multiple of the device count");
    /* one stage per device is not interleaving */
    d = plan_doc();
    json_object_set_new(pipe_of(d, 1), "schedule", json_string("interleaved"));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[1]: interleaved, 2 stages over 2 devices",
           "give each device 2 or more stages");
    /* a micro-batch count Megatron's interleaved schedule cannot run */
    d = plan_doc();
    json_object_set_new(pipe_of(d, 0), "micro_batches", json_integer(3));
    json_object_set_new(pipe_of(d, 1), "micro_batches", json_integer(1));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0].micro_batches: 3",
           "groups of the pipeline's 2 devices, so it needs a multiple of 2 (e.g. 2 or 4)");
    /* a repeated device under zero-bubble and under 1f1b */
    d = plan_doc();
    json_object_set_new(dev_of(d, 1, 1), "node", json_string("slow-0"));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[1] (schedule zero-bubble): slow-0 GPU 0 holds stages 0 and 1",
           "only an interleaved pipeline");
    d = plan_doc();
    json_object_del(pipe_of(d, 0), "schedule");
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0] (schedule 1f1b): fast-0 GPU 0 holds stages 0 and 2",
           "set \"schedule\": \"interleaved\"");
    /* a device on stages of two pipelines */
    d = plan_doc();
    json_object_set_new(dev_of(d, 1, 1), "node", json_string("fast-0"));
    json_object_set_new(json_array_get(json_object_get(pipe_of(d, 1), "stages"), 1), "gpu", json_string("cpu-fast"));
    EXPECT(d, AH_ERR_INVALID, "[device] fast-0 GPU 0 is on stages of two pipelines",
           "pipelines[0].stages[0].devices[0] and pipelines[1].stages[1].devices[0]");
}

/* Round trip, distinct devices, the runtime's rule, and the evaluation. */
static void test_plan_file(void) {
    ah_plan_t p, q;
    ah_error_t err = {0};
    json_t *d = plan_doc();
    CHECK(ah_plan_from_json(d, "plan.json", NULL, &p, &err) == AH_OK, "%s", err.msg);
    json_decref(d);
    CHECK(ah_plan_validate(&p, &err) == AH_OK, "%s", err.msg);
    CHECK(p.pipelines[0].schedule == AH_SCHED_INTERLEAVED && p.pipelines[1].schedule == AH_SCHED_ZERO_BUBBLE,
          "schedules read");
    CHECK_EQ_I64(ah_plan_device_count(&p), 4); /* 6 stage entries, 4 devices */
    CHECK_EQ_I64(ah_pipeline_groups(&p.pipelines[0]), 2);
    CHECK_EQ_I64(ah_plan_rank_of(&p, 0, 3, 0), 1);
    CHECK_EQ_I64(ah_plan_rank_of(&p, 1, 1, 0), 3);
    /* rank -> device inverts ah_plan_rank_of for every stage entry; the rankfile has one host line a
     * device (it wrote one a stage entry: 6 lines, pipeline 1's ranks on pipeline 0's hosts) */
    for (int i = 0; i < p.n_pipelines; i++)
        for (int s = 0; s < p.pipelines[i].n_stages; s++) {
            const ah_device_ref_t *dv = ah_plan_rank_device(&p, ah_plan_rank_of(&p, i, s, 0));
            CHECK(dv && dv->node == p.pipelines[i].stages[s].devices[0].node &&
                      dv->index == p.pipelines[i].stages[s].devices[0].index, "pipeline %d stage %d's device", i, s);
        }
    CHECK(ah_plan_rank_device(&p, 4) == NULL, "no rank 4");
    char rf[] = "/tmp/ah-test-rankfile-XXXXXX";
    const int fd = mkstemp(rf);
    CHECK(fd >= 0 && ah_plan_rankfile_write(&p, rf, &err) == AH_OK, "%s", err.msg);
    FILE *f = fopen(rf, "r");
    char line[256];
    int hosts = 0;
    while (f && fgets(line, sizeof line, f)) hosts += line[0] != '#';
    if (f) fclose(f);
    CHECK_EQ_I64(hosts, 4);
    if (fd >= 0) close(fd), unlink(rf);
    json_t *a = ah_plan_to_json(&p);
    CHECK(ah_plan_from_json(a, "again", NULL, &q, &err) == AH_OK, "%s", err.msg);
    json_t *b = ah_plan_to_json(&q);
    char *sa = json_dumps(a, JSON_PRESERVE_ORDER), *sb = json_dumps(b, JSON_PRESERVE_ORDER);
    CHECK(sa && sb && strcmp(sa, sb) == 0, "save -> load -> save is identical");
    CHECK(strstr(sa, "\"schedule\": \"interleaved\"") && strstr(sa, "\"schedule\": \"zero-bubble\""), "written");
    free(sa);
    free(sb);
    json_decref(a);
    json_decref(b);

    /* evaluation: 4 devices, each of fast-0's holding two one-block stages */
    ah_eval_t e;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(e.n_devices, 4);
    CHECK(e.devices[1].node == p.pipelines[0].stages[1].devices[0].node && e.devices[1].index == 1 &&
          e.devices[2].pipeline == 1, "rank order: pipeline, device group, TP rank");
    CHECK(e.pipelines[0].stages[0].memory_bytes == e.pipelines[0].stages[2].memory_bytes &&
          e.devices[0].memory_bytes == e.pipelines[0].stages[0].memory_bytes, "a device's stages share its peak");
    CHECK(e.pipelines[0].stages[1].p2p_s > 0 && e.pipelines[1].stages[0].wgrad_s > 0 &&
          e.pipelines[1].stages[0].wgrad_s < e.pipelines[1].stages[0].bwd_s, "hops and the W share");
    CHECK(e.pipelines[0].time_s > 0 && e.pred.iteration_s >= e.pipelines[0].time_s, "times");
    /* the same plan under 1F1B, each pipeline one stage per device: zero-bubble is never slower */
    const double zb = e.pipelines[1].time_s;
    ah_eval_free(&e);
    p.pipelines[1].schedule = AH_SCHED_1F1B;
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "%s", err.msg);
    CHECK(zb < e.pipelines[1].time_s, "zero-bubble %.6g s < 1F1B %.6g s", zb, e.pipelines[1].time_s);
    ah_eval_free(&e);
    ah_plan_free(&q);
    ah_plan_free(&p);

    /* a 1f1b plan writes no "schedule" */
    d = plan_doc();
    json_object_del(pipe_of(d, 1), "schedule");
    json_array_remove(json_object_get(d, "pipelines"), 0);
    json_object_set_new(pipe_of(d, 0), "micro_batches", json_integer(4));
    CHECK(ah_plan_from_json(d, "plan.json", NULL, &p, &err) == AH_OK, "%s", err.msg);
    json_decref(d);
    a = ah_plan_to_json(&p);
    sa = json_dumps(a, 0);
    CHECK(sa && !strstr(sa, "schedule"), "1f1b is not written");
    free(sa);
    json_decref(a);
    ah_plan_free(&p);
}

int main(void) {
    test_zb_uniform();
    test_zb_asymmetric();
    test_interleaved_uniform();
    test_interleaved_asymmetric();
    test_inflight();
    test_refusals();
    test_plan_file();
    return ah_test_finish();
}
