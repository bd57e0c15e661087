/* Context parallelism in the plan file (issue 38): a pipeline's "cp" read and written (absent = 1,
 * not written when 1, so old plans round-trip byte-identical), each stage's tp x cp devices
 * cp-major, the [cp] rule (a power of two, seq_len a multiple of 2 cp, the device count), the TP
 * groups inside one node per CP rank, rank counting (plan and runtime layout), the sharded
 * optimizer's groups over every CP rank, and the cost model pricing a CP plan. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "plan/evaluate.h"
#include "plan/plan.h"
#include "plan_check.h"
#include "runtime/layout.h"
#include "runtime/trainer.h"

/* tiny-gpt2 on cpu-hetero (fast-0: 2 x cpu-fast; slow-0, slow-1: 2 x cpu-slow each), tp 2:
 * pipeline 0 at cp 2 on both slow nodes (CP rank 0 = slow-0, CP rank 1 = slow-1), pipeline 1 at
 * cp 1 on fast-0. 6 devices. */
static const char *CP_BASE =
    "{\"version\": 1, \"model\": \"tiny-gpt2\","
    " \"train\": {\"global_batch\": 8, \"seq_len\": 64, \"micro_batch\": 2, \"precision\": \"fp32\"},"
    " \"tp\": 2,"
    " \"pipelines\": ["
    "  {\"micro_batches\": 3, \"cp\": 2, \"stages\": ["
    "    {\"layers\": [0, 4], \"gpu\": \"cpu-slow\", \"recompute\": false,"
    "     \"devices\": [{\"node\": \"slow-0\", \"index\": 0}, {\"node\": \"slow-0\", \"index\": 1},"
    "                   {\"node\": \"slow-1\", \"index\": 0}, {\"node\": \"slow-1\", \"index\": 1}]}]},"
    "  {\"micro_batches\": 1, \"stages\": ["
    "    {\"layers\": [0, 4], \"gpu\": \"cpu-fast\", \"recompute\": false,"
    "     \"devices\": [{\"node\": \"fast-0\", \"index\": 0}, {\"node\": \"fast-0\", \"index\": 1}]}]}],"
    " \"cluster\": \"cpu-hetero\"}";

static json_t *cp_base(void) {
    json_error_t je;
    json_t *doc = json_loads(CP_BASE, 0, &je);
    if (!doc) fprintf(stderr, "CP_BASE does not parse: %d:%d: %s\n", je.line, je.column, je.text);
    return doc;
}

static json_t *pipeline(json_t *doc, int i) { return json_array_get(json_object_get(doc, "pipelines"), (size_t)i); }

static json_t *devices(json_t *doc, int i) {
    return json_object_get(json_array_get(json_object_get(pipeline(doc, i), "stages"), 0), "devices");
}

static bool load(json_t *doc, ah_plan_t *p) {
    ah_error_t err = {0};
    ah_status_t s = ah_plan_from_json(doc, "plan.json", NULL, p, &err);
    if (s == AH_OK) s = ah_plan_validate(p, &err);
    json_decref(doc);
    CHECK(s == AH_OK, "the CP plan is valid: %s", err.msg);
    if (s != AH_OK) ah_plan_free(p);
    return s == AH_OK;
}

