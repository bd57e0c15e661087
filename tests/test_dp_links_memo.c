/* The memo of DP groups' links (cost/cost.h ah_dp_links_memo_t): for random groups (members
 * repeated on a node, several kinds of node in one zone, zones in regions, per-pair links with a
 * total shared by the flows, and without) the memo's figures are ah_dp_links_of's, bit for bit,
 * whether the group is found afresh or through a group of the same signature; a cluster other
 * than the memo's is found afresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost/cost.h"
#include "harness.h"
#include "spec/cluster.h"

/* Twelve nodes: two types in zone a1 and one in a2 (region a); in b1 one H100 and three of "slow"
 * (a node's GPUs joined slower than nodes are, so a node holding two members is the slowest link),
 * and one type in b2 (region b); the network's members, NET. */
#define NODE(N, G, Z, R) "{\"name\": \"" N "\", \"gpu\": \"" G "\", \"count\": 8, \"zone\": \"" Z "\", \"region\": \"" R "\"}"
#define CLUSTER(NET)                                                                    \
    "{\"gpu_types\": {\"slow\": {\"base\": \"L40S\", \"intra_node_gb_s\": 1}}, "              \
    "\"nodes\": [" NODE("n0", "A100-80G", "a1", "a") ", " NODE("n1", "A100-80G", "a1", "a") ", " \
    NODE("n2", "H100-SXM", "a1", "a") ", " NODE("n3", "H100-SXM", "a1", "a") ", "                 \
    NODE("n4", "A100-80G", "a2", "a") ", " NODE("n5", "A100-80G", "a2", "a") ", "                 \
    NODE("n6", "H100-SXM", "b1", "b") ", " NODE("n7", "slow", "b1", "b")     ", "                 \
    NODE("n8", "slow", "b1", "b") ", " NODE("n9", "slow", "b1", "b") ", "                         \
    NODE("n10", "A100-80G", "b2", "b") ", " NODE("n11", "A100-80G", "b2", "b") "], "               \
    "\"network\": {" NET "}}"

static bool same_links(const ah_dp_links_t *a, const ah_dp_links_t *b) {
    return a->domains == b->domains && a->r_min == b->r_min && a->r_max == b->r_max &&
           memcmp(&a->in_bw, &b->in_bw, sizeof a->in_bw) == 0 && memcmp(&a->in_lat, &b->in_lat, sizeof a->in_lat) == 0 &&
           memcmp(&a->x_bw, &b->x_bw, sizeof a->x_bw) == 0 && memcmp(&a->x_lat, &b->x_lat, sizeof a->x_lat) == 0 &&
           memcmp(&a->ring_bw, &b->ring_bw, sizeof a->ring_bw) == 0 &&
           memcmp(&a->ring_lat, &b->ring_lat, sizeof a->ring_lat) == 0;
}

/* Random groups on c, each through the memo and afresh; groups drawn from few nodes, so that
 * signatures repeat. Returns how many differed. */
static int compare_groups(const ah_cluster_t *c, ah_dp_links_memo_t *m, unsigned seed) {
    srand(seed);
    int nodes[16], bad = 0;
    for (int g = 0; g < 4000; g++) {
        const int n = 1 + rand() % 16, spread = 1 + rand() % c->n_nodes;
        for (int i = 0; i < n; i++) nodes[i] = rand() % spread;
        const int flows = 1 + rand() % 4;
        ah_dp_links_t want, got;
        ah_dp_links_of(c, nodes, n, flows, &want);
        ah_dp_links_memo_of(m, c, nodes, n, flows, &got);
        if (!same_links(&want, &got)) {
            if (bad++ < 3)
                fprintf(stderr, "group %d (n %d, flows %d): memo domains %d r %d..%d x_bw %g in_bw %g ring_bw %g; "
                                "afresh %d r %d..%d x_bw %g in_bw %g ring_bw %g\n",
                        g, n, flows, got.domains, got.r_min, got.r_max, got.x_bw, got.in_bw, got.ring_bw, want.domains,
                        want.r_min, want.r_max, want.x_bw, want.in_bw, want.ring_bw);
        }
    }
    return bad;
}

static void test_memo_as_afresh(const char *what, const char *text) {
    ah_cluster_t c;
    ah_error_t err = {0};
    const ah_status_t st = ah_test_parse_cluster(text, &c, &err);
    CHECK(st == AH_OK, "%s: %s", what, err.msg);
    if (st != AH_OK) return;
    ah_dp_links_memo_t *m = ah_dp_links_memo_new(&c);
    CHECK(m != NULL, "%s: a memo", what);
    CHECK(compare_groups(&c, m, 1) == 0, "%s: the memo's figures are ah_dp_links_of's", what);
    CHECK(compare_groups(&c, m, 2) == 0, "%s: again, most groups found in the memo", what);
    /* another cluster (its own nodes array, a slower WAN): found afresh, not from the memo */
    ah_cluster_t other;
    CHECK(ah_cluster_copy(&c, &other, &err) == AH_OK, "%s: %s", what, err.msg);
    other.net.inter_region_gb_s /= 7;
    CHECK(compare_groups(&other, m, 1) == 0, "%s: another cluster found afresh", what);
    ah_cluster_free(&other);
    ah_dp_links_memo_free(m);
    ah_cluster_free(&c);
}

int main(void) {
    test_memo_as_afresh("class links", CLUSTER("\"inter_region_gb_s\": 1.5, \"inter_region_latency_us\": 30000"));
    test_memo_as_afresh("per-pair links with totals",
                        CLUSTER("\"inter_region_gb_s\": 1.5, \"links\": [{\"between\": [\"a\", \"b\"], \"gb_s\": 4, "
                                "\"total_gb_s\": 6}, {\"between\": [\"a1\", \"a2\"], \"gb_s\": 9, \"latency_us\": 900, "
                                "\"total_gb_s\": 20}]"));
    return ah_test_finish();
}
