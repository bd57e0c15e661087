/* Plan file: exact round trip, one failing plan per validity rule (rule tag and place checked in
 * the message), JSON syntax errors with line:column, unknown node / GPU type / field, the missing
 * cluster, the --cluster override, and the sharded optimizer's groups ([shards]). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/json.h"
#include "harness.h"
#include "plan_check.h"
#include "plan/plan.h"

/* tiny-gpt2 (4 blocks, 4 heads) on the built-in cpu-hetero cluster (fast-0: 2 x cpu-fast;
 * slow-0, slow-1: 2 x cpu-slow each), tp 2: pipeline 0 is one fast stage, pipeline 1 two slow
 * ones. 3 + 1 micro-batches x 2 sequences = global batch 8. */
static const char *BASE =
    "{\"version\": 1, \"model\": \"tiny-gpt2\","
    " \"train\": {\"global_batch\": 8, \"seq_len\": 64, \"micro_batch\": 2, \"precision\": \"fp32\"},"
    " \"tp\": 2,"
    " \"pipelines\": ["
    "  {\"micro_batches\": 3, \"stages\": ["
    "    {\"layers\": [0, 4], \"gpu\": \"cpu-fast\", \"recompute\": false,"
    "     \"devices\": [{\"node\": \"fast-0\", \"index\": 0}, {\"node\": \"fast-0\", \"index\": 1}]}]},"
    "  {\"micro_batches\": 1, \"stages\": ["
    "    {\"layers\": [0, 2], \"gpu\": \"cpu-slow\", \"recompute\": true,"
    "     \"devices\": [{\"node\": \"slow-0\", \"index\": 0}, {\"node\": \"slow-0\", \"index\": 1}]},"
    "    {\"layers\": [2, 4], \"gpu\": \"cpu-slow\","
    "     \"devices\": [{\"node\": \"slow-1\", \"index\": 0}, {\"node\": \"slow-1\", \"index\": 1}]}]}],"
    " \"cluster\": \"cpu-hetero\"}";

static json_t *base(void) {
    json_error_t je;
    json_t *doc = json_loads(BASE, 0, &je);
    if (!doc) fprintf(stderr, "BASE does not parse: %d:%d: %s\n", je.line, je.column, je.text);
    return doc;
}

static json_t *stage(json_t *doc, int p, int s) {
    return json_array_get(json_object_get(json_array_get(json_object_get(doc, "pipelines"), (size_t)p),
                                          "stages"),
                          (size_t)s);
}

static json_t *device(json_t *doc, int p, int s, int r) {
    return json_array_get(json_object_get(stage(doc, p, s), "devices"), (size_t)r);
}

static void set_layers(json_t *doc, int p, int s, int first, int last) {
    json_object_set_new(stage(doc, p, s), "layers", json_pack("[i,i]", first, last));
}

static void test_base_valid(void) {
    EXPECT(base(), AH_OK, NULL, NULL);
    /* the examples are valid too */
    const char *examples[] = {"examples/plans/mixed32-llama2-7b.json",
                              "examples/plans/cpu-hetero-tiny-gpt2.json",
                              "examples/plans/cpu-hetero-tiny-gpt2-tp2.json"};
    for (size_t i = 0; i < sizeof examples / sizeof examples[0]; i++) {
        ah_plan_t p;
        ah_error_t err = {0};
        ah_status_t s = ah_plan_load(ah_test_src_path(examples[i]), NULL, &p, &err);
        if (s == AH_OK) {
            s = ah_plan_validate(&p, &err);
            ah_plan_free(&p);
        }
        CHECK(s == AH_OK, "%s: %s", examples[i], err.msg);
    }
}