static void test_rules(void) {
    EXPECT(cp_base(), AH_OK, NULL, NULL);
    json_t *d = cp_base();
    json_object_set_new(pipeline(d, 0), "cp", json_integer(3));
    EXPECT(d, AH_ERR_INVALID, "[cp] plan.json: pipelines[0].stages[0].devices", "tp x cp = 6 devices, cp-major");
    d = cp_base();
    json_object_set_new(pipeline(d, 0), "cp", json_integer(16));
    EXPECT(d, AH_ERR_INVALID, "[cp] plan.json: pipelines[0].cp", "a power of two in [1, 8], got 16");
    d = cp_base();
    json_object_set_new(pipeline(d, 0), "cp", json_integer(0));
    EXPECT(d, AH_ERR_INVALID, "[cp] plan.json: pipelines[0].cp", "got 0");
    d = cp_base();
    json_array_remove(devices(d, 0), 3);
    EXPECT(d, AH_ERR_INVALID, "[cp] plan.json: pipelines[0].stages[0].devices", "3 devices, but the plan's tp is 2 and the pipeline's cp 2");
    d = cp_base();
    json_object_set_new(json_object_get(d, "train"), "seq_len", json_integer(62));
    EXPECT(d, AH_ERR_INVALID, "[cp] pipelines[0].cp: 2", "seq_len 62 is not a multiple of 2 x cp = 4");
    /* a TP group (one CP rank's tp devices) inside one node; every device on the stage's GPU type */
    d = cp_base();
    json_array_remove(json_object_get(d, "pipelines"), 1);
    json_object_set_new(json_array_get(devices(d, 0), 3), "node", json_string("fast-0"));
    EXPECT(d, AH_ERR_INVALID, "[tp-group] pipelines[0].stages[0].devices",
           "device 2 is on node slow-1 but device 3 is on node fast-0");
    d = cp_base();
    json_array_remove(json_object_get(d, "pipelines"), 1);
    json_t *devs = devices(d, 0);
    json_object_set_new(json_array_get(devs, 2), "node", json_string("fast-0"));
    json_object_set_new(json_array_get(devs, 3), "node", json_string("fast-0"));
    EXPECT(d, AH_ERR_INVALID, "[tp-group] pipelines[0].stages[0].gpu", "node fast-0 (device 2) has cpu-fast GPUs");
    /* the CP ranks' devices are devices like any: not twice */
    d = cp_base();
    json_object_set_new(json_array_get(devices(d, 0), 2), "node", json_string("slow-0"));
    json_object_set_new(json_array_get(devices(d, 0), 3), "node", json_string("slow-0"));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[0] (schedule 1f1b): slow-0 GPU 0 holds stages 0 and 0", NULL);
    /* in memory, a degree that is no power of two */
    ah_plan_t p;
    if (!load(cp_base(), &p)) return;
    p.pipelines[0].cp = 3;
    ah_error_t err = {0};
    CHECK(ah_plan_validate(&p, &err) == AH_ERR_INVALID && strstr(err.msg, "[cp] pipelines[0].cp: 3; a context-parallel "
                                                                         "degree is a power of two"), "cp 3: %s", err.msg);
    ah_plan_free(&p);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 16);
    if (buf) buf[fread(buf, 1, (1 << 16) - 1, f)] = '\0';
    fclose(f);
    return buf;
}

/* save -> load -> save is byte-identical; "cp" is written for pipeline 0 only. */
static void test_round_trip(void) {
    ah_plan_t a, b;
    if (!load(cp_base(), &a)) return;
    char p1[] = "/tmp/ah_test_plan_cp_XXXXXX", p2[] = "/tmp/ah_test_plan_cp_XXXXXX";
    int f1 = mkstemp(p1), f2 = mkstemp(p2);
    CHECK(f1 >= 0 && f2 >= 0, "mkstemp");
    close(f1);
    close(f2);
    ah_error_t err = {0};
    CHECK(ah_plan_save(&a, p1, &err) == AH_OK, "save: %s", err.msg);
    CHECK(ah_plan_load(p1, NULL, &b, &err) == AH_OK, "reload: %s", err.msg);
    CHECK(b.pipelines[0].cp == 2 && b.pipelines[1].cp == 1, "cp survives: %d, %d", b.pipelines[0].cp, b.pipelines[1].cp);
    CHECK(b.pipelines[0].stages[0].devices[2].node == a.pipelines[0].stages[0].devices[2].node, "CP rank 1's devices survive");
    CHECK(ah_plan_save(&b, p2, &err) == AH_OK, "save again: %s", err.msg);
    char *t1 = slurp(p1), *t2 = slurp(p2);
    CHECK(t1 && t2 && strcmp(t1, t2) == 0, "save(load(save(a))) is byte-identical");
    json_t *doc = t1 ? json_loads(t1, 0, NULL) : NULL;
    CHECK(doc && json_integer_value(json_object_get(pipeline(doc, 0), "cp")) == 2, "\"cp\": 2 written");
    CHECK(doc && !json_object_get(pipeline(doc, 1), "cp"), "\"cp\" not written at 1");
    json_decref(doc);
    free(t1);
    free(t2);
    unlink(p1);
    unlink(p2);
    ah_plan_free(&b);
    ah_plan_free(&a);
}

/* 6 ranks: pipeline 0's (cp-major: CP rank 0 = ranks 0, 1; CP rank 1 = ranks 2, 3), then
 * pipeline 1's; the runtime's layout agrees. */
