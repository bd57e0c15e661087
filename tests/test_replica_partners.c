/* Who holds whom (plan/ckpt_traffic.h ah_ckpt_partners, the rule of the runtime's replicas, the host
 * memory check, the cost model and the simulator):
 * - a plan ordered zone by zone (18 nodes of zone a, then 18 of b, as examples/sim/paper-288.json):
 *   every holder in the other zone and no holder with more than one source (the rule before sent
 *   all 18 of a zone to the other zone's first node), the pairs in at most 3 rounds;
 * - three uneven zones, interleaved in node order: the same;
 * - a zone with more than half the nodes (6 + 2): its sources spread over the 2 others, 3 each
 *   (ceil(6 / 2)), theirs to two distinct nodes of it;
 * - one zone (or zones NULL): the next used node; unused nodes -1 and skipped; one node: none;
 * - 2000 random maps of up to 12 nodes in up to 4 zones: every used node's holder used, another node,
 *   in another zone when there are several, and no holder over the fewest the zones allow. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "plan/ckpt_traffic.h"

#define MAX_NODES 40

/* The most sources one node holds; -1 when a partner breaks the domain rule (itself, unused, in its
 * own zone while the used nodes span several) or an unused node, or the only used one, has one. */
static int max_load(int n, const int *leader, const char *const *zones, const int *partner) {
    int load[MAX_NODES] = {0}, most = 0, used = 0;
    bool several = false;
    for (int y = 0; y < n; y++) {
        used += leader[y] >= 0;
        for (int q = 0; q < n; q++)
            if (leader[y] >= 0 && leader[q] >= 0 && zones && strcmp(zones[y], zones[q]) != 0) several = true;
    }
    for (int y = 0; y < n; y++) {
        const int h = partner[y];
        if (leader[y] < 0 || used < 2) {
            if (h != -1) return -1;
            continue;
        }
        if (h < 0 || h >= n || h == y || leader[h] < 0) return -1;
        if (several && strcmp(zones[y], zones[h]) == 0) return -1;
        if (++load[h] > most) most = load[h];
    }
    return most;
}

static int rounds_of(int n, const int *partner) {
    ah_ckpt_pair_t pairs[MAX_NODES];
    int k = 0;
    for (int y = 0; y < n; y++)
        if (partner[y] >= 0) pairs[k++] = (ah_ckpt_pair_t){.from = y, .to = partner[y], .bytes = 1e9};
    return ah_ckpt_pairs_in_rounds(pairs, k);
}

static void test_zone_ordered(void) {
    const char *zones[36];
    int leader[36], partner[36];
    for (int y = 0; y < 36; y++) {
        zones[y] = y < 18 ? "a" : "b";
        leader[y] = 0;
    }
    CHECK(ah_ckpt_partners(36, leader, zones, partner), "partners");
    CHECK_EQ_I64(max_load(36, leader, zones, partner), 1);
    CHECK_EQ_I64(partner[0], 18); /* the i-th of a to the i-th of b, and back */
    CHECK_EQ_I64(partner[5], 23);
    CHECK_EQ_I64(partner[23], 5);
    const int r = rounds_of(36, partner);
    CHECK(r >= 2 && r <= 3, "zone-ordered: %d rounds", r);
    leader[3] = leader[30] = -1; /* two nodes unused: 17 + 17 */
    CHECK(ah_ckpt_partners(36, leader, zones, partner), "partners");
    CHECK_EQ_I64(max_load(36, leader, zones, partner), 1);
    CHECK(partner[3] == -1 && partner[30] == -1, "unused: %d %d", partner[3], partner[30]);
}

static void test_three_zones(void) {
    const char *zones[8] = {"a", "b", "a", "c", "b", "a", "c", "b"}; /* a: 0 2 5, b: 1 4 7, c: 3 6 */
    const int leader[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int partner[8];
    CHECK(ah_ckpt_partners(8, leader, zones, partner), "partners");
    CHECK_EQ_I64(max_load(8, leader, zones, partner), 1);
    const int r = rounds_of(8, partner);
    CHECK(r >= 2 && r <= 3, "three zones: %d rounds", r);
}

static void test_dominant_zone(void) {
    const char *zones[8] = {"a", "a", "a", "b", "a", "a", "b", "a"}; /* a: 0 1 2 4 5 7, b: 3 6 */
    const int leader[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int partner[8];
    CHECK(ah_ckpt_partners(8, leader, zones, partner), "partners");
    CHECK_EQ_I64(max_load(8, leader, zones, partner), 3);
    CHECK(partner[0] == 3 && partner[1] == 6 && partner[2] == 3 && partner[7] == 6, "a's spread over b: %d %d %d %d",
          partner[0], partner[1], partner[2], partner[7]);
    CHECK(partner[3] == 0 && partner[6] == 1, "b's to a's first two: %d %d", partner[3], partner[6]);
}

static void test_one_zone_one_node(void) {
    const int leader[5] = {0, -1, 0, 0, -1};
    int partner[5];
    CHECK(ah_ckpt_partners(5, leader, NULL, partner), "partners");
    CHECK(partner[0] == 2 && partner[2] == 3 && partner[3] == 0, "next used node: %d %d %d", partner[0], partner[2],
          partner[3]);
    CHECK(partner[1] == -1 && partner[4] == -1, "unused: %d %d", partner[1], partner[4]);
    const char *same[5] = {"z", "z", "z", "z", "z"};
    int again[5];
    CHECK(ah_ckpt_partners(5, leader, same, again), "partners");
    CHECK(memcmp(partner, again, sizeof again) == 0, "one named zone = no zones");
    const int lone[3] = {-1, 0, -1};
    CHECK(ah_ckpt_partners(3, lone, NULL, partner), "partners");
    CHECK(partner[0] == -1 && partner[1] == -1 && partner[2] == -1, "one node: none (%d)", partner[1]);
}

static void test_random(void) {
    static const char *names[4] = {"a", "b", "c", "d"};
    unsigned seed = 12345;
    int bad = 0;
    for (int t = 0; t < 2000; t++) {
        seed = seed * 1103515245u + 12345u;
        const int n = 1 + (int)(seed >> 16) % 12, nz = 1 + (int)(seed >> 8) % 4;
        const char *zones[MAX_NODES];
        int leader[MAX_NODES], partner[MAX_NODES], size[4] = {0}, m = 0, largest = 0;
        for (int y = 0; y < n; y++) {
            seed = seed * 1103515245u + 12345u;
            const int z = (int)(seed >> 16) % nz;
            zones[y] = names[z];
            leader[y] = (seed >> 4) % 5 == 0 ? -1 : 0;
            if (leader[y] >= 0) size[z]++, m++;
        }
        for (int z = 0; z < 4; z++)
            if (size[z] > largest) largest = size[z];
        const int rest = m - largest;
        const int fewest = m < 2 ? 0 : rest == 0 || largest <= rest ? 1 : (largest + rest - 1) / rest;
        const bool ok = ah_ckpt_partners(n, leader, zones, partner);
        const int most = max_load(n, leader, zones, partner);
        if (!ok || most != fewest) {
            if (bad++ < 5) CHECK(false, "random map %d (%d nodes, %d used): most %d, fewest %d", t, n, m, most, fewest);
        }
    }
    CHECK_EQ_I64(bad, 0);
}

int main(void) {
    test_zone_ordered();
    test_three_zones();
    test_dominant_zone();
    test_one_zone_one_node();
    test_random();
    return ah_test_finish();
}