static void test_rules(void) {
    json_t *d;
    /* [version] */
    d = base();
    json_object_set_new(d, "version", json_integer(2));
    EXPECT(d, AH_ERR_INVALID, "[version] plan.json: version", "got 2");
    /* [pipelines] */
    d = base();
    json_object_set_new(d, "pipelines", json_array());
    EXPECT(d, AH_ERR_INVALID, "[pipelines]", "at least one pipeline");
    /* [layers]: a gap, an overlap, a short end, an empty range, past the model, no stages */
    d = base();
    set_layers(d, 1, 1, 3, 4);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[1].stages[1].layers", "layer 2 is missing from pipeline 1");
    d = base();
    set_layers(d, 1, 1, 1, 4);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[1].stages[1].layers", "layer 1 is held twice in pipeline 1");
    d = base();
    set_layers(d, 1, 1, 2, 3);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[1]:", "layer 3 is missing from pipeline 1");
    d = base();
    set_layers(d, 0, 0, 0, 2);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[0]:", "layers 2 .. 3 are missing from pipeline 0");
    d = base();
    set_layers(d, 1, 0, 0, 0);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[1].stages[0].layers", "holds no layer");
    d = base();
    set_layers(d, 1, 1, 2, 5);
    EXPECT(d, AH_ERR_INVALID, "[layers] pipelines[1].stages[1].layers", "past the model's 4 layers");
    d = base();
    json_object_set_new(json_array_get(json_object_get(d, "pipelines"), 0), "stages", json_array());
    EXPECT(d, AH_ERR_INVALID, "[layers] plan.json: pipelines[0].stages", "at least one stage");
    /* [tp]: wrong device count, a degree the model cannot split, out of range */
    d = base();
    json_array_remove(json_object_get(stage(d, 1, 0), "devices"), 1);
    EXPECT(d, AH_ERR_INVALID, "[tp] plan.json: pipelines[1].stages[0].devices", "1 devices, but the plan's tp is 2");
    d = base();
    json_object_set_new(d, "tp", json_integer(3));
    json_array_append_new(json_object_get(stage(d, 0, 0), "devices"), json_pack("{s:s,s:i}", "node", "fast-0", "index", 1));
    json_array_append_new(json_object_get(stage(d, 1, 0), "devices"), json_pack("{s:s,s:i}", "node", "slow-0", "index", 1));
    json_array_append_new(json_object_get(stage(d, 1, 1), "devices"), json_pack("{s:s,s:i}", "node", "slow-1", "index", 1));
    EXPECT(d, AH_ERR_INVALID, "[tp] tp: 3", "cannot be split 3 ways");
    d = base();
    json_object_set_new(d, "tp", json_integer(AH_MAX_TP + 1));
    EXPECT(d, AH_ERR_INVALID, "[tp] plan.json: tp", "[1, 16]");
    /* [tp-group]: two nodes in one group; the stage's gpu is not the node's */
    d = base(); /* every device is in use: drop pipeline 0 to free fast-0 */
    json_array_remove(json_object_get(d, "pipelines"), 0);
    json_object_set_new(device(d, 0, 1, 1), "node", json_string("fast-0"));
    EXPECT(d, AH_ERR_INVALID, "[tp-group] pipelines[0].stages[1].devices",
           "device 0 is on node slow-1 but device 1 is on node fast-0");
    d = base();
    json_object_set_new(stage(d, 1, 1), "gpu", json_string("cpu-fast"));
    EXPECT(d, AH_ERR_INVALID, "[tp-group] pipelines[1].stages[1].gpu", "node slow-1 has cpu-slow GPUs");
    /* [schedule]: a device on two stages of a 1f1b pipeline (both named); [device]: a device on
     * stages of two pipelines (both places named), an index past the node's count */
    d = base();
    json_object_set_new(device(d, 1, 1, 0), "node", json_string("slow-0"));
    json_object_set_new(device(d, 1, 1, 1), "node", json_string("slow-0"));
    EXPECT(d, AH_ERR_INVALID, "[schedule] pipelines[1] (schedule 1f1b): slow-0 GPU 0 holds stages 0 and 1",
           "only an interleaved pipeline puts a device on several of its stages");
    d = base();
    json_object_set_new(device(d, 1, 0, 0), "node", json_string("fast-0"));
    json_object_set_new(device(d, 1, 0, 1), "node", json_string("fast-0"));
    EXPECT(d, AH_ERR_INVALID, "[device] fast-0 GPU 0 is on stages of two pipelines",
           "pipelines[0].stages[0].devices[0] and pipelines[1].stages[0].devices[0]");
    d = base();
    json_object_set_new(device(d, 0, 0, 1), "index", json_integer(2));
    EXPECT(d, AH_ERR_INVALID, "[device] pipelines[0].stages[0].devices[1].index", "node fast-0 has 2 GPUs");
    /* [batch]: a wrong sum (printed), a pipeline with no micro-batch, batch not a multiple */
    d = base();
    json_object_set_new(json_array_get(json_object_get(d, "pipelines"), 1), "micro_batches", json_integer(2));
    EXPECT(d, AH_ERR_INVALID, "[batch]", "they sum to 5 (3 + 2), and 5 x micro_batch 2 = 10 sequences, but global_batch is 8");
    d = base();
    json_object_set_new(json_array_get(json_object_get(d, "pipelines"), 1), "micro_batches", json_integer(0));
    EXPECT(d, AH_ERR_INVALID, "[batch] pipelines[1].micro_batches", "at least 1, got 0");
    d = base();
    json_object_set_new(json_object_get(d, "train"), "global_batch", json_integer(9));
    EXPECT(d, AH_ERR_INVALID, "[batch]", "multiple of micro_batch");
    /* [train]: past the context, a zero size, an unknown precision */
    d = base();
    json_object_set_new(json_object_get(d, "train"), "seq_len", json_integer(65));
    EXPECT(d, AH_ERR_INVALID, "[train] train.seq_len", "context of 64");
    d = base();
    json_object_set_new(json_object_get(d, "train"), "micro_batch", json_integer(0));
    EXPECT(d, AH_ERR_INVALID, "[train] train.micro_batch", "at least 1, got 0");
    d = base();
    json_object_set_new(json_object_get(d, "train"), "precision", json_string("fp8"));
    EXPECT(d, AH_ERR_INVALID, "[train] plan.json: train.precision", "\"fp8\"");
    /* [warmup]: extra warm-up never grows down a pipeline, never negative; a valid one passes */
    d = base();
    json_object_set_new(stage(d, 1, 1), "warmup_extra", json_integer(1));
    EXPECT(d, AH_ERR_INVALID, "[warmup] pipelines[1].stages[1].warmup_extra: 1", "at most the stage before's (0)");
    d = base();
    json_object_set_new(stage(d, 1, 0), "warmup_extra", json_integer(-1));
    EXPECT(d, AH_ERR_INVALID, "[warmup] pipelines[1].stages[0].warmup_extra: -1", "must be >= 0");
    d = base();
    json_object_set_new(stage(d, 1, 0), "warmup_extra", json_integer(2));
    json_object_set_new(stage(d, 1, 1), "warmup_extra", json_integer(1));
    EXPECT(d, AH_OK, NULL, NULL);
    /* a fall of 4 at a hop deadlocks the runtime's p2p (pp2 with 4, 0 hung from 6 micro-batches); 3 runs */
    d = base();
    json_object_set_new(stage(d, 1, 0), "warmup_extra", json_integer(4));
    EXPECT(d, AH_ERR_INVALID, "[warmup] pipelines[1].stages[1].warmup_extra: 0", "at most 3 less than it");
    d = base();
    json_object_set_new(stage(d, 1, 0), "warmup_extra", json_integer(3));
    EXPECT(d, AH_OK, NULL, NULL);
}

