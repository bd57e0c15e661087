/* The in-place reconfiguration's request file (runtime/reconfig.h ah_reconfig_parse): a good request's
 * fields, and each malformed one refused naming what is wrong; its "ranks" checked against a world
 * (ah_reconfig_bad_ranks): a renumbering that fits, and each that does not refused, named. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "runtime/reconfig.h"

static void refused(const char *text, const char *needle) {
    static ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK_ERR(ah_reconfig_parse(text, &r, &err), AH_ERR_INVALID, err, needle);
}

/* "ranks" of text (a request) against a world whose rank r is in job jobs[r]: NULL when it fits, else
 * whether the refusal holds needle. */
static void ranks_check(const char *text, const int64_t *jobs, int n, int stay, const char *needle) {
    static ah_reconfig_req_t r; /* 32 KiB of ranks */
    ah_error_t err = {0};
    char why[256] = "";
    CHECK(ah_reconfig_parse(text, &r, &err) == AH_OK, "%s: %s", text, err.msg);
    const bool bad = ah_reconfig_bad_ranks(&r, jobs, n, stay, why, sizeof why);
    CHECK(bad == (needle != NULL), "%s: %s", text, bad ? why : "accepted");
    CHECK(!needle || strstr(why, needle), "%s: \"%s\" lacks \"%s\"", text, why, needle);
}

static void ranks(void) {
    static ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [1], \"plan\": \"p\", \"ranks\": [1, -1, 0]}", &r, &err) == AH_OK,
          "%s", err.msg);
    CHECK(r.n_ranks == 3 && r.ranks[0] == 1 && r.ranks[1] == -1 && r.ranks[2] == 0, "ranks %d: %d %d %d", r.n_ranks,
          r.ranks[0], r.ranks[1], r.ranks[2]);
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [1], \"plan\": \"p\"}", &r, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(r.n_ranks, 0);
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"ranks\": []}", "\"ranks\" must be an array of 1 to");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"ranks\": 1}", "\"ranks\" must be an array of 1 to");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"ranks\": [0, -2]}", "\"ranks\"[1] is not a rank");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"ranks\": [0, 1.0]}", "\"ranks\"[1] is not a rank");
    /* a world of 5 ranks: job 0 holds ranks 0 and 3, job 1 rank 1, job 2 ranks 2 and 4; job 1 leaves */
    const int64_t jobs[] = {0, 1, 2, 0, 2};
    const char *head = "{\"step\": 3, \"leave\": [1], \"plan\": \"p\"";
    char text[256];
#define RANKS(list) (snprintf(text, sizeof text, "%s, \"ranks\": [%s]}", head, list), text)
    ranks_check(RANKS("3, -1, 0, 2, 1"), jobs, 5, 4, NULL);
    ranks_check(RANKS("0, -1, 1, 2, 3"), jobs, 5, 4, NULL);
    ranks_check("{\"step\": 3, \"leave\": [1], \"plan\": \"p\"}", jobs, 5, 4, NULL);
    ranks_check(RANKS("3, -1, 0, 2"), jobs, 5, 4, "\"ranks\" has 4 entries, the world 5 ranks");
    ranks_check(RANKS("3, 1, 0, 2, -1"), jobs, 5, 4, "\"ranks\"[1] is 1 but rank 1's job 1 leaves (-1)");
    /* rank 3 parks (-1, its job 0 stays): the other 3 go on as 0..2; 3 of them would not be a permutation */
    ranks_check(RANKS("2, -1, 0, -1, 1"), jobs, 5, 3, NULL);
    ranks_check(RANKS("3, -1, 0, -1, 1"), jobs, 5, 3, "\"ranks\"[0] is 3: the staying ranks' are not a permutation");
    ranks_check(RANKS("3, -1, 0, 3, 1"), jobs, 5, 4, "\"ranks\"[3] is 3: the staying ranks' are not a permutation of 0..3");
    ranks_check(RANKS("4, -1, 0, 2, 1"), jobs, 5, 4, "\"ranks\"[0] is 4: the staying ranks' are not a permutation");
    /* "join": the staying ranks' entries distinct ranks of the bigger new world, the new jobs' the others */
    head = "{\"step\": 3, \"leave\": [1], \"join\": 2, \"plan\": \"p\"";
    ranks_check(RANKS("5, -1, 0, 2, 1"), jobs, 5, 4, NULL);
    ranks_check(RANKS("5, -1, 0, 5, 1"), jobs, 5, 4, "\"ranks\"[3] is 5: the staying ranks' are not distinct");
    ranks_check(RANKS("5, 2, 0, 3, 1"), jobs, 5, 4, "\"ranks\"[1] is 2 but rank 1's job 1 leaves (-1)");
    /* "readmit": the staying ranks' entries with the re-admitted ranks' "to" a permutation of 0..stay+n-1 */
    head = "{\"step\": 3, \"leave\": [1], \"plan\": \"p\", \"readmit\": [{\"job\": 2, \"rank\": 1, \"to\": 1}]";
    ranks_check(RANKS("4, -1, 0, 2, 3"), jobs, 5, 4, NULL);
    ranks_check(RANKS("4, -1, 0, 2, 1"), jobs, 5, 4, "\"readmit\"[0]'s \"to\" is 1: with the staying ranks' not a "
                "permutation of 0..4");
    ranks_check(RANKS("5, -1, 0, 2, 3"), jobs, 5, 4, "\"ranks\"[0] is 5: the staying ranks' are not a permutation of 0..4");
    head = "{\"step\": 3, \"leave\": [1], \"join\": 1, \"plan\": \"p\", \"readmit\": [{\"job\": 2, \"rank\": 1, \"to\": 5}]";
    ranks_check(RANKS("4, -1, 0, 2, 3"), jobs, 5, 4, NULL);
    ranks_check(RANKS("5, -1, 0, 2, 3"), jobs, 5, 4, "\"readmit\"[0]'s \"to\" is 5: not distinct from the staying");
