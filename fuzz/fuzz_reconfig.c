/* libFuzzer harness: an in-place reconfiguration's request, RUN_DIR/reconfigure.json as the trainer's
 * rank 0 reads it (runtime/reconfig.h ah_reconfig_parse).
 *
 * Input: the bytes of the file (up to the first NUL, as the reader's text). Beyond "no crash, no leak,
 * no undefined behaviour" it checks: a refusal is AH_ERR_INVALID with a message; an accepted request has
 * a step >= 1, at most AH_RECONFIG_LEAVE_MAX leaving jobs each >= 0, and a non-empty plan path; "readmit" entries
 * (job, rank, to) in range, and only with "ranks".
 * Seeds: tests/corpus/reconfig/. Run: scripts/run-fuzzers.sh reconfig.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/reconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what) {
    fprintf(stderr, "fuzz_reconfig: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    static ah_reconfig_req_t r; /* 32 KiB of ranks */
    ah_error_t err = {0};
    const ah_status_t st = ah_reconfig_parse(text, &r, &err);
    free(text);
    if (st != AH_OK) {
        if (st != AH_ERR_INVALID || !err.msg[0]) fail("a refusal that is not AH_ERR_INVALID with a message");
        return 0;
    }
    if (r.step < 1) fail("an accepted step < 1");
    if (r.n_leave < 0 || r.n_leave > AH_RECONFIG_LEAVE_MAX) fail("an accepted leave count out of range");
    for (int k = 0; k < r.n_leave; k++)
        if (r.leave[k] < 0) fail("an accepted negative job");
    if (!r.plan[0] || !memchr(r.plan, 0, sizeof r.plan)) fail("an accepted plan path empty or unterminated");
    if (r.n_ranks < 0 || r.n_ranks > AH_RECONFIG_RANKS_MAX) fail("an accepted ranks count out of range");
    for (int k = 0; k < r.n_ranks; k++)
        if (r.ranks[k] < -1 || r.ranks[k] >= AH_RECONFIG_RANKS_MAX) fail("an accepted rank out of range");
    if (r.join < 0 || r.join > AH_RECONFIG_LEAVE_MAX) fail("an accepted join count out of range");
    if (r.n_readmit < 0 || r.n_readmit > AH_RECONFIG_LEAVE_MAX) fail("an accepted readmit count out of range");
    if (r.n_readmit && !r.n_ranks) fail("an accepted readmit without ranks");
    for (int k = 0; k < r.n_readmit; k++)
        if (r.readmit[k].job < 0 || r.readmit[k].rank < 0 || r.readmit[k].to < 0 ||
            r.readmit[k].to >= AH_RECONFIG_RANKS_MAX)
            fail("an accepted readmit entry out of range");
    return 0;
}