static void test_ranks(void) {
    ah_plan_t p;
    if (!load(cp_base(), &p)) return;
    CHECK(ah_plan_device_count(&p) == 6, "6 devices, got %d", ah_plan_device_count(&p));
    CHECK(ah_plan_rank_of(&p, 0, 0, 3) == 3 && ah_plan_rank_of(&p, 1, 0, 1) == 5, "ranks %d %d",
          ah_plan_rank_of(&p, 0, 0, 3), ah_plan_rank_of(&p, 1, 0, 1));
    ah_layout_t l;
    ah_error_t err = {0};
    CHECK(ah_layout_build(&p, &l, &err) == AH_OK, "layout: %s", err.msg);
    CHECK(l.n_ranks == 6, "layout ranks %d", l.n_ranks);
    const int want[6][3] = {{0, 0, 0}, {0, 1, 0}, {0, 0, 1}, {0, 1, 1}, {1, 0, 0}, {1, 1, 0}};
    for (int r = 0; r < 6 && l.roles; r++)
        CHECK(l.roles[r].pipeline == want[r][0] && l.roles[r].tp_rank == want[r][1] && l.roles[r].cp_rank == want[r][2],
              "rank %d: pipeline %d tp %d cp %d", r, l.roles[r].pipeline, l.roles[r].tp_rank, l.roles[r].cp_rank);
    CHECK(ah_layout_rank(&l, 0, 0, 1 * 2 + 1) == 3 && ah_layout_rank(&l, 1, 0, 1) == 5, "ah_layout_rank");
    ah_layout_free(&l);
    ah_plan_free(&p);
}

/* The sharded optimizer's groups take every CP rank: blocks [0, 4) at TP rank 1 has pipeline 0's
 * two CP ranks (slow-0:1, slow-1:1; ranks 1, 3) and pipeline 1's fast-0:1 (rank 5); the even split
 * is valid, each member holds the group and owns a third; the runtime runs it. */
static void test_shards(void) {
    ah_plan_t p;
    if (!load(cp_base(), &p)) return;
    ah_error_t err = {0};
    CHECK(ah_opt_group_room(&p) == 7, "room for 2 x (2 + 1) + 1 members, got %d", ah_opt_group_room(&p));
    CHECK(ah_plan_shard_all(&p, NULL, NULL, &err) == AH_OK && ah_plan_check_shards(&p, &err) == AH_OK, "even: %s",
          err.msg);
    const ah_opt_group_t g = {.kind = AH_OPT_BLOCKS, .first = 0, .last = 4, .tp_rank = 1};
    ah_device_ref_t devs[7];
    const int n = ah_opt_group_members(&p, &g, devs);
    CHECK(n == 3 && devs[0].index == 1 && devs[1].index == 1 && devs[2].index == 1 &&
              strcmp(p.cluster.nodes[devs[0].node].name, "slow-0") == 0 &&
              strcmp(p.cluster.nodes[devs[1].node].name, "slow-1") == 0 &&
              strcmp(p.cluster.nodes[devs[2].node].name, "fast-0") == 0,
          "members: both CP ranks of pipeline 0, then pipeline 1 (%d)", n);
    int64_t held[6], unowned[6];
    const int64_t elems = ah_opt_group_elems(&p, &g);
    CHECK(ah_opt_elems_all(&p, held, unowned, &err) == AH_OK, "%s", err.msg);
    CHECK(held[3] == held[1] && held[3] >= elems && unowned[1] > 0 && unowned[3] > 0,
          "CP rank 1 holds what CP rank 0 does, and owns a part of it: held %lld / %lld, not owned %lld / %lld",
          (long long)held[1], (long long)held[3], (long long)unowned[1], (long long)unowned[3]);
    ah_plan_free(&p);
}

/* The cost model prices CP plans (tests/test_cost_cp.c has the figures). The runtime runs every
 * valid CP plan: no refusal is left (CUDA and bf16 / fp16 since issue 38's CUDA ring kernels). */
static void test_priced(void) {
    ah_plan_t p;
    if (!load(cp_base(), &p)) return;
    ah_eval_t e;
    ah_error_t err = {0};
    CHECK(ah_evaluate(&p, NULL, &e, &err) == AH_OK, "the cost model prices CP (tests/test_cost_cp.c): %s", err.msg);
    ah_eval_free(&e);
    ah_plan_free(&p);
}

int main(void) {
    test_rules();
    test_round_trip();
    test_ranks();
    test_shards();
    test_priced();
    return ah_test_finish();
}
