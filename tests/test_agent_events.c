/* The agent's event files (src/elastic/events.c) on the built-in cpu-hetero (fast-0, and the spot
 * nodes slow-0, slow-1): node names resolve as they are; trace ids ("node" then digits) map onto
 * the spot nodes in natural order; any other name is refused, named with the cluster's nodes,
 * never taken for a trace id because it ends in digits (issue 19, item 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elastic/agent.h"
#include "harness.h"

static char dir[] = "/tmp/ah-events-XXXXXX";

/* Loads `text` as an event file on c; AH_OK or the error in *err. */
static ah_status_t load(const ah_cluster_t *c, const char *text, ah_agent_events_t *ev, ah_error_t *err) {
    char path[600];
    snprintf(path, sizeof path, "%s/e.csv", dir);
    FILE *f = fopen(path, "w");
    if (!f) return ah_error_set(err, AH_ERR_IO, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    return ah_agent_events_load(path, c, ev, err);
}

static void test_typos_refused(const ah_cluster_t *c) {
    /* each ends in digits, as a trace id does, and none is a node of the cluster */
    const char *typos[] = {"fast-3", "slow-9", "gpu7", "node", "node-1", "nodes2", "Node1", "node12a"};
    for (size_t i = 0; i < sizeof typos / sizeof typos[0]; i++) {
        char text[64], want[96];
        snprintf(text, sizeof text, "0,remove,%s\n", typos[i]);
        snprintf(want, sizeof want, "node id \"%s\" is neither a node of the cluster nor nodeN", typos[i]);
        ah_agent_events_t ev;
        ah_error_t err = {0};
        CHECK_ERR(load(c, text, &ev, &err), AH_ERR_INVALID, err, want);
        CHECK(strstr(err.msg, "e.csv") && strstr(err.msg, "fast-0, slow-0, slow-1"),
              "%s: names the file and the cluster's nodes: %s", typos[i], err.msg);
    }
}

static void test_names_and_ids(const ah_cluster_t *c) {
    ah_agent_events_t ev;
    ah_error_t err;
    CHECK(load(c, "0,remove,slow-1\n10,add,slow-1\n", &ev, &err) == AH_OK, "names: %s", err.msg);
    CHECK(ev.n == 2 && ev.ev[0].node == ah_cluster_find_node(c, "slow-1") && !ev.ev[0].add && ev.ev[1].add,
          "names resolve as they are");
    CHECK(ev.mapping[0] == 0, "no mapping for names: %s", ev.mapping);
    ah_agent_events_free(&ev);
    /* natural order of the number: node2 before node10; node30 finds no spot node left */
    CHECK(load(c, "0,remove,node10\n5,remove,node2\n9,remove,node30\n", &ev, &err) == AH_OK, "ids: %s", err.msg);
    CHECK(strcmp(ev.mapping, "node2 -> slow-0, node10 -> slow-1, node30 -> (no spot node left)") == 0, "mapping: %s",
          ev.mapping);
    CHECK(ev.n == 2 && ev.ignored == 1, "%d events, %d ignored", ev.n, ev.ignored);
    ah_agent_events_free(&ev);
}

int main(void) {
    if (!mkdtemp(dir)) {
        CHECK(false, "mkdtemp");
        return ah_test_finish();
    }
    ah_cluster_t c;
    ah_error_t err;
    if (ah_cluster_open("cpu-hetero", &c, &err) != AH_OK) {
        CHECK(false, "cpu-hetero: %s", err.msg);
        return ah_test_finish();
    }
    test_typos_refused(&c);
    test_names_and_ids(&c);
    ah_cluster_free(&c);
    char path[600];
    snprintf(path, sizeof path, "%s/e.csv", dir);
    unlink(path);
    rmdir(dir);
    return ah_test_finish();
}