#undef RANKS
}

/* "readmit" against the same world (ah_reconfig_bad_readmit): job 0 has 3 ranks in its own mpirun, its rank 2
 * parked; job 2 has 2, both in the world. The parked rank is woken by a rank of its job in the new world: a request
 * that parks every rank job 0 has there is refused (before, taken: the re-admission found no rank to wake it and
 * ended the run). */
static void readmit_world(void) {
    static ah_reconfig_req_t r;
    const int64_t jobs[] = {0, 1, 2, 0, 2}, at[] = {3 << 20 | 0, 1 << 20 | 0, 2 << 20 | 0, 3 << 20 | 1, 2 << 20 | 1};
    const char *req[] = {
        "\"ranks\": [2, -1, 0, -1, 1], \"readmit\": [{\"job\": 0, \"rank\": 2, \"to\": 3}]", NULL,
        "\"ranks\": [-1, -1, 0, -1, 1], \"readmit\": [{\"job\": 0, \"rank\": 2, \"to\": 2}]",
        "job 0's rank 2): its job keeps no rank in the world to wake it",
        "\"ranks\": [2, -1, 0, -1, 1], \"readmit\": [{\"job\": 0, \"rank\": 1, \"to\": 3}]",
        "job 0's rank 1): it is in the world, not parked",
        "\"ranks\": [2, -1, 0, -1, 1], \"readmit\": [{\"job\": 1, \"rank\": 1, \"to\": 3}]", "its job leaves",
    };
    for (size_t i = 0; i < sizeof req / sizeof *req; i += 2) {
        char text[300], why[256] = "";
        ah_error_t err = {0};
        snprintf(text, sizeof text, "{\"step\": 3, \"leave\": [1], \"plan\": \"p\", %s}", req[i]);
        CHECK(ah_reconfig_parse(text, &r, &err) == AH_OK, "%s: %s", text, err.msg);
        const bool bad = ah_reconfig_bad_readmit(&r, jobs, at, 5, why, sizeof why);
        CHECK(bad == (req[i + 1] != NULL), "%s: %s", text, bad ? why : "accepted");
        CHECK(!req[i + 1] || strstr(why, req[i + 1]), "%s: \"%s\" lacks \"%s\"", text, why, req[i + 1] ? req[i + 1] : "");
    }
}

/* "readmit"'s parsing: its entries (with "join" too), and each malformed one (or one without "ranks") refused. */
static void readmit(void) {
    static ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK(ah_reconfig_parse("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"ranks\": [0, 1], \"readmit\": [{\"job\": 0, "
                            "\"rank\": 1, \"to\": 2}]}", &r, &err) == AH_OK, "%s", err.msg);
    CHECK(r.n_readmit == 1 && r.readmit[0].job == 0 && r.readmit[0].rank == 1 && r.readmit[0].to == 2 &&
          ah_reconfig_incoming(&r) == 1, "readmit %d: %d %d %d", r.n_readmit, r.readmit[0].job, r.readmit[0].rank,
          r.readmit[0].to);
    refused("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"readmit\": [{\"job\": 0, \"rank\": 1, \"to\": 2}]}",
            "\"readmit\" needs \"ranks\"");
    CHECK(ah_reconfig_parse("{\"step\": 6, \"leave\": [], \"join\": 1, \"plan\": \"p\", \"ranks\": [0], \"readmit\": "
                            "[{\"job\": 0, \"rank\": 1, \"to\": 2}]}", &r, &err) == AH_OK && ah_reconfig_incoming(&r) == 2,
          "%s", err.msg);
    refused("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"ranks\": [0], \"readmit\": []}", "\"readmit\" must be an array");
    refused("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"ranks\": [0], \"readmit\": [{\"job\": 0, \"rank\": -1, "
            "\"to\": 1}]}", "\"readmit\"[0] must be");
    refused("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"ranks\": [0], \"readmit\": [{\"job\": 0, \"to\": 1}]}",
            "\"readmit\"[0] must be");
    refused("{\"step\": 6, \"leave\": [], \"plan\": \"p\", \"ranks\": [0], \"readmit\": [{\"job\": 0, \"rank\": 1, "
            "\"to\": 1, \"x\": 0}]}", "\"readmit\"[0] must be");
}

