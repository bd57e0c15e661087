/* libFuzzer harness: a cluster file, as `--cluster FILE` reads it.
 *
 * Input: the bytes of the file. Beyond "no crash, no leak, no undefined behaviour", on every
 * cluster the parser accepts it checks what the rest of autohet takes for granted: node names
 * are unique (plans name devices by node), every node's type index is in range, the full form
 * (to_json) reads back to the same document, and a copy frees cleanly.
 * Seeds: tests/corpus/cluster/. Run: scripts/run-fuzzers.sh or build-fuzz/fuzz_cluster DIR.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/json.h"
#include "spec/cluster.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_cluster: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

static void check_accepted(const ah_cluster_t *c) {
    for (int i = 0; i < c->n_nodes; i++) {
        const ah_node_t *n = &c->nodes[i];
        if (n->type < 0 || n->type >= c->n_types) fail("node type index out of range", n->name);
        if (n->count < 1) fail("node with no GPUs accepted", n->name);
        if (ah_cluster_find_node(c, n->name) != i) fail("duplicate node name accepted", n->name);
    }
    for (int i = 0; i < c->n_types; i++) {
        if (ah_cluster_find_type(c, c->types[i].name) != i)
            fail("duplicate GPU type name accepted", c->types[i].name);
        (void)ah_gpu_capacity_bytes(&c->types[i]);
        (void)ah_gpu_peak_flops(&c->types[i], 0);
        (void)ah_gpu_peak_flops(&c->types[i], 1);
    }
    (void)ah_cluster_gpu_count(c);

    /* The full form must be a fixed point: write, read back, write again, same document. */
    ah_error_t err;
    json_t *j1 = ah_cluster_to_json(c);
    if (!j1) fail("to_json returned NULL", NULL);
    ah_cluster_t back = {0};
    if (ah_cluster_from_json(j1, "full form", &back, &err) != AH_OK)
        fail("full form of an accepted cluster is rejected", err.msg);
    json_t *j2 = ah_cluster_to_json(&back);
    if (!j2 || !json_equal(j1, j2)) fail("full form changes on a round trip", NULL);
    json_decref(j1);
    json_decref(j2);
    ah_cluster_free(&back);

    ah_cluster_t copy = {0};
    if (ah_cluster_copy(c, &copy, &err) != AH_OK) fail("copy failed", err.msg);
    if (copy.n_nodes != c->n_nodes || copy.n_types != c->n_types) fail("copy differs", NULL);
    ah_cluster_free(&copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ah_error_t err;
    json_t *doc = NULL;
    if (ah_json_load_string((const char *)data, size, "cluster.json", &doc, &err) != AH_OK) return 0;
    /* On failure the parser must leave nothing allocated: no free here, LeakSanitizer checks. */
    ah_cluster_t c = {0};
    if (ah_cluster_from_json(doc, "cluster.json", &c, &err) == AH_OK) {
        check_accepted(&c);
        ah_cluster_free(&c);
    }
    json_decref(doc);
    return 0;
}