static void test_names_and_fields(void) {
    json_t *d = base();
    json_object_set_new(device(d, 1, 0, 1), "node", json_string("h20-9"));
    EXPECT(d, AH_ERR_INVALID,
           "plan.json: pipelines[1].stages[0].devices[1].node: unknown node \"h20-9\" (nodes: fast-0, "
           "slow-0, slow-1)",
           "--cluster");
    d = base();
    json_object_set_new(stage(d, 0, 0), "gpu", json_string("A100"));
    EXPECT(d, AH_ERR_INVALID, "plan.json: pipelines[0].stages[0].gpu: unknown GPU type \"A100\"",
           "cpu-fast, cpu-slow");
    d = base();
    json_object_set_new(stage(d, 0, 0), "recompte", json_true());
    EXPECT(d, AH_ERR_INVALID, "plan.json: pipelines[0].stages[0]: unknown field \"recompte\"", "recompute");
    d = base();
    json_object_set_new(d, "pipeline", json_array());
    EXPECT(d, AH_ERR_INVALID, "unknown field \"pipeline\"", "pipelines");
    d = base();
    json_object_set_new(json_object_get(d, "train"), "seq_len", json_string("64"));
    EXPECT(d, AH_ERR_INVALID, "plan.json: train.seq_len", "got \"64\"");
    d = base();
    json_object_set_new(stage(d, 0, 0), "layers", json_pack("[i]", 4));
    EXPECT(d, AH_ERR_INVALID, "plan.json: pipelines[0].stages[0].layers", "[first, last)");
    d = base();
    json_object_set_new(d, "model", json_string("gpt5"));
    EXPECT(d, AH_ERR_INVALID, "unknown model \"gpt5\"", "tiny-gpt2");
    d = base();
    json_object_set_new(d, "cluster", json_string("nowhere"));
    EXPECT(d, AH_ERR_INVALID, "plan.json: cluster", "\"nowhere\"");
    /* "dp_sync" and "p2p": one of their names (absent: the first), anything else refused naming them */
    d = base();
    json_object_set_new(d, "dp_sync", json_string("tree"));
    EXPECT(d, AH_ERR_INVALID, "[dp_sync] plan.json: dp_sync: unknown gradient sync \"tree\"",
           "(allowed: ring or hierarchical; absent means ring)");
    d = base();
    json_object_set_new(d, "p2p", json_string("halves"));
    EXPECT(d, AH_ERR_INVALID, "[p2p] plan.json: p2p: unknown pipeline hop \"halves\"",
           "(allowed: scatter-gather or whole; absent means scatter-gather)");
    ah_plan_t p;
    ah_error_t err = {0};
    const char *const syncs[] = {NULL, "ring", "hierarchical"}, *const hops[] = {NULL, "scatter-gather", "whole"};
    for (int i = 0; i < 3; i++) {
        d = base();
        if (syncs[i]) json_object_set_new(d, "dp_sync", json_string(syncs[i]));
        if (hops[i]) json_object_set_new(d, "p2p", json_string(hops[i]));
        const bool read = ah_plan_from_json(d, "plan.json", NULL, &p, &err) == AH_OK;
        CHECK(read, "dp_sync %s, p2p %s: %s", syncs[i] ? syncs[i] : "absent", hops[i] ? hops[i] : "absent", err.msg);
        if (read) {
            CHECK_EQ_I64(p.dp_sync, i == 2 ? AH_DP_SYNC_HIERARCHICAL : AH_DP_SYNC_RING);
            CHECK_EQ_I64(p.p2p, i == 2 ? AH_P2P_WHOLE : AH_P2P_SCATTER_GATHER);
            ah_plan_free(&p);
        }
        json_decref(d);
    }
    /* no cluster, no override: tell the user to pass --cluster */
    d = base();
    json_object_del(d, "cluster");
    EXPECT(d, AH_ERR_INVALID, "no \"cluster\"", "pass --cluster");
}