int main(void) {
    static ah_reconfig_req_t r;
    ah_error_t err = {0};
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [2, 0], \"plan\": \"/x/dp2.json\"}", &r, &err) == AH_OK, "%s",
          err.msg);
    CHECK_EQ_I64(r.step, 3);
    CHECK_EQ_I64(r.n_leave, 2);
    CHECK(r.leave[0] == 2 && r.leave[1] == 0, "leave %d %d", r.leave[0], r.leave[1]);
    CHECK(!strcmp(r.plan, "/x/dp2.json"), "plan %s", r.plan);
    CHECK(ah_reconfig_parse("{\"step\": 1, \"leave\": [], \"plan\": \"p.json\"}", &r, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(r.n_leave, 0);
    refused("{\"step\": 3, \"leave\": [2]", "not a JSON object");
    refused("[1]", "not a JSON object");
    refused("{\"step\": 0, \"leave\": [], \"plan\": \"p\"}", "\"step\" must be an integer >= 1");
    refused("{\"step\": \"3\", \"leave\": [], \"plan\": \"p\"}", "\"step\" must be an integer >= 1");
    refused("{\"step\": 3, \"plan\": \"p\"}", "\"leave\" must be an array");
    refused("{\"step\": 3, \"leave\": [-1], \"plan\": \"p\"}", "\"leave\"[0] is not a job number");
    refused("{\"step\": 3, \"leave\": [1, \"a\"], \"plan\": \"p\"}", "\"leave\"[1] is not a job number");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"\"}", "\"plan\" must be a plan file's path");
    refused("{\"step\": 3, \"leave\": [], \"plan\": \"p\", \"at\": 1}", "unknown key \"at\"");
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [], \"join\": 2, \"plan\": \"p\"}", &r, &err) == AH_OK, "%s",
          err.msg);
    CHECK_EQ_I64(r.join, 2);
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [], \"plan\": \"p\"}", &r, &err) == AH_OK, "%s", err.msg);
    CHECK_EQ_I64(r.join, 0);
    refused("{\"step\": 3, \"leave\": [], \"join\": -1, \"plan\": \"p\"}", "\"join\" must be the number of new jobs");
    refused("{\"step\": 3, \"leave\": [], \"join\": \"1\", \"plan\": \"p\"}", "\"join\" must be the number of new");
    refused("{\"step\": 3, \"leave\": [], \"join\": 65, \"plan\": \"p\"}", "\"join\" must be the number of new");
    /* "join_admit_s": the admission's wait the agent counts, carried to the running world */
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [], \"join\": 1, \"join_admit_s\": 2.5, \"plan\": \"p\"}", &r,
                            &err) == AH_OK, "%s", err.msg);
    CHECK(r.join == 1 && r.join_admit_s == 2.5, "join %d, join_admit_s %g", r.join, r.join_admit_s);
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [], \"join\": 1, \"plan\": \"p\"}", &r, &err) == AH_OK &&
          r.join_admit_s == 0, "%s", err.msg);
    refused("{\"step\": 3, \"leave\": [], \"join\": 1, \"join_admit_s\": 0, \"plan\": \"p\"}", "\"join_admit_s\" must be");
    CHECK(ah_reconfig_parse("{\"step\": 3, \"leave\": [], \"join\": 1, \"join_first\": 3, \"plan\": \"p\"}", &r,
                            &err) == AH_OK && r.join_first == 3, "%s", err.msg); /* a withdrawn join took job 2 */
    refused("{\"step\": 3, \"leave\": [], \"join\": 1, \"join_first\": -1, \"plan\": \"p\"}", "\"join_first\" must");
    refused("{\"step\": 3, \"leave\": [], \"join\": 1, \"join_admit_s\": \"9\", \"plan\": \"p\"}", "\"join_admit_s\" must");
    ranks();
    readmit();
    readmit_world();
    return ah_test_finish();
}