static void test_override(void) {
    ah_cluster_t c;
    ah_error_t err = {0};
    CHECK(ah_cluster_builtin("cpu-hetero", &c, &err) == AH_OK, "cpu-hetero: %s", err.msg);
    json_t *d = base();
    json_object_del(d, "cluster");
    ah_plan_t p;
    ah_status_t s = ah_plan_from_json(d, "plan.json", &c, &p, &err);
    CHECK(s == AH_OK, "override replaces the missing cluster: %s", err.msg);
    if (s == AH_OK) {
        CHECK_EQ_I64(p.cluster.n_nodes, 3);
        CHECK(ah_plan_validate(&p, &err) == AH_OK, "valid with override: %s", err.msg);
        ah_plan_free(&p);
    }
    json_decref(d);
    /* the override wins over the plan's own: mixed-32 has no fast-0 */
    ah_cluster_t m;
    CHECK(ah_cluster_builtin("mixed-32", &m, &err) == AH_OK, "mixed-32: %s", err.msg);
    d = base();
    CHECK_ERR(ah_plan_from_json(d, "plan.json", &m, &p, &err), AH_ERR_INVALID, err,
              "unknown GPU type \"cpu-fast\" (the cluster's types: A100-80G, H800, H20)");
    json_decref(d);
    ah_cluster_free(&m);
    ah_cluster_free(&c);
}

static bool stages_equal(const ah_plan_t *a, const ah_plan_t *b) {
    if (a->n_pipelines != b->n_pipelines || a->tp != b->tp) return false;
    for (int i = 0; i < a->n_pipelines; i++) {
        const ah_pipeline_t *x = &a->pipelines[i], *y = &b->pipelines[i];
        if (x->micro_batches != y->micro_batches || x->n_stages != y->n_stages) return false;
        for (int s = 0; s < x->n_stages; s++) {
            const ah_stage_t *u = &x->stages[s], *v = &y->stages[s];
            if (u->first != v->first || u->last != v->last || u->type != v->type ||
                u->recompute != v->recompute || u->warmup_extra != v->warmup_extra)
                return false;
            for (int r = 0; r < a->tp; r++)
                if (u->devices[r].node != v->devices[r].node || u->devices[r].index != v->devices[r].index)
                    return false;
        }
    }
    return true;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

static void test_round_trip(void) {
    ah_plan_t a, b;
    ah_error_t err = {0};
    ah_status_t s = ah_plan_load(ah_test_src_path("examples/plans/mixed32-llama2-7b.json"), NULL, &a, &err);
    CHECK(s == AH_OK, "load example: %s", err.msg);
    if (s != AH_OK) return;
    a.pipelines[0].stages[0].warmup_extra = 2; /* written, read back; absent where 0 */
    /* predictions with digits that a short float format would lose */
    a.has_predicted = true;
    a.predicted = (ah_prediction_t){.iteration_s = 1.0 / 3.0, .tokens_per_s = 54875.912345678901,
                                    .memory_bytes = 27303968123LL,
                                    .breakdown = {0.1 / 3, 2e-7, 1.0 / 7, 0.0, 3.14159265358979, 1e-300}};
    char p1[] = "/tmp/ah_test_plan_XXXXXX";
    int fd = mkstemp(p1);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) goto out_a;
    close(fd);
    CHECK(ah_plan_save(&a, p1, &err) == AH_OK, "save: %s", err.msg);
    s = ah_plan_load(p1, NULL, &b, &err);
    CHECK(s == AH_OK, "reload: %s", err.msg);
    if (s == AH_OK) {
        CHECK(ah_model_equal(&a.model, &b.model), "model survives");
        CHECK(strcmp(a.model.name, b.model.name) == 0, "model name survives");
        CHECK(memcmp(&a.train, &b.train, sizeof a.train) == 0, "train survives");
        CHECK(stages_equal(&a, &b), "pipelines and stages survive");
        CHECK(b.has_predicted, "predicted survives");
        CHECK(memcmp(&a.predicted, &b.predicted, sizeof a.predicted) == 0, "predicted is bit-exact");
        json_t *ja = ah_plan_to_json(&a), *jb = ah_plan_to_json(&b);
        CHECK(json_equal(ja, jb), "to_json(load(save(a))) == to_json(a), cluster included");
        json_decref(ja);
        json_decref(jb);
        /* a second save writes the same bytes */
        char p2[] = "/tmp/ah_test_plan_XXXXXX";
        fd = mkstemp(p2);
        if (fd >= 0) {
            close(fd);
            CHECK(ah_plan_save(&b, p2, &err) == AH_OK, "save again: %s", err.msg);
            char *t1 = slurp(p1), *t2 = slurp(p2);
            CHECK(t1 && t2 && strcmp(t1, t2) == 0, "save(load(save(a))) is byte-identical");
            free(t1);
            free(t2);
            unlink(p2);
        }
        ah_plan_free(&b);
    }
    unlink(p1);
out_a:
    ah_plan_free(&a);
}

static void test_syntax_error(void) {
    char path[] = "/tmp/ah_test_plan_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    const char *text = "{\n  \"version\": 1,\n  \"tp\": ,\n}\n"; /* the ',' is line 3, column 9 */
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    ah_plan_t p;
    ah_error_t err = {0};
    char want[64];
    snprintf(want, sizeof want, "%s:3:9:", path);
    CHECK_ERR(ah_plan_load(path, NULL, &p, &err), AH_ERR_PARSE, err, want);
    unlink(path);
    CHECK_ERR(ah_plan_load("/nonexistent/plan.json", NULL, &p, &err), AH_ERR_IO, err, "/nonexistent/plan.json");
}

/* A planner-built plan with indices outside its cluster: rejected by validate, not written. */
static void test_built_plan(void) {
    ah_model_t m;
    ah_cluster_t c;
    ah_error_t err = {0};
    CHECK(ah_model_preset("tiny-gpt2", &m, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_cluster_builtin("cpu-hetero", &c, &err) == AH_OK, "%s", err.msg);
    ah_train_t tr = {.global_batch = 4, .seq_len = 64, .micro_batch = 1, .precision = AH_PREC_FP32};
    ah_plan_t p;
    CHECK(ah_plan_init(&p, &m, &tr, 1, &c, 1, &err) == AH_OK, "%s", err.msg);
    CHECK(ah_pipeline_alloc(&p.pipelines[0], 1, &err) == AH_OK, "%s", err.msg);
    p.pipelines[0].micro_batches = 4;
    ah_stage_t *st = &p.pipelines[0].stages[0];
    st->first = 0;
    st->last = 4;
    st->type = ah_cluster_find_type(&c, "cpu-slow");
    st->devices[0] = (ah_device_ref_t){.node = ah_cluster_find_node(&c, "slow-1"), .index = 1};
    CHECK(ah_plan_validate(&p, &err) == AH_OK, "built plan valid: %s", err.msg);
    st->devices[0].node = 7;
    CHECK_ERR(ah_plan_validate(&p, &err), AH_ERR_INVALID, err, "[device] pipelines[0].stages[0].devices[0].node");
    CHECK(ah_plan_to_json(&p) == NULL, "a plan with a bad node index is not written");
    CHECK_ERR(ah_plan_save(&p, "/tmp/ah_never_written.json", &err), AH_ERR_INTERNAL, err, "outside its cluster");
    CHECK(access("/tmp/ah_never_written.json", F_OK) != 0, "no file left behind");
    ah_plan_free(&p);
    ah_cluster_free(&c);
}

/* One "blocks" group of BASE's segment [first, last) at TP rank `tp`, with shares (node, index,
 * begin, end) x n. */
static json_t *shard_group(int first, int last, int tp, int n, const char *const *nodes, const int *index,
                           const int64_t *ranges) {
    json_t *shares = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(shares, json_pack("{s:s, s:i, s:[I,I]}", "node", nodes[i], "index", index[i], "elements",
                                                (json_int_t)ranges[2 * i], (json_int_t)ranges[2 * i + 1]));
    return json_pack("{s:s, s:[i,i], s:i, s:o}", "group", "blocks", "layers", first, last, "tp_rank", tp, "shares", shares);
}

static json_t *with_shards(json_t *doc, json_t *group) {
    json_t *arr = json_array();
    json_array_append_new(arr, group);
    json_object_set_new(doc, "optimizer_shards", arr);
    return doc;
}

/* [shards]: the sharded optimizer's groups. BASE's segments are [0, 2) and [2, 4); the group of
 * [0, 2) at TP rank 0 is fast-0:0 and slow-0:0. */
static void test_shards(void) {
    ah_plan_t p;
    ah_error_t err = {0};
    json_t *d = base();
    CHECK(ah_plan_from_json(d, "plan.json", NULL, &p, &err) == AH_OK, "%s", err.msg);
    json_decref(d);
    const ah_opt_group_t g = {.kind = AH_OPT_BLOCKS, .first = 0, .last = 2, .tp_rank = 0};
    const int64_t n = ah_opt_group_elems(&p, &g);
    ah_device_ref_t devs[4];
    CHECK(n > 0 && ah_opt_group_members(&p, &g, devs) == 2, "blocks [0, 2) tp 0: %lld elements", (long long)n);
    /* even shares over every group: valid, written and read back the same */
    CHECK(ah_plan_shard_all(&p, NULL, NULL, &err) == AH_OK && ah_plan_validate(&p, &err) == AH_OK, "%s", err.msg);
    CHECK(p.n_opt_groups == 2 * 5, "2 segments, embedding (wpe), head (ln_f), tied (wte), at 2 TP ranks: %d",
          p.n_opt_groups);
    json_t *out = ah_plan_to_json(&p);
    ah_plan_t q;
    CHECK(ah_plan_from_json(out, "plan.json", NULL, &q, &err) == AH_OK && ah_plan_validate(&q, &err) == AH_OK, "%s", err.msg);
    json_t *again = ah_plan_to_json(&q);
    CHECK(json_equal(out, again), "optimizer_shards round trip");
    json_decref(out);
    json_decref(again);
    ah_plan_free(&q);
    ah_plan_free(&p);

    const char *both[] = {"fast-0", "slow-0"}, *wrong[] = {"fast-0", "slow-1"}, *twice[] = {"fast-0", "fast-0"};
    const int idx[] = {0, 0};
    const int64_t half = n / 2;
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, half, half, n})), AH_OK, NULL, NULL);
    /* uneven, out of member order, one member owning nothing */
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){7, n, 0, 7})), AH_OK, NULL, NULL);
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, 0, 0, n})), AH_OK, NULL, NULL);
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, half, half, n - 1})), AH_ERR_INVALID,
           "[shards] optimizer_shards[0] (blocks [0, 2) tp 0)", "must cover [0, ");
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, half, half + 1, n})), AH_ERR_INVALID,
           "optimizer_shards[0] (blocks [0, 2) tp 0)", "are in no share");
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, half + 1, half, n})), AH_ERR_INVALID,
           "optimizer_shards[0] (blocks [0, 2) tp 0)", "are in two shares");
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){-1, half, half, n})), AH_ERR_INVALID,
           "optimizer_shards[0] (blocks [0, 2) tp 0).shares[0]: elements [-1, ", "0 <= begin <= end");
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, wrong, idx, (int64_t[]){0, half, half, n})), AH_ERR_INVALID,
           "optimizer_shards[0] (blocks [0, 2) tp 0).shares[1]: device slow-1:0", "is not in the group");
    EXPECT(with_shards(base(), shard_group(0, 2, 0, 2, twice, idx, (int64_t[]){0, half, half, n})), AH_ERR_INVALID,
           "shares[1]: device fast-0:0 has two shares", NULL);
    EXPECT(with_shards(base(), shard_group(0, 4, 0, 2, both, idx, (int64_t[]){0, half, half, n})), AH_ERR_INVALID,
           "optimizer_shards[0] (blocks [0, 4) tp 0): no such data-parallel group", "one segment");
    EXPECT(with_shards(base(), shard_group(0, 2, 2, 2, both, idx, (int64_t[]){0, half, half, n})), AH_ERR_INVALID,
           "(blocks [0, 2) tp 2): no such data-parallel group", "tp_rank is outside [0, tp)");
    d = with_shards(base(), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, half, half, n}));
    json_array_append_new(json_object_get(d, "optimizer_shards"), shard_group(0, 2, 0, 2, both, idx, (int64_t[]){0, n, n, n}));
    EXPECT(d, AH_ERR_INVALID, "optimizer_shards[1] (blocks [0, 2) tp 0): listed twice", NULL);
    d = with_shards(base(), json_pack("{s:s, s:i, s:[]}", "group", "everything", "tp_rank", 0, "shares"));
    EXPECT(d, AH_ERR_INVALID, "optimizer_shards[0].group: unknown group \"everything\"", NULL);
}

int main(void) {
    test_base_valid();
    test_rules();
    test_names_and_fields();
    test_override();
    test_round_trip();
    test_syntax_error();
    test_built_plan();
    test_shards();
    return ah_test_finish();
}
